package broker

import (
	"context"
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/reader"
)

// The core's calls for config changes, partition growth, the multi-partition long-poll,
// offsets by timestamp at record granularity and pipelined produce (what the Kafka
// protocol needs beyond the HTTP API), over the real roles.

func TestAlterConfigs(t *testing.T) {
	b, _ := newRealCore(t)
	ctx, who := t.Context(), Anonymous
	if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: "c", Configs: map[string]string{"retention.ms": "1000", "max.message.bytes": "500"}}); err != nil {
		t.Fatal(err)
	}
	alter := func(req AlterConfigsRequest) (catalog.Topic, error) { return b.AlterConfigs(ctx, who, "c", req) }
	set := func(name, v string) ConfigChange { return ConfigChange{Name: name, Op: ConfigSet, Value: v} }

	tp, err := alter(AlterConfigsRequest{Changes: []ConfigChange{set("retention.ms", "2000"), {Name: "cleanup.policy", Op: ConfigAppend, Value: "compact"}}})
	if err != nil || !reflect.DeepEqual(tp.Configs, map[string]string{"retention.ms": "2000", "max.message.bytes": "500", "cleanup.policy": "compact,delete"}) {
		t.Fatalf("set and append: %v %+v", err, tp.Configs)
	}
	tp, err = alter(AlterConfigsRequest{Changes: []ConfigChange{{Name: "cleanup.policy", Op: ConfigSubtract, Value: "delete"}, {Name: "max.message.bytes", Op: ConfigDelete}}})
	if err != nil || !reflect.DeepEqual(tp.Configs, map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}) {
		t.Fatalf("subtract and delete: %v %+v", err, tp.Configs)
	}
	// Validate-only answers the result and changes nothing.
	tp, err = alter(AlterConfigsRequest{Changes: []ConfigChange{set("retention.ms", "5")}, ValidateOnly: true})
	if err != nil || tp.Configs["retention.ms"] != "5" {
		t.Fatalf("validate only: %v %+v", err, tp.Configs)
	}
	if cur, _ := b.Topic(ctx, who, "c"); cur.Configs["retention.ms"] != "2000" {
		t.Fatalf("validate-only changed retention.ms to %s", cur.Configs["retention.ms"])
	}
	// Replace: the changes are the explicit configs from now on.
	tp, err = alter(AlterConfigsRequest{Changes: []ConfigChange{set("segment.bytes", "2097152")}, Replace: true})
	if err != nil || !reflect.DeepEqual(tp.Configs, map[string]string{"segment.bytes": "2097152"}) {
		t.Fatalf("replace: %v %+v", err, tp.Configs)
	}
	// Refusals change nothing.
	for _, tc := range []struct {
		name string
		req  AlterConfigsRequest
		code Code
	}{
		{"unknown config", AlterConfigsRequest{Changes: []ConfigChange{set("no.such", "1")}}, CodeInvalidConfig},
		{"bad value", AlterConfigsRequest{Changes: []ConfigChange{set("retention.ms", "soon")}}, CodeInvalidConfig},
		{"append to a non-list", AlterConfigsRequest{Changes: []ConfigChange{{Name: "retention.ms", Op: ConfigAppend, Value: "1"}}}, CodeInvalidConfig},
		{"subtract everything", AlterConfigsRequest{Changes: []ConfigChange{{Name: "cleanup.policy", Op: ConfigSubtract, Value: "delete"}}}, CodeInvalidConfig},
		{"named twice", AlterConfigsRequest{Changes: []ConfigChange{set("retention.ms", "1"), set("retention.ms", "2")}}, CodeInvalidRequest},
		{"replace with a delete", AlterConfigsRequest{Changes: []ConfigChange{{Name: "retention.ms", Op: ConfigDelete}}, Replace: true}, CodeInvalidRequest},
		{"unknown operation", AlterConfigsRequest{Changes: []ConfigChange{{Name: "retention.ms", Op: 9}}}, CodeInvalidRequest},
	} {
		wantCode(t, second(alter(tc.req)), tc.code)
		if cur, _ := b.Topic(ctx, who, "c"); !reflect.DeepEqual(cur.Configs, map[string]string{"segment.bytes": "2097152"}) {
			t.Fatalf("%s changed the configs to %+v", tc.name, cur.Configs)
		}
	}
	wantCode(t, second(b.AlterConfigs(ctx, who, "nope", AlterConfigsRequest{})), CodeTopicNotFound)

	// Partitions only grow; validate-only does not.
	if tp, err := b.GrowPartitions(ctx, who, "c", 4, true); err != nil || tp.Partitions != 4 {
		t.Fatalf("validate grow: %v %+v", err, tp)
	}
	if cur, _ := b.Topic(ctx, who, "c"); cur.Partitions != 1 {
		t.Fatalf("validate-only grew the topic to %d", cur.Partitions)
	}
	if tp, err := b.GrowPartitions(ctx, who, "c", 3, false); err != nil || tp.Partitions != 3 {
		t.Fatalf("grow: %v %+v", err, tp)
	}
	wantCode(t, second(b.GrowPartitions(ctx, who, "c", 3, false)), CodeInvalidPartitionCount)
	wantCode(t, second(b.GrowPartitions(ctx, who, "c", catalog.MaxPartitions+1, false)), CodeInvalidPartitionCount)
	// Topics by id.
	cur, _ := b.Topic(ctx, who, "c")
	if byID, err := b.TopicByUUID(ctx, who, cur.UUID); err != nil || byID.Name != "c" {
		t.Fatalf("by id: %v %+v", err, byID)
	}
	wantCode(t, second(b.TopicByUUID(ctx, who, catalog.NewUUID())), CodeTopicNotFound)
}

func TestFetchPartitions(t *testing.T) {
	b, _ := newRealCore(t)
	ctx, who := t.Context(), Anonymous
	if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: "f", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	var size int
	for range 3 {
		body := batchtest.Batch(t, batchtest.Some(2, now), 0, -1, -1, -1)
		size = len(body)
		for p := range int32(2) {
			if _, err := b.ProduceBatches(ctx, who, BatchesRequest{Topic: "f", Partition: p, Batches: append([]byte(nil), body...)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	parts := func(offsets ...int64) []FetchRequest {
		var out []FetchRequest
		for p, o := range offsets {
			out = append(out, FetchRequest{Topic: "f", Partition: int32(p), Offset: o})
		}
		return out
	}
	got, err := b.FetchPartitions(ctx, who, PartitionsFetch{Partitions: parts(3, 0)})
	if err != nil || got[0].Err != nil || len(got[0].Batches) != 2 || got[0].BaseOffsets[0] != 2 || len(got[1].Batches) != 3 || got[0].HighWatermark != 6 {
		t.Fatalf("from 3 and 0: %v %+v", err, got)
	}
	// The answer's byte limit, in partition order: the first batch always.
	got, err = b.FetchPartitions(ctx, who, PartitionsFetch{Partitions: parts(0, 0), MaxBytes: int64(size + 1)})
	if err != nil || len(got[0].Batches) != 1 || len(got[1].Batches) != 0 || got[0].NextOffset != 2 || got[1].NextOffset != 0 {
		t.Fatalf("limited to one batch: %v %+v", err, got)
	}
	got, _ = b.FetchPartitions(ctx, who, PartitionsFetch{Partitions: parts(0, 0), MaxBytes: 1})
	if len(got[0].Batches) != 1 || len(got[1].Batches) != 0 {
		t.Fatalf("a limit below the first batch: %+v", got)
	}
	// One partition refused: answered at once, the others still answer.
	start := time.Now()
	got, _ = b.FetchPartitions(ctx, who, PartitionsFetch{Partitions: parts(7, 6), Wait: 5 * time.Second})
	if c := got[0].Err.(*Error).Code; c != CodeOffsetOutOfRange || got[1].Err != nil || time.Since(start) > 2*time.Second {
		t.Fatalf("offset 7 of 6: %v after %v, want offset_out_of_range at once", got[0].Err, time.Since(start))
	}
	got, _ = b.FetchPartitions(ctx, who, PartitionsFetch{Partitions: []FetchRequest{{Topic: "nope"}, {Topic: "f", Offset: 0}}})
	if got[0].Err.(*Error).Code != CodeTopicNotFound || len(got[1].Batches) != 3 {
		t.Fatalf("unknown topic beside a good one: %+v", got)
	}
	// A long-poll at the high watermarks, woken by a commit on either partition: the
	// commit comes once the long-poll watches its partitions.
	watching := make(chan struct{}, 1)
	b.d.Watcher = signalWatch{b.d.Watcher, watching}
	done := make(chan []PartitionBatches, 1)
	go func() {
		got, _ := b.FetchPartitions(context.Background(), who, PartitionsFetch{Partitions: parts(6, 6), Wait: 10 * time.Second})
		done <- got
	}()
	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not watch its partitions")
	}
	select {
	case got := <-done:
		t.Fatalf("the long-poll answered before any commit: %+v", got)
	default:
	}
	start = time.Now()
	if _, err := b.ProduceBatches(ctx, who, BatchesRequest{Topic: "f", Partition: 1, Batches: batchtest.Batch(t, batchtest.Some(1, now), 0, -1, -1, -1)}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if len(got[1].Batches) != 1 || len(got[0].Batches) != 0 {
			t.Fatalf("woken with %+v", got)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("woken %v after the commit", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long-poll was not woken by a commit")
	}
	// MinBytes unreached: the answer comes at the wait's end, with what there is.
	start = time.Now()
	got, _ = b.FetchPartitions(ctx, who, PartitionsFetch{Partitions: parts(5, 6), MinBytes: 1 << 20, Wait: 300 * time.Millisecond})
	if d := time.Since(start); d < 250*time.Millisecond || len(got[0].Batches) != 1 {
		t.Fatalf("MinBytes unreached: after %v with %+v", d, got)
	}
}

// TestOffsetForTimestamp: the first record at or after a time, at record granularity,
// the same through OffsetForTimestamp, ListOffset and a group's reset.
func TestOffsetForTimestamp(t *testing.T) {
	b, _ := newRealCore(t)
	ctx, who := t.Context(), Anonymous
	for _, name := range []string{"ts", "lat"} {
		cfg := map[string]string{}
		if name == "lat" {
			cfg["message.timestamp.type"] = "LogAppendTime"
		}
		if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: name, Configs: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now().Add(-time.Hour).UnixMilli()
	produce := func(topic string, ts ...int64) {
		t.Helper()
		recs := make([]batchtest.Record, len(ts))
		for i, d := range ts {
			recs[i] = batchtest.Record{Value: []byte{byte(i)}, Ts: base + d}
		}
		if _, err := b.ProduceBatches(ctx, who, BatchesRequest{Topic: topic, Partition: 0, Batches: batchtest.Batch(t, recs, 0, -1, -1, -1)}); err != nil {
			t.Fatal(err)
		}
	}
	produce("ts", 10, 30, 20) // offsets 0-2
	produce("ts", 50)         // 3
	produce("ts", 40, 45)     // 4-5
	for _, tc := range []struct {
		ts, offset, at int64
		found          bool
	}{
		{base + 15, 1, base + 30, true},
		{base + 20, 1, base + 30, true},
		{base + 31, 3, base + 50, true},
		{base + 51, 0, 0, false},
		{MaxTimestamp, 3, base + 50, true},
	} {
		got, err := b.OffsetForTimestamp(ctx, who, "ts", 0, tc.ts)
		if err != nil || got != (TimestampOffset{Offset: tc.offset, Timestamp: tc.at, Found: tc.found}) {
			t.Errorf("at %d: %+v %v, want offset %d timestamp %d found %v", tc.ts, got, err, tc.offset, tc.at, tc.found)
		}
	}
	// Positioning by time — a reader's ListOffset and a group's reset — lands on the
	// same record, not on the first offset of the batch holding it (offsets 0-2 are one
	// batch: time +15 is offset 1).
	for _, tc := range []struct{ ts, offset int64 }{{base + 15, 1}, {base + 20, 1}, {base + 31, 3}, {base + 41, 3}, {base + 51, 6}} {
		if got, err := b.ListOffset(ctx, who, "ts", 0, tc.ts); err != nil || got != tc.offset {
			t.Errorf("ListOffset at +%d: %d %v, want %d", tc.ts-base, got, err, tc.offset)
		}
		got, err := b.ResetOffsets(ctx, who, "g", ResetRequest{Topic: "ts", To: tc.ts, Create: true})
		if err != nil || len(got) != 1 || got[0].Offset != tc.offset {
			t.Errorf("group reset to +%d: %+v %v, want offset %d", tc.ts-base, got, err, tc.offset)
		}
	}
	wantCode(t, second(b.OffsetForTimestamp(ctx, who, "ts", 0, -7)), CodeInvalidTimestamp)
	wantCode(t, second(b.OffsetForTimestamp(ctx, who, "ts", 3, 0)), CodePartitionOutOfRange)
	// Below the log start nothing is found: the first record at or after it is.
	if _, err := b.DeleteRecords(ctx, who, "ts", 0, 2); err != nil {
		t.Fatal(err)
	}
	if got, err := b.OffsetForTimestamp(ctx, who, "ts", 0, base); err != nil || got.Offset != 2 {
		t.Fatalf("after deleting below 2: %+v %v", got, err)
	}
	// An empty partition, and LogAppendTime (every record the append time).
	if got, err := b.OffsetForTimestamp(ctx, who, "lat", 0, MaxTimestamp); err != nil || got.Found {
		t.Fatalf("empty partition: %+v %v", got, err)
	}
	before := time.Now().UnixMilli()
	produce("lat", 1, 2)
	got, err := b.OffsetForTimestamp(ctx, who, "lat", 0, before-1000)
	if err != nil || !got.Found || got.Offset != 0 || got.Timestamp < before-1000 {
		t.Fatalf("LogAppendTime: %+v %v", got, err)
	}
}

// Prepared batches submitted in order take offsets in that order, whatever order they
// were prepared in; the leader epoch a client sent is the broker's to set; a request
// the caller stops waiting for is an unknown outcome, not an error of the server.
func TestPreparedBatches(t *testing.T) {
	b, _ := newRealCore(t)
	ctx, who := t.Context(), Anonymous
	if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: "p"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	var ps []*PreparedBatches
	for i := range 5 {
		body := batchtest.Batch(t, []batchtest.Record{{Value: []byte{byte(i)}, Ts: now}}, 0, -1, -1, -1)
		binary.BigEndian.PutUint32(body[12:], 0) // as librdkafka sends it
		p, err := b.PrepareBatches(ctx, who, BatchesRequest{Topic: "p", Batches: body})
		if err != nil {
			t.Fatalf("prepare %d: %v", i, err)
		}
		ps = append(ps, p)
	}
	for _, i := range []int{3, 0, 4, 1, 2} {
		if err := ps[i].Submit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []int64{1, 3, 4, 0, 2} {
		r, err := ps[i].Wait(ctx)
		if err != nil || r.BaseOffset != want {
			t.Fatalf("request %d: %+v %v, want offset %d (submit order)", i, r, err, want)
		}
	}
	p, err := b.PrepareBatches(ctx, who, BatchesRequest{Topic: "p", Batches: batchtest.Batch(t, batchtest.Some(1, now), 0, -1, -1, -1)})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, second(p.Wait(ctx)), CodeInternal)
	if err := p.Submit(ctx); err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	wantCode(t, second(p.Wait(gone)), CodeCommitOutcomeUnknown)
}

// signalWatch is a Watcher that says on watching when a fetch has begun to watch.
type signalWatch struct {
	Watcher
	watching chan struct{}
}

func (s signalWatch) Watch(ps []reader.WatchPartition) *reader.Watch {
	w := s.Watcher.Watch(ps)
	select {
	case s.watching <- struct{}{}:
	default:
	}
	return w
}
