package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node/nodetest"
)

// TestTopicsUsage: strata topics usage prints a node's counts, as text and as JSON, and
// refuses a bad --since with the server's stable code.
func TestTopicsUsage(t *testing.T) {
	n := nodetest.Start(t)
	env := map[string]string{"STRATA_SERVER": n.URL}
	mustRun(t, env, "", "topics", "create", "orders", "--partitions", "1")
	mustRun(t, env, `{"value":{"n":1}}`+"\n"+`{"value":{"n":2}}`+"\n", "produce", "orders")

	var u client.TopicUsage
	if err := json.Unmarshal([]byte(mustRun(t, env, "", "topics", "usage", "orders", "--since", "15m", "--json")), &u); err != nil {
		t.Fatal(err)
	}
	if u.Topic != "orders" || u.RecordsIn != 2 || u.BytesIn <= 0 || u.PutRequests <= 0 || u.StoredBytes != u.BytesIn {
		t.Errorf("usage --json: %+v", u)
	}
	out := mustRun(t, env, "", "topics", "usage", "orders")
	for _, want := range []string{"Topic:   orders", "a month", "PRINCIPAL", "total"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage text lacks %q:\n%s", want, out)
		}
	}
	code, _, stderr := runCLI(t, env, "", "topics", "usage", "orders", "--since", "soon")
	if code != 1 || !strings.Contains(stderr, "since") {
		t.Errorf("--since soon: exit %d, stderr %q; want 1 and the problem", code, stderr)
	}
}
