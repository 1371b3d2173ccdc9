package broker

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// The core over real roles: a SQLite catalog, the filesystem store, a writer and a
// reader, so that the producer, sequence and group-offset paths run through the
// catalog's own checks.

func newRealCore(t testing.TB) (*Broker, *sqlite.Catalog) {
	t.Helper()
	dir := t.TempDir()
	cat, err := sqlite.Open(t.Context(), filepath.Join(dir, "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	store, err := fs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(store, cat, writer.Config{Linger: 2 * time.Millisecond}, nil, nil)
	rd := reader.New(store, cat, reader.Config{PollInterval: 20 * time.Millisecond}, nil, nil)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = w.Run(ctx); done <- struct{}{} }()
	go func() { _ = rd.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { stop(); <-done; <-done })
	b := New(Config{}, Deps{Catalog: cat, Writer: w, Submitter: w, Reader: rd, Batches: rd, Watcher: rd, Producers: cat, Records: cat, Groups: cat, Connect: cat, Classic: cat, Share: cat})
	return b, cat
}

func TestTopicAdmin(t *testing.T) {
	b, _ := newRealCore(t)
	ctx := t.Context()
	who := Anonymous
	if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: "t", Partitions: 2, Configs: map[string]string{"retention.ms": "1000"}, ValidateOnly: true}); err != nil {
		t.Fatalf("validate only: %v", err)
	}
	wantCode(t, second(b.Topic(ctx, who, "t")), CodeTopicNotFound)
	tp, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: "t", Configs: map[string]string{"retention.ms": "1000"}})
	if err != nil || tp.Partitions != DefaultPartitions {
		t.Fatalf("create: %v %+v", err, tp)
	}
	wantCode(t, second(b.CreateTopic(ctx, who, CreateTopicRequest{Name: "t", ValidateOnly: true})), CodeTopicExists)
	wantCode(t, second(b.CreateTopic(ctx, who, CreateTopicRequest{Name: "t"})), CodeTopicExists)
	er := wantCode(t, second(b.CreateTopic(ctx, who, CreateTopicRequest{Name: "u", Configs: map[string]string{"retention.ms": "soon"}})), CodeInvalidConfig)
	if er.Details["config"] != "retention.ms" {
		t.Errorf("details %v", er.Details)
	}
	wantCode(t, second(b.CreateTopic(ctx, who, CreateTopicRequest{Name: "u", Partitions: catalog.MaxPartitions + 1})), CodeInvalidPartitionCount)
	wantCode(t, second(b.CreateTopic(ctx, who, CreateTopicRequest{Name: ".."})), CodeInvalidTopicName)

	tp, err = b.UpdateTopic(ctx, who, "t", TopicUpdate{Partitions: 3, Configs: map[string]string{"retention.ms": "", "cleanup.policy": "compact"}})
	if err != nil || tp.Partitions != 3 || !reflect.DeepEqual(tp.Configs, map[string]string{"cleanup.policy": "compact"}) {
		t.Fatalf("update: %v %+v", err, tp)
	}
	er = wantCode(t, second(b.UpdateTopic(ctx, who, "t", TopicUpdate{Configs: map[string]string{"no.such": ""}})), CodeInvalidConfig)
	if er.Details["config"] != "no.such" {
		t.Errorf("details %v", er.Details)
	}
	wantCode(t, second(b.UpdateTopic(ctx, who, "t", TopicUpdate{Configs: map[string]string{"max.message.bytes": "0"}})), CodeInvalidConfig)
	wantCode(t, second(b.UpdateTopic(ctx, who, "t", TopicUpdate{Partitions: 1})), CodeInvalidPartitionCount)
	if same, err := b.UpdateTopic(ctx, who, "t", TopicUpdate{}); err != nil || same.Partitions != 3 {
		t.Fatalf("an empty update: %v %+v", err, same)
	}
	// The cache was dropped: produce sees the new partition and the new policy at once.
	wantCode(t, second(b.Produce(ctx, who, ProduceRequest{Records: []Record{{Topic: "t", Partition: 2, Timestamp: -1}}})), CodeInvalidRecord)

	cfgs, err := b.DescribeConfigs(ctx, who, "t")
	if err != nil || len(cfgs) != len(catalog.ConfigKeys()) {
		t.Fatalf("describe configs: %v %+v", err, cfgs)
	}
	for _, c := range cfgs {
		switch c.Name {
		case "cleanup.policy":
			if c.Value != "compact" || c.Default {
				t.Errorf("%+v", c)
			}
		case "retention.ms":
			if c.Value != "604800000" || !c.Default {
				t.Errorf("%+v", c)
			}
		}
	}
	ps, err := b.Partitions(ctx, who, "t")
	if err != nil || len(ps) != 3 || ps[2].Partition != 2 {
		t.Fatalf("partitions: %v %+v", err, ps)
	}
	if ts, err := b.Topics(ctx, who); err != nil || len(ts) != 1 {
		t.Fatalf("topics: %v %+v", err, ts)
	}
	if err := b.DeleteTopic(ctx, who, "t"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, b.DeleteTopic(ctx, who, "t"), CodeTopicNotFound)
	wantCode(t, second(b.LookupTopic(ctx, who, "t")), CodeTopicNotFound)
}

func TestIdempotenceAndGroupOffsets(t *testing.T) {
	b, _ := newRealCore(t)
	ctx := t.Context()
	who := Anonymous
	if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: "out", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	tid := "copier"
	p1, err := b.InitProducer(ctx, who, InitProducerRequest{TransactionalID: &tid})
	if err != nil {
		t.Fatal(err)
	}
	recs := func(vals ...string) []Record {
		var out []Record
		for _, v := range vals {
			out = append(out, Record{Topic: "out", Partition: 1, Value: []byte(v), Timestamp: -1})
		}
		return out
	}
	first := ProduceRequest{Records: recs("a", "b"), Producer: &p1, Sequences: map[string]map[int32]int32{"out": {1: 0}},
		GroupOffsets: &catalog.OffsetCommit{Group: "g", Offsets: []catalog.CommitOffset{{Topic: "out", Partition: 0, Offset: 0}}}}
	res, err := b.Produce(ctx, who, first)
	if err != nil || res.Duplicate || len(res.Offsets) != 2 || res.Offsets[1].Offset != 1 {
		t.Fatalf("first: %v %+v", err, res)
	}
	offs, err := b.GroupOffsets(ctx, who, "g")
	if err != nil || len(offs) != 1 || offs[0].Offset != 0 {
		t.Fatalf("group offsets committed with the records: %v %+v", err, offs)
	}
	again, err := b.Produce(ctx, who, first)
	if err != nil || !again.Duplicate || !reflect.DeepEqual(again.Offsets, res.Offsets) {
		t.Fatalf("a retry: %v %+v, want the original offsets %+v", err, again, res)
	}
	gap := ProduceRequest{Records: recs("c"), Producer: &p1, Sequences: map[string]map[int32]int32{"out": {1: 5}}}
	er := wantCode(t, second(b.Produce(ctx, who, gap)), CodeOutOfOrderSequence)
	if er.Details["expected_sequence"] != int32(2) || er.Details["topic"] != "out" {
		t.Errorf("out of order details %v", er.Details)
	}

	// A new instance fences the old one.
	p2, err := b.InitProducer(ctx, who, InitProducerRequest{TransactionalID: &tid})
	if err != nil || p2.ID != p1.ID || p2.Epoch != p1.Epoch+1 {
		t.Fatalf("re-init: %v %+v after %+v", err, p2, p1)
	}
	next := ProduceRequest{Records: recs("c"), Producer: &p1, Sequences: map[string]map[int32]int32{"out": {1: 2}}}
	wantCode(t, second(b.Produce(ctx, who, next)), CodeProducerFenced)
	wantCode(t, second(b.InitProducer(ctx, who, InitProducerRequest{TransactionalID: &tid, Current: &p1})), CodeProducerFenced)
	empty := ""
	wantCode(t, second(b.InitProducer(ctx, who, InitProducerRequest{TransactionalID: &empty})), CodeInvalidTransactionalID)
	wantCode(t, second(b.InitProducer(ctx, who, InitProducerRequest{Current: &catalog.Producer{ID: -1}})), CodeInvalidRequest)
	// A transactional producer's identity without its transactional id: a new producer.
	if np, err := b.InitProducer(ctx, who, InitProducerRequest{Current: &p2}); err != nil || np.ID == p2.ID || np.Epoch != 0 {
		t.Fatalf("init from another's identity: %+v %v, want a new id", np, err)
	}

	// Idempotent batches: the producer fields of the batches, a retry answered alike.
	plain, err := b.InitProducer(ctx, who, InitProducerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	body := batchtest.Batch(t, batchtest.Some(3, time.Now().UnixMilli()), 0, plain.ID, plain.Epoch, 0)
	br, err := b.ProduceBatches(ctx, who, BatchesRequest{Topic: "out", Partition: 0, Batches: body})
	if err != nil || br.LastOffset-br.BaseOffset != 2 || br.Duplicate {
		t.Fatalf("batches: %v %+v", err, br)
	}
	if br2, err := b.ProduceBatches(ctx, who, BatchesRequest{Topic: "out", Partition: 0, Batches: body}); err != nil || !br2.Duplicate || br2.BaseOffset != br.BaseOffset {
		t.Fatalf("batches again: %v %+v", err, br2)
	}
	wantCode(t, second(b.ProduceBatches(ctx, who, BatchesRequest{Topic: "out", Partition: 0, MaxRecords: 2, Batches: body})), CodeTooManyRecords)

	// Offsets in a request whose group has a live member, committed from outside it:
	// refused, and the records with them are not written.
	if _, err := b.Heartbeat(ctx, who, catalog.Heartbeat{Group: "g", MemberID: "m", Topics: []string{"out"}}); err != nil {
		t.Fatal(err)
	}
	hw, err := b.ListOffset(ctx, who, "out", 1, Latest)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Produce(ctx, who, ProduceRequest{Records: recs("x"), GroupOffsets: &catalog.OffsetCommit{Group: "g", Offsets: []catalog.CommitOffset{{Topic: "out", Partition: 0, Offset: 1}}}})
	if e := AsError("produce", err); err == nil || e.Retriable() {
		t.Fatalf("offsets from outside a live group: %v", err)
	}
	if hw2, err := b.ListOffset(ctx, who, "out", 1, Latest); err != nil || hw2 != hw {
		t.Fatalf("high watermark %d after a refused request, was %d (%v)", hw2, hw, err)
	}
}

func TestFetchAndOffsets(t *testing.T) {
	b, _ := newRealCore(t)
	ctx := t.Context()
	who := Anonymous
	if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	var recs []Record
	for i := range 5 {
		recs = append(recs, Record{Topic: "t", Partition: 0, Value: []byte{byte('a' + i)}, Timestamp: now + int64(i)})
	}
	if _, err := b.Produce(ctx, who, ProduceRequest{Records: recs}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Fetch(ctx, who, FetchRequest{Topic: "t", Offset: 1})
	if err != nil || len(res.Records) != 4 || res.Records[0].Offset != 1 || string(res.Records[0].Value) != "b" || res.HighWatermark != 5 {
		t.Fatalf("fetch: %v %+v", err, res)
	}
	raw, err := b.FetchBatches(ctx, who, FetchRequest{Topic: "t", Offset: 0})
	if err != nil || len(raw.Batches) != 1 || raw.BaseOffsets[0] != 0 || raw.NextOffset != 5 {
		t.Fatalf("fetch batches: %v %+v", err, raw)
	}
	// A long poll at the high watermark ends with nothing.
	start := time.Now()
	if res, err := b.Fetch(ctx, who, FetchRequest{Topic: "t", Offset: 5, Wait: 50 * time.Millisecond}); err != nil || len(res.Records) != 0 || time.Since(start) < 40*time.Millisecond {
		t.Fatalf("long poll: %v %+v after %s", err, res, time.Since(start))
	}
	er := wantCode(t, second(b.Fetch(ctx, who, FetchRequest{Topic: "t", Offset: 9})), CodeOffsetOutOfRange)
	if er.Details["high_watermark"] != int64(5) {
		t.Errorf("details %v", er.Details)
	}
	wantCode(t, second(b.Fetch(ctx, who, FetchRequest{Topic: "t", Partition: 1})), CodePartitionOutOfRange)
	wantCode(t, second(b.Fetch(ctx, who, FetchRequest{Topic: "t", MaxBytes: -1})), CodeInvalidParameter)

	for at, want := range map[int64]int64{Earliest: 0, Latest: 5, now: 0, now + 1000: 5} {
		if got, err := b.ListOffset(ctx, who, "t", 0, at); err != nil || got != want {
			t.Errorf("list offset at %d: %d %v, want %d", at, got, err, want)
		}
	}
	wantCode(t, second(b.ListOffset(ctx, who, "t", 0, -3)), CodeInvalidTimestamp)

	wantCode(t, second(b.DeleteRecords(ctx, who, "t", 0, -2)), CodeInvalidOffset)
	wantCode(t, second(b.DeleteRecords(ctx, who, "t", 0, 6)), CodeOffsetOutOfRange)
	pi, err := b.DeleteRecords(ctx, who, "t", 0, -1)
	if err != nil || pi.LogStartOffset != 5 {
		t.Fatalf("delete records: %v %+v", err, pi)
	}
	_, err = b.Fetch(ctx, who, FetchRequest{Topic: "t", Offset: 0})
	wantCode(t, err, CodeOffsetOutOfRange)
	if want := `offset 0 is below the log start offset 5 of partition 0 of topic "t": use an offset from 5 to 5`; err.(*Error).Message != want {
		t.Errorf("fetch below the log start: %q, want %q", err.(*Error).Message, want)
	}
	_, err = b.DeleteRecords(ctx, who, "t", 0, 100)
	wantCode(t, err, CodeOffsetOutOfRange)
	if want := `offset 100 is beyond the high watermark 5 of partition 0 of topic "t": use an offset from 0 to 5`; err.(*Error).Message != want {
		t.Errorf("delete records beyond the high watermark: %q, want %q", err.(*Error).Message, want)
	}

	// A group that does not exist is positioned only when asked to be.
	wantCode(t, second(b.ResetOffsets(ctx, who, "g", ResetRequest{Topic: "t", To: Earliest})), CodeGroupNotFound)
	offs, err := b.ResetOffsets(ctx, who, "g", ResetRequest{Topic: "t", To: Earliest, Create: true})
	if err != nil || len(offs) != 1 || offs[0].Offset != 5 {
		t.Fatalf("reset: %v %+v", err, offs)
	}
	wantCode(t, second(b.ResetOffsets(ctx, who, "g", ResetRequest{Topic: "t", Partitions: []int32{3}, To: Latest})), CodePartitionOutOfRange)
	wantCode(t, second(b.ResetOffsets(ctx, who, "g", ResetRequest{Topic: "t", To: -1, ToOffset: true})), CodeInvalidOffset)
}
