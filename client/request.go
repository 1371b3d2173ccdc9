package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// The calls below are the building blocks for runtimes that keep their own producer
// state (the streams library: one transactional id per task, sequences per task): one
// POST /v1/records attempt exactly as the caller sealed it, and DeleteRecords. The
// Producer above does the same bookkeeping for ordinary applications.

// RecordsRequest is one POST /v1/records request: records of any topics, an optional
// producer identity with a base sequence per partition written, and optional group
// offsets committed in the same catalog transaction.
type RecordsRequest struct {
	// Records: with Producer set, every record names its Partition.
	Records []TopicRecord
	// Producer, when set, makes the request idempotent: sent again unchanged after an
	// unknown outcome, it answers its original offsets with Duplicate.
	Producer *ProducerSequences
	// GroupOffsets, when set, commits these offsets with the records, checked against
	// the member's epoch and ownership like any offset commit.
	GroupOffsets *GroupCommit
}

// ProducerSequences is a producer identity and the base sequence of each partition a
// request writes.
type ProducerSequences struct {
	ProducerIdentity
	Sequences map[TopicPartition]int32
}

// GroupCommit is a group member's offset commit inside a records request.
type GroupCommit struct {
	Group       string
	MemberID    string
	MemberEpoch int32
	Offsets     []GroupOffset
}

// ProduceRecords sends req once, without retries: the caller decides what an error
// means (an *Error with its code, or a transport error whose outcome is unknown) and
// may send the same request again. Offsets[i] answers req.Records[i].
func (c *Client) ProduceRecords(ctx context.Context, req RecordsRequest) (AtomicResult, error) {
	what := fmt.Sprintf("produce %d records", len(req.Records))
	body, err := encodeRecordsRequest(req)
	if err != nil {
		return AtomicResult{}, fmt.Errorf("%s: %w", what, err)
	}
	u, err := c.endpoint(nil, "v1", "records")
	if err != nil {
		return AtomicResult{}, err
	}
	var out produceAnswer
	if err := c.once(ctx, http.MethodPost, u, body, &out); err != nil {
		return AtomicResult{}, fmt.Errorf("%s: %w", what, err)
	}
	if len(out.Offsets) != len(req.Records) {
		return AtomicResult{}, fmt.Errorf("%s: the server answered %d offsets", what, len(out.Offsets))
	}
	return AtomicResult{Offsets: out.Offsets, Duplicate: out.Duplicate}, nil
}

func encodeRecordsRequest(req RecordsRequest) ([]byte, error) {
	type txnRecord struct {
		Topic string `json:"topic"`
		wireRecord
	}
	type txnProducer struct {
		ID        int64                       `json:"id"`
		Epoch     int16                       `json:"epoch"`
		Sequences map[string]map[string]int32 `json:"sequences"`
	}
	body := struct {
		Records      []txnRecord  `json:"records"`
		Producer     *txnProducer `json:"producer,omitempty"`
		GroupOffsets *txnGroup    `json:"group_offsets,omitempty"`
	}{Records: make([]txnRecord, len(req.Records))}
	for i, r := range req.Records {
		for _, h := range r.Headers {
			if !utf8.Valid(h.Value) {
				return nil, fmt.Errorf("records[%d] header %q: value is not UTF-8; the JSON API carries header values as strings", i, h.Key)
			}
		}
		if req.Producer != nil && r.Partition == nil {
			return nil, fmt.Errorf("records[%d]: an idempotent request names every record's partition", i)
		}
		w := wireRecord{Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers}
		if !r.Timestamp.IsZero() {
			ts := timestamp(r.Timestamp)
			w.Timestamp = &ts
		}
		body.Records[i] = txnRecord{Topic: r.Topic, wireRecord: w}
	}
	if p := req.Producer; p != nil {
		tp := &txnProducer{ID: p.ID, Epoch: p.Epoch, Sequences: map[string]map[string]int32{}}
		for k, seq := range p.Sequences {
			if tp.Sequences[k.Topic] == nil {
				tp.Sequences[k.Topic] = map[string]int32{}
			}
			tp.Sequences[k.Topic][strconv.Itoa(int(k.Partition))] = seq
		}
		body.Producer = tp
	}
	if g := req.GroupOffsets; g != nil {
		body.GroupOffsets = &txnGroup{Group: g.Group, MemberID: g.MemberID, MemberEpoch: g.MemberEpoch, Offsets: g.Offsets}
	}
	return json.Marshal(body)
}

// DeleteRecords deletes a partition's records below beforeOffset (Kafka's
// DeleteRecords): its log start offset moves up to it, never down. It answers the log
// start offset after the call.
func (c *Client) DeleteRecords(ctx context.Context, topic string, partition int32, beforeOffset int64) (int64, error) {
	in := struct {
		BeforeOffset int64 `json:"before_offset"`
	}{beforeOffset}
	var out struct {
		LogStartOffset int64 `json:"log_start_offset"`
	}
	p := strconv.Itoa(int(partition))
	what := fmt.Sprintf("delete records of %s/%s below %d", topic, p, beforeOffset)
	err := c.do(ctx, what, http.MethodPost, nil, in, &out, "v1", "topics", topic, "partitions", p, "records:delete")
	return out.LogStartOffset, err
}
