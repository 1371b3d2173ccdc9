// Package compactor is the compactor role (docs/design.md "Compactor"): it keeps storage
// cost and read amplification flat as data ages. Per partition, under a lease from the
// catalog, it enforces retention (retention.ms, retention.bytes) by advancing the log
// start offset, merges small chunks of multi-partition writer objects into
// per-partition objects near the topic's segment.bytes (real offsets, sparse offset
// index), keeps the latest record per key for cleanup.policy=compact, and drops chunk
// rows nothing can read any more. Globally it deletes objects whose rows are gone once
// a grace period has passed (invariant 4), and sweeps orphans: objects uploaded but
// never committed.
//
// Partitions are worked on when they are due, most overdue first (catalog/compact.go):
// a pass leases up to Config.MaxPartitions of them and, releasing each, records when it
// next needs a pass — the time retention.ms will expire its oldest chunk, when rows it
// could not touch yet settle, when a kept tombstone expires — so the partitions with
// nothing to do cost nothing, however many there are.
//
// Every rewrite writes the new object first and then swaps the chunk rows in one
// compare-and-swap transaction; a swap refused because anything moved abandons the new
// object. Offsets and record contents never change. Any number of compactors may run
// against one catalog: work is leased with fencing tokens.
package compactor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/objstore"
)

// objectStore is the part of the object store the compactor uses.
type objectStore interface {
	Put(ctx context.Context, key string, body []byte) error // create-only
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	Delete(ctx context.Context, key string) error // a missing key is not an error
	List(ctx context.Context, prefix string, fn func(objstore.Info) error) error
}

// compactionCatalog is the part of the catalog the compactor uses: the compaction
// interface and the database clock.
type compactionCatalog interface {
	catalog.Compaction
	Now(ctx context.Context) (time.Time, error)
}

var _ objectStore = objstore.Store(nil)

// Defaults of Config.
const (
	DefaultInterval          = time.Minute
	DefaultGracePeriod       = 10 * time.Minute
	DefaultLeaseTTL          = 5 * time.Minute
	DefaultSweepInterval     = 15 * time.Minute
	DefaultMaxPartitions     = 1000
	DefaultMaxRewriteBytes   = 1 << 30
	DefaultIndexInterval     = 64 << 10
	DefaultMinCleanableRatio = 0.5
	DefaultMaxCompactionKeys = 4 << 20
)

// Config tunes a Compactor. A zero field takes its default.
type Config struct {
	// Interval is the time between passes of Run. Default 1m.
	Interval time.Duration
	// GracePeriod is how long an object stays in the store after its last chunk row
	// went: longer than any reader holds chunk coordinates (one fetch, or one
	// long-poll wake-up). Default 10m.
	GracePeriod time.Duration
	// LeaseTTL is how long a lease on a partition or a job lasts; a compactor that dies
	// holding one delays that work by this much. Default 5m.
	LeaseTTL time.Duration
	// SweepInterval is how often the orphan sweep lists the store (across all
	// compactors: the job is leased). Default 15m.
	SweepInterval time.Duration
	// MaxPartitions is the batch: the most partitions one pass works on, most overdue
	// first (partitions with nothing due are never visited). A backlog larger than a
	// batch per interval shows as a growing strata_compactor_overdue_seconds: raise it,
	// shorten the interval, or run more compactors. Default 1000.
	MaxPartitions int
	// MaxRewriteBytes bounds the chunk bytes one pass rewrites per partition (merging
	// and key compaction). Default 1 GiB.
	MaxRewriteBytes int64
	// TargetBytes, when positive, overrides every topic's segment.bytes as the size of
	// merged objects (tests, and operators who want one size everywhere).
	TargetBytes int64
	// IndexInterval is the sparse offset index's spacing in merged objects. Default 64 KiB.
	IndexInterval int64
	// MinCleanableRatio is Kafka's min.cleanable.dirty.ratio: key compaction of a
	// partition runs when the bytes not yet compacted reach this share of its bytes
	// (or a kept tombstone's delete.retention.ms has passed). Default 0.5; set a
	// negative value for 0 (compact whenever anything is dirty).
	MinCleanableRatio float64
	// MaxCompactionKeys bounds the keys one key compaction holds in memory; a partition
	// with more is compacted in several passes. Default 4Mi.
	MaxCompactionKeys int
	// Holder names this compactor in leases. Default: host name, pid and a random
	// suffix.
	Holder string
}

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.GracePeriod <= 0 {
		c.GracePeriod = DefaultGracePeriod
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.MaxPartitions <= 0 {
		c.MaxPartitions = DefaultMaxPartitions
	}
	if c.MaxRewriteBytes <= 0 {
		c.MaxRewriteBytes = DefaultMaxRewriteBytes
	}
	if c.IndexInterval <= 0 {
		c.IndexInterval = DefaultIndexInterval
	}
	switch {
	case c.MinCleanableRatio == 0:
		c.MinCleanableRatio = DefaultMinCleanableRatio
	case c.MinCleanableRatio < 0:
		c.MinCleanableRatio = 0
	}
	if c.MaxCompactionKeys <= 0 {
		c.MaxCompactionKeys = DefaultMaxCompactionKeys
	}
	if c.Holder == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Holder = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	return c
}

// ErrInvalidConfig is wrapped by every Config.Validate error.
var ErrInvalidConfig = errors.New("compactor: invalid config")

// Validate checks c (zero fields meaning their defaults) and says how to fix it.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	d := c.withDefaults()
	switch {
	case d.Interval < 100*time.Millisecond:
		return bad("interval %s: want at least 100ms (default %s)", c.Interval, DefaultInterval)
	case d.GracePeriod < time.Second:
		return bad("grace period %s: want at least 1s, and longer than any fetch holds chunk coordinates (default %s)", c.GracePeriod, DefaultGracePeriod)
	case d.LeaseTTL < time.Second:
		return bad("lease TTL %s: want at least 1s (default %s)", c.LeaseTTL, DefaultLeaseTTL)
	case c.MaxPartitions < 0:
		return bad("max partitions %d: want a positive batch of partitions per pass (default %d)", c.MaxPartitions, DefaultMaxPartitions)
	case c.TargetBytes < 0:
		return bad("target bytes %d: want 0 (the topics' segment.bytes) or a positive size", c.TargetBytes)
	case d.MinCleanableRatio > 1:
		return bad("min cleanable ratio %g: want between 0 and 1 (default %g)", c.MinCleanableRatio, DefaultMinCleanableRatio)
	}
	return nil
}

// Compactor is the compactor role. Pass is safe to call from one goroutine at a time;
// any number of Compactors (in one process or many) may share a catalog and a store.
type Compactor struct {
	store objectStore
	cat   compactionCatalog
	cfg   Config
	log   *slog.Logger
	m     *metrics

	// passLag is the largest compaction lag a pass has seen (see metrics).
	passLag time.Duration
}

// New returns a Compactor. cfg's zero fields take their defaults; an invalid cfg panics,
// so call cfg.Validate at start-up to report it properly. A nil log discards; a nil reg
// registers no metrics.
func New(store objectStore, cat compactionCatalog, cfg Config, log *slog.Logger, reg prometheus.Registerer) *Compactor {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	return &Compactor{store: store, cat: cat, cfg: cfg, log: log.With("component", "compactor", "holder", cfg.Holder), m: newMetrics(reg)}
}

// Run runs a pass every Config.Interval until ctx ends, then returns nil. A failed pass
// is logged and retried at the next tick.
func (c *Compactor) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		if err := c.Pass(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("compaction pass", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// partitionBatch is how many partitions are leased at a time.
const partitionBatch = 4

// Pass runs one bounded pass: up to Config.MaxPartitions due partitions, most overdue
// first (retention, row drops, merging, key compaction, reclaiming deleted topics),
// then the deletion of objects past their grace period, then — when due — the orphan
// sweep. Work another compactor holds is skipped. It returns the errors met, joined;
// every partition and job is attempted regardless.
func (c *Compactor) Pass(ctx context.Context) error {
	start := time.Now()
	var errs []error
	visited := map[catalog.TopicPartition]bool{}
	c.passLag = 0
	for len(visited) < c.cfg.MaxPartitions && ctx.Err() == nil {
		leases, err := c.cat.AcquirePartitions(ctx, c.cfg.Holder, c.cfg.LeaseTTL, min(partitionBatch, c.cfg.MaxPartitions-len(visited)))
		if err != nil {
			errs = append(errs, err)
			break
		}
		if len(leases) == 0 {
			break
		}
		again := false
		for _, l := range leases {
			tp := catalog.TopicPartition{TopicID: l.TopicID, Partition: l.Partition}
			if visited[tp] {
				// Due again since its turn in this pass: everything that was due before
				// it has had its turn too. The rest waits for the next pass.
				again = true
				c.giveBack(ctx, l)
				continue
			}
			visited[tp] = true
			if err := c.partition(ctx, l); err != nil {
				errs = append(errs, err)
			}
		}
		if again {
			break
		}
	}
	if err := c.deleteExpired(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := c.sweep(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := c.backlog(ctx); err != nil {
		errs = append(errs, err)
	}
	c.m.lag.Set(c.passLag.Seconds())
	c.m.passPartitions.Observe(float64(len(visited)))
	err := errors.Join(errs...)
	result := "ok"
	if err != nil {
		result = "error"
	}
	c.m.passes.WithLabelValues(result).Inc()
	c.m.passSeconds.Observe(time.Since(start).Seconds())
	return err
}

// backlog reads the due work left after the pass into the gauges.
func (c *Compactor) backlog(ctx context.Context) error {
	b, err := c.cat.CompactionBacklog(ctx)
	if err != nil {
		return fmt.Errorf("compactor: %w", err)
	}
	c.m.due.Set(float64(b.Due))
	overdue := time.Duration(0)
	if !b.Oldest.IsZero() {
		overdue = max(0, b.Now.Sub(b.Oldest))
	}
	c.m.overdue.Set(overdue.Seconds())
	return nil
}
