package ui_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node/nodetest"
)

// TestMeasureLoad measures the console's page loads in Chromium (Navigation and
// Resource Timing, and the console's own strata:rendered mark) for the figures of
// docs/design.md; it runs only with STRATA_UI_MEASURE=1:
//
//	STRATA_UI_MEASURE=1 go test -run TestMeasureLoad -v ./ui
func TestMeasureLoad(t *testing.T) {
	if os.Getenv("STRATA_UI_MEASURE") == "" {
		t.Skip("a measurement: set STRATA_UI_MEASURE=1")
	}
	tb := newTab(t)
	n := nodetest.Start(t)
	c := client.New(n.URL)
	if _, err := c.CreateTopic(t.Context(), "orders", 3, nil); err != nil {
		t.Fatal(err)
	}
	var recs []client.Record
	for i := range 300 {
		recs = append(recs, client.Record{Key: json.RawMessage(fmt.Sprintf(`"k%d"`, i)), Value: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	if _, err := c.Produce(t.Context(), "orders", recs); err != nil {
		t.Fatal(err)
	}
	for i, path := range []string{"/ui/topics/orders", "/ui/topics/orders", "/ui/topics", "/ui/topics/orders/partitions/0", "/ui/"} {
		tb.run(t, "open "+path, chromedp.Navigate(n.URL+path), waitJS(`performance.getEntriesByName('strata:rendered').length > 0`))
		m := eval[map[string]any](t, tb, `(() => {
			const nav = performance.getEntriesByType('navigation')[0];
			const res = performance.getEntriesByType('resource').map((r) => [r.name.replace(location.origin, ''), Math.round(r.startTime), Math.round(r.duration), r.transferSize]);
			return { load: nav.loadEventEnd, domContentLoaded: nav.domContentLoadedEventEnd, ttfb: nav.responseStart, rendered: performance.getEntriesByName('strata:rendered')[0].startTime, resources: res };
		})()`)
		t.Logf("%d %s: first byte %.0f ms, DOMContentLoaded %.0f ms, load %.0f ms, data rendered %.0f ms", i, path, m["ttfb"], m["domContentLoaded"], m["load"], m["rendered"])
		if i == 0 {
			for _, r := range m["resources"].([]any) {
				t.Logf("   %v", r)
			}
		}
	}
}
