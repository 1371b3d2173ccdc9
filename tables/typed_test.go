package tables_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/registry"
	"github.com/strata-io/strata/tables"
)

// register registers schema text of typ under subject and answers its id and the
// parsed schema (to encode values with).
func register(t *testing.T, core *broker.Broker, subject, typ, text string) (int32, *registry.Schema) {
	t.Helper()
	v, err := core.RegisterSchema(context.Background(), broker.Anonymous, subject, broker.SchemaRequest{Type: typ, Schema: text})
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	s, err := registry.Parse(typ, text, nil)
	if err != nil {
		t.Fatal(err)
	}
	return int32(v.ID), s
}

// framed is the JSON value v encoded with s and framed with id, as a Confluent
// serializer writes it.
func framed(t *testing.T, id int32, s *registry.Schema, v string) []byte {
	t.Helper()
	p, err := s.EncodeJSON([]byte(v))
	if err != nil {
		t.Fatalf("encode %s: %v", v, err)
	}
	return registry.AppendFrame(nil, id, p)
}

// produceValues writes values to partition 0 of topic, in order, answering their
// offsets.
func produceValues(t *testing.T, core *broker.Broker, topic string, values ...[]byte) []int64 {
	t.Helper()
	recs := make([]broker.Record, len(values))
	for i, v := range values {
		recs[i] = broker.Record{Topic: topic, Partition: 0, Key: []byte("k" + strconv.Itoa(i)), Value: v, Timestamp: time.Now().UnixMilli()}
	}
	res, err := core.Produce(context.Background(), broker.Anonymous, broker.ProduceRequest{Records: recs})
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	out := make([]int64, len(values))
	for i, o := range res.Offsets {
		out[i] = o.Offset
	}
	return out
}

// rowsByOffset scans tbl with iceberg-go and answers each row as JSON (Arrow's own
// rendering of the row), by partition-0 offset.
func rowsByOffset(t *testing.T, tbl *table.Table) map[int64]map[string]any {
	t.Helper()
	at, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer at.Release()
	out := map[int64]map[string]any{}
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		b, err := rec.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		if err := json.Unmarshal(b, &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			out[int64(r["offset"].(float64))] = r
		}
	}
	return out
}

func typedTopic(t *testing.T, core *broker.Broker, name string) {
	t.Helper()
	if _, err := core.CreateTopic(context.Background(), broker.Anonymous, broker.CreateTopicRequest{Name: name, Partitions: 1,
		Configs: map[string]string{"iceberg.enabled": "true", "iceberg.commit.interval.ms": "100", "value.format": "binary"}}); err != nil {
		t.Fatal(err)
	}
}

const ordersV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"customer","type":"string"},
 {"name":"qty","type":"int"},
 {"name":"price","type":"double"},
 {"name":"rate","type":"float"},
 {"name":"paid","type":"boolean"},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"attrs","type":{"type":"map","values":"long"}},
 {"name":"ship","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"},{"name":"zip","type":["null","int"]}]}},
 {"name":"state","type":{"type":"enum","name":"State","symbols":["NEW","DONE"]}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"blob","type":"bytes"},
 {"name":"code","type":{"type":"fixed","name":"Code","size":2}},
 {"name":"either","type":["int","string"]},
 {"name":"offset","type":"long"},
 {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"lts","type":{"type":"long","logicalType":"local-timestamp-micros"}},
 {"name":"fdec","type":{"type":"fixed","name":"D","size":4,"logicalType":"decimal","precision":6,"scale":1}}
]}`

func orderJSON(i int) string {
	note := `null`
	if i%2 == 0 {
		note = `{"string":"note ` + strconv.Itoa(i) + `"}`
	}
	either := `{"int":` + strconv.Itoa(i) + `}`
	if i%3 == 0 {
		either = `{"string":"s` + strconv.Itoa(i) + `"}`
	}
	return fmt.Sprintf(`{"id":%d,"customer":"c%d","qty":%d,"price":%d.5,"rate":0.25,"paid":%t,"note":%s,"tags":["a","t%d"],"attrs":{"x":%d},`+
		`"ship":{"city":"city%d","zip":{"int":%d}},"state":"DONE","at":%d,"day":19000,"amount":"\u0001\u0000","blob":"\u0000\u00ff","code":"ab","either":%s,"offset":%d,"tm":3723004,"lts":1700000000000001,"fdec":"\u0000\u0000\u0001\u0001"}`,
		i, i, i, i, i%2 == 0, note, i, i, i, 10000+i, 1700000000000+int64(i), either, 1000+i)
}

// TestTypedColumnsAvro: a topic whose value subject has an Avro schema becomes a
// table with the schema's fields as columns (after the default ones), each record's
// value decoded into them, read by iceberg-go through the REST catalog: primitives,
// a nullable union, an array, a map, a nested record, an enum, logical types, bytes,
// fixed, a union with no Iceberg type (a JSON string), a field named like a default
// column (value_offset), and a tombstone (typed columns null, the record's row there).
func TestTypedColumnsAvro(t *testing.T) { typedAvro(t, embedded(t)) }

// TestTypedColumnsAvroServices: the same on two nodes on Postgres (the registry's
// state too) and MinIO.
func TestTypedColumnsAvroServices(t *testing.T) { typedAvro(t, services(t)) }

func typedAvro(t *testing.T, c cluster) {
	core := c.nodes[0].Broker
	typedTopic(t, core, "orders")
	id, s := register(t, core, "orders-value", "", ordersV1)
	const n = 30
	var values [][]byte
	for i := range n {
		values = append(values, framed(t, id, s, orderJSON(i)))
	}
	values = append(values, nil) // a tombstone
	offs := produceValues(t, core, "orders", values...)
	tbl := waitRows(t, restCatalog(t, c.nodes[0], c.props), "orders", n+1)

	sc := tbl.Schema()
	wantTypes := map[string]string{
		"partition": "int", "offset": "long", "timestamp": "timestamptz", "key": "string", "value": "binary",
		"id": "long", "customer": "string", "qty": "int", "price": "double", "rate": "float", "paid": "boolean",
		"note": "string", "tags": "list<string>", "attrs": "map<string, long>", "ship": "struct<", "state": "string",
		"at": "timestamptz", "day": "date", "amount": "decimal(9, 2)", "blob": "binary", "code": "fixed[2]",
		"either": "string", "value_offset": "long", "tm": "time", "lts": "timestamp", "fdec": "decimal(6, 1)",
	}
	for name, typ := range wantTypes {
		f, ok := sc.FindFieldByName(name)
		if !ok {
			t.Fatalf("the table has no column %s: %s", name, sc)
		}
		if !strings.HasPrefix(f.Type.String(), typ) {
			t.Errorf("column %s is %s, want %s", name, f.Type, typ)
		}
		if f.Required && !map[string]bool{"partition": true, "offset": true, "timestamp": true}[name] {
			t.Errorf("column %s is required; typed columns are optional", name)
		}
	}
	if got := sc.Fields()[6].Name; got != "id" {
		t.Errorf("the first typed column is %s, want id (after the default columns)", got)
	}

	rows := rowsByOffset(t, tbl)
	if len(rows) != n+1 {
		t.Fatalf("%d rows, want %d", len(rows), n+1)
	}
	for i := range n {
		r := rows[offs[i]]
		var want map[string]any
		if err := json.Unmarshal([]byte(orderJSON(i)), &want); err != nil {
			t.Fatal(err)
		}
		check := func(col string, got, want any) {
			t.Helper()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("offset %d column %s = %v, want %v", offs[i], col, got, want)
			}
		}
		check("id", r["id"], float64(i))
		check("customer", r["customer"], want["customer"])
		check("qty", r["qty"], float64(i))
		check("price", r["price"], float64(i)+0.5)
		check("rate", r["rate"], 0.25)
		check("paid", r["paid"], i%2 == 0)
		if i%2 == 0 {
			check("note", r["note"], "note "+strconv.Itoa(i))
		} else {
			check("note", r["note"], nil)
		}
		check("tags", r["tags"], []any{"a", "t" + strconv.Itoa(i)})
		check("attrs", r["attrs"], []any{map[string]any{"key": "x", "value": float64(i)}})
		check("ship", r["ship"], map[string]any{"city": "city" + strconv.Itoa(i), "zip": float64(10000 + i)})
		check("state", r["state"], "DONE")
		check("at", r["at"], time.UnixMilli(1700000000000+int64(i)).UTC().Format(time.RFC3339Nano))
		check("day", r["day"], "2022-01-08")
		check("amount", r["amount"], "2.56") // bytes 0x0100 = 256, scale 2
		check("code", r["code"], "YWI=")     // "ab", base64 as Arrow renders fixed
		if i%3 == 0 {
			check("either", r["either"], "s"+strconv.Itoa(i))
		} else {
			check("either", r["either"], strconv.Itoa(i))
		}
		check("value_offset", r["value_offset"], float64(1000+i))
		check("offset", r["offset"], float64(offs[i]))
		check("tm", r["tm"], "01:02:03.004")
		check("lts", r["lts"], "2023-11-14T22:13:20.000001")
		check("fdec", r["fdec"], "25.7") // 0x0101 = 257, scale 1
	}
	tomb := rows[offs[n]]
	if tomb["value"] != nil || tomb["id"] != nil || tomb["ship"] != nil {
		t.Fatalf("the tombstone's row: %v, want value and typed columns null", tomb)
	}
	if r := rows[offs[0]]; !strings.HasPrefix(fmt.Sprint(r["value"]), "AAAA") {
		t.Errorf("value %v: want the record's bytes as produced (framed: 0x00 then the id)", r["value"])
	}
}

// TestTypedColumnsJSONSchema: the same from a JSON schema: object properties (by
// name), integer, number, boolean, string, a nested object, an array, a nullable
// type, and a oneOf (no Iceberg type: its JSON).
func TestTypedColumnsJSONSchema(t *testing.T) {
	c := embedded(t)
	core := c.nodes[0].Broker
	typedTopic(t, core, "events")
	id, s := register(t, core, "events-value", registry.TypeJSON, `{"type":"object","properties":{
		"name":{"type":"string"},"n":{"type":"integer"},"x":{"type":"number"},"ok":{"type":"boolean"},
		"maybe":{"type":["null","string"]},"inner":{"type":"object","properties":{"a":{"type":"integer"}}},
		"list":{"type":"array","items":{"type":"string"}},"any":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`)
	offs := produceValues(t, core, "events",
		framed(t, id, s, `{"name":"a","n":1,"x":1.5,"ok":true,"maybe":"m","inner":{"a":7},"list":["p","q"],"any":3}`),
		framed(t, id, s, `{"name":"b","n":2}`))
	tbl := waitRows(t, restCatalog(t, c.nodes[0], c.props), "events", 2)
	var names []string
	for _, f := range tbl.Schema().Fields()[6:] {
		names = append(names, f.Name+":"+f.Type.String())
	}
	if got := strings.Join(names, " "); got != "any:string inner:struct<12: a: optional long> list:list<string> maybe:string n:long name:string ok:boolean x:double" {
		t.Fatalf("typed columns: %s", got)
	}
	rows := rowsByOffset(t, tbl)
	a, b := rows[offs[0]], rows[offs[1]]
	if fmt.Sprintln(a["name"], a["n"], a["x"], a["ok"], a["maybe"], a["inner"], a["list"], a["any"]) != "a 1 1.5 true m map[a:7] [p q] 3\n" {
		t.Fatalf("row a: %v", a)
	}
	if b["name"] != "b" || b["n"] != float64(2) || b["x"] != nil || b["inner"] != nil || b["list"] != nil {
		t.Fatalf("row b: %v", b)
	}
}

// TestSchemaEvolution: a field added with a default (a compatible evolution) evolves
// the table's schema: the columns keep their field ids, the new one takes a new id,
// rows before it read it as null and records written with the new schema carry it.
// An incompatible schema is refused at the registry (BACKWARD, the default) and the
// table's schema stays as it was.
func TestSchemaEvolution(t *testing.T) { schemaEvolution(t, embeddedWith(t, noMaintenance)) }

// TestSchemaEvolutionServices: the same on two nodes on Postgres and MinIO.
func TestSchemaEvolutionServices(t *testing.T) { schemaEvolution(t, services(t, noMaintenance)) }

func schemaEvolution(t *testing.T, c cluster) {
	core := c.nodes[0].Broker
	cat := restCatalog(t, c.nodes[0], c.props)
	typedTopic(t, core, "users")
	v1 := `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`
	id1, s1 := register(t, core, "users-value", "", v1)
	var offs []int64
	for i := range 5 {
		offs = append(offs, produceValues(t, core, "users", framed(t, id1, s1, fmt.Sprintf(`{"id":%d,"name":"u%d"}`, i, i)))...)
	}
	tbl := waitRows(t, cat, "users", 5)
	before := tbl.Schema()
	idOf := func(sc *iceberg.Schema, name string) int {
		f, ok := sc.FindFieldByName(name)
		if !ok {
			t.Fatalf("no column %s in %s", name, sc)
		}
		return f.ID
	}
	if _, ok := before.FindFieldByName("email"); ok {
		t.Fatal("email before it was added")
	}

	v2 := `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},` +
		`{"name":"email","type":["null","string"],"default":null}]}`
	id2, s2 := register(t, core, "users-value", "", v2)
	for i := 5; i < 10; i++ {
		offs = append(offs, produceValues(t, core, "users", framed(t, id2, s2, fmt.Sprintf(`{"id":%d,"name":"u%d","email":{"string":"u%d@x"}}`, i, i, i)))...)
	}
	// A producer still on v1 after the change: its records read email as null.
	offs = append(offs, produceValues(t, core, "users", framed(t, id1, s1, `{"id":10,"name":"u10"}`))...)
	tbl = waitRows(t, cat, "users", 11)
	after := tbl.Schema()
	if after.ID == before.ID {
		t.Fatalf("the schema did not evolve: %s", after)
	}
	for _, name := range []string{"partition", "offset", "key", "value", "headers", "id", "name"} {
		if idOf(after, name) != idOf(before, name) {
			t.Errorf("column %s's field id moved from %d to %d", name, idOf(before, name), idOf(after, name))
		}
	}
	if e := idOf(after, "email"); e <= before.HighestFieldID() {
		t.Errorf("email took field id %d; want one past the old schema's highest, %d", e, before.HighestFieldID())
	}
	rows := rowsByOffset(t, tbl)
	for i, off := range offs {
		r := rows[off]
		want := any(nil)
		if i >= 5 && i < 10 {
			want = fmt.Sprintf("u%d@x", i)
		}
		if r["email"] != want || r["id"] != float64(i) || r["name"] != fmt.Sprintf("u%d", i) {
			t.Errorf("row %d (offset %d): id %v name %v email %v, want email %v", i, off, r["id"], r["name"], r["email"], want)
		}
	}
	snapshots := len(tbl.Metadata().Snapshots())

	// Incompatible: id becomes a string (BACKWARD: v3 cannot read what v2 wrote).
	v3 := `{"type":"record","name":"User","fields":[{"name":"id","type":"string"},{"name":"name","type":"string"}]}`
	_, err := core.RegisterSchema(context.Background(), broker.Anonymous, "users-value", broker.SchemaRequest{Schema: v3})
	if err == nil || !strings.Contains(err.Error(), "ncompatible") {
		t.Fatalf("registering an incompatible schema: %v, want refused as incompatible", err)
	}
	// The table goes on, its schema unchanged.
	offs = append(offs, produceValues(t, core, "users", framed(t, id2, s2, `{"id":11,"name":"u11","email":null}`))...)
	tbl = waitRows(t, cat, "users", 12)
	if !tbl.Schema().Equals(after) || tbl.Schema().ID != after.ID {
		t.Fatalf("the schema changed after a refused registration: %s, was %s", tbl.Schema(), after)
	}
	if len(tbl.Metadata().Snapshots()) <= snapshots {
		t.Fatal("no commit after the refused registration")
	}

	// Maintenance merges the files written before and after the evolution into files
	// of the new schema: every row reads as it did.
	topic, err := core.TableTopic(context.Background(), broker.Anonymous, "users")
	if err != nil {
		t.Fatal(err)
	}
	n := c.nodes[0]
	w := tables.New(n.Store, n.Catalog, n.Reader, tables.Config{Location: c.location, Holder: "maintainer",
		TargetFileBytes: 1 << 20, MinInputFiles: 2, SnapshotMaxAge: time.Hour, MinSnapshots: 1, OrphanGrace: time.Hour}, nil)
	m, err := w.Maintain(context.Background(), topic)
	if err != nil || m.FilesRewritten < 2 {
		t.Fatalf("maintain: %+v, %v; want the files merged", m, err)
	}
	tbl = waitRows(t, cat, "users", 12)
	if files := dataFiles(t, tbl); files != 1 {
		t.Fatalf("%d data files after the merge, want 1", files)
	}
	merged := rowsByOffset(t, tbl)
	for _, off := range offs[:11] {
		if fmt.Sprint(merged[off]) != fmt.Sprint(rows[off]) {
			t.Fatalf("offset %d after the merge: %v, was %v", off, merged[off], rows[off])
		}
	}
}

// TestValueDoesNotMatch: on a typed table topic without broker-side validation, a
// value that is not framed, or framed with a schema id the value subject does not
// hold, stops the partition's table at that record: the records before it are rows,
// none after it is, the role's Status and strata_tables_stopped_partitions say so.
// Registering the record's schema under the subject lets the table go on, and then
// every record is a row, each once: never a silently missing row.
func TestValueDoesNotMatch(t *testing.T) { valueDoesNotMatch(t, embedded(t)) }

// TestValueDoesNotMatchServices: the same on two nodes on Postgres and MinIO (the
// status is the node's that holds the partition).
func TestValueDoesNotMatchServices(t *testing.T) { valueDoesNotMatch(t, services(t)) }

func valueDoesNotMatch(t *testing.T, c cluster) {
	n := c.nodes[0]
	core := n.Broker
	cat := restCatalog(t, n, c.props)
	typedTopic(t, core, "pay")
	v1 := `{"type":"record","name":"Pay","fields":[{"name":"amount","type":"long"}]}`
	id, s := register(t, core, "pay-value", "", v1)
	// The same schema under another subject only: the id is not the value subject's.
	other := `{"type":"record","name":"Pay","fields":[{"name":"amount","type":"long"},{"name":"cur","type":"string","default":"EUR"}]}`
	otherID, otherS := register(t, core, "elsewhere-value", "", other)
	good := func(i int) []byte { return framed(t, id, s, fmt.Sprintf(`{"amount":%d}`, i)) }

	offs := produceValues(t, core, "pay", good(0), good(1), good(2),
		framed(t, otherID, otherS, `{"amount":3,"cur":"USD"}`), good(4))
	tbl := waitRows(t, cat, "pay", 3)
	topic, err := core.TableTopic(context.Background(), broker.Anonymous, "pay")
	if err != nil {
		t.Fatal(err)
	}
	var st []tablesStatus
	testwait.Until(t, time.Minute, "partition 0 stopped", func() bool {
		st = status(c, topic.ID)
		return len(st) == 1
	})
	if st[0].Partition != 0 || st[0].Offset != offs[3] || !strings.Contains(st[0].Reason, fmt.Sprintf("schema id %d is not registered under subject pay-value", otherID)) {
		t.Fatalf("status %+v, want partition 0 stopped at offset %d for schema id %d", st[0], offs[3], otherID)
	}
	if got := gauge(t, c, "strata_tables_stopped_partitions", "pay"); got != 1 {
		t.Fatalf("strata_tables_stopped_partitions{topic=pay} = %v, want 1", got)
	}
	if !logged(c, "table partition stopped") {
		t.Error("no error logged for the stop")
	}
	// Engines see it in the table's properties, through every node's REST catalog.
	testwait.Until(t, time.Minute, "the table's status property", func() bool {
		tbl, err = cat.LoadTable(context.Background(), table.Identifier{tables.Namespace, "pay"})
		return err == nil && strings.HasPrefix(tbl.Properties()[tables.StoppedProperty(0)], fmt.Sprintf("offset %d: ", offs[3]))
	})
	// The role goes on trying; nothing past the record lands meanwhile.
	if rows := rowsByOffset(t, tbl); len(rows) != 3 {
		t.Fatalf("%d rows, want the 3 before the record", len(rows))
	}

	// The cause fixed: the record's schema registered under the subject (compatible:
	// a field with a default).
	register(t, core, "pay-value", "", other)
	tbl = waitRows(t, cat, "pay", 5)
	rows := rowsByOffset(t, tbl)
	for i, off := range offs {
		if rows[off]["amount"] != float64(i) {
			t.Fatalf("row at offset %d: %v, want amount %d", off, rows[off], i)
		}
	}
	if rows[offs[3]]["cur"] != "USD" {
		t.Fatalf("row at offset %d: %v, want cur USD", offs[3], rows[offs[3]])
	}
	testwait.Until(t, time.Minute, "the stop cleared", func() bool { return len(status(c, topic.ID)) == 0 })
	if v, ok := tbl.Properties()[tables.StoppedProperty(0)]; ok {
		t.Fatalf("the table still says %s = %q after going on", tables.StoppedProperty(0), v)
	}
	if got := gauge(t, c, "strata_tables_stopped_partitions", "pay"); got != 0 {
		t.Fatalf("strata_tables_stopped_partitions{topic=pay} = %v after the fix, want 0", got)
	}

	// A value that is not framed at all stops it again, with the reason.
	produceValues(t, core, "pay", []byte(`{"amount":5}`), good(6))
	testwait.Until(t, time.Minute, "partition 0 stopped again", func() bool {
		st = status(c, topic.ID)
		return len(st) == 1 && strings.Contains(st[0].Reason, "not framed for the schema registry")
	})
	if rows := rowsByOffset(t, waitRows(t, cat, "pay", 5)); len(rows) != 5 {
		t.Fatalf("%d rows, want 5", len(rows))
	}
}

type tablesStatus = struct {
	Partition int32
	Offset    int64
	Reason    string
}

// status is the stopped partitions of a table, as the nodes holding them say.
func status(c cluster, topicID int64) []tablesStatus {
	var out []tablesStatus
	for _, n := range c.nodes {
		for _, s := range n.Tables.Status(topicID) {
			out = append(out, tablesStatus(s))
		}
	}
	return out
}

func logged(c cluster, msg string) bool {
	for _, n := range c.nodes {
		if strings.Contains(n.Logs.String(), msg) {
			return true
		}
	}
	return false
}

// gauge sums a gauge of the nodes' registries by its topic label.
func gauge(t *testing.T, c cluster, name, topic string) float64 {
	t.Helper()
	var sum float64
	for _, n := range c.nodes {
		sum += gaugeOf(t, n, name, topic)
	}
	return sum
}

func gaugeOf(t *testing.T, n *nodetest.Node, name, topic string) float64 {
	t.Helper()
	mfs, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "topic" && l.GetValue() == topic {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// TestIncompatibleUnderNone: with the subject's compatibility NONE the registry takes
// a schema that changes a column's type in a way Iceberg cannot (long to string):
// the table stops, every partition saying why, its schema unchanged, and records
// written with the new schema never land as rows with a column silently dropped.
func TestIncompatibleUnderNone(t *testing.T) {
	c := embedded(t)
	n := c.nodes[0]
	core := n.Broker
	cat := restCatalog(t, n, c.props)
	typedTopic(t, core, "m")
	id1, s1 := register(t, core, "m-value", "", `{"type":"record","name":"M","fields":[{"name":"v","type":"long"}]}`)
	produceValues(t, core, "m", framed(t, id1, s1, `{"v":1}`))
	before := waitRows(t, cat, "m", 1).Schema()
	if _, err := core.SetCompatibilityLevel(context.Background(), broker.Anonymous, "m-value", "NONE"); err != nil {
		t.Fatal(err)
	}
	id2, s2 := register(t, core, "m-value", "", `{"type":"record","name":"M","fields":[{"name":"v","type":"string"}]}`)
	produceValues(t, core, "m", framed(t, id2, s2, `{"v":"two"}`))
	topic, err := core.TableTopic(context.Background(), broker.Anonymous, "m")
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, time.Minute, "the table stopped", func() bool {
		st := status(c, topic.ID)
		return len(st) == 1 && strings.Contains(st[0].Reason, "column v is long, and the latest schema makes it string")
	})
	tbl := waitRows(t, cat, "m", 1)
	if !tbl.Schema().Equals(before) {
		t.Fatalf("the schema changed: %s, was %s", tbl.Schema(), before)
	}
}

// TestSchemaEvolutionJSON: a JSON schema's property added (closed content model:
// compatible under BACKWARD) evolves the table as an Avro field does: the new column
// after the others with a new field id, null in the rows before it.
func TestSchemaEvolutionJSON(t *testing.T) {
	c := embedded(t)
	core := c.nodes[0].Broker
	cat := restCatalog(t, c.nodes[0], c.props)
	typedTopic(t, core, "j")
	id1, s1 := register(t, core, "j-value", registry.TypeJSON,
		`{"type":"object","properties":{"id":{"type":"integer"}},"additionalProperties":false}`)
	o1 := produceValues(t, core, "j", framed(t, id1, s1, `{"id":1}`))
	before := waitRows(t, cat, "j", 1).Schema()
	id2, s2 := register(t, core, "j-value", registry.TypeJSON,
		`{"type":"object","properties":{"id":{"type":"integer"},"email":{"type":"string"}},"additionalProperties":false}`)
	o2 := produceValues(t, core, "j", framed(t, id2, s2, `{"id":2,"email":"e@x"}`))
	tbl := waitRows(t, cat, "j", 2)
	after := tbl.Schema()
	idCol, _ := after.FindFieldByName("id")
	was, _ := before.FindFieldByName("id")
	email, ok := after.FindFieldByName("email")
	if !ok || idCol.ID != was.ID || email.ID <= before.HighestFieldID() || after.Fields()[len(after.Fields())-1].Name != "email" {
		t.Fatalf("evolved schema %s from %s", after, before)
	}
	rows := rowsByOffset(t, tbl)
	if r := rows[o1[0]]; r["id"] != float64(1) || r["email"] != nil {
		t.Fatalf("the row before: %v", r)
	}
	if r := rows[o2[0]]; r["id"] != float64(2) || r["email"] != "e@x" {
		t.Fatalf("the row after: %v", r)
	}
}
