package tables_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/cputime"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fault"
	"github.com/strata-io/strata/tables"
)

// figureRecords skips a measurement unless STRATA_TABLES_FIGURES=1, and answers how
// many records it converts: STRATA_TABLES_RECORDS, default 50,000.
func figureRecords(t *testing.T) int {
	t.Helper()
	if os.Getenv("STRATA_TABLES_FIGURES") != "1" {
		t.Skip("a measurement: STRATA_TABLES_FIGURES=1 runs it")
	}
	if v, err := strconv.Atoi(os.Getenv("STRATA_TABLES_RECORDS")); err == nil {
		return v
	}
	return 50_000
}

// TestFigures measures the conversion (STRATA_TABLES_FIGURES=1; records with
// STRATA_TABLES_RECORDS, default 50,000): records/s per core of CPU, Parquet bytes per
// GiB of topic data, and object-store requests the conversion adds per GiB. Records
// are 1 KiB string values of random hex (compressible about 2:1) and short keys.
func TestFigures(t *testing.T) {
	n := figureRecords(t)
	dir := t.TempDir()
	loc := "file://" + filepath.Join(dir, "objects")
	var counted *fault.Store
	nd := nodetest.Start(t, nodetest.InDir(dir), nodetest.WrapStore(func(s objstore.Store) objstore.Store {
		counted = fault.New(s)
		return counted
	}), nodetest.Mutate(func(c *node.Config) { c.TablesConfig.Location = loc }))
	ctx := context.Background()
	if _, err := nd.Broker.CreateTopic(ctx, broker.Anonymous, broker.CreateTopicRequest{Name: "fig", Partitions: 3,
		Configs: map[string]string{"iceberg.enabled": "true", "value.format": "string"}}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var topicBytes int64
	for i := 0; i < n; i += 1000 {
		var recs []broker.Record
		for j := i; j < min(n, i+1000); j++ {
			b := make([]byte, 512)
			for k := range b {
				b[k] = byte(rng.Uint32())
			}
			v := []byte(hex.EncodeToString(b))
			k := []byte("key-" + strconv.Itoa(j))
			topicBytes += int64(len(k) + len(v))
			recs = append(recs, broker.Record{Topic: "fig", Partition: int32(j % 3), Key: k, Value: v, Timestamp: -1})
		}
		if _, err := nd.Broker.Produce(ctx, broker.Anonymous, broker.ProduceRequest{Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	topic, err := nd.Catalog.Topic(ctx, "fig")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := catalog.ParseConfig(topic.Configs)
	parts, _ := nd.Catalog.Partitions(ctx, topic.ID)
	var stored int64
	for _, p := range parts {
		stored += p.Bytes
	}
	// The reader's cache is cold for this: a node converting what another wrote.
	role := tables.New(counted, nd.Catalog, nd.Reader, tables.Config{Location: loc, MaxRecords: n, MaxBytes: 1 << 40}, nil)
	puts0, gets0, ranges0, heads0 := counted.Calls(fault.Put), counted.Calls(fault.Get), counted.Calls(fault.GetRange), counted.Calls(fault.Head)
	cpu0 := cputime.Self()
	start := time.Now()
	ranges, err := role.Topic(ctx, topic, cfg, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	cpu := cputime.Self() - cpu0
	var rows int64
	for _, r := range ranges {
		rows += r.To - r.From
	}
	var parquet int64
	if err := nd.Store.List(ctx, "tables/", func(i objstore.Info) error {
		if strings.HasSuffix(i.Key, ".parquet") {
			parquet += i.Size
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	gib := float64(topicBytes) / (1 << 30)
	req := func(a, b int64) float64 { return float64(a-b) / gib }
	t.Logf("records %d (rows %d), key+value bytes %d, stored segment bytes %d; GOMAXPROCS %d", n, rows, topicBytes, stored, runtime.GOMAXPROCS(0))
	t.Logf("conversion: wall %v, CPU %v: %.0f records/s per core of CPU (%.0f records/s wall)", wall, cpu, float64(rows)/cpu.Seconds(), float64(rows)/wall.Seconds())
	t.Logf("Parquet bytes %d: %.0f MiB per GiB of key+value bytes (%.0f MiB per GiB of stored segment bytes)", parquet, float64(parquet)/(1<<20)/gib, float64(parquet)/(1<<20)/(float64(stored)/(1<<30)))
	t.Logf("object-store requests per GiB of key+value bytes: PUT %.0f, GET %.0f, GET range %.0f, HEAD %.0f",
		req(counted.Calls(fault.Put), puts0), req(counted.Calls(fault.Get), gets0), req(counted.Calls(fault.GetRange), ranges0), req(counted.Calls(fault.Head), heads0))
}

// TestTypedFigures measures what typed columns cost (STRATA_TABLES_FIGURES=1; records
// with STRATA_TABLES_RECORDS, default 50,000): records/s per core of CPU converting an
// Avro-framed topic with typed columns beside the same bytes on a topic without a
// value subject (default columns only), and the Parquet bytes of each.
func TestTypedFigures(t *testing.T) {
	n := figureRecords(t)
	dir := t.TempDir()
	loc := "file://" + filepath.Join(dir, "objects")
	nd := nodetest.Start(t, nodetest.InDir(dir), nodetest.Mutate(func(c *node.Config) { c.TablesConfig.Location = loc }))
	ctx := context.Background()
	id, s := register(t, nd.Broker, "typed-value", "", `{"type":"record","name":"Order","fields":[
		{"name":"id","type":"long"},{"name":"customer","type":"string"},{"name":"qty","type":"int"},
		{"name":"price","type":"double"},{"name":"paid","type":"boolean"},{"name":"note","type":["null","string"]},
		{"name":"tags","type":{"type":"array","items":"string"}},
		{"name":"ship","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"},{"name":"zip","type":"int"}]}},
		{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`)
	rng := rand.New(rand.NewPCG(5, 6))
	var valueBytes int64
	values := make([][]byte, n)
	for i := range n {
		v := fmt.Sprintf(`{"id":%d,"customer":"customer-%d","qty":%d,"price":%d.25,"paid":%t,"note":{"string":"%s"},"tags":["t%d","u%d"],`+
			`"ship":{"city":"city-%d","zip":%d},"at":%d}`, i, rng.IntN(10000), rng.IntN(100), rng.IntN(1000), i%2 == 0,
			hex.EncodeToString(binary.LittleEndian.AppendUint64(nil, rng.Uint64())), rng.IntN(50), rng.IntN(50), rng.IntN(500), rng.IntN(99999), 1700000000000+int64(i))
		values[i] = framed(t, id, s, v)
		valueBytes += int64(len(values[i]))
	}
	for _, name := range []string{"typed", "untyped"} {
		if _, err := nd.Broker.CreateTopic(ctx, broker.Anonymous, broker.CreateTopicRequest{Name: name, Partitions: 1,
			Configs: map[string]string{"iceberg.enabled": "true", "value.format": "binary"}}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i += 1000 {
			var recs []broker.Record
			for j := i; j < min(n, i+1000); j++ {
				recs = append(recs, broker.Record{Topic: name, Key: []byte("key-" + strconv.Itoa(j)), Value: values[j], Timestamp: -1})
			}
			if _, err := nd.Broker.Produce(ctx, broker.Anonymous, broker.ProduceRequest{Records: recs}); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("records %d, value bytes %d (%.0f bytes each, Avro-framed); GOMAXPROCS %d", n, valueBytes, float64(valueBytes)/float64(n), runtime.GOMAXPROCS(0))
	for _, name := range []string{"untyped", "typed"} {
		topic, err := nd.Catalog.Topic(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := catalog.ParseConfig(topic.Configs)
		role := tables.New(nd.Store, nd.Catalog, nd.Reader, tables.Config{Location: loc, MaxRecords: n, MaxBytes: 1 << 40}, nil)
		runtime.GC()
		cpu0, start := cputime.Self(), time.Now()
		ranges, err := role.Topic(ctx, topic, cfg, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		wall, cpu := time.Since(start), cputime.Self()-cpu0
		if len(ranges) != 1 || ranges[0].To-ranges[0].From != int64(n) {
			t.Fatalf("%s: ranges %v, want %d records", name, ranges, n)
		}
		var parquet int64
		_ = nd.Store.List(ctx, "tables/"+name+"-", func(i objstore.Info) error {
			if strings.HasSuffix(i.Key, ".parquet") {
				parquet += i.Size
			}
			return nil
		})
		t.Logf("%s: wall %v, CPU %v: %.0f records/s per core of CPU; Parquet bytes %d (%.2f of the value bytes)",
			name, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), float64(n)/cpu.Seconds(), parquet, float64(parquet)/float64(valueBytes))
	}
}

// TestCompactFigures measures a compacted topic's maintenance pass
// (STRATA_TABLES_FIGURES=1; records with STRATA_TABLES_RECORDS, default 50,000, over a
// tenth as many keys): the rows read and deleted per second of the pass and per core
// of CPU, and the Parquet bytes before and after.
func TestCompactFigures(t *testing.T) {
	n := figureRecords(t)
	dir := t.TempDir()
	loc := "file://" + filepath.Join(dir, "objects")
	nd := nodetest.Start(t, nodetest.InDir(dir), tablesRole(loc, noMaintenance))
	ctx := context.Background()
	if _, err := nd.Broker.CreateTopic(ctx, broker.Anonymous, broker.CreateTopicRequest{Name: "kv", Partitions: 3,
		Configs: map[string]string{"iceberg.enabled": "true", "iceberg.commit.interval.ms": "100", "cleanup.policy": "compact"}}); err != nil {
		t.Fatal(err)
	}
	keys := max(1, n/10)
	for i := 0; i < n; i += 1000 {
		var recs []broker.Record
		for j := i; j < min(n, i+1000); j++ {
			k := j % keys
			recs = append(recs, broker.Record{Topic: "kv", Partition: int32(k % 3), Key: []byte("key-" + strconv.Itoa(k)),
				Value: []byte(`{"n":` + strconv.Itoa(j) + `,"pad":"` + strings.Repeat("x", 200) + `"}`)})
		}
		if _, err := nd.Broker.Produce(ctx, broker.Anonymous, broker.ProduceRequest{Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	topic, err := nd.Catalog.Topic(ctx, "kv")
	if err != nil {
		t.Fatal(err)
	}
	waitRows(t, restCatalog(t, nd, nil), "kv", n)
	parquet := func() int64 {
		var b int64
		_ = nd.Store.List(ctx, "tables/", func(i objstore.Info) error {
			if strings.HasSuffix(i.Key, ".parquet") {
				b += i.Size
			}
			return nil
		})
		return b
	}
	before := parquet()
	role := tables.New(nd.Store, nd.Catalog, nd.Reader, tables.Config{Location: loc, Holder: "maintainer", OrphanGrace: time.Nanosecond, SnapshotMaxAge: time.Nanosecond}, nil)
	cpu0, start := cputime.Self(), time.Now()
	m, err := role.Maintain(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	wall, cpu := time.Since(start), cputime.Self()-cpu0
	if m.RowsSuperseded != n-keys {
		t.Fatalf("maintained %+v, want %d rows superseded", m, n-keys)
	}
	t.Logf("compaction pass over %d rows of %d keys: %d superseded in %d files; wall %v, CPU %v: %.0f rows/s (%.0f per core of CPU)",
		n, keys, m.RowsSuperseded, m.FilesCompacted, wall, cpu, float64(n)/wall.Seconds(), float64(n)/cpu.Seconds())
	t.Logf("Parquet bytes: %d before, %d after (the merge and the expiry of the superseded snapshots included)", before, parquet())
}

// TestLagFigures measures a table's lag behind its topic under a steady produce
// (STRATA_TABLES_FIGURES=1; STRATA_TABLES_MIBS MiB/s, default 50, for
// STRATA_TABLES_SECONDS, default 60, of 1 KiB records over 6 partitions, with
// iceberg.commit.interval.ms 10000): the records not yet in the table, sampled every
// 100 ms, and what that is in seconds of produce, beside the commit interval that
// bounds it.
func TestLagFigures(t *testing.T) {
	figureRecords(t)
	mibs, secs := 50.0, 60
	if v, err := strconv.ParseFloat(os.Getenv("STRATA_TABLES_MIBS"), 64); err == nil {
		mibs = v
	}
	if v, err := strconv.Atoi(os.Getenv("STRATA_TABLES_SECONDS")); err == nil {
		secs = v
	}
	dir := t.TempDir()
	loc := "file://" + filepath.Join(dir, "objects")
	nd := nodetest.Start(t, nodetest.InDir(dir), tablesRole(loc, noMaintenance))
	ctx := context.Background()
	const parts, interval = 6, 10 * time.Second
	if _, err := nd.Broker.CreateTopic(ctx, broker.Anonymous, broker.CreateTopicRequest{Name: "lag", Partitions: parts,
		Configs: map[string]string{"iceberg.enabled": "true", "iceberg.commit.interval.ms": strconv.Itoa(int(interval.Milliseconds()))}}); err != nil {
		t.Fatal(err)
	}
	value := []byte(strings.Repeat("v", 1000))
	const batch = 500
	perSec := mibs * (1 << 20) / float64(len(value)+24)
	tick := time.Duration(float64(time.Second) * batch / perSec)
	var lags []int64
	sampled := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			st, err := nd.Broker.TableStatus(ctx, broker.Anonymous, "lag")
			if err == nil {
				lags = append(lags, st.Lag())
			}
		}
	}()
	start := time.Now()
	produced, next := 0, start
	for time.Since(start) < time.Duration(secs)*time.Second {
		recs := make([]broker.Record, batch)
		for i := range recs {
			recs[i] = broker.Record{Topic: "lag", Partition: int32((produced + i) % parts), Key: []byte("k" + strconv.Itoa(produced+i)), Value: value}
		}
		if _, err := nd.Broker.Produce(ctx, broker.Anonymous, broker.ProduceRequest{Records: recs}); err != nil {
			t.Fatal(err)
		}
		produced += batch
		next = next.Add(tick)
		if d := time.Until(next); d > 0 {
			time.Sleep(d) // pacing the load, not waiting for a result
		}
	}
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	rate := float64(produced) / elapsed.Seconds()
	slices.Sort(lags)
	q := func(f float64) int64 { return lags[min(len(lags)-1, int(f*float64(len(lags))))] }
	t.Logf("produced %d records (%.1f MiB/s achieved of %.0f asked) over %v; commit interval %v", produced, rate*float64(len(value)+24)/(1<<20), mibs, elapsed.Round(time.Second), interval)
	t.Logf("table lag over %d samples: p50 %d records (%.1f s of produce), p99 %d (%.1f s), max %d (%.1f s)", len(lags),
		q(0.5), float64(q(0.5))/rate, q(0.99), float64(q(0.99))/rate, lags[len(lags)-1], float64(lags[len(lags)-1])/rate)
}
