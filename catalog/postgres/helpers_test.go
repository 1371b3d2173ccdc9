package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// testKey returns a new segment key made at t.
func testKey(t time.Time) string { return segment.NewKey(t) }

// adminDSN is the DSN of a database whose role may CREATE DATABASE.
func adminDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv("STRATA_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			tb.Fatal("STRATA_TEST_POSTGRES is not set: CI must run against Postgres (eval \"$(scripts/services.sh)\")")
		}
		tb.Skip("set STRATA_TEST_POSTGRES to run against Postgres (eval \"$(scripts/services.sh)\")")
	}
	return dsn
}

// newDatabase creates an empty database for one test, dropped at cleanup, and returns
// its DSN.
func newDatabase(tb testing.TB) string {
	tb.Helper()
	admin := adminDSN(tb)
	var b [6]byte
	rand.Read(b[:])
	name := "strata_t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Fatalf("connect to %s: %v", redact(admin), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			tb.Errorf("drop database %s: connect: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Logf("drop database %s: %v", name, err) // leftovers are harmless; not the test's verdict
		}
	})
	return withDatabase(tb, admin, name)
}

// withDatabase returns dsn pointing at database name.
func withDatabase(tb testing.TB, dsn, name string) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return dsn + " dbname=" + name // keyword/value form: the last value wins
	}
	u.Path = "/" + name
	return u.String()
}

// withParam returns a URL DSN with one query parameter set.
func withParam(tb testing.TB, dsn, key, value string) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return dsn + " " + key + "=" + value
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return "(dsn)"
}

// openTest opens a catalog on a fresh database, closed at cleanup.
func openTest(tb testing.TB, opts catalog.Options) *Catalog {
	tb.Helper()
	return openDSN(tb, newDatabase(tb), opts)
}

func openDSN(tb testing.TB, dsn string, opts catalog.Options) *Catalog {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Open(ctx, dsn, opts)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

func mustTopic(tb testing.TB, c *Catalog, name string, partitions int32, configs map[string]string) catalog.Topic {
	tb.Helper()
	t, err := c.CreateTopic(context.Background(), name, partitions, configs)
	if err != nil {
		tb.Fatalf("create topic %s: %v", name, err)
	}
	return t
}

// flushBatch is one batch of a test flush.
type flushBatch struct {
	topic     int64
	partition int32
	records   int32
	maxTS     int64
}

// makeSegment builds a flush from requests, laying batches out in the object grouped by
// partition in order of first appearance (as segment.Encode does), each batch size
// bytes, and a 100-byte footer.
func makeSegment(key string, size int64, reqs ...[]flushBatch) catalog.Segment {
	seg := catalog.Segment{Key: key}
	type ref struct{ r, b int }
	byPart := map[catalog.TopicPartition][]ref{}
	var order []catalog.TopicPartition
	for ri, r := range reqs {
		req := catalog.Request{}
		for bi, b := range r {
			req.Batches = append(req.Batches, catalog.Batch{
				TopicID: b.topic, Partition: b.partition, Records: b.records,
				MaxTimestamp: b.maxTS, Len: size, BaseSequence: -1,
			})
			tp := catalog.TopicPartition{TopicID: b.topic, Partition: b.partition}
			if _, ok := byPart[tp]; !ok {
				order = append(order, tp)
			}
			byPart[tp] = append(byPart[tp], ref{ri, bi})
		}
		seg.Requests = append(seg.Requests, req)
	}
	var pos int64
	for _, tp := range order {
		for _, rf := range byPart[tp] {
			seg.Requests[rf.r].Batches[rf.b].Pos = pos
			pos += size
		}
	}
	seg.Size = pos + 100 // a footer
	return seg
}
