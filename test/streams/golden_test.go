package streams

import (
	"maps"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/examples/retail/retail"
)

const (
	skus       = 1000
	partitions = 6
)

// genStart is the first input's nominal time: fixed, so the generated data (and the
// windows) are the same every run.
var genStart = time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)

// setup starts a node, creates the retail topics and produces n generated inputs,
// all before any application instance starts.
func setup(t testing.TB, n int, extra ...string) (*node, *client.Client) {
	t.Helper()
	nd := startNode(t)
	c := client.New(nd.url)
	createTopics(t, c, partitions, append([]string{retail.Sales, retail.Shipments, retail.Reorders, retail.PriceAdjustments}, extra...)...)
	// 12 hours of nominal time, whatever n is: hourly windows fill alike.
	ins := retail.Generate(42, n, skus, genStart, 12*time.Hour/time.Duration(n))
	start := time.Now()
	produceInputs(t, c, ins)
	t.Logf("produced %d inputs in %s", n, time.Since(start).Round(time.Millisecond))
	return nd, c
}

// checkAgainstOracle compares everything the exactly-once run promises: outputs equal
// the oracle (no duplicate, none missing), the stock changelog's table equals the
// oracle's, and committed offsets are the inputs' ends (waitDrained checked those).
func checkAgainstOracle(t *testing.T, c *client.Client, app string) retail.Outputs {
	t.Helper()
	want := retail.Oracle(inputsBack(t, c), partitions)
	got := outputs(t, c)
	m1, x1 := compare(t, "reorders", got.Reorders, want.Reorders)
	m2, x2 := compare(t, "price adjustments", got.Adjustments, want.Adjustments)
	if m1+x1+m2+x2 > 0 {
		t.Errorf("outputs differ from the oracle: reorders %d missing %d extra; adjustments %d missing %d extra", m1, x1, m2, x2)
	}
	if table := changelogTable(t, c, app); !maps.Equal(table, want.Stock) {
		diff := 0
		for k, v := range want.Stock {
			if table[k] != v {
				diff++
			}
		}
		t.Errorf("stock changelog: %d keys, %d differ from the oracle's %d", len(table), diff, len(want.Stock))
	}
	t.Logf("oracle: %d reorders, %d price adjustments, %d late sales, %d SKUs", len(want.Reorders), len(want.Adjustments), want.Late, len(want.Stock))
	if len(want.Reorders) == 0 || len(want.Adjustments) == 0 {
		t.Errorf("the data makes no reorders or no adjustments: the comparison proves little")
	}
	return want
}

// TestRetailGolden: 100,000 sales and shipments over 1,000 SKUs on 6 partitions,
// timestamps shuffled within 5 minutes, all produced before the app starts; two
// instances; the outputs equal the oracle's.
func TestRetailGolden(t *testing.T) {
	n := 100_000
	nd, c := setup(t, n)
	start := time.Now()
	a := retailProc(t, nd.url, "golden-a", "--state-dir", t.TempDir())
	b := retailProc(t, nd.url, "golden-b", "--state-dir", t.TempDir())
	waitDrained(t, c, "retail", 5*time.Minute, a, b)
	took := time.Since(start)
	a.stop(30 * time.Second)
	b.stop(30 * time.Second)
	t.Logf("processed %d inputs in %s (%.0f records/s, exactly once, two instances)", n, took.Round(time.Millisecond), float64(n)/took.Seconds())
	checkAgainstOracle(t, c, "retail")
}
