package ui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/registry"
	"github.com/strata-io/strata/tables"
)

// TestConsoleTable: a table topic's page shows its Iceberg table — per partition how
// far the table has come, and the current snapshot's rows and files from the table's
// metadata — once the tables role has committed what was produced; a table stopped on
// a record that does not fit its schema says where; a topic that is not a table topic
// has no table section, and the API answers topic_not_found for it.
func TestConsoleTable(t *testing.T) {
	dir := t.TempDir()
	loc := "file://" + filepath.Join(dir, "objects")
	tb, n, c, _ := startOrders(t, nodetest.InDir(dir), nodetest.Mutate(func(cfg *node.Config) {
		cfg.Tables = true
		cfg.TablesConfig = tables.Config{Location: loc, Poll: 20 * time.Millisecond, LeaseTTL: 5 * time.Second}
	}))
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "events", 2, map[string]string{"iceberg.enabled": "true", "iceberg.commit.interval.ms": "100"}); err != nil {
		t.Fatal(err)
	}
	var recs []client.Record
	for i := range 30 {
		p := int32(i % 2)
		recs = append(recs, client.Record{Partition: &p, Key: json.RawMessage(fmt.Sprintf(`"k%d"`, i)), Value: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	if _, err := c.Produce(ctx, "events", recs); err != nil {
		t.Fatal(err)
	}
	var st v1.TableStatus
	testwait.Until(t, time.Minute, "the table to hold every record", func() bool {
		code := getJSON(t, n.URL+"/v1/topics/events/table", &st)
		return code == http.StatusOK && st.MetadataLocation != "" && st.Lag == 0
	})
	if len(st.Partitions) != 2 || st.Partitions[0].NextOffset != 15 || st.Partitions[1].NextOffset != 15 {
		t.Fatalf("table status %+v, want both partitions in the table below offset 15", st)
	}
	var problem struct {
		Code string `json:"code"`
	}
	if code := getJSON(t, n.URL+"/v1/topics/orders/table", &problem); code != http.StatusNotFound || problem.Code != "topic_not_found" {
		t.Fatalf("the table of a topic without iceberg.enabled: %d %q, want 404 topic_not_found", code, problem.Code)
	}

	tb.run(t, "open the table topic", chromedp.Navigate(n.URL+"/ui/topics/events"),
		waitJS(`document.querySelector('#table-summary')?.textContent.includes('30 rows')`))
	if got := tb.text(t, `#table-summary`); !strings.Contains(got, "Lag 0") || !strings.Contains(got, "data files") {
		t.Fatalf("the table summary shows %q, want lag 0 and the data files", got)
	}
	row := eval[[]string](t, tb, `[...document.querySelectorAll('#table-partitions tbody tr:first-child td')].map((td) => td.textContent)`)
	if len(row) != 4 || row[0] != "0" || row[1] != "15" || row[3] != "0" {
		t.Fatalf("the table's first partition row is %q, want 0: 15 in the table, lag 0", row)
	}
	tb.screenshot(t, "table-topic")

	// A table topic whose value subject has a schema, and a record framed with an id
	// the subject does not hold: the table stops at it, and the page says where.
	if _, err := n.Broker.CreateTopic(ctx, broker.Anonymous, broker.CreateTopicRequest{Name: "pay", Partitions: 1,
		Configs: map[string]string{"iceberg.enabled": "true", "iceberg.commit.interval.ms": "100", "value.format": "binary"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Broker.RegisterSchema(ctx, broker.Anonymous, "pay-value", broker.SchemaRequest{Schema: `{"type":"record","name":"Pay","fields":[{"name":"amount","type":"long"}]}`}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Broker.Produce(ctx, broker.Anonymous, broker.ProduceRequest{Records: []broker.Record{
		{Topic: "pay", Partition: 0, Value: registry.AppendFrame(nil, 999, []byte{2})}}}); err != nil {
		t.Fatal(err)
	}
	// The page draws the table once: open it once the tables role has stopped it.
	testwait.Until(t, time.Minute, "the table to say it stopped", func() bool {
		var loaded struct {
			Metadata struct {
				Properties map[string]string `json:"properties"`
			} `json:"metadata"`
		}
		return getJSON(t, n.URL+"/iceberg/v1/namespaces/strata/tables/pay", &loaded) == http.StatusOK &&
			loaded.Metadata.Properties[tables.StoppedProperty(0)] != ""
	})
	tb.run(t, "open the stopped table", chromedp.Navigate(n.URL+"/ui/topics/pay"), waitJS(`document.querySelector('.table-stopped') !== null`))
	if got := tb.text(t, `.table-stopped`); !strings.Contains(got, "Partition 0 stopped at offset 0") || !strings.Contains(got, "999") {
		t.Fatalf("the stopped table shows %q, want partition 0 stopped at offset 0 for schema id 999", got)
	}
	tb.run(t, "open a topic that is not a table", chromedp.Navigate(n.URL+"/ui/topics/orders"), chromedp.WaitVisible(chromedp.CSS(`#partitions`)))
	if eval[bool](t, tb, `document.querySelector('#table') !== null`) {
		t.Fatal("a topic without iceberg.enabled shows a table section")
	}
}

// getJSON GETs url into out and answers the status.
func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: decode: %v", url, err)
	}
	return res.StatusCode
}
