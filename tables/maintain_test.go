package tables_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fault"
	"github.com/strata-io/strata/tables"
)

// noMaintenance keeps the nodes' own roles from maintaining the tables, so that a
// test's worker does it when the test says.
func noMaintenance(c *tables.Config) { c.MaintainInterval = -1 }

// dataFiles is how many data files tbl's current snapshot reads.
func dataFiles(t *testing.T, tbl *table.Table) int {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatalf("plan files: %v", err)
	}
	return len(tasks)
}

// dataFilePaths are the paths of the data files tbl's current snapshot reads.
func dataFilePaths(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatalf("plan files: %v", err)
	}
	out := make([]string, len(tasks))
	for i, task := range tasks {
		out[i] = task.File.FilePath()
	}
	return out
}

// objects lists the keys under the table's location in the store.
func objects(t *testing.T, st objstore.Store, prefix string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if err := st.List(context.Background(), prefix, func(i objstore.Info) error { out[i.Key] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// maintenance: a table made of many small commits is merged, its old snapshots
// expire with the files only they held, and a file no metadata references is
// deleted only once older than the grace period — with every row still there once.
func maintenance(t *testing.T, c cluster) {
	ctx := context.Background()
	n := c.nodes[0]
	createTableTopic(t, n.Broker, "small")
	cat := restCatalog(t, n, c.props)
	produced := map[[2]int64]want{}
	const rounds = 4
	for range rounds {
		maps.Copy(produced, produce(t, n.Broker, "small", 300))
		waitRows(t, cat, "small", len(produced))
	}
	tbl := waitRows(t, cat, "small", len(produced))
	merged := dataFilePaths(t, tbl)
	filesBefore, snapsBefore := len(merged), len(tbl.Metadata().Snapshots())
	if filesBefore < 2*3 || snapsBefore < rounds {
		t.Fatalf("setup: %d data files in %d snapshots, want many small ones", filesBefore, snapsBefore)
	}
	topic, err := n.Catalog.Topic(ctx, "small")
	if err != nil {
		t.Fatal(err)
	}
	prefix := "tables/small-" + strconv.FormatInt(topic.ID, 10) + "/"
	orphan := prefix + "data/left-by-a-crashed-worker.parquet"
	if err := n.Store.Put(ctx, orphan, []byte("not referenced")); err != nil {
		t.Fatal(err)
	}
	worker := func(grace time.Duration) *tables.Role {
		return tables.New(n.Store, n.Catalog, n.Reader, tables.Config{Location: c.location, Holder: "maintainer",
			TargetFileBytes: 1 << 20, MinInputFiles: 2, SnapshotMaxAge: time.Millisecond, MinSnapshots: 1, OrphanGrace: grace}, nil)
	}

	// A grace period longer than the orphan's age: merged and expired, orphan kept.
	m, err := worker(time.Hour).Maintain(ctx, topic)
	if err != nil {
		t.Fatalf("maintain: %v", err)
	}
	tbl = waitRows(t, cat, "small", len(produced))
	filesAfter := dataFiles(t, tbl)
	t.Logf("before: %d data files, %d snapshots; maintained: %+v; after: %d data files, %d snapshots",
		filesBefore, snapsBefore, m, filesAfter, len(tbl.Metadata().Snapshots()))
	if m.FilesRewritten != filesBefore || filesAfter >= filesBefore || filesAfter > 3 || m.FilesAdded != filesAfter {
		t.Fatalf("merge: %+v, %d → %d data files, want every one of the %d merged into at most one per day", m, filesBefore, filesAfter, filesBefore)
	}
	if got := len(tbl.Metadata().Snapshots()); got != 1 || m.SnapshotsExpired != snapsBefore {
		t.Fatalf("expiry: %d snapshots left (%d expired), want 1 (the merge's; %d expired)", got, m.SnapshotsExpired, snapsBefore)
	}
	checkRows(t, tbl, produced)
	// The merged files went with the snapshots that held them. (Other files may be in
	// the store: the nodes' own roles keep converting, and a commit that lost a race
	// leaves its files for the orphan sweep.)
	stored := objects(t, n.Store, prefix)
	for _, path := range merged {
		if k := prefix + path[strings.Index(path, prefix)+len(prefix):]; stored[k] {
			t.Fatalf("%s is still in the store: the expired snapshots' files stayed", k)
		}
	}
	for _, path := range dataFilePaths(t, tbl) {
		if k := prefix + path[strings.Index(path, prefix)+len(prefix):]; !stored[k] {
			t.Fatalf("the current snapshot's %s is not in the store", k)
		}
	}
	if !objects(t, n.Store, prefix)[orphan] || m.OrphansDeleted != 0 {
		t.Fatalf("an unreferenced file younger than the grace period was deleted (%+v)", m)
	}

	// Past its grace, the orphan goes, and only it: the table still reads whole.
	m, err = worker(time.Millisecond).Maintain(ctx, topic)
	if err != nil {
		t.Fatalf("maintain: %v", err)
	}
	if objects(t, n.Store, prefix)[orphan] || m.OrphansDeleted < 1 {
		t.Fatalf("the orphan stayed (%+v)", m)
	}
	tbl = waitRows(t, cat, "small", len(produced))
	checkRows(t, tbl, produced)

	// New records after maintenance convert on top of it, each once.
	maps.Copy(produced, produce(t, n.Broker, "small", 300))
	checkRows(t, waitRows(t, cat, "small", len(produced)), produced)
	st, err := n.Catalog.TableState(ctx, topic.ID)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		parts, err := n.Catalog.Partitions(ctx, topic.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.NextOffset(p) != parts[p].HighWatermark {
			t.Fatalf("partition %d: the table's next offset %d, the log's %d", p, st.NextOffset(p), parts[p].HighWatermark)
		}
	}
}

// TestMaintenanceEmbedded and TestMaintenanceServices: Role.Maintain on strata dev's
// shape and on Postgres and MinIO.
func TestMaintenanceEmbedded(t *testing.T) { maintenance(t, embeddedWith(t, noMaintenance)) }
func TestMaintenanceServices(t *testing.T) { maintenance(t, services(t, noMaintenance)) }

// TestMaintainedByTheRole: the worker holding a table's partition 0 maintains it on
// its own, every MaintainInterval.
func TestMaintainedByTheRole(t *testing.T) {
	c := embeddedWith(t, func(c *tables.Config) {
		c.MaintainInterval, c.TargetFileBytes, c.MinInputFiles, c.SnapshotMaxAge = 50*time.Millisecond, 1<<20, 2, time.Millisecond
	})
	n := c.nodes[0]
	createTableTopic(t, n.Broker, "kept")
	cat := restCatalog(t, n, c.props)
	produced := map[[2]int64]want{}
	for range 3 {
		maps.Copy(produced, produce(t, n.Broker, "kept", 300))
		waitRows(t, cat, "kept", len(produced))
	}
	var tbl *table.Table
	testwait.Until(t, time.Minute, "the table merged to one file per day and one snapshot", func() bool {
		var err error
		tbl, err = cat.LoadTable(context.Background(), table.Identifier{tables.Namespace, "kept"})
		return err == nil && dataFiles(t, tbl) <= 3 && len(tbl.Metadata().Snapshots()) == 1
	})
	checkRows(t, tbl, produced)

	// What the node's metrics say of it.
	got := map[string]float64{}
	mfs, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	if got["strata_tables_rows_total"] != float64(len(produced)) || got["strata_tables_commits_total{result=ok}"] < 3 ||
		got["strata_tables_files_rewritten_total"] < 2 || got["strata_tables_snapshots_expired_total"] < 1 ||
		got["strata_tables_maintenance_total{result=ok}"] < 1 || got["strata_tables_lag_records{topic=kept}"] != 0 {
		t.Fatalf("metrics: %v", func() map[string]float64 {
			out := map[string]float64{}
			for k, v := range got {
				if strings.HasPrefix(k, "strata_tables_") {
					out[k] = v
				}
			}
			return out
		}())
	}
}

// TestMaintenanceRacesCommits: maintenance passes run over and over while records
// arrive and the node's role commits them; a pass built on metadata a data commit
// has since moved is refused, so in the end every record is a row exactly once.
func TestMaintenanceRacesCommits(t *testing.T) {
	c := embeddedWith(t, noMaintenance)
	n := c.nodes[0]
	ctx := context.Background()
	createTableTopic(t, n.Broker, "racy")
	topic, err := n.Catalog.Topic(ctx, "racy")
	if err != nil {
		t.Fatal(err)
	}
	w := tables.New(n.Store, n.Catalog, n.Reader, tables.Config{Location: c.location, Holder: "maintainer",
		TargetFileBytes: 1 << 20, MinInputFiles: 2, SnapshotMaxAge: time.Millisecond, OrphanGrace: time.Minute}, nil)
	done, stop := make(chan struct{}), make(chan struct{})
	var passes, refused, merged int
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			m, err := w.Maintain(ctx, topic)
			switch {
			case errors.Is(err, catalog.ErrTableConflict):
				refused++
			case err != nil:
				t.Errorf("maintain: %v", err)
				return
			}
			passes++
			merged += m.FilesRewritten
		}
	}()
	produced := map[[2]int64]want{}
	cat := restCatalog(t, n, c.props)
	for range 8 {
		maps.Copy(produced, produce(t, n.Broker, "racy", 200))
		waitRows(t, cat, "racy", len(produced))
	}
	close(stop)
	<-done
	t.Logf("%d maintenance passes, %d refused by a data commit, %d files merged", passes, refused, merged)
	if merged == 0 {
		t.Fatal("no pass merged anything: the race was not run")
	}
	checkRows(t, waitRows(t, cat, "racy", len(produced)), produced)
}

// TestMaintenanceLosesToADataCommit: a data commit that lands while a maintenance
// pass is writing its merge refuses the pass, which changes nothing; the next pass
// merges on top, and every record is a row exactly once.
func TestMaintenanceLosesToADataCommit(t *testing.T) {
	c := embeddedWith(t, noMaintenance)
	n := c.nodes[0]
	ctx := context.Background()
	createTableTopic(t, n.Broker, "late")
	cat := restCatalog(t, n, c.props)
	produced := map[[2]int64]want{}
	for range 3 {
		maps.Copy(produced, produce(t, n.Broker, "late", 300))
		waitRows(t, cat, "late", len(produced))
	}
	topic, err := n.Catalog.Topic(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	// The first metadata file the pass writes waits for a data commit to land.
	fs := fault.New(n.Store)
	var once sync.Once
	fs.SetBefore(func(op fault.Op, key string) error {
		if op == fault.Put && strings.HasSuffix(key, ".metadata.json") {
			once.Do(func() {
				maps.Copy(produced, produce(t, n.Broker, "late", 300))
				waitRows(t, cat, "late", len(produced))
			})
		}
		return nil
	})
	w := tables.New(fs, n.Catalog, n.Reader, tables.Config{Location: c.location, Holder: "maintainer",
		TargetFileBytes: 1 << 20, MinInputFiles: 2, SnapshotMaxAge: time.Millisecond}, nil)
	if m, err := w.Maintain(ctx, topic); !errors.Is(err, catalog.ErrTableConflict) {
		t.Fatalf("a pass overtaken by a data commit: %+v, %v; want ErrTableConflict", m, err)
	}
	checkRows(t, waitRows(t, cat, "late", len(produced)), produced)
	m, err := w.Maintain(ctx, topic)
	if err != nil || m.FilesRewritten == 0 {
		t.Fatalf("the next pass: %+v, %v; want a merge", m, err)
	}
	tbl := waitRows(t, cat, "late", len(produced))
	if got := dataFiles(t, tbl); got > 3 {
		t.Fatalf("%d data files after the merge, want one per day", got)
	}
	checkRows(t, tbl, produced)
}

// TestRetention: with iceberg.retention=follow, maintenance deletes the rows below
// each partition's log start offset and keeps the rest; with the default (keep), the
// table keeps every row.
func TestRetention(t *testing.T) {
	c := embeddedWith(t, noMaintenance)
	n := c.nodes[0]
	ctx := context.Background()
	cat := restCatalog(t, n, c.props)
	for _, retention := range []string{"follow", "keep"} {
		t.Run(retention, func(t *testing.T) {
			name := "ret-" + retention
			if _, err := n.Broker.CreateTopic(ctx, broker.Anonymous, broker.CreateTopicRequest{Name: name, Partitions: 3,
				Configs: map[string]string{"iceberg.enabled": "true", "iceberg.commit.interval.ms": "100", "iceberg.retention": retention}}); err != nil {
				t.Fatal(err)
			}
			produced := produce(t, n.Broker, name, 900)
			waitRows(t, cat, name, len(produced))
			starts := map[int32]int64{0: 100, 1: 37}
			for p, before := range starts {
				if _, err := n.Broker.DeleteRecords(ctx, broker.Anonymous, name, p, before); err != nil {
					t.Fatal(err)
				}
			}
			topic, err := n.Catalog.Topic(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			w := tables.New(n.Store, n.Catalog, n.Reader, tables.Config{Location: c.location, Holder: "maintainer"}, nil)
			m, err := w.Maintain(ctx, topic)
			if err != nil {
				t.Fatalf("maintain: %v", err)
			}
			kept := produced
			if retention == "follow" {
				kept = map[[2]int64]want{}
				for k, v := range produced {
					if k[1] >= starts[int32(k[0])] {
						kept[k] = v
					}
				}
				if m.FilesTrimmed == 0 {
					t.Fatalf("maintained %+v: no file trimmed", m)
				}
			} else if m.FilesTrimmed != 0 {
				t.Fatalf("maintained %+v: rows trimmed from a table that keeps them", m)
			}
			checkRows(t, waitRows(t, cat, name, len(kept)), kept)
		})
	}
}

// TestCompactedTopic: a compacted topic's table keeps one row per key after
// maintenance — each key's latest record, none for a key whose latest is a tombstone
// — and a topic that is not compacted keeps every row.
func TestCompactedTopic(t *testing.T) {
	c := embeddedWith(t, noMaintenance)
	n := c.nodes[0]
	ctx := context.Background()
	cat := restCatalog(t, n, c.props)
	for _, policy := range []string{"compact", "delete"} {
		t.Run(policy, func(t *testing.T) {
			name := "keys-" + policy
			if _, err := n.Broker.CreateTopic(ctx, broker.Anonymous, broker.CreateTopicRequest{Name: name, Partitions: 2,
				Configs: map[string]string{"iceberg.enabled": "true", "iceberg.commit.interval.ms": "100", "cleanup.policy": policy}}); err != nil {
				t.Fatal(err)
			}
			// 10 keys per partition, each written 5 times over several commits; keys
			// 0 and 1 of each partition end with a tombstone.
			type pk struct {
				partition int32
				key       string
			}
			latest := map[pk]int64{}
			var total int
			for round := range 5 {
				var recs []broker.Record
				for p := range int32(2) {
					for k := range 10 {
						r := broker.Record{Topic: name, Partition: p, Key: []byte("key" + strconv.Itoa(k)), Value: []byte(fmt.Sprintf(`{"round":%d}`, round))}
						if round == 4 && k < 2 {
							r.Value = nil
						}
						recs = append(recs, r)
					}
				}
				res, err := n.Broker.Produce(ctx, broker.Anonymous, broker.ProduceRequest{Records: recs})
				if err != nil {
					t.Fatal(err)
				}
				for i, o := range res.Offsets {
					if recs[i].Key != nil {
						latest[pk{o.Partition, string(recs[i].Key)}] = o.Offset
					}
				}
				total += len(recs)
				waitRows(t, cat, name, total)
			}
			topic, err := n.Catalog.Topic(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			w := tables.New(n.Store, n.Catalog, n.Reader, tables.Config{Location: c.location, Holder: "maintainer"}, nil)
			m, err := w.Maintain(ctx, topic)
			if err != nil {
				t.Fatalf("maintain: %v", err)
			}
			if policy == "delete" {
				if m.RowsSuperseded != 0 {
					t.Fatalf("maintained %+v: rows deleted from a topic that is not compacted", m)
				}
				waitRows(t, cat, name, total)
				return
			}
			// 16 keys with a live latest value.
			if want := total - 16; m.RowsSuperseded != want || m.FilesCompacted == 0 {
				t.Fatalf("maintained %+v: want %d rows superseded", m, want)
			}
			tbl := waitRows(t, cat, name, 16)
			at, err := tbl.Scan(table.WithSelectedFields("partition", "offset", "key", "value")).ToArrowTable(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer at.Release()
			tr := array.NewTableReader(at, 1024)
			defer tr.Release()
			for tr.Next() {
				rec := tr.RecordBatch()
				ps, offs, keys, vals := rec.Column(0).(*array.Int32), rec.Column(1).(*array.Int64), rec.Column(2).(*array.String), rec.Column(3).(*array.String)
				for i := range int(rec.NumRows()) {
					k := pk{ps.Value(i), keys.Value(i)}
					if latest[k] != offs.Value(i) || vals.IsNull(i) || vals.Value(i) != `{"round":4}` {
						t.Fatalf("row %v at offset %d value %q, want only the key's latest record (offset %d), not a tombstone", k, offs.Value(i), vals.Value(i), latest[k])
					}
				}
			}
			// A second pass finds nothing to do.
			if m, err := w.Maintain(ctx, topic); err != nil || m.RowsSuperseded != 0 {
				t.Fatalf("second pass: %+v, %v", m, err)
			}
		})
	}
}
