package compactor

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// txnProducer writes a transactional id's batches through the writer, as the Kafka
// front end does for a transactions-v2 producer (the produce adds the partition).
type txnProducer struct {
	e   *env
	tid string
	p   catalog.Producer
	seq int32
}

func (e *env) txnProducer(tid string) *txnProducer {
	e.t.Helper()
	p, err := e.cat.(catalog.Transactions).InitTxnProducer(e.ctx, catalog.InitTxn{TransactionalID: tid, Timeout: time.Minute})
	if err != nil {
		e.t.Fatal(err)
	}
	return &txnProducer{e: e, tid: tid, p: p}
}

// write produces one batch of recs to partition 0 of tp and returns where they landed.
func (tp *txnProducer) write(topic catalog.Topic, recs ...segment.Record) []rec {
	tp.e.t.Helper()
	return tp.e.write(topic, &tp.p, &catalog.TxnWrite{TransactionalID: tp.tid, ImplicitAdd: true}, &tp.seq, recs...)
}

func (tp *txnProducer) end(commit bool) {
	tp.e.t.Helper()
	if _, err := tp.e.cat.(catalog.Transactions).EndTxn(tp.e.ctx, catalog.EndTxn{TransactionalID: tp.tid, Producer: tp.p, Commit: commit}); err != nil {
		tp.e.t.Fatal(err)
	}
}

// write produces recs to partition 0 as one request: a plain producer's (p nil) or a
// transactional one's.
func (e *env) write(topic catalog.Topic, p *catalog.Producer, txn *catalog.TxnWrite, seq *int32, recs ...segment.Record) []rec {
	e.t.Helper()
	req := writer.Request{Producer: p, Txn: txn}
	if p != nil {
		req.Sequences = map[writer.TopicPartition]int32{{TopicID: topic.ID, Partition: 0}: *seq}
		*seq += int32(len(recs))
	}
	for _, r := range recs {
		req.Records = append(req.Records, writer.Record{TopicID: topic.ID, Partitions: topic.Partitions, Partition: 0, Record: r})
	}
	resp, err := e.w.Produce(e.ctx, req)
	if err != nil {
		e.t.Fatalf("produce: %v", err)
	}
	out := make([]rec, len(recs))
	for i, rr := range resp.Records {
		out[i] = rec{partition: 0, offset: rr.Offset, Record: recs[i]}
	}
	return out
}

func kv(key, value string) segment.Record {
	r := segment.Record{Key: []byte(key), Timestamp: time.Now().UnixMilli()}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

// fetchValues reads partition 0 from its log start with the reader as an HTTP consumer
// does, and returns "offset:value" of every record.
func (e *env) fetchValues(topicID int64, iso reader.Isolation) []string {
	e.t.Helper()
	info := e.partition(topicID, 0)
	var out []string
	for off := info.LogStartOffset; ; {
		res, err := e.r.Fetch(e.ctx, reader.Fetch{TopicID: topicID, Offset: off, MaxRecords: 1000, Isolation: iso})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range res.Records {
			out = append(out, fmt.Sprintf("%d:%s", r.Offset, r.Value))
		}
		limit := res.HighWatermark
		if iso == reader.ReadCommitted {
			limit = res.LastStableOffset
		}
		if res.NextOffset >= limit {
			return out
		}
		if res.NextOffset == off {
			e.t.Fatalf("fetch at %d made no progress (limit %d)", off, limit)
		}
		off = res.NextOffset
	}
}

func values(recs ...[]rec) []string {
	var out []string
	for _, rs := range recs {
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%d:%s", r.offset, r.Value))
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		var x, y int64
		fmt.Sscanf(a, "%d:", &x)
		fmt.Sscanf(b, "%d:", &y)
		return int(x - y)
	})
	return out
}

// checkCovered fails unless every offset from the log start to the high watermark is
// in exactly one chunk row or is a marker, and no row reaches the high watermark.
func (e *env) checkCovered(topicID int64) (markers []catalog.Marker) {
	e.t.Helper()
	info := e.partition(topicID, 0)
	l, err := e.cat.Chunks(e.ctx, topicID, 0, info.LogStartOffset, 1<<40)
	if err != nil {
		e.t.Fatal(err)
	}
	covered := map[int64]int{}
	for _, ch := range l.Chunks {
		for o := max(ch.BaseOffset, info.LogStartOffset); o <= ch.LastOffset; o++ {
			covered[o]++
		}
	}
	for _, m := range l.Markers {
		if covered[m.Offset] > 0 && !slices.ContainsFunc(l.Chunks, func(ch catalog.Chunk) bool {
			return ch.RealOffsets && ch.BaseOffset <= m.Offset && m.Offset <= ch.LastOffset
		}) {
			e.t.Fatalf("marker at %d inside a writer's chunk", m.Offset)
		}
		covered[m.Offset]++
	}
	for o := info.LogStartOffset; o < info.HighWatermark; o++ {
		if covered[o] == 0 {
			e.t.Fatalf("offset %d (log start %d, high watermark %d) in no row and no marker", o, info.LogStartOffset, info.HighWatermark)
		}
	}
	return l.Markers
}

// TestCompactionAndTransactions: merging never rewrites at or past the last stable
// offset, drops aborted transactions' records, keeps committed ones' batches
// transactional and the markers in their places (merged rows step over them); the log
// start takes the markers below it when retention moves it.
func TestCompactionAndTransactions(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, e *env) {
		topic := e.topic("txn-merge", 1, nil)
		val := func(s string) segment.Record { return kv("", s) }
		a, b, o := e.txnProducer("a"), e.txnProducer("b"), e.txnProducer("open")
		var seq int32
		plain := func(s string) []rec { return e.write(topic, nil, nil, &seq, val(s)) }
		p1 := plain("p1")
		a1 := a.write(topic, val("a1"), val("a2"))
		b1 := b.write(topic, val("b1"))
		p2 := plain("p2")
		a2 := a.write(topic, val("a3"))
		a.end(true)
		b.end(false)
		p3 := plain("p3")
		o1 := o.write(topic, val("o1"))
		p4 := plain("p4")
		before := e.rows(topic.ID, 0)
		lso := e.partition(topic.ID, 0).LastStableOffset
		if lso != o1[0].offset {
			t.Fatalf("last stable offset %d, want %d (the open transaction's first)", lso, o1[0].offset)
		}
		if got, want := e.fetchValues(topic.ID, reader.ReadUncommitted), values(p1, a1, b1, p2, a2, p3, o1, p4); !slices.Equal(got, want) {
			t.Fatalf("read_uncommitted before compaction: %v, want %v", got, want)
		}

		c := e.compactor(Config{TargetBytes: 1 << 20})
		waitSettled()
		e.passUntilQuiet(c)
		rows := e.rows(topic.ID, 0)
		if len(rows) >= len(before) {
			t.Fatalf("%d rows after merging, %d before: nothing merged across the markers", len(rows), len(before))
		}
		for _, r := range rows {
			if r.LastOffset >= lso && r.RealOffsets {
				t.Fatalf("row [%d, %d] rewritten at or past the last stable offset %d", r.BaseOffset, r.LastOffset, lso)
			}
		}
		markers := e.checkCovered(topic.ID)
		if len(markers) != 2 {
			t.Fatalf("%d markers after merging, want 2: %+v", len(markers), markers)
		}
		// The aborted transaction's record is gone; the open one's is untouched.
		if got, want := e.fetchValues(topic.ID, reader.ReadUncommitted), values(p1, a1, p2, a2, p3, o1, p4); !slices.Equal(got, want) {
			t.Fatalf("read_uncommitted after compaction: %v, want %v", got, want)
		}
		if got, want := e.fetchValues(topic.ID, reader.ReadCommitted), values(p1, a1, p2, a2, p3); !slices.Equal(got, want) {
			t.Fatalf("read_committed after compaction: %v, want %v", got, want)
		}
		// A Kafka client still sees the committed transaction's batches as
		// transactional, and its markers as control batches.
		raw, err := e.r.FetchRaw(e.ctx, reader.Fetch{TopicID: topic.ID, Offset: 0, Isolation: reader.ReadCommitted, Markers: true})
		if err != nil {
			t.Fatal(err)
		}
		control, transactional := 0, 0
		for _, bt := range raw.Batches {
			if segment.IsControlBatch(bt) {
				control++
			} else if some, _ := segment.Transactional(bt); some {
				transactional++
			}
		}
		if control != 2 || transactional != 2 {
			t.Fatalf("raw fetch: %d control and %d transactional batches, want 2 and 2", control, transactional)
		}

		// The open transaction commits: its rows may be merged now.
		o.end(true)
		p5 := plain("p5")
		waitSettled()
		e.passUntilQuiet(c)
		lso = e.partition(topic.ID, 0).LastStableOffset
		for _, r := range e.rows(topic.ID, 0) {
			if r.BaseOffset <= o1[0].offset && o1[0].offset <= r.LastOffset && !r.RealOffsets {
				t.Fatalf("the decided transaction's row [%d, %d] was not merged", r.BaseOffset, r.LastOffset)
			}
		}
		e.checkCovered(topic.ID)
		if got, want := e.fetchValues(topic.ID, reader.ReadCommitted), values(p1, a1, p2, a2, p3, o1, p4, p5); !slices.Equal(got, want) {
			t.Fatalf("read_committed after the commit: %v, want %v", got, want)
		}

		// Retention: the log start past the abort marker takes the markers below it.
		if _, err := e.cat.DeleteRecords(e.ctx, topic.ID, 0, p3[0].offset); err != nil {
			t.Fatal(err)
		}
		e.passUntilQuiet(c)
		aborted, err := e.cat.AbortedTxns(e.ctx, topic.ID, 0, 0, lso)
		if err != nil {
			t.Fatal(err)
		}
		if len(aborted) != 0 {
			t.Fatalf("aborted ranges below the log start remain: %+v", aborted)
		}
		if markers := e.checkCovered(topic.ID); len(markers) != 1 {
			t.Fatalf("markers after the log start moved: %+v, want the open transaction's commit", markers)
		}
	})
}

// TestKeyCompactionAndTransactions: an aborted record is never a key's latest value,
// an open transaction's records are not judged, and a compacted topic's markers go
// delete.retention.ms after their decision once key compaction cleaned past them.
func TestKeyCompactionAndTransactions(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, e *env) {
		const deleteRetention = 2 * time.Second
		topic := e.topic("txn-compact", 1, map[string]string{
			"cleanup.policy":      "compact",
			"delete.retention.ms": fmt.Sprint(deleteRetention.Milliseconds()),
		})
		var seq int32
		plain := func(recs ...segment.Record) []rec { return e.write(topic, nil, nil, &seq, recs...) }
		a, b := e.txnProducer("a"), e.txnProducer("b")
		k1 := plain(kv("k1", "v1"), kv("k2", "v1"))
		a.write(topic, kv("k1", "aborted"), kv("k3", "aborted"))
		a.end(false)
		b1 := b.write(topic, kv("k2", "v2"))
		b.end(true)
		a2 := a.write(topic, kv("k2", "open"))
		tail := plain(kv("k4", "v1"))
		c := e.compactor(Config{TargetBytes: 1 << 20})
		waitSettled()
		e.passUntilQuiet(c)
		// k1 keeps v1 (the aborted value is no value), k3 has none, k2's latest
		// committed value is v2; the open transaction's record and what follows are not
		// judged yet.
		want := values(k1[:1], b1, a2, tail)
		if got := e.fetchValues(topic.ID, reader.ReadUncommitted); !slices.Equal(got, want) {
			t.Fatalf("read_uncommitted after key compaction: %v, want %v", got, want)
		}
		if got := e.fetchValues(topic.ID, reader.ReadCommitted); !slices.Equal(got, values(k1[:1], b1)) {
			t.Fatalf("read_committed after key compaction: %v, want %v", got, values(k1[:1], b1))
		}
		e.checkCovered(topic.ID)

		// After delete.retention.ms the cleaned range's markers go.
		a.end(false)
		more := plain(kv("k5", "v1"))
		time.Sleep(deleteRetention)
		waitSettled()
		e.passUntilQuiet(c)
		if markers := e.checkCovered(topic.ID); len(markers) != 0 {
			t.Fatalf("markers kept past delete.retention.ms below the cleaned offset: %+v", markers)
		}
		// The second aborted transaction leaves k2 at v2.
		want = values(k1[:1], b1, tail, more)
		if got := e.fetchValues(topic.ID, reader.ReadUncommitted); !slices.Equal(got, want) {
			t.Fatalf("read_uncommitted after the markers went: %v, want %v", got, want)
		}
		if got := e.fetchValues(topic.ID, reader.ReadCommitted); !slices.Equal(got, want) {
			t.Fatalf("read_committed after the markers went: %v, want %v", got, want)
		}
	})
}
