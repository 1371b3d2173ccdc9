package postgres

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strata-io/strata/catalog"
)

// TestQueryExecModes runs the catalog's statements under every pgx query exec mode: the
// default statement cache, and the modes that work behind a transaction-pooling proxy
// (RDS Proxy, PgBouncer), where prepared statements are unavailable or pin sessions.
func TestQueryExecModes(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			c := openDSN(t, withParam(t, dsn, "default_query_exec_mode", mode), catalog.Options{})
			ctx := context.Background()
			if got := c.pool.Config().ConnConfig.DefaultQueryExecMode.String(); strings.ReplaceAll(got, " ", "_") != mode {
				t.Fatalf("exec mode %s, want %s", got, mode)
			}
			tp, err := c.CreateTopic(ctx, "m-"+mode, 2, map[string]string{"retention.ms": "5000"})
			if err != nil {
				t.Fatal(err)
			}
			u, err := c.UpdateTopic(ctx, tp.Name, 3, map[string]string{"retention.ms": "", "key.format": "binary"})
			if err != nil || u.Partitions != 3 || !maps.Equal(u.Configs, map[string]string{"key.format": "binary"}) {
				t.Fatalf("update: %+v, %v", u, err)
			}
			seg := makeSegment(testKey(time.Now()), 10, []flushBatch{{tp.ID, 2, 4, 1000}, {tp.ID, 0, 1, 2000}}, []flushBatch{{tp.ID, 7, 1, 1}})
			res, err := c.Commit(ctx, seg)
			if err != nil {
				t.Fatal(err)
			}
			checkResults(t, res, []catalog.Result{{BaseOffsets: []int64{0, 0}}, {Err: catalog.ErrPartitionOutOfRange}})
			res, err = c.Settle(ctx, seg)
			if err != nil {
				t.Fatal(err)
			}
			checkResults(t, res, []catalog.Result{{BaseOffsets: []int64{0, 0}}, {Err: catalog.ErrCommitAborted}})
			list, err := c.Chunks(ctx, tp.ID, 2, 1, 100)
			if err != nil || len(list.Chunks) != 1 || list.Chunks[0].LastOffset != 3 || list.Partition.HighWatermark != 4 {
				t.Fatalf("chunks: %+v, %v", list, err)
			}
			if off, err := c.OffsetForTime(ctx, tp.ID, 0, 1500); err != nil || off != 0 {
				t.Fatalf("offset for time: %d, %v", off, err)
			}
			if _, err := c.Now(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOpenConfig: a pool configured in code takes effect.
func TestOpenConfig(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(newDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	c, err := OpenConfig(context.Background(), cfg, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.pool.Config(); got.MaxConns != 2 || got.ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeExec {
		t.Errorf("pool config: max conns %d, mode %v", got.MaxConns, got.ConnConfig.DefaultQueryExecMode)
	}
	if _, err := c.CreateTopic(context.Background(), "x", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenConfig(context.Background(), cfg, catalog.Options{CommitTimeout: -time.Second}); err == nil {
		t.Error("open with a negative commit timeout succeeded")
	}
	if err := c.Close(); err != nil {
		t.Errorf("close twice: %v", err)
	}
}
