package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// browserBudget bounds a browser test, start of Chromium included.
const browserBudget = 60 * time.Second

// chromium finds Debian's chromium (scripts/test.sh installs it under CI), or skips —
// under CI, fails: CI must run the browser tests.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("STRATA_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testsvc.Unavailable(t, "no chromium on PATH: apt-get install chromium (scripts/test.sh does under CI), or set STRATA_CHROMIUM")
	return ""
}

// page is a headless Chromium tab with what the page did that a test must see: the
// dialogs it opened and its uncaught exceptions.
type tab struct {
	ctx     context.Context
	mu      sync.Mutex
	dialogs []string
	errors  []string
}

func newTab(t *testing.T) *tab {
	t.Helper()
	path := chromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), browserBudget)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	cctx, ccancel := chromedp.NewContext(actx)
	t.Cleanup(ccancel)
	tb := &tab{ctx: cctx}
	if err := chromedp.Do(cctx); err != nil { // starts the browser
		t.Fatalf("start chromium %s: %v", path, err)
	}
	// Every document records the Content-Security-Policy violations it sees, which
	// screenshot checks: the console must need nothing the policy forbids.
	if _, err := chromedp.Call(cctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__csp = []; document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));`,
	}); err != nil {
		t.Fatalf("install the CSP recorder: %v", err)
	}
	err := chromedp.Listen(cctx, func(ev any) {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			tb.dialogs = append(tb.dialogs, ev.Message)
			// Dismissed from outside the listener's loop (a dialog blocks the page).
			go chromedp.Call(cctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			tb.errors = append(tb.errors, msg)
		}
	})
	if err != nil {
		t.Fatalf("listen to the page: %v", err)
	}
	t.Cleanup(func() {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		if len(tb.errors) > 0 {
			t.Errorf("the page threw: %v", tb.errors)
		}
	})
	return tb
}

// run runs actions, failing the test with what it was doing.
func (tb *tab) run(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text returns the text of the first element matching sel, once it is there.
func (tb *tab) text(t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// eval evaluates a JavaScript expression.
func eval[T any](t *testing.T, tb *tab, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until a JavaScript expression is true, bounded by the test's budget.
// It asks again every 50 ms, through a navigation too (an evaluation in a document
// being replaced fails, and is asked again in the new one).
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		var last error
		for {
			ok, err := chromedp.Evaluate[bool](`!!(`+expr+`)`)(ctx, t)
			if err == nil && ok {
				return nil
			}
			if err != nil {
				last = err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w (last error: %v)", expr, ctx.Err(), last)
			case <-tick.C:
			}
		}
	})
}

// setValue sets a form field's value as typing would, firing input and change.
func setValue(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(() => { const el = document.querySelector(`+jsString(sel)+`); el.value = `+jsString(value)+
			`; el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); return true })()`)(ctx, t)
		return err
	})
}

// screenshot saves the page as PNG (in STRATA_UI_SCREENSHOTS, or the test's temporary
// directory) and checks that it is not blank.
func (tb *tab) screenshot(t *testing.T, name string) {
	t.Helper()
	if v := eval[[]string](t, tb, `window.__csp || ['no recorder']`); len(v) != 0 {
		t.Fatalf("page %s: Content-Security-Policy violations %v", name, v)
	}
	buf, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	colors := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colors[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	if len(colors) < 8 {
		t.Fatalf("screenshot %s is blank: %d colours", name, len(colors))
	}
	dir := os.Getenv("STRATA_UI_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

func jsString(s string) string { b, _ := json.Marshal(s); return string(b) }

// startOrders starts a node (with opts) and a browser tab, and makes the topic orders
// with 2 partitions: 40 records in partition 0 with keys k0..k39, values {"n":i},
// a header, and timestamps a minute apart from base, then one whose value is HTML.
func startOrders(t *testing.T, opts ...nodetest.Option) (tb *tab, n *nodetest.Node, c *client.Client, base time.Time) {
	t.Helper()
	tb = newTab(t)
	n = nodetest.Start(t, opts...)
	ctx := t.Context()
	c = client.New(n.URL)
	if _, err := c.CreateTopic(ctx, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	p0 := int32(0)
	base = time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []client.Record
	for i := range 40 {
		recs = append(recs, client.Record{Partition: &p0, Key: json.RawMessage(fmt.Sprintf(`"k%d"`, i)), Value: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			Timestamp: base.Add(time.Duration(i) * time.Minute), Headers: []client.Header{{Key: "source", Value: []byte("test")}}})
	}
	recs = append(recs, client.Record{Partition: &p0, Key: json.RawMessage(`"evil"`), Value: json.RawMessage(jsString(evil))})
	if _, err := c.Produce(ctx, "orders", recs); err != nil {
		t.Fatal(err)
	}
	return tb, n, c, base
}

// evil is a record value that is HTML: the console must show it as text.
const evil = `<img src=x onerror=alert(1)>`

// TestConsoleRecords drives the console in headless Chromium against a real node: the
// topics list and a topic's partitions show what was produced through the API; a deep
// link to the record browser at an offset and at a time shows those records, paging
// works both ways; the node's search finds records by key and by text; a record that
// is HTML shows as text and runs nothing; an offset out of range shows the API's error;
// the live tail shows a record produced after it started; the produce form produces.
func TestConsoleRecords(t *testing.T) {
	tb, n, c, base := startOrders(t)
	ctx := t.Context()
	p0 := int32(0)

	// The first page load, timed by the browser itself (Navigation Timing).
	tb.run(t, "open the topics page", chromedp.Navigate(n.URL+"/ui/topics"), chromedp.WaitVisible(chromedp.CSS(`#topics a[href="/ui/topics/orders"]`)))
	tb.run(t, "wait for the sizes", waitJS(`document.querySelector('#topics tbody tr')?.textContent.includes('41')`))
	load := eval[[]float64](t, tb, `(() => { const e = performance.getEntriesByType('navigation')[0]; return [e.loadEventEnd - e.startTime, performance.getEntriesByName('strata:rendered')[0].startTime] })()`)
	t.Logf("first load of /ui/topics in a fresh browser: load event %.1f ms, data rendered %.1f ms after navigation start", load[0], load[1])
	tb.screenshot(t, "topics")

	tb.run(t, "follow the link to the topic", chromedp.Click(chromedp.CSS(`#topics a[href="/ui/topics/orders"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#partitions tbody tr`)))
	if got := tb.text(t, `#partitions tbody tr:first-child`); !strings.Contains(got, "41") {
		t.Fatalf("partition 0's row: %q, want its high watermark 41", got)
	}
	rows := eval[int](t, tb, `document.querySelectorAll('#partitions tbody tr').length`)
	if rows != 2 {
		t.Fatalf("%d partition rows, want 2", rows)
	}
	tb.screenshot(t, "topic")

	// A deep link, loaded from scratch: the record browser at offset 10.
	tb.run(t, "open a deep link", chromedp.Navigate(n.URL+"/ui/topics/orders/partitions/0?offset=10&size=20"),
		chromedp.WaitVisible(chromedp.CSS(`#records tbody tr[data-offset="10"]`)))
	rows = eval[int](t, tb, `document.querySelectorAll('#records tbody tr').length`)
	if rows != 20 {
		t.Fatalf("%d record rows, want a page of 20", rows)
	}
	if got := tb.text(t, `#records tbody tr[data-offset="10"]`); !strings.Contains(got, "k10") || !strings.Contains(got, `"n": 10`) || !strings.Contains(got, "source") {
		t.Fatalf("offset 10's row: %q", got)
	}
	tb.run(t, "page to newer records", chromedp.Click(chromedp.CSS(`.pager a[rel="next"]`)), chromedp.WaitVisible(chromedp.CSS(`#records tbody tr[data-offset="30"]`)))
	tb.run(t, "page back to older ones", chromedp.Click(chromedp.CSS(`.pager a[rel="prev"]`)), chromedp.WaitVisible(chromedp.CSS(`#records tbody tr[data-offset="10"]`)))
	tb.screenshot(t, "records")

	// By time: the first record at or after minute 25 is offset 25, marked.
	at := base.Add(25 * time.Minute).UTC().Format(time.RFC3339)
	tb.run(t, "open the browser at a time", chromedp.Navigate(n.URL+"/ui/topics/orders/partitions/0?timestamp="+at),
		chromedp.WaitVisible(chromedp.CSS(`#records tbody tr.mark`)))
	marked := eval[string](t, tb, `document.querySelector('#records tbody tr.mark').dataset.offset`)
	if marked != "25" {
		t.Fatalf("the record at %s is offset %s, want 25", at, marked)
	}

	// By key and by text: the node searches, the page shows the matches.
	tb.run(t, "search by key", chromedp.Navigate(n.URL+"/ui/topics/orders/partitions/0?key=k17"),
		chromedp.WaitVisible(chromedp.CSS(`#search-status[data-done="true"]`)))
	if got := eval[[]string](t, tb, `[...document.querySelectorAll('#records tbody tr')].map((r) => r.dataset.offset)`); len(got) != 1 || got[0] != "17" {
		t.Fatalf("search by key k17 shows offsets %v, want [17]", got)
	}
	tb.run(t, "search by text from the form", setValue(`#search select[name="kind"]`, "contains"), setValue(`#search input[name="term"]`, "onerror"),
		chromedp.Click(chromedp.CSS(`#search button[type="submit"]`)),
		waitJS(`location.search.includes('contains=onerror') && document.querySelector('#search-status')?.dataset.done === 'true'`))
	if got := eval[[]string](t, tb, `[...document.querySelectorAll('#records tbody tr')].map((r) => r.dataset.offset)`); len(got) != 1 || got[0] != "40" {
		t.Fatalf("search by text shows offsets %v, want [40]", got)
	}
	tb.screenshot(t, "search")

	// The untrusted record: its value is text; no element, no dialog.
	tb.run(t, "open the HTML record", chromedp.Navigate(n.URL+"/ui/topics/orders/partitions/0?offset=40"),
		chromedp.WaitVisible(chromedp.CSS(`#records tbody tr[data-offset="40"]`)))
	if got := tb.text(t, `#records tbody tr[data-offset="40"] td.value`); got != evil {
		t.Fatalf("the HTML record shows as %q, want the text %q", got, evil)
	}
	imgs := eval[int](t, tb, `document.querySelectorAll('img').length`)
	tb.mu.Lock()
	dialogs := tb.dialogs
	tb.mu.Unlock()
	if imgs != 0 || len(dialogs) != 0 {
		t.Fatalf("the HTML record ran: %d img elements, dialogs %v", imgs, dialogs)
	}

	// An offset past the end: the API's error, in the page.
	tb.run(t, "open an offset out of range", chromedp.Navigate(n.URL+"/ui/topics/orders/partitions/0?offset=5000"),
		chromedp.WaitVisible(chromedp.CSS(`#browse-status .problem`)))
	if got := tb.text(t, `#browse-status .problem`); !strings.Contains(got, "offset_out_of_range") || !strings.Contains(got, "use an offset from") {
		t.Fatalf("offset out of range shows %q", got)
	}

	// The live tail, started by the user, shows a record produced after it started.
	tb.run(t, "start the live tail", chromedp.Navigate(n.URL+"/ui/topics/orders/partitions/0"),
		chromedp.WaitVisible(chromedp.CSS(`#tail-toggle`)), chromedp.Click(chromedp.CSS(`#tail-toggle`)),
		waitJS(`document.querySelector('#tail-status')?.textContent.includes('tailing')`))
	start := time.Now()
	if _, err := c.Produce(ctx, "orders", []client.Record{{Partition: &p0, Key: json.RawMessage(`"live"`), Value: json.RawMessage(`"arrived live"`)}}); err != nil {
		t.Fatal(err)
	}
	tb.run(t, "see the live record", waitJS(`document.querySelector('#tail')?.textContent.includes('arrived live')`))
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the live tail showed the record after %v, want within 2s", d)
	}
	t.Logf("live tail: the record showed %v after the produce was sent", time.Since(start).Round(time.Millisecond))
	tb.run(t, "stop the live tail", chromedp.Click(chromedp.CSS(`#tail-toggle`)), waitJS(`document.querySelector('#tail-toggle')?.getAttribute('aria-pressed') === 'false'`))

	// The produce form.
	tb.run(t, "produce from the form", chromedp.SendKeys(chromedp.CSS(`#produce input[name="key"]`), "from-ui"),
		chromedp.SendKeys(chromedp.CSS(`#produce textarea[name="value"]`), `{"made":"in the browser"}`),
		chromedp.Click(chromedp.CSS(`#produce button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#produce-result .ok`)))
	fr, err := c.Fetch(ctx, "orders", 0, client.FetchOptions{Offset: 42, MaxRecords: 1})
	if err != nil || len(fr.Records) != 1 || string(fr.Records[0].Key) != `"from-ui"` || string(fr.Records[0].Value) != `{"made":"in the browser"}` {
		t.Fatalf("the form's record at offset 42: %+v, %v", fr.Records, err)
	}
}

// TestConsoleAdmin: a topic created in the UI is there in the API, and a bad name or
// config shows the API's error and creates nothing; altering, adding partitions and
// deleting (behind the typed name) reach the API; a group's lag shows, falls to 0 when
// it commits, and resets from the UI; the overview lists the registry's nodes and
// charts the node's traffic.
func TestConsoleAdmin(t *testing.T) {
	tb, n, c, _ := startOrders(t, nodetest.Kafka())
	ctx := t.Context()
	p0 := int32(0)

	// A topic created in the UI is in the API; a bad name shows the API's error and
	// creates nothing.
	tb.run(t, "create a topic with a bad name", chromedp.Navigate(n.URL+"/ui/topics"), chromedp.WaitVisible(chromedp.CSS(`form input[name="name"]`)),
		chromedp.SendKeys(chromedp.CSS(`form input[name="name"]`), "bad name!"), chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form .problem`)))
	if got := tb.text(t, `form .problem`); !strings.Contains(got, "invalid_topic_name") {
		t.Fatalf("a bad topic name shows %q", got)
	}
	tb.run(t, "create a topic with a bad config", chromedp.SetValue(chromedp.CSS(`form input[name="name"]`), "made-in-ui"),
		chromedp.SendKeys(chromedp.CSS(`form textarea[name="configs"]`), "retention.ms=soon"), chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
		waitJS(`document.querySelector('form .problem')?.textContent.includes('invalid_config')`))
	if ts, err := c.ListTopics(ctx); err != nil || len(ts) != 1 {
		t.Fatalf("after bad input the topics are %v (%v), want orders alone", ts, err)
	}
	tb.run(t, "create a topic", chromedp.SetValue(chromedp.CSS(`form textarea[name="configs"]`), "retention.ms=3600000"),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`#partitions`)))
	if tp, err := c.Topic(ctx, "made-in-ui"); err != nil || tp.Configs["retention.ms"] != "3600000" {
		t.Fatalf("the topic made in the UI: %+v, %v", tp, err)
	}

	// Alter it: a bad value shows the API's error and changes nothing; a good one
	// changes the config; more partitions; then delete it, behind its typed name.
	tb.run(t, "set a bad config", chromedp.SendKeys(chromedp.CSS(`#alter textarea`), "retention.ms=soon"),
		chromedp.Click(chromedp.CSS(`#alter button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`#alter .problem`)))
	if got := tb.text(t, `#alter .problem`); !strings.Contains(got, "invalid_config") || !strings.Contains(got, "retention.ms") {
		t.Fatalf("a bad config value shows %q", got)
	}
	if tp, err := c.Topic(ctx, "made-in-ui"); err != nil || tp.Configs["retention.ms"] != "3600000" {
		t.Fatalf("after a bad value the topic is %+v, %v", tp, err)
	}
	tb.run(t, "set a config", setValue(`#alter textarea`, "retention.ms=7200000"), chromedp.Click(chromedp.CSS(`#alter button[type="submit"]`)),
		waitJS(`document.querySelector('#configs')?.textContent.includes('7200000')`))
	tb.run(t, "add partitions", setValue(`#grow input`, "3"), chromedp.Click(chromedp.CSS(`#grow button[type="submit"]`)),
		waitJS(`document.querySelectorAll('#partitions tbody tr').length === 3`))
	if tp, err := c.Topic(ctx, "made-in-ui"); err != nil || tp.Configs["retention.ms"] != "7200000" || tp.Partitions != 3 {
		t.Fatalf("after the changes the topic is %+v, %v", tp, err)
	}
	if eval[bool](t, tb, `document.querySelector('#delete button[type="submit"]').disabled`) != true {
		t.Fatal("delete is enabled before the name is typed")
	}
	tb.run(t, "delete it", chromedp.SendKeys(chromedp.CSS(`#delete input`), "made-in-ui"), chromedp.Click(chromedp.CSS(`#delete button[type="submit"]`)),
		waitJS(`location.pathname === '/ui/topics'`), chromedp.WaitVisible(chromedp.CSS(`#topics`)))
	if _, err := c.Topic(ctx, "made-in-ui"); err == nil {
		t.Fatal("the topic deleted in the UI is still there")
	}

	// A group's lag: committed at 10 of 41, then caught up; then reset in the UI.
	if err := c.CommitOffsets(ctx, "readers", "", 0, []client.GroupOffset{{Topic: "orders", Partition: 0, Offset: 10}}); err != nil {
		t.Fatal(err)
	}
	tb.run(t, "open the group", chromedp.Navigate(n.URL+"/ui/groups/readers"), chromedp.WaitVisible(chromedp.CSS(`#total-lag`)))
	if got := tb.text(t, `#total-lag`); got != "31" {
		t.Fatalf("total lag %q, want 31", got)
	}
	tb.screenshot(t, "group")
	tb.run(t, "see the group on the topic's page", chromedp.Navigate(n.URL+"/ui/topics/orders"),
		waitJS(`document.querySelector('#groups')?.textContent.includes('readers')`))
	if err := c.CommitOffsets(ctx, "readers", "", 0, []client.GroupOffset{{Topic: "orders", Partition: 0, Offset: 41}}); err != nil {
		t.Fatal(err)
	}
	tb.run(t, "see the lag fall to 0", chromedp.Navigate(n.URL+"/ui/groups/readers"), waitJS(`document.querySelector('#total-lag')?.textContent === '0'`))
	tb.run(t, "reset the offsets to earliest", chromedp.SetValue(chromedp.CSS(`#reset select[aria-label="Reset to"]`), "earliest"),
		chromedp.Click(chromedp.CSS(`#reset button[type="submit"]`)), waitJS(`document.querySelector('#total-lag')?.textContent === '41'`))
	if lag, err := c.GroupLag(ctx, "readers"); err != nil || lag.TotalLag != 41 {
		t.Fatalf("after the reset in the UI the lag is %+v (%v), want 41", lag, err)
	}
	tb.run(t, "open the groups list", chromedp.Navigate(n.URL+"/ui/groups"), waitJS(`document.querySelector('#groups')?.textContent.includes('41')`))
	tb.screenshot(t, "groups")
	// The overview's charts: produce while it samples the node's metrics, until the
	// rates it computes show the traffic.
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	traffic := make(chan error, 1)
	go func() {
		for {
			if _, err := c.Produce(trafficCtx, "orders", []client.Record{{Partition: &p0, Value: json.RawMessage(`{"load":1}`)}}); err != nil {
				traffic <- err
				return
			}
			if _, err := c.Fetch(trafficCtx, "orders", 0, client.FetchOptions{Offset: 0, MaxRecords: 10}); err != nil {
				traffic <- err
				return
			}
		}
	}()
	tb.run(t, "see the traffic in the overview's charts", chromedp.Navigate(n.URL+"/ui/"),
		waitJS(`[...document.querySelectorAll('#charts figcaption')].filter((f) => /^(Records written|Produce requests|Fetch requests)/.test(f.textContent) && /\s(0\.0[1-9]|0\.[1-9]|[1-9])[0-9.,]*\s\/s/.test(f.textContent)).length === 3`),
		waitJS(`/p50 [0-9]/.test([...document.querySelectorAll('#charts figcaption')].map((f) => f.textContent).join(' '))`))
	stopTraffic()
	if err := <-traffic; !errors.Is(err, context.Canceled) {
		t.Fatalf("the traffic: %v", err)
	}
	tb.run(t, "open the overview", chromedp.Navigate(n.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#charts figure`)), waitJS(`document.querySelector('#this-node')?.textContent.includes('writer')`),
		waitJS(`document.querySelector('#nodes')?.textContent.includes(`+jsString(n.KafkaAddr)+`)`),
		waitJS(`[...document.querySelectorAll('#charts polyline')].some((p) => p.getAttribute('points').includes(' '))`))
	tb.screenshot(t, "overview")
}

func ptr[T any](v T) *T { return &v }

// TestConsoleWithKeys: on a node that requires keys, the console refuses without one
// (the API's 401, and a form that asks for a key); with a key it lists only the topics
// that key may describe, and shows the API's 403 for one it may not.
func TestConsoleWithKeys(t *testing.T) {
	tb := newTab(t)
	const admin = "console-admin-key-0123456789abcdef"
	n := nodetest.Start(t, nodetest.Keys(admin))
	ctx := t.Context()
	c := client.New(n.URL, client.WithAPIKey(admin))
	for _, name := range []string{"visible", "hidden"} {
		if _, err := c.CreateTopic(ctx, name, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	k, err := c.CreateKey(ctx, client.NewKey{Principal: "User:alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateACL(ctx, client.ACL{Principal: "User:alice", ResourceType: "topic", ResourceName: "visible", Operation: "describe"}); err != nil {
		t.Fatal(err)
	}
	alice := client.New(n.URL, client.WithAPIKey(k.Secret))
	testwait.Until(t, 10*time.Second, "alice's key and ACL reach the node", func() bool {
		ts, err := alice.ListTopics(ctx)
		return err == nil && len(ts) == 1
	})

	tb.run(t, "open the topics without a key", chromedp.Navigate(n.URL+"/ui/topics"), chromedp.WaitVisible(chromedp.CSS(`.problem form.keyform`)))
	if got := tb.text(t, `.problem`); !strings.Contains(got, "401") || !strings.Contains(got, "unauthorized") {
		t.Fatalf("without a key the page shows %q, want the API's 401", got)
	}
	if eval[int](t, tb, `document.querySelectorAll('#topics').length`) != 0 {
		t.Fatal("topics listed without a key")
	}
	tb.screenshot(t, "key")
	tb.run(t, "give alice's key", chromedp.SendKeys(chromedp.CSS(`form.keyform input[name="key"]`), k.Secret),
		chromedp.Click(chromedp.CSS(`form.keyform button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`#topics`)))
	if got := tb.text(t, `#topics`); !strings.Contains(got, "visible") || strings.Contains(got, "hidden") {
		t.Fatalf("alice's topics show %q, want visible alone", got)
	}
	if loc := eval[string](t, tb, `location.href`); strings.Contains(loc, k.Secret) {
		t.Fatalf("the key is in the URL %s", loc)
	}
	// A deep link loaded afresh in the same tab keeps the key (sessionStorage).
	tb.run(t, "open a topic alice may not describe", chromedp.Navigate(n.URL+"/ui/topics/hidden"), chromedp.WaitVisible(chromedp.CSS(`.problem`)))
	if got := tb.text(t, `.problem`); !strings.Contains(got, "403") || !strings.Contains(got, "forbidden") {
		t.Fatalf("a topic alice may not describe shows %q, want the API's 403", got)
	}
	tb.run(t, "open the topic alice may describe", chromedp.Navigate(n.URL+"/ui/topics/visible"), chromedp.WaitVisible(chromedp.CSS(`#partitions`)))

	// Alice may not read the security pages; the administrator makes a key (its secret
	// shown once) and an ACL there, and sees them in the audit log.
	tb.run(t, "open security as alice", chromedp.Navigate(n.URL+"/ui/security"), chromedp.WaitVisible(chromedp.CSS(`#keys .problem`)))
	if got := tb.text(t, `#keys .problem`); !strings.Contains(got, "403") {
		t.Fatalf("alice's keys section shows %q, want the API's 403", got)
	}
	tb.run(t, "forget alice's key and give the administrator's", chromedp.Click(chromedp.CSS(`#keybox button`)),
		waitJS(`document.querySelector('#keybox')?.textContent.includes('use a key')`), chromedp.Click(chromedp.CSS(`#keybox button`)),
		chromedp.SendKeys(chromedp.CSS(`form.keyform input[name="key"]`), admin), chromedp.Click(chromedp.CSS(`form.keyform button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#keys table`)))
	tb.run(t, "create a key", chromedp.SendKeys(chromedp.CSS(`#create-key input[name="principal"]`), "User:bob"),
		chromedp.Click(chromedp.CSS(`#create-key button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`#new-secret pre.secret`)))
	secret := tb.text(t, `#new-secret pre.secret`)
	if len(secret) != 64 {
		t.Fatalf("the new key's secret shows as %q", secret)
	}
	testwait.NoError(t, 10*time.Second, "bob's new key works", func() error {
		_, err := client.New(n.URL, client.WithAPIKey(secret)).ListTopics(ctx)
		return err
	})
	tb.run(t, "add an ACL", setValue(`#create-acl input[aria-label="ACL principal"]`, "User:bob"), setValue(`#create-acl input[aria-label="Resource name"]`, "visible"),
		setValue(`#create-acl select[aria-label="Operation"]`, "read"), chromedp.Click(chromedp.CSS(`#create-acl button[type="submit"]`)),
		waitJS(`document.querySelector('#acls')?.textContent.includes('User:bob')`))
	if acls, err := c.ListACLs(ctx, client.ACLFilter{Principal: "User:bob"}); err != nil || len(acls) != 1 || acls[0].Operation != "read" || acls[0].ResourceName != "visible" {
		t.Fatalf("bob's ACLs after the form: %+v %v", acls, err)
	}
	tb.run(t, "see the audit log", waitJS(`document.querySelector('#audit')?.textContent.includes('User:bob')`))
	tb.screenshot(t, "security")
}

// TestConsoleConnectors: a failed connector task shows its state and its error trace.
func TestConsoleConnectors(t *testing.T) {
	tb := newTab(t)
	n := nodetest.Start(t, nodetest.Connect(connect.WorkerConfig{}))
	ctx := t.Context()
	if _, err := client.New(n.URL).CreateTopic(ctx, "lines", 1, nil); err != nil {
		t.Fatal(err)
	}
	// Stored past the REST API's check (as a connector made before --connect-file-dirs
	// narrowed): its task fails, saying why.
	spec := catalog.ConnectorSpec{Name: "outside", Type: catalog.ConnectorSource,
		Config: map[string]string{"connector.class": "FileSource", "file": "/etc/hostname", "topic": "lines"},
		Tasks:  []map[string]string{{"task.files": "/etc/hostname"}}}
	if _, _, err := n.Catalog.PutConnector(ctx, spec, false); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 20*time.Second, "the task to fail", func() bool {
		resp, err := http.Get(n.URL + "/connectors/outside/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var st struct{ Tasks []struct{ State string } }
		return json.NewDecoder(resp.Body).Decode(&st) == nil && len(st.Tasks) == 1 && st.Tasks[0].State == "FAILED"
	})
	tb.run(t, "open the connectors", chromedp.Navigate(n.URL+"/ui/connectors"), chromedp.WaitVisible(chromedp.CSS(`section.connector[data-name="outside"] pre.trace`)))
	got := tb.text(t, `section.connector[data-name="outside"]`)
	if !strings.Contains(got, "FAILED") || !strings.Contains(got, "the file connectors are off on this node") {
		t.Fatalf("the failed connector shows %q", got)
	}
	tb.screenshot(t, "connectors")

	tb.run(t, "open the connector", chromedp.Click(chromedp.CSS(`section.connector[data-name="outside"] h2 a`)), chromedp.WaitVisible(chromedp.CSS(`#tasks pre.trace`)))
	if got := tb.text(t, `#config`); !strings.Contains(got, "FileSource") {
		t.Fatalf("the connector's config shows %q", got)
	}
	tb.screenshot(t, "connector")
	tb.run(t, "pause it", chromedp.Click(chromedp.CSS(`main button[type="button"]`)), waitJS(`document.querySelector('h1 .state')?.textContent === 'PAUSED'`))
	resp, err := http.Get(n.URL + "/connectors/outside/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct{ Connector struct{ State string } }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.Connector.State != "PAUSED" {
		t.Fatalf("after Pause in the UI the connector is %q (%v)", st.Connector.State, err)
	}
}
