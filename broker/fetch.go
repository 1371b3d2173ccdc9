package broker

import (
	"context"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/reader"
)

// FetchRequest asks for one partition's records from Offset. MaxRecords and MaxBytes
// bound the answer (0: the reader's defaults), except that a fetch returns at least one
// record, or batch, whenever one is available, as Kafka does. Wait long-polls: with no
// record at Offset yet, the fetch waits up to Wait for one, woken by commits; a Wait
// beyond Config.MaxWait is capped (whichever front end asked: the rule is here once).
type FetchRequest struct {
	Topic      string
	Partition  int32
	Offset     int64
	MaxRecords int
	MaxBytes   int64
	Wait       time.Duration
	// Memory, when set, is the hold the fetch reserves its bytes in against the node's
	// memory budget (reader.Fetch.Memory): the front end releases it once it has sent
	// the answer. Without room the fetch comes back smaller, or fails with
	// CodeMemoryExhausted.
	Memory *membudget.Hold
	// Isolation: reader.ReadCommitted stops at the partition's last stable offset and
	// leaves out aborted transactions; reader.ReadUncommitted (the zero value) reads to
	// the high watermark.
	Isolation reader.Isolation
	// Markers asks for the transaction markers as control batches, and the aborted
	// transactions for the client to drop (Kafka's fetch): FetchBatches only.
	Markers bool
}

// Isolation is a fetch's isolation level: ReadCommitted stops at a partition's last
// stable offset and leaves out aborted transactions' records; ReadUncommitted reads to
// the high watermark.
type Isolation = reader.Isolation

// The isolation levels.
const (
	ReadUncommitted = reader.ReadUncommitted
	ReadCommitted   = reader.ReadCommitted
)

// FetchResult answers Fetch: the records from the requested offset, the offset to ask
// for next, and the partition's high watermark and log start offset. No records: the
// wait ended without any.
type FetchResult = reader.Result

// BatchesFetch answers FetchBatches: the stored Kafka v2 record batches, shared with
// the reader's cache (read-only: never write to them), their first 8 bytes as stored;
// BaseOffsets[i] is Batches[i]'s real base offset, which a front end writes in their
// place as it sends them out (the CRC does not cover it). The first batch may begin
// below the requested offset; a Kafka client skips those records itself.
type BatchesFetch = reader.SharedRawResult

// Fetch reads records of one partition.
func (b *Broker) Fetch(ctx context.Context, who Principal, req FetchRequest) (FetchResult, error) {
	if e := b.check(CapFetch); e != nil {
		return FetchResult{}, e
	}
	f, e := b.fetch(ctx, who, &req)
	if e != nil {
		return FetchResult{}, e
	}
	res, err := b.d.Reader.Fetch(ctx, f)
	if err != nil {
		return FetchResult{}, fetchError(err, onPartition(req.Topic, req.Partition))
	}
	b.countRecords(f.TopicID, who, res.Records)
	return res, nil
}

// FetchBatches reads one partition's stored record batches, byte for byte as stored
// but for their base offsets (BatchesFetch).
func (b *Broker) FetchBatches(ctx context.Context, who Principal, req FetchRequest) (BatchesFetch, error) {
	if e := b.check(CapFetchBatches); e != nil {
		return BatchesFetch{}, e
	}
	f, e := b.fetch(ctx, who, &req)
	if e != nil {
		return BatchesFetch{}, e
	}
	res, err := b.d.Batches.FetchRawShared(ctx, f)
	if err != nil {
		return BatchesFetch{}, fetchError(err, onPartition(req.Topic, req.Partition))
	}
	b.countBatches(f.TopicID, who, res.Batches)
	return res, nil
}

// fetch authorizes reading the topic and resolves a fetch's partition through the topic
// cache.
func (b *Broker) fetch(ctx context.Context, who Principal, req *FetchRequest) (reader.Fetch, *Error) {
	if e := b.authorize(ctx, who, acl.OpRead, acl.Topic(req.Topic)); e != nil {
		return reader.Fetch{}, e
	}
	ti, e := b.lookupPartition(ctx, req.Topic, req.Partition)
	if e != nil {
		return reader.Fetch{}, e
	}
	return reader.Fetch{
		TopicID:    ti.ID,
		Partition:  req.Partition,
		Offset:     req.Offset,
		MaxRecords: req.MaxRecords,
		MaxBytes:   req.MaxBytes,
		Wait:       min(req.Wait, b.maxWait),
		Memory:     req.Memory,
		Isolation:  req.Isolation,
		Markers:    req.Markers,
	}, nil
}
