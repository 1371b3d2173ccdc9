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

	v1 "github.com/strata-io/strata/api/v1"
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
type Offset = v1.Offset

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

// MarshalJSON writes the header as the API does (v1.Header): a UTF-8 value as a JSON
// string, anything else as base64 with "encoding":"base64", so any bytes survive.
func (h Header) MarshalJSON() ([]byte, error) { return json.Marshal(wireHeader(h)) }

// UnmarshalJSON reads a header as the API writes it (v1.Header).
func (h *Header) UnmarshalJSON(b []byte) error {
	var w v1.Header
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	v, err := headerOf(w)
	*h = v
	return err
}

func wireHeader(h Header) v1.Header {
	w := v1.Header{Key: h.Key}
	if h.Value != nil {
		s := string(h.Value)
		if !utf8.Valid(h.Value) {
			s = base64.StdEncoding.EncodeToString(h.Value)
			w.Encoding = "base64"
		}
		w.Value = &s
	}
	return w
}

func headerOf(w v1.Header) (Header, error) {
	h := Header{Key: w.Key}
	switch {
	case w.Value == nil:
	case w.Encoding == "base64":
		v, err := base64.StdEncoding.DecodeString(*w.Value)
		if err != nil {
			return h, fmt.Errorf("header %q: %w", w.Key, err)
		}
		h.Value = v
	default:
		h.Value = []byte(*w.Value)
	}
	return h, nil
}

// produceRecord is r as a produce request carries it. Header values must be UTF-8: the
// JSON API carries them as strings.
func produceRecord(r Record) (v1.ProduceRecord, error) {
	w := v1.ProduceRecord{Key: r.Key, Value: r.Value}
	if r.Partition != nil {
		w.Partition = strconv.AppendInt(nil, int64(*r.Partition), 10)
	}
	if !r.Timestamp.IsZero() {
		w.Timestamp = strconv.AppendInt(nil, r.Timestamp.UnixMilli(), 10)
	}
	if len(r.Headers) > 0 {
		hs := make([]v1.Header, len(r.Headers))
		for i, h := range r.Headers {
			if !utf8.Valid(h.Value) {
				return w, fmt.Errorf("header %q: value is not UTF-8; the JSON API carries header values as strings", h.Key)
			}
			hs[i] = wireHeader(h)
		}
		b, err := json.Marshal(hs)
		if err != nil {
			return w, fmt.Errorf("encode headers: %w", err)
		}
		w.Headers = b
	}
	return w, nil
}

// fetchedRecord turns a fetched record of partition into a Record; base64All says the
// fetch asked for ?format=base64.
func fetchedRecord(w v1.Record, partition int32, base64All bool) (Record, error) {
	r := Record{Offset: w.Offset, Timestamp: time.Time(w.Timestamp), KeyEncoding: w.KeyEncoding, ValueEncoding: w.ValueEncoding}
	if len(w.Headers) > 0 {
		r.Headers = make([]Header, len(w.Headers))
		for i, wh := range w.Headers {
			h, err := headerOf(wh)
			if err != nil {
				return Record{}, err
			}
			r.Headers[i] = h
		}
	}
	if base64All {
		r.KeyEncoding, r.ValueEncoding = "base64", "base64"
		// ?format=base64 renders header values as base64 too, unmarked: decode them,
		// so Headers hold the stored bytes in both modes.
		r.Headers = decodeHeaders(r.Headers)
	}
	if !isNull(w.Key) {
		r.Key = w.Key
	}
	if !isNull(w.Value) {
		r.Value = w.Value
	}
	r.Partition = &partition
	return r, nil
}

// decodeHeaders decodes header values sent as base64. A value that is not base64 (a
// server that did not encode it) is kept as it came.
func decodeHeaders(hs []Header) []Header {
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

// printedRecord is how a Record prints (its MarshalJSON, what strata consume writes):
// a fetched record as the API renders it (v1.Record) with its partition, leaving out
// what a record has not got (no offset before it is produced, no headers, no time).
type printedRecord struct {
	Partition     *int32          `json:"partition,omitempty"`
	Offset        *int64          `json:"offset,omitempty"`
	Timestamp     *v1.Timestamp   `json:"timestamp,omitempty"`
	Key           json.RawMessage `json:"key"`
	KeyEncoding   string          `json:"key_encoding,omitempty"`
	Value         json.RawMessage `json:"value"`
	ValueEncoding string          `json:"value_encoding,omitempty"`
	Headers       []Header        `json:"headers,omitempty"`
}

// MarshalJSON renders a record the way the API does (and `strata consume` prints it).
func (r Record) MarshalJSON() ([]byte, error) {
	w := printedRecord{Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers}
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
		ts := v1.Timestamp(r.Timestamp)
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
	in := v1.ProduceRequest{Records: make([]v1.ProduceRecord, len(records))}
	for i, r := range records {
		w, err := produceRecord(r)
		if err != nil {
			return nil, fmt.Errorf("produce to %s: records[%d] %w", topic, i, err)
		}
		in.Records[i] = w
	}
	var out v1.ProduceResponse
	what := fmt.Sprintf("produce %d records to %s", len(records), topic)
	if err := c.do(ctx, what, http.MethodPost, nil, in, &out, "v1", "topics", topic, "records"); err != nil {
		return nil, err
	}
	if len(out.Offsets) != len(records) {
		return out.Offsets, fmt.Errorf("%s: answer has %d offsets", what, len(out.Offsets))
	}
	return out.Offsets, nil
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
	var out v1.FetchResponse
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
		r, err := fetchedRecord(w, partition, o.Base64)
		if err != nil {
			return FetchResult{}, fmt.Errorf("%s: records[%d]: %w", what, i, err)
		}
		res.Records[i] = r
	}
	return res, nil
}
