package client

import (
	"testing"
)

// ProduceRecords sends one sealed request: sent again unchanged it is answered as a
// duplicate with the original offsets, its group offsets (with metadata) commit with
// its records, and a newer holder of the transactional id fences it.
func TestProduceRecords(t *testing.T) {
	s := newStack(t, stackOptions{})
	ctx := t.Context()
	c := New(s.url)
	if _, err := c.CreateTopic(ctx, "in", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "out", 2, map[string]string{"key.format": "binary", "value.format": "binary"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "in", []Record{{Value: String("a")}, {Value: String("b")}}); err != nil {
		t.Fatal(err)
	}
	epoch := joinOwning(t, c, "g", "m", "in", 1)
	id, err := c.InitProducer(ctx, "app/0_0", nil)
	if err != nil {
		t.Fatal(err)
	}
	req := RecordsRequest{
		Records: []TopicRecord{
			{Topic: "out", Record: Record{Key: Binary([]byte{0, 1}), Value: Binary([]byte{0xff}), Partition: Int32(0)}},
			{Topic: "out", Record: Record{Key: Binary([]byte{2}), Partition: Int32(1)}}, // a tombstone
		},
		Producer:     &ProducerSequences{ProducerIdentity: id, Sequences: map[TopicPartition]int32{{"out", 0}: 0, {"out", 1}: 0}},
		GroupOffsets: &GroupCommit{Group: "g", MemberID: "m", MemberEpoch: epoch, Offsets: []GroupOffset{{Topic: "in", Partition: 0, Offset: 2, Metadata: "st=5"}}},
	}
	first, err := c.ProduceRecords(ctx, req)
	if err != nil || first.Duplicate || len(first.Offsets) != 2 {
		t.Fatalf("first: %+v %v", first, err)
	}
	again, err := c.ProduceRecords(ctx, req)
	if err != nil || !again.Duplicate || again.Offsets[0] != first.Offsets[0] || again.Offsets[1] != first.Offsets[1] {
		t.Fatalf("resent: %+v %v, want a duplicate of %+v", again, err, first)
	}
	offs, err := c.GroupOffsets(ctx, "g")
	if err != nil || len(offs) != 1 || offs[0].Offset != 2 || offs[0].Metadata != "st=5" {
		t.Fatalf("group offsets %+v %v", offs, err)
	}
	res, err := c.Fetch(ctx, "out", 1, FetchOptions{Base64: true})
	if err != nil || len(res.Records) != 1 || res.Records[0].Value != nil {
		t.Fatalf("tombstone: %+v %v", res.Records, err)
	}

	if _, err := c.InitProducer(ctx, "app/0_0", nil); err != nil {
		t.Fatal(err)
	}
	req.Producer.Sequences = map[TopicPartition]int32{{"out", 0}: 1, {"out", 1}: 1}
	if _, err := c.ProduceRecords(ctx, req); !HasCode(err, CodeProducerFenced) {
		t.Errorf("a request of the fenced holder: %v, want producer_fenced", err)
	}
	req.Producer = &ProducerSequences{ProducerIdentity: id}
	req.Records[0].Partition = nil
	if _, err := c.ProduceRecords(ctx, req); err == nil {
		t.Error("an idempotent request without a record's partition was sent")
	}
}

func TestDeleteRecords(t *testing.T) {
	s := newStack(t, stackOptions{})
	ctx := t.Context()
	c := New(s.url)
	if _, err := c.CreateTopic(ctx, "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "t", []Record{{Value: String("a")}, {Value: String("b")}, {Value: String("c")}}); err != nil {
		t.Fatal(err)
	}
	start, err := c.DeleteRecords(ctx, "t", 0, 2)
	if err != nil || start != 2 {
		t.Fatalf("log start %d, %v; want 2", start, err)
	}
	if start, err := c.DeleteRecords(ctx, "t", 0, 1); err != nil || start != 2 {
		t.Errorf("a lower offset moved the log start to %d (%v); it never moves down", start, err)
	}
	if _, err := c.Fetch(ctx, "t", 0, FetchOptions{Offset: 0}); !HasCode(err, "offset_out_of_range") {
		t.Errorf("fetch below the log start: %v", err)
	}
}

// A fetch with Base64 returns header values as stored, as a plain fetch does.
func TestFetchBase64Headers(t *testing.T) {
	s := newStack(t, stackOptions{})
	ctx := t.Context()
	c := New(s.url)
	if _, err := c.CreateTopic(ctx, "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	hs := []Header{{Key: "a", Value: []byte("sales/0/7")}, {Key: "n"}}
	if _, err := c.Produce(ctx, "t", []Record{{Value: String("v"), Headers: hs}}); err != nil {
		t.Fatal(err)
	}
	for _, b64 := range []bool{false, true} {
		res, err := c.Fetch(ctx, "t", 0, FetchOptions{Base64: b64})
		if err != nil {
			t.Fatal(err)
		}
		got := res.Records[0].Headers
		if len(got) != 2 || string(got[0].Value) != "sales/0/7" || got[1].Value != nil {
			t.Errorf("base64 %v: headers %q", b64, got)
		}
	}
}
