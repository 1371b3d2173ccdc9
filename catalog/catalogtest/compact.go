package catalogtest

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// CompactionCatalog is a catalog with the compactor's interface.
type CompactionCatalog interface {
	catalog.Catalog
	catalog.Compaction
}

// CompactionCommitTimeout is the commit timeout runCompaction's open must use: rows
// settle (catalog.SettleAge: twice this) soon after their commit, so the suite can wait
// for it, yet a commit slowed by a loaded machine is not refused as too late.
const CompactionCommitTimeout = 1500 * time.Millisecond

// runCompaction is the conformance suite of catalog.Compaction. open returns a catalog
// for one subtest, opened with catalog.Options{CommitTimeout: CompactionCommitTimeout},
// and arranges its Close; it may be shared between subtests (the suite names its
// topics uniquely) but must not be used by any other compactor.
func runCompaction(t *testing.T, open func(t *testing.T) CompactionCatalog) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c CompactionCatalog)
	}{
		{"leases/partitions", testCompactionPartitionLeases},
		{"leases/jobs", testCompactionJobLeases},
		{"leases/due", testCompactionDue},
		{"leases/due_on_change", testCompactionDueOnChange},
		{"leases/due_by_retention", testCompactionDueByRetention},
		{"swap/replaces_rows", testCompactionSwap},
		{"swap/conflicts", testCompactionSwapConflicts},
		{"swap/settle_after_merge", testCompactionSettleAfterMerge},
		{"delete_records", testCompactionDeleteRecords},
		{"drop_chunks/settled_only", testCompactionDropChunks},
		{"deleted_topic/reclaimed", testCompactionReclaimDeletedTopic},
		{"orphans/fence_and_forget", testCompactionFenceOrphans},
		{"orphans/unreferenced", testCompactionMarkUnreferenced},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func compactionSettle() {
	time.Sleep(catalog.SettleAge(CompactionCommitTimeout) + 100*time.Millisecond)
}

// compactionLease takes the lease of one due partition for holder, giving back (as they
// were) any other partition it got on the way.
func compactionLease(t *testing.T, c CompactionCatalog, holder string, topicID int64, partition int32) catalog.PartitionLease {
	t.Helper()
	var back []catalog.PartitionLease
	defer func() {
		for _, l := range back {
			giveBack(t, c, l)
		}
	}()
	for range 100 {
		ls, err := c.AcquirePartitions(t.Context(), holder, time.Minute, 50)
		if err != nil {
			t.Fatal(err)
		}
		var got *catalog.PartitionLease
		for i := range ls {
			if ls[i].TopicID == topicID && ls[i].Partition == partition {
				got = &ls[i]
				continue
			}
			back = append(back, ls[i])
		}
		if got != nil {
			return *got
		}
		if len(ls) == 0 {
			break
		}
	}
	t.Fatalf("could not lease topic %d partition %d: not due?", topicID, partition)
	return catalog.PartitionLease{}
}

// giveBack releases a lease as it was: checkpoint and due time unchanged.
func giveBack(t *testing.T, c CompactionCatalog, l catalog.PartitionLease) {
	t.Helper()
	st, err := c.CompactionState(t.Context(), l)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ReleasePartition(t.Context(), l, catalog.PartitionRelease{Checkpoint: st.Checkpoint, Due: l.Due}); err != nil {
		t.Fatal(err)
	}
}

// leased acquires every partition due now for holder (ttl one minute) and returns them.
func leased(t *testing.T, c CompactionCatalog, holder string) []catalog.PartitionLease {
	t.Helper()
	ls, err := c.AcquirePartitions(t.Context(), holder, time.Minute, 100000)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// dueConfigs numbers the config changes of makeDue, so that each is a change.
var dueConfigs atomic.Int64

// makeDue makes every partition of a topic due now, as a config change does.
func makeDue(t *testing.T, c CompactionCatalog, name string) {
	t.Helper()
	v := strconv.FormatInt(7*24*3600*1000+dueConfigs.Add(1), 10)
	if _, err := c.UpdateTopic(t.Context(), name, 0, map[string]string{"retention.ms": v}); err != nil {
		t.Fatal(err)
	}
}

func compactionRows(t *testing.T, c CompactionCatalog, topicID int64, partition int32) []catalog.CompactionChunk {
	t.Helper()
	rows, err := c.CompactionChunks(t.Context(), topicID, partition, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func testCompactionPartitionLeases(t *testing.T, c CompactionCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "leases", 3, nil)
	// A partition with nothing due is never leased: a new topic's, here.
	idle := SeedTopic(t, c, "idle", 1, nil)
	makeDue(t, c, tp.Name)
	a := compactionLease(t, c, "a", tp.ID, 1)
	if a.Due.IsZero() || a.Until.Before(a.Due) {
		t.Fatalf("lease %+v: want the time it became due, before the lease's end", a)
	}
	// Another holder cannot get a leased partition.
	for _, l := range leased(t, c, "b") {
		if l.TopicID == tp.ID && l.Partition == 1 {
			t.Fatalf("partition leased to a was leased to b")
		}
		if l.TopicID == idle.ID {
			t.Fatalf("a partition with nothing due was leased")
		}
		giveBack(t, c, l)
	}
	cp := catalog.PartitionCheckpoint{CleanOffset: 7, TombstoneDue: 1234, CompactedAt: time.UnixMilli(1_700_000_000_000).UTC()}
	if err := c.ReleasePartition(ctx, a, catalog.PartitionRelease{Checkpoint: cp, Due: a.Due}); err != nil {
		t.Fatal(err)
	}
	// A released lease cannot be released again: its token is spent.
	wantErr(t, "release twice", c.ReleasePartition(ctx, a, catalog.PartitionRelease{Checkpoint: cp, Due: a.Due}), catalog.ErrCompactionConflict)
	b := compactionLease(t, c, "b", tp.ID, 1)
	if b.Token <= a.Token {
		t.Fatalf("token %d after %d: fencing tokens must grow", b.Token, a.Token)
	}
	st, err := c.CompactionState(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if st.Checkpoint != cp {
		t.Fatalf("checkpoint %+v, want %+v", st.Checkpoint, cp)
	}
	if st.Deleted || st.Topic.ID != tp.ID || st.Partition.Partition != 1 || st.Now.IsZero() ||
		st.Now.Sub(st.SettledBefore) != catalog.SettleAge(CompactionCommitTimeout) {
		t.Fatalf("state %+v", st)
	}
	// The old holder's fencing token no longer works.
	wantErr(t, "release with a stale token", c.ReleasePartition(ctx, a, catalog.PartitionRelease{Checkpoint: cp}), catalog.ErrCompactionConflict)
	giveBack(t, c, b)

	// An expired lease is granted again: a holder that dies leaves its partitions due.
	ls, err := c.AcquirePartitions(ctx, "short", 10*time.Millisecond, 1000)
	if err != nil || len(ls) != 3 {
		t.Fatalf("acquire: %d leases, %v; want the topic's 3 partitions", len(ls), err)
	}
	time.Sleep(50 * time.Millisecond)
	again := leased(t, c, "next")
	if len(again) != len(ls) {
		t.Fatalf("%d expired leases, %d granted again", len(ls), len(again))
	}
	for _, l := range again {
		giveBack(t, c, l)
	}
}

// testCompactionDue: partitions are leased when due, most overdue first, and every
// change that makes work keeps the due time current.
func testCompactionDue(t *testing.T, c CompactionCatalog) {
	ctx := t.Context()
	release := func(l catalog.PartitionLease, due time.Time, seen *catalog.CompactionState) {
		t.Helper()
		if err := c.ReleasePartition(ctx, l, catalog.PartitionRelease{Due: due, Seen: seen}); err != nil {
			t.Fatal(err)
		}
	}
	state := func(l catalog.PartitionLease) *catalog.CompactionState {
		t.Helper()
		st, err := c.CompactionState(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		return &st
	}
	backlog := func(want int64) catalog.CompactionBacklog {
		t.Helper()
		b, err := c.CompactionBacklog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.Due != want || (want > 0) == b.Oldest.IsZero() || b.Now.IsZero() {
			t.Fatalf("backlog %+v, want %d due", b, want)
		}
		return b
	}
	backlog(0)
	// Three topics made due one after another come out in that order.
	var tps []catalog.Topic
	for i := range 3 {
		tps = append(tps, SeedTopic(t, c, "due", 1, nil))
		makeDue(t, c, tps[i].Name)
		time.Sleep(5 * time.Millisecond)
	}
	b := backlog(3)
	first, err := c.AcquirePartitions(ctx, "a", time.Minute, 2)
	if err != nil || len(first) != 2 || first[0].TopicID != tps[0].ID || first[1].TopicID != tps[1].ID ||
		!first[0].Due.Equal(b.Oldest) || !first[0].Due.Before(first[1].Due) {
		t.Fatalf("first leases %+v, %v: want topics %d and %d, most overdue first (oldest due %v)", first, err, tps[0].ID, tps[1].ID, b.Oldest)
	}
	// Leased partitions still count as due: their work is not done.
	backlog(3)
	rest := leased(t, c, "b")
	if len(rest) != 1 || rest[0].TopicID != tps[2].ID {
		t.Fatalf("then %+v, want topic %d", rest, tps[2].ID)
	}
	release(rest[0], time.Time{}, state(rest[0]))
	// Released with nothing due: never leased again until something changes.
	release(first[0], time.Time{}, state(first[0]))
	// Released due shortly.
	release(first[1], time.Now().Add(300*time.Millisecond), state(first[1]))
	if ls := leased(t, c, "c"); len(ls) != 0 {
		t.Fatalf("leased %+v: nothing is due", ls)
	}
	time.Sleep(400 * time.Millisecond)
	ls := leased(t, c, "c")
	if len(ls) != 1 || ls[0].TopicID != tps[1].ID {
		t.Fatalf("leased %+v, want topic %d once its due time passed", ls, tps[1].ID)
	}
	release(ls[0], time.Time{}, state(ls[0]))

	// A commit makes its partitions due once the rows settle (retention.ms, a week, is
	// further off: testCompactionDueByRetention).
	MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: tps[0].ID, Partition: 0, Records: 3, MaxTimestamp: time.Now().UnixMilli()})))
	if ls := leased(t, c, "c"); len(ls) != 0 {
		t.Fatalf("leased %+v before the commit's rows settled", ls)
	}
	compactionSettle()
	l := compactionLease(t, c, "c", tps[0].ID, 0)

	// Changes during a lease cannot move the due time (the partition is due already):
	// the release does. A commit: due when its rows settle.
	seen := state(l)
	MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: tps[0].ID, Partition: 0, Records: 3, MaxTimestamp: time.Now().UnixMilli()})))
	release(l, time.Time{}, seen)
	if ls := leased(t, c, "c"); len(ls) != 0 {
		t.Fatalf("leased %+v before the rows committed during the lease settled", ls)
	}
	compactionSettle()
	l = compactionLease(t, c, "c", tps[0].ID, 0)
	// New configs, a deleted topic, delete-records: due at once.
	for i, change := range []func(){
		func() { makeDue(t, c, tps[0].Name) },
		func() {
			if _, err := c.DeleteRecords(ctx, tps[0].ID, 0, 2); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if err := c.DeleteTopic(ctx, tps[0].Name); err != nil {
				t.Fatal(err)
			}
		},
	} {
		seen := state(l)
		change()
		release(l, time.Now().Add(time.Hour), seen)
		ls := leased(t, c, "c")
		if len(ls) != 1 || ls[0].TopicID != tps[0].ID {
			t.Fatalf("change %d during a lease: leased %+v, want topic %d at once", i, ls, tps[0].ID)
		}
		l = ls[0]
	}
	// Reclaimed: never due again.
	if err := c.ReleasePartition(ctx, l, catalog.PartitionRelease{Reclaimed: true, Due: time.Now(), Seen: state(l)}); err != nil {
		t.Fatal(err)
	}
	backlog(0)

}

// testCompactionDueOnChange: outside a lease, delete-records and a deletion each make
// a topic's partitions due at once (a config change: testCompactionPartitionLeases).
func testCompactionDueOnChange(t *testing.T, c CompactionCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "changes", 2, nil)
	MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 3, MaxTimestamp: time.Now().UnixMilli()})))
	if ls := leased(t, c, "d"); len(ls) != 0 {
		t.Fatalf("leased %+v before the commit's rows settled", ls)
	}
	if _, err := c.DeleteRecords(ctx, tp.ID, 0, 1); err != nil {
		t.Fatal(err)
	}
	if ls := leased(t, c, "d"); len(ls) != 1 || ls[0].Partition != 0 {
		t.Fatalf("after delete-records: leased %+v, want partition 0", ls)
	}
	if err := c.DeleteTopic(ctx, tp.Name); err != nil {
		t.Fatal(err)
	}
	if ls := leased(t, c, "d"); len(ls) != 1 || ls[0].Partition != 1 {
		t.Fatalf("after deletion: leased %+v, want partition 1 (0 is leased)", ls)
	}
}

// testCompactionDueByRetention: a flush makes its partitions due when retention.ms
// expires its chunk, if that comes before its rows settle — judged by the records'
// time clamped to the flush's (engine.CommitDue), and by the topic's configs as they
// are now.
func testCompactionDueByRetention(t *testing.T, c CompactionCatalog) {
	const retention = 1500 * time.Millisecond // the rows settle after 3s
	ms := strconv.FormatInt(retention.Milliseconds(), 10)
	tp := SeedTopic(t, c, "retention", 3, map[string]string{"retention.ms": ms})
	// Another gets the same retention.ms by a config change, and grows a partition
	// after it; a third has it without deleting by time; a fourth keeps the defaults.
	later := SeedTopic(t, c, "later", 1, nil)
	if _, err := c.UpdateTopic(t.Context(), later.Name, 2, map[string]string{"retention.ms": ms}); err != nil {
		t.Fatal(err)
	}
	compacted := SeedTopic(t, c, "compacted", 1, map[string]string{"retention.ms": ms, "cleanup.policy": "compact"})
	plain := SeedTopic(t, c, "plain", 1, nil)
	for _, l := range leased(t, c, "a") { // due now for the config change: nothing to do
		if err := c.ReleasePartition(t.Context(), l, catalog.PartitionRelease{}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UnixMilli()
	year9999 := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli()
	start := time.Now()
	MustCommit(t, c, Flush(NewKey(t),
		Req(B{TopicID: tp.ID, Partition: 0, Records: 2, MaxTimestamp: now}),
		Req(B{TopicID: tp.ID, Partition: 1, Records: 2, MaxTimestamp: now - time.Hour.Milliseconds()}),
		Req(B{TopicID: tp.ID, Partition: 2, Records: 2, MaxTimestamp: year9999}),
		Req(B{TopicID: later.ID, Partition: 1, Records: 2, MaxTimestamp: now}),
		Req(B{TopicID: compacted.ID, Partition: 0, Records: 2, MaxTimestamp: now}),
		Req(B{TopicID: plain.ID, Partition: 0, Records: 2, MaxTimestamp: now})))
	// Old records are expired already.
	ls := leased(t, c, "a")
	if time.Since(start) < retention && (len(ls) != 1 || ls[0].TopicID != tp.ID || ls[0].Partition != 1) {
		t.Fatalf("leased %+v at once, want partition 1 (old records) alone", ls)
	}
	time.Sleep(retention + 300*time.Millisecond - time.Since(start))
	got := map[catalog.TopicPartition]bool{}
	for _, l := range leased(t, c, "a") {
		got[catalog.TopicPartition{TopicID: l.TopicID, Partition: l.Partition}] = true
	}
	// The record stamped in year 9999 is judged by its flush's time.
	want := map[catalog.TopicPartition]bool{{TopicID: tp.ID, Partition: 0}: true, {TopicID: tp.ID, Partition: 2}: true,
		{TopicID: later.ID, Partition: 1}: true}
	if !maps.Equal(got, want) {
		t.Fatalf("leased partitions %v after retention.ms, want %v (the others wait for their rows to settle)", got, want)
	}
	compactionSettle()
	got = map[catalog.TopicPartition]bool{}
	for _, l := range leased(t, c, "a") {
		got[catalog.TopicPartition{TopicID: l.TopicID, Partition: l.Partition}] = true
	}
	want = map[catalog.TopicPartition]bool{{TopicID: compacted.ID, Partition: 0}: true, {TopicID: plain.ID, Partition: 0}: true}
	if !maps.Equal(got, want) {
		t.Fatalf("leased %v once the rows settled, want %v", got, want)
	}
}

func testCompactionJobLeases(t *testing.T, c CompactionCatalog) {
	ctx := t.Context()
	job := Name(t, "job")
	a, ok, err := c.AcquireJob(ctx, job, "a", time.Minute, 0)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if _, ok, err := c.AcquireJob(ctx, job, "b", time.Minute, 0); err != nil || ok {
		t.Fatalf("a held job was granted again: %v %v", ok, err)
	}
	if err := c.ReleaseJob(ctx, a, true); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "release twice", c.ReleaseJob(ctx, a, true), catalog.ErrCompactionConflict)
	if _, ok, err := c.AcquireJob(ctx, job, "b", time.Minute, time.Hour); err != nil || ok {
		t.Fatalf("a job done just now was granted with every=1h: %v %v", ok, err)
	}
	b, ok, err := c.AcquireJob(ctx, job, "b", time.Minute, 0)
	if err != nil || !ok || b.Token <= a.Token {
		t.Fatalf("acquire after release: %+v %v %v", b, ok, err)
	}
	if err := c.ReleaseJob(ctx, b, false); err != nil {
		t.Fatal(err)
	}
}

// compactionSeed makes four settled writer flushes of 10 records each on partition 0,
// and checks the rows' append times: their commits' by the database clock.
func compactionSeed(t *testing.T, c CompactionCatalog) (catalog.Topic, []catalog.CompactionChunk) {
	tp := SeedTopic(t, c, "swap", 1, nil)
	before := compactionNow(t, c)
	for i := range 4 {
		MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 10, MaxTimestamp: int64(1000 + 100*i)})))
		time.Sleep(2 * time.Millisecond) // distinct append times
	}
	after := compactionNow(t, c)
	compactionSettle()
	rows := compactionRows(t, c, tp.ID, 0)
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for i, r := range rows {
		if r.AppendTime < before.UnixMilli() || r.AppendTime > after.UnixMilli() || (i > 0 && r.AppendTime <= rows[i-1].AppendTime) {
			t.Fatalf("row %d appended at %d, want rising times between %d and %d", i, r.AppendTime, before.UnixMilli(), after.UnixMilli())
		}
	}
	return tp, rows
}

func compactionNow(t *testing.T, c CompactionCatalog) time.Time {
	t.Helper()
	now, err := c.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return now
}

func compactionChunks(rows []catalog.CompactionChunk) []catalog.Chunk {
	out := make([]catalog.Chunk, len(rows))
	for i, r := range rows {
		out[i] = r.Chunk
	}
	return out
}

func compactionKey(t *testing.T, c CompactionCatalog) string {
	t.Helper()
	return KeyAt(t, compactionNow(t, c))
}

// testCompactionSettleAfterMerge: a writer that settles a commit only after the settle
// age (the catalog was unreachable that long) may find the commit's rows rewritten by a
// merge. Settle must then say the outcome is unknown, not that the requests were
// refused: they were committed, and their records are readable.
func testCompactionSettleAfterMerge(t *testing.T, c CompactionCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "late-settle", 1, nil)
	first := Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 10, MaxTimestamp: 1000}))
	MustCommit(t, c, first)
	MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 10, MaxTimestamp: 1100})))
	compactionSettle()
	// Past the settle age with its rows intact, Settle still answers.
	back, err := c.Settle(ctx, first)
	if err != nil {
		t.Fatalf("settle with the rows intact: %v", err)
	}
	wantOffsets(t, "settle", back, [][]int64{{0}})
	rows := compactionRows(t, c, tp.ID, 0)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	l := compactionLease(t, c, "a", tp.ID, 0)
	if err := c.SwapChunks(ctx, catalog.Swap{Lease: l, LogStart: 0, Old: compactionChunks(rows), Key: compactionKey(t, c), Size: 2100,
		New: []catalog.ChunkRow{{TopicID: tp.ID, Partition: 0, BaseOffset: 0, LastOffset: 19, Pos: 0, Len: 2000, MaxTimestamp: 1100}}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Settle(ctx, first)
	if !errors.Is(err, catalog.ErrSettleExpired) {
		t.Fatalf("settle after a merge rewrote its rows: %+v, %v; want ErrSettleExpired (not a refusal)", res, err)
	}
}

func testCompactionSwap(t *testing.T, c CompactionCatalog) {
	ctx := t.Context()
	tp, rows := compactionSeed(t, c)
	l := compactionLease(t, c, "a", tp.ID, 0)
	before := Partition(t, c, tp.ID, 0)
	// Rows 1-3 (offsets 10-39, 3000 bytes) become two rows of one object of 1,000 bytes.
	key := compactionKey(t, c)
	s := catalog.Swap{Lease: l, LogStart: 0, Old: compactionChunks(rows[1:]), Key: key, Size: 1100, New: []catalog.ChunkRow{
		{TopicID: tp.ID, Partition: 0, BaseOffset: 10, LastOffset: 24, Pos: 0, Len: 600, MaxTimestamp: 1200},
		{TopicID: tp.ID, Partition: 0, BaseOffset: 25, LastOffset: 39, Pos: 600, Len: 400, MaxTimestamp: 1300},
	}}
	if err := c.SwapChunks(ctx, s); err != nil {
		t.Fatal(err)
	}
	after := Partition(t, c, tp.ID, 0)
	if after.Bytes != before.Bytes-3000+1000 || after.HighWatermark != 40 {
		t.Fatalf("after the swap %+v, before %+v: want bytes down by 2000", after, before)
	}
	got := CheckDense(t, c, tp.ID, 0)
	want := []catalog.Chunk{
		rows[0].Chunk,
		{TopicID: tp.ID, Partition: 0, BaseOffset: 10, LastOffset: 24, SegmentKey: key, SegmentSize: 1100, Pos: 0, Len: 600, MaxTimestamp: 1200, RealOffsets: true},
		{TopicID: tp.ID, Partition: 0, BaseOffset: 25, LastOffset: 39, SegmentKey: key, SegmentSize: 1100, Pos: 600, Len: 400, MaxTimestamp: 1300, RealOffsets: true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("chunks after the swap:\n%+v\nwant\n%+v", got, want)
	}
	// A merged row is as young, to retention, as the youngest row it replaced.
	merged := compactionRows(t, c, tp.ID, 0)
	for i, want := range []int64{rows[0].AppendTime, rows[2].AppendTime, rows[3].AppendTime} {
		if merged[i].AppendTime != want {
			t.Errorf("row %d after the swap appended at %d, want %d", i, merged[i].AppendTime, want)
		}
	}
	// Running maxima continue from the row before: a time lookup still finds them.
	for _, tc := range []struct{ ts, want int64 }{{1000, 0}, {1100, 10}, {1250, 25}, {1301, 40}} {
		if off, err := c.OffsetForTime(ctx, tp.ID, 0, tc.ts); err != nil || off != tc.want {
			t.Errorf("offset for time %d: %d, %v; want %d", tc.ts, off, err, tc.want)
		}
	}
	// The replaced objects now have no rows: 'deleting'; the new one is live.
	keys := []string{rows[1].SegmentKey, rows[2].SegmentKey, rows[3].SegmentKey, rows[0].SegmentKey, key}
	states, err := c.SegmentStates(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []catalog.SegmentState{catalog.SegmentDeleting, catalog.SegmentDeleting, catalog.SegmentDeleting, catalog.SegmentLive, catalog.SegmentLive} {
		if states[keys[i]] != want {
			t.Errorf("segment %d: state %q, want %q", i, states[keys[i]], want)
		}
	}
	// Deletable after the grace period only; forgotten once the store confirms.
	if ks, err := c.DeletableSegments(ctx, time.Hour, 100); err != nil || len(ks) != 0 {
		t.Fatalf("deletable within the grace period: %v %v", ks, err)
	}
	time.Sleep(20 * time.Millisecond)
	ks, err := c.DeletableSegments(ctx, 10*time.Millisecond, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys[:3] {
		if !slices.Contains(ks, k) {
			t.Errorf("%s not deletable after the grace period: %v", k, ks)
		}
	}
	// Rows of live segments are never forgotten.
	if n, err := c.ForgetSegments(ctx, keys); err != nil || n != 3 {
		t.Fatalf("forget: %d, %v; want the 3 deleting segments", n, err)
	}
	if states, _ = c.SegmentStates(ctx, keys); len(states) != 2 {
		t.Fatalf("states after forgetting: %v", states)
	}
	if err := c.ReleasePartition(ctx, l, catalog.PartitionRelease{}); err != nil {
		t.Fatal(err)
	}
}

func testCompactionSwapConflicts(t *testing.T, c CompactionCatalog) {
	ctx := t.Context()
	tp, rows := compactionSeed(t, c)
	l := compactionLease(t, c, "a", tp.ID, 0)
	swap := func(mod func(s *catalog.Swap)) error {
		s := catalog.Swap{Lease: l, LogStart: 0, Old: compactionChunks(rows[:2]), Key: compactionKey(t, c), Size: 500, New: []catalog.ChunkRow{
			{TopicID: tp.ID, Partition: 0, BaseOffset: 0, LastOffset: 19, Pos: 0, Len: 400, MaxTimestamp: 1100},
		}}
		mod(&s)
		return c.SwapChunks(ctx, s)
	}
	dense := CheckDense(t, c, tp.ID, 0)
	for _, tc := range []struct {
		name string
		mod  func(s *catalog.Swap)
		want error
	}{
		{"stale row", func(s *catalog.Swap) { s.Old[1].Len++ }, catalog.ErrCompactionConflict},
		{"row missing from the plan", func(s *catalog.Swap) {
			s.Old = s.Old[:1]
			s.Old[0].LastOffset = 19
		}, catalog.ErrCompactionConflict},
		{"log start moved", func(s *catalog.Swap) { s.LogStart = 5 }, catalog.ErrCompactionConflict},
		{"stale token", func(s *catalog.Swap) { s.Lease.Token-- }, catalog.ErrCompactionConflict},
		{"other holder", func(s *catalog.Swap) { s.Lease.Holder = "b" }, catalog.ErrCompactionConflict},
		{"too late", func(s *catalog.Swap) { s.Key = KeyAt(t, time.Now().Add(-time.Hour)) }, catalog.ErrCommitTooLate},
		{"not tiling", func(s *catalog.Swap) { s.New[0].LastOffset = 18 }, catalog.ErrInvalidSegment},
		{"gap", func(s *catalog.Swap) { s.New[0].BaseOffset = 1 }, catalog.ErrInvalidSegment},
		{"outside object", func(s *catalog.Swap) { s.New[0].Len = 501 }, catalog.ErrInvalidSegment},
		{"not a key", func(s *catalog.Swap) { s.Key = "merged" }, catalog.ErrInvalidSegment},
	} {
		wantErr(t, tc.name, swap(tc.mod), tc.want)
	}
	// A key younger than the orphan horizon is never fenced.
	key := compactionKey(t, c)
	if got, err := c.FenceOrphans(ctx, []string{key}); err != nil || len(got) != 0 {
		t.Fatalf("a key younger than the horizon was fenced: %v %v", got, err)
	}
	if !slices.Equal(CheckDense(t, c, tp.ID, 0), dense) {
		t.Fatal("a refused swap changed the rows")
	}
	// Rows of a segment that has not settled are not rewritten (Settle may still read
	// them back).
	MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 5})))
	fresh := compactionRows(t, c, tp.ID, 0)
	err := c.SwapChunks(ctx, catalog.Swap{Lease: l, Old: compactionChunks(fresh[3:]), Key: compactionKey(t, c), Size: 500, New: []catalog.ChunkRow{
		{TopicID: tp.ID, Partition: 0, BaseOffset: 30, LastOffset: 44, Pos: 0, Len: 400, MaxTimestamp: 1300},
	}})
	wantErr(t, "swap of an unsettled row", err, catalog.ErrCompactionConflict)
}

func testCompactionDeleteRecords(t *testing.T, c CompactionCatalog) {
	ctx := t.Context()
	tp, _ := compactionSeed(t, c)
	// 4 rows of 10 records, 1,000 bytes each. Inside the third row: the first two go.
	info, err := c.DeleteRecords(ctx, tp.ID, 0, 25)
	if err != nil {
		t.Fatal(err)
	}
	if info.LogStartOffset != 25 || info.HighWatermark != 40 || info.Bytes != 2000 {
		t.Fatalf("after delete records: %+v, want log start 25, 2000 bytes", info)
	}
	if got := Partition(t, c, tp.ID, 0); got != info {
		t.Fatalf("partition %+v, delete records answered %+v", got, info)
	}
	_, err = c.Chunks(ctx, tp.ID, 0, 24, 1<<20)
	wantErr(t, "chunks below the new log start", err, catalog.ErrOffsetOutOfRange)
	l, err := c.Chunks(ctx, tp.ID, 0, 25, 1<<20)
	if err != nil || len(l.Chunks) != 2 || l.Chunks[0].BaseOffset != 20 {
		t.Fatalf("chunks at the log start: %+v, %v", l, err)
	}
	if info, err = c.DeleteRecords(ctx, tp.ID, 0, 10); err != nil || info.LogStartOffset != 25 {
		t.Fatalf("delete records backwards: %+v, %v", info, err)
	}
	_, err = c.DeleteRecords(ctx, tp.ID, 0, 41)
	wantErr(t, "past the high watermark", err, catalog.ErrOffsetOutOfRange)
	_, err = c.DeleteRecords(ctx, tp.ID, 1, 0)
	wantErr(t, "missing partition", err, catalog.ErrPartitionOutOfRange)
	_, err = c.DeleteRecords(ctx, tp.ID+1_000_000, 0, 0)
	wantErr(t, "missing topic", err, catalog.ErrTopicNotFound)
	if info, err = c.DeleteRecords(ctx, tp.ID, 0, 40); err != nil || info.LogStartOffset != 40 || info.Bytes != 0 {
		t.Fatalf("delete everything: %+v, %v", info, err)
	}
}

func testCompactionDropChunks(t *testing.T, c CompactionCatalog) {
	ctx := t.Context()
	tp, rows := compactionSeed(t, c)
	// A fifth flush, not settled yet, below the log start too.
	MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 10})))
	if _, err := c.DeleteRecords(ctx, tp.ID, 0, 50); err != nil {
		t.Fatal(err)
	}
	l := compactionLease(t, c, "a", tp.ID, 0)
	dropped, pending, err := c.DropChunks(ctx, l)
	if err != nil || dropped != 4 || pending != 1 {
		t.Fatalf("drop: %d dropped, %d pending, %v; want 4 and 1 (the unsettled row)", dropped, pending, err)
	}
	states, err := c.SegmentStates(ctx, []string{rows[0].SegmentKey, rows[3].SegmentKey})
	if err != nil || states[rows[0].SegmentKey] != catalog.SegmentDeleting || states[rows[3].SegmentKey] != catalog.SegmentDeleting {
		t.Fatalf("states after dropping: %v %v", states, err)
	}
	compactionSettle()
	if dropped, pending, err = c.DropChunks(ctx, l); err != nil || dropped != 1 || pending != 0 {
		t.Fatalf("drop once settled: %d dropped, %d pending, %v; want 1 and 0", dropped, pending, err)
	}
	// A stale lease drops nothing.
	l.Token--
	_, _, err = c.DropChunks(ctx, l)
	wantErr(t, "drop with a stale token", err, catalog.ErrCompactionConflict)
}

func testCompactionReclaimDeletedTopic(t *testing.T, c CompactionCatalog) {
	ctx := t.Context()
	tp, rows := compactionSeed(t, c)
	if err := c.DeleteTopic(ctx, tp.Name); err != nil {
		t.Fatal(err)
	}
	l := compactionLease(t, c, "a", tp.ID, 0)
	st, err := c.CompactionState(ctx, l)
	if err != nil || !st.Deleted || st.Topic.ID != tp.ID {
		t.Fatalf("state of a deleted topic: %+v, %v", st, err)
	}
	_, err = c.DeleteRecords(ctx, tp.ID, 0, 1)
	wantErr(t, "delete records of a deleted topic", err, catalog.ErrTopicNotFound)
	dropped, pending, err := c.DropChunks(ctx, l)
	if err != nil || dropped != 4 || pending != 0 {
		t.Fatalf("drop: %d dropped, %d pending, %v", dropped, pending, err)
	}
	states, err := c.SegmentStates(ctx, []string{rows[0].SegmentKey})
	if err != nil || states[rows[0].SegmentKey] != catalog.SegmentDeleting {
		t.Fatalf("state: %v %v", states, err)
	}
	if err := c.ReleasePartition(ctx, l, catalog.PartitionRelease{Checkpoint: st.Checkpoint, Reclaimed: true, Seen: &st}); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		ls, err := c.AcquirePartitions(ctx, "b", time.Minute, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.TopicID == tp.ID {
				t.Fatal("a reclaimed partition was leased again")
			}
		}
		if len(ls) == 0 {
			break
		}
	}
}

func testCompactionFenceOrphans(t *testing.T, c CompactionCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "orphans", 1, nil)
	horizon, err := c.OrphanHorizon(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now, err := c.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := now.Sub(horizon); d < catalog.SettleAge(CompactionCommitTimeout) || d > catalog.SettleAge(CompactionCommitTimeout)+time.Second {
		t.Fatalf("horizon %s before now, want %s", d, catalog.SettleAge(CompactionCommitTimeout))
	}
	old := KeyAt(t, now.Add(-time.Hour))
	young := KeyAt(t, now)
	committed := KeyAt(t, now)
	MustCommit(t, c, Flush(committed, Req(B{TopicID: tp.ID, Partition: 0, Records: 1})))
	compactionSettle()
	fenced, err := c.FenceOrphans(ctx, []string{old, committed, "not-a-key"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fenced, []string{old}) {
		t.Fatalf("fenced %v, want only the old orphan", fenced)
	}
	// Fencing is idempotent: an aborted key is answered again.
	if fenced, err = c.FenceOrphans(ctx, []string{old}); err != nil || !slices.Equal(fenced, []string{old}) {
		t.Fatalf("fence again: %v %v", fenced, err)
	}
	states, err := c.SegmentStates(ctx, []string{old, young, committed})
	if err != nil {
		t.Fatal(err)
	}
	if states[old] != catalog.SegmentAborted || states[committed] != catalog.SegmentLive || len(states) != 2 {
		t.Fatalf("states %v", states)
	}
	_, err = c.Commit(ctx, Flush(old, Req(B{TopicID: tp.ID, Partition: 0, Records: 1})))
	if err == nil {
		t.Fatal("a fenced key committed")
	}
	aborted, err := c.AbortedSegments(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(aborted, old) {
		// Fenced just now: the row is younger than the horizon.
		t.Fatalf("aborted row listed before it aged: %v", aborted)
	}
	compactionSettle()
	if aborted, err = c.AbortedSegments(ctx, 1000); err != nil || !slices.Contains(aborted, old) {
		t.Fatalf("aborted segments %v, %v; want %s", aborted, err, old)
	}
	if n, err := c.ForgetSegments(ctx, []string{old, committed}); err != nil || n != 1 {
		t.Fatalf("forget: %d, %v; want only the aborted row", n, err)
	}
	if states, _ = c.SegmentStates(ctx, []string{old}); len(states) != 0 {
		t.Fatalf("the aborted row survived: %v", states)
	}
}

func testCompactionMarkUnreferenced(t *testing.T, c CompactionCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "unreferenced", 1, nil)
	// A flush whose only request is refused: its segment row is live without rows.
	key := NewKey(t)
	res, err := c.Commit(ctx, Flush(key, Req(B{TopicID: tp.ID, Partition: 9, Records: 1})))
	if err != nil || res[0].Err == nil {
		t.Fatalf("commit to a missing partition: %v %v", res, err)
	}
	if n, err := c.MarkUnreferenced(ctx, 1000); err != nil {
		t.Fatal(err)
	} else if st, _ := c.SegmentStates(ctx, []string{key}); st[key] != catalog.SegmentLive {
		t.Fatalf("an unsettled segment was marked (%d): %v", n, st)
	}
	compactionSettle()
	var wg sync.WaitGroup
	for range 2 { // two at once mark it once
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.MarkUnreferenced(ctx, 1000); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if st, _ := c.SegmentStates(ctx, []string{key}); st[key] != catalog.SegmentDeleting {
		t.Fatalf("state %v, want deleting", st)
	}
}
