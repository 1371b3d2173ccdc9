package tables

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/registry"
)

// Defaults of Config.
const (
	DefaultPoll       = time.Second
	DefaultLeaseTTL   = 30 * time.Second
	DefaultMaxRecords = 1_000_000
	DefaultMaxBytes   = 256 << 20
)

// SummaryOffsets is the snapshot summary property that lists the offsets a snapshot's
// data files cover: JSON, [{"partition":0,"from":0,"to":100},…], each [from, to).
const SummaryOffsets = "strata.offsets"

// Config tunes the tables role.
type Config struct {
	// Location is the bucket's URI, under which tables live (tables/<topic>-<id>):
	// s3://bucket/prefix or file:///dir, as the bucket URL names it without its query.
	Location string
	// Holder names this worker in the leases; "": a random one.
	Holder string
	// Poll is how often the role looks for topics whose commit interval has passed.
	// 0: DefaultPoll.
	Poll time.Duration
	// LeaseTTL is how long a worker's partitions stay its without renewal; a lease
	// lasts at least three of its topic's commit intervals. 0: DefaultLeaseTTL.
	LeaseTTL time.Duration
	// MaxRecords and MaxBytes bound one partition's share of one commit (records;
	// key, value and header bytes): a commit that would hold more leaves the rest to
	// the next. 0: the defaults.
	MaxRecords int
	MaxBytes   int64

	// Maintenance (Role.Maintain), run by the worker holding a table's partition 0
	// every MaintainInterval (0: DefaultMaintainInterval; below 0: never). Data files
	// under three quarters of TargetFileBytes are merged towards it once at least
	// MinInputFiles of them share a day; snapshots older than SnapshotMaxAge are
	// expired, keeping the last MinSnapshots; files no metadata references are
	// deleted once older than OrphanGrace. 0: the defaults.
	MaintainInterval time.Duration
	TargetFileBytes  int64
	MinInputFiles    int
	SnapshotMaxAge   time.Duration
	MinSnapshots     int
	OrphanGrace      time.Duration

	// Registerer receives the role's metrics (strata_tables_*); nil: none.
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() Config {
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.MaxRecords <= 0 {
		c.MaxRecords = DefaultMaxRecords
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaintainInterval == 0 {
		c.MaintainInterval = DefaultMaintainInterval
	}
	if c.TargetFileBytes <= 0 {
		c.TargetFileBytes = DefaultTargetFileBytes
	}
	if c.MinInputFiles <= 0 {
		c.MinInputFiles = DefaultMinInputFiles
	}
	if c.SnapshotMaxAge <= 0 {
		c.SnapshotMaxAge = DefaultSnapshotMaxAge
	}
	if c.MinSnapshots <= 0 {
		c.MinSnapshots = DefaultMinSnapshots
	}
	if c.OrphanGrace <= 0 {
		c.OrphanGrace = DefaultOrphanGrace
	}
	if c.Holder == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.Holder = "tables-" + hex.EncodeToString(b[:])
	}
	return c
}

// Validate says what is wrong with c, if anything.
func (c Config) Validate() error {
	if !strings.HasPrefix(c.Location, "s3://") && !strings.HasPrefix(c.Location, "file:///") {
		return fmt.Errorf("tables: location %q: want the bucket's URI, s3://bucket/prefix or file:///dir", c.Location)
	}
	return nil
}

// RoleCatalog is the part of the catalog the role uses.
type RoleCatalog interface {
	Topics(ctx context.Context) ([]catalog.Topic, error)
	// Partitions gives maintenance the log start offsets (iceberg.retention=follow).
	Partitions(ctx context.Context, topicID int64) ([]catalog.PartitionInfo, error)
	catalog.Tables
	SchemaSource
}

// Records reads committed records (the reader role).
type Records interface {
	Fetch(ctx context.Context, f reader.Fetch) (reader.Result, error)
}

// Role is the tables role: it converts the partitions it leases.
type Role struct {
	cat   RoleCatalog
	recs  Records
	store Store
	cfg   Config
	log   *slog.Logger
	// due is, per topic id, when its next commit is due (this worker's view).
	due map[int64]time.Time
	// held are the leases this worker holds, released when Run ends.
	held map[partKey]catalog.TableLease
	// maintained is, per topic id whose partition 0 this worker holds, when the
	// table's next maintenance is due.
	maintained map[int64]time.Time
	m          *metrics
	// schemas are the registry's schemas this worker parsed, by id (typed columns).
	schemas map[int64]*registry.Schema
	stops   stops
}

type partKey struct {
	topic     int64
	partition int32
}

// New returns the role; Run runs it.
func New(store Store, cat RoleCatalog, recs Records, cfg Config, log *slog.Logger) *Role {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	return &Role{cat: cat, recs: recs, store: store, cfg: cfg, log: log.With("component", "tables", "holder", cfg.Holder), due: map[int64]time.Time{}, held: map[partKey]catalog.TableLease{}, maintained: map[int64]time.Time{}, m: newMetrics(cfg.Registerer), schemas: map[int64]*registry.Schema{}}
}

// Run converts until ctx ends, then releases its leases, so that another worker takes
// its partitions at once rather than when the leases expire. Run and Pass are not for
// concurrent use.
func (r *Role) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	defer r.release()
	for {
		if err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("tables pass", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (r *Role) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for k, l := range r.held {
		if err := r.cat.ReleaseTableLease(ctx, l); err != nil {
			r.log.Warn("release table lease", "topic_id", l.TopicID, "partition", l.Partition, "err", err)
		}
		delete(r.held, k)
	}
}

// Pass visits every table topic whose commit interval has passed: it leases what
// partitions it can and commits what they hold.
func (r *Role) Pass(ctx context.Context) error {
	topics, err := r.cat.Topics(ctx)
	if err != nil {
		return fmt.Errorf("tables: list topics: %w", err)
	}
	now := time.Now()
	var errs []error
	for _, t := range topics {
		cfg, err := catalog.ParseConfig(t.Configs)
		if err != nil || !cfg.IcebergEnabled {
			continue
		}
		if now.Before(r.due[t.ID]) {
			continue
		}
		interval := time.Duration(cfg.IcebergCommitIntervalMs) * time.Millisecond
		start := time.Now()
		if _, err := r.Topic(ctx, t, cfg, max(r.cfg.LeaseTTL, 3*interval)); err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", t.Name, err))
		}
		// The next commit starts early by what this one took, so that a snapshot is at
		// most about one interval behind the topic when it lands — its records were
		// read when it started — not an interval plus the conversion.
		r.due[t.ID] = start.Add(interval - min(time.Since(start), interval/2))
		if r.maintainDue(t, now) {
			_, err := r.Maintain(ctx, t)
			switch {
			case err == nil:
				r.m.maintenance.WithLabelValues("ok").Inc()
			case errors.Is(err, catalog.ErrTableConflict):
				r.m.maintenance.WithLabelValues("conflict").Inc()
			default:
				r.m.maintenance.WithLabelValues("error").Inc()
				errs = append(errs, fmt.Errorf("maintain topic %s: %w", t.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Topic leases what partitions of t it can for ttl and commits once what they hold
// (retrying a commit refused only because another worker's commit landed first). It
// answers the ranges committed.
func (r *Role) Topic(ctx context.Context, t catalog.Topic, cfg catalog.Config, ttl time.Duration) ([]catalog.TableRange, error) {
	var leases []catalog.TableLease
	for p := range t.Partitions {
		l, ok, err := r.cat.AcquireTableLease(ctx, t.ID, p, r.cfg.Holder, ttl)
		if err != nil {
			return nil, err
		}
		if ok {
			leases = append(leases, l)
			r.held[partKey{t.ID, p}] = l
		} else {
			delete(r.held, partKey{t.ID, p})
			r.forgetStatus(t, p) // another worker's now: its status is that worker's
		}
	}
	if len(leases) == 0 {
		return nil, nil
	}
	for attempt := 0; ; attempt++ {
		start := time.Now()
		ranges, err := r.commit(ctx, t, cfg, leases)
		switch {
		case err == nil && len(ranges) > 0:
			r.m.commits.WithLabelValues("ok").Inc()
			r.m.commitSeconds.Observe(time.Since(start).Seconds())
		case errors.Is(err, catalog.ErrTableConflict):
			r.m.commits.WithLabelValues("conflict").Inc()
		case err != nil:
			r.m.commits.WithLabelValues("error").Inc()
		}
		if !errors.Is(err, errMetadataMoved) || attempt == 3 {
			return ranges, err
		}
	}
}

// errMetadataMoved: a commit refused because another commit moved the table first,
// while this worker's partitions stayed where it read them: convert again on top.
var errMetadataMoved = errors.New("the table moved meanwhile")

// commit converts the leased partitions from where the table ends up to their last
// stable offsets (bounded by Config) and commits them as one snapshot.
func (r *Role) commit(ctx context.Context, t catalog.Topic, cfg catalog.Config, leases []catalog.TableLease) ([]catalog.TableRange, error) {
	fio := &fileIO{ctx: ctx, store: r.store, base: strings.TrimSuffix(r.cfg.Location, "/")}
	tbl, state, err := r.load(ctx, t, cfg, fio)
	if err != nil {
		return nil, err
	}
	// The table's columns: the value subject's latest schema evolves them first.
	vs, err := r.valueSchemas(ctx, t, cfg)
	if err != nil {
		return nil, err
	}
	// Table.Schema answers a copy each call: cur is the one sc is compared with.
	cur := tbl.Schema()
	sc := cur
	if vs != nil {
		if sc, err = evolve(cur, tbl.Metadata().LastColumnID(), vs.cols); err != nil {
			stopped := map[int32]*PartitionStatus{}
			for _, l := range leases {
				st := &PartitionStatus{Partition: l.Partition, Offset: state.NextOffset(l.Partition), Reason: err.Error()}
				r.setStatus(t, l.Partition, st)
				stopped[l.Partition] = st
			}
			return nil, r.commitStatus(ctx, t, tbl, state, fio, leases, stopped)
		}
	}
	cols := typedColumns(sc)
	var (
		parts   []partRecords
		ranges  []catalog.TableRange
		rows    int
		lag     int64
		stopped = map[int32]*PartitionStatus{}
	)
	for _, l := range leases {
		pr, rg, err := r.read(ctx, t.ID, l.Partition, state.NextOffset(l.Partition))
		if err != nil {
			return nil, fmt.Errorf("read partition %d: %w", l.Partition, err)
		}
		if len(cols) > 0 {
			var stop *PartitionStatus
			if pr.typed, stop = decode(vs, cols, pr.records); stop != nil {
				// What comes before the record commits; the range ends at it.
				stop.Partition = l.Partition
				pr.records, rg.To = pr.records[:len(pr.typed)], stop.Offset
			}
			stopped[l.Partition] = stop
		}
		r.setStatus(t, l.Partition, stopped[l.Partition])
		lag += max(pr.stable-rg.To, 0)
		if len(pr.records) == 0 {
			// Offsets with no row (transaction markers, aborted records) move with the
			// next commit that has rows: a commit of no rows would be an empty snapshot.
			continue
		}
		parts, ranges, rows = append(parts, pr), append(ranges, rg), rows+len(pr.records)
	}
	if rows == 0 {
		r.m.lag.WithLabelValues(t.Name).Set(float64(lag))
		return nil, r.commitStatus(ctx, t, tbl, state, fio, leases, stopped)
	}
	if sc != cur {
		// The new schema goes in the same metadata file as the rows that carry it.
		if tbl, err = withSchema(tbl, sc, state.MetadataLocation, fio); err != nil {
			return nil, err
		}
		r.log.Info("table schema evolved", "topic", t.Name, "schema_id", sc.ID, "columns", len(sc.Fields()))
	}
	rec, err := toArrow(sc, parts)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	summary, err := json.Marshal(summaryRanges(ranges))
	if err != nil {
		return nil, err
	}
	cio := &commitIO{r: r, fio: fio, topicID: t.ID, prev: state.MetadataLocation, base: tbl.Metadata(), ranges: ranges, leases: leases}
	tbl = table.New(tbl.Identifier(), tbl.Metadata(), state.MetadataLocation, fio.fsF(), cio)
	txn := tbl.NewTransaction()
	if err := statusProperties(txn, tbl.Metadata().Properties(), leases, stopped); err != nil {
		return nil, err
	}
	if err := txn.Append(ctx, rdr, iceberg.Properties{SummaryOffsets: string(summary)}); err != nil {
		return nil, fmt.Errorf("write data files: %w", err)
	}
	committed, err := txn.Commit(ctx)
	if err != nil {
		if errors.Is(err, catalog.ErrTableConflict) {
			moved, lerr := r.cat.TableState(ctx, t.ID)
			if lerr == nil && samePartitions(state, moved, ranges) {
				return nil, fmt.Errorf("%w: %w", errMetadataMoved, err)
			}
		}
		return nil, fmt.Errorf("commit: %w", err)
	}
	r.m.rows.Add(float64(rows))
	r.m.lag.WithLabelValues(t.Name).Set(float64(lag))
	r.m.observe(t.Name, committed)
	r.log.Debug("committed", "topic", t.Name, "rows", rows, "ranges", string(summary))
	return ranges, nil
}

// SummaryRange is one entry of SummaryOffsets.
type SummaryRange struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
}

func summaryRanges(rs []catalog.TableRange) []SummaryRange {
	out := make([]SummaryRange, len(rs))
	for i, r := range rs {
		out[i] = SummaryRange{Partition: r.Partition, From: r.From, To: r.To}
	}
	return out
}

// samePartitions: the ranges' partitions have not moved between a and b.
func samePartitions(a, b catalog.TableState, ranges []catalog.TableRange) bool {
	for _, rg := range ranges {
		if a.NextOffset(rg.Partition) != b.NextOffset(rg.Partition) {
			return false
		}
	}
	return true
}

// read reads one partition's committed records from offset: up to its last stable
// offset as of the first fetch, within Config's bounds.
func (r *Role) read(ctx context.Context, topicID int64, partition int32, from int64) (partRecords, catalog.TableRange, error) {
	pr := partRecords{partition: partition}
	rg := catalog.TableRange{Partition: partition, From: from, To: from}
	var (
		bytes int64
		until int64 = -1
	)
	for len(pr.records) < r.cfg.MaxRecords && bytes < r.cfg.MaxBytes {
		res, err := r.recs.Fetch(ctx, reader.Fetch{TopicID: topicID, Partition: partition, Offset: rg.To,
			MaxRecords: min(r.cfg.MaxRecords-len(pr.records), 10_000), Isolation: reader.ReadCommitted})
		if err != nil {
			return pr, rg, err
		}
		if until < 0 {
			until = res.LastStableOffset
			pr.stable = until
		}
		for _, rec := range res.Records {
			if rec.Offset < rg.To || rec.Offset >= until {
				continue
			}
			pr.records = append(pr.records, rec)
			bytes += int64(len(rec.Key) + len(rec.Value))
			for _, h := range rec.Headers {
				bytes += int64(len(h.Key) + len(h.Value))
			}
		}
		next := min(res.NextOffset, until)
		if next <= rg.To {
			break
		}
		rg.To = next
		if rg.To >= until {
			break
		}
	}
	return pr, rg, nil
}

// load reads the table's state, creating the table first when it has none.
func (r *Role) load(ctx context.Context, t catalog.Topic, cfg catalog.Config, fio *fileIO) (*table.Table, catalog.TableState, error) {
	state, err := r.cat.TableState(ctx, t.ID)
	if err != nil {
		return nil, state, err
	}
	ident := table.Identifier{Namespace, t.Name}
	if state.MetadataLocation == "" {
		loc := tableLocation(r.cfg.Location, t.Name, t.ID)
		meta, err := newMetadata(cfg, loc)
		if err != nil {
			return nil, state, err
		}
		mloc, err := writeMetadata(fio, meta, 0)
		if err != nil {
			return nil, state, err
		}
		err = r.cat.CommitTable(ctx, catalog.TableCommit{TopicID: t.ID, Metadata: mloc})
		if err != nil && !errors.Is(err, catalog.ErrTableConflict) {
			return nil, state, fmt.Errorf("create the table: %w", err)
		}
		if state, err = r.cat.TableState(ctx, t.ID); err != nil {
			return nil, state, err
		}
	}
	b, err := fio.ReadFile(state.MetadataLocation)
	if err != nil {
		return nil, state, fmt.Errorf("read metadata %s: %w", state.MetadataLocation, err)
	}
	meta, err := table.ParseMetadataBytes(b)
	if err != nil {
		return nil, state, fmt.Errorf("parse metadata %s: %w", state.MetadataLocation, err)
	}
	return table.New(ident, meta, state.MetadataLocation, fio.fsF(), nil), state, nil
}

// withSchema is tbl with sc added as its current schema.
func withSchema(tbl *table.Table, sc *iceberg.Schema, loc string, fio *fileIO) (*table.Table, error) {
	mb, err := table.MetadataBuilderFromBase(tbl.Metadata(), "")
	if err != nil {
		return nil, fmt.Errorf("evolve the schema: %w", err)
	}
	if err := mb.AddSchema(sc); err != nil {
		return nil, fmt.Errorf("evolve the schema: %w", err)
	}
	if err := mb.SetCurrentSchemaID(-1); err != nil {
		return nil, fmt.Errorf("evolve the schema: %w", err)
	}
	meta, err := mb.Build()
	if err != nil {
		return nil, fmt.Errorf("evolve the schema: %w", err)
	}
	return table.New(tbl.Identifier(), meta, loc, fio.fsF(), nil), nil
}

func (f *fileIO) fsF() table.FSysF {
	return func(context.Context) (icebergio.IO, error) { return f, nil }
}

// writeMetadata writes meta as a new metadata file of the given version and answers
// its URI.
func writeMetadata(fio *fileIO, meta table.Metadata, version int) (string, error) {
	lp, err := table.LoadLocationProvider(meta.Location(), meta.Properties())
	if err != nil {
		return "", err
	}
	loc, err := lp.NewTableMetadataFileLocation(version)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return "", fmt.Errorf("encode metadata: %w", err)
	}
	if err := fio.WriteFile(loc, b); err != nil {
		return "", fmt.Errorf("write metadata: %w", err)
	}
	return loc, nil
}

// metadataVersion is the version in a metadata file's name (NNNNN-uuid.metadata.json).
func metadataVersion(loc string) int {
	v, _, _ := strings.Cut(path.Base(loc), "-")
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return n
}

// commitIO is iceberg-go's catalog for one commit: it writes the new metadata file,
// then moves the table to it and the partitions past their ranges in one catalog
// transaction. A refusal is returned as it is (not table.ErrCommitFailed), so
// iceberg-go does not replay the commit: the role decides, from the catalog's state.
type commitIO struct {
	r       *Role
	fio     *fileIO
	topicID int64
	prev    string
	base    table.Metadata
	ranges  []catalog.TableRange
	leases  []catalog.TableLease
}

func (c *commitIO) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	return nil, errors.New("tables: a commit is never replayed")
}

func (c *commitIO) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	for _, req := range reqs {
		if err := req.Validate(c.base); err != nil {
			return nil, "", err
		}
	}
	meta, err := table.UpdateTableMetadata(c.base, updates, c.prev)
	if err != nil {
		return nil, "", fmt.Errorf("apply updates: %w", err)
	}
	loc, err := writeMetadata(c.fio, meta, metadataVersion(c.prev)+1)
	if err != nil {
		return nil, "", err
	}
	if err := c.r.cat.CommitTable(ctx, catalog.TableCommit{TopicID: c.topicID, Prev: c.prev, Metadata: loc, Ranges: c.ranges, Leases: c.leases}); err != nil {
		return nil, "", err
	}
	return meta, loc, nil
}
