package frontends_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestServedBatches: the stored batches come back through either front end with the
// same real base offsets and the same bytes (segment.AppendServed, WriteServed); only
// the partition leader epoch differs, which the Kafka protocol sets to its constant 0.
func TestServedBatches(t *testing.T) {
	s := startStack(t)
	if code := createTopicKafka(t, s, "t", 1); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	now := time.Now().UnixMilli()
	var sent [][]byte
	for i, n := range []int{3, 1, 5} {
		b := batchtest.Batch(t, batchtest.Some(n, now+int64(i)), 0, -1, -1, -1)
		sent = append(sent, b)
		resp, err := http.Post(s.url+"/v1/topics/t/records?partition=0", v1.ContentTypeRecordBatch, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("produce %d: HTTP %d %s", i, resp.StatusCode, body)
		}
	}
	wantBases := []int64{0, 3, 4}

	var viaHTTP []byte
	testwait.Until(t, 20*time.Second, "the HTTP fetch to read all 9 records", func() bool { // the reader may not see the last commit yet
		req, _ := http.NewRequestWithContext(t.Context(), "GET", s.url+"/v1/topics/t/partitions/0/records?offset=0&max_bytes=1000000", nil)
		req.Header.Set("Accept", v1.ContentTypeRecordBatch)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		viaHTTP, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && resp.Header.Get(v1.HeaderNextOffset) == "9"
	})

	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 100, 1, 1<<20
	req.ReplicaID = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 0, 0, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(t.Context(), s.node())
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	wantKafka(t, "Fetch", p.ErrorCode, nil)

	httpBatches, kafkaBatches := split(t, viaHTTP), split(t, p.RecordBatches)
	if len(httpBatches) != len(sent) || len(kafkaBatches) != len(sent) {
		t.Fatalf("%d batches over HTTP, %d over Kafka, %d sent", len(httpBatches), len(kafkaBatches), len(sent))
	}
	for i := range sent {
		h, k := httpBatches[i], kafkaBatches[i]
		if base := int64(binary.BigEndian.Uint64(h)); base != wantBases[i] {
			t.Errorf("batch %d: HTTP base offset %d, want %d", i, base, wantBases[i])
		}
		if base := int64(binary.BigEndian.Uint64(k)); base != wantBases[i] {
			t.Errorf("batch %d: Kafka base offset %d, want %d", i, base, wantBases[i])
		}
		if !bytes.Equal(h[8:12], k[8:12]) || !bytes.Equal(h[16:], k[16:]) || !bytes.Equal(h[8:], sent[i][8:]) {
			t.Errorf("batch %d: the front ends serve different bytes:\nHTTP  %x\nKafka %x", i, h, k)
		}
		if epoch := int32(binary.BigEndian.Uint32(k[12:])); epoch != 0 {
			t.Errorf("batch %d: Kafka leader epoch %d, want 0", i, epoch)
		}
	}
}

// split cuts batches back to back at their length fields (segment.SplitBatches would
// refuse the Kafka protocol's leader epoch 0: it checks batches as stored).
func split(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("%d bytes left, not a batch", len(b))
		}
		n := 12 + int(binary.BigEndian.Uint32(b[8:]))
		if n > len(b) {
			t.Fatalf("a batch of %d bytes, %d left", n, len(b))
		}
		out, b = append(out, b[:n]), b[n:]
	}
	return out
}
