package privatepg_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/internal/testkit/privatepg"
	"github.com/strata-io/strata/internal/testkit/testsvc"
)

// As root (as in a container, and in CI), a parent the postgres user cannot enter — a
// run directory made by os.MkdirTemp, mode 0700 — must not stop the instance: `strata
// torture --classes pg-restart` failed that way with "Permission denied".
func TestStartUnderPrivateParent(t *testing.T) {
	testsvc.Require(t, "STRATA_TEST_POSTGRES") // postgresql installed by scripts/services.sh
	if os.Geteuid() != 0 {
		t.Skip("the private-parent case arises only when running as root (CI runs as root)")
	}
	parent := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := privatepg.Start(ctx, parent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(context.Background(), "fast")
		_ = p.Remove()
	})
	// A crash restart keeps the data.
	c, err := pgx.Connect(ctx, p.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE t(x int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	if err := p.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if p.Running(ctx) {
		t.Fatal("running after an immediate stop")
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c, err = pgx.Connect(ctx, p.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var x int
	if err := c.QueryRow(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 42 {
		t.Fatalf("after restart: x=%d err=%v", x, err)
	}
}
