package push

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/push/egress"
)

// batch is what one call carries: the acquisitions' records, in acquisition order.
type batch struct {
	parts []broker.ShareRecordsPartition
	// lockedUntil is, on this node's clock, when the first of the records' locks
	// may pass: each acquisition's start plus its lock duration (the deadlines
	// themselves are on the catalog's clock).
	lockedUntil time.Time
	lock        time.Duration // the shortest lock duration
}

// add adds an acquisition's records, which was asked for at start.
func (b *batch) add(start time.Time, res broker.ShareRecordsResult) {
	n := 0
	for _, p := range res.Partitions {
		if len(p.Records) > 0 {
			b.parts = append(b.parts, p)
			n++
		}
	}
	if n == 0 || res.LockDuration <= 0 {
		return
	}
	if until := start.Add(res.LockDuration); b.lockedUntil.IsZero() || until.Before(b.lockedUntil) {
		b.lockedUntil = until
	}
	if b.lock == 0 || res.LockDuration < b.lock {
		b.lock = res.LockDuration
	}
}

// lockMargin is what a call leaves of its records' lock for the acknowledgement to
// land: a tenth of the lock, at most a second.
func lockMargin(lock time.Duration) time.Duration { return min(lock/10, time.Second) }

func (b *batch) len() int {
	n := 0
	for _, p := range b.parts {
		n += len(p.Records)
	}
	return n
}

func (b *batch) empty() bool { return b.len() == 0 }

// body renders the call's body and its idempotency key: a digest of every record's
// topic, partition, offset and delivery count, so a call repeated for the same
// deliveries carries the same key.
func (b *batch) body() (body []byte, key string) {
	var scratch bytes.Buffer
	h := sha256.New()
	body = append(body, `{"records":[`...)
	first := true
	for _, p := range b.parts {
		for i := range p.Records {
			rec := &p.Records[i]
			if !first {
				body = append(body, ',')
			}
			first = false
			body = api.AppendPushRecord(body, p.Topic, p.Partition, &rec.DecodedRecord, p.Config, rec.DeliveryCount, &scratch)
			fmt.Fprintf(h, "%s/%d/%d/%d\n", p.Topic, p.Partition, rec.Offset, rec.DeliveryCount)
		}
	}
	body = append(body, "]}"...)
	return body, hex.EncodeToString(h.Sum(nil)[:16])
}

// Sign answers the Strata-Signature header of a call made at t with body under
// secret: "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">".
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// answer is a target's answer to a call: a status (0: none came — err says why),
// the body read (bounded), and Retry-After.
type answer struct {
	status     int
	body       []byte
	retryAfter time.Duration
	err        error
	// funcErr: a Lambda function's own error (it ran and failed).
	funcErr string
}

// targets makes calls: webhooks over the egress policy's client, Lambda functions
// through the invoker.
type targets struct {
	client *http.Client
	lambda Invoker
}

func newTargets(p *egress.Policy, lambda Invoker) *targets {
	return &targets{client: p.Client(), lambda: lambda}
}

// call calls s's target with body, for at most s.Timeout and never past until (the
// records' lock, less the margin for the acknowledgement; zero: no bound).
func (t *targets) call(ctx context.Context, s catalog.PushSubscription, body []byte, key string, until time.Time) answer {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	if !until.IsZero() {
		var cancelLock context.CancelFunc
		ctx, cancelLock = context.WithDeadline(ctx, until)
		defer cancelLock()
	}
	if s.LambdaARN != "" {
		if t.lambda == nil {
			return answer{status: http.StatusNotFound, body: []byte("this node has no AWS Lambda client")}
		}
		status, out, fe, err := t.lambda.Invoke(ctx, s.LambdaARN, body)
		if len(out) > egress.MaxAnswer {
			out = out[:egress.MaxAnswer]
		}
		return answer{status: status, body: out, err: err, funcErr: fe}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return answer{status: http.StatusNotFound, body: []byte(err.Error())}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "strata-push/1")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Strata-Signature", Sign(s.Secret, time.Now(), body))
	res, err := t.client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	a := answer{status: res.StatusCode, body: egress.ReadAnswer(res.Body)}
	if ra := res.Header.Get("Retry-After"); ra != "" {
		if n, err := strconv.Atoi(ra); err == nil && n >= 0 {
			a.retryAfter = time.Duration(n) * time.Second
		} else if at, err := http.ParseTime(ra); err == nil {
			a.retryAfter = time.Until(at)
		}
	}
	return a
}

// class is what an answer does to the records of a call.
type class string

const (
	classAccept   class = "accept"   // 2xx
	classReject   class = "reject"   // 400, 422
	classThrottle class = "throttle" // 408, 429, 503
	classPause    class = "pause"    // 401, 403, 404, 410
	classFail     class = "fail"     // other answers, no answer
)

func classify(a answer) class {
	switch {
	case a.err != nil || a.status == 0 || a.funcErr != "":
		return classFail
	case a.status >= 200 && a.status < 300:
		return classAccept
	case a.status == 400 || a.status == 422:
		return classReject
	case a.status == 408 || a.status == 429 || a.status == 503:
		return classThrottle
	case a.status == 401 || a.status == 403 || a.status == 404 || a.status == 410:
		return classPause
	}
	return classFail
}

// perRecord is a 2xx answer's optional body: results for records one by one (those
// not named are accepted).
type perRecord struct {
	Records []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		Result    string `json:"result"` // accept, reject, release
		// Reason, for a reject: why, written in the dead-letter copy's
		// __dlq.errors.http.body header.
		Reason string `json:"reason"`
	} `json:"records"`
}

// excerpt is an answer's body, short and printable, for errors.
func excerpt(b []byte) string {
	const n = 200
	if len(b) > n {
		b = b[:n]
	}
	s := strings.ToValidUTF8(string(b), "?")
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return strings.TrimSpace(s)
}

// call delivers b and acknowledges its records by the answer.
func (d *sub) call(ctx context.Context, member string, b *batch) {
	body, key := b.body()
	start := time.Now()
	// A call never outlives its records' lock (push_timeout_lock refuses settings
	// that would, but a subscription may predate the rule or race a config change):
	// one cut short is a timeout, released without using up a delivery, rather than
	// records handed to another member mid-call.
	var until time.Time
	if !b.lockedUntil.IsZero() {
		until = b.lockedUntil.Add(-lockMargin(b.lock))
	}
	a := d.r.targets.call(ctx, d.s, body, key, until)
	c := classify(a)
	d.r.m.calls.WithLabelValues(d.s.Group, string(c)).Inc()
	d.r.m.latency.WithLabelValues(d.s.Group).Observe(time.Since(start).Seconds())
	d.r.log.Debug("push: call", "group", d.s.Group, "records", b.len(), "class", c, "status", a.status, "err", a.err)
	why := ""
	switch {
	case a.err != nil:
		why = a.err.Error()
	case a.funcErr != "":
		why = fmt.Sprintf("function error %s: %s", a.funcErr, excerpt(a.body))
	default:
		why = fmt.Sprintf("HTTP %d: %s", a.status, excerpt(a.body))
	}
	requeue := true
	typ := "release"
	var rej *catalog.ShareRejection
	switch c {
	case classAccept:
		d.succeeded()
		d.ackEach(ctx, member, b, a.status, a.body)
		return
	case classReject:
		d.succeeded()
		typ, requeue = "reject", false
		r := catalog.ShareRejection{Status: a.status, Body: string(a.body)}.Bounded()
		rej = &r
	case classThrottle:
		d.throttled(a.retryAfter)
	case classPause:
		defer d.pause(ctx, why)
	case classFail:
		if ctx.Err() != nil && a.err != nil {
			why = "stopped: " + why // the delivery stopped mid-call: not the target's fault
		} else {
			defer d.failed(ctx, why)
		}
	}
	d.ackAll(ctx, member, b, typ, requeue, rej)
}

// ackAll acknowledges every record of b with typ (rejects with the answer rej).
func (d *sub) ackAll(ctx context.Context, member string, b *batch, typ string, requeue bool, rej *catalog.ShareRejection) {
	acks := make([]broker.ShareAcquisitionAck, 0, len(b.parts))
	for _, p := range b.parts {
		var rs []broker.ShareAckRange
		for _, rec := range p.Records {
			if n := len(rs); n > 0 && rs[n-1].Last+1 == rec.Offset {
				rs[n-1].Last = rec.Offset
				continue
			}
			rs = append(rs, broker.ShareAckRange{First: rec.Offset, Last: rec.Offset, Type: typ, Rejection: rej})
		}
		acks = append(acks, broker.ShareAcquisitionAck{AcquisitionID: p.AcquisitionID, Ranges: rs})
	}
	d.ack(ctx, member, acks, requeue, typ, b.len())
}

// ackEach acknowledges a 2xx answer's records: by its body's results where it names
// them (a reject with the answer's status and the record's reason), accepted
// otherwise.
func (d *sub) ackEach(ctx context.Context, member string, b *batch, status int, body []byte) {
	var pr perRecord
	if len(body) == 0 || json.Unmarshal(body, &pr) != nil || len(pr.Records) == 0 {
		d.ackAll(ctx, member, b, "accept", false, nil)
		return
	}
	type at struct {
		topic     string
		partition int32
		offset    int64
	}
	results := map[at]string{}
	reasons := map[at]*catalog.ShareRejection{}
	for _, r := range pr.Records {
		if r.Result == "reject" || r.Result == "release" || r.Result == "accept" {
			results[at{r.Topic, r.Partition, r.Offset}] = r.Result
		}
		if r.Result == "reject" {
			rej := catalog.ShareRejection{Status: status, Body: r.Reason}.Bounded()
			reasons[at{r.Topic, r.Partition, r.Offset}] = &rej
		}
	}
	// One acknowledgement per type: each call is all or nothing on its own.
	byType := map[string][]broker.ShareAcquisitionAck{}
	counts := map[string]int{}
	for _, p := range b.parts {
		ranges := map[string][]broker.ShareAckRange{}
		for _, rec := range p.Records {
			k := at{p.Topic, p.Partition, rec.Offset}
			typ := results[k]
			if typ == "" {
				typ = "accept"
			}
			counts[typ]++
			rs := ranges[typ]
			// A run of rejects merges only under the same answer.
			if n := len(rs); n > 0 && rs[n-1].Last+1 == rec.Offset && sameRejection(rs[n-1].Rejection, reasons[k]) {
				rs[n-1].Last = rec.Offset
			} else {
				rs = append(rs, broker.ShareAckRange{First: rec.Offset, Last: rec.Offset, Type: typ, Rejection: reasons[k]})
			}
			ranges[typ] = rs
		}
		for typ, rs := range ranges {
			byType[typ] = append(byType[typ], broker.ShareAcquisitionAck{AcquisitionID: p.AcquisitionID, Ranges: rs})
		}
	}
	for typ, acks := range byType {
		d.ack(ctx, member, acks, false, typ, counts[typ])
	}
}

func sameRejection(a, b *catalog.ShareRejection) bool {
	return a == b || a != nil && b != nil && *a == *b
}

func (d *sub) ack(ctx context.Context, member string, acks []broker.ShareAcquisitionAck, requeue bool, typ string, n int) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.r.core.PushAckAcquisitions(actx, d.who, d.s.Group, member, acks, requeue); err != nil {
		// The locks passed (a call longer than the group's lock duration) or the
		// records were taken back: they come again, counted, as any lock expiry's.
		d.r.m.ackErrors.WithLabelValues(d.s.Group).Inc()
		d.r.log.Warn("push: acknowledge", "group", d.s.Group, "type", typ, "records", n, "err", err)
		return
	}
	if requeue {
		typ = "requeue"
	}
	d.r.m.records.WithLabelValues(d.s.Group, typ).Add(float64(n))
}
