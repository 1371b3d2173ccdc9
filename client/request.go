package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	v1 "github.com/strata-io/strata/api/v1"
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
	var out v1.TransactResponse
	if err := c.once(ctx, http.MethodPost, u, body, &out); err != nil {
		return AtomicResult{}, fmt.Errorf("%s: %w", what, err)
	}
	if len(out.Offsets) != len(req.Records) {
		return AtomicResult{}, fmt.Errorf("%s: the server answered %d offsets", what, len(out.Offsets))
	}
	return AtomicResult{Offsets: out.Offsets, Duplicate: out.Duplicate}, nil
}

func encodeRecordsRequest(req RecordsRequest) ([]byte, error) {
	body := v1.TransactRequest{Records: make([]v1.TransactRecord, len(req.Records))}
	for i, r := range req.Records {
		if req.Producer != nil && r.Partition == nil {
			return nil, fmt.Errorf("records[%d]: an idempotent request names every record's partition", i)
		}
		w, err := produceRecord(r.Record)
		if err != nil {
			return nil, fmt.Errorf("records[%d] %w", i, err)
		}
		body.Records[i] = v1.TransactRecord{Topic: r.Topic, ProduceRecord: w}
	}
	if p := req.Producer; p != nil {
		body.Producer = wireProducer(p.ProducerIdentity, p.Sequences)
	}
	if g := req.GroupOffsets; g != nil {
		body.GroupOffsets = (&txnGroup{Group: g.Group, MemberID: g.MemberID, MemberEpoch: g.MemberEpoch, Offsets: g.Offsets}).wire()
	}
	return json.Marshal(body)
}

// wireProducer is a producer identity with the base sequence of each partition a
// request writes, as the request carries them.
func wireProducer(id ProducerIdentity, seqs map[TopicPartition]int32) *v1.TransactProducer {
	epoch := int64(id.Epoch)
	tp := &v1.TransactProducer{ID: &id.ID, Epoch: &epoch, Sequences: map[string]map[string]int64{}}
	for k, seq := range seqs {
		if tp.Sequences[k.Topic] == nil {
			tp.Sequences[k.Topic] = map[string]int64{}
		}
		tp.Sequences[k.Topic][strconv.Itoa(int(k.Partition))] = int64(seq)
	}
	return tp
}

// DeleteRecords deletes a partition's records below beforeOffset (Kafka's
// DeleteRecords): its log start offset moves up to it, never down. It answers the log
// start offset after the call.
func (c *Client) DeleteRecords(ctx context.Context, topic string, partition int32, beforeOffset int64) (int64, error) {
	in := v1.DeleteRecordsRequest{BeforeOffset: &beforeOffset}
	var out v1.Partition
	p := strconv.Itoa(int(partition))
	what := fmt.Sprintf("delete records of %s/%s below %d", topic, p, beforeOffset)
	err := c.do(ctx, what, http.MethodPost, nil, in, &out, "v1", "topics", topic, "partitions", p, "records:delete")
	return out.LogStartOffset, err
}
