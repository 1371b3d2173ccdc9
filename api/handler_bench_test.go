package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/cputime"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/security"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// BenchmarkHandler sends HTTP requests through the whole API handler and the broker core
// to stub roles, so that it measures the front end and the core and nothing of the store
// or the catalog: 500 records of 1 KiB per produce or fetch. cpu-ns/op is this
// process's CPU per request, which holds on a shared machine where ns/op does not.
//
//	go test ./api -run '^$' -bench '^BenchmarkHandler$' -benchtime 300x -count 8

type stubCat struct{ t catalog.Topic }

func (c *stubCat) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error) {
	return c.t, nil
}
func (c *stubCat) Topic(ctx context.Context, name string) (catalog.Topic, error)  { return c.t, nil }
func (c *stubCat) TopicByID(ctx context.Context, id int64) (catalog.Topic, error) { return c.t, nil }
func (c *stubCat) Topics(ctx context.Context) ([]catalog.Topic, error) {
	return []catalog.Topic{c.t}, nil
}
func (c *stubCat) DeleteTopic(ctx context.Context, name string) error { return nil }
func (c *stubCat) UpdateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error) {
	return c.t, nil
}
func (c *stubCat) Partitions(ctx context.Context, topicID int64) ([]catalog.PartitionInfo, error) {
	return []catalog.PartitionInfo{{TopicID: 1, Partition: 0, HighWatermark: 1 << 40}}, nil
}
func (c *stubCat) OffsetForTime(ctx context.Context, topicID int64, partition int32, ts int64) (int64, error) {
	return 0, nil
}

type stubWriter struct{}

func (stubWriter) Produce(ctx context.Context, req writer.Request) (writer.Response, error) {
	n, part := len(req.Records), int32(0)
	if req.Raw != nil {
		part = req.Raw.Partition
		for _, s := range req.Raw.Summaries {
			n += int(s.Header.NumRecords)
		}
	}
	resp := writer.Response{Records: make([]writer.RecordResult, n)}
	for i := range resp.Records {
		resp.Records[i] = writer.RecordResult{Partition: part, Offset: int64(i)}
	}
	return resp, nil
}

type stubReader struct {
	res reader.Result
	raw reader.SharedRawResult
}

func (r *stubReader) Fetch(ctx context.Context, f reader.Fetch) (reader.Result, error) {
	return r.res, nil
}
func (r *stubReader) FetchRawShared(ctx context.Context, f reader.Fetch) (reader.SharedRawResult, error) {
	return r.raw, nil
}

func records(n, size int) []segment.Record {
	out := make([]segment.Record, n)
	for i := range out {
		v := fmt.Sprintf(`{"id":%d,"user":"user-%d","note":"`, i, i%97)
		v += strings.Repeat("x", size-len(v)-2) + `"}`
		out[i] = segment.Record{Key: []byte(fmt.Sprintf("user-%d", i%97)), Value: []byte(v), Timestamp: time.Now().UnixMilli()}
	}
	return out
}

func jsonBody(recs []segment.Record) []byte {
	var b bytes.Buffer
	b.WriteString(`{"records":[`)
	for i, r := range recs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"key":%q,"value":%s}`, r.Key, r.Value)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func batchBody(b *testing.B, recs []segment.Record) []byte {
	var section []byte
	first := recs[0].Timestamp
	maxTs := first
	for i, r := range recs {
		maxTs = max(maxTs, r.Timestamp)
		kr := kmsg.Record{TimestampDelta64: r.Timestamp - first, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		section = kr.AppendTo(section)
	}
	kb := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: first, MaxTimestamp: maxTs, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(recs)), Records: section}
	raw := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func run(b *testing.B, h http.Handler, mk func() *http.Request) {
	b.ReportAllocs()
	cpu0 := cputime.Self()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, mk())
		if rec.Code != 200 {
			b.Fatalf("HTTP %d %s", rec.Code, rec.Body.String()[:min(200, rec.Body.Len())])
		}
	}
	b.ReportMetric(float64((cputime.Self()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func handler(cat *stubCat, w stubWriter, rd *stubReader) http.Handler {
	core := broker.New(broker.Config{}, broker.Deps{Catalog: cat, Writer: w, Reader: rd, Batches: rd})
	return api.New(api.Config{}, api.Deps{Core: core}).Handler()
}

// stubSecurity is a catalog of one key (benchKey, for User:app) and the ACLs given.
type stubSecurity struct{ acls []acl.Binding }

const benchKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func (s *stubSecurity) Keys(context.Context) ([]catalog.APIKey, error) {
	return []catalog.APIKey{{ID: "key-app", Principal: "User:app", Digest: sha256.Sum256([]byte(benchKey))}}, nil
}
func (s *stubSecurity) ACLs(context.Context) ([]acl.Binding, error) { return s.acls, nil }
func (s *stubSecurity) SecurityVersion(context.Context) (int64, time.Time, error) {
	return 1, time.Now(), nil
}
func (s *stubSecurity) WatchSecurity(ctx context.Context, fn func()) error { <-ctx.Done(); return nil }

// securedHandler is handler with authentication: a catalog key for User:app, allowed by
// a prefixed binding among 200 others (other principals, literal and prefixed), so
// every request is authenticated, authorized and its access logged (at sample, to a
// JSON log that discards).
func securedHandler(b *testing.B, cat *stubCat, w stubWriter, rd *stubReader, sample float64) http.Handler {
	bs := []acl.Binding{{Principal: "User:app", Host: "*", Resource: acl.TypeTopic, Name: "t", Pattern: acl.PatternPrefixed, Operation: acl.OpAll, Permission: acl.PermissionAllow}}
	for i := range 200 {
		pat := acl.PatternLiteral
		if i%2 == 0 {
			pat = acl.PatternPrefixed
		}
		bs = append(bs, acl.Binding{Principal: fmt.Sprintf("User:u%d", i), Host: "*", Resource: acl.TypeTopic, Name: fmt.Sprintf("t%d", i), Pattern: pat, Operation: acl.OpRead, Permission: acl.PermissionAllow})
	}
	g := security.New(security.Config{Required: true}, &stubSecurity{acls: bs})
	if err := g.Refresh(b.Context()); err != nil {
		b.Fatal(err)
	}
	core := broker.New(broker.Config{}, broker.Deps{Catalog: cat, Writer: w, Reader: rd, Batches: rd, Authorizer: g})
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	return api.New(api.Config{Auth: api.AuthConfig{Authenticator: g}, AccessLogSample: sample}, api.Deps{Core: core, Log: log}).Handler()
}

// fixture is the benchmarks' topic, reader and bodies: 500 records of 1 KiB as JSON
// and as one record batch.
func fixture(b *testing.B) (*stubCat, *stubReader, []byte, []byte) {
	recs := records(500, 1024)
	body := jsonBody(recs)
	bb := batchBody(b, recs)
	rd := &stubReader{}
	for i, r := range recs {
		rd.res.Records = append(rd.res.Records, segment.DecodedRecord{Offset: int64(i), Timestamp: r.Timestamp, Key: r.Key, Value: r.Value})
	}
	rd.res.NextOffset, rd.res.HighWatermark = 500, 1<<40
	rd.raw.Batches, rd.raw.BaseOffsets = [][]byte{bb}, []int64{0}
	rd.raw.NextOffset, rd.raw.HighWatermark = 500, 1<<40
	cat := &stubCat{t: catalog.Topic{ID: 1, Name: "t", Partitions: 8}}
	return cat, rd, body, bb
}

func BenchmarkHandler(b *testing.B) {
	cat, rd, body, bb := fixture(b)
	benchRoutes(b, handler(cat, stubWriter{}, rd), body, bb, "")
}

// BenchmarkHandlerSecured is BenchmarkHandler with authentication and ACLs, without
// and with a line per request in the access log; run beside it, the ratio of
// cpu-ns/op is the price of security on each path:
//
//	go test ./api -run '^$' -bench '^BenchmarkHandler(Secured)?$' -benchtime 300x -count 8
func BenchmarkHandlerSecured(b *testing.B) {
	cat, rd, body, bb := fixture(b)
	b.Run("acls", func(b *testing.B) { benchRoutes(b, securedHandler(b, cat, stubWriter{}, rd, 0), body, bb, benchKey) })
	b.Run("acls+access-log", func(b *testing.B) { benchRoutes(b, securedHandler(b, cat, stubWriter{}, rd, 1), body, bb, benchKey) })
}

// benchRoutes runs the four paths through h, with key as the bearer token ("": none).
func benchRoutes(b *testing.B, h http.Handler, body, bb []byte, key string) {
	auth := func(r *http.Request) *http.Request {
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		return r
	}
	b.Run("produce-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		run(b, h, func() *http.Request {
			r := httptest.NewRequest("POST", "/v1/topics/t/records", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			return auth(r)
		})
	})
	b.Run("produce-binary", func(b *testing.B) {
		b.SetBytes(int64(len(bb)))
		run(b, h, func() *http.Request {
			r := httptest.NewRequest("POST", "/v1/topics/t/records?partition=1", bytes.NewReader(bb))
			r.Header.Set("Content-Type", "application/vnd.kafka.record-batch")
			return auth(r)
		})
	})
	b.Run("fetch-json", func(b *testing.B) {
		run(b, h, func() *http.Request {
			return auth(httptest.NewRequest("GET", "/v1/topics/t/partitions/0/records?offset=0", nil))
		})
	})
	b.Run("fetch-binary", func(b *testing.B) {
		run(b, h, func() *http.Request {
			r := httptest.NewRequest("GET", "/v1/topics/t/partitions/0/records?offset=0", nil)
			r.Header.Set("Accept", "application/vnd.kafka.record-batch")
			return auth(r)
		})
	})
}

func (s *stubSecurity) ScramCredentials(context.Context) ([]catalog.ScramCredential, error) {
	return nil, nil
}
