package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the s3:// scheme for reading the table
	"github.com/apache/iceberg-go/table"

	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// tablesKillScale is the run with STRATA_LONG=1 (1,000,000 records, 10
// kills) and a bounded one otherwise.
func tablesKillScale() (records, kills int) {
	if os.Getenv("STRATA_LONG") == "1" {
		return 1_000_000, 10
	}
	return 40_000, 3
}

// tableStatus is GET /v1/topics/{t}/table.
type tableStatus struct {
	MetadataLocation string `json:"metadata_location"`
	Lag              int64  `json:"lag"`
	Partitions       []struct {
		Partition  int32 `json:"partition"`
		NextOffset int64 `json:"next_offset"`
	} `json:"partitions"`
}

func (s tableStatus) covered() int64 {
	var n int64
	for _, p := range s.Partitions {
		n += p.NextOffset
	}
	return n
}

func getTableStatus(t *testing.T, base, topic string) (tableStatus, bool) {
	t.Helper()
	res, err := tryDo(context.Background(), http.MethodGet, base+"/v1/topics/"+topic+"/table", "", nil)
	if err != nil || res.status != http.StatusOK {
		return tableStatus{}, false
	}
	var st tableStatus
	if err := json.Unmarshal(res.body, &st); err != nil {
		t.Fatalf("decode table status %q: %v", truncate(string(res.body), 200), err)
	}
	return st, true
}

// TestTablesRoleSIGKILLed is issue 35's crash run: two `strata serve` processes run the
// tables role while records are produced through a third; again and again, once the
// table has moved since the last kill, one of them is SIGKILLed — mid-pass, files
// half written or a catalog commit in flight — and started again as a new worker.
// The table, read by iceberg-go through the REST catalog, ends with every offset of
// every partition exactly once.
func TestTablesRoleSIGKILLed(t *testing.T) {
	total, kills := tablesKillScale()
	c := newCluster(t)
	front := c.start(t, "front")
	workerArgs := []string{"--roles", "reader,tables", "--tables-lease-ttl", "2s", "--tables-maintain-interval", "0"}
	workers := []*serveProc{c.start(t, "tables0.0", workerArgs...), c.start(t, "tables1.0", workerArgs...)}
	for _, p := range append([]*serveProc{front}, workers...) {
		p.waitReady(t)
	}
	const topic, parts = "converted", 4
	createTopic(t, front.url, topic, parts, map[string]string{"iceberg.enabled": "true", "iceberg.commit.interval.ms": "200"})

	// The records in kills+1 chunks, each produced while a kill waits for the table to
	// take some of it in: the kill lands while the table converts the rest.
	chunk := total / (kills + 1)
	const batch = 500
	produced := 0
	produceChunk := func(n int) <-chan error {
		from := produced
		produced += n
		errs := make(chan error, 1)
		go func() {
			defer close(errs)
			for i := from; i < from+n; i += batch {
				recs := make([]map[string]any, 0, batch)
				for j := i; j < min(from+n, i+batch); j++ {
					recs = append(recs, map[string]any{"partition": j % parts, "key": "k" + strconv.Itoa(j), "value": map[string]int{"n": j}})
				}
				out, _, res, err := produceOnce(context.Background(), front.url, topic, produceBody(recs))
				if out != acked {
					errs <- fmt.Errorf("produce: %v HTTP %d %s", err, res.status, truncate(string(res.body), 300))
					return
				}
			}
		}()
		return errs
	}
	rng := rand.New(rand.NewPCG(35, 10))
	var mark int64
	for k := range kills {
		done := produceChunk(chunk)
		testwait.Until(t, 2*time.Minute, fmt.Sprintf("the table to move before kill %d", k+1), func() bool {
			st, ok := getTableStatus(t, front.url, topic)
			return ok && st.covered() > mark
		})
		i := rng.IntN(len(workers))
		victim := workers[i]
		if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-victim.done
		st, _ := getTableStatus(t, front.url, topic)
		t.Logf("kill %d: %s, the table at %d of %d records produced", k+1, victim.name, st.covered(), produced)
		workers[i] = c.start(t, fmt.Sprintf("tables%d.%d", i, k+1), workerArgs...)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		workers[i].waitReady(t)
		st, _ = getTableStatus(t, front.url, topic)
		mark = st.covered()
	}
	if err := <-produceChunk(total - produced); err != nil {
		t.Fatal(err)
	}

	testwait.Until(t, 5*time.Minute, "the table to hold every record", func() bool {
		st, ok := getTableStatus(t, front.url, topic)
		return ok && st.Lag == 0 && st.covered() == int64(total)
	})

	// Every offset exactly once, as an engine reads the table.
	m := testsvc.MinIO(t)
	cat, err := rest.NewCatalog(context.Background(), "strata", front.url+"/iceberg", rest.WithAdditionalProps(iceberg.Properties{
		icebergio.S3EndpointURL: m.Endpoint, icebergio.S3Region: m.Region,
		icebergio.S3AccessKeyID: m.AccessKey, icebergio.S3SecretAccessKey: m.SecretKey,
		icebergio.S3ForceVirtualAddressing: "false",
	}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(context.Background(), table.Identifier{"strata", topic})
	if err != nil {
		t.Fatal(err)
	}
	at, err := tbl.Scan(table.WithSelectedFields("partition", "offset")).ToArrowTable(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer at.Release()
	seen := make([][]bool, parts)
	for p := range seen {
		seen[p] = make([]bool, total/parts+1)
	}
	tr := array.NewTableReader(at, 1<<16)
	defer tr.Release()
	rows := 0
	for tr.Next() {
		rec := tr.RecordBatch()
		ps, offs := rec.Column(0).(*array.Int32), rec.Column(1).(*array.Int64)
		for i := range int(rec.NumRows()) {
			p, o := ps.Value(i), offs.Value(i)
			if p < 0 || int(p) >= parts || o < 0 || o >= int64(len(seen[p])) {
				t.Fatalf("row (%d, %d) was never produced", p, o)
			}
			if seen[p][o] {
				t.Fatalf("row (%d, %d) twice", p, o)
			}
			seen[p][o] = true
			rows++
		}
	}
	if rows != total {
		t.Fatalf("the table has %d rows, want the %d records produced, each once", rows, total)
	}
	t.Logf("%d records, %d kills: every offset once", total, kills)
}
