package broker

import (
	"context"
	"math"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
)

// Offsets by timestamp at record granularity (Kafka's ListOffsets): the catalog finds
// the chunk that holds the answer by the chunks' running maximum timestamps — the first
// chunk whose running maximum reaches the time holds the first record at or after it,
// every record before being earlier — and the batches' headers (each carrying its
// maximum timestamp) find the one batch within it; only that batch is decoded.

// MaxTimestamp, passed to OffsetForTimestamp as the time, asks for the record with the
// largest timestamp (Kafka's ListOffsets -3).
const MaxTimestamp int64 = -3

// TimestampOffset answers OffsetForTimestamp: the first record at or after the time
// asked for, its offset and timestamp; Found is false when there is none (Kafka then
// answers offset -1).
type TimestampOffset struct {
	Offset    int64
	Timestamp int64
	Found     bool
}

// scanBytes is how much of a partition one step of the batch scan reads.
const scanBytes = 1 << 20

func readerFetch(ti TopicInfo, partition int32, from int64) reader.Fetch {
	return reader.Fetch{TopicID: ti.ID, Partition: partition, Offset: from, MaxBytes: scanBytes, MaxRecords: math.MaxInt32}
}

// OffsetForTimestamp answers the first record of a partition whose timestamp is at or
// after ts (unix ms), or, for MaxTimestamp, the first record with the partition's
// largest timestamp. Records below the log start offset are not considered.
func (b *Broker) OffsetForTimestamp(ctx context.Context, who Principal, topic string, partition int32, ts int64) (TimestampOffset, error) {
	if e := b.check(CapFetchBatches); e != nil {
		return TimestampOffset{}, e
	}
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Topic(topic)); e != nil {
		return TimestampOffset{}, e
	}
	ti, e := b.lookupPartition(ctx, topic, partition)
	if e != nil {
		return TimestampOffset{}, e
	}
	switch {
	case ts == MaxTimestamp:
		max, found, e := b.maxTimestamp(ctx, ti, partition)
		if e != nil {
			return TimestampOffset{}, e
		}
		if !found {
			return TimestampOffset{}, nil
		}
		ts = max
	case ts < 0:
		return TimestampOffset{}, newError(CodeInvalidTimestamp, "timestamp %d: use unix milliseconds, or %d for the largest", ts, MaxTimestamp)
	}
	from, err := b.d.Catalog.OffsetForTime(ctx, ti.ID, partition, ts)
	if err != nil {
		return TimestampOffset{}, catalogError("offset for time", err, onPartition(ti.Name, partition))
	}
	to, e := b.scanForTimestamp(ctx, ti, partition, from, ts)
	if e != nil {
		return TimestampOffset{}, e
	}
	return to, nil
}

// offsetAtTime is the offset of a partition's first record at or after ts — where a
// group is reset to, or a reader positioned, by time — at record granularity as
// Kafka's ListOffsets answers, on a node that reads batches; at the catalog's chunk
// granularity (the first offset of the chunk holding that record) on one that does not.
// With no such record it is the catalog's answer, the high watermark.
func (b *Broker) offsetAtTime(ctx context.Context, ti TopicInfo, partition int32, ts int64) (int64, *Error) {
	from, err := b.d.Catalog.OffsetForTime(ctx, ti.ID, partition, ts)
	if err != nil {
		return 0, catalogError("offset for time", err, onPartition(ti.Name, partition))
	}
	if b.check(CapFetchBatches) != nil {
		return from, nil
	}
	to, e := b.scanForTimestamp(ctx, ti, partition, from, ts)
	if e != nil {
		return 0, e
	}
	if to.Found {
		return to.Offset, nil
	}
	return from, nil
}

// scanForTimestamp reads the partition's batches from offset from, skipping by header
// those whose maximum timestamp is below ts, and decodes the first that is not.
func (b *Broker) scanForTimestamp(ctx context.Context, ti TopicInfo, partition int32, from, ts int64) (TimestampOffset, *Error) {
	for {
		res, err := b.d.Batches.FetchRawShared(ctx, readerFetch(ti, partition, from))
		if err != nil {
			e := fetchError(err, onPartition(ti.Name, partition))
			if e.Code == CodeOffsetOutOfRange {
				return TimestampOffset{}, nil // the high watermark (or the log start moved past it)
			}
			return TimestampOffset{}, e
		}
		logStart := res.LogStartOffset
		for i, raw := range res.Batches {
			h, err := segment.ParseBatchHeader(raw)
			if err != nil {
				return TimestampOffset{}, fetchError(err, onPartition(ti.Name, partition))
			}
			if h.MaxTimestamp < ts {
				continue
			}
			db, err := segment.DecodeBatch(raw)
			if err != nil {
				return TimestampOffset{}, fetchError(err, onPartition(ti.Name, partition))
			}
			for _, r := range db.Records {
				off := res.BaseOffsets[i] + (r.Offset - db.BaseOffset)
				rts := r.Timestamp
				if db.LogAppendTime {
					rts = db.MaxTimestamp
				}
				if off >= max(from, logStart) && rts >= ts {
					return TimestampOffset{Offset: off, Timestamp: rts, Found: true}, nil
				}
			}
		}
		if len(res.Batches) == 0 || res.NextOffset >= res.HighWatermark {
			return TimestampOffset{}, nil
		}
		from = res.NextOffset
	}
}

// maxTimestamp finds the partition's largest timestamp among its chunks' running
// maxima: the largest time for which the catalog still finds a chunk (binary search,
// at most 64 lookups: -3 is asked for rarely).
func (b *Broker) maxTimestamp(ctx context.Context, ti TopicInfo, partition int32) (int64, bool, *Error) {
	pi, e := b.partitionInfo(ctx, ti, partition)
	if e != nil {
		return 0, false, e
	}
	reaches := func(ts int64) (bool, *Error) {
		off, err := b.d.Catalog.OffsetForTime(ctx, ti.ID, partition, ts)
		if err != nil {
			return false, catalogError("offset for time", err, onPartition(ti.Name, partition))
		}
		return off < pi.HighWatermark, nil
	}
	ok, e := reaches(0)
	if e != nil || !ok {
		return 0, false, e
	}
	lo, hi := int64(0), int64(math.MaxInt64) // reaches(lo); the answer is below hi
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, e := reaches(mid)
		if e != nil {
			return 0, false, e
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, true, nil
}
