package broker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

func TestProduceRecords(t *testing.T) {
	e := newEnv(t)
	res, err := e.b.Produce(context.Background(), Anonymous, ProduceRequest{Records: []Record{
		{Topic: "plain", Partition: 1, Key: []byte("k"), Value: []byte("v"), Headers: []segment.Header{{Key: "h"}}, Timestamp: 1},
		{Topic: "plain", Partition: -1, Value: []byte("w"), Timestamp: -1},
		{Topic: "stamped", Partition: 0, Timestamp: -1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	plain, stamped := e.cat.topics["plain"], e.cat.topics["stamped"]
	want := []writer.Record{
		{TopicID: plain.ID, Partitions: 2, Partition: 1, Record: segment.Record{Key: []byte("k"), Value: []byte("v"), Headers: []segment.Header{{Key: "h"}}, Timestamp: 1}},
		{TopicID: plain.ID, Partitions: 2, Partition: -1, Record: segment.Record{Value: []byte("w"), Timestamp: testNow.UnixMilli()}},
		{TopicID: stamped.ID, Partitions: 2, Partition: 0, LogAppendTime: true},
	}
	if got := e.w.reqs[0].Records; !reflect.DeepEqual(got, want) {
		t.Fatalf("writer records\n%+v\nwant\n%+v", got, want)
	}
	if len(res.Offsets) != 3 || res.Offsets[0] != (RecordOffset{Partition: 1, Offset: 0}) || res.Duplicate {
		t.Fatalf("result %+v", res)
	}
	wantCode(t, second(e.b.Produce(context.Background(), Anonymous, ProduceRequest{})), CodeEmptyBatch)
	wantCode(t, second(e.b.Produce(context.Background(), Anonymous, ProduceRequest{Records: []Record{{Topic: "a b"}}})), CodeInvalidTopicName)
	wantCode(t, second(e.b.Produce(context.Background(), Anonymous, ProduceRequest{Records: []Record{{Topic: "nope", Timestamp: -1}}})), CodeTopicNotFound)
	if e.w.calls() != 1 {
		t.Fatalf("refused requests reached the writer")
	}
}

func TestProduceIdempotent(t *testing.T) {
	e := newEnv(t)
	plain, compact := e.cat.topics["plain"], e.cat.topics["compact"]
	recs := []Record{
		{Topic: "plain", Partition: 1, Value: []byte("a"), Timestamp: -1},
		{Topic: "compact", Partition: 0, Key: []byte("k"), Value: []byte("b"), Timestamp: -1},
		{Topic: "plain", Partition: 1, Value: []byte("c"), Timestamp: -1},
	}
	prod := &catalog.Producer{ID: 5, Epoch: 2}
	ok := ProduceRequest{Records: recs, Producer: prod, Sequences: map[string]map[int32]int32{"plain": {1: 10}, "compact": {0: 0}}}
	if _, err := e.b.Produce(context.Background(), Anonymous, ok); err != nil {
		t.Fatal(err)
	}
	got := e.w.reqs[0]
	wantSeqs := map[writer.TopicPartition]int32{{TopicID: plain.ID, Partition: 1}: 10, {TopicID: compact.ID, Partition: 0}: 0}
	if got.Producer != prod || !reflect.DeepEqual(got.Sequences, wantSeqs) {
		t.Fatalf("writer producer %+v sequences %v", got.Producer, got.Sequences)
	}
	e.w.dup = true
	if res, err := e.b.Produce(context.Background(), Anonymous, ok); err != nil || !res.Duplicate {
		t.Fatalf("a duplicate: %v %+v", err, res)
	}

	n := e.w.calls()
	for _, tc := range []struct {
		name string
		req  ProduceRequest
		msg  string
	}{
		{"a record without a partition", ProduceRequest{Records: []Record{{Topic: "plain", Partition: -1, Timestamp: -1}}, Producer: prod,
			Sequences: map[string]map[int32]int32{"plain": {0: 0}}}, `records[0].partition: an idempotent request (with "producer") names every record's partition, so that a retry lands where the first attempt did`},
		{"a partition without a sequence", ProduceRequest{Records: recs, Producer: prod, Sequences: map[string]map[int32]int32{"plain": {1: 0}}},
			"producer.sequences: no base sequence for compact partition 0, which records[1] writes"},
		{"a sequence for a partition not written", ProduceRequest{Records: recs, Producer: prod, Sequences: map[string]map[int32]int32{"plain": {0: 0, 1: 0}, "compact": {0: 0}}},
			"producer.sequences: no record writes [plain/0]: send a sequence for exactly the partitions written"},
		{"a sequence for a topic not written", ProduceRequest{Records: recs, Producer: prod, Sequences: map[string]map[int32]int32{"plain": {1: 0}, "compact": {0: 0}, "stamped": {0: 0}}},
			`producer.sequences: no record writes topic "stamped": send a sequence for exactly the partitions written`},
		{"a negative epoch", ProduceRequest{Records: recs, Producer: &catalog.Producer{ID: 1, Epoch: -1}}, "producer: id 1 epoch -1: use what InitProducer answered"},
	} {
		er := wantCode(t, second(e.b.Produce(context.Background(), Anonymous, tc.req)), CodeInvalidRequest)
		if er.Message != tc.msg {
			t.Errorf("%s: %q, want %q", tc.name, er.Message, tc.msg)
		}
	}
	if e.w.calls() != n {
		t.Fatalf("refused requests reached the writer")
	}

	// The catalog's refusals, through the writer.
	for _, tc := range []struct {
		err  error
		code Code
	}{
		{fmt.Errorf("writer: the catalog refused the request: %w", catalog.ErrProducerFenced), CodeProducerFenced},
		{fmt.Errorf("writer: the catalog refused the request: %w", catalog.ErrUnknownProducer), CodeUnknownProducer},
		{fmt.Errorf("writer: the catalog refused the request: producer id 5 epoch 2: %w",
			&catalog.SequenceError{TopicID: compact.ID, Partition: 0, Expected: 4, Got: 9}), CodeOutOfOrderSequence},
	} {
		e.w.err = tc.err
		er := wantCode(t, second(e.b.Produce(context.Background(), Anonymous, ok)), tc.code)
		if tc.code == CodeOutOfOrderSequence && !reflect.DeepEqual(er.Details, map[string]any{
			"expected_sequence": int32(4), "sequence": int32(9), "partition": int32(0), "topic": "compact"}) {
			t.Errorf("out of order details %v", er.Details)
		}
		if er.Retriable() {
			t.Errorf("%s is retriable", tc.code)
		}
	}
}

func TestProduceGroupOffsets(t *testing.T) {
	e := newEnv(t)
	rec := []Record{{Topic: "plain", Partition: 0, Value: []byte("x"), Timestamp: -1}}
	g := &catalog.OffsetCommit{Group: "copier", MemberID: "m-1", MemberEpoch: 4,
		Offsets: []catalog.CommitOffset{{Topic: "in", Partition: 1, Offset: 42, Metadata: "x"}}}
	if _, err := e.b.Produce(context.Background(), Anonymous, ProduceRequest{Records: rec, GroupOffsets: g}); err != nil {
		t.Fatal(err)
	}
	if e.w.reqs[0].GroupOffsets != g {
		t.Fatalf("writer group offsets %+v", e.w.reqs[0].GroupOffsets)
	}
	n := e.w.calls()
	for _, tc := range []struct {
		g    catalog.OffsetCommit
		code Code
	}{
		{catalog.OffsetCommit{Group: "a b", Offsets: g.Offsets}, CodeInvalidGroupName},
		{catalog.OffsetCommit{Group: "g", MemberID: "m", MemberEpoch: 0, Offsets: g.Offsets}, CodeStaleMemberEpoch},
		{catalog.OffsetCommit{Group: "g"}, CodeInvalidRequest},
	} {
		wantCode(t, second(e.b.Produce(context.Background(), Anonymous, ProduceRequest{Records: rec, GroupOffsets: &tc.g})), tc.code)
	}
	if e.w.calls() != n {
		t.Fatal("refused group offsets reached the writer")
	}
	// The commit's group refusals keep their codes.
	for err, code := range map[error]Code{catalog.ErrNotOwner: CodeNotOwner, catalog.ErrUnknownMember: CodeUnknownMember, catalog.ErrStaleMemberEpoch: CodeStaleMemberEpoch} {
		e.w.err = fmt.Errorf("writer: the catalog refused the request: group offsets: %w", err)
		wantCode(t, second(e.b.Produce(context.Background(), Anonymous, ProduceRequest{Records: rec, GroupOffsets: g})), code)
	}
}

func TestProduceWriterErrors(t *testing.T) {
	for _, tc := range []struct {
		err        error
		code       Code
		retry      bool
		unexpected bool
	}{
		{writer.ErrBufferFull, CodeBufferFull, true, false},
		{fmt.Errorf("writer: flush: %w", writer.ErrStore), CodeStoreUnavailable, true, false},
		{fmt.Errorf("writer: flush: %w", writer.ErrCommit), CodeCommitFailed, true, false},
		{fmt.Errorf("writer: settle: %w: %w", writer.ErrCommit, writer.ErrOutcomeUnknown), CodeCommitOutcomeUnknown, true, false},
		{fmt.Errorf("%w: partition 9 of 1", writer.ErrInvalid), CodeInvalidRequest, false, false},
		{writer.ErrClosed, CodeShuttingDown, true, false},
		{writer.ErrTooLarge, CodeRequestTooLarge, false, false},
		{fmt.Errorf("writer: commit: %w", catalog.ErrTopicNotFound), CodeTopicNotFound, false, false},
		{fmt.Errorf("writer: commit: %w", catalog.ErrPartitionOutOfRange), CodePartitionOutOfRange, false, false},
		{errors.New("something odd"), CodeInternal, false, true},
	} {
		for _, batches := range []bool{false, true} {
			e := newEnv(t)
			e.w.err = tc.err
			var err error
			if batches {
				_, err = e.b.ProduceBatches(context.Background(), Anonymous, BatchesRequest{Topic: "plain",
					Batches: batchtest.Batch(t, batchtest.Some(1, testNow.UnixMilli()), 0, -1, -1, -1)})
			} else {
				_, err = e.b.Produce(context.Background(), Anonymous, ProduceRequest{Records: []Record{{Topic: "plain", Timestamp: -1}}})
			}
			er := wantCode(t, err, tc.code)
			if er.Retriable() != tc.retry || er.Unexpected != tc.unexpected || tc.unexpected && !errors.Is(er, tc.err) {
				t.Errorf("%v: retriable %v unexpected %v cause %v", tc.err, er.Retriable(), er.Unexpected, er.Err)
			}
		}
	}
}

// TestProduceDropsStaleTopics: a commit refusing a cached topic as gone drops it from
// the cache, so the next produce asks the catalog.
func TestProduceDropsStaleTopics(t *testing.T) {
	e := newEnv(t)
	rec := ProduceRequest{Records: []Record{{Topic: "plain", Timestamp: -1}}}
	for range 3 {
		if _, err := e.b.Produce(context.Background(), Anonymous, rec); err != nil {
			t.Fatal(err)
		}
	}
	reads := e.cat.reads
	if reads != 1 {
		t.Fatalf("three produces read the catalog %d times, want 1", reads)
	}
	e.w.err = fmt.Errorf("writer: commit: %w", catalog.ErrTopicNotFound)
	wantCode(t, second(e.b.Produce(context.Background(), Anonymous, rec)), CodeTopicNotFound)
	e.w.err = nil
	if _, err := e.b.Produce(context.Background(), Anonymous, rec); err != nil || e.cat.reads != reads+1 {
		t.Fatalf("after the refusal: %v; catalog reads %d, want %d", err, e.cat.reads, reads+1)
	}
}

func TestRoleUnavailable(t *testing.T) {
	b := New(Config{}, Deps{Catalog: &fakeCatalog{}})
	for _, err := range []error{
		b.Check(CapProduce),
		second(b.Produce(context.Background(), Anonymous, ProduceRequest{Records: []Record{{Topic: "t"}}})),
		second(b.ProduceBatches(context.Background(), Anonymous, BatchesRequest{Topic: "t"})),
		second(b.Fetch(context.Background(), Anonymous, FetchRequest{Topic: "t"})),
		second(b.FetchBatches(context.Background(), Anonymous, FetchRequest{Topic: "t"})),
		second(b.InitProducer(context.Background(), Anonymous, InitProducerRequest{})),
		second(b.DeleteRecords(context.Background(), Anonymous, "t", 0, 1)),
		second(b.ListGroups(context.Background(), Anonymous)),
	} {
		if er := wantCode(t, err, CodeRoleUnavailable); !er.Retriable() {
			t.Errorf("%v is not retriable", er)
		}
	}
	if err := b.Check(CapTopics); err != nil {
		t.Errorf("topics: %v", err)
	}
	none := New(Config{}, Deps{})
	wantCode(t, second(none.Topics(context.Background(), Anonymous)), CodeRoleUnavailable)
	wantCode(t, second(none.LookupTopic(context.Background(), Anonymous, "t")), CodeRoleUnavailable)
}

func TestCodes(t *testing.T) {
	seen := map[Code]bool{}
	for _, c := range Codes() {
		if seen[c] {
			t.Errorf("%s listed twice", c)
		}
		seen[c] = true
	}
	for c := range retriable {
		if !seen[c] {
			t.Errorf("retriable %s is not listed", c)
		}
	}
}
