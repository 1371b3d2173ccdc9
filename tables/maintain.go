package tables

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/objstore"
)

// Defaults of Config's maintenance fields. The snapshot ones are Iceberg's own
// (history.expire.max-snapshot-age-ms, history.expire.min-snapshots-to-keep).
const (
	DefaultMaintainInterval = 10 * time.Minute
	DefaultTargetFileBytes  = 128 << 20
	DefaultMinInputFiles    = 5
	DefaultSnapshotMaxAge   = 5 * 24 * time.Hour
	DefaultMinSnapshots     = 1
	DefaultOrphanGrace      = 24 * time.Hour
)

// MaintainProperty is the snapshot summary property a maintenance snapshot carries
// ("rewrite"): it adds no offsets, so SummaryOffsets is absent from it.
const MaintainProperty = "strata.maintenance"

// Maintained is what one maintenance pass did to a table.
type Maintained struct {
	// FilesTrimmed data files held rows below their partition's log start
	// (iceberg.retention=follow): deleted, or rewritten without those rows.
	FilesTrimmed int
	// RowsSuperseded rows of a compacted topic's table (cleanup.policy compact) were
	// deleted: a later record of their partition has their key, or their key's
	// latest record is a tombstone (then it goes too). FilesCompacted data files
	// held them.
	RowsSuperseded, FilesCompacted int
	// FilesRewritten small data files were merged into FilesAdded.
	FilesRewritten, FilesAdded int
	// SnapshotsExpired were removed from the table's history (their files no other
	// snapshot references deleted with them).
	SnapshotsExpired int
	// OrphansDeleted are files under the table's location that no metadata
	// references, older than Config.OrphanGrace: left by a worker that crashed
	// between writing and committing, or metadata files the log dropped.
	OrphansDeleted int
}

// maintainDue answers whether t's table is due for maintenance by this worker: it
// holds the lease of the topic's partition 0 (one maintainer per table, moving with
// that lease) and its interval has passed since it took the lease or last ran.
func (r *Role) maintainDue(t catalog.Topic, now time.Time) bool {
	if r.cfg.MaintainInterval < 0 {
		return false
	}
	if _, ok := r.held[partKey{t.ID, 0}]; !ok {
		delete(r.maintained, t.ID)
		return false
	}
	next, ok := r.maintained[t.ID]
	if !ok {
		// Not at once on taking the lease: a worker restarting in a loop would
		// otherwise rewrite and list the table on every start.
		r.maintained[t.ID] = now.Add(r.cfg.MaintainInterval)
		return false
	}
	if now.Before(next) {
		return false
	}
	r.maintained[t.ID] = now.Add(r.cfg.MaintainInterval)
	return true
}

// Maintain merges t's small data files, expires its old snapshots and deletes its
// orphan files, in that order, each step its own commit. Each commit moves the
// table from the metadata it read, as a data commit does, so a data commit landing
// meanwhile refuses it (ErrTableConflict) and nothing changes: rows are never added
// or lost by maintenance, and the next pass tries again. Rows keep their offsets;
// the partitions' next offsets do not move.
func (r *Role) Maintain(ctx context.Context, t catalog.Topic) (m Maintained, err error) {
	defer func() {
		r.m.rewritten.Add(float64(m.FilesRewritten))
		r.m.expired.Add(float64(m.SnapshotsExpired))
		r.m.orphans.Add(float64(m.OrphansDeleted))
	}()
	cfg, err := catalog.ParseConfig(t.Configs)
	if err != nil {
		return m, err
	}
	fio := &fileIO{ctx: ctx, store: r.store, base: strings.TrimSuffix(r.cfg.Location, "/")}
	tbl, state, err := r.load(ctx, t, cfg, fio)
	if err != nil {
		return m, err
	}
	if tbl.CurrentSnapshot() == nil {
		return m, nil
	}

	// Retention first, so that the merge does not rewrite rows about to go.
	if cfg.IcebergRetention == "follow" {
		deleted, err := r.followRetention(ctx, t, fio, tbl, state)
		if err != nil {
			return m, err
		}
		if deleted > 0 {
			m.FilesTrimmed = deleted
			if tbl, state, err = r.load(ctx, t, cfg, fio); err != nil {
				return m, err
			}
		}
	}

	// A compacted topic's table keeps one row per key: before the merge, so that it
	// merges what stays.
	if strings.Contains(cfg.CleanupPolicy, "compact") {
		rows, files, err := r.compactKeys(ctx, t, fio, tbl, state)
		if err != nil {
			return m, err
		}
		if rows > 0 {
			m.RowsSuperseded, m.FilesCompacted = rows, files
			if tbl, state, err = r.load(ctx, t, cfg, fio); err != nil {
				return m, err
			}
		}
	}

	// Small files: a topic's commits each add a file per partition and day, at
	// most one commit interval's records apiece.
	ccfg := compaction.Config{
		TargetFileSizeBytes: r.cfg.TargetFileBytes, MinFileSizeBytes: r.cfg.TargetFileBytes * 3 / 4,
		MaxFileSizeBytes: r.cfg.TargetFileBytes * 9 / 5, MinInputFiles: uint(r.cfg.MinInputFiles),
		DeleteFileThreshold: 5, DeleteRatioThreshold: compaction.DefaultDeleteRatioThreshold, PackingLookback: compaction.DefaultPackingLookback,
	}
	plan, err := compaction.Analyze(ctx, tbl, ccfg)
	if err != nil {
		return m, fmt.Errorf("plan the merge of small files: %w", err)
	}
	if len(plan.Groups) > 0 {
		groups := make([]table.CompactionTaskGroup, len(plan.Groups))
		for i, g := range plan.Groups {
			groups[i] = table.CompactionTaskGroup{PartitionKey: g.PartitionKey, Tasks: g.Tasks, TotalSizeBytes: g.TotalSizeBytes}
		}
		txn := r.maintainTable(fio, t, tbl, state).NewTransaction()
		res, err := txn.RewriteDataFiles(ctx, groups, table.RewriteDataFilesOptions{SnapshotProps: iceberg.Properties{MaintainProperty: "rewrite"}})
		if err != nil {
			return m, fmt.Errorf("merge small files: %w", err)
		}
		if _, err := txn.Commit(ctx); err != nil {
			return m, fmt.Errorf("commit the merge of small files: %w", err)
		}
		m.FilesRewritten, m.FilesAdded = res.RemovedDataFiles, res.AddedDataFiles
		if tbl, state, err = r.load(ctx, t, cfg, fio); err != nil {
			return m, err
		}
	}

	// Old snapshots, and the files only they reference (iceberg-go deletes those
	// after the commit lands, never before).
	before := len(tbl.Metadata().Snapshots())
	txn := r.maintainTable(fio, t, tbl, state).NewTransaction()
	if err := txn.ExpireSnapshots(table.WithOlderThan(r.cfg.SnapshotMaxAge), table.WithRetainLast(r.cfg.MinSnapshots)); err != nil {
		return m, fmt.Errorf("expire snapshots: %w", err)
	}
	if after, err := txn.StagedTable(); err == nil && len(after.Metadata().Snapshots()) < before {
		if _, err := txn.Commit(ctx); err != nil {
			return m, fmt.Errorf("commit the expiry of snapshots: %w", err)
		}
		m.SnapshotsExpired = before - len(after.Metadata().Snapshots())
		if tbl, _, err = r.load(ctx, t, cfg, fio); err != nil {
			return m, err
		}
	}

	// Orphans: only files older than the grace period, so that a commit in flight
	// (its files written, its catalog step not yet taken) keeps its files; and only
	// when the table has not moved since the references were read, or a commit that
	// landed meanwhile would lose its new metadata file.
	orphans, err := tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(r.cfg.OrphanGrace))
	if err != nil {
		return m, fmt.Errorf("find orphan files: %w", err)
	}
	if len(orphans.Files()) > 0 {
		now, err := r.cat.TableState(ctx, t.ID)
		if err != nil {
			return m, err
		}
		if now.MetadataLocation != tbl.MetadataLocation() {
			return m, fmt.Errorf("%w: the table moved while its orphans were listed", catalog.ErrTableConflict)
		}
		res, err := tbl.ExecuteOrphanCleanup(ctx, orphans)
		if err != nil {
			return m, fmt.Errorf("delete orphan files: %w", err)
		}
		m.OrphansDeleted = len(res.DeletedFiles)
	}
	if m != (Maintained{}) {
		r.log.Info("table maintained", "topic", t.Name, "files_trimmed", m.FilesTrimmed, "rows_superseded", m.RowsSuperseded, "files_rewritten", m.FilesRewritten, "files_added", m.FilesAdded,
			"snapshots_expired", m.SnapshotsExpired, "orphans_deleted", m.OrphansDeleted)
		r.m.observe(t.Name, tbl)
	}
	return m, nil
}

// followRetention deletes the table's rows below each partition's log start offset,
// in one copy-on-write commit; it answers how many data files held such rows (0: none,
// and nothing committed).
func (r *Role) followRetention(ctx context.Context, t catalog.Topic, fio *fileIO, tbl *table.Table, state catalog.TableState) (int, error) {
	parts, err := r.cat.Partitions(ctx, t.ID)
	if err != nil {
		return 0, fmt.Errorf("read the log start offsets: %w", err)
	}
	var below []iceberg.BooleanExpression
	for _, p := range parts {
		if p.LogStartOffset > 0 {
			below = append(below, iceberg.NewAnd(iceberg.EqualTo(iceberg.Reference("partition"), p.Partition),
				iceberg.LessThan(iceberg.Reference("offset"), p.LogStartOffset)))
		}
	}
	if len(below) == 0 {
		return 0, nil
	}
	filter := below[0]
	if len(below) > 1 {
		filter = iceberg.NewOr(below[0], below[1], below[2:]...)
	}
	// The files' column bounds say which may hold such rows: none, no commit.
	tasks, err := tbl.Scan(table.WithRowFilter(filter)).PlanFiles(ctx)
	if err != nil {
		return 0, fmt.Errorf("find the rows below the log start: %w", err)
	}
	if len(tasks) == 0 {
		return 0, nil
	}
	txn := r.maintainTable(fio, t, tbl, state).NewTransaction()
	if err := txn.Delete(ctx, filter, iceberg.Properties{MaintainProperty: "retention"}); err != nil {
		return 0, fmt.Errorf("delete the rows below the log start: %w", err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit the rows' deletion: %w", err)
	}
	return len(tasks), nil
}

// compactKeys deletes the rows of a compacted topic's table that the topic's own
// compaction would remove: per partition, every row of a key but its latest, and the
// latest too when it is a tombstone (a null value), in one copy-on-write commit. Rows
// without a key (written before the topic became compacted, which refuses them) stay.
// It answers the rows deleted and the data files that held them (0, 0: none, and
// nothing committed).
//
// Copy-on-write rather than equality deletes: engines then read plain data files with
// nothing to merge at read time, at the price of rewriting each file that holds a
// superseded row once per pass; between passes the table holds a key's rows since
// the last pass, as the topic holds them until its compactor runs.
func (r *Role) compactKeys(ctx context.Context, t catalog.Topic, fio *fileIO, tbl *table.Table, state catalog.TableState) (rows, files int, err error) {
	type row struct {
		partition int32
		offset    int64
	}
	latest := map[string]row{} // by partition and key
	var superseded []row
	keyOf := func(p int32, k string) string { return strconv.Itoa(int(p)) + "/" + k }
	scan := func(filter iceberg.BooleanExpression, fn func(p int32, off int64, key string)) error {
		opts := []table.ScanOption{table.WithSelectedFields(colPartition, colOffset, colKey)}
		if filter != nil {
			opts = append(opts, table.WithRowFilter(filter))
		}
		_, it, err := tbl.Scan(opts...).ToArrowRecords(ctx)
		if err != nil {
			return err
		}
		for rec, err := range it {
			if err != nil {
				return err
			}
			ps, offs, keys := rec.Column(0).(*array.Int32), rec.Column(1).(*array.Int64), rec.Column(2)
			for i := range int(rec.NumRows()) {
				if keys.IsNull(i) {
					continue
				}
				fn(ps.Value(i), offs.Value(i), keys.ValueStr(i))
			}
			rec.Release()
		}
		return nil
	}
	if err := scan(nil, func(p int32, off int64, key string) {
		k := keyOf(p, key)
		if l, ok := latest[k]; ok {
			if l.offset > off {
				superseded = append(superseded, row{p, off})
				return
			}
			superseded = append(superseded, l)
		}
		latest[k] = row{p, off}
	}); err != nil {
		return 0, 0, fmt.Errorf("read the table's keys: %w", err)
	}
	if err := scan(iceberg.IsNull(iceberg.Reference(colValue)), func(p int32, off int64, key string) {
		if latest[keyOf(p, key)].offset == off {
			superseded = append(superseded, row{p, off})
		}
	}); err != nil {
		return 0, 0, fmt.Errorf("read the table's tombstones: %w", err)
	}
	if len(superseded) == 0 {
		return 0, 0, nil
	}
	byPart := map[int32][]int64{}
	for _, x := range superseded {
		byPart[x.partition] = append(byPart[x.partition], x.offset)
	}
	var ors []iceberg.BooleanExpression
	for p, offs := range byPart {
		ors = append(ors, iceberg.NewAnd(iceberg.EqualTo(iceberg.Reference(colPartition), p), iceberg.IsIn(iceberg.Reference(colOffset), offs...)))
	}
	filter := ors[0]
	if len(ors) > 1 {
		filter = iceberg.NewOr(ors[0], ors[1], ors[2:]...)
	}
	tasks, err := tbl.Scan(table.WithRowFilter(filter)).PlanFiles(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("find the files of the superseded rows: %w", err)
	}
	txn := r.maintainTable(fio, t, tbl, state).NewTransaction()
	if err := txn.Delete(ctx, filter, iceberg.Properties{MaintainProperty: "compact"}); err != nil {
		return 0, 0, fmt.Errorf("delete the superseded rows: %w", err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		return 0, 0, fmt.Errorf("commit the superseded rows' deletion: %w", err)
	}
	return len(superseded), len(tasks), nil
}

// maintainTable is tbl committing through the catalog as a data commit does, with
// no offsets: the commit carries no ranges, so it needs no partition lease, only
// that the table has not moved since state.
func (r *Role) maintainTable(fio *fileIO, t catalog.Topic, tbl *table.Table, state catalog.TableState) *table.Table {
	cio := &commitIO{r: r, fio: fio, topicID: t.ID, prev: state.MetadataLocation, base: tbl.Metadata()}
	return table.New(tbl.Identifier(), tbl.Metadata(), state.MetadataLocation, fio.fsF(), cio)
}

// WalkDir lists the objects under root (a URI under the bucket) for the orphan
// sweep, with each object's size and last-modified time.
func (f *fileIO) WalkDir(root string, fn fs.WalkDirFunc) error {
	k, err := f.key(strings.TrimSuffix(root, "/") + "/x")
	if err != nil {
		return err
	}
	prefix := strings.TrimSuffix(k, "x")
	err = f.store.List(f.ctx, prefix, func(i objstore.Info) error {
		return fn(f.base+"/"+i.Key, listed{i}, nil)
	})
	if errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

// listed is an object as a directory entry.
type listed struct{ o objstore.Info }

func (l listed) Name() string               { return path.Base(l.o.Key) }
func (l listed) IsDir() bool                { return false }
func (l listed) Type() fs.FileMode          { return 0 }
func (l listed) Info() (fs.FileInfo, error) { return l, nil }
func (l listed) Size() int64                { return l.o.Size }
func (l listed) Mode() fs.FileMode          { return 0o444 }
func (l listed) ModTime() time.Time         { return l.o.Modified }
func (l listed) Sys() any                   { return nil }
