package jepsen

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fs"
)

// Deliberately broken builds, each a decorator around the catalog or the object store
// (test code only, never a hook in the production binary), and a test that the checker
// catches each. The control run without a decorator must come out clean, so the
// findings are the decorator's doing.

// ackBeforeCommit acknowledges every fourth flush before its commit — and the commit
// then never lands, as when it fails after the answer went out. The offsets it
// answers are the ones the commit would have taken had it run.
type ackBeforeCommit struct {
	catalog.Catalog
	n atomic.Int64
}

func (c *ackBeforeCommit) Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	if c.n.Add(1)%4 != 0 {
		return c.Catalog.Commit(ctx, seg)
	}
	next := map[[2]int64]int64{}
	out := make([]catalog.Result, len(seg.Requests))
	for i, r := range seg.Requests {
		for _, b := range r.Batches {
			k := [2]int64{b.TopicID, int64(b.Partition)}
			if _, ok := next[k]; !ok {
				parts, err := c.Catalog.Partitions(ctx, b.TopicID)
				if err != nil {
					return nil, err
				}
				next[k] = parts[b.Partition].HighWatermark
			}
			out[i].BaseOffsets = append(out[i].BaseOffsets, next[k])
			next[k] += int64(b.Records)
		}
	}
	return out, nil
}

// reuseOffset commits normally but answers every fifth flush's first offset one
// lower than assigned: an offset already given to another record.
type reuseOffset struct {
	catalog.Catalog
	n atomic.Int64
}

func (c *reuseOffset) Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	res, err := c.Catalog.Commit(ctx, seg)
	if err != nil || c.n.Add(1)%5 != 0 {
		return res, err
	}
	for i := range res {
		for j := range res[i].BaseOffsets {
			if res[i].Err == nil && res[i].BaseOffsets[j] > 0 {
				res[i].BaseOffsets[j]--
				return res, nil
			}
		}
	}
	return res, nil
}

// deleteNoGrace deletes each object a moment after it was written, as a deleter that
// waits neither for the catalog rows to go nor for a grace period would.
type deleteNoGrace struct {
	objstore.Store
	after time.Duration
	wg    sync.WaitGroup
}

func (s *deleteNoGrace) Put(ctx context.Context, key string, body []byte) error {
	return s.PutParts(ctx, key, [][]byte{body})
}

// PutParts is the writer's put.
func (s *deleteNoGrace) PutParts(ctx context.Context, key string, parts [][]byte) error {
	err := s.Store.PutParts(ctx, key, parts)
	if err == nil {
		s.wg.Add(1)
		time.AfterFunc(s.after, func() {
			defer s.wg.Done()
			_ = s.Store.Delete(context.Background(), key)
		})
	}
	return err
}

// runBroken runs the workload for a few seconds against two in-process nodes over
// SQLite and the filesystem store, with the given decorators, and checks the history.
func runBroken(t *testing.T, com func(catalog.Catalog) Committer, store func(objstore.Store) objstore.Store) *Report {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	cat, err := sqlite.Open(ctx, filepath.Join(dir, "catalog.db"), catalog.Options{CommitTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	var st objstore.Store
	if st, err = fs.New(filepath.Join(dir, "objects")); err != nil {
		t.Fatal(err)
	}
	if store != nil {
		st = store(st)
	}
	start := func() string {
		cfg := NodeConfig{Catalog: cat, Store: st, CommitTimeout: 3 * time.Second}
		if com != nil {
			cfg.Committer = com(cat)
		}
		n, err := StartNode(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := n.Close(); err != nil {
				t.Logf("node: %v", err)
			}
		})
		return n.URL
	}
	nodes := []string{start(), start()}
	bal := NewBalancer(nodes)
	wl := NewWorkload(bal, WorkloadConfig{Partitions: 2, GroupMembers: -1, FinalTimeout: 8 * time.Second})
	if err := wl.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	wl.Start(rctx)
	<-rctx.Done()
	wl.Stop()
	// The final read goes through a node started now, whose cache holds nothing: the
	// nodes that wrote the records (and read them back while the run went on) may
	// still hold what a broken build lost from the store (CI once saw deleting without
	// the grace period go unnoticed, every record served from their caches).
	bal.SetNodes([]string{start()})
	wl.Final(ctx)
	r := Check(wl.History())
	t.Log(r.Summary())
	for _, a := range r.Anomalies() {
		t.Log(a)
	}
	return r
}

func TestBrokenBuildsAreCaught(t *testing.T) {
	t.Run("control", func(t *testing.T) {
		r := runBroken(t, nil, nil)
		if !r.Valid() || r.OK == 0 {
			t.Fatalf("a correct build must check clean: %s", r.Summary())
		}
	})
	for _, tc := range []struct {
		name  string
		com   func(catalog.Catalog) Committer
		store func(objstore.Store) objstore.Store
		want  []Kind // each must be found
	}{
		{
			name: "acknowledging before the commit",
			com:  func(c catalog.Catalog) Committer { return &ackBeforeCommit{Catalog: c} },
			want: []Kind{Lost, Inconsistent},
		},
		{
			name: "reusing an offset",
			com:  func(c catalog.Catalog) Committer { return &reuseOffset{Catalog: c} },
			want: []Kind{Inconsistent},
		},
		{
			name:  "deleting without the grace period",
			store: func(s objstore.Store) objstore.Store { return &deleteNoGrace{Store: s, after: time.Second} },
			want:  []Kind{FinalIncomplete},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBroken(t, tc.com, tc.store)
			for _, k := range tc.want {
				if r.Counts[k] == 0 {
					t.Errorf("the checker missed it: no %s (%s)", k, r.Summary())
				}
			}
		})
	}
}
