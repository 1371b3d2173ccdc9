package tables_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the S3 file IO an engine would bring
	"github.com/apache/iceberg-go/table"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/s3"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/tables"
)

// recordCount is how many records the round trips convert: 100,000 with STRATA_LONG=1
// (the figure), a bounded count otherwise.
func recordCount() int {
	if os.Getenv("STRATA_LONG") == "1" {
		return 100_000
	}
	return 3_000
}

// cluster is the nodes of a test and how an engine reaches their bucket.
type cluster struct {
	nodes    []*nodetest.Node
	location string
	props    iceberg.Properties // what an engine brings to read the bucket
}

func tablesRole(location string, mutate ...func(*tables.Config)) nodetest.Option {
	return nodetest.Mutate(func(c *node.Config) {
		c.Tables = true
		c.TablesConfig = tables.Config{Location: location, Poll: 20 * time.Millisecond, LeaseTTL: 5 * time.Second}
		for _, m := range mutate {
			m(&c.TablesConfig)
		}
	})
}

// embedded is strata dev's shape: one node on SQLite and files.
func embedded(t *testing.T, opts ...nodetest.Option) cluster {
	return embeddedWith(t, nil, opts...)
}

func embeddedWith(t *testing.T, mutate func(*tables.Config), opts ...nodetest.Option) cluster {
	dir := t.TempDir()
	loc := "file://" + filepath.Join(dir, "objects")
	var ms []func(*tables.Config)
	if mutate != nil {
		ms = append(ms, mutate)
	}
	n := nodetest.Start(t, append([]nodetest.Option{nodetest.InDir(dir), tablesRole(loc, ms...)}, opts...)...)
	return cluster{nodes: []*nodetest.Node{n}, location: loc, props: iceberg.Properties{}}
}

// services is two strata serve nodes, both running the tables role, on one Postgres
// database and one MinIO bucket.
func services(t *testing.T, mutate ...func(*tables.Config)) cluster {
	ctx := context.Background()
	m := testsvc.MinIO(t)
	bucket := testsvc.BucketName()
	st, err := s3.New(ctx, s3.Config{Bucket: bucket, Prefix: "node", Endpoint: m.Endpoint, Region: m.Region,
		PathStyle: true, AccessKey: m.AccessKey, SecretKey: m.SecretKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	cat, err := postgres.Open(ctx, testsvc.PostgresDSN(t), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	loc := "s3://" + bucket + "/node"
	c := cluster{location: loc, props: iceberg.Properties{
		icebergio.S3EndpointURL: m.Endpoint, icebergio.S3Region: m.Region,
		icebergio.S3AccessKeyID: m.AccessKey, icebergio.S3SecretAccessKey: m.SecretKey,
		icebergio.S3ForceVirtualAddressing: "false",
	}}
	for range 2 {
		c.nodes = append(c.nodes, nodetest.Start(t, nodetest.On(cat, st), tablesRole(loc, mutate...)))
	}
	return c
}

type want struct {
	key, value string
	header     string
	ts         int64
}

// produce writes n records over 3 partitions and 3 days, answering them by
// partition and offset.
func produce(t *testing.T, core *broker.Broker, topic string, n int) map[[2]int64]want {
	t.Helper()
	ctx := context.Background()
	base := time.Now().Add(-48 * time.Hour).UnixMilli()
	out := make(map[[2]int64]want, n)
	const batch = 1000
	for i := 0; i < n; i += batch {
		var recs []broker.Record
		var ws []want
		for j := i; j < min(n, i+batch); j++ {
			w := want{key: "k-" + strconv.Itoa(j), value: `{"n":` + strconv.Itoa(j) + `}`, header: "h" + strconv.Itoa(j), ts: base + int64(j%3)*24*3600*1000 + int64(j)}
			ws = append(ws, w)
			recs = append(recs, broker.Record{Topic: topic, Partition: int32(j % 3), Key: []byte(w.key), Value: []byte(w.value),
				Headers: []segment.Header{{Key: "h", Value: []byte(w.header)}}, Timestamp: w.ts})
		}
		res, err := core.Produce(ctx, broker.Anonymous, broker.ProduceRequest{Records: recs})
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		for k, o := range res.Offsets {
			out[[2]int64{int64(o.Partition), o.Offset}] = ws[k]
		}
	}
	return out
}

func createTableTopic(t *testing.T, core *broker.Broker, name string) {
	t.Helper()
	if _, err := core.CreateTopic(context.Background(), broker.Anonymous, broker.CreateTopicRequest{Name: name, Partitions: 3,
		Configs: map[string]string{"iceberg.enabled": "true", "iceberg.commit.interval.ms": "100"}}); err != nil {
		t.Fatal(err)
	}
}

// restCatalog is iceberg-go's REST catalog client on a node, as an engine attaches.
func restCatalog(t *testing.T, n *nodetest.Node, props iceberg.Properties, opts ...rest.Option) *rest.Catalog {
	t.Helper()
	cat, err := rest.NewCatalog(context.Background(), "strata", n.URL+tables.Prefix, append([]rest.Option{rest.WithAdditionalProps(props)}, opts...)...)
	if err != nil {
		t.Fatalf("attach iceberg-go's REST catalog: %v", err)
	}
	return cat
}

// waitRows waits until the table's current snapshot holds rows rows, and answers it.
func waitRows(t *testing.T, cat *rest.Catalog, topic string, rows int) *table.Table {
	t.Helper()
	var tbl *table.Table
	testwait.Until(t, 2*time.Minute, fmt.Sprintf("table %s with %d rows", topic, rows), func() bool {
		var err error
		tbl, err = cat.LoadTable(context.Background(), table.Identifier{tables.Namespace, topic})
		if err != nil {
			return false
		}
		s := tbl.CurrentSnapshot()
		return s != nil && s.Summary != nil && s.Summary.Properties["total-records"] == strconv.Itoa(rows)
	})
	return tbl
}

// checkRows scans tbl with iceberg-go and checks that its rows are exactly the
// records produced, each once.
func checkRows(t *testing.T, tbl *table.Table, produced map[[2]int64]want) {
	t.Helper()
	at, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer at.Release()
	seen := make(map[[2]int64]bool, len(produced))
	tr := array.NewTableReader(at, 4096)
	defer tr.Release()
	sc := at.Schema()
	col := func(name string) int { return sc.FieldIndices(name)[0] }
	pi, oi, ti, ki, vi, hi := col("partition"), col("offset"), col("timestamp"), col("key"), col("value"), col("headers")
	for tr.Next() {
		rec := tr.RecordBatch()
		ps, offs := rec.Column(pi).(*array.Int32), rec.Column(oi).(*array.Int64)
		ts := rec.Column(ti).(*array.Timestamp)
		ks, vs := rec.Column(ki).(*array.String), rec.Column(vi).(*array.String)
		hs := rec.Column(hi).(*array.List)
		hvals := hs.ListValues().(*array.Struct)
		for i := range int(rec.NumRows()) {
			id := [2]int64{int64(ps.Value(i)), offs.Value(i)}
			w, ok := produced[id]
			switch {
			case !ok:
				t.Fatalf("row %v was never produced", id)
			case seen[id]:
				t.Fatalf("row %v twice", id)
			}
			seen[id] = true
			start, end := hs.ValueOffsets(i)
			if ks.Value(i) != w.key || vs.Value(i) != w.value || int64(ts.Value(i)) != w.ts*1000 || end-start != 1 ||
				hvals.Field(0).(*array.String).Value(int(start)) != "h" || string(hvals.Field(1).(*array.Binary).Value(int(start))) != w.header {
				t.Fatalf("row %v = key %q value %q ts %d, want %+v", id, ks.Value(i), vs.Value(i), ts.Value(i), w)
			}
		}
	}
	if len(seen) != len(produced) {
		t.Fatalf("the table has %d of the %d records", len(seen), len(produced))
	}
}

func roundTrip(t *testing.T, c cluster) {
	core := c.nodes[0].Broker
	createTableTopic(t, core, "orders")
	produced := produce(t, core, "orders", recordCount())
	for _, n := range c.nodes {
		tbl := waitRows(t, restCatalog(t, n, c.props), "orders", len(produced))
		checkRows(t, tbl, produced)
	}
	// The nodes that committed say what the table holds.
	if files, bytes := gauge(t, c, "strata_tables_data_files", "orders"), gauge(t, c, "strata_tables_data_bytes", "orders"); files < 1 || bytes <= 0 {
		t.Fatalf("strata_tables_data_files %v, strata_tables_data_bytes %v: want the table's files and bytes", files, bytes)
	}
}

// TestRoundTripEmbedded: on strata dev's shape (SQLite, files), a topic's records
// become the table's rows, each exactly once, read by iceberg-go through the REST
// catalog.
func TestRoundTripEmbedded(t *testing.T) { roundTrip(t, embedded(t)) }

// TestRoundTripServices: the same on two nodes, both running the tables role, on
// Postgres and MinIO; each node's REST catalog serves the table.
func TestRoundTripServices(t *testing.T) { roundTrip(t, services(t)) }

// TestRESTCatalog: the catalog's read calls answer in the REST catalog's model.
func TestRESTCatalog(t *testing.T) {
	c := embedded(t)
	n := c.nodes[0]
	createTableTopic(t, n.Broker, "t1")
	if _, err := n.Broker.CreateTopic(context.Background(), broker.Anonymous, broker.CreateTopicRequest{Name: "plain", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		errType      string
	}{
		{"GET", "/v1/config", 200, ""},
		{"GET", "/v1/namespaces", 200, ""},
		{"GET", "/v1/namespaces/strata", 200, ""},
		{"GET", "/v1/namespaces/other", 404, "NoSuchNamespaceException"},
		{"GET", "/v1/namespaces/strata/tables/plain", 404, "NoSuchTableException"},
		{"GET", "/v1/namespaces/strata/tables/missing", 404, "NoSuchTableException"},
		{"POST", "/v1/namespaces/strata/tables/t1", 405, "ForbiddenException"},
		{"DELETE", "/v1/namespaces/strata/tables/t1", 405, "ForbiddenException"},
	} {
		req, _ := http.NewRequest(tc.method, n.URL+tables.Prefix+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Type string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || body.Error.Type != tc.errType {
			t.Errorf("%s %s = %d %q, want %d %q", tc.method, tc.path, resp.StatusCode, body.Error.Type, tc.status, tc.errType)
		}
	}
	cat := restCatalog(t, n, c.props)
	var names []string
	for id, err := range cat.ListTables(context.Background(), table.Identifier{tables.Namespace}) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, id[len(id)-1])
	}
	if len(names) != 1 || names[0] != "t1" {
		t.Fatalf("tables listed: %v, want [t1] (plain is not a table topic)", names)
	}
}

var _ objstore.Store = (*s3.Store)(nil)
