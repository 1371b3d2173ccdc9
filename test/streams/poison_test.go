package streams

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/examples/retail/retail"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestPoisonRecord: a sale whose value does not decode stops the application with an
// error naming its position; with a dead-letter topic it lands there (reason and
// position in headers) and the records after it are processed.
func TestPoisonRecord(t *testing.T) {
	nd := startNode(t)
	c := client.New(nd.url)
	createTopics(t, c, 1, retail.Sales, retail.Shipments, retail.Reorders, retail.PriceAdjustments)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now()
	if _, err := c.Produce(ctx, retail.Sales, []client.Record{
		{Key: client.String("sku-1"), Value: json.RawMessage(`{"sku":"sku-1","qty":"ninety"}`), Timestamp: now},
		{Key: client.String("sku-1"), Value: json.RawMessage(`{"sku":"sku-1","qty":90}`), Timestamp: now},
	}); err != nil {
		t.Fatal(err)
	}

	stopped := retailProc(t, nd.url, "poison-stop", "--app", "poison-stop")
	select {
	case <-stopped.done:
	case <-time.After(time.Minute):
		t.Fatal("the application did not stop on the poison record")
	}
	if out := stopped.out.String(); stopped.err == nil || !strings.Contains(out, "poison record at sales/0/0") {
		t.Errorf("exit %v; want an error naming the poison record's position, got:\n%s", stopped.err, out)
	}

	dl := retailProc(t, nd.url, "poison-dl", "--app", "poison-dl", "--dead-letter-topic", "retail-dead")
	testwait.Until(t, time.Minute, "the reorder past the poison record", func() bool { return len(readAll(t, c, retail.Reorders)) == 1 })
	dl.stop(30 * time.Second)
	dead := readAll(t, c, "retail-dead")
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	if v, _ := dead[0].ValueBytes(); !strings.Contains(string(v), "ninety") || header(dead[0], "strata-source") != "sales/0/0" || !strings.Contains(header(dead[0], "strata-error"), "decode") {
		t.Errorf("dead letter %s headers %v", v, dead[0].Headers)
	}
}
