package ui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

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

// TestMeasureSearchMillion times finding a record by text in a partition of 1,000,000
// records, in the browser (the console's search: the node scans, the page gets the
// match) and as one API call; it runs only with STRATA_UI_MEASURE=1.
func TestMeasureSearchMillion(t *testing.T) {
	if os.Getenv("STRATA_UI_MEASURE") == "" {
		t.Skip("a measurement: set STRATA_UI_MEASURE=1")
	}
	const total, per = 1_000_000, 10_000
	n := nodetest.Start(t)
	c := client.New(n.URL)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "big", 1, nil); err != nil {
		t.Fatal(err)
	}
	p0 := int32(0)
	start := time.Now()
	for b := range total / per {
		recs := make([]client.Record, per)
		for i := range recs {
			k := b*per + i
			v := fmt.Sprintf(`{"n":%d,"user":"u%d","note":"ordinary record"}`, k, k%1000)
			if k == total-1 {
				v = `{"n":999999,"note":"the needle-4242 is here"}`
			}
			recs[i] = client.Record{Partition: &p0, Key: json.RawMessage(fmt.Sprintf(`"k%d"`, k)), Value: json.RawMessage(v)}
		}
		if _, err := c.Produce(ctx, "big", recs); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("produced %d records in %v", total, time.Since(start).Round(time.Millisecond))

	for i := range 3 {
		t0 := time.Now()
		resp, err := http.Get(n.URL + "/v1/topics/big/partitions/0/records?contains=needle-4242")
		if err != nil {
			t.Fatal(err)
		}
		var fr struct {
			Records    []struct{ Offset int64 }
			NextOffset int64 `json:"next_offset"`
		}
		err = json.NewDecoder(resp.Body).Decode(&fr)
		resp.Body.Close()
		t.Logf("API call %d (GET ...records?contains=needle-4242): %v, %d match(es), next_offset %d, err %v", i, time.Since(t0).Round(time.Millisecond), len(fr.Records), fr.NextOffset, err)
	}

	tb := newTab(t)
	t0 := time.Now()
	tb.run(t, "search in the browser", chromedp.Navigate(n.URL+"/ui/topics/big/partitions/0?contains=needle-4242"),
		chromedp.WaitVisible(chromedp.CSS(`#search-status[data-done="true"]`)))
	status := tb.text(t, `#search-status`)
	offsets := eval[[]string](t, tb, `[...document.querySelectorAll('#records tbody tr')].map((r) => r.dataset.offset)`)
	rendered := eval[float64](t, tb, `performance.getEntriesByName('strata:rendered')[0].startTime`)
	t.Logf("in the browser: %q; offsets %v; rendered %.0f ms after navigation start (%v wall, browser start excluded)", status, offsets, rendered, time.Since(t0).Round(time.Millisecond))
	if len(offsets) != 1 || offsets[0] != "999999" {
		t.Fatalf("found %v, want [999999]", offsets)
	}
}
