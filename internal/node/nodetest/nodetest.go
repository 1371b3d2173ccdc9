// Package nodetest starts a real node for a test: internal/node's, assembled as strata
// serve assembles it and served on loopback (internal/node/inproc), over an embedded
// catalog and store (SQLite and the filesystem, in a temporary directory) or over the
// test services (Postgres and MinIO, through internal/testkit/testsvc: under CI a missing
// service fails the test). Options say what the test needs of it — roles, keys
// required, a memory budget, the Kafka listener, the connect role — and anything
// else is a mutator of the node's configuration. Everything started is stopped when
// the test ends.
package nodetest

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/inproc"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/kafka"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/objstore/s3"
)

// The defaults a test's node starts with, where they differ from strata serve's: a
// test waits for answers, so the writer lingers briefly and the reader polls often.
const (
	Linger          = 5 * time.Millisecond
	PollInterval    = 50 * time.Millisecond
	ShutdownTimeout = 10 * time.Second
	// KeyPoll is how often the guard reloads keys and ACLs with Keys.
	KeyPoll = 50 * time.Millisecond
	// NodeLease is the Kafka registration's lease with Kafka.
	NodeLease = 5 * time.Second
)

// Node is a started node.
type Node struct {
	*inproc.Node
	Catalog catalog.Backend
	// Store is the store under WrapStore's decorators: what is really stored.
	Store objstore.Store
	// Dir holds an embedded node's catalog.db and objects/ ("" on the services).
	Dir string
	// Logs is what the node logged (JSON, from level info), printed when the test
	// fails; nil with Log.
	Logs *Logs
}

// Option says what a test needs of its node.
type Option func(*options)

type options struct {
	services bool
	dsn, dir string
	cat      catalog.Backend
	store    objstore.Store
	catOpts  catalog.Options
	wrap     []func(objstore.Store) objstore.Store
	node     []inproc.Option
	log      *slog.Logger
}

// OnServices runs the node on the test services: a fresh database on the test
// Postgres (or dsn, when given) and a fresh bucket on the test MinIO.
func OnServices(dsn ...string) Option {
	return func(o *options) {
		o.services = true
		if len(dsn) > 0 {
			o.dsn = dsn[0]
		}
	}
}

// InDir keeps an embedded node's catalog and objects in dir (a node started again on
// it finds its data) instead of a fresh temporary directory.
func InDir(dir string) Option { return func(o *options) { o.dir = dir } }

// On runs the node over a catalog and a store the test opened (nodes sharing them form
// a cluster); the test closes them.
func On(cat catalog.Backend, store objstore.Store) Option {
	return func(o *options) { o.cat, o.store = cat, store }
}

// CatalogOptions are the options the catalog is opened with (not with On).
func CatalogOptions(opts catalog.Options) Option { return func(o *options) { o.catOpts = opts } }

// WrapStore puts decorators around the store (faults, counting), innermost first.
func WrapStore(wrap func(objstore.Store) objstore.Store) Option {
	return func(o *options) { o.wrap = append(o.wrap, wrap) }
}

// Roles runs exactly these roles (default writer and reader): "writer", "reader",
// "compactor", "connect".
func Roles(roles ...string) Option { return Mutate(inproc.Roles(roles...)) }

// Keys requires authentication, with these static keys as superusers.
func Keys(keys ...string) Option { return Mutate(inproc.Keys(KeyPoll, keys...)) }

// Memory gives the node a memory budget of this many bytes, shared with the Kafka
// listener; the reader's cache then takes 16 MiB of it.
func Memory(budget int64) Option {
	return Mutate(func(c *node.Config) {
		c.MemoryBudget = budget
		c.ReaderConfig.CacheBytes = 16 << 20
	})
}

// Kafka serves the Kafka protocol too (Node.KafkaAddr), its listener adjusted by
// mutate.
func Kafka(mutate ...func(*kafka.Config)) Option { return Mutate(inproc.Kafka(NodeLease, mutate...)) }

// Connect runs the connect role (with the writer and reader) with wc, its lease 2s
// unless set.
func Connect(wc connect.WorkerConfig) Option {
	return Mutate(func(c *node.Config) {
		if wc.Lease == 0 {
			wc.Lease = 2 * time.Second
		}
		c.Connect, c.ConnectConfig = true, wc
	})
}

// Log sends the node's log to l instead of Node.Logs.
func Log(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// Mutate adjusts the node's configuration, after the options before it.
func Mutate(m ...func(*node.Config)) Option {
	return func(o *options) { o.node = append(o.node, m...) }
}

// Start starts a node for t, stopped (and its catalog closed) when t ends.
func Start(t testing.TB, opts ...Option) *Node {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	tn := &Node{}
	if o.log == nil {
		tn.Logs = &Logs{}
		o.log = slog.New(slog.NewJSONHandler(tn.Logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		// Registered first so that it runs last: the log then includes the shutdown.
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("node log:\n%s", tn.Logs.String())
			}
		})
	}
	tn.Catalog, tn.Store = o.cat, o.store
	if tn.Catalog == nil {
		tn.open(t, &o)
	}
	store := tn.Store
	for _, w := range o.wrap {
		store = w(store)
	}
	defaults := func(c *node.Config) {
		c.WriterConfig.Linger = Linger
		c.ReaderConfig.PollInterval = PollInterval
		c.ShutdownTimeout = ShutdownTimeout
		c.Log = o.log
	}
	n, err := inproc.Start(t.Context(), tn.Catalog, store, append([]inproc.Option{defaults}, o.node...)...)
	if err != nil {
		t.Fatal(err)
	}
	tn.Node = n
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("node: %v", err)
		}
	})
	return tn
}

// open opens the catalog and the store the options name, closed when t ends (after
// the node, whose cleanup is registered later).
func (tn *Node) open(t testing.TB, o *options) {
	t.Helper()
	opts := o.catOpts
	if opts.Logger == nil {
		opts.Logger = o.log
	}
	ctx := context.Background()
	if o.services {
		dsn := o.dsn
		if dsn == "" {
			dsn = testsvc.PostgresDSN(t)
		}
		m := testsvc.MinIO(t)
		st, err := s3.New(ctx, s3.Config{Bucket: testsvc.BucketName(), Prefix: "node", Endpoint: m.Endpoint, Region: m.Region,
			PathStyle: true, AccessKey: m.AccessKey, SecretKey: m.SecretKey}, o.log)
		if err != nil {
			t.Fatal(err)
		}
		bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := st.EnsureBucket(bctx); err != nil {
			t.Fatal(err)
		}
		cat, err := postgres.Open(ctx, dsn, opts)
		if err != nil {
			t.Fatalf("open catalog: %v", err)
		}
		t.Cleanup(func() { _ = cat.Close() })
		tn.Catalog, tn.Store = cat, st
		return
	}
	tn.Dir = o.dir
	if tn.Dir == "" {
		tn.Dir = t.TempDir()
	}
	st, err := fs.New(filepath.Join(tn.Dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := sqlite.Open(ctx, filepath.Join(tn.Dir, "catalog.db"), opts)
	if err != nil {
		t.Fatalf("open catalog: %v", err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	tn.Catalog, tn.Store = cat, st
}

// Logs is a node's log, written by many goroutines.
type Logs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything logged so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
