package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
)

// Record is one record, to produce or as fetched.
//
// Key and Value are JSON as the topic's key.format and value.format expect them: any
// JSON value for "json", a JSON string for "string", a base64 JSON string for "binary"
// (String, JSON and Binary build them). A nil Key is a null key; a nil Value is a null
// value, a tombstone.
type Record struct {
	Key     json.RawMessage
	Value   json.RawMessage
	Headers []Header
	// Partition, when set, sends the record there; nil lets the server choose (murmur2
	// of the key bytes, or sticky per flush without a key). Fetched records have it set.
	Partition *int32
	// Timestamp is the record's time; zero leaves it to the server (its clock). Kept at
	// millisecond precision.
	Timestamp time.Time
	// Offset is set on fetched records.
	Offset int64
	// KeyEncoding and ValueEncoding are "base64" on fetched records whose Key or Value is
	// a base64 JSON string of the stored bytes: all of them with FetchOptions.Base64, and
	// any the topic's format cannot show (a "json" value that is not valid JSON, a
	// "string" one that is not UTF-8). Otherwise "".
	KeyEncoding, ValueEncoding string
}

// Header is one record header. A nil Value is a null header value. The JSON API carries
// header values as strings, so produced values must be UTF-8; fetched values that are
// not arrive intact (the server marks them base64).

type Header struct {
	Key   string
	Value []byte
}

// Offset is where a produced record landed.
type Offset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// String returns s as a JSON string: a key or value for a "string" (or "json") field.
func String(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// JSON marshals v: a key or value for a "json" field.
func JSON(v any) (json.RawMessage, error) { return json.Marshal(v) }

// Binary returns b as a base64 JSON string: a key or value for a "binary" field.
func Binary(b []byte) json.RawMessage {
	return String(base64.StdEncoding.EncodeToString(b))
}

// Int32 returns a pointer to p, for Record.Partition.
func Int32(p int32) *int32 { return &p }

// KeyBytes returns the key's stored bytes when the record was fetched with Base64, else
// the bytes its rendering stands for: a JSON string's UTF-8 text, any other JSON value's
// text. (For a "json" key whose value is a string the stored bytes include the quotes;
// fetch with Base64 when exact bytes matter.) A null key is nil.
func (r Record) KeyBytes() ([]byte, error) { return bytesOf(r.Key, r.KeyEncoding) }

// ValueBytes is KeyBytes for the value.
func (r Record) ValueBytes() ([]byte, error) { return bytesOf(r.Value, r.ValueEncoding) }

func bytesOf(raw json.RawMessage, encoding string) ([]byte, error) {
	if isNull(raw) {
		return nil, nil
	}
	if raw[0] != '"' {
		if encoding == "base64" {
			return nil, fmt.Errorf("client: base64 field is not a JSON string: %.40s", raw)
		}
		return []byte(raw), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("client: decode field: %w", err)
	}
	if encoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("client: decode base64 field: %w", err)
		}
		return b, nil
	}
	return []byte(s), nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// wireHeader is a header on the wire: a UTF-8 value as a JSON string, anything else as
// base64 with "encoding":"base64", so any bytes survive.
type wireHeader struct {
	Key      string  `json:"key"`
	Value    *string `json:"value"`
	Encoding string  `json:"encoding,omitempty"`
}

func (h Header) MarshalJSON() ([]byte, error) {
	w := wireHeader{Key: h.Key}
	if h.Value != nil {
		s := string(h.Value)
		if !utf8.Valid(h.Value) {
			s = base64.StdEncoding.EncodeToString(h.Value)
			w.Encoding = "base64"
		}
		w.Value = &s
	}
	return json.Marshal(w)
}

func (h *Header) UnmarshalJSON(b []byte) error {
	var w wireHeader
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	h.Key = w.Key
	h.Value = nil
	if w.Value != nil {
		if w.Encoding == "base64" {
			v, err := base64.StdEncoding.DecodeString(*w.Value)
			if err != nil {
				return fmt.Errorf("header %q: %w", w.Key, err)
			}
			h.Value = v
		} else {
			h.Value = []byte(*w.Value)
		}
	}
	return nil
}

// headerList reads headers as an array of {"key","value"} or as an object of key to
// value, whichever the server sends.
type headerList []Header

func (l *headerList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var m map[string]*string
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		*l = (*l)[:0]
		for k, v := range m {
			h := Header{Key: k}
			if v != nil {
				h.Value = []byte(*v)
			}
			*l = append(*l, h)
		}
		return nil
	}
	return json.Unmarshal(b, (*[]Header)(l))
}

// wireRecord is a record on the wire, both directions.
type wireRecord struct {
	Partition *int32          `json:"partition,omitempty"`
	Offset    *int64          `json:"offset,omitempty"`
	Timestamp *timestamp      `json:"timestamp,omitempty"`
	Key       json.RawMessage `json:"key,omitempty"`
	// KeyEncoding and ValueEncoding: "base64" where the server fell back to base64.
	KeyEncoding   string          `json:"key_encoding,omitempty"`
	Value         json.RawMessage `json:"value"`
	ValueEncoding string          `json:"value_encoding,omitempty"`
	Headers       headerList      `json:"headers,omitempty"`
}

// record turns a fetched record into a Record; base64All says the fetch asked for
// ?format=base64.
func (w wireRecord) record(partition int32, base64All bool) Record {
	r := Record{Headers: w.Headers, KeyEncoding: w.KeyEncoding, ValueEncoding: w.ValueEncoding}
	if base64All {
		r.KeyEncoding, r.ValueEncoding = "base64", "base64"
		// ?format=base64 renders header values as base64 too, unmarked: decode them,
		// so Headers hold the stored bytes in both modes.
		r.Headers = decodeHeaders(w.Headers)
	}
	if !isNull(w.Key) {
		r.Key = w.Key
	}
	if !isNull(w.Value) {
		r.Value = w.Value
	}
	p := partition
	if w.Partition != nil {
		p = *w.Partition
	}
	r.Partition = &p
	if w.Offset != nil {
		r.Offset = *w.Offset
	}
	if w.Timestamp != nil {
		r.Timestamp = time.Time(*w.Timestamp)
	}
	return r
}

// decodeHeaders decodes header values sent as base64. A value that is not base64 (a
// server that did not encode it) is kept as it came.
func decodeHeaders(hs headerList) []Header {
	if len(hs) == 0 {
		return hs
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = h
		if h.Value != nil {
			if b, err := base64.StdEncoding.DecodeString(string(h.Value)); err == nil {
				out[i].Value = b
			}
		}
	}
	return out
}

// timestamp is unix milliseconds on the wire; an RFC 3339 string is read too.
type timestamp time.Time

func (t timestamp) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, time.Time(t).UnixMilli(), 10), nil
}

func (t *timestamp) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return err
		}
		*t = timestamp(v)
		return nil
	}
	if string(b) == "null" {
		return nil
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %s: want unix milliseconds or an RFC 3339 string", b)
	}
	*t = timestamp(time.UnixMilli(ms))
	return nil
}

// MarshalJSON renders a record the way the API does (and `strata consume` prints it).
func (r Record) MarshalJSON() ([]byte, error) {
	w := wireRecord{Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers}
	if r.Partition != nil {
		w.Offset = &r.Offset
	}
	if r.Key != nil {
		w.KeyEncoding = r.KeyEncoding
	}
	if r.Value != nil {
		w.ValueEncoding = r.ValueEncoding
	}
	if !r.Timestamp.IsZero() {
		ts := timestamp(r.Timestamp)
		w.Timestamp = &ts
	}
	if w.Key == nil {
		w.Key = json.RawMessage("null")
	}
	return json.Marshal(w)
}

// Produce appends records to a topic as one request: all of them commit, or none. The
// answer says where each landed, in the order given.
func (c *Client) Produce(ctx context.Context, topic string, records []Record) ([]Offset, error) {
	in := struct {
		Records []wireRecord `json:"records"`
	}{make([]wireRecord, len(records))}
	for i, r := range records {
		for _, h := range r.Headers {
			if !utf8.Valid(h.Value) {
				return nil, fmt.Errorf("produce to %s: records[%d] header %q: value is not UTF-8; the JSON API carries header values as strings", topic, i, h.Key)
			}
		}
		w := wireRecord{Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers}
		if !r.Timestamp.IsZero() {
			ts := timestamp(r.Timestamp)
			w.Timestamp = &ts
		}
		in.Records[i] = w
	}
	var out struct {
		Offsets []Offset `json:"offsets"`
		Records []Offset `json:"records"`
	}
	what := fmt.Sprintf("produce %d records to %s", len(records), topic)
	if err := c.do(ctx, what, http.MethodPost, nil, in, &out, "v1", "topics", topic, "records"); err != nil {
		return nil, err
	}
	offs := out.Offsets
	if offs == nil {
		offs = out.Records
	}
	if len(offs) != len(records) {
		return offs, fmt.Errorf("%s: answer has %d offsets", what, len(offs))
	}
	return offs, nil
}

// FetchOptions say what to fetch. Zero values take the server's defaults.
type FetchOptions struct {
	Offset     int64
	MaxRecords int
	MaxBytes   int64
	// Wait long-polls: when no record at Offset exists yet, the server waits up to this
	// long for one.
	Wait time.Duration
	// Base64 asks for every key and value as base64 of the stored bytes, whatever the
	// topic's formats (Record.Encoding is then "base64").
	Base64 bool
	// Isolation is ReadCommitted (the server's default, when empty) or
	// ReadUncommitted: whether records of Kafka transactions appear before their
	// commit, and those of aborted ones at all.
	Isolation Isolation
}

// Isolation is a fetch's isolation level.
type Isolation string

// The isolation levels: ReadCommitted stops at a partition's last stable offset (the
// first offset of its earliest open Kafka transaction) and leaves out aborted
// transactions' records; ReadUncommitted reads everything to the high watermark.
const (
	ReadCommitted   Isolation = "read_committed"
	ReadUncommitted Isolation = "read_uncommitted"
)

// FetchResult answers a fetch.
type FetchResult struct {
	Records []Record
	// NextOffset is where to fetch next.
	NextOffset    int64
	HighWatermark int64
	// LastStableOffset is where a ReadCommitted fetch stops.
	LastStableOffset int64
	LogStartOffset   int64
}

func fetchQuery(o FetchOptions) url.Values {
	q := url.Values{"offset": {strconv.FormatInt(o.Offset, 10)}}
	if o.MaxRecords > 0 {
		q.Set("max_records", strconv.Itoa(o.MaxRecords))
	}
	if o.MaxBytes > 0 {
		q.Set("max_bytes", strconv.FormatInt(o.MaxBytes, 10))
	}
	if o.Wait > 0 {
		q.Set("wait_ms", strconv.FormatInt(o.Wait.Milliseconds(), 10))
	}
	if o.Base64 {
		q.Set("format", "base64")
	}
	if o.Isolation != "" {
		q.Set("isolation", string(o.Isolation))
	}
	return q
}

// Fetch reads records of one partition from o.Offset. An offset below the log start or
// above the high watermark is an *Error (code offset_out_of_range).
func (c *Client) Fetch(ctx context.Context, topic string, partition int32, o FetchOptions) (FetchResult, error) {
	var out struct {
		Records          []wireRecord `json:"records"`
		NextOffset       int64        `json:"next_offset"`
		HighWatermark    int64        `json:"high_watermark"`
		LastStableOffset int64        `json:"last_stable_offset"`
		LogStartOffset   int64        `json:"log_start_offset"`
	}
	p := strconv.Itoa(int(partition))
	what := "fetch " + topic + "/" + p + " at " + strconv.FormatInt(o.Offset, 10)
	if err := c.do(ctx, what, http.MethodGet, fetchQuery(o), nil, &out, "v1", "topics", topic, "partitions", p, "records"); err != nil {
		return FetchResult{}, err
	}
	res := FetchResult{
		Records:          make([]Record, len(out.Records)),
		NextOffset:       out.NextOffset,
		HighWatermark:    out.HighWatermark,
		LastStableOffset: out.LastStableOffset,
		LogStartOffset:   out.LogStartOffset,
	}
	for i, w := range out.Records {
		res.Records[i] = w.record(partition, o.Base64)
	}
	return res, nil
}
