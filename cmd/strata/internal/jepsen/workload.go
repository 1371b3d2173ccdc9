package jepsen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/ctxwait"
)

// WorkloadConfig says what the workload runs. Zero values take the defaults shown.
type WorkloadConfig struct {
	Topic      string // default "jepsen"
	Partitions int32  // default 4
	// Producers and IdempotentProducers are the plain and idempotent producers
	// (defaults 3 and 2). A plain producer never resends: an unknown outcome stays
	// unknown. An idempotent one resends an unknown request byte for byte until it is
	// answered.
	Producers, IdempotentProducers int
	// Consumers read every partition by assignment. Default 1.
	Consumers int
	// Rereaders read old data over and over: a random partition from a random offset
	// below its high watermark, a few polls at a time, so reads race compaction and
	// deletion. Default 0.
	Rereaders int
	// GroupMembers are members of the consumer group Group ("jepsen-group"). Default 2;
	// negative: none.
	GroupMembers int
	Group        string
	// SessionTimeout is the group members' session. Default 6s.
	SessionTimeout time.Duration
	// Interval is each producer's pause between requests. Default 20ms.
	Interval time.Duration
	// MaxRecords is the most records one request carries (1..MaxRecords, to random
	// partitions). Default 4.
	MaxRecords int
	// RequestTimeout bounds one HTTP call. Default 20s: longer than a writer takes to
	// settle an unknown commit, so most timeouts are real faults.
	RequestTimeout time.Duration
	// ResolveTimeout bounds how long, after the run, idempotent producers keep
	// resending unanswered requests. Default 60s.
	ResolveTimeout time.Duration
	// FinalTimeout bounds the final catch-up read of each partition. Default 3m.
	FinalTimeout time.Duration
	// Kafka adds franz-go clients (kafka.go) when its Seeds are set.
	Kafka KafkaConfig
	// Share is the share-group workload (share.go).
	Share ShareConfig
	Log   *slog.Logger
}

func (c WorkloadConfig) withDefaults() WorkloadConfig {
	if c.Topic == "" {
		c.Topic = "jepsen"
	}
	c.Share = c.Share.withDefaults()
	if c.Partitions <= 0 {
		c.Partitions = 4
	}
	if c.Producers == 0 && c.IdempotentProducers == 0 {
		c.Producers, c.IdempotentProducers = 3, 2
	}
	if c.Consumers == 0 {
		c.Consumers = 1
	}
	if c.GroupMembers == 0 {
		c.GroupMembers = 2
	}
	if c.Group == "" {
		c.Group = "jepsen-group"
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 6 * time.Second
	}
	if c.Interval <= 0 {
		c.Interval = 20 * time.Millisecond
	}
	if c.MaxRecords <= 0 {
		c.MaxRecords = 4
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 20 * time.Second
	}
	if c.ResolveTimeout <= 0 {
		c.ResolveTimeout = time.Minute
	}
	if c.FinalTimeout <= 0 {
		c.FinalTimeout = 3 * time.Minute
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	c.Kafka = c.Kafka.withDefaults()
	return c
}

// Workload runs the producers and consumers against nodes behind a Balancer and
// records everything in its History.
type Workload struct {
	cfg  WorkloadConfig
	bal  *Balancer
	hc   *http.Client
	cli  *client.Client
	hist *History

	cancel  context.CancelFunc
	resolve context.Context // idempotent producers' deadline for unanswered requests
	wg      sync.WaitGroup
	groupWG sync.WaitGroup
	stopGrp context.CancelFunc
}

// NewWorkload returns a workload over bal; Setup creates its topic.
func NewWorkload(bal *Balancer, cfg WorkloadConfig) *Workload {
	cfg = cfg.withDefaults()
	hc := bal.HTTPClient(cfg.RequestTimeout)
	w := &Workload{
		cfg: cfg, bal: bal, hc: hc,
		cli:  client.New(BalancedURL, client.WithHTTPClient(hc)),
		hist: NewHistory(cfg.Topic, cfg.Partitions),
	}
	if cfg.Kafka.txnConfigured() {
		w.hist.TxnTopic, w.hist.TxnGroup = cfg.Kafka.TxnTopic, cfg.Kafka.TxnGroup
	}
	return w
}

// History returns the workload's history.
func (w *Workload) History() *History { return w.hist }

// Setup creates the topic (string values), retrying while the nodes come up.
func (w *Workload) Setup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		_, err := w.cli.CreateTopic(ctx, w.cfg.Topic, w.cfg.Partitions, map[string]string{"value.format": "string"})
		if err == nil || client.HasCode(err, "topic_exists") {
			return errors.Join(w.setupTxn(ctx), w.setupShare(ctx))
		}
		if ctxwait.Sleep(ctx, 200*time.Millisecond) != nil {
			return fmt.Errorf("jepsen: create topic %s: %w", w.cfg.Topic, err)
		}
	}
}

// Start starts every producer and consumer; they run until Stop.
func (w *Workload) Start(ctx context.Context) {
	ctx, w.cancel = context.WithCancel(ctx)
	var cancelResolve context.CancelFunc
	w.resolve, cancelResolve = context.WithCancel(context.WithoutCancel(ctx))
	go func() { <-ctx.Done(); time.AfterFunc(w.cfg.ResolveTimeout, cancelResolve) }()
	for i := range w.cfg.Producers {
		w.goRun(func() { w.produce(ctx, fmt.Sprintf("p%d", i), false) })
	}
	for i := range w.cfg.IdempotentProducers {
		w.goRun(func() { w.produce(ctx, fmt.Sprintf("i%d", i), true) })
	}
	for i := range w.cfg.Consumers {
		for p := range w.cfg.Partitions {
			w.goRun(func() { w.consume(ctx, fmt.Sprintf("c%d", i), p) })
		}
	}
	for i := range w.cfg.Rereaders {
		w.goRun(func() { w.reread(ctx, fmt.Sprintf("r%d", i)) })
	}
	if len(w.groups()) > 0 || w.shareConfigured() {
		gctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		w.stopGrp = stop
		for i := range max(w.cfg.GroupMembers, 0) {
			w.groupWG.Add(1)
			go func() { defer w.groupWG.Done(); w.member(gctx, fmt.Sprintf("m%d", i)) }()
		}
		w.startKafka(ctx, gctx)
		w.startShare(gctx)
		w.goRun(func() { w.observeGroup(ctx) })
	} else {
		w.startKafka(ctx, ctx)
	}
}

// groups lists the groups whose committed offsets the workload observes.
func (w *Workload) groups() []string {
	var out []string
	if w.cfg.GroupMembers > 0 {
		out = append(out, w.cfg.Group)
	}
	return append(out, w.cfg.Kafka.groups()...)
}

func (w *Workload) goRun(fn func()) {
	w.wg.Add(1)
	go func() { defer w.wg.Done(); fn() }()
}

// Stop stops the producers and the readers, letting idempotent producers settle what
// they sent (up to ResolveTimeout), then stops the group members, which commit what
// they processed.
func (w *Workload) Stop() {
	w.cancel()
	w.wg.Wait()
	if w.stopGrp != nil {
		w.stopGrp()
		done := make(chan struct{})
		go func() { w.groupWG.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			// A member that cannot stop is the client's problem, not the log's: the run
			// goes on to its final read, and the history says so.
			w.hist.AddEvent("workload", "group members did not stop within a minute")
			w.cfg.Log.Error("group members did not stop within a minute")
		}
	}
}

// produceRecord is a record of a produce body.
type produceRecord struct {
	Partition int32  `json:"partition"`
	Value     string `json:"value"`
}

type produceBody struct {
	Records  []produceRecord `json:"records"`
	Producer *producerField  `json:"producer,omitempty"`
}

type producerField struct {
	ID        int64            `json:"id"`
	Epoch     int16            `json:"epoch"`
	Sequences map[string]int32 `json:"sequences"`
}

// answer is one attempt's result.
type answer struct {
	outcome Outcome
	offsets []int64
	err     string
	code    string
}

// definiteCodes are the 503 and 429 codes whose contract is that nothing was written.
var definiteCodes = map[string]bool{
	"store_unavailable": true, "commit_failed": true, "shutting_down": true, "catalog_unavailable": true,
	"role_unavailable": true, "not_ready": true, "buffer_full": true,
}

// send makes one attempt at a produce.
func (w *Workload) send(ctx context.Context, body []byte) answer {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, BalancedURL+"/v1/topics/"+w.cfg.Topic+"/records", bytes.NewReader(body))
	if err != nil {
		return answer{outcome: Failed, err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.hc.Do(req)
	if err != nil {
		if notSent(err) {
			return answer{outcome: Failed, err: "not sent: " + err.Error()}
		}
		return answer{outcome: Unknown, err: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{outcome: Unknown, err: fmt.Sprintf("HTTP %d, reading the body: %v", resp.StatusCode, err)}
	}
	if resp.StatusCode == http.StatusOK {
		var out struct {
			Offsets []struct {
				Offset int64 `json:"offset"`
			} `json:"offsets"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return answer{outcome: Unknown, err: "HTTP 200 with a body that does not parse: " + err.Error()}
		}
		a := answer{outcome: OK}
		for _, o := range out.Offsets {
			a.offsets = append(a.offsets, o.Offset)
		}
		return a
	}
	var prob struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(b, &prob)
	a := answer{err: fmt.Sprintf("HTTP %d %s: %s", resp.StatusCode, prob.Code, prob.Detail), code: prob.Code}
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		a.outcome = Failed
	case definiteCodes[prob.Code]:
		a.outcome = Failed
	default:
		a.outcome = Unknown
	}
	return a
}

// produce is one producer's loop.
func (w *Workload) produce(ctx context.Context, name string, idempotent bool) {
	var (
		n    int
		prod *producerField
		seqs = map[int32]int32{}
	)
	for ctx.Err() == nil {
		if idempotent && prod == nil {
			id, epoch, err := w.initProducer(ctx)
			if err != nil {
				continue
			}
			prod, seqs = &producerField{ID: id, Epoch: epoch}, map[int32]int32{}
		}
		k := 1 + rand.IntN(w.cfg.MaxRecords)
		body := produceBody{Records: make([]produceRecord, k)}
		counts := map[int32]int32{}
		for i := range body.Records {
			p := rand.Int32N(w.cfg.Partitions)
			n++
			body.Records[i] = produceRecord{Partition: p, Value: fmt.Sprintf("%s-%d", name, n)}
			counts[p]++
		}
		if idempotent {
			pf := *prod
			pf.Sequences = map[string]int32{}
			for p := range counts {
				pf.Sequences[strconv.Itoa(int(p))] = seqs[p]
			}
			body.Producer = &pf
		}
		raw, _ := json.Marshal(body)
		start := time.Now()
		var a answer
		attempts := 0
		if !idempotent {
			// The end of the run does not cut a request short: that would turn its
			// outcome unknown for no fault's sake.
			a, attempts = w.send(context.WithoutCancel(ctx), raw), 1
		} else {
			a, attempts = w.sendIdempotent(ctx, raw)
		}
		end := time.Now()
		req := w.hist.NextRequest()
		sends := make([]Send, k)
		for i, r := range body.Records {
			s := Send{Request: req, Producer: name, Idempotent: idempotent, Topic: w.cfg.Topic, Partition: r.Partition,
				Value: r.Value, Attempts: attempts, Outcome: a.outcome, Err: a.err, Start: start, End: end}
			if a.outcome == OK {
				if len(a.offsets) != k {
					s.Outcome, s.Err = Unknown, fmt.Sprintf("answer has %d offsets for %d records", len(a.offsets), k)
				} else {
					s.Offset = a.offsets[i]
				}
			}
			sends[i] = s
		}
		w.hist.AddSends(sends...)
		if idempotent {
			switch a.outcome {
			case OK:
				for p, c := range counts {
					seqs[p] += c
				}
			case Unknown:
				prod = nil // the sequences are ambiguous now: start over as a new producer
			case Failed:
				if a.code == "out_of_order_sequence" || a.code == "unknown_producer_id" || a.code == "producer_fenced" {
					prod = nil
				}
			}
		}
		ctxwait.Sleep(ctx, w.cfg.Interval)
	}
}

// sendIdempotent sends an idempotent request until it is answered definitely: ok (a
// resend of a committed request answers its original offsets), or refused before any
// attempt could have written. After an unknown attempt, a later refusal proves nothing
// about the earlier attempt: the outcome stays unknown unless a resend answers ok.
func (w *Workload) sendIdempotent(ctx context.Context, body []byte) (answer, int) {
	var (
		unknown  bool
		attempts int
		last     answer
	)
	for {
		attempts++
		a := w.send(w.resolve, body)
		switch {
		case a.outcome == OK:
			return a, attempts
		case a.outcome == Failed && !unknown:
			return a, attempts
		case a.outcome == Failed && !definiteCodes[a.code] && a.code != "":
			// A 4xx after an unknown attempt (out of order: the first attempt may have
			// landed and been forgotten). Nothing more to learn by resending.
			a.outcome = Unknown
			a.err = "after an unknown attempt: " + a.err
			return a, attempts
		}
		if a.outcome == Unknown {
			unknown = true
		}
		last = a
		if w.resolve.Err() != nil {
			last.outcome = Unknown
			return last, attempts
		}
		ctxwait.Sleep(w.resolve, 100*time.Millisecond)
	}
}

func (w *Workload) initProducer(ctx context.Context) (int64, int16, error) {
	rctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, BalancedURL+"/v1/producers", nil)
	resp, err := w.hc.Do(req)
	if err != nil {
		ctxwait.Sleep(ctx, 200*time.Millisecond)
		return 0, 0, err
	}
	defer resp.Body.Close()
	var out struct {
		ID    int64 `json:"producer_id"`
		Epoch int16 `json:"epoch"`
	}
	if resp.StatusCode != http.StatusOK {
		ctxwait.Sleep(ctx, 200*time.Millisecond)
		return 0, 0, fmt.Errorf("init producer: HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, 0, err
	}
	return out.ID, out.Epoch, nil
}

// consume reads one partition by assignment from offset 0 until ctx ends.
func (w *Workload) consume(ctx context.Context, name string, p int32) {
	offset := int64(0)
	for ctx.Err() == nil {
		next, err := w.poll(ctx, name, ReadAssign, p, offset, 500*time.Millisecond)
		if err != nil {
			ctxwait.Sleep(ctx, 100*time.Millisecond)
			continue
		}
		offset = next
	}
}

// reread reads old data: a random partition from a random offset, a few polls.
func (w *Workload) reread(ctx context.Context, name string) {
	for ctx.Err() == nil {
		p := rand.Int32N(w.cfg.Partitions)
		pctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
		parts, err := w.cli.Partitions(pctx, w.cfg.Topic)
		cancel()
		if err != nil || int(p) >= len(parts) || parts[p].HighWatermark == parts[p].LogStartOffset {
			ctxwait.Sleep(ctx, 200*time.Millisecond)
			continue
		}
		lo, hi := parts[p].LogStartOffset, parts[p].HighWatermark
		offset := lo + rand.Int64N(hi-lo)
		for i := 0; i < 5 && offset < hi && ctx.Err() == nil; i++ {
			next, err := w.poll(ctx, name, ReadAssign, p, offset, 0)
			if err != nil {
				break
			}
			offset = next
		}
		ctxwait.Sleep(ctx, 50*time.Millisecond)
	}
}

// poll fetches once and records the poll; it returns the next offset.
func (w *Workload) poll(ctx context.Context, name, mode string, p int32, offset int64, wait time.Duration) (int64, error) {
	fctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	max := 200
	if mode == ReadFinal {
		max = 2000 // the final read is a bulk read
	}
	res, err := w.cli.Fetch(fctx, w.cfg.Topic, p, client.FetchOptions{Offset: offset, MaxRecords: max, Wait: wait})
	rd := Read{Consumer: name, Mode: mode, Topic: w.cfg.Topic, Partition: p, From: offset, At: time.Now()}
	if err != nil {
		if ctx.Err() != nil {
			return offset, err // the run ended: not a failed poll
		}
		rd.Err = err.Error()
		w.hist.AddRead(rd)
		return offset, err
	}
	rd.Next, rd.HWM = res.NextOffset, res.HighWatermark
	rd.Records = readRecords(res.Records)
	w.hist.AddRead(rd)
	return res.NextOffset, nil
}

func readRecords(recs []client.Record) []ReadRecord {
	out := make([]ReadRecord, len(recs))
	for i, r := range recs {
		v, err := r.ValueBytes()
		if err != nil {
			v = []byte("<undecodable: " + err.Error() + ">")
		}
		out[i] = ReadRecord{Offset: r.Offset, Value: string(v)}
	}
	return out
}

// member runs one consumer-group member until ctx ends, rejoining when it is fenced.
func (w *Workload) member(ctx context.Context, name string) {
	for ctx.Err() == nil {
		c, err := client.NewConsumer(w.cli, client.ConsumerConfig{
			Group: w.cfg.Group, Topics: []string{w.cfg.Topic}, MemberID: name,
			SessionTimeout: w.cfg.SessionTimeout, AutoCommitInterval: 500 * time.Millisecond,
			MaxRecords: 200, FetchWait: 500 * time.Millisecond,
			Logger: w.cfg.Log.With("member", name),
		})
		if err != nil {
			w.cfg.Log.Error("group member", "err", err)
			return
		}
		err = c.Run(ctx, func(_ context.Context, b client.Batch) error {
			w.hist.AddRead(Read{Consumer: name, Mode: ReadGroup, Group: w.cfg.Group, Topic: b.Topic, Partition: b.Partition,
				From: -1, Records: readRecords(b.Records), Next: b.NextOffset, HWM: b.HighWatermark, At: time.Now()})
			return nil
		})
		switch {
		case err != nil && ctx.Err() == nil:
			w.cfg.Log.Info("group member stopped; rejoining", "member", name, "err", err)
			ctxwait.Sleep(ctx, 500*time.Millisecond)
		case err != nil:
			// Stopped (after the faults were healed) while something still kept it from
			// progress: worth seeing beside the anomalies.
			w.hist.AddEvent("workload", fmt.Sprintf("group member %s stopped while failing: %v", name, err))
		}
	}
}

// observeGroup records the groups' committed offsets every second.
func (w *Workload) observeGroup(ctx context.Context) {
	for ctx.Err() == nil {
		for _, g := range w.groups() {
			w.recordGroupOffsets(ctx, g, false)
		}
		ctxwait.Sleep(ctx, time.Second)
	}
}

func (w *Workload) recordGroupOffsets(ctx context.Context, group string, final bool) error {
	gctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	at := time.Now() // before the call: an observation is no older than this
	offs, err := w.cli.GroupOffsets(gctx, group)
	if err != nil {
		if client.HasCode(err, "group_not_found") {
			return nil
		}
		return err
	}
	g := GroupOffsets{Group: group, Topic: w.cfg.Topic, Offsets: map[int32]int64{}, Final: final, At: at}
	for _, o := range offs {
		if o.Topic == w.cfg.Topic {
			g.Offsets[o.Partition] = o.Offset
		}
	}
	w.hist.AddGroupOffsets(g)
	return nil
}

// Final reads every partition from its log start to its high watermark, retrying
// failures for up to FinalTimeout per partition, then the transactional output topic,
// then records the groups' final committed offsets.
func (w *Workload) Final(parent context.Context) {
	for p := range w.cfg.Partitions {
		w.finalPartition(parent, p)
	}
	w.finalTxn(parent)
	w.finalShare(parent)
	ctx, cancel := context.WithTimeout(parent, w.cfg.FinalTimeout)
	defer cancel()
	for _, g := range w.groups() {
		for ctx.Err() == nil {
			if err := w.recordGroupOffsets(ctx, g, true); err == nil {
				break
			}
			ctxwait.Sleep(ctx, 200*time.Millisecond)
		}
	}
	w.hist.mu.Lock()
	w.hist.End = time.Now()
	w.hist.mu.Unlock()
}

func (w *Workload) finalPartition(parent context.Context, p int32) {
	ctx, cancel := context.WithTimeout(parent, w.cfg.FinalTimeout)
	defer cancel()
	f := FinalState{Topic: w.cfg.Topic, Partition: p}
	var lastErr error
	for ctx.Err() == nil {
		parts, err := w.cli.Partitions(ctx, w.cfg.Topic)
		if err != nil || int(p) >= len(parts) {
			lastErr = errors.Join(err, fmt.Errorf("partitions: %d answered", len(parts)))
			ctxwait.Sleep(ctx, 200*time.Millisecond)
			continue
		}
		f.LogStart, f.HWM = parts[p].LogStartOffset, parts[p].HighWatermark
		break
	}
	offset := f.LogStart
	for ctx.Err() == nil && offset < f.HWM {
		next, err := w.poll(ctx, "final", ReadFinal, p, offset, 0)
		if err != nil {
			lastErr = err
			ctxwait.Sleep(ctx, 200*time.Millisecond)
			continue
		}
		if next <= offset {
			lastErr = fmt.Errorf("fetch at %d below the high watermark %d answered next offset %d", offset, f.HWM, next)
			ctxwait.Sleep(ctx, 200*time.Millisecond)
			continue
		}
		offset = next
	}
	f.Complete = offset >= f.HWM && ctx.Err() == nil
	if !f.Complete && lastErr != nil {
		f.Err = lastErr.Error()
	} else if !f.Complete {
		f.Err = fmt.Sprintf("read to %d of %d: %v", offset, f.HWM, ctx.Err())
	}
	w.hist.AddFinal(f)
}
