package push_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestRejectionDeadLettered: records a webhook rejects land in the group's
// dead-letter topic with the answer — a 422's status and its body's first
// catalog.MaxRejectionBody bytes (valid UTF-8), and for a record rejected one by one
// in a 200 batch answer that status and the record's reason — while the records it
// accepts do not.
func TestRejectionDeadLettered(t *testing.T) {
	n := pushNode(t, nodeMutate(func(c *node.Config) { c.ShareDLQInterval = 50 * time.Millisecond }))
	const total = 30
	topic, group := setup(t, n.Broker, total, 0)
	ctx := context.Background()
	withDLQ(t, n.Broker, group)
	// Records 0, 3, 6, … of partition 0 are refused with a 422 whose body is long and
	// ends in multi-byte characters where it is cut; those of partition 1 at offsets
	// 0, 3, 6, … are rejected one by one in a 200 with a reason.
	long := "order missing sku: " + strings.Repeat("é", 300)
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Records []wireRecord `json:"records"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Records) != 1 {
			t.Errorf("a call of %q: want one record", body)
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		rec := req.Records[0]
		switch {
		case rec.Offset%3 == 0 && rec.Partition == 0:
			http.Error(w, long, http.StatusUnprocessableEntity)
		case rec.Offset%3 == 0 && rec.Partition == 1:
			_ = json.NewEncoder(w).Encode(map[string]any{"records": []map[string]any{{"topic": rec.Topic, "partition": rec.Partition,
				"offset": rec.Offset, "result": "reject", "reason": fmt.Sprintf("no such customer at %d", rec.Offset)}}})
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	hookURL := serveHook(t, hook)
	if _, err := n.Broker.PutPush(ctx, broker.Anonymous, broker.PushRequest{PushSubscription: catalog.PushSubscription{
		Group: group, Topics: []string{topic}, URL: hookURL + "/hook", BatchSize: 1, Timeout: time.Second}}); err != nil {
		t.Fatal(err)
	}
	// setup spreads the records round robin: 10 per partition, offsets 0-9.
	const want = 8 // offsets 0, 3, 6, 9 of partitions 0 and 1
	var got []broker.Record
	testwait.Until(t, time.Minute, "the rejects dead-lettered", func() bool {
		res, err := n.Broker.Fetch(ctx, broker.Anonymous, broker.FetchRequest{Topic: "dlq.hooks", Partition: 0, MaxRecords: 100, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, r := range res.Records {
			got = append(got, broker.Record{Key: r.Key, Value: r.Value, Headers: r.Headers})
		}
		return len(got) >= want && done(t, n.Broker, group)
	})
	if len(got) != want {
		t.Fatalf("%d records dead-lettered, want %d", len(got), want)
	}
	cut := long[:catalog.MaxRejectionBody-1] // é is two bytes: the 256th is half of one
	for _, r := range got {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		off, _ := strconv.Atoi(h[broker.DLQHeaderOffset])
		if off%3 != 0 || h[broker.DLQHeaderReason] != catalog.ShareDLQRejected {
			t.Fatalf("dead-lettered %v: not a rejected record", h)
		}
		switch h[broker.DLQHeaderPartition] {
		case "0":
			if h[broker.DLQHeaderHTTPStatus] != "422" || strings.TrimSpace(h[broker.DLQHeaderHTTPBody]) != strings.TrimSpace(cut) ||
				!utf8.ValidString(h[broker.DLQHeaderHTTPBody]) {
				t.Fatalf("a 422's copy: status %q body %q, want 422 and %q", h[broker.DLQHeaderHTTPStatus], h[broker.DLQHeaderHTTPBody], cut)
			}
		case "1":
			if h[broker.DLQHeaderHTTPStatus] != "200" || h[broker.DLQHeaderHTTPBody] != fmt.Sprintf("no such customer at %d", off) {
				t.Fatalf("a per-record reject's copy: status %q body %q, want 200 and its reason", h[broker.DLQHeaderHTTPStatus], h[broker.DLQHeaderHTTPBody])
			}
		default:
			t.Fatalf("dead-lettered %v: from partition 2, which had no rejects", h)
		}
	}
}
