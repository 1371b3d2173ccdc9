package bench

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/internal/testkit/testsvc"
)

// TestCapacityPostgres runs the catalog capacity phase briefly against a Postgres
// catalog: every line measured operations, the database server's CPU is read when it
// runs on this machine, and the phase leaves none of its topics behind. (TestRun runs
// it on SQLite.)
func TestCapacityPostgres(t *testing.T) {
	dsn := testsvc.PostgresDSN(t)
	ctx := t.Context()
	cat, err := postgres.Open(ctx, dsn, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	db, err := OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := &runner{cfg: Config{Topic: "cap", DB: db, Catalog: cat, CapacityDuration: 100 * time.Millisecond}, log: slog.New(slog.DiscardHandler)}
	cp, err := b.capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkCapacity(t, cp, "postgres")
	if _, local := serverCPU(); local != cp.ServerCPU {
		t.Errorf("server CPU measured %v, postgres processes here %v", cp.ServerCPU, local)
	}
	if cp.ServerCPU {
		var cpu float64
		for _, c := range cp.Cells {
			cpu += c.ServerCPUms
		}
		if cpu <= 0 {
			t.Errorf("the database server spent no CPU on %d lines of operations", len(cp.Cells))
		}
	}
	topics, err := cat.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range topics {
		if strings.HasPrefix(tp.Name, "cap-capacity-") {
			t.Errorf("the phase left topic %s", tp.Name)
		}
	}
}

func checkCapacity(t *testing.T, cp *Capacity, kind string) {
	t.Helper()
	if cp == nil || cp.CatalogKind != kind || len(cp.Cells) != 11 {
		t.Fatalf("capacity %+v", cp)
	}
	for _, c := range cp.Cells {
		if c.Ops == 0 || c.PerSec <= 0 || c.Latency.P50 <= 0 || c.Workers < 1 || c.Partitions < 1 {
			t.Errorf("line %q measured nothing: %+v", c.Name, c)
		}
	}
}
