package broker

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// Record is one record to produce, its key, value and headers the bytes to store (a
// front end has decoded its own encoding of them).
type Record struct {
	Topic string
	// Partition is where the record goes; -1 lets the partitioner choose: murmur2 of
	// the key when there is one, else sticky per flush.
	Partition int32
	Key       []byte // nil: no key
	Value     []byte // nil: a tombstone
	Headers   []segment.Header
	// Timestamp is the producer's, in unix ms; -1: none (a CreateTime record then gets
	// the node clock). LogAppendTime topics ignore it.
	Timestamp int64
}

// ProduceRequest is one produce: records for one or several topics and partitions,
// committed atomically — all of them or none — in one catalog transaction, with the
// consumer-group offsets that produced them when GroupOffsets is set (exactly-once
// consume-transform-produce in one call).
type ProduceRequest struct {
	Records []Record
	// Producer makes the request idempotent: committed at most once however often it
	// is sent. Every record then names its partition, and Sequences holds the base
	// sequence of each partition written, by topic name: exactly those partitions.
	Producer     *catalog.Producer
	Sequences    map[string]map[int32]int32
	GroupOffsets *catalog.OffsetCommit
}

// RecordOffset is where one record landed.
type RecordOffset = writer.RecordResult

// ProduceResult answers a ProduceRequest: Offsets[i] is where Records[i] landed.
type ProduceResult struct {
	Offsets []RecordOffset
	// Duplicate: an idempotent retry of a request committed before; Offsets are the
	// original ones and nothing new was written.
	Duplicate bool
}

// Produce checks a request against its topics' rules, hands it to the writer as one
// request and returns once its records are durable and committed. Everything that can
// be refused is refused before the writer sees it, so a refused request changes
// nothing. The record bytes (keys, values, headers) must not change until it returns;
// req.Records itself is not kept, and may be reused once it has.
func (b *Broker) Produce(ctx context.Context, who Principal, req ProduceRequest) (ProduceResult, error) {
	if e := b.check(CapProduce); e != nil {
		return ProduceResult{}, e
	}
	if e := b.authorizeProduce(ctx, who, &req); e != nil {
		return ProduceResult{}, e
	}
	wreq, topics, e := b.produceRequest(ctx, &req)
	if e != nil {
		return ProduceResult{}, e
	}
	wreq.Principal = who.Name
	resp, e := b.write(ctx, wreq, topics)
	if e != nil {
		return ProduceResult{}, e
	}
	if len(resp.Records) != len(wreq.Records) {
		err := fmt.Errorf("writer answered %d records for %d", len(resp.Records), len(wreq.Records))
		return ProduceResult{}, newError(CodeInternal, "produce: the writer answered for the wrong number of records").unexpected("produce", err)
	}
	return ProduceResult{Offsets: resp.Records, Duplicate: resp.Duplicate}, nil
}

// authorizeProduce requires write on every topic written; with group offsets, read on
// the group and on the topics whose offsets are committed (as a Kafka offset commit);
// with a producer id, write on its transactional id, if it has one.
func (b *Broker) authorizeProduce(ctx context.Context, who Principal, req *ProduceRequest) *Error {
	if e := b.authorizeEach(ctx, who, acl.OpWrite, len(req.Records), func(i int) string { return req.Records[i].Topic }); e != nil {
		return e
	}
	if g := req.GroupOffsets; g != nil {
		if e := b.authorizeCommit(ctx, who, g); e != nil {
			return e
		}
	}
	return b.authorizeProducer(ctx, who, req.Producer)
}

// produceRequest turns req into the writer's request under its topics' rules, and
// returns the topics it writes, by name.
func (b *Broker) produceRequest(ctx context.Context, req *ProduceRequest) (writer.Request, map[string]TopicInfo, *Error) {
	if len(req.Records) == 0 {
		return writer.Request{}, nil, newError(CodeEmptyBatch, "a produce request holds at least one record")
	}
	wreq := writer.Request{Records: make([]writer.Record, len(req.Records)), Producer: req.Producer}
	if p := req.Producer; p != nil {
		if p.ID < 0 || p.Epoch < 0 {
			return writer.Request{}, nil, newError(CodeInvalidRequest, "producer: id %d epoch %d: use what InitProducer answered", p.ID, p.Epoch).with("field", "producer")
		}
		if e := explicitPartitions(req.Records); e != nil {
			return writer.Request{}, nil, e
		}
	}
	if g := req.GroupOffsets; g != nil {
		if e := checkOffsetCommit("produce", g); e != nil {
			return writer.Request{}, nil, e
		}
		wreq.GroupOffsets = g
	}
	// Each topic is resolved once (cached), and every record built under its topic's
	// config. A partition beyond a cached count re-reads the topic once.
	topics := map[string]TopicInfo{}
	refreshed := map[string]bool{}
	nowMs := b.now().UnixMilli()
	for i := range req.Records {
		r := &req.Records[i]
		ti, ok := topics[r.Topic]
		if !ok {
			var e *Error
			if ti, e = b.lookupTopic(ctx, r.Topic); e != nil {
				return writer.Request{}, nil, e
			}
			topics[r.Topic] = ti
		}
		e := buildRecord(&ti, i, r, nowMs, &wreq.Records[i])
		if e != nil && e.Code == CodePartitionOutOfRange && !refreshed[r.Topic] {
			refreshed[r.Topic] = true
			if ti, e = b.refreshTopic(ctx, r.Topic); e != nil {
				return writer.Request{}, nil, e
			}
			topics[r.Topic] = ti
			e = buildRecord(&ti, i, r, nowMs, &wreq.Records[i])
		}
		if e != nil {
			return writer.Request{}, nil, e
		}
		if validates(&ti.Config) {
			if e := b.validateRecord(ctx, &ti, i, r.Key, r.Value); e != nil {
				return writer.Request{}, nil, e
			}
		}
	}
	if req.Producer != nil {
		seqs, e := sequencesFor(wreq.Records, req.Sequences, topics)
		if e != nil {
			return writer.Request{}, nil, e
		}
		wreq.Sequences = seqs
	}
	return wreq, topics, nil
}

// buildRecord puts records[i] of a request under its topic's rules into out. nowMs is
// the node clock: it stamps CreateTime records without a timestamp and bounds those
// with one.
func buildRecord(ti *TopicInfo, i int, r *Record, nowMs int64, out *writer.Record) *Error {
	at := recordAt{record: i, batch: -1}
	cfg := &ti.Config
	if r.Partition < -1 {
		return newError(CodeInvalidPartition, "%s: %d is not a partition number; use -1 to let the partitioner choose", at.field("partition"), r.Partition).
			with("record", i).with("field", "partition")
	}
	if r.Partition >= ti.Partitions {
		return partitionOutOfRange(ti.Name, r.Partition, ti.Partitions).with("record", i)
	}
	*out = writer.Record{TopicID: ti.ID, Partitions: ti.Partitions, Partition: r.Partition,
		Record: segment.Record{Key: r.Key, Value: r.Value, Headers: r.Headers}}
	if e := checkKey(cfg, at, r.Key); e != nil {
		return e
	}
	switch {
	case logAppendTime(cfg):
		out.LogAppendTime = true
	case r.Timestamp == -1:
		out.Timestamp = nowMs
	default:
		if e := checkTimestamp(cfg, at, r.Timestamp, nowMs); e != nil {
			return e
		}
		out.Timestamp = r.Timestamp
	}
	return checkSize(cfg, at, recordSize(&out.Record))
}

// explicitPartitions requires every record of an idempotent request to name its
// partition: a retry must land where the first attempt did, and a key's partition
// moves when the topic grows, a sticky one with every flush.
func explicitPartitions(recs []Record) *Error {
	for i := range recs {
		if recs[i].Partition < 0 {
			return newError(CodeInvalidRequest, "records[%d].partition: an idempotent request (with \"producer\") names every record's partition, so that a retry lands where the first attempt did", i).
				with("record", i).with("field", "partition")
		}
	}
	return nil
}

// sequencesFor checks that seqs (by topic name) names exactly the partitions recs
// write — a sequence for a partition nothing writes would be a client's bookkeeping
// error — and keys them by topic id.
func sequencesFor(recs []writer.Record, seqs map[string]map[int32]int32, topics map[string]TopicInfo) (map[writer.TopicPartition]int32, *Error) {
	byID := make(map[int64]map[int32]int32, len(seqs))
	names := make(map[int64]string, len(topics))
	for _, ti := range topics {
		names[ti.ID] = ti.Name
	}
	for _, name := range sortedKeys(seqs) {
		ti, ok := topics[name]
		if !ok {
			return nil, newError(CodeInvalidRequest, "producer.sequences: no record writes topic %q: send a sequence for exactly the partitions written", truncate(name, 64)).
				with("field", "producer.sequences")
		}
		byID[ti.ID] = seqs[name]
	}
	out := make(map[writer.TopicPartition]int32)
	for i := range recs {
		r := &recs[i]
		tp := writer.TopicPartition{TopicID: r.TopicID, Partition: r.Partition}
		if _, ok := out[tp]; ok {
			continue
		}
		seq, ok := byID[r.TopicID][r.Partition]
		if !ok {
			return nil, newError(CodeInvalidRequest, "producer.sequences: no base sequence for %s partition %d, which records[%d] writes", names[r.TopicID], r.Partition, i).
				with("field", "producer.sequences").with("record", i)
		}
		if seq < 0 {
			return nil, newError(CodeInvalidRequest, "producer.sequences: base sequence %d for %s partition %d: sequences run from 0", seq, names[r.TopicID], r.Partition).
				with("field", "producer.sequences")
		}
		out[tp] = seq
	}
	n := 0
	for _, ps := range byID {
		n += len(ps)
	}
	if n != len(out) {
		var extra []string
		for tid, ps := range byID {
			for p := range ps {
				if _, ok := out[writer.TopicPartition{TopicID: tid, Partition: p}]; !ok {
					extra = append(extra, names[tid]+"/"+strconv.Itoa(int(p)))
				}
			}
		}
		sort.Strings(extra)
		return nil, newError(CodeInvalidRequest, "producer.sequences: no record writes %v: send a sequence for exactly the partitions written", extra).
			with("field", "producer.sequences")
	}
	return out, nil
}

// write hands a built request to the writer and maps its refusals. A refusal saying a
// topic is gone or a partition beyond its count drops the cached topics: they are stale.
func (b *Broker) write(ctx context.Context, wreq writer.Request, topics map[string]TopicInfo) (writer.Response, *Error) {
	resp, err := b.d.Writer.Produce(ctx, wreq)
	if err == nil {
		return resp, nil
	}
	return writer.Response{}, b.writeError(err, topics)
}

// writeError maps a writer refusal of a request writing topics.
func (b *Broker) writeError(err error, topics map[string]TopicInfo) *Error {
	names := make(map[int64]string, len(topics))
	for _, ti := range topics {
		names[ti.ID] = ti.Name
	}
	var about []subject
	if len(topics) == 1 {
		for name := range topics {
			about = append(about, onTopic(name))
		}
	}
	e := produceError(err, names, about...)
	if e.Code == CodeTopicNotFound || e.Code == CodePartitionOutOfRange {
		for name := range topics {
			b.topics.invalidate(name)
		}
	}
	return e
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
