package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testsvc"
)

// The schema registry end to end: franz-go's pkg/sr client and serde against the
// binary, one `strata dev` and two `strata serve` nodes on Postgres; broker-side
// validation over Kafka (franz-go) and HTTP.

const (
	orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"}]}`
	orderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}`
	// orderBad adds a field without a default: BACKWARD refuses it.
	orderBad = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"qty","type":"int"}]}`
)

type order struct {
	ID   int64  `avro:"id"`
	Note string `avro:"note"`
}

// srRoundTrip registers, looks up, evolves, encodes and decodes through a and reads
// through b (the same node, or another on the same catalog).
func srRoundTrip(t *testing.T, a, b string) {
	ctx := t.Context()
	ca, err := sr.NewClient(sr.URLs(a))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := sr.NewClient(sr.URLs(b))
	if err != nil {
		t.Fatal(err)
	}
	v1, err := ca.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV1})
	if err != nil {
		t.Fatalf("register v1: %v", err)
	}
	if v1.Version != 1 || v1.ID <= 0 {
		t.Fatalf("v1: %+v", v1)
	}
	again, err := ca.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV1})
	if err != nil || again.ID != v1.ID || again.Version != 1 {
		t.Fatalf("registering v1 again: %+v %v, want the same id and version", again, err)
	}
	// The other node serves the id at once.
	got, err := cb.SchemaByID(ctx, v1.ID)
	if err != nil {
		t.Fatalf("schema %d through the other node: %v", v1.ID, err)
	}
	if _, err := avro.Parse(got.Schema); err != nil {
		t.Fatalf("the schema served does not parse: %v\n%s", err, got.Schema)
	}
	v2, err := ca.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV2})
	if err != nil || v2.Version != 2 || v2.ID == v1.ID {
		t.Fatalf("evolve to v2: %+v %v", v2, err)
	}
	_, err = ca.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderBad})
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != 409 || !strings.Contains(re.Message, `Schema being registered is incompatible with an earlier schema for subject "orders-value"`) {
		t.Fatalf("an incompatible schema: %v, want 409", err)
	}
	check, err := cb.CheckCompatibility(ctx, "orders-value", -1, sr.Schema{Schema: orderBad})
	if err != nil || check.Is {
		t.Fatalf("check compatibility of the bad schema: %+v %v", check, err)
	}
	found, err := cb.LookupSchema(ctx, "orders-value", sr.Schema{Schema: orderV1})
	if err != nil || found.ID != v1.ID || found.Version != 1 {
		t.Fatalf("look up v1: %+v %v", found, err)
	}
	if vs, err := cb.SubjectVersions(ctx, "orders-value"); err != nil || fmt.Sprint(vs) != "[1 2]" {
		t.Fatalf("versions: %v %v", vs, err)
	}
	latest, err := cb.SchemaByVersion(ctx, "orders-value", -1)
	if err != nil || latest.ID != v2.ID {
		t.Fatalf("latest: %+v %v", latest, err)
	}
	// The same schema under another subject keeps its id.
	other, err := cb.CreateSchema(ctx, "archive-value", sr.Schema{Schema: orderV2})
	if err != nil || other.ID != v2.ID {
		t.Fatalf("v2 under another subject: %+v %v, want id %d", other, err, v2.ID)
	}
	if res := ca.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFull}, "orders-value"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if res := cb.Compatibility(ctx, "orders-value"); res[0].Err != nil || res[0].Level != sr.CompatFull {
		t.Fatalf("compatibility through the other node: %+v", res[0])
	}

	// Serde: encode with v2's id through a, decode with the schema b serves.
	s2, err := cb.SchemaByID(ctx, v2.ID)
	if err != nil {
		t.Fatal(err)
	}
	schema := avro.MustParse(s2.Schema)
	var serde sr.Serde
	serde.Register(v2.ID, order{},
		sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(schema, v) }),
		sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(schema, b, v) }))
	enc, err := serde.Encode(order{ID: 42, Note: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	var dec order
	if err := serde.Decode(enc, &dec); err != nil || dec != (order{ID: 42, Note: "hi"}) {
		t.Fatalf("decode: %+v %v", dec, err)
	}
	if res := ca.ResetCompatibility(ctx, "orders-value"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
}

func TestRegistryDev(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildStrata(t)
	addr, kafkaAddr := freeAddr(t), freeAddr(t)
	s, _ := startStrata(t, bin, nil, addr, "dev", "--data", t.TempDir(), "--listen", addr, "--kafka-listen", kafkaAddr, "--log-level", "warn")
	srRoundTrip(t, s.url, s.url)
	srOtherFormats(t, s.url, s.url, kafkaAddr)
	testValidation(t, s.url, kafkaAddr)
	s.stop(t)
}

func TestRegistryTwoServeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dsn, endpoint := os.Getenv("STRATA_TEST_POSTGRES"), os.Getenv("STRATA_TEST_S3_ENDPOINT")
	if dsn == "" || endpoint == "" {
		testsvc.Unavailable(t, "set STRATA_TEST_POSTGRES and STRATA_TEST_S3_* (eval \"$(scripts/services.sh)\") to run against Postgres and MinIO")
	}
	catalogURL := testDatabase(t, dsn)
	bucketURL := fmt.Sprintf("s3://strata-sr-%d/e2e?endpoint=%s&path_style=true&region=%s", time.Now().UnixNano(), endpoint, os.Getenv("STRATA_TEST_S3_REGION"))
	creds := []string{
		"AWS_ACCESS_KEY_ID=" + os.Getenv("STRATA_TEST_S3_ACCESS_KEY"),
		"AWS_SECRET_ACCESS_KEY=" + os.Getenv("STRATA_TEST_S3_SECRET_KEY"),
	}
	bin := buildStrata(t)
	serve := func() (*devServer, string) {
		addr, kafkaAddr := freeAddr(t), freeAddr(t)
		s, _ := startStrata(t, bin, creds, addr, "serve", "--catalog", catalogURL, "--bucket", bucketURL,
			"--create-bucket", "--listen", addr, "--kafka-listen", kafkaAddr, "--log-level", "warn")
		return s, kafkaAddr
	}
	a, _ := serve()
	b, kb := serve()
	srRoundTrip(t, a.url, b.url)
	srOtherFormats(t, a.url, b.url, kb)
	testValidation(t, b.url, kb)
}

// testValidation: a topic validating its values refuses, over Kafka and HTTP, an
// unframed value, an unknown id, an id registered under another subject and bytes that
// do not decode — storing nothing — and stores a valid batch byte for byte.
func testValidation(t *testing.T, httpURL, kafkaAddr string) {
	ctx := t.Context()
	c := client.New(httpURL)
	if _, err := c.CreateTopic(ctx, "validated", 1, map[string]string{"confluent.value.schema.validation": "true", "value.format": "binary"}); err != nil {
		t.Fatal(err)
	}
	srcl, err := sr.NewClient(sr.URLs(httpURL))
	if err != nil {
		t.Fatal(err)
	}
	own, err := srcl.CreateSchema(ctx, "validated-value", sr.Schema{Schema: orderV1})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := srcl.CreateSchema(ctx, "elsewhere-value", sr.Schema{Schema: `"string"`})
	if err != nil {
		t.Fatal(err)
	}
	schema := avro.MustParse(orderV1)
	body, err := avro.Marshal(schema, map[string]any{"id": int64(7)})
	if err != nil {
		t.Fatal(err)
	}
	frame := func(id int, payload []byte) []byte {
		return append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, payload...)
	}
	strBody, _ := avro.Marshal(avro.MustParse(`"string"`), "x")
	valid := frame(own.ID, body)
	bad := map[string][]byte{
		"unframed":            body,
		"unknown id":          frame(99999, body),
		"another subject's":   frame(foreign.ID, strBody),
		"bytes do not decode": frame(own.ID, append(bytes.Clone(body), 1, 2, 3)),
	}

	kc, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.DefaultProduceTopic("validated"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	for name, v := range bad {
		// The bad record rides with a valid one: the whole batch is refused.
		rs := []*kgo.Record{{Value: valid}, {Value: v}}
		res := kc.ProduceSync(ctx, rs...)
		if err := res.FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("Kafka, %s: %v, want INVALID_RECORD", name, err)
		}
		resp, err := http.Post(httpURL+"/v1/topics/validated/records", "application/json",
			strings.NewReader(fmt.Sprintf(`{"records":[{"value":%q,"partition":0},{"value":%q,"partition":0}]}`,
				base64.StdEncoding.EncodeToString(valid), base64.StdEncoding.EncodeToString(v))))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p struct {
			Code   string `json:"code"`
			Record int    `json:"record"`
		}
		_ = json.Unmarshal(b, &p)
		if resp.StatusCode != 422 || p.Code != "schema_validation_failed" || p.Record != 1 {
			t.Errorf("HTTP, %s: %d %s, want 422 schema_validation_failed naming record 1", name, resp.StatusCode, b)
		}
	}
	parts, err := c.Partitions(ctx, "validated")
	if err != nil {
		t.Fatal(err)
	}
	if parts[0].HighWatermark != 0 {
		t.Fatalf("refused batches stored records: high watermark %d", parts[0].HighWatermark)
	}
	if err := kc.ProduceSync(ctx, &kgo.Record{Value: valid}, &kgo.Record{Value: valid}).FirstErr(); err != nil {
		t.Fatalf("a valid batch: %v", err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"validated": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var got [][]byte
	for len(got) < 2 && fctx.Err() == nil {
		cons.PollFetches(fctx).EachRecord(func(r *kgo.Record) { got = append(got, r.Value) })
	}
	if len(got) != 2 || !bytes.Equal(got[0], valid) || !bytes.Equal(got[1], valid) {
		t.Fatalf("the valid batch came back as %x, want %x twice", got, valid)
	}
}

// srOtherFormats: JSON Schema and Protobuf through franz-go's client — registered on a
// with a reference, served by b, evolved under BACKWARD with Confluent's answers — then
// a Protobuf topic validating its values over Kafka (b's listener), and JSON sent over
// HTTP with ?schema=latest, stored framed, read back with ?format=json.
func srOtherFormats(t *testing.T, a, b, kafkaAddr string) {
	ctx := t.Context()
	ca, err := sr.NewClient(sr.URLs(a))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := sr.NewClient(sr.URLs(b))
	if err != nil {
		t.Fatal(err)
	}
	// JSON Schema: adding an optional property to a closed content model is backward
	// compatible in Confluent's registry; changing a property's type is not.
	js1 := `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":false}`
	js2 := `{"type":"object","properties":{"id":{"type":"integer"},"note":{"type":"string"}},"required":["id"],"additionalProperties":false}`
	jsBad := `{"type":"object","properties":{"id":{"type":"string"},"note":{"type":"string"}},"required":["id"],"additionalProperties":false}`
	v1, err := ca.CreateSchema(ctx, "events-value", sr.Schema{Schema: js1, Type: sr.TypeJSON})
	if err != nil {
		t.Fatalf("register JSON Schema: %v", err)
	}
	if got, err := cb.SchemaByID(ctx, v1.ID); err != nil || got.Type != sr.TypeJSON {
		t.Fatalf("JSON Schema %d through the other node: %+v %v", v1.ID, got, err)
	}
	if _, err := ca.CreateSchema(ctx, "events-value", sr.Schema{Schema: js2, Type: sr.TypeJSON}); err != nil {
		t.Fatalf("a closed model gains an optional property: %v", err)
	}
	var re *sr.ResponseError
	if _, err := ca.CreateSchema(ctx, "events-value", sr.Schema{Schema: jsBad, Type: sr.TypeJSON}); !errors.As(err, &re) || re.ErrorCode != 409 {
		t.Fatalf("a property's type changed: %v, want 409", err)
	}
	if _, err := ca.CreateSchema(ctx, "bad-json", sr.Schema{Schema: `{"type":`, Type: sr.TypeJSON}); !errors.As(err, &re) || re.ErrorCode != 42201 {
		t.Fatalf("an unparsable JSON schema: %v, want 42201", err)
	}

	// Protobuf with a reference (an import by its name).
	line := "syntax = \"proto3\";\npackage shop;\nmessage Line { string sku = 1; int32 qty = 2; }"
	if _, err := ca.CreateSchema(ctx, "line", sr.Schema{Schema: line, Type: sr.TypeProtobuf}); err != nil {
		t.Fatalf("register line.proto: %v", err)
	}
	refs := []sr.SchemaReference{{Name: "line.proto", Subject: "line", Version: 1}}
	pb1 := "syntax = \"proto3\";\npackage shop;\nimport \"line.proto\";\nmessage Basket { int64 id = 1; repeated Line lines = 2; }"
	pb2 := "syntax = \"proto3\";\npackage shop;\nimport \"line.proto\";\nmessage Basket { int64 id = 1; repeated Line lines = 2; string note = 3; }"
	pbBad := "syntax = \"proto3\";\npackage shop;\nimport \"line.proto\";\nmessage Basket { string id = 1; repeated Line lines = 2; }"
	if _, err := cb.CreateSchema(ctx, "baskets-value", sr.Schema{Schema: pb1, Type: sr.TypeProtobuf}); !errors.As(err, &re) || re.ErrorCode != 42201 {
		t.Fatalf("an import without its reference: %v, want 42201", err)
	}
	p1, err := ca.CreateSchema(ctx, "baskets-value", sr.Schema{Schema: pb1, Type: sr.TypeProtobuf, References: refs})
	if err != nil {
		t.Fatalf("register Protobuf with a reference: %v", err)
	}
	if _, err := cb.CreateSchema(ctx, "baskets-value", sr.Schema{Schema: pb2, Type: sr.TypeProtobuf, References: refs}); err != nil {
		t.Fatalf("a Protobuf field added: %v", err)
	}
	if _, err := cb.CreateSchema(ctx, "baskets-value", sr.Schema{Schema: pbBad, Type: sr.TypeProtobuf, References: refs}); !errors.As(err, &re) || re.ErrorCode != 409 {
		t.Fatalf("int64 to string: %v, want 409", err)
	}
	if rb, err := cb.SchemaReferences(ctx, "line", 1); err != nil || len(rb) != 2 {
		t.Fatalf("referenced by: %+v %v", rb, err)
	}

	// A Protobuf topic validating values over Kafka: Basket{id: 5, lines: [{sku: "a"}]}
	// framed with message index [0] passes; bytes that do not decode are refused.
	c := client.New(b)
	if _, err := c.CreateTopic(ctx, "baskets", 1, map[string]string{"confluent.value.schema.validation": "true"}); err != nil {
		t.Fatal(err)
	}
	frame := func(id int, payload ...byte) []byte {
		return append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id), 0}, payload...)
	}
	good := frame(p1.ID, 0x08, 5, 0x12, 3, 0x0a, 1, 'a')
	kc, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.DefaultProduceTopic("baskets"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	if err := kc.ProduceSync(ctx, &kgo.Record{Value: frame(p1.ID, 0x12, 3, 0x0a, 1, 0xff)}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("a Basket whose Line.sku is not UTF-8: %v, want INVALID_RECORD", err)
	}
	if err := kc.ProduceSync(ctx, &kgo.Record{Value: good}).FirstErr(); err != nil {
		t.Fatalf("a valid Basket: %v", err)
	}

	// JSON over HTTP, encoded to the latest Protobuf schema and decoded back.
	resp, err := http.Post(b+"/v1/topics/baskets/records?schema=latest", "application/json",
		strings.NewReader(`{"records":[{"value":{"id":"6","lines":[{"sku":"b","qty":2}],"note":"hi"},"partition":0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("JSON produce with ?schema=latest: %d %s", resp.StatusCode, body)
	}
	resp, err = http.Get(b + "/v1/topics/baskets/partitions/0/records?offset=0&format=json")
	if err != nil {
		t.Fatal(err)
	}
	var fetched struct {
		Records []struct {
			Value json.RawMessage `json:"value"`
		} `json:"records"`
	}
	err = json.NewDecoder(resp.Body).Decode(&fetched)
	resp.Body.Close()
	if err != nil || len(fetched.Records) != 2 {
		t.Fatalf("fetch ?format=json: %+v %v", fetched, err)
	}
	var got []string
	for _, r := range fetched.Records {
		var compact bytes.Buffer
		_ = json.Compact(&compact, r.Value)
		got = append(got, compact.String())
	}
	if want := `[{"id":"5","lines":[{"sku":"a"}]} {"id":"6","lines":[{"sku":"b","qty":2}],"note":"hi"}]`; fmt.Sprint(got) != want {
		t.Fatalf("decoded %v, want %s", got, want)
	}
}
