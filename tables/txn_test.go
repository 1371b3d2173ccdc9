package tables_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/node/nodetest"
)

// TestOnlyCommittedRows: over Kafka transactions, only committed records become rows
// (read_committed): an aborted transaction's records never, an open one's not while
// it is open, and then once it commits.
func TestOnlyCommittedRows(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	loc := "file://" + filepath.Join(dir, "objects")
	n := nodetest.Start(t, nodetest.InDir(dir), nodetest.Kafka(), tablesRole(loc))
	createTableTopic(t, n.Broker, "tx")
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.TransactionalID("tables-tx"), kgo.DefaultProduceTopic("tx"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	txn := func(prefix string, count int, end string) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range count {
			r := &kgo.Record{Key: []byte(prefix + strconv.Itoa(i)), Value: []byte(`"` + prefix + `"`), Partition: int32(i % 3)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if end != "open" {
			if err := cl.EndTransaction(ctx, end == "commit"); err != nil {
				t.Fatal(err)
			}
		}
	}
	txn("committed-", 30, "commit")
	txn("aborted-", 30, "abort")
	txn("committed2-", 30, "commit")
	txn("open-", 30, "open")
	cat := restCatalog(t, n, nil)
	keys := func(want int) map[string]int {
		tbl := waitRows(t, cat, "tx", want)
		at, err := tbl.Scan().ToArrowTable(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer at.Release()
		out := map[string]int{}
		tr := array.NewTableReader(at, 1024)
		defer tr.Release()
		for tr.Next() {
			rec := tr.RecordBatch()
			ks := rec.Column(rec.Schema().FieldIndices("key")[0]).(*array.String)
			for i := range ks.Len() {
				p, _, _ := strings.Cut(ks.Value(i), "-")
				out[p]++
			}
		}
		return out
	}
	got := keys(60)
	if got["committed"] != 30 || got["committed2"] != 30 || len(got) != 2 {
		t.Fatalf("rows by transaction: %v, want 30 committed and 30 committed2 only", got)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	got = keys(90)
	if got["open"] != 30 || got["aborted"] != 0 {
		t.Fatalf("rows by transaction after the commit: %v", got)
	}
}
