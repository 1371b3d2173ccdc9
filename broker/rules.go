package broker

import (
	"strconv"
	"strings"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// The topic-config rules every produce passes, whichever front end it came through and
// whichever way its records came: as records (produce.go), as Kafka batches stored as
// they came, or as batches decoded into records (batches.go). Each rule is written here
// once; the paths differ only in where they look (a record, or a batch's extremes).

// recordAt names a record in a refusal: records[i] in a request of records, record i
// (batch b) in a request of batches.
type recordAt struct {
	record int // among the request's records, in order
	batch  int // the batch holding it; -1 in a request of records
}

func (a recordAt) String() string {
	if a.batch < 0 {
		return "records[" + strconv.Itoa(a.record) + "]"
	}
	return "record " + strconv.Itoa(a.record) + " (batch " + strconv.Itoa(a.batch) + ")"
}

// field names one of the record's fields: records[i].f, or record i (batch b): f.
func (a recordAt) field(f string) string {
	if a.batch < 0 {
		return a.String() + "." + f
	}
	return a.String() + ": " + f
}

// logAppendTime is message.timestamp.type=LogAppendTime: the writer stamps every record
// with its clock at flush (a producer's timestamp is ignored, as Kafka's broker
// overwrites it), so such records are never stored as they came.
func logAppendTime(cfg *catalog.Config) bool { return cfg.TimestampType == "LogAppendTime" }

// checkBatchTimestampType refuses a batch that claims LogAppendTime on a CreateTime
// topic: its timestamps would be read as stamped by the log.
func checkBatchTimestampType(cfg *catalog.Config, batch int, batchLogAppend bool) *Error {
	if batchLogAppend && !logAppendTime(cfg) {
		return newError(CodeInvalidRecord, "record batches: batch %d has the LogAppendTime timestamp type; the topic's message.timestamp.type is CreateTime: send CreateTime batches", batch).
			with("batch", batch)
	}
	return nil
}

// compacted is cleanup.policy=compact (with or without delete).
func compacted(cfg *catalog.Config) bool { return strings.HasPrefix(cfg.CleanupPolicy, "compact") }

// checkKey: compaction keeps the latest value per key, and a record without a key has
// none, so a compacted topic refuses it (as Kafka does).
func checkKey(cfg *catalog.Config, at recordAt, key []byte) *Error {
	if key == nil && compacted(cfg) {
		return newError(CodeInvalidRecord, "%s: a compacted topic (cleanup.policy=%s) cannot accept a record without a key", at.field("key"), cfg.CleanupPolicy).
			with("record", at.record).with("field", "key")
	}
	return nil
}

// checkTimestamp bounds a CreateTime timestamp (unix ms) by the node clock:
// message.timestamp.before.max.ms into the past, message.timestamp.after.max.ms into the
// future, so that a producer clock far ahead cannot pin data against time retention.
func checkTimestamp(cfg *catalog.Config, at recordAt, ts, nowMs int64) *Error {
	if ts < 0 {
		return newError(CodeInvalidRecord, "%s %d: a CreateTime record carries unix milliseconds", at.field("timestamp"), ts).
			with("record", at.record)
	}
	// ts >= 0 and nowMs > 0, so neither difference overflows.
	if nowMs-ts > cfg.TimestampBeforeMaxMs || ts-nowMs > cfg.TimestampAfterMaxMs {
		return newError(CodeTimestampOutOfRange,
			"%s %d is outside [now-%d ms, now+%d ms] (message.timestamp.before.max.ms, message.timestamp.after.max.ms)",
			at.field("timestamp"), ts, cfg.TimestampBeforeMaxMs, cfg.TimestampAfterMaxMs).
			with("record", at.record).with("timestamp", ts).with("now", nowMs)
	}
	return nil
}

// checkSize bounds a record's key, value and header bytes by max.message.bytes.
func checkSize(cfg *catalog.Config, at recordAt, size int64) *Error {
	if size > cfg.MaxMessageBytes {
		return newError(CodeRecordTooLarge, "%s is %d bytes (key, value and headers); the topic's max.message.bytes is %d",
			at, size, cfg.MaxMessageBytes).
			with("record", at.record).with("size", size).with("max_message_bytes", cfg.MaxMessageBytes)
	}
	return nil
}

// recordSize is what max.message.bytes counts of a record.
func recordSize(r *segment.Record) int64 {
	n := int64(len(r.Key) + len(r.Value))
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}
