package kafka_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/kafka"
)

// Records cross between the Kafka protocol and the HTTP API unchanged: produced over
// one, read over the other, with the same offsets, keys, values, headers and
// timestamps; a key lands on the same partition whichever way it came.

type httpRecord struct {
	Offset    int64  `json:"offset"`
	Timestamp int64  `json:"timestamp"`
	Key       []byte `json:"key"`
	Value     []byte `json:"value"`
	Headers   []struct {
		Key   string `json:"key"`
		Value []byte `json:"value"`
	} `json:"headers"`
}

func httpDo(t *testing.T, method, url, body string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t, 30*time.Second), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return b
}

// httpRecords reads a partition over HTTP from offset, keys, values and header values
// as base64.
func httpRecords(t *testing.T, n *node, topic string, partition int32, offset int64) []httpRecord {
	t.Helper()
	b := httpDo(t, "GET", fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=%d&max_records=10000&format=base64", n.http, topic, partition, offset), "")
	var out struct {
		Records []httpRecord `json:"records"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("records: %v\n%s", err, b)
	}
	return out.Records
}

func TestHTTPInterop(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	const parts = 4
	if _, err := cat.CreateTopic(t.Context(), "interop", parts, map[string]string{"key.format": "string", "value.format": "string"}); err != nil {
		t.Fatal(err)
	}
	cl := client(t, kgo.SeedBrokers(n.addr), kgo.ProducerBatchCompression(kgo.Lz4Compression()))

	// Kafka → HTTP.
	recs := testRecords("interop", "kafka", 200)
	produceSync(t, cl, recs)
	keyPart := map[string]int32{}
	byPos := map[string]*kgo.Record{}
	for _, r := range recs {
		keyPart[string(r.Key)] = r.Partition
		byPos[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = r
	}
	seen := 0
	for p := range int32(parts) {
		for _, h := range httpRecords(t, n, "interop", p, 0) {
			k := byPos[fmt.Sprintf("%d/%d", p, h.Offset)]
			if k == nil {
				t.Fatalf("HTTP shows %d/%d, which Kafka did not produce", p, h.Offset)
			}
			seen++
			if !bytes.Equal(h.Key, k.Key) || !bytes.Equal(h.Value, k.Value) || h.Timestamp != k.Timestamp.UnixMilli() || len(h.Headers) != len(k.Headers) {
				t.Fatalf("%d/%d over HTTP: key %q value %q ts %d headers %d; produced %q %q %d %d",
					p, h.Offset, h.Key, h.Value, h.Timestamp, len(h.Headers), k.Key, k.Value, k.Timestamp.UnixMilli(), len(k.Headers))
			}
			for i, hh := range h.Headers {
				if hh.Key != k.Headers[i].Key || !bytes.Equal(hh.Value, k.Headers[i].Value) {
					t.Fatalf("%d/%d header %d: %q=%q, produced %q=%q", p, h.Offset, i, hh.Key, hh.Value, k.Headers[i].Key, k.Headers[i].Value)
				}
			}
		}
	}
	if seen != len(recs) {
		t.Fatalf("HTTP shows %d records, Kafka produced %d", seen, len(recs))
	}

	// HTTP → Kafka: keyed records without a partition land where franz-go put the
	// same keys (murmur2 of the key bytes, as Kafka's clients hash).
	ts := time.Now().Add(-time.Minute).UnixMilli()
	var body strings.Builder
	body.WriteString(`{"records":[`)
	const sent = 40
	for i := range sent {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"key":"key-%d","value":"http-%d","timestamp":%d,"headers":[{"key":"via","value":"http"},{"key":"n","value":"%d"}]}`, i%17, i, ts+int64(i), i)
	}
	body.WriteString(`]}`)
	var answered struct {
		Offsets []struct {
			Partition int32 `json:"partition"`
			Offset    int64 `json:"offset"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal(httpDo(t, "POST", n.http+"/v1/topics/interop/records", body.String()), &answered); err != nil || len(answered.Offsets) != sent {
		t.Fatalf("HTTP produce answered %+v (%v)", answered, err)
	}
	want := map[string]int{} // partition/offset → record number
	for i, o := range answered.Offsets {
		if k := fmt.Sprintf("key-%d", i%17); o.Partition != keyPart[k] {
			t.Fatalf("HTTP put %s on partition %d, franz-go on %d", k, o.Partition, keyPart[k])
		}
		want[fmt.Sprintf("%d/%d", o.Partition, o.Offset)] = i
	}
	got := consumeAll(t, n.addr, "interop", parts, len(recs)+sent)
	found := 0
	for _, r := range got {
		i, ok := want[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]
		if !ok {
			continue
		}
		found++
		wantHeaders := []kgo.RecordHeader{{Key: "via", Value: []byte("http")}, {Key: "n", Value: fmt.Appendf(nil, "%d", i)}}
		if string(r.Key) != fmt.Sprintf("key-%d", i%17) || string(r.Value) != fmt.Sprintf("http-%d", i) || r.Timestamp.UnixMilli() != ts+int64(i) ||
			len(r.Headers) != 2 || r.Headers[0].Key != "via" || !bytes.Equal(r.Headers[1].Value, wantHeaders[1].Value) {
			t.Fatalf("record %d over Kafka: %q %q %v %v", i, r.Key, r.Value, r.Timestamp, r.Headers)
		}
	}
	if found != sent {
		t.Fatalf("Kafka read %d of the %d records produced over HTTP", found, sent)
	}
}
