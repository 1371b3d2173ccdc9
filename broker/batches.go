package broker

import (
	"context"
	"strings"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// Produce of Kafka v2 record batches: the HTTP API's binary produce and, next, the Kafka
// front end's Produce (one call per partition of a Kafka request, which is not atomic
// across partitions). A request's batches are validated as the segment decoder reads
// them (length, magic, CRC-32C, every record's framing), under the rules of every
// produce (rules.go), and committed as one request, offsets contiguous.
//
// Batches laid out as Strata's encoder would lay out their records — as Kafka clients
// lay them out: offset deltas 0..n-1, timestamps measured from the first record's, the
// header's maximum timestamp right, -1 in the producer fields unless idempotent — are
// stored as they came, compressed bytes and all (the writer writes only their base
// offsets, which the CRC does not cover), and come back byte for byte, base offset
// aside: the node validates them without decoding them into records and never
// re-encodes them. Anything else (a topic with LogAppendTime, whose records the writer
// stamps; a compacted topic, whose records must each have a key; another layout) is
// decoded and re-encoded with the records and the codec it came with, several batches
// as one. Validating costs a fraction of what JSON does, and it is what lets the node
// refuse a corrupt batch rather than store it.
//
// The batches' producer fields make the request idempotent, as they do in Kafka: a
// producer id of -1 means none; otherwise every batch carries the same id and epoch and
// sequences that follow on from the first batch's.

// BatchesRequest is one partition's records as Kafka v2 record batches, back to back.
type BatchesRequest struct {
	Topic     string
	Partition int32
	Batches   []byte
	// MaxRecords bounds the records of the request (a front end's limit); 0: none.
	MaxRecords int
	// BatchSizeRule makes max.message.bytes bound each batch as sent (its whole
	// length, compressed records and all), as Kafka's brokers do, rather than each
	// record's key, value and headers, as the HTTP API does for every produce: a
	// record may then exceed it when compression brings its batch under it, and many
	// small records may not share a batch over it. The Kafka front end sets it.
	BatchSizeRule bool
	// TransactionalID is the transactional id the request names (Kafka's Produce): a
	// transactional producer's batches (Kafka's transactional attribute) need one, and
	// write on it; they commit only inside the producer's transaction
	// (catalog.Request.Txn).
	TransactionalID string
	// ImplicitTxnAdd: transactions v2 (Produce v12+), whose produce begins the
	// transaction and adds its partition.
	ImplicitTxnAdd bool
}

// BatchesResult says where a BatchesRequest's records landed: offsets BaseOffset to
// LastOffset, in order.
type BatchesResult struct {
	BaseOffset, LastOffset int64
	// Duplicate: an idempotent retry of batches committed before; the offsets are the
	// original ones and nothing new was written.
	Duplicate bool
	// LogAppendTime is the time (unix ms) the records were stamped with on a topic with
	// message.timestamp.type LogAppendTime; -1 on a CreateTime topic, and for a
	// Duplicate (the original's stamp is not kept).
	LogAppendTime int64
}

// ProduceBatches validates and produces one partition's record batches: PrepareBatches,
// Submit and Wait in one call. The batches may be stored as they are: req.Batches must
// not change until it returns (but for their partition leader epochs, which it sets).
func (b *Broker) ProduceBatches(ctx context.Context, who Principal, req BatchesRequest) (BatchesResult, error) {
	p, err := b.PrepareBatches(ctx, who, req)
	if err != nil {
		return BatchesResult{}, err
	}
	if err := p.Submit(ctx); err != nil {
		return BatchesResult{}, err
	}
	return p.Wait(ctx)
}

// limits are what a request's batches are checked against besides the topic's config.
type limits struct {
	nowMs      int64
	maxRecords int
	perBatch   bool // BatchesRequest.BatchSizeRule
}

// checkBatch checks batch i (raw, as sent) under the per-batch rule of
// max.message.bytes.
func (l limits) checkBatch(cfg *catalog.Config, i int, raw []byte) *Error {
	if n := int64(len(raw)); l.perBatch && n > cfg.MaxMessageBytes {
		return newError(CodeRecordTooLarge, "record batch %d is %d bytes as sent; the topic's max.message.bytes is %d", i, n, cfg.MaxMessageBytes).
			with("batch", i).with("size", n).with("max_message_bytes", cfg.MaxMessageBytes)
	}
	return nil
}

// checkRecord checks a record under the per-record rule of max.message.bytes.
func (l limits) checkRecord(cfg *catalog.Config, at recordAt, size int64) *Error {
	if l.perBatch {
		return nil
	}
	return checkSize(cfg, at, size)
}

// batchesRequest turns batches for one partition of ti into a writer request and the
// number of records they hold: the batches as they are when the writer can store them
// so (rawBatches), else their records (decodedBatchesRequest), which also gives every
// refusal its error.
func batchesRequest(body []byte, ti *TopicInfo, part int32, lim limits) (writer.Request, int, *Error) {
	if req, n, ok := rawBatches(body, ti, part, lim); ok {
		return req, n, nil
	}
	return decodedBatchesRequest(body, ti, part, lim)
}

// decodedBatchesRequest is batchesRequest by decodeBatches alone: the records,
// re-encoded by the writer at flush.
func decodedBatchesRequest(body []byte, ti *TopicInfo, part int32, lim limits) (writer.Request, int, *Error) {
	db, e := decodeBatches(body, ti, part, lim)
	if e != nil {
		return writer.Request{}, 0, e
	}
	req := writer.Request{Records: db.records, Compression: db.compression}
	if db.producer != nil {
		req.Producer = db.producer
		req.Sequences = map[writer.TopicPartition]int32{{TopicID: ti.ID, Partition: part}: db.sequence}
	}
	return req, len(db.records), nil
}

// rawBatches accepts batches that can be stored as they came: each one valid
// (segment.ScanBatches checks exactly what the decoder checks, allocating nothing per
// record) and laid out as the writer would lay out its records, under the rules
// decodeBatches applies — through each batch's extremes where decodeBatches looks at
// every record — plus the request's record limit, one codec, and one producer with
// sequences following on, or none (-1 in all three fields). It refuses nothing itself:
// ok false sends the body down decodeBatches, which accepts it re-encoded or refuses it
// with its error, exactly as before the raw path existed. The batches alias body.
func rawBatches(body []byte, ti *TopicInfo, part int32, lim limits) (req writer.Request, n int, ok bool) {
	cfg := &ti.Config
	if logAppendTime(cfg) || compacted(cfg) {
		// The writer stamps LogAppendTime records at flush; a compacted topic needs a
		// key in every record, which only decoding shows.
		return req, 0, false
	}
	var (
		raws [][]byte
		sums []segment.BatchSummary
	)
	ok = true
	err := segment.ScanBatches(body, func(raw []byte, s segment.BatchSummary) bool {
		h, first := &s.Header, &s.Header
		if len(sums) > 0 {
			first = &sums[0].Header
		}
		n += int(h.NumRecords)
		switch {
		case !s.Canonical,
			n > lim.maxRecords, // stop before decompressing more of an oversized request
			h.LogAppendTime,
			h.Compression != first.Compression,
			checkTimestamp(cfg, recordAt{}, s.MinTimestamp, lim.nowMs) != nil,
			checkTimestamp(cfg, recordAt{}, s.MaxTimestamp, lim.nowMs) != nil,
			lim.checkBatch(cfg, len(sums), raw) != nil,
			lim.checkRecord(cfg, recordAt{}, s.MaxRecordDataBytes) != nil:
			ok = false
		case h.ProducerID == -1:
			// The writer would write -1 in all three.
			ok = h.ProducerEpoch == -1 && h.BaseSequence == -1 && first.ProducerID == -1
		default:
			ok = h.ProducerID >= 0 && h.ProducerEpoch >= 0 && h.BaseSequence >= 0 &&
				h.ProducerID == first.ProducerID && h.ProducerEpoch == first.ProducerEpoch
			if prev := len(sums) - 1; ok && prev >= 0 {
				p := &sums[prev].Header
				ok = int64(h.BaseSequence) == int64(p.BaseSequence)+int64(p.NumRecords)
			}
		}
		raws, sums = append(raws, raw), append(sums, s)
		return ok
	})
	if err != nil || !ok {
		return writer.Request{}, 0, false
	}
	req.Raw = &writer.RawBatches{TopicID: ti.ID, Partition: part, Batches: raws, Summaries: sums}
	if h := &sums[0].Header; h.ProducerID >= 0 {
		req.Producer = &catalog.Producer{ID: h.ProducerID, Epoch: h.ProducerEpoch}
		req.Sequences = map[writer.TopicPartition]int32{{TopicID: ti.ID, Partition: part}: h.BaseSequence}
	}
	return req, n, true
}

// decodedBatches is a body of record batches decoded into writer records.
type decodedBatches struct {
	records     []writer.Record
	compression segment.Compression
	producer    *catalog.Producer // nil unless the batches carry a producer id
	sequence    int32             // the first batch's base sequence, with producer
}

// decodeBatches validates a body of record batches for one partition of ti and turns
// it into writer records under the topic's rules. Keys, values and headers alias body
// (or a batch's decompressed buffer).
func decodeBatches(body []byte, ti *TopicInfo, part int32, lim limits) (decodedBatches, *Error) {
	var db decodedBatches
	bad := func(format string, args ...any) *Error {
		return newError(CodeInvalidRecord, "record batches: "+format, args...)
	}
	raws, err := segment.SplitBatches(body)
	if err != nil {
		return db, bad("%s", trimSegmentErr(err))
	}
	cfg := &ti.Config
	batches := make([]segment.DecodedBatch, len(raws))
	total := 0
	for i, raw := range raws {
		if e := lim.checkBatch(cfg, i, raw); e != nil {
			return db, e // before decompressing it
		}
		d, err := segment.DecodeBatch(raw)
		if err != nil {
			return db, bad("batch %d: %s", i, trimSegmentErr(err)).with("batch", i)
		}
		batches[i] = d
		total += len(d.Records)
		if total > lim.maxRecords {
			return db, newError(CodeTooManyRecords, "more than %d records in one request", lim.maxRecords).with("max_records", lim.maxRecords)
		}
		if e := checkBatchTimestampType(cfg, i, d.LogAppendTime); e != nil {
			return db, e
		}
		first := &batches[0]
		switch {
		case i > 0 && d.Compression != first.Compression:
			return db, bad("batch %d is compressed with codec %d, batch 0 with %d: use one codec per request", i, d.Compression, first.Compression).with("batch", i)
		case d.ProducerID != first.ProducerID || (d.ProducerID >= 0 && d.ProducerEpoch != first.ProducerEpoch):
			return db, bad("batch %d has producer %d epoch %d, batch 0 producer %d epoch %d: one producer per request", i, d.ProducerID, d.ProducerEpoch, first.ProducerID, first.ProducerEpoch).with("batch", i)
		case d.ProducerID < -1:
			return db, bad("batch %d: producer id %d: use -1 for none", i, d.ProducerID).with("batch", i)
		case d.ProducerID >= 0 && (d.ProducerEpoch < 0 || d.BaseSequence < 0):
			return db, bad("batch %d: producer %d with epoch %d and base sequence %d: an idempotent batch has both non-negative", i, d.ProducerID, d.ProducerEpoch, d.BaseSequence).with("batch", i)
		case i > 0 && d.ProducerID >= 0 && int64(d.BaseSequence) != int64(batches[i-1].BaseSequence)+int64(len(batches[i-1].Records)):
			return db, bad("batch %d: base sequence %d does not follow on from batch %d's %d + %d records", i, d.BaseSequence, i-1, batches[i-1].BaseSequence, len(batches[i-1].Records)).with("batch", i)
		}
	}
	if first := &batches[0]; first.ProducerID >= 0 {
		db.producer = &catalog.Producer{ID: first.ProducerID, Epoch: first.ProducerEpoch}
		db.sequence = first.BaseSequence
	}
	db.compression = batches[0].Compression
	db.records = make([]writer.Record, 0, total)
	logAppend := logAppendTime(cfg)
	for i := range batches {
		for j := range batches[i].Records {
			dr := &batches[i].Records[j]
			at := recordAt{record: len(db.records), batch: i}
			rec := writer.Record{
				TopicID:       ti.ID,
				Partitions:    ti.Partitions,
				Partition:     part,
				LogAppendTime: logAppend,
				Record:        segment.Record{Key: dr.Key, Value: dr.Value, Headers: dr.Headers, Timestamp: dr.Timestamp},
			}
			if e := checkKey(cfg, at, dr.Key); e != nil {
				return decodedBatches{}, e
			}
			if !logAppend {
				if e := checkTimestamp(cfg, at, dr.Timestamp, lim.nowMs); e != nil {
					return decodedBatches{}, e
				}
			}
			if e := lim.checkRecord(cfg, at, recordSize(&rec.Record)); e != nil {
				return decodedBatches{}, e
			}
			db.records = append(db.records, rec)
		}
	}
	return db, nil
}

// trimSegmentErr drops the "segment: " prefixes and the trailing sentinel text from a
// decoder error: the rest says what is wrong where.
func trimSegmentErr(err error) string {
	s := err.Error()
	s = strings.TrimSuffix(s, ": "+segment.ErrCorrupt.Error())
	return strings.ReplaceAll(s, "segment: ", "")
}
