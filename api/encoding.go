package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// Record encoding (docs/design.md "Record encoding"). Stored bytes are what a Kafka client
// would see; each topic's key.format and value.format say how JSON maps to them:
//
//	json    any JSON value; stored as its JSON text
//	string  a JSON string; stored as its UTF-8 bytes
//	binary  a base64 string (standard alphabet, padded); stored as the decoded bytes
//
// JSON null is a null key or a tombstone value in every format, so a json field cannot
// store the four bytes "null". Header values are strings (UTF-8) or null.
const (
	formatJSON   = "json"
	formatString = "string"
	formatBinary = "binary"
)

// decodeProduce parses the body of POST /v1/topics/{topic}/records. Record fields are
// kept raw (v1.ProduceRecord): the decoder only finds their bounds, and the topic's
// formats decide what they mean, without a reflective decode per field. It never
// panics, whatever the body.
func decodeProduce(body []byte, maxRecords int) (v1.ProduceRequest, *problem) {
	req, ok := fastDecodeProduce(body) // the common shape, several times faster (jsonscan.go)
	if !ok {
		req = v1.ProduceRequest{}
		if p := decodeStrict(body, &req); p != nil {
			return req, p
		}
	}
	switch n := len(req.Records); {
	case n == 0:
		return req, newProblem(CodeEmptyBatch, `"records" must hold at least one record`)
	case n > maxRecords:
		return req, newProblem(CodeTooManyRecords, "%d records in one request; at most %d", n, maxRecords).
			with("max_records", maxRecords)
	}
	return req, nil
}

// recordsPool recycles the core's record slices of produce requests: the core keeps
// nothing of a request's Records once it has answered (the bytes they point at are the
// body's), so a slice is free again then, and the hot path allocates one slice of
// records per request (the writer's) rather than two.
var recordsPool = sync.Pool{New: func() any { return new([]broker.Record) }}

// getRecords returns a slice of n records from the pool; putRecords gives it back.
func getRecords(n int) *[]broker.Record {
	p := recordsPool.Get().(*[]broker.Record)
	if cap(*p) < n {
		*p = make([]broker.Record, n)
	}
	*p = (*p)[:n]
	return p
}

func putRecords(p *[]broker.Record) {
	clear(*p) // keep no body alive
	recordsPool.Put(p)
}

// decodeRecord turns records[i] of a produce body into the core's record: its key and
// value decoded by the topic's formats (cfg), its headers, partition (-1: absent or
// null) and timestamp (-1: absent or null) read. The topic's rules are the core's.
func decodeRecord(i int, pr *v1.ProduceRecord, cfg *catalog.Config, rec *broker.Record) *problem {
	rec.Partition = -1
	if !isNull(pr.Partition) {
		n, ok := parseDigits(string(pr.Partition), 1<<31-1)
		if !ok {
			return newProblem(CodeInvalidPartition, "records[%d].partition: %s is not a partition number; omit it (or use null) to let the partitioner choose", i, truncate(string(pr.Partition), 32)).
				with("record", i).with("field", "partition")
		}
		rec.Partition = int32(n)
	}
	if pr.Key == nil && pr.Value == nil && pr.Headers == nil && pr.Partition == nil && pr.Timestamp == nil {
		// `null` or `{}` in the records array: a mistake, not a tombstone (which names
		// its key, or at least "value": null).
		return recordProblem(i, "value", "the record is empty: give a key and/or a value (\"value\": null for a tombstone)")
	}
	var reason string
	if rec.Key, reason = decodeField(pr.Key, cfg.KeyFormat); reason != "" {
		return recordProblem(i, "key", "%s (the topic's key.format is %s)", reason, cfg.KeyFormat)
	}
	if rec.Value, reason = decodeField(pr.Value, cfg.ValueFormat); reason != "" {
		return recordProblem(i, "value", "%s (the topic's value.format is %s)", reason, cfg.ValueFormat)
	}
	var p *problem
	if rec.Headers, p = decodeHeaders(i, pr.Headers); p != nil {
		return p
	}
	rec.Timestamp = -1
	if !isNull(pr.Timestamp) {
		// Malformed is refused whatever the topic's timestamp type: LogAppendTime
		// ignores the value, not the syntax.
		ts, ok := recordTimestamp(pr.Timestamp)
		if !ok {
			return recordProblem(i, "timestamp", "must be unix milliseconds (a non-negative integer) or an RFC 3339 string")
		}
		rec.Timestamp = ts
	}
	return nil
}

func recordProblem(i int, field, format string, args ...any) *problem {
	p := newProblem(CodeInvalidRecord, "records[%d].%s: "+format, append([]any{i, field}, args...)...)
	return p.with("record", i).with("field", field)
}

// recordTimestamp parses a JSON timestamp: unix milliseconds or an RFC 3339 string.
func recordTimestamp(raw json.RawMessage) (int64, bool) {
	var ts int64
	if raw[0] == '"' {
		s, ok := unquote(raw)
		if !ok {
			return 0, false
		}
		t, err := time.Parse(time.RFC3339Nano, string(s))
		if err != nil {
			return 0, false
		}
		ts = t.UnixMilli()
	} else {
		n, ok := parseDigits(string(raw), 1<<63-1)
		if !ok {
			return 0, false
		}
		ts = n
	}
	return ts, ts >= 0
}

// decodeField turns one raw JSON key or value into stored bytes. It returns a reason
// instead of an error so the caller can say which record and field.
//
// A json field stores the exact bytes of the JSON value as sent, not a compacted copy:
// the decoder has already validated them (and the body is valid UTF-8), compacting
// would cost another pass over the largest part of the body, and a producer's bytes
// stay byte-for-byte what a Kafka consumer reads. Fetch renders them compacted.
func decodeField(raw json.RawMessage, format string) ([]byte, string) {
	if isNull(raw) {
		return nil, ""
	}
	switch format {
	case formatJSON:
		return raw, ""
	case formatString:
		if raw[0] != '"' {
			return nil, "must be a JSON string or null"
		}
		s, ok := unquote(raw)
		if !ok {
			return nil, "malformed string"
		}
		return s, ""
	case formatBinary:
		if raw[0] != '"' {
			return nil, "must be a base64 string or null"
		}
		s, ok := unquote(raw)
		if !ok {
			return nil, "malformed string"
		}
		// The decoder skips CR and LF; the contract is plain padded base64.
		if bytes.ContainsAny(s, "\r\n") {
			return nil, "base64 must not contain line breaks"
		}
		b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
		n, err := base64.StdEncoding.Strict().Decode(b, s)
		if err != nil {
			return nil, "invalid base64 (standard alphabet, padded): " + err.Error()
		}
		return b[:n:n], ""
	}
	return nil, "unsupported format " + format
}

// unquote returns the contents of a JSON string. Strings without escapes, the common
// case, are returned as a subslice of raw without copying.
func unquote(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	inner := raw[1 : len(raw)-1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false
	}
	return []byte(s), true
}

// headerJSON is one header of a produced record's headers in the array form, for the
// strict decoder's errors: a header without a key, or with a value that is neither a
// string nor null, is refused naming it (v1.ProduceRecord documents the shape).
type headerJSON struct {
	Key   *string         `json:"key"`
	Value json.RawMessage `json:"value"`
}

// decodeHeaders reads headers in either form: [{"key":"k","value":"v"}, ...] (order
// and repeated keys kept) or {"k":"v", ...} (document order kept).
func decodeHeaders(i int, raw json.RawMessage) ([]segment.Header, *problem) {
	if isNull(raw) {
		return nil, nil
	}
	if hs, ok := fastHeaders(raw); ok { // plain strings: no decoder per record (jsonscan.go)
		return hs, nil
	}
	return decodeHeadersStrict(i, raw)
}

// decodeHeadersStrict is decodeHeaders with encoding/json, for every shape and error.
func decodeHeadersStrict(i int, raw json.RawMessage) ([]segment.Header, *problem) {
	bad := func(format string, args ...any) *problem { return recordProblem(i, "headers", format, args...) }
	dec := json.NewDecoder(bytes.NewReader(raw))
	switch raw[0] {
	case '[':
		dec.DisallowUnknownFields()
		var hs []headerJSON
		if err := dec.Decode(&hs); err != nil {
			return nil, bad("each header must be {\"key\": string, \"value\": string or null}: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
		out := make([]segment.Header, len(hs))
		for j, h := range hs {
			if h.Key == nil {
				return nil, bad("header %d has no key", j)
			}
			out[j].Key = *h.Key
			if isNull(h.Value) {
				continue
			}
			if h.Value[0] != '"' {
				return nil, bad("header %q: value must be a string or null", *h.Key)
			}
			v, ok := unquote(h.Value)
			if !ok {
				return nil, bad("header %q: malformed string", *h.Key)
			}
			out[j].Value = v
		}
		return out, nil
	case '{':
		if _, err := dec.Token(); err != nil {
			return nil, bad("%v", err)
		}
		var out []segment.Header
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, bad("%v", err)
			}
			k, _ := kt.(string) // object keys are always strings
			vt, err := dec.Token()
			if err != nil {
				return nil, bad("%v", err)
			}
			switch v := vt.(type) {
			case nil:
				out = append(out, segment.Header{Key: k})
			case string:
				out = append(out, segment.Header{Key: k, Value: []byte(v)})
			default:
				return nil, bad("header %q: value must be a string or null", k)
			}
		}
		return out, nil
	}
	return nil, bad("must be an array of {\"key\",\"value\"} or an object of string values")
}

// renderOpts say how fetched records are shown: by the topic's formats, or with every
// key, value and header value as base64 (?format=base64).
type renderOpts struct {
	keyFormat, valueFormat string
	base64                 bool
}

func newRenderOpts(cfg catalog.Config, base64All bool) renderOpts {
	return renderOpts{keyFormat: cfg.KeyFormat, valueFormat: cfg.ValueFormat, base64: base64All}
}

// appendRecord appends one record as JSON:
//
//	{"offset":N,"timestamp":N,"key":K,"value":V,"headers":[{"key":"k","value":V}]}
//
// Bytes that the topic's format cannot show (a json field that is not valid JSON, a
// string field that is not UTF-8, written by another client) are shown as base64 and
// flagged with "key_encoding"/"value_encoding"/"encoding": "base64", so nothing is
// lost or silently altered. The output never contains a raw newline, so it can be an
// SSE data line as it is.
func appendRecord(dst []byte, rec *segment.DecodedRecord, o renderOpts, scratch *bytes.Buffer) []byte {
	dst = append(dst, `{"offset":`...)
	dst = strconv.AppendInt(dst, rec.Offset, 10)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, rec.Timestamp, 10)
	var fellBack bool
	dst = append(dst, `,"key":`...)
	if dst, fellBack = appendField(dst, rec.Key, o.keyFormat, o.base64, scratch); fellBack {
		dst = append(dst, `,"key_encoding":"base64"`...)
	}
	dst = append(dst, `,"value":`...)
	if dst, fellBack = appendField(dst, rec.Value, o.valueFormat, o.base64, scratch); fellBack {
		dst = append(dst, `,"value_encoding":"base64"`...)
	}
	dst = append(dst, `,"headers":[`...)
	for j, h := range rec.Headers {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"key":`...)
		k := h.Key
		if !utf8.ValidString(k) {
			k = strings.ToValidUTF8(k, "\uFFFD") // Kafka header keys are Java strings
		}
		dst = appendString(dst, k)
		dst = append(dst, `,"value":`...)
		if dst, fellBack = appendField(dst, h.Value, formatString, o.base64, scratch); fellBack {
			dst = append(dst, `,"encoding":"base64"`...)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// appendField renders stored bytes by format; fellBack reports base64 used because the
// bytes do not fit the format.
func appendField(dst, b []byte, format string, base64All bool, scratch *bytes.Buffer) (_ []byte, fellBack bool) {
	if b == nil {
		return append(dst, "null"...), false
	}
	if base64All || format == formatBinary {
		return appendBase64(dst, b), false
	}
	switch format {
	case formatJSON:
		if utf8.Valid(b) {
			scratch.Reset()
			// JSON text "null" would read as a tombstone: show it as bytes instead.
			if json.Compact(scratch, b) == nil && !bytes.Equal(scratch.Bytes(), nullJSON) {
				return append(dst, scratch.Bytes()...), false
			}
		}
	case formatString:
		if utf8.Valid(b) {
			return appendString(dst, b), false
		}
	}
	return appendBase64(dst, b), true
}

func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s, valid UTF-8, as a JSON string. Only what JSON requires is
// escaped (quote, backslash, control characters), so the text stays readable.
func appendString[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
