package testsvc

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The private instance survives a crash restart with its data: tests that restart
// Postgres under load rely on it.
func TestPrivatePostgresRestart(t *testing.T) {
	p := StartPrivatePostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, p.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE t(x int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	p.Stop(t, "immediate")
	p.Start(t)
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
