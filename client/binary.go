package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/segment"
)

// The binary record path: produce and fetch Kafka v2 record batches instead of JSON
// (no base64, no JSON parse on either side). A topic's key and value formats play no
// part: bytes go in and come out as they are.

// RecordBatchContentType is the media type of a body of Kafka v2 record batches.
const RecordBatchContentType = v1.ContentTypeRecordBatch

// Compression is a record batch's codec.
type Compression = segment.Compression

// The codecs a batch may use.
const (
	CompressionNone   = segment.CompressionNone
	CompressionGzip   = segment.CompressionGzip
	CompressionSnappy = segment.CompressionSnappy
	CompressionLZ4    = segment.CompressionLZ4
	CompressionZstd   = segment.CompressionZstd
)

// RawRecord is a record as bytes, for the binary path. A nil Key is a null key, a nil
// Value a tombstone; empty slices stay empty.
type RawRecord struct {
	// Offset is set on fetched records; ignored on produce.
	Offset int64
	// Timestamp is the record's CreateTime; zero on produce means now. Topics with
	// LogAppendTime overwrite it.
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []RawHeader
}

// RawHeader is one record header; a nil Value is a null header value.
type RawHeader struct {
	Key   string
	Value []byte
}

// BatchOptions say how EncodeBatch lays out a batch.
type BatchOptions struct {
	// Compression of the batch. Default none.
	Compression Compression
	// Idempotent makes the batch carry ProducerID, ProducerEpoch and BaseSequence, as
	// a Kafka producer's does: the ids POST /v1/producers hands out and the
	// partition's next sequence; the server then commits it at most once. Otherwise
	// (the default) the batch carries -1 in all three.
	Idempotent    bool
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
}

// EncodeBatch appends records to dst as one Kafka v2 record batch (base offset 0; the
// server assigns offsets), laid out as Kafka clients lay it out, and as the server's
// writer lays out records: the server stores it as it is rather than re-encode it.
func EncodeBatch(dst []byte, records []RawRecord, o BatchOptions) ([]byte, error) {
	if len(records) == 0 {
		return dst, fmt.Errorf("encode batch: no records")
	}
	b := segment.Batch{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Compression: o.Compression,
		Records: make([]segment.Record, len(records))}
	if o.Idempotent {
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = o.ProducerID, o.ProducerEpoch, o.BaseSequence
	}
	now := time.Now().UnixMilli()
	for i, r := range records {
		sr := segment.Record{Key: r.Key, Value: r.Value, Timestamp: now}
		if !r.Timestamp.IsZero() {
			sr.Timestamp = r.Timestamp.UnixMilli()
		}
		if len(r.Headers) > 0 {
			sr.Headers = make([]segment.Header, len(r.Headers))
			for j, h := range r.Headers {
				sr.Headers[j] = segment.Header{Key: h.Key, Value: h.Value}
			}
		}
		b.Records[i] = sr
	}
	// A one-batch object starts with the batch: the footer behind it is dropped.
	obj, infos, err := segment.Encode([]segment.Batch{b}, segment.EncodeOptions{})
	if err != nil {
		return dst, fmt.Errorf("encode batch: %w", err)
	}
	return append(dst, obj[:infos[0].Len]...), nil
}

// BatchOffsets says where a binary produce landed: its records took the offsets
// BaseOffset to LastOffset of Partition, in the order sent. Duplicate: an idempotent
// retry of a request committed before; the offsets are the original ones and nothing
// new was written.
type BatchOffsets = v1.BatchProduceResponse

// ProduceBatches sends batches, one or more Kafka v2 record batches back to back, to
// one partition of topic as one request: all their records commit, or none. The
// server checks every batch (CRC, framing) and refuses a corrupt one.
func (c *Client) ProduceBatches(ctx context.Context, topic string, partition int32, batches []byte) (BatchOffsets, error) {
	what := fmt.Sprintf("produce record batches to %s/%d", topic, partition)
	u, err := c.endpoint(map[string][]string{"partition": {strconv.Itoa(int(partition))}}, "v1", "topics", topic, "records")
	if err != nil {
		return BatchOffsets{}, fmt.Errorf("%s: %w", what, err)
	}
	var out BatchOffsets
	err = c.doRaw(ctx, what, http.MethodPost, u, RecordBatchContentType, batches, func(resp *http.Response) error {
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return fmt.Errorf("decode %s answer: %w", resp.Status, err)
		}
		return nil
	})
	return out, err
}

// ProduceBinary encodes records as one batch (EncodeBatch) and sends it to one
// partition of topic (ProduceBatches).
func (c *Client) ProduceBinary(ctx context.Context, topic string, partition int32, records []RawRecord, o BatchOptions) (BatchOffsets, error) {
	b, err := EncodeBatch(nil, records, o)
	if err != nil {
		return BatchOffsets{}, fmt.Errorf("produce %d records to %s/%d: %w", len(records), topic, partition, err)
	}
	return c.ProduceBatches(ctx, topic, partition, b)
}

// BatchFetchResult answers FetchBatches.
type BatchFetchResult struct {
	// Batches holds whole Kafka v2 record batches, back to back, with their real base
	// offsets. The first may begin below the offset asked for.
	Batches          []byte
	NextOffset       int64
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
}

// FetchBatches reads record batches of one partition from o.Offset, as stored (o.Base64
// plays no part). Empty Batches means no record yet (a long-poll that timed out).
func (c *Client) FetchBatches(ctx context.Context, topic string, partition int32, o FetchOptions) (BatchFetchResult, error) {
	p := strconv.Itoa(int(partition))
	what := "fetch record batches " + topic + "/" + p + " at " + strconv.FormatInt(o.Offset, 10)
	o.Base64 = false
	u, err := c.endpoint(fetchQuery(o), "v1", "topics", topic, "partitions", p, "records")
	if err != nil {
		return BatchFetchResult{}, fmt.Errorf("%s: %w", what, err)
	}
	var res BatchFetchResult
	err = c.doRaw(ctx, what, http.MethodGet, u, "", nil, func(resp *http.Response) error {
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != RecordBatchContentType {
			return fmt.Errorf("answer is %q, not record batches", resp.Header.Get("Content-Type"))
		}
		for _, h := range []struct {
			name string
			v    *int64
		}{{v1.HeaderNextOffset, &res.NextOffset}, {v1.HeaderHighWatermark, &res.HighWatermark}, {v1.HeaderLogStartOffset, &res.LogStartOffset}} {
			n, err := strconv.ParseInt(resp.Header.Get(h.name), 10, 64)
			if err != nil {
				return fmt.Errorf("answer header %s: %w", h.name, err)
			}
			*h.v = n
		}
		// A server from before transactions sends no last stable offset: it is the high
		// watermark there.
		res.LastStableOffset = res.HighWatermark
		if v := resp.Header.Get("Strata-Last-Stable-Offset"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("answer header Strata-Last-Stable-Offset: %w", err)
			}
			res.LastStableOffset = n
		}
		var buf bytes.Buffer
		if resp.ContentLength > 0 {
			buf.Grow(int(resp.ContentLength) + bytes.MinRead)
		}
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			return fmt.Errorf("read answer: %w", err)
		}
		res.Batches = buf.Bytes()
		return nil
	})
	return res, err
}

// BinaryFetchResult answers FetchBinary.
type BinaryFetchResult struct {
	Records          []RawRecord
	NextOffset       int64
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
}

// FetchBinary is FetchBatches with the batches checked (CRC) and decoded into records,
// those below o.Offset dropped. Keys and values share the answer's memory.
func (c *Client) FetchBinary(ctx context.Context, topic string, partition int32, o FetchOptions) (BinaryFetchResult, error) {
	br, err := c.FetchBatches(ctx, topic, partition, o)
	if err != nil {
		return BinaryFetchResult{}, err
	}
	res := BinaryFetchResult{NextOffset: br.NextOffset, HighWatermark: br.HighWatermark, LastStableOffset: br.LastStableOffset, LogStartOffset: br.LogStartOffset}
	recs, err := DecodeBatches(br.Batches, o.Offset)
	if err != nil {
		return res, fmt.Errorf("fetch record batches %s/%d at %d: %w", topic, partition, o.Offset, err)
	}
	res.Records = recs
	return res, nil
}

// DecodeBatches checks and decodes record batches laid back to back (as FetchBatches
// returns them) and returns their records from offset from on.
func DecodeBatches(batches []byte, from int64) ([]RawRecord, error) {
	if len(batches) == 0 {
		return nil, nil
	}
	decoded, err := segment.DecodeBatches(batches)
	if err != nil {
		return nil, fmt.Errorf("decode record batches: %w", err)
	}
	var out []RawRecord
	for _, db := range decoded {
		for _, r := range db.Records {
			if r.Offset < from {
				continue
			}
			rr := RawRecord{Offset: r.Offset, Timestamp: time.UnixMilli(r.Timestamp), Key: r.Key, Value: r.Value}
			if len(r.Headers) > 0 {
				rr.Headers = make([]RawHeader, len(r.Headers))
				for j, h := range r.Headers {
					rr.Headers[j] = RawHeader{Key: h.Key, Value: h.Value}
				}
			}
			out = append(out, rr)
		}
	}
	return out, nil
}

// doRaw sends one request with a body of contentType (none when body is nil), asking
// for record batches, and hands a 2xx answer to read. Error answers become *Error;
// retryable ones are retried as WithRetries says.
func (c *Client) doRaw(ctx context.Context, what, method, u, contentType string, body []byte, read func(*http.Response) error) error {
	for attempt := 0; ; attempt++ {
		err := c.onceRaw(ctx, method, u, contentType, body, read)
		if err == nil {
			return nil
		}
		e, ok := err.(*Error)
		if !ok || !e.Retryable() || attempt >= c.retries {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := c.sleep(ctx, c.retryDelay(e, attempt)); err != nil {
			return fmt.Errorf("%s: %w (gave up waiting to retry: %w)", what, e, err)
		}
	}
}

func (c *Client) onceRaw(ctx context.Context, method, u, contentType string, body []byte, read func(*http.Response) error) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Accept", "application/json")
	} else {
		req.Header.Set("Accept", RecordBatchContentType)
	}
	req.Header.Set("User-Agent", c.userAgent)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return parseError(resp)
	}
	return read(resp)
}
