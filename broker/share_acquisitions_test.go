package broker

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
)

// TestAcquisitionBatches: acknowledged ranges are split by the acquisition's ranges,
// each batch carrying the delivery count its records were acquired at; ranges out of
// order, outside the acquisition or of an unknown type are refused with stable codes.
func TestAcquisitionBatches(t *testing.T) {
	acq := acquisition{Group: "g", Member: "m", Topic: "t", Ranges: [][3]int64{{0, 2, 3}, {3, 5, 1}, {8, 9, 1}}}
	got, e := acquisitionBatches(0, acq, []ShareAckRange{{First: 1, Last: 4, Type: "accept"}, {First: 5, Last: 5, Type: "reject"}})
	want := []catalog.AckBatch{
		{First: 1, Last: 2, Types: []int8{catalog.AckAccept}, DeliveryCount: 3},
		{First: 3, Last: 4, Types: []int8{catalog.AckAccept}, DeliveryCount: 1},
		{First: 5, Last: 5, Types: []int8{catalog.AckReject}, DeliveryCount: 1},
	}
	if e != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("batches %+v, %v; want %+v", got, e, want)
	}
	for _, tc := range []struct {
		name   string
		ranges []ShareAckRange
		code   Code
	}{
		{"none", nil, CodeInvalidRequest},
		{"first after last", []ShareAckRange{{First: 2, Last: 1, Type: "accept"}}, CodeInvalidRequest},
		{"negative", []ShareAckRange{{First: -1, Last: 1, Type: "accept"}}, CodeInvalidRequest},
		{"overlapping", []ShareAckRange{{First: 0, Last: 1, Type: "accept"}, {First: 1, Last: 2, Type: "accept"}}, CodeInvalidRequest},
		{"unknown type", []ShareAckRange{{First: 0, Last: 0, Type: "gap"}}, CodeInvalidRequest},
		{"across the hole between ranges", []ShareAckRange{{First: 5, Last: 8, Type: "accept"}}, CodeAckOutOfRange},
		{"past the acquisition", []ShareAckRange{{First: 9, Last: 10, Type: "accept"}}, CodeAckOutOfRange},
		{"in the hole", []ShareAckRange{{First: 6, Last: 6, Type: "accept"}}, CodeAckOutOfRange},
	} {
		if _, e := acquisitionBatches(0, acq, tc.ranges); e == nil || e.Code != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, e, tc.code)
		}
	}
}

// TestAcquisitionIDs: an id round-trips; anything else is not one.
func TestAcquisitionIDs(t *testing.T) {
	a := acquisition{Group: "g", Member: "m", Topic: "t", Partition: 2, Ranges: [][3]int64{{4, 9, 2}}}
	if got, ok := parseAcquisition(a.id()); !ok || !reflect.DeepEqual(got, a) {
		t.Fatalf("round trip: %+v, %v", got, ok)
	}
	bad := acquisition{Group: "g", Member: "m", Topic: "t", Ranges: [][3]int64{{4, 3, 1}}}
	for _, id := range []string{"", "x", "e30", bad.id(), acquisition{Group: "g", Topic: "t", Ranges: a.Ranges}.id()} {
		if _, ok := parseAcquisition(id); ok {
			t.Errorf("%q parsed as an acquisition id", id)
		}
	}
}

// failingReads fails both read paths — records (the HTTP path's) and stored batches
// (the Kafka path's) — while fail is set.
type failingReads struct {
	Reader
	BatchReader
	fail *atomic.Bool
}

func (f failingReads) Fetch(ctx context.Context, q reader.Fetch) (reader.Result, error) {
	if f.fail.Load() {
		return reader.Result{}, errors.New("injected read failure")
	}
	return f.Reader.Fetch(ctx, q)
}

func (f failingReads) FetchRawShared(ctx context.Context, q reader.Fetch) (reader.SharedRawResult, error) {
	if f.fail.Load() {
		return reader.SharedRawResult{}, errors.New("injected read failure")
	}
	return f.BatchReader.FetchRawShared(ctx, q)
}

// failReads puts failingReads in front of b's readers and answers its switch.
func failReads(b *Broker) *atomic.Bool {
	f := failingReads{Reader: b.d.Reader, BatchReader: b.d.Batches, fail: &atomic.Bool{}}
	b.d.Reader, b.d.Batches = f, f
	return f.fail
}

// twoJobs makes topic jobs, one partition holding two records, which share group g
// reads from the earliest.
func twoJobs(t *testing.T, b *Broker) {
	t.Helper()
	ctx := t.Context()
	if _, err := b.CreateTopic(ctx, Anonymous, CreateTopicRequest{Name: "jobs", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.AlterGroupConfigs(ctx, Anonymous, "g", AlterConfigsRequest{Changes: []ConfigChange{
		{Name: catalog.ShareAutoOffsetReset, Op: ConfigSet, Value: "earliest"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(ctx, Anonymous, ProduceRequest{Records: []Record{{Topic: "jobs", Value: []byte("1")}, {Topic: "jobs", Value: []byte("2")}}}); err != nil {
		t.Fatal(err)
	}
}

// TestAcquisitionNotAnsweredIsGivenBack: when an acquire cannot read the records it
// acquired, it answers the error and gives them back — at once, not at their lock
// deadline, and without using up a delivery: the next acquire gets them at delivery
// count 1.
func TestAcquisitionNotAnsweredIsGivenBack(t *testing.T) {
	b, _ := newRealCore(t)
	ctx := t.Context()
	twoJobs(t, b)
	fail := failReads(b)
	fail.Store(true)
	if _, err := b.ShareRecords(ctx, Anonymous, ShareRecordsRequest{Group: "g", MemberID: "m1", Topics: []string{"jobs"}, MaxRecords: 10}); err == nil {
		t.Fatal("an acquire whose records could not be read answered no error")
	}
	fail.Store(false)
	res, err := b.ShareRecords(ctx, Anonymous, ShareRecordsRequest{Group: "g", MemberID: "m2", Topics: []string{"jobs"}, MaxRecords: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Partitions) != 1 || len(res.Partitions[0].Records) != 2 {
		t.Fatalf("the next acquire got %+v, want both records at once (not after their lock)", res.Partitions)
	}
	for _, r := range res.Partitions[0].Records {
		if r.DeliveryCount != 1 {
			t.Fatalf("offset %d at delivery count %d, want 1: the unanswered acquire used up a delivery", r.Offset, r.DeliveryCount)
		}
	}
}

// TestShareFetchNotAnsweredIsGivenBack: a Kafka ShareFetch that cannot read the
// records it acquired answers the partition's error and gives them back at once,
// without using up a delivery — as TestAcquisitionNotAnsweredIsGivenBack for HTTP.
// Left held, they came back only at their lock deadline, one delivery closer to the
// limit: franz-go's TestShareGroupETL, whose members are closed mid-fetch, saw records
// archived at the limit unread.
func TestShareFetchNotAnsweredIsGivenBack(t *testing.T) {
	b, _ := newRealCore(t)
	ctx := t.Context()
	twoJobs(t, b)
	if _, err := b.ShareHeartbeat(ctx, Anonymous, catalog.ShareHeartbeat{Group: "g", MemberID: "m1", MemberEpoch: catalog.JoinEpoch, Topics: []string{"jobs"}}); err != nil {
		t.Fatal(err)
	}
	tp := catalog.ShareTP{Topic: "jobs", Partition: 0}
	fail := failReads(b)
	fail.Store(true)
	res, err := b.ShareFetch(ctx, Anonymous, ShareFetchRequest{Group: "g", MemberID: "m1", Partitions: []catalog.ShareTP{tp}, MaxRecords: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Partitions) != 1 || res.Partitions[0].Err == nil || len(res.Partitions[0].Ranges) != 0 {
		t.Fatalf("a fetch whose records could not be read answered %+v; want the partition's error and no ranges", res.Partitions)
	}
	fail.Store(false)
	res, err = b.ShareFetch(ctx, Anonymous, ShareFetchRequest{Group: "g", MemberID: "m1", Partitions: []catalog.ShareTP{tp}, MaxRecords: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Partitions) != 1 || res.Partitions[0].Err != nil || len(res.Partitions[0].Ranges) == 0 {
		t.Fatalf("the next fetch got %+v, want both records at once (not after their lock)", res.Partitions)
	}
	var n int64
	for _, r := range res.Partitions[0].Ranges {
		n += r.Last - r.First + 1
		if r.DeliveryCount != 1 {
			t.Fatalf("offsets %d-%d at delivery count %d, want 1: the unanswered fetch used up a delivery", r.First, r.Last, r.DeliveryCount)
		}
	}
	if n != 2 {
		t.Fatalf("the next fetch acquired %d offsets, want 2", n)
	}
}
