// Package usage counts what each topic — and each principal on it — costs: bytes and
// records in and out, the object-store requests and catalog commits it caused
// (attributed by byte share), kept per node in per-minute buckets and added to the
// catalog (catalog.Usage) every Config.Interval in a transaction of its own, never
// inside a flush commit. A node's answer adds its unwritten counts to the catalog's, so
// it is current to the moment; the counts are also Prometheus counters with a topic
// label of bounded cardinality.
//
// Callers add once per flush, per fetch response or per GET — an aggregate, never per
// record — so counting costs one short mutex hold on those paths.
package usage

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strata-io/strata/catalog"
)

// Store keeps the buckets (both catalog backends).
type Store = catalog.Usage

// Config tunes a Recorder. Zero fields take the defaults their comments give.
type Config struct {
	// Interval between writes of the counts to the catalog (default 1s).
	Interval time.Duration
	// Retention: buckets older than this are dropped (default 31 days).
	Retention time.Duration
	// TopicLabels caps the distinct topic label values of the metrics (default 100):
	// topics beyond it are counted under topic="other".
	TopicLabels int
	// Name resolves a topic id to its name for the metrics' label, once per topic.
	Name func(ctx context.Context, topicID int64) (string, error)
	// Now is the clock of the buckets (default time.Now).
	Now func() time.Time
}

// The defaults of Config.
const (
	DefaultInterval    = time.Second
	DefaultRetention   = 31 * 24 * time.Hour
	DefaultTopicLabels = 100
	// OtherTopic is the label of the topics beyond Config.TopicLabels.
	OtherTopic = "other"
)

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	if c.TopicLabels <= 0 {
		c.TopicLabels = DefaultTopicLabels
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

type bucket struct {
	topic     int64
	principal string
	minute    int64 // unix seconds of the minute's start
}

// Recorder counts usage on one node and writes it to the catalog. Safe for concurrent
// use; Run writes until its context ends.
type Recorder struct {
	store Store
	cfg   Config
	log   *slog.Logger

	mu      sync.Mutex
	pending map[bucket]*catalog.UsageCounts // not yet written to the catalog
	totals  map[int64]*catalog.UsageCounts  // since the node started, for the metrics

	// writeMu is held by a write and by an answer, so an answer never sees counts both
	// in the catalog and still pending (or in neither).
	writeMu sync.Mutex

	m *metrics
}

// New returns a Recorder writing to store.
func New(store Store, cfg Config, log *slog.Logger) *Recorder {
	r := &Recorder{
		store:   store,
		cfg:     cfg.withDefaults(),
		log:     log.With("component", "usage"),
		pending: map[bucket]*catalog.UsageCounts{},
		totals:  map[int64]*catalog.UsageCounts{},
	}
	r.m = newMetrics(r)
	return r
}

// Add counts c for a topic and a principal ("" for anonymous or unattributed) at now:
// one call per flush, fetch response or GET.
func (r *Recorder) Add(now time.Time, topicID int64, principal string, c catalog.UsageCounts) {
	k := bucket{topic: topicID, principal: principal, minute: catalog.UsageMinute(now).Unix()}
	r.mu.Lock()
	p := r.pending[k]
	if p == nil {
		p = new(catalog.UsageCounts)
		r.pending[k] = p
	}
	p.Add(c)
	t := r.totals[topicID]
	if t == nil {
		t = new(catalog.UsageCounts)
		r.totals[topicID] = t
	}
	t.Add(c)
	r.mu.Unlock()
}

// TopicUsage answers a topic's counts per principal from the bucket since falls in
// onwards: the catalog's (every node's written counts) plus this node's unwritten ones.
func (r *Recorder) TopicUsage(ctx context.Context, topicID int64, since time.Time) ([]catalog.PrincipalUsage, error) {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	rows, err := r.store.TopicUsage(ctx, topicID, since)
	if err != nil {
		return nil, err
	}
	from := catalog.UsageMinute(since).Unix()
	r.mu.Lock()
	for k, c := range r.pending {
		if k.topic != topicID || k.minute < from {
			continue
		}
		i := slices.IndexFunc(rows, func(u catalog.PrincipalUsage) bool { return u.Principal == k.principal })
		if i < 0 {
			i = len(rows)
			rows = append(rows, catalog.PrincipalUsage{Principal: k.principal})
		}
		rows[i].Add(*c)
	}
	r.mu.Unlock()
	slices.SortFunc(rows, func(a, b catalog.PrincipalUsage) int { return strings.Compare(a.Principal, b.Principal) })
	return rows, nil
}

// Run writes the counts every Config.Interval and drops buckets past the retention
// every minute, until ctx ends; then it writes what is left, once.
func (r *Recorder) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	var pruned time.Time
	for {
		select {
		case <-ctx.Done():
			// The last counts, on a context of their own: the node's is over.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := r.Write(fctx); err != nil {
				r.log.Warn("write usage at shutdown", "err", err)
			}
			return nil
		case <-t.C:
		}
		if err := r.Write(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("write usage", "err", err)
		}
		if now := r.cfg.Now(); now.Sub(pruned) >= time.Minute {
			pruned = now
			if n, err := r.store.PruneUsage(ctx, now.Add(-r.cfg.Retention)); err != nil && ctx.Err() == nil {
				r.log.Warn("prune usage", "err", err)
			} else if n > 0 {
				r.log.Debug("pruned usage", "buckets", n)
			}
		}
	}
}

// Write adds the unwritten counts to the catalog in one transaction. On failure they
// stay pending for the next write (a write whose outcome is unknown may so be counted
// twice: these are estimates, not offsets).
func (r *Recorder) Write(ctx context.Context) error {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	r.mu.Lock()
	p := r.pending
	if len(p) == 0 {
		r.mu.Unlock()
		return nil
	}
	r.pending = make(map[bucket]*catalog.UsageCounts, len(p))
	r.mu.Unlock()
	deltas := make([]catalog.UsageDelta, 0, len(p))
	for k, c := range p {
		deltas = append(deltas, catalog.UsageDelta{TopicID: k.topic, Principal: k.principal, Minute: time.Unix(k.minute, 0), UsageCounts: *c})
	}
	err := r.store.AddUsage(ctx, deltas)
	if err == nil {
		return nil
	}
	r.mu.Lock()
	for k, c := range p {
		if q := r.pending[k]; q != nil {
			q.Add(*c)
		} else {
			r.pending[k] = c
		}
	}
	r.mu.Unlock()
	return fmt.Errorf("usage: write %d buckets: %w", len(deltas), err)
}
