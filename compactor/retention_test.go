package compactor

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// objectsOnlyBelow returns the objects whose rows all lie below offset.
func objectsOnlyBelow(rows []catalog.CompactionChunk, offset int64) map[string]bool {
	below, above := map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		if r.LastOffset < offset {
			below[r.SegmentKey] = true
		} else {
			above[r.SegmentKey] = true
		}
	}
	for k := range above {
		delete(below, k)
	}
	return below
}

// wantOutOfRange fetches at offset and wants the out-of-range error with logStart.
func (e *env) wantOutOfRange(topicID int64, partition int32, offset, logStart int64) {
	e.t.Helper()
	_, err := e.r.Fetch(e.ctx, reader.Fetch{TopicID: topicID, Partition: partition, Offset: offset})
	var oor *reader.OutOfRangeError
	if !errors.As(err, &oor) {
		e.t.Fatalf("fetch at %d: %v, want an out-of-range error", offset, err)
	}
	if oor.LogStartOffset != logStart {
		e.t.Fatalf("fetch at %d: log start %d, want %d", offset, oor.LogStartOffset, logStart)
	}
}

// reclaimed runs passes until the rows below the log start are gone and the objects
// that only they used have been deleted after the grace period, and checks both.
func (e *env) reclaimed(c *Compactor, topicID int64, partition int32, gone map[string]bool) {
	e.t.Helper()
	waitSettled()
	if err := c.Pass(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	info := e.partition(topicID, partition)
	for _, r := range e.rows(topicID, partition) {
		if r.LastOffset < info.LogStartOffset {
			e.t.Errorf("row [%d, %d] below the log start %d survived a pass after settling", r.BaseOffset, r.LastOffset, info.LogStartOffset)
		}
	}
	// Still within the grace period: the objects are still there for readers that
	// looked their rows up before.
	keys := e.storeKeys()
	for k := range gone {
		if !keys[k] {
			e.t.Errorf("object %s deleted before the grace period passed", k)
		}
	}
	time.Sleep(c.cfg.GracePeriod + 100*time.Millisecond)
	if err := c.Pass(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	keys = e.storeKeys()
	for k := range gone {
		if keys[k] {
			e.t.Errorf("object %s holding only data below the log start is still in the store", k)
		}
	}
	states, err := e.cat.SegmentStates(e.ctx, keysOf(gone))
	if err != nil {
		e.t.Fatal(err)
	}
	if len(states) != 0 {
		e.t.Errorf("rows of deleted objects remain: %v", states)
	}
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A short retention.ms advances the log start past old records and their objects go,
// while recent data stays intact.
func TestRetentionTime(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, e *env) {
		tp := e.topic("retention-ms", 1, nil)
		old := e.produce(tp, newGen(2, 100, time.Now().Add(-2*time.Hour).UnixMilli()), 600)
		recent := e.produce(tp, newGen(3, 100, time.Now().UnixMilli()), 600)
		firstRecent := recent[0].offset
		if firstRecent != old[len(old)-1].offset+1 {
			t.Fatalf("recent records start at %d, old ones end at %d", firstRecent, old[len(old)-1].offset)
		}
		gone := objectsOnlyBelow(e.rows(tp.ID, 0), firstRecent)
		if len(gone) == 0 {
			t.Fatal("no object holds only old records")
		}
		if _, err := e.cat.UpdateTopic(e.ctx, tp.Name, 0, map[string]string{"retention.ms": "3600000"}); err != nil {
			t.Fatal(err)
		}
		c := e.compactor(Config{})
		// The log start moves at once, before any row has settled.
		if err := c.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.partition(tp.ID, 0).LogStartOffset; got != firstRecent {
			t.Fatalf("log start %d, want %d (the first recent record)", got, firstRecent)
		}
		e.wantOutOfRange(tp.ID, 0, 0, firstRecent)
		e.checkPartition(tp.ID, 0, recent)

		e.reclaimed(c, tp.ID, 0, gone)
		e.checkPartition(tp.ID, 0, recent)

		// Infinite retention keeps everything.
		keep := e.topic("retention-infinite", 1, map[string]string{"retention.ms": "-1"})
		all := e.produce(keep, newGen(4, 100, time.Now().Add(-1000*time.Hour).UnixMilli()), 200)
		if err := c.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		e.checkPartition(keep.ID, 0, all)
	})
}

// retention.bytes drops the oldest chunks while what remains is at least
// retention.bytes.
func TestRetentionBytes(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, e *env) {
		tp := e.topic("retention-bytes", 1, nil)
		var recs []rec
		g := newGen(5, 100, time.Now().UnixMilli())
		for range 6 { // six rounds: six flushes at least
			recs = append(recs, e.produce(tp, g, 150)...)
		}
		rows := e.rows(tp.ID, 0)
		info := e.partition(tp.ID, 0)
		limit := info.Bytes / 2
		// Known answer, by the rule: drop whole chunks from the oldest while the rest
		// stays at or above the limit.
		wantStart, rest := int64(0), info.Bytes
		for _, r := range rows {
			if rest-r.Len < limit {
				break
			}
			rest -= r.Len
			wantStart = r.LastOffset + 1
		}
		if wantStart == 0 {
			t.Fatalf("rows %d: nothing to drop at limit %d of %d bytes", len(rows), limit, info.Bytes)
		}
		gone := objectsOnlyBelow(rows, wantStart)
		if _, err := e.cat.UpdateTopic(e.ctx, tp.Name, 0, map[string]string{"retention.bytes": itoa(limit)}); err != nil {
			t.Fatal(err)
		}
		c := e.compactor(Config{})
		if err := c.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		after := e.partition(tp.ID, 0)
		if after.LogStartOffset != wantStart || after.Bytes != rest {
			t.Fatalf("log start %d with %d bytes, want %d with %d (limit %d)", after.LogStartOffset, after.Bytes, wantStart, rest, limit)
		}
		e.wantOutOfRange(tp.ID, 0, 0, wantStart)
		e.checkPartition(tp.ID, 0, recs[wantStart:])
		e.reclaimed(c, tp.ID, 0, gone)
		e.checkPartition(tp.ID, 0, recs[wantStart:])
	})
}

// Delete-records advances the log start to a given offset (never backwards, never past
// the high watermark); the data below goes the same safe way.
func TestDeleteRecords(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, e *env) {
		tp := e.topic("delete-records", 1, nil)
		var recs []rec
		g := newGen(6, 100, time.Now().UnixMilli())
		for range 4 {
			recs = append(recs, e.produce(tp, g, 100)...)
		}
		rows := e.rows(tp.ID, 0)
		// Inside a chunk: the chunk holding it stays, serving from the offset.
		mid := rows[len(rows)/2].BaseOffset + 1
		info, err := e.cat.DeleteRecords(e.ctx, tp.ID, 0, mid)
		if err != nil {
			t.Fatal(err)
		}
		if info.LogStartOffset != mid {
			t.Fatalf("log start %d, want %d", info.LogStartOffset, mid)
		}
		if info, err = e.cat.DeleteRecords(e.ctx, tp.ID, 0, 3); err != nil || info.LogStartOffset != mid {
			t.Fatalf("delete records backwards: log start %d, %v; want %d unchanged", info.LogStartOffset, err, mid)
		}
		if _, err := e.cat.DeleteRecords(e.ctx, tp.ID, 0, int64(len(recs))+1); !errors.Is(err, catalog.ErrOffsetOutOfRange) {
			t.Fatalf("delete records past the high watermark: %v, want ErrOffsetOutOfRange", err)
		}
		if _, err := e.cat.DeleteRecords(e.ctx, tp.ID, 5, 1); !errors.Is(err, catalog.ErrPartitionOutOfRange) {
			t.Fatalf("delete records of a missing partition: %v, want ErrPartitionOutOfRange", err)
		}
		e.wantOutOfRange(tp.ID, 0, mid-1, mid)
		e.checkPartition(tp.ID, 0, recs[mid:])

		c := e.compactor(Config{TargetBytes: 1 << 20})
		e.reclaimed(c, tp.ID, 0, objectsOnlyBelow(rows, mid))
		e.passUntilQuiet(c)
		e.checkPartition(tp.ID, 0, recs[mid:])

		// Everything: the log start reaches the high watermark.
		if info, err = e.cat.DeleteRecords(e.ctx, tp.ID, 0, int64(len(recs))); err != nil || info.LogStartOffset != int64(len(recs)) || info.Bytes != 0 {
			t.Fatalf("delete all records: %+v, %v", info, err)
		}
		if got := e.readAll(tp.ID, 0); len(got) != 0 {
			t.Fatalf("read %d records after deleting all", len(got))
		}
	})
}

// A deleted topic's rows and objects are reclaimed; another topic sharing its objects
// keeps its data.
func TestDeletedTopic(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, e *env) {
		doomed := e.topic("doomed", 2, nil)
		kept := e.topic("kept", 2, nil)
		g := newGen(7, 100, time.Now().UnixMilli())
		// Interleaved, so that flushes hold both topics.
		done := make(chan []rec)
		go func() { done <- e.produce(kept, newGen(8, 50, time.Now().UnixMilli()), 600) }()
		e.produce(doomed, g, 600)
		keptRecs := <-done
		var doomedKeys = map[string]bool{}
		for p := range doomed.Partitions {
			for _, r := range e.rows(doomed.ID, p) {
				doomedKeys[r.SegmentKey] = true
			}
		}
		if err := e.cat.DeleteTopic(e.ctx, doomed.Name); err != nil {
			t.Fatal(err)
		}
		c := e.compactor(Config{TargetBytes: 1 << 20})
		waitSettled()
		if err := c.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		for p := range doomed.Partitions {
			if rows := e.rows(doomed.ID, p); len(rows) != 0 {
				t.Fatalf("partition %d of the deleted topic still has %d rows", p, len(rows))
			}
		}
		time.Sleep(testGracePeriod + 100*time.Millisecond)
		e.passUntilQuiet(c)
		time.Sleep(testGracePeriod + 100*time.Millisecond)
		if err := c.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		keys := e.storeKeys()
		live := map[string]bool{}
		want := byPartition(keptRecs)
		for p := range kept.Partitions {
			e.checkPartition(kept.ID, p, want[p])
			for _, r := range e.rows(kept.ID, p) {
				live[r.SegmentKey] = true
			}
		}
		for k := range keys {
			if !live[k] {
				t.Errorf("object %s is in the store but no live row refers to it", k)
			}
		}
		// Reclaimed partitions are never leased again.
		leases, err := e.cat.AcquirePartitions(e.ctx, "probe", time.Minute, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range leases {
			if l.TopicID == doomed.ID {
				t.Errorf("partition %d of the reclaimed topic was leased again", l.Partition)
			}
		}
	})
}

// A topic with 1s retention and one record stamped in year 9999 still trims its other
// records on time — and that one too. Retention judges each chunk by its records' time
// clamped to their append time (the database clock at the commit), which no producer
// can move; the commit makes the partition due when its chunk expires. Before, the
// partition's running maximum timestamp reached year 9999 and the log start never
// passed that record again.
func TestRetentionFutureTimestamp(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, e *env) {
		const retention = time.Second
		tp := e.topic("retention-9999", 1, map[string]string{"retention.ms": itoa(retention.Milliseconds()),
			"message.timestamp.after.max.ms": itoa(math.MaxInt64)})
		g := newGen(12, 50, time.Now().UnixMilli())
		e.produce(tp, g, 150)
		far := g.record()
		far.Timestamp = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).UnixMilli()
		if _, err := e.w.Produce(e.ctx, writer.Request{Records: []writer.Record{{TopicID: tp.ID, Partitions: 1, Record: far}}}); err != nil {
			t.Fatal(err)
		}
		e.produce(tp, newGen(13, 50, time.Now().UnixMilli()), 150)
		produced := time.Now()
		hwm := e.partition(tp.ID, 0).HighWatermark

		c := e.compactor(Config{})
		for {
			if err := c.Pass(e.ctx); err != nil {
				t.Fatal(err)
			}
			now, err := e.cat.Now(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Never early: every row below the log start expired before this pass.
			info := e.partition(tp.ID, 0)
			for _, r := range e.rows(tp.ID, 0) {
				if r.LastOffset < info.LogStartOffset && r.RetentionTime() >= now.Add(-retention).UnixMilli() {
					t.Fatalf("row [%d, %d] (retention time %d) trimmed before it was %s old at %v", r.BaseOffset, r.LastOffset,
						r.RetentionTime(), retention, now)
				}
			}
			if info.LogStartOffset == hwm {
				t.Logf("all %d records trimmed %s after the last was produced", hwm, time.Since(produced).Round(10*time.Millisecond))
				break
			}
			// On time: within retention.ms of the last append, and a few passes.
			if time.Since(produced) > retention+2*time.Second {
				t.Fatalf("log start %d of %d, %s after the last record was produced with retention.ms %s", info.LogStartOffset, hwm,
					time.Since(produced).Round(10*time.Millisecond), retention)
			}
			time.Sleep(200 * time.Millisecond)
		}
		e.wantOutOfRange(tp.ID, 0, hwm-1, hwm)
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
