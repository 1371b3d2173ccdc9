package ui_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/strata-io/strata/client"
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
