package jepsen

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/objstore/fault"
	"github.com/strata-io/strata/objstore/fs"
)

// A fetch whose object read comes back corrupted (a flipped bit, a short body) is a
// failure of the store, which a retry may cure: it answers a retryable 503
// (store_unavailable), not 500 internal_error. The harness found the flipped-bit case
// answering 500.
func TestCorruptReadAnswers503(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cat, err := sqlite.Open(ctx, filepath.Join(dir, "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	raw, err := fs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	st := fault.New(raw)
	n, err := StartNode(ctx, NodeConfig{Catalog: cat, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := client.New(n.URL)
	if _, err := c.CreateTopic(ctx, "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "t", []client.Record{{Value: client.String("v")}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []fault.Fault{{FlipBit: true}, {Truncate: 5}} {
		st.Inject(fault.GetRange, f)
		_, err := c.Fetch(ctx, "t", 0, client.FetchOptions{Offset: 0})
		st.ClearAll()
		if got := client.StatusOf(err); got != 503 {
			t.Errorf("fetch with %+v: HTTP %d (%v), want 503", f, got, err)
		}
	}
}
