package tables_test

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fault"
	"github.com/strata-io/strata/tables"
)

// TestFigures measures the conversion (STRATA_TABLES_FIGURES=1; records with
// STRATA_TABLES_RECORDS, default 50,000): records/s per core of CPU, Parquet bytes per
// GiB of topic data, and object-store requests the conversion adds per GiB. Records
// are 1 KiB string values of random hex (compressible about 2:1) and short keys.
func TestFigures(t *testing.T) {
	if os.Getenv("STRATA_TABLES_FIGURES") != "1" {
		t.Skip("a measurement: STRATA_TABLES_FIGURES=1 runs it")
	}
	n := 50_000
	if v, err := strconv.Atoi(os.Getenv("STRATA_TABLES_RECORDS")); err == nil {
		n = v
	}
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
	cpu0 := cpuTime()
	start := time.Now()
	ranges, err := role.Topic(ctx, topic, cfg, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	cpu := cpuTime() - cpu0
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

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
