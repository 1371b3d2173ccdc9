package streams

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/examples/retail/retail"
	"github.com/strata-io/strata/streams"
)

// TestStartupRefusals: configurations that cannot work are refused when the
// application starts, with errors that say what to do, and nothing is processed.
func TestStartupRefusals(t *testing.T) {
	nd := startNode(t)
	c := client.New(nd.url)
	run := func(app string) error {
		a, err := streams.New(retail.Build(app, retail.Options{}), streams.Config{Client: c})
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return a.Run(ctx)
	}
	expect := func(what, app, want string) {
		t.Helper()
		if err := run(app); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", what, err, want)
		}
	}
	createTopics(t, c, 6, retail.Sales, retail.Reorders, retail.PriceAdjustments)
	expect("missing input", "retail", "topic shipments does not exist: create it")
	createTopics(t, c, 4, retail.Shipments)
	expect("co-partitioning", "retail", "must be co-partitioned")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.DeleteTopic(ctx, retail.Shipments); err != nil {
		t.Fatal(err)
	}
	createTopics(t, c, 6, retail.Shipments)
	createTopics(t, c, 3, "other-stock-changelog")
	expect("internal topic of another size", "other", "internal topic other-stock-changelog has 3 partitions, the topology needs 6")
	if lag, err := c.ListGroups(ctx); err != nil || len(lag) != 0 {
		t.Errorf("groups after refused starts: %v %v, want none joined", lag, err)
	}
}
