package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
)

// roundTrip produces body to topic and returns the fetch of partition 0 from offset 0.
func roundTrip(t *testing.T, e *testEnv, topic, body, query string) string {
	t.Helper()
	rec := e.do("POST", "/v1/topics/"+topic+"/records", body)
	if rec.Code != 200 {
		t.Fatalf("produce: %d %s", rec.Code, rec.Body)
	}
	rec = e.do("GET", "/v1/topics/"+topic+"/partitions/0/records?offset=0"+query, "")
	if rec.Code != 200 {
		t.Fatalf("fetch: %d %s", rec.Code, rec.Body)
	}
	return strings.TrimSpace(rec.Body.String())
}

func TestEncodingRoundTrip(t *testing.T) {
	const ts = `"timestamp":1700000000000`
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	all64 := base64.StdEncoding.EncodeToString(allBytes)

	for _, tc := range []struct {
		name    string
		configs map[string]string
		body    string
		query   string
		stored  []segment.Record // key, value, headers as stored
		fetched string           // the records array as fetched
	}{
		{
			name: "json value, string key (defaults)",
			body: `{"records":[{"key":"user-1","value":{ "a" : [1, 2.50, {"b": null}], "s": "x\u00e9\n" }}]}`,
			stored: []segment.Record{{Key: []byte("user-1"),
				Value: []byte(`{ "a" : [1, 2.50, {"b": null}], "s": "x\u00e9\n" }`)}}, // exact bytes, not compacted
			fetched: `[{"offset":0,` + ts + `,"key":"user-1","value":{"a":[1,2.50,{"b":null}],"s":"x\u00e9\n"},"headers":[]}]`,
		},
		{
			name:    "json scalars",
			body:    `{"records":[{"value":"a string"},{"value":42},{"value":true},{"value":[]}]}`,
			stored:  []segment.Record{{Value: []byte(`"a string"`)}, {Value: []byte(`42`)}, {Value: []byte(`true`)}, {Value: []byte(`[]`)}},
			fetched: `[{"offset":0,` + ts + `,"key":null,"value":"a string","headers":[]},{"offset":1,` + ts + `,"key":null,"value":42,"headers":[]},{"offset":2,` + ts + `,"key":null,"value":true,"headers":[]},{"offset":3,` + ts + `,"key":null,"value":[],"headers":[]}]`,
		},
		{
			name:    "tombstone and null key",
			body:    `{"records":[{"key":"k","value":null},{"key":null,"value":1},{"key":"k"}]}`,
			stored:  []segment.Record{{Key: []byte("k")}, {Value: []byte("1")}, {Key: []byte("k")}},
			fetched: `[{"offset":0,` + ts + `,"key":"k","value":null,"headers":[]},{"offset":1,` + ts + `,"key":null,"value":1,"headers":[]},{"offset":2,` + ts + `,"key":"k","value":null,"headers":[]}]`,
		},
		{
			name:    "string formats with escapes, json key",
			configs: map[string]string{"key.format": "json", "value.format": "string"},
			body:    `{"records":[{"key":{"id":7},"value":"line1\nline2 \"q\" \u00e9 \ud83d\ude00 \u0001"},{"key":"s","value":""}]}`,
			stored:  []segment.Record{{Key: []byte(`{"id":7}`), Value: []byte("line1\nline2 \"q\" é 😀 \x01")}, {Key: []byte(`"s"`), Value: []byte{}}},
			fetched: `[{"offset":0,` + ts + `,"key":{"id":7},"value":"line1\nline2 \"q\" é 😀 \u0001","headers":[]},{"offset":1,` + ts + `,"key":"s","value":"","headers":[]}]`,
		},
		{
			name:    "binary",
			configs: map[string]string{"key.format": "binary", "value.format": "binary"},
			body:    `{"records":[{"key":"AAEC/w==","value":"` + all64 + `"},{"key":"","value":null}]}`,
			stored:  []segment.Record{{Key: []byte{0, 1, 2, 255}, Value: allBytes}, {Key: []byte{}}},
			fetched: `[{"offset":0,` + ts + `,"key":"AAEC/w==","value":"` + all64 + `","headers":[]},{"offset":1,` + ts + `,"key":"","value":null,"headers":[]}]`,
		},
		{
			name:    "format=base64 shows stored bytes",
			body:    `{"records":[{"key":"user-1","value":{"a": 1},"headers":{"h":"v","n":null}}]}`,
			query:   "&format=base64",
			stored:  []segment.Record{{Key: []byte("user-1"), Value: []byte(`{"a": 1}`), Headers: []segment.Header{{Key: "h", Value: []byte("v")}, {Key: "n"}}}},
			fetched: `[{"offset":0,` + ts + `,"key":"dXNlci0x","value":"eyJhIjogMX0=","headers":[{"key":"h","value":"dg=="},{"key":"n","value":null}]}]`,
		},
		{
			name: "headers: array keeps order and repeats, object keeps document order",
			body: `{"records":[{"value":1,"headers":[{"key":"h1","value":"v1"},{"key":"h1","value":null},{"key":"h2","value":"é\"\\"},{"key":"h3"}]},` +
				`{"value":2,"headers":{"z":"1","a":"2","m":null}},{"value":3,"headers":[]},{"value":4,"headers":{}}]}`,
			stored: []segment.Record{
				{Value: []byte("1"), Headers: []segment.Header{{Key: "h1", Value: []byte("v1")}, {Key: "h1"}, {Key: "h2", Value: []byte("é\"\\")}, {Key: "h3"}}},
				{Value: []byte("2"), Headers: []segment.Header{{Key: "z", Value: []byte("1")}, {Key: "a", Value: []byte("2")}, {Key: "m"}}},
				{Value: []byte("3"), Headers: []segment.Header{}},
				{Value: []byte("4")},
			},
			fetched: `[{"offset":0,` + ts + `,"key":null,"value":1,"headers":[{"key":"h1","value":"v1"},{"key":"h1","value":null},{"key":"h2","value":"é\"\\"},{"key":"h3","value":null}]},` +
				`{"offset":1,` + ts + `,"key":null,"value":2,"headers":[{"key":"z","value":"1"},{"key":"a","value":"2"},{"key":"m","value":null}]},` +
				`{"offset":2,` + ts + `,"key":null,"value":3,"headers":[]},{"offset":3,` + ts + `,"key":null,"value":4,"headers":[]}]`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.createTopic("t", 1, tc.configs)
			got := roundTrip(t, e, "t", tc.body, tc.query)
			want := `{"records":` + tc.fetched + `,"next_offset":` + strconv.Itoa(len(tc.stored)) + `,"high_watermark":` + strconv.Itoa(len(tc.stored)) + `,"last_stable_offset":` + strconv.Itoa(len(tc.stored)) + `,"log_start_offset":0}`
			if got != want {
				t.Errorf("fetched\n got %s\nwant %s", got, want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("fetch response is not valid JSON")
			}
			if len(e.c.produced) != len(tc.stored) {
				t.Fatalf("stored %d records, want %d", len(e.c.produced), len(tc.stored))
			}
			for i, r := range e.c.produced {
				w := tc.stored[i]
				if !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) {
					t.Errorf("record %d key %q, want %q", i, r.Key, w.Key)
				}
				if !bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) {
					t.Errorf("record %d value %q, want %q", i, r.Value, w.Value)
				}
				if len(r.Headers) != len(w.Headers) {
					t.Errorf("record %d headers %q, want %q", i, r.Headers, w.Headers)
					continue
				}
				for j := range r.Headers {
					if r.Headers[j].Key != w.Headers[j].Key || !bytes.Equal(r.Headers[j].Value, w.Headers[j].Value) ||
						(r.Headers[j].Value == nil) != (w.Headers[j].Value == nil) {
						t.Errorf("record %d header %d %q, want %q", i, j, r.Headers[j], w.Headers[j])
					}
				}
			}
		})
	}
}

// Bytes written by other clients that do not fit the topic's format are shown as base64
// and flagged, never altered.
func TestRenderFallback(t *testing.T) {
	e := newEnv(t, Config{})
	e.createTopic("js", 1, nil) // key string, value json
	e.c.appendRaw("js", 0,
		segment.DecodedRecord{Key: []byte{0xff}, Value: []byte(`{bad`)},
		segment.DecodedRecord{Value: []byte(`null`)},
		segment.DecodedRecord{Value: []byte{}, Headers: []segment.Header{{Key: "k\xff", Value: []byte{0xfe}}}},
		segment.DecodedRecord{Value: []byte("\"\xff\"")},
		segment.DecodedRecord{Value: []byte(" [1,\n 2] ")},
	)
	rec := e.do("GET", "/v1/topics/js/partitions/0/records?offset=0", "")
	want := `{"records":[` +
		`{"offset":0,"timestamp":0,"key":"/w==","key_encoding":"base64","value":"e2JhZA==","value_encoding":"base64","headers":[]},` +
		`{"offset":1,"timestamp":0,"key":null,"value":"bnVsbA==","value_encoding":"base64","headers":[]},` +
		`{"offset":2,"timestamp":0,"key":null,"value":"","value_encoding":"base64","headers":[{"key":"k` + "\uFFFD" + `","value":"/g==","encoding":"base64"}]},` +
		`{"offset":3,"timestamp":0,"key":null,"value":"Iv8i","value_encoding":"base64","headers":[]},` +
		`{"offset":4,"timestamp":0,"key":null,"value":[1,2],"headers":[]}` +
		`],"next_offset":5,"high_watermark":5,"last_stable_offset":5,"log_start_offset":0}`
	if got := strings.TrimSpace(rec.Body.String()); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !json.Valid(rec.Body.Bytes()) {
		t.Error("invalid JSON")
	}
}

func TestDecodeField(t *testing.T) {
	for _, tc := range []struct {
		raw, format string
		want        []byte // nil: null
		bad         bool
	}{
		{`null`, "json", nil, false},
		{``, "string", nil, false},
		{`{"a": 1}`, "json", []byte(`{"a": 1}`), false},
		{`"x"`, "json", []byte(`"x"`), false},
		{`"x"`, "string", []byte("x"), false},
		{`""`, "string", []byte{}, false},
		{`"a\tb\u0041"`, "string", []byte("a\tbA"), false},
		{`"\ud800"`, "string", []byte("\uFFFD"), false}, // a lone surrogate becomes U+FFFD
		{`5`, "string", nil, true},
		{`["x"]`, "string", nil, true},
		{`"aGVsbG8="`, "binary", []byte("hello"), false},
		{`""`, "binary", []byte{}, false},
		{`"aGVsbG8"`, "binary", nil, true},   // unpadded
		{`"aGVsbG9="`, "binary", nil, true},  // non-zero padding bits (Strict)
		{`"aGVs bG8="`, "binary", nil, true}, // space
		{`"aGVs\nbG8="`, "binary", nil, true},
		{`"aGVs\/bG8="`, "binary", nil, true}, // escaped slash is still a slash: length wrong
		{`"+/+/"`, "binary", []byte{0xfb, 0xff, 0xbf}, false},
		{`true`, "binary", nil, true},
	} {
		got, reason := decodeField(json.RawMessage(tc.raw), tc.format)
		if tc.bad {
			if reason == "" {
				t.Errorf("%s as %s: accepted %q", tc.raw, tc.format, got)
			}
			continue
		}
		if reason != "" || !bytes.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s as %s: %q %q, want %q", tc.raw, tc.format, got, reason, tc.want)
		}
	}
}

func TestAppendString(t *testing.T) {
	for in, want := range map[string]string{
		"":               `""`,
		"plain":          `"plain"`,
		"q\"b\\":         `"q\"b\\"`,
		"\n\r\t\x00\x1f": `"\n\r\t\u0000\u001f"`,
		"é😀<>&\u2028":    "\"é😀<>&\u2028\"",
	} {
		got := string(appendString(nil, in))
		if got != want {
			t.Errorf("appendString(%q) = %s, want %s", in, got, want)
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil || back != in {
			t.Errorf("%s does not decode back to %q: %q %v", got, in, back, err)
		}
	}
}

// encodeProduceBody writes records back as a produce body, rendering keys and values by
// the topic's formats as a fetch would.
func encodeProduceBody(t testing.TB, recs []broker.Record, cfg catalog.Config) []byte {
	var scratch bytes.Buffer
	out := []byte(`{"records":[`)
	for i, r := range recs {
		if i > 0 {
			out = append(out, ',')
		}
		var fb1, fb2 bool
		out = append(out, `{"key":`...)
		out, fb1 = appendField(out, r.Key, cfg.KeyFormat, false, &scratch)
		out = append(out, `,"value":`...)
		out, fb2 = appendField(out, r.Value, cfg.ValueFormat, false, &scratch)
		if fb1 || fb2 {
			t.Fatalf("record %d parsed from JSON cannot be rendered: key %q value %q", i, r.Key, r.Value)
		}
		out = append(out, `,"headers":[`...)
		for j, h := range r.Headers {
			if j > 0 {
				out = append(out, ',')
			}
			out = append(out, `{"key":`...)
			out = appendString(out, h.Key)
			out = append(out, `,"value":`...)
			var fb bool
			if out, fb = appendField(out, h.Value, formatString, false, &scratch); fb {
				t.Fatalf("record %d header %d cannot be rendered: %q", i, j, h.Value)
			}
			out = append(out, '}')
		}
		out = append(out, ']')
		if r.Timestamp >= 0 {
			out = append(out, `,"timestamp":`...)
			out = strconv.AppendInt(out, r.Timestamp, 10)
		}
		if r.Partition >= 0 {
			out = append(out, `,"partition":`...)
			out = strconv.AppendInt(out, int64(r.Partition), 10)
		}
		out = append(out, '}')
	}
	return append(out, "]}"...)
}

func sameField(a, b []byte, format string) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	if format == formatJSON && a != nil {
		var ca, cb bytes.Buffer
		if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
			return false
		}
		return bytes.Equal(ca.Bytes(), cb.Bytes())
	}
	return bytes.Equal(a, b)
}

var fuzzFormats = []string{formatJSON, formatString, formatBinary}

// FuzzProduceParse: parsing a produce body never panics, and a body that parses
// re-encodes to a body that parses to the same records.
func FuzzProduceParse(f *testing.F) {
	for _, seed := range []string{
		`{"records":[{"key":"user-1","value":{"a":[1,2.5,null]},"headers":[{"key":"h","value":"v"},{"key":"n","value":null}],"partition":1,"timestamp":1700000000000}]}`,
		`{"records":[{"key":null,"value":null,"headers":{"a":"1","b":null},"timestamp":"2023-11-14T22:13:20Z"}]}`,
		`{"records":[{"key":"AAEC","value":"aGVsbG8="},{"value":"\u00e9\n\"x\""}]}`,
		`{"records":[{"value":1}]} trailing`,
		`{"records":[{"value":"\ud800"}],"x":1}`,
		`{"records":[]}`,
		"{\"records\":[{\"value\":\"\xff\"}]}",
		`[`,
	} {
		for k := range fuzzFormats {
			f.Add([]byte(seed), uint8(k), uint8(k))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, keyFmt, valueFmt uint8) {
		cfg := catalog.DefaultConfig()
		cfg.KeyFormat = fuzzFormats[int(keyFmt)%len(fuzzFormats)]
		cfg.ValueFormat = fuzzFormats[int(valueFmt)%len(fuzzFormats)]
		req, p := decodeProduce(body, 1000)
		if p != nil {
			if codeIndex[p.code].Status != 400 {
				t.Fatalf("parse answered %s (%d)", p.code, codeIndex[p.code].Status)
			}
			return
		}
		recs, p := decodeRecords(&req, &cfg)
		if p != nil {
			if s := codeIndex[p.code].Status; s >= 500 {
				t.Fatalf("build answered %s (%d)", p.code, s)
			}
			return
		}
		body2 := encodeProduceBody(t, recs, cfg)
		req2, p := decodeProduce(body2, 1000)
		if p != nil {
			t.Fatalf("re-encoded body %s does not parse: %v", body2, p)
		}
		recs2, p := decodeRecords(&req2, &cfg)
		if p != nil {
			t.Fatalf("re-encoded body %s does not build: %v", body2, p)
		}
		if len(recs) != len(recs2) {
			t.Fatalf("%d records became %d", len(recs), len(recs2))
		}
		for i := range recs {
			a, b := recs[i], recs2[i]
			if a.Partition != b.Partition || a.Timestamp != b.Timestamp || a.Topic != b.Topic {
				t.Fatalf("record %d: %+v became %+v", i, a, b)
			}
			if !sameField(a.Key, b.Key, cfg.KeyFormat) || !sameField(a.Value, b.Value, cfg.ValueFormat) {
				t.Fatalf("record %d: key %q value %q became key %q value %q", i, a.Key, a.Value, b.Key, b.Value)
			}
			if len(a.Headers) != len(b.Headers) {
				t.Fatalf("record %d: headers %q became %q", i, a.Headers, b.Headers)
			}
			for j := range a.Headers {
				if a.Headers[j].Key != b.Headers[j].Key || !sameField(a.Headers[j].Value, b.Headers[j].Value, formatString) {
					t.Fatalf("record %d header %d: %q became %q", i, j, a.Headers[j], b.Headers[j])
				}
			}
		}
	})
}

// benchProduceBody is a 500-record produce body of 1 KiB JSON values, the shape the
// decode figure of docs/design.md is measured on.
func benchProduceBody(b *testing.B) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"records":[`)
	for i := 0; i < 500; i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		v := fmt.Sprintf(`{"id":%d,"user":"user-%d","amount":%d.25,"tags":["a","b","c"],"note":"`, i, i%97, i)
		v += strings.Repeat("x", 1024-len(v)-2) + `"}`
		fmt.Fprintf(&buf, `{"key":"user-%d","value":%s}`, i%97, v)
	}
	buf.WriteString(`]}`)
	body := buf.Bytes()
	var probe produceRequest
	if err := json.Unmarshal(body, &probe); err != nil || len(probe.Records) != 500 || len(probe.Records[7].Value) != 1024 {
		b.Fatalf("bench body: %v", err)
	}
	return body
}

// BenchmarkDecodeProduce measures the produce hot path's parse: body to writer records.
func BenchmarkDecodeProduce(b *testing.B) {
	body := benchProduceBody(b)
	cfg := catalog.DefaultConfig()
	// Baselines in the same run, since absolute figures drift with the machine's load:
	// one encoding/json validation pass, and a lax Unmarshal into the same struct.
	b.Run("baseline-json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("baseline-json.Unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var req produceRequest
			if err := json.Unmarshal(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, p := decodeProduce(body, DefaultMaxRecordsPerRequest); p != nil {
				b.Fatal(p)
			}
		}
	})
	b.Run("decode+records", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			req, p := decodeProduce(body, DefaultMaxRecordsPerRequest)
			if p != nil {
				b.Fatal(p)
			}
			if _, p := decodeRecords(&req, &cfg); p != nil {
				b.Fatal(p)
			}
		}
	})
}

// BenchmarkRenderFetch measures rendering 500 fetched 1 KiB JSON records.
func BenchmarkRenderFetch(b *testing.B) {
	body := benchProduceBody(b)
	req, _ := decodeProduce(body, DefaultMaxRecordsPerRequest)
	cfg := catalog.DefaultConfig()
	recs, _ := decodeRecords(&req, &cfg)
	res := fetchResultOf(recs)
	o := newRenderOpts(cfg, false)
	out := appendFetchResult(nil, &res, o)
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		out = appendFetchResult(out[:0], &res, o)
	}
}

// decodeRecords decodes every record of a produce body as the produce handlers do.
func decodeRecords(req *produceRequest, cfg *catalog.Config) ([]broker.Record, *problem) {
	out := make([]broker.Record, len(req.Records))
	for i := range req.Records {
		if p := decodeRecord(i, &req.Records[i], cfg, &out[i]); p != nil {
			return nil, p
		}
	}
	return out, nil
}

func fetchResultOf(recs []broker.Record) reader.Result {
	res := reader.Result{NextOffset: int64(len(recs)), HighWatermark: int64(len(recs))}
	for i, r := range recs {
		res.Records = append(res.Records, segment.DecodedRecord{Offset: int64(i), Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: r.Headers})
	}
	return res
}
