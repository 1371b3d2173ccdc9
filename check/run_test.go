package check_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/check"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/objstore/s3"
	"github.com/strata-io/strata/segment"
)

// TestCheck writes through a real node, then checks: clean; then with an object
// deleted, a stray object planted, a young unknown object, and a corrupted object.
func TestCheck(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		cat, err := sqlite.Open(context.Background(), filepath.Join(dir, "catalog.db"), catalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cat.Close()
		st, err := fs.New(filepath.Join(dir, "objects"))
		if err != nil {
			t.Fatal(err)
		}
		runCheck(t, cat, st)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := testsvc.PostgresDSN(t)
		m := testsvc.MinIO(t)
		cat, err := postgres.Open(context.Background(), dsn, catalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cat.Close()
		st, err := s3.New(context.Background(), s3.Config{Bucket: testsvc.BucketName(), Prefix: "check", Endpoint: m.Endpoint,
			Region: m.Region, PathStyle: true, AccessKey: m.AccessKey, SecretKey: m.SecretKey}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.EnsureBucket(context.Background()); err != nil {
			t.Fatal(err)
		}
		runCheck(t, cat, st)
	})
}

func runCheck(t *testing.T, cat catalog.Backend, st objstore.Store) {
	ctx := context.Background()
	n := nodetest.Start(t, nodetest.On(cat, st))
	c := client.New(n.URL)
	if _, err := c.CreateTopic(ctx, "orders", 3, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		recs := []client.Record{{Value: client.String("a"), Partition: client.Int32(int32(i % 3))}, {Value: client.String("b"), Partition: client.Int32(int32((i + 1) % 3))}}
		if _, err := c.Produce(ctx, "orders", recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := check.Run(ctx, cat, st, check.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, r)
	if !r.OK() || r.Live != 5 || r.Chunks != 10 || r.Objects != 5 {
		t.Fatalf("a clean catalog and bucket: %+v", r)
	}

	// Break things: delete one live object, corrupt another, plant a stray and a young
	// unknown object.
	var keys []string
	_ = st.List(ctx, "", func(i objstore.Info) error { keys = append(keys, i.Key); return nil })
	if err := st.Delete(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	body, err := st.Get(ctx, keys[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, keys[1]); err != nil {
		t.Fatal(err)
	}
	body[len(body)-3] ^= 0xff // the trailer
	if err := st.Put(ctx, keys[1], body[1:]); err != nil {
		t.Fatal(err)
	}
	stray := segment.NewKey(time.Now().Add(-2 * time.Hour))
	young := segment.NewKey(time.Now())
	for _, k := range []string{stray, young} {
		if err := st.Put(ctx, k, []byte("not a segment")); err != nil {
			t.Fatal(err)
		}
	}

	r, err = check.Run(ctx, cat, st, check.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, r)
	for _, tc := range []struct {
		kind check.Kind
		key  string
	}{
		{check.MissingObject, keys[0]},
		{check.SizeMismatch, keys[1]},
		{check.CorruptObject, keys[1]},
		{check.StrayObject, stray},
	} {
		found := false
		for _, p := range r.Problems {
			found = found || p.Kind == tc.kind && p.Key == tc.key
		}
		if !found {
			t.Errorf("no %s for %s", tc.kind, tc.key)
		}
	}
	if len(r.Problems) != 4 || r.Unknown != 1 {
		t.Errorf("%d problems, %d young unknown objects; want 4 and 1", len(r.Problems), r.Unknown)
	}
}

func logReport(t *testing.T, r *check.Report) {
	var b strings.Builder
	r.WriteText(&b)
	t.Log(b.String())
}
