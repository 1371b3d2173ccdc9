package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

var fastSeeds = []string{
	`{"records":[{"key":"user-1","value":{"a":[1,2.5,null,true,false]},"headers":[{"key":"h","value":"v"},{"key":"n","value":null}],"partition":1,"timestamp":1700000000000}]}`,
	`{"records":[{"key":null,"value":null,"headers":{"a":"1","b":null},"timestamp":"2023-11-14T22:13:20Z"}]}`,
	` { "records" : [ { "value" : "x" } , {} ] , "producer" : {"id":1,"epoch":0,"sequences":{"0":5}} } `,
	`{"records":[{"key":"AAEC","value":"aGVsbG8="},{"value":"\u00e9\n\"x\""}]}`,
	`{"records":[{"value":1}]} trailing`,
	`{"records":[{"value":"\ud800"}],"x":1}`,
	`{"records":[]}`,
	`{"records":null}`,
	`{"records":[null]}`,
	`{"Records":[{"value":1}]}`,
	`{"records":[{"Value":1}]}`,
	`{"records":[{"value":1,"value":2}]}`,
	`{"records":[{"value":1}],"records":[{"value":2}]}`,
	`{"records":[{"value":-0.5e+10},{"value":01}]}`,
	`{"records":[{"value":[[[[]]]]},{"value":{"":{}}}]}`,
	`{"records":[{"value":"\/\b\f\r\t\\"}],"producer":null}`,
	`{"records":[{"value":1}],"producer":{"id":1,"epoch":0,"extra":1}}`,
	`{"records":[{"headers":[]},{"headers":{}},{"headers":[{"value":"v","key":"k"}]},{"headers":[{"key":"k"}]}]}`,
	`{"records":[{"headers":[{"key":null}]},{"headers":{"a":1}}]}`,
	"{\"records\":[{\"value\":\"\xff\"}]}",
	"{\"records\":[{\"value\":\"a\x01b\"}]}",
	`{}`, `[]`, `{"records":[{"value":1}]`, `{"records":[{"value":1},]}`, `{"records":[{"value":tru}]}`,
}

// FuzzFastProduce: whatever the fast path accepts, decodeStrict accepts with the same
// result; the fast path's validator agrees with encoding/json's on what is JSON.
func FuzzFastProduce(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := fastDecodeProduce(body)
		var slow produceRequest
		p := decodeStrict(body, &slow)
		if ok {
			if p != nil {
				t.Fatalf("fast path accepted %q, decodeStrict refuses: %v", body, p)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("%q:\nfast %+v\nslow %+v", body, fast, slow)
			}
		}
		s := jscan{b: body}
		s.ws()
		valid := s.value()
		s.ws()
		valid = valid && s.i == len(body)
		if jv := json.Valid(body); valid && !jv || !valid && jv && !deep(body) {
			t.Fatalf("%q: scanner says valid=%v, encoding/json %v", body, valid, jv)
		}
	})
}

// deep reports nesting the scanner declines by design.
func deep(b []byte) bool { return bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) >= maxDepth }

// FuzzFastHeaders: the fast header reader agrees with encoding/json's on every value
// it accepts.
func FuzzFastHeaders(f *testing.F) {
	for _, s := range []string{`{"a":"1","b":null,"a":""}`, `[{"key":"k","value":"v"},{"value":null,"key":"n"},{"key":""}]`,
		`[]`, `{}`, `{"a":"\n"}`, `[{"key":"k","Value":"v"}]`, `[{"key":"k","value":1}]`, `[null]`, `{"a":[]}`, ` {"a":"1"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || isNull(raw) {
			return // decodeHeaders sees valid JSON only: a RawMessage from a decoder
		}
		raw = bytes.TrimSpace(raw) // as a RawMessage holds it
		fast, ok := fastHeaders(raw)
		if !ok {
			return
		}
		slow, p := decodeHeadersStrict(0, raw)
		if p != nil {
			t.Fatalf("fast path accepted %q, the strict path refuses: %v", raw, p)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\nfast %q\nslow %q", raw, fast, slow)
		}
	})
}

// TestFastPathCoversTheCommonShape: the bodies clients send take the fast path (a
// decline would be correct but slow).
func TestFastPathCoversTheCommonShape(t *testing.T) {
	for _, s := range []string{fastSeeds[0], fastSeeds[1], fastSeeds[2], fastSeeds[3], `{"records":[]}`} {
		if _, ok := fastDecodeProduce([]byte(s)); !ok {
			t.Errorf("declined %s", s)
		}
	}
	for _, s := range []string{`{"Records":[{"value":1}]}`, `{"records":[null]}`, `{"records":[{"value":1,"value":2}]}`, "{\"records\":[{\"value\":\"\xff\"}]}"} {
		if _, ok := fastDecodeProduce([]byte(s)); ok {
			t.Errorf("took %s, which only decodeStrict may judge", s)
		}
	}
	body := benchProduceBodyT(t)
	if _, ok := fastDecodeProduce(body); !ok {
		t.Error("declined the benchmark body")
	}
	if _, ok := fastHeaders([]byte(`[{"key":"trace","value":"abc"},{"key":"n","value":null}]`)); !ok {
		t.Error("declined plain headers")
	}
	if _, ok := fastHeaders([]byte(`{"t":"1700000000000000000"}`)); !ok {
		t.Error("declined plain headers (object form)")
	}
}

func benchProduceBodyT(t *testing.T) []byte {
	var b strings.Builder
	b.WriteString(`{"records":[`)
	for i := range 50 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"key":"user-1","value":{"id":1,"note":"` + strings.Repeat("x", 900) + `"},"headers":{"t":"1"}}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}
