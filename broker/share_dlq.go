package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/prom"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
)

// Dead-letter topics for share groups (KIP-1191, docs/design.md "Share groups"). The
// rules of the config are here, once: a group's errors.deadletterqueue.topic.name must
// start with the node's prefix (Config.ShareDLQPrefix, --share-dlq-prefix), name a
// topic that exists when it is set and opts in with errors.deadletterqueue.group.enable
// =true, and setting it needs alter on the group — otherwise any reader could route
// records into any topic. The mover (RunShareDLQ) copies the records the catalog
// marked pending to that topic, each copy's flush archiving them in its transaction.

// The headers on a dead-letter copy, after the original record's own (named after
// Kafka Connect's __connect.errors.* context headers, as KIP-1191 proposes).
const (
	DLQHeaderTopic         = "__dlq.errors.topic"
	DLQHeaderPartition     = "__dlq.errors.partition"
	DLQHeaderOffset        = "__dlq.errors.offset"
	DLQHeaderDeliveryCount = "__dlq.errors.delivery.count"
	DLQHeaderReason        = "__dlq.errors.reason" // rejected, delivery_limit
	DLQHeaderGroup         = "__dlq.errors.group.id"
	// A push target's rejecting answer (issue 36), when one rejected the record: its
	// HTTP status, and a body excerpt (at most catalog.MaxRejectionBody bytes of
	// UTF-8; for a record rejected one by one in a 2xx batch answer, its reason).
	DLQHeaderHTTPStatus = "__dlq.errors.http.status"
	DLQHeaderHTTPBody   = "__dlq.errors.http.body"
)

// Mover defaults.
const (
	// ShareDLQInterval is how often the mover looks for pending records.
	ShareDLQInterval = time.Second
	// ShareDLQLeaseTTL is how long a mover's lease on a group outlives its last pass.
	ShareDLQLeaseTTL = 30 * time.Second
	// shareDLQMaxRecords bounds the records one copy request carries.
	shareDLQMaxRecords = 500
)

// shareDLQMetrics are the dead-letter mover's (share_dlq.go).
type shareDLQMetrics struct {
	// copied counts records copied to dead-letter topics by group, counted once the
	// copy's flush committed (the commit that archives them), never before.
	copied *prometheus.CounterVec
}

func newShareDLQMetrics(reg prometheus.Registerer) *shareDLQMetrics {
	return &shareDLQMetrics{
		copied: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_share_dead_lettered_records_total",
			Help: "Records this node's dead-letter mover copied to a share group's dead-letter topic, by group (counted when the copy commits)."}, []string{"group"})),
	}
}

// checkDLQTopic checks a dead-letter topic named for group: the prefix, then the topic
// (it exists and opts in). Refusals are CodeInvalidConfig with a detail "rule":
// dlq_prefix, dlq_topic_not_found, dlq_not_enabled.
func (b *Broker) checkDLQTopic(ctx context.Context, group, name string) *Error {
	bad := func(rule, format string, args ...any) *Error {
		return newError(CodeInvalidConfig, "group %q: %s=%q: %s", group, catalog.ShareDLQTopic, name, fmt.Sprintf(format, args...)).
			with("config", catalog.ShareDLQTopic).with("rule", rule)
	}
	if prefix := b.dlqPrefix; !strings.HasPrefix(name, prefix) {
		return bad("dlq_prefix", "a dead-letter topic's name must start with %q (this node's --share-dlq-prefix)", prefix)
	}
	ti, e := b.lookupTopic(ctx, name)
	if e != nil {
		if e.Code == CodeTopicNotFound {
			return bad("dlq_topic_not_found", "no such topic: create it first, with %s=true", catalog.TopicDLQGroupEnable)
		}
		return e
	}
	if !ti.Config.DLQGroupEnable {
		return bad("dlq_not_enabled", "the topic does not set %s=true, so no group may dead-letter into it", catalog.TopicDLQGroupEnable)
	}
	return nil
}

// authorizeDLQChange checks, when a group config change sets or moves the dead-letter
// topic, alter on the group (besides the alter configs every change needs) and the
// topic's rules.
func (b *Broker) authorizeDLQChange(ctx context.Context, who Principal, group string, before, after map[string]string) *Error {
	name := after[catalog.ShareDLQTopic]
	if name == before[catalog.ShareDLQTopic] {
		return nil
	}
	if e := b.authorize(ctx, who, acl.OpAlter, acl.Group(group)); e != nil {
		return e
	}
	if name == "" {
		return nil
	}
	return b.checkDLQTopic(ctx, group, name)
}

// RunShareDLQ runs the dead-letter mover until ctx ends (owned by the node): every
// interval a pass (MoveShareDLQ) as holder.
func (b *Broker) RunShareDLQ(ctx context.Context, holder string, interval time.Duration, log *slog.Logger) error {
	if b.checkShare() != nil || b.d.Writer == nil || b.d.Reader == nil {
		// A node without share groups, or without the writer and reader it copies
		// through, has nothing to move: it waits for the end rather than return, which
		// its caller would take for a failed role.
		<-ctx.Done()
		return nil
	}
	if interval <= 0 {
		interval = ShareDLQInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTimer(interval/2 + rand.N(interval/2+1))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := b.MoveShareDLQ(ctx, holder, log)
		if n > 0 {
			log.Info("copied records to dead-letter topics", "count", n)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("dead-letter mover", "err", err)
		}
		t.Reset(interval)
	}
}

// MoveShareDLQ runs one pass of the mover as holder: for each share-partition with
// records pending dead-lettering whose group it can lease, it reads them and produces
// their copies in one request whose commit archives them (catalog.ShareDLQCommit). It
// answers how many records it copied. A failed copy leaves the records pending for the
// next pass; a group whose topic is gone or no longer opts in keeps them pending (a
// warning), never dropped; a group that no longer names a topic has them archived.
func (b *Broker) MoveShareDLQ(ctx context.Context, holder string, log *slog.Logger) (int, error) {
	if e := b.checkShare(); e != nil {
		return 0, e
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler) // as RunShareDLQ's: a failed copy logged to nil panicked
	}
	work, err := b.d.Share.ShareDLQPending(ctx, 100)
	if err != nil {
		return 0, fmt.Errorf("list dead-letter work: %w", err)
	}
	leases := map[string]*catalog.ShareDLQLease{}
	copied := 0
	var errs []error
	for _, w := range work {
		l, seen := leases[w.Group]
		if !seen {
			got, ok, err := b.d.Share.AcquireShareDLQLease(ctx, w.Group, holder, ShareDLQLeaseTTL)
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				l = &got
			}
			leases[w.Group] = l
		}
		if l == nil {
			continue // another mover holds the group
		}
		n, err := b.moveShareDLQ(ctx, *l, w)
		copied += n
		if err != nil {
			log.Warn("dead-letter copy", "group", w.Group, "topic", w.Topic, "partition", w.Partition, "dlq", w.DLQTopic, "err", err)
			errs = append(errs, err)
		}
	}
	return copied, errors.Join(errs...)
}

// moveShareDLQ copies one share-partition's pending records (up to shareDLQMaxRecords
// offsets) in one request.
func (b *Broker) moveShareDLQ(ctx context.Context, l catalog.ShareDLQLease, w catalog.ShareDLQWork) (int, error) {
	ranges := w.Ranges
	left := int64(shareDLQMaxRecords)
	for i, r := range ranges {
		n := r.Last - r.First + 1
		if n >= left {
			cut := r
			cut.Last = r.First + left - 1
			ranges = append(ranges[:i:i], cut)
			break
		}
		left -= n
	}
	commit := &catalog.ShareDLQCommit{Lease: l, TopicID: w.TopicID, Partition: w.Partition, Ranges: ranges}
	if w.DLQTopic == "" {
		// The group no longer names a dead-letter topic: its pending records are
		// archived as they would have been without one.
		if err := b.d.Share.ArchiveShareDLQ(ctx, *commit); err != nil {
			return 0, fmt.Errorf("archive without a dead-letter topic: %w", err)
		}
		return 0, nil
	}
	if e := b.checkDLQTopic(ctx, w.Group, w.DLQTopic); e != nil {
		return 0, e // kept pending: the topic may come back or opt in again
	}
	ti, e := b.lookupPartition(ctx, w.Topic, w.Partition)
	if e != nil {
		return 0, e
	}
	var recs []Record
	for _, r := range ranges {
		for off := r.First; off <= r.Last; {
			res, err := b.d.Reader.Fetch(ctx, reader.Fetch{TopicID: ti.ID, Partition: w.Partition, Offset: off,
				MaxRecords: int(r.Last - off + 1), MaxBytes: 64 << 20})
			if err != nil {
				return 0, fmt.Errorf("read %s/%d at %d: %w", w.Topic, w.Partition, off, err)
			}
			for _, rec := range res.Records {
				if rec.Offset < off || rec.Offset > r.Last {
					continue
				}
				recs = append(recs, dlqCopy(w, r, rec))
			}
			if res.NextOffset <= off {
				break // retention took the rest: nothing to copy
			}
			off = res.NextOffset
		}
	}
	if len(recs) == 0 {
		// No record left at these offsets (retention, transaction markers): nothing to
		// copy, so they are archived alone.
		if err := b.d.Share.ArchiveShareDLQ(ctx, *commit); err != nil {
			return 0, fmt.Errorf("archive offsets without records: %w", err)
		}
		return 0, nil
	}
	preq := ProduceRequest{Records: recs}
	wreq, topics, e := b.produceRequest(ctx, &preq)
	if e != nil {
		return 0, e
	}
	wreq.ShareDLQ = commit
	if _, e := b.write(ctx, wreq, topics); e != nil {
		return 0, e
	}
	// The write answered after its flush committed, archiving the records: only now
	// are they dead-lettered.
	b.dlqMetrics.copied.WithLabelValues(w.Group).Add(float64(len(recs)))
	return len(recs), nil
}

// dlqCopy is the dead-letter copy of rec: its key, value, timestamp and headers, and
// the context headers.
func dlqCopy(w catalog.ShareDLQWork, r catalog.ShareDLQRange, rec segment.DecodedRecord) Record {
	h := append([]segment.Header(nil), rec.Headers...)
	h = append(h,
		segment.Header{Key: DLQHeaderTopic, Value: []byte(w.Topic)},
		segment.Header{Key: DLQHeaderPartition, Value: []byte(strconv.Itoa(int(w.Partition)))},
		segment.Header{Key: DLQHeaderOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
		segment.Header{Key: DLQHeaderDeliveryCount, Value: []byte(strconv.Itoa(int(r.Count)))},
		segment.Header{Key: DLQHeaderReason, Value: []byte(r.Reason)},
		segment.Header{Key: DLQHeaderGroup, Value: []byte(w.Group)},
	)
	if rej := r.Rejection; rej.Status != 0 {
		h = append(h, segment.Header{Key: DLQHeaderHTTPStatus, Value: []byte(strconv.Itoa(rej.Status))},
			segment.Header{Key: DLQHeaderHTTPBody, Value: []byte(rej.Body)})
	}
	return Record{Topic: w.DLQTopic, Partition: -1, Key: rec.Key, Value: rec.Value, Headers: h, Timestamp: rec.Timestamp}
}
