package ui_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestConsoleShareGroups: a share group with a live member holding records shows in
// the list and on its page — members, records in flight by state, its configs, and no
// push subscription; the reset form shows the API's refusal while the member is live;
// once the member leaves, a reset to earliest in the console takes effect.
func TestConsoleShareGroups(t *testing.T) {
	tb, n, c, _ := startOrders(t)
	ctx := t.Context()
	if _, err := c.ConfigureShareGroup(ctx, "workers", map[string]string{"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "7"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.AcquireShareRecords(ctx, "workers", client.ShareAcquireRequest{Topics: []string{"orders"}, MaxRecords: 4})
	if err != nil || len(res.Partitions) != 1 || len(res.Partitions[0].Records) != 4 {
		t.Fatalf("acquire: %+v, %v", res, err)
	}
	tb.run(t, "open the share groups", chromedp.Navigate(n.URL+"/ui/share-groups"), waitJS(`document.querySelector('#share-groups')?.textContent.includes('workers')`))
	if got := tb.text(t, `#share-groups`); !strings.Contains(got, "stable") {
		t.Fatalf("the list shows %q, want workers stable", got)
	}
	tb.screenshot(t, "share-groups")
	tb.run(t, "open the share group", chromedp.Navigate(n.URL+"/ui/share-groups/workers"), chromedp.WaitVisible(chromedp.CSS(`#share-partitions`)),
		waitJS(`document.querySelector('#push-none') !== null`))
	if got := tb.text(t, `#share-members`); !strings.Contains(got, res.MemberID) {
		t.Fatalf("members %q, want %s", got, res.MemberID)
	}
	// orders, partition 0: start 0, lag 41, 0 available, 4 acquired.
	row := eval[[]string](t, tb, `[...document.querySelectorAll('#share-partitions tbody tr:first-child td')].map((td) => td.textContent)`)
	if len(row) < 6 || row[0] != "orders" || row[2] != "0" || row[3] != "41" || row[5] != "4" {
		t.Fatalf("share-partition row %q, want orders 0: start 0, lag 41, 4 acquired", row)
	}
	if got := tb.text(t, `#share-configs`); !strings.Contains(got, "share.delivery.count.limit\t7") {
		t.Fatalf("configs %q, want the limit set to 7", got)
	}
	tb.run(t, "reset while a member is live", chromedp.SetValue(chromedp.CSS(`#share-reset select[aria-label="Reset to"]`), "latest"),
		chromedp.Click(chromedp.CSS(`#share-reset button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`#share-reset-result .problem`)))
	if got := tb.text(t, `#share-reset-result`); !strings.Contains(got, "group_not_empty") {
		t.Fatalf("a reset with a live member shows %q", got)
	}
	tb.screenshot(t, "share-group")
	if err := c.LeaveShareGroup(ctx, "workers", res.MemberID); err != nil {
		t.Fatal(err)
	}
	tb.run(t, "reset to latest", chromedp.Navigate(n.URL+"/ui/share-groups/workers"), chromedp.WaitVisible(chromedp.CSS(`#share-reset`)),
		chromedp.SetValue(chromedp.CSS(`#share-reset select[aria-label="Reset to"]`), "latest"),
		chromedp.Click(chromedp.CSS(`#share-reset button[type="submit"]`)),
		waitJS(`[...document.querySelectorAll('#share-partitions tbody tr:first-child td')].map((td) => td.textContent)[2] === '41'`))
	g, err := c.DescribeShareGroup(ctx, "workers")
	if err != nil || g.Partitions[0].StartOffset != 41 || g.Partitions[0].Acquired != 0 {
		t.Fatalf("after the reset in the console: %+v, %v", g, err)
	}
}

// TestConsolePushSubscription: a share group with a live push subscription shows it on
// the group's page. A target answering 404 pauses it, and the page shows the state and
// the answer; Resume in the console (the target fixed) starts delivery again and every
// record reaches the webhook; a pause made elsewhere shows within the page's refresh;
// Resume and Delete act through the API.
func TestConsolePushSubscription(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusNotFound)
	var delivered atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Records []json.RawMessage `json:"records"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		code := int(status.Load())
		if code == http.StatusOK {
			delivered.Add(int64(len(body.Records)))
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(hook.Close)
	tb, n, c, _ := startOrders(t, nodetest.Mutate(func(cfg *node.Config) {
		cfg.Push = true
		cfg.PushConfig = node.PushConfig{Allow: []string{"127.0.0.0/8"}, AllowInsecure: true, LeaseTTL: 3 * time.Second}
	}))
	ctx := t.Context()
	if _, err := c.ConfigureShareGroup(ctx, "hooks", map[string]string{"share.auto.offset.reset": "earliest"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutPush(ctx, "hooks", client.PushSubscriptionRequest{Topics: []string{"orders"}, URL: hook.URL + "/hook"}); err != nil {
		t.Fatal(err)
	}

	// The share group exists once the push role first acquires for it.
	testwait.Until(t, time.Minute, "the push role joined the group", func() bool {
		_, err := c.DescribeShareGroup(ctx, "hooks")
		return err == nil
	})
	tb.run(t, "open the share group, its target answering 404", chromedp.Navigate(n.URL+"/ui/share-groups/hooks"),
		waitJS(`document.querySelector('#push-state')?.textContent === 'paused'`))
	if got := tb.text(t, `#push-error`); !strings.Contains(got, "404") {
		t.Fatalf("the paused subscription shows %q, want the 404", got)
	}
	if got := tb.text(t, `#push`); !strings.Contains(got, hook.URL+"/hook") || !strings.Contains(got, "orders") {
		t.Fatalf("the push card shows %q, want the target and the topic", got)
	}
	tb.screenshot(t, "push-paused")

	status.Store(http.StatusOK)
	tb.run(t, "resume", chromedp.Click(chromedp.CSS(`#push button:not(.danger)`)),
		waitJS(`document.querySelector('#push-state')?.textContent === 'active' && document.querySelector('#push-error') === null`))
	testwait.Until(t, time.Minute, "every record delivered", func() bool {
		g, err := c.DescribeShareGroup(ctx, "hooks")
		if err != nil {
			return false
		}
		var lag int64
		for _, p := range g.Partitions {
			lag += p.Lag
		}
		return len(g.Partitions) > 0 && lag == 0
	})
	if got := delivered.Load(); got != 41 {
		t.Fatalf("the webhook accepted %d records, want the topic's 41", got)
	}

	// Paused elsewhere (the CLI, the push role), the open page follows within its refresh.
	if _, err := c.PausePush(ctx, "hooks"); err != nil {
		t.Fatal(err)
	}
	tb.run(t, "the page follows a pause made through the API", waitJS(`document.querySelector('#push-state')?.textContent === 'paused'`))
	tb.run(t, "resume again", chromedp.Click(chromedp.CSS(`#push button:not(.danger)`)),
		waitJS(`document.querySelector('#push-state')?.textContent === 'active'`))
	if p, err := c.Push(ctx, "hooks"); err != nil || p.State != "active" {
		t.Fatalf("after Resume in the console: %+v, %v", p, err)
	}
	tb.run(t, "delete", chromedp.Click(chromedp.CSS(`#push button.danger`)), waitJS(`document.querySelector('#push-none') !== null`))
	if _, err := c.Push(ctx, "hooks"); !client.HasCode(err, client.CodePushNotFound) {
		t.Fatalf("after Delete in the console the API answers %v, want %s", err, client.CodePushNotFound)
	}
}
