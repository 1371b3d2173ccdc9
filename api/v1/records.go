package v1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// ProduceRequest is POST /v1/topics/{topic}/records with a JSON body. The server reads
// it with a scanner of its own on the hot path (package api, jsonscan.go), which
// accepts exactly what decoding into this type accepts.
type ProduceRequest struct {
	Records []ProduceRecord `json:"records"`
	// Producer makes the request idempotent.
	Producer *Producer `json:"producer,omitempty"`
}

// Query parameters of the records routes that involve the schema registry.
const (
	// ParamSchema, on POST /v1/topics/{topic}/records with a JSON body: the values are
	// JSON, whatever the topic's value.format, encoded to a schema of the topic's value
	// subject and framed for the registry (magic byte 0, the 4-byte id): SchemaLatest,
	// or a schema id registered under the subject.
	ParamSchema  = "schema"
	SchemaLatest = "latest"
	// ParamFormat, on a fetch or tail: FormatBase64 shows every key, value and header
	// value as base64; FormatJSON decodes values framed for the registry to JSON.
	ParamFormat  = "format"
	FormatBase64 = "base64"
	FormatJSON   = "json"
)

// ProduceRecord is one record of a produce request. Every field is raw JSON, read by
// the server: Key and Value by the topic's key.format and value.format (any JSON for
// json, a string for string, base64 for binary; null or absent: a null key, a
// tombstone); Headers as an array of {"key","value"} (order and repeated keys kept)
// or an object of key to value, values strings or null; Partition a non-negative
// integer (absent or null: the partitioner chooses); Timestamp unix milliseconds or an
// RFC 3339 string (CreateTime topics; absent: now).
type ProduceRecord struct {
	Key       json.RawMessage `json:"key,omitempty"`
	Value     json.RawMessage `json:"value"`
	Headers   json.RawMessage `json:"headers,omitempty"`
	Partition json.RawMessage `json:"partition,omitempty"`
	Timestamp json.RawMessage `json:"timestamp,omitempty"`
}

// Producer is a produce request's producer: the identity POST /v1/producers handed
// out, and the base sequence of each partition the request writes, {"<partition>":
// sequence}. Every record then names its partition.
type Producer struct {
	ID        *int64           `json:"id"`
	Epoch     *int64           `json:"epoch"`
	Sequences map[string]int64 `json:"sequences"`
}

// ProduceResponse answers a JSON produce: Offsets[i] is where records[i] landed.
type ProduceResponse struct {
	Offsets []Offset `json:"offsets"`
	// Duplicate: the request is a retry of one committed before; the offsets are the
	// original ones and nothing new was written. Absent when false.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Offset is where a produced record landed.
type Offset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// BatchProduceResponse answers a record-batch produce: its records took the offsets
// BaseOffset to LastOffset of Partition, in the order sent.
type BatchProduceResponse struct {
	Partition  int32 `json:"partition"`
	BaseOffset int64 `json:"base_offset"`
	LastOffset int64 `json:"last_offset"`
	// Duplicate as in ProduceResponse.
	Duplicate bool `json:"duplicate,omitempty"`
}

// FetchResponse answers GET /v1/topics/{topic}/partitions/{partition}/records.
type FetchResponse struct {
	Records []Record `json:"records"`
	// NextOffset is the offset to fetch next; for a search (key, contains,
	// end_offset), the offset after the last record scanned, to search on from.
	NextOffset    int64 `json:"next_offset"`
	HighWatermark int64 `json:"high_watermark"`
	// LastStableOffset is where a read_committed fetch stops (the first offset of the
	// partition's earliest open Kafka transaction, or the high watermark).
	LastStableOffset int64 `json:"last_stable_offset"`
	LogStartOffset   int64 `json:"log_start_offset"`
}

// Record is a fetched record, as a fetch answers it and a tail sends it per event.
type Record struct {
	Offset    int64     `json:"offset"`
	Timestamp Timestamp `json:"timestamp"`
	// Key and Value are rendered by the topic's formats (with ?format=json, a value
	// framed for the schema registry as its decoded JSON); null: a null key, a
	// tombstone.
	Key json.RawMessage `json:"key"`
	// KeyEncoding is "base64" when the stored key does not fit key.format (or the fetch
	// asked for ?format=base64 — then unmarked) and is shown as base64.
	KeyEncoding   string          `json:"key_encoding,omitempty"`
	Value         json.RawMessage `json:"value"`
	ValueEncoding string          `json:"value_encoding,omitempty"`
	// Headers are always an array in stored order, repeated keys kept.
	Headers Headers `json:"headers"`
}

// Header is one record header. A value that is not UTF-8 is shown as base64 with
// Encoding "base64".
type Header struct {
	Key      string  `json:"key"`
	Value    *string `json:"value"`
	Encoding string  `json:"encoding,omitempty"`
}

// Headers is a record's headers. It decodes either form a body may carry — an array
// of Header, or an object of key to value (document order kept) — and encodes as the
// array.
type Headers []Header

// UnmarshalJSON reads an array of Header or an object of string (or null) values.
func (hs *Headers) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return json.Unmarshal(b, (*[]Header)(hs))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return err
	}
	out := Headers{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := kt.(string) // object keys are always strings
		vt, err := dec.Token()
		if err != nil {
			return err
		}
		switch v := vt.(type) {
		case nil:
			out = append(out, Header{Key: k})
		case string:
			out = append(out, Header{Key: k, Value: &v})
		default:
			return fmt.Errorf("header %q: value must be a string or null", k)
		}
	}
	*hs = out
	return nil
}

// Timestamp is a record's time on the wire: unix milliseconds. It decodes an RFC 3339
// string too (a produced record's timestamp may be either); null leaves it zero.
type Timestamp time.Time

// MarshalJSON writes unix milliseconds.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, time.Time(t).UnixMilli(), 10), nil
}

// UnmarshalJSON reads unix milliseconds or an RFC 3339 string.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fmt.Errorf("timestamp %q: want unix milliseconds or RFC 3339: %w", s, err)
		}
		*t = Timestamp(v)
		return nil
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %s: want unix milliseconds or an RFC 3339 string", b)
	}
	*t = Timestamp(time.UnixMilli(ms))
	return nil
}

// TransactRequest is POST /v1/records: records of any topics and partitions, an
// optional producer and optional consumer-group offsets, committed as one request —
// all of it in one catalog commit, or nothing.
type TransactRequest struct {
	Records      []TransactRecord      `json:"records"`
	Producer     *TransactProducer     `json:"producer,omitempty"`
	GroupOffsets *TransactGroupOffsets `json:"group_offsets,omitempty"`
}

// TransactRecord is a ProduceRecord with its topic.
type TransactRecord struct {
	Topic string `json:"topic"`
	ProduceRecord
}

// TransactProducer is Producer with the sequences per topic: {"<topic>":
// {"<partition>": sequence}}.
type TransactProducer struct {
	ID        *int64                      `json:"id"`
	Epoch     *int64                      `json:"epoch"`
	Sequences map[string]map[string]int64 `json:"sequences"`
}

// TransactGroupOffsets are consumer-group offsets committed in the same transaction as
// the records, as POST /v1/groups/{group}/offsets commits them: at the member's current
// epoch for partitions it owns, or without MemberID while the group has no live
// members.
type TransactGroupOffsets struct {
	Group    string `json:"group"`
	MemberID string `json:"member_id,omitempty"`
	// MemberEpoch is required with MemberID.
	MemberEpoch *int32         `json:"member_epoch,omitempty"`
	Offsets     []CommitOffset `json:"offsets"`
}

// TransactResponse answers POST /v1/records: Offsets[i] is where records[i] landed.
type TransactResponse struct {
	Offsets []TopicOffset `json:"offsets"`
	// Duplicate as in ProduceResponse.
	Duplicate bool `json:"duplicate,omitempty"`
}

// TopicOffset is where a record of a multi-topic request landed.
type TopicOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}
