package connect

import (
	"encoding/json"
	"strings"
	"testing"
)

// chainOf builds a chain from a connector config.
func chainOf(t *testing.T, kv ...string) chain {
	t.Helper()
	cfg := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		cfg[kv[i]] = kv[i+1]
	}
	c, err := buildChain(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func decode(t *testing.T, s string) any {
	t.Helper()
	if s == "" {
		return nil
	}
	v, err := jsonConverter{}.ToConnect([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func encode(v any) string {
	b, err := jsonConverter{}.FromConnect(v)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(b)
}

// TestTransforms: each built-in transform on known records, with known answers.
func TestTransforms(t *testing.T) {
	rec := func(t *testing.T, key, value string) Record {
		return Record{Topic: "orders", Partition: 3, Offset: 42, Timestamp: 1700000000123, Key: decode(t, key), Value: decode(t, value),
			Headers: []Header{{Key: "h", Value: []byte("v")}}}
	}
	for _, tc := range []struct {
		name       string
		cfg        []string
		key, value string
		wantTopic  string
		wantKey    string
		wantValue  string
		dropped    bool
		err        string
	}{
		{name: "InsertField$Value",
			cfg: []string{"transforms", "i", "transforms.i.type", "org.apache.kafka.connect.transforms.InsertField$Value",
				"transforms.i.topic.field", "t", "transforms.i.partition.field", "p", "transforms.i.offset.field", "o!",
				"transforms.i.timestamp.field", "ts", "transforms.i.static.field", "s", "transforms.i.static.value", "v"},
			value: `{"a":1}`, wantValue: `{"a":1,"o":42,"p":3,"s":"v","t":"orders","ts":1700000000123}`},
		{name: "InsertField$Value passes a tombstone", cfg: []string{"transforms", "i", "transforms.i.type", "InsertField$Value", "transforms.i.topic.field", "t"},
			wantValue: ""},
		{name: "InsertField$Value on a string", cfg: []string{"transforms", "i", "transforms.i.type", "InsertField$Value", "transforms.i.topic.field", "t"},
			value: `"x"`, err: "Only Map objects supported in absence of schema for [field insertion], found: java.lang.String"},
		{name: "ReplaceField$Value",
			cfg:   []string{"transforms", "r", "transforms.r.type", "ReplaceField$Value", "transforms.r.exclude", "b", "transforms.r.renames", "a:x,c:y"},
			value: `{"a":1,"b":2,"c":3,"d":4}`, wantValue: `{"d":4,"x":1,"y":3}`},
		{name: "ReplaceField$Key include",
			cfg: []string{"transforms", "r", "transforms.r.type", "ReplaceField$Key", "transforms.r.include", "a,c"},
			key: `{"a":1,"b":2,"c":3}`, wantKey: `{"a":1,"c":3}`, value: `1`, wantValue: `1`},
		{name: "MaskField$Value",
			cfg:   []string{"transforms", "m", "transforms.m.type", "MaskField$Value", "transforms.m.fields", "s,n,b,o,l,missing"},
			value: `{"s":"secret","n":12.5,"b":true,"o":{"x":1},"l":[1],"k":"keep"}`, wantValue: `{"b":false,"k":"keep","l":[],"n":0,"o":{},"s":""}`},
		{name: "MaskField$Value replacement",
			cfg:   []string{"transforms", "m", "transforms.m.type", "MaskField$Value", "transforms.m.fields", "s", "transforms.m.replacement", "****"},
			value: `{"s":"secret"}`, wantValue: `{"s":"****"}`},
		{name: "ValueToKey",
			cfg:   []string{"transforms", "k", "transforms.k.type", "ValueToKey", "transforms.k.fields", "id,region"},
			value: `{"id":7,"region":"eu","x":1}`, wantKey: `{"id":7,"region":"eu"}`, wantValue: `{"id":7,"region":"eu","x":1}`},
		{name: "ExtractField$Key",
			cfg: []string{"transforms", "e", "transforms.e.type", "ExtractField$Key", "transforms.e.field", "id"},
			key: `{"id":7}`, wantKey: `7`, value: `1`, wantValue: `1`},
		{name: "HoistField$Value",
			cfg:   []string{"transforms", "h", "transforms.h.type", "HoistField$Value", "transforms.h.field", "line"},
			value: `"text"`, wantValue: `{"line":"text"}`},
		{name: "Cast$Value fields",
			cfg:   []string{"transforms", "c", "transforms.c.type", "Cast$Value", "transforms.c.spec", "a:int32,b:string,c:boolean,d:float64,e:int8"},
			value: `{"a":"12","b":3.5,"c":1,"d":"2.25","e":300}`, wantValue: `{"a":12,"b":"3.5","c":true,"d":2.25,"e":44}`},
		{name: "Cast$Value whole", cfg: []string{"transforms", "c", "transforms.c.type", "Cast$Value", "transforms.c.spec", "int64"},
			value: `"9007199254740993"`, wantValue: `9007199254740993`},
		{name: "Cast$Value of a word", cfg: []string{"transforms", "c", "transforms.c.type", "Cast$Value", "transforms.c.spec", "int32"},
			value: `"twelve"`, err: `cannot cast a string that is not a number to int32`},
		{name: "RegexRouter",
			cfg:   []string{"transforms", "r", "transforms.r.type", "RegexRouter", "transforms.r.regex", "(.*)ers", "transforms.r.replacement", "$1-routed"},
			value: `1`, wantValue: `1`, wantTopic: "ord-routed"},
		{name: "RegexRouter needs a whole match",
			cfg:   []string{"transforms", "r", "transforms.r.type", "RegexRouter", "transforms.r.regex", "ord", "transforms.r.replacement", "x"},
			value: `1`, wantValue: `1`, wantTopic: "orders"},
		{name: "TimestampRouter",
			cfg:   []string{"transforms", "r", "transforms.r.type", "TimestampRouter", "transforms.r.timestamp.format", "yyyy.MM.dd-HH"},
			value: `1`, wantValue: `1`, wantTopic: "orders-2023.11.14-22"},
		{name: "Filter", cfg: []string{"transforms", "f", "transforms.f.type", "Filter"}, value: `1`, dropped: true},
		{name: "Filter with a predicate that does not match",
			cfg: []string{"transforms", "f", "transforms.f.type", "Filter", "transforms.f.predicate", "p",
				"predicates", "p", "predicates.p.type", "TopicNameMatches", "predicates.p.pattern", "pay.*"},
			value: `1`, wantValue: `1`, wantTopic: "orders"},
		{name: "Filter with a predicate that matches",
			cfg: []string{"transforms", "f", "transforms.f.type", "Filter", "transforms.f.predicate", "p",
				"predicates", "p", "predicates.p.type", "org.apache.kafka.connect.transforms.predicates.TopicNameMatches", "predicates.p.pattern", "ord.*"},
			value: `1`, dropped: true},
		{name: "Filter negated: drop what lacks a header",
			cfg: []string{"transforms", "f", "transforms.f.type", "Filter", "transforms.f.predicate", "p", "transforms.f.negate", "true",
				"predicates", "p", "predicates.p.type", "HasHeaderKey", "predicates.p.name", "h"},
			value: `1`, wantValue: `1`, wantTopic: "orders"},
		{name: "Filter tombstones",
			cfg: []string{"transforms", "f", "transforms.f.type", "Filter", "transforms.f.predicate", "p",
				"predicates", "p", "predicates.p.type", "RecordIsTombstone"},
			dropped: true},
		{name: "a chain, in order",
			cfg: []string{"transforms", "h,i", "transforms.h.type", "HoistField$Value", "transforms.h.field", "v",
				"transforms.i.type", "InsertField$Value", "transforms.i.static.field", "src", "transforms.i.static.value", "file"},
			value: `5`, wantValue: `{"src":"file","v":5}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := chainOf(t, tc.cfg...)
			out, err := c.apply(rec(t, tc.key, tc.value))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.dropped {
				if out != nil {
					t.Fatalf("kept %+v", out)
				}
				return
			}
			if out == nil {
				t.Fatal("dropped")
			}
			if got := encode(out.Value); got != tc.wantValue {
				t.Errorf("value %s, want %s", got, tc.wantValue)
			}
			if tc.wantKey != "" {
				if got := encode(out.Key); got != tc.wantKey {
					t.Errorf("key %s, want %s", got, tc.wantKey)
				}
			}
			if tc.wantTopic != "" && out.Topic != tc.wantTopic {
				t.Errorf("topic %s, want %s", out.Topic, tc.wantTopic)
			}
		})
	}
}

// A transform never changes the record it was handed (a dead letter needs it).
func TestTransformsCopy(t *testing.T) {
	c := chainOf(t, "transforms", "r,m", "transforms.r.type", "ReplaceField$Value", "transforms.r.renames", "a:b",
		"transforms.m.type", "MaskField$Value", "transforms.m.fields", "b")
	v := map[string]any{"a": "x"}
	if _, err := c.apply(Record{Value: v}); err != nil {
		t.Fatal(err)
	}
	if v["a"] != "x" || len(v) != 1 {
		t.Fatalf("the input changed: %v", v)
	}
}

func TestTransformConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  []string
		want string
	}{
		{[]string{"transforms", "x", "transforms.x.type", "InsertField"}, "use InsertField$Key or InsertField$Value"},
		{[]string{"transforms", "x", "transforms.x.type", "Filter$Value"}, "has no $Key or $Value variant"},
		{[]string{"transforms", "x", "transforms.x.type", "Cast$Value", "transforms.x.spec", "a:int32,int64"}, "not both"},
		{[]string{"transforms", "x", "transforms.x.type", "RegexRouter", "transforms.x.regex", "(", "transforms.x.replacement", "y"}, "invalid regular expression"},
		{[]string{"transforms", "x", "transforms.x.type", "Filter", "transforms.x.predicate", "nope"}, "not listed in predicates"},
		{[]string{"transforms", "x", "transforms.x.type", "InsertField$Value"}, "set at least one of"},
	} {
		cfg := map[string]string{}
		for i := 0; i+1 < len(tc.cfg); i += 2 {
			cfg[tc.cfg[i]] = tc.cfg[i+1]
		}
		if _, err := buildChain(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// TestConverters: known bytes for known values, both ways.
func TestConverters(t *testing.T) {
	v := map[string]any{"b": json.Number("1.50"), "a": "<x>"}
	for _, tc := range []struct {
		name string
		c    Converter
		in   any
		want string
	}{
		{"json", jsonConverter{}, v, `{"a":"<x>","b":1.50}`},
		{"json with schemas", jsonConverter{schemas: true}, v, `{"payload":{"a":"<x>","b":1.50},"schema":null}`},
		{"json bytes", jsonConverter{}, []byte("hi"), `"aGk="`},
		{"string", stringConverter{}, "héllo", "héllo"},
		{"string of a number", stringConverter{}, json.Number("12"), "12"},
		{"string of a map", stringConverter{}, v, `{"a":"<x>","b":1.50}`},
		{"bytes", bytesConverter{}, []byte{0, 1}, "\x00\x01"},
	} {
		b, err := tc.c.FromConnect(tc.in)
		if err != nil || string(b) != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.name, b, err, tc.want)
		}
	}
	if _, err := (bytesConverter{}).FromConnect("text"); err == nil {
		t.Error("ByteArrayConverter took a string")
	}
	if b, err := (jsonConverter{}).FromConnect(nil); b != nil || err != nil {
		t.Errorf("a null value: %q %v, want no bytes (a tombstone)", b, err)
	}
	got, err := jsonConverter{schemas: true}.ToConnect([]byte(`{"schema":{"type":"int32"},"payload":5}`))
	if err != nil || encode(got) != "5" {
		t.Errorf("envelope: %v %v", got, err)
	}
	if _, err := (jsonConverter{schemas: true}).ToConnect([]byte(`{"a":1}`)); err == nil || !strings.Contains(err.Error(), `requires "schema" and "payload"`) {
		t.Errorf("plain JSON with schemas.enable: %v", err)
	}
	if _, err := (jsonConverter{}).ToConnect([]byte(`{"a":`)); err == nil || !strings.Contains(err.Error(), "Converting byte[] to Kafka Connect data failed") {
		t.Errorf("bad JSON: %v", err)
	}
}

func FuzzJSONConverter(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,"x",null]`, `"s"`, `{"schema":null,"payload":{"b":2}}`, `{`, `1 2`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, schemas bool) {
		c := jsonConverter{schemas: schemas}
		v, err := c.ToConnect(b)
		if err != nil {
			return
		}
		out, err := c.FromConnect(v)
		if err != nil {
			t.Fatalf("%q decoded to %v, which does not encode: %v", b, v, err)
		}
		v2, err := c.ToConnect(out)
		if err != nil || encode(v2) != encode(v) {
			t.Fatalf("round trip of %q: %q → %v (%v)", b, out, v2, err)
		}
	})
}
