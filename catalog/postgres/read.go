package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
)

// maxChunksPerLookup bounds one Chunks answer whatever maxBytes says, so a huge budget
// over tiny chunks cannot read a partition's whole index.
const maxChunksPerLookup = 1000

// chunksSQL reads the partition's state and the chunks from the one holding $3 on, in
// one snapshot. The chunks are walked one primary-key seek at a time (a recursive
// CTE), each taken while the running total of their lengths stays within the byte
// budget $4 (the first is always taken) and at most $5 of them: the rows read are the
// rows returned, so a lookup costs the same whatever lies beyond the budget. The
// partition's last stable offset (openTxnSQL) and the end of what the answer covers —
// just before the first chunk it leaves out, or the high watermark's — come with it;
// markersSQL reads the markers and aborted transactions up to that end in the same
// statement's snapshot.
const chunksSQL = `
WITH RECURSIVE part AS (
    SELECT p.topic_id, p.partition, p.log_start_offset, p.high_watermark, p.bytes,
           coalesce(` + openTxnSQL + `, p.high_watermark) AS lso
    FROM partitions p
    JOIN topics t ON t.id = p.topic_id AND t.deleted_at IS NULL
    WHERE p.topic_id = $1 AND p.partition = $2
), walk AS (
    (SELECT c.base_offset, c.last_offset, c.segment_id, c.pos, c.len, c.max_timestamp, c.real_offsets,
            1 AS n, c.len AS cum
     FROM part p
     CROSS JOIN LATERAL (
         SELECT * FROM chunks c
         WHERE c.topic_id = p.topic_id AND c.partition = p.partition
           AND c.last_offset >= $3 AND c.last_offset < p.high_watermark
           AND $3 >= p.log_start_offset AND $3 < p.high_watermark
         ORDER BY c.last_offset
         LIMIT 1) c)
    UNION ALL
    (SELECT c.base_offset, c.last_offset, c.segment_id, c.pos, c.len, c.max_timestamp, c.real_offsets,
            w.n + 1, w.cum + c.len
     FROM walk w
     CROSS JOIN part p
     CROSS JOIN LATERAL (
         SELECT * FROM chunks c
         WHERE c.topic_id = p.topic_id AND c.partition = p.partition
           AND c.last_offset > w.last_offset AND c.last_offset < p.high_watermark
         ORDER BY c.last_offset
         LIMIT 1) c
     WHERE w.n < $5 AND w.cum + c.len <= $4)
), fin AS (
    SELECT coalesce(
        (SELECT c.base_offset - 1 FROM chunks c, part p
         WHERE c.topic_id = p.topic_id AND c.partition = p.partition
           AND c.last_offset > (SELECT max(w.last_offset) FROM walk w) AND c.last_offset < p.high_watermark
         ORDER BY c.last_offset LIMIT 1),
        (SELECT p.high_watermark - 1 FROM part p)) AS end_offset
)
SELECT 0, p.log_start_offset, p.high_watermark, p.bytes, p.lso,
       c.base_offset, c.last_offset, s.key, s.size, c.pos, c.len, c.max_timestamp, c.real_offsets,
       NULL::bigint, NULL::smallint, NULL::boolean
FROM part p
LEFT JOIN walk c ON true
LEFT JOIN segments s ON s.id = c.segment_id
UNION ALL
SELECT 1, NULL, NULL, NULL, NULL, m.marker_offset, m.marker_offset, NULL, NULL, NULL, NULL, m.timestamp_ms, NULL,
       m.producer_id, m.producer_epoch, m.is_commit
FROM part p, fin, txn_markers m
WHERE m.topic_id = p.topic_id AND m.partition = p.partition AND m.marker_offset >= $3 AND m.marker_offset <= fin.end_offset
UNION ALL
SELECT 2, NULL, NULL, NULL, NULL, m.first_offset, m.marker_offset, NULL, NULL, NULL, NULL, NULL, NULL,
       m.producer_id, m.producer_epoch, m.is_commit
FROM part p, fin, txn_markers m
WHERE m.topic_id = p.topic_id AND m.partition = p.partition AND m.marker_offset >= $3 AND NOT m.is_commit
  AND m.first_offset IS NOT NULL AND m.first_offset <= fin.end_offset
ORDER BY 1, 7`

// openTxnSQL is the first offset of partition p's earliest ongoing transaction (NULL:
// none): the last stable offset when not NULL (docs/design.md "Transactions"). An index
// seek of txn_partitions_open.
const openTxnSQL = `(SELECT min(x.first_offset) FROM txn_partitions x
	WHERE x.topic_id = p.topic_id AND x.partition = p.partition AND x.first_offset IS NOT NULL)`

// offsetForTimeSQL seeks the (topic_id, partition, running_max_timestamp, last_offset)
// index: the running maximum never decreases along the log, so the first index entry at
// or above $3 is the first chunk, in offset order, whose running maximum reaches $3.
const offsetForTimeSQL = `
SELECT p.log_start_offset, p.high_watermark,
       (SELECT c.base_offset FROM chunks c
        WHERE c.topic_id = p.topic_id AND c.partition = p.partition
          AND c.running_max_timestamp >= $3
        ORDER BY c.running_max_timestamp, c.last_offset
        LIMIT 1)
FROM partitions p
JOIN topics t ON t.id = p.topic_id AND t.deleted_at IS NULL
WHERE p.topic_id = $1 AND p.partition = $2`

// Chunks returns the chunk holding offset and those after it within maxBytes.
func (c *Catalog) Chunks(ctx context.Context, topicID int64, partition int32, offset, maxBytes int64) (catalog.ChunkList, error) {
	rows, err := c.pool.Query(ctx, chunksSQL, topicID, partition, offset, maxBytes, maxChunksPerLookup)
	if err != nil {
		return catalog.ChunkList{}, fmt.Errorf("postgres: chunks of topic id %d partition %d at %d: %w", topicID, partition, offset, err)
	}
	list := catalog.ChunkList{Partition: catalog.PartitionInfo{TopicID: topicID, Partition: partition}}
	found := false
	var (
		kind                                int32
		logStart, hwm, nbytes, lso          *int64
		base, last, size, pos, ln, mts, pid *int64
		key                                 *string
		real, commit                        *bool
		epoch                               *int16
	)
	p := &list.Partition
	_, err = pgx.ForEachRow(rows, []any{&kind, &logStart, &hwm, &nbytes, &lso,
		&base, &last, &key, &size, &pos, &ln, &mts, &real, &pid, &epoch, &commit}, func() error {
		switch kind {
		case 0: // the partition and its chunks come first (ORDER BY kind)
			found = true
			p.LogStartOffset, p.HighWatermark, p.Bytes, p.LastStableOffset = *logStart, *hwm, *nbytes, *lso
			if base != nil {
				list.Chunks = append(list.Chunks, catalog.Chunk{
					TopicID: topicID, Partition: partition,
					BaseOffset: *base, LastOffset: *last,
					SegmentKey: *key, SegmentSize: *size,
					Pos: *pos, Len: *ln, MaxTimestamp: *mts, RealOffsets: *real,
				})
			}
		case 1: // markers
			list.Markers = append(list.Markers, catalog.Marker{Offset: *base, ProducerID: *pid, ProducerEpoch: *epoch, Commit: *commit, Timestamp: *mts})
		case 2: // aborted transactions
			list.Aborted = append(list.Aborted, catalog.AbortedTxn{ProducerID: *pid, FirstOffset: *base, LastOffset: *last})
		}
		return nil
	})
	if err != nil {
		return catalog.ChunkList{}, fmt.Errorf("postgres: chunks of topic id %d partition %d at %d: %w", topicID, partition, offset, err)
	}
	if !found {
		return catalog.ChunkList{}, c.partitionMissing(ctx, topicID, partition)
	}
	if offset < p.LogStartOffset || offset > p.HighWatermark {
		return list, fmt.Errorf("postgres: chunks of topic id %d partition %d at %d (log start %d, high watermark %d): %w",
			topicID, partition, offset, p.LogStartOffset, p.HighWatermark, catalog.ErrOffsetOutOfRange)
	}
	return list, nil
}

// OffsetForTime returns the earliest offset at or after ts at chunk granularity.
func (c *Catalog) OffsetForTime(ctx context.Context, topicID int64, partition int32, ts int64) (int64, error) {
	var logStart, hwm int64
	var base *int64
	err := c.pool.QueryRow(ctx, offsetForTimeSQL, topicID, partition, ts).Scan(&logStart, &hwm, &base)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, c.partitionMissing(ctx, topicID, partition)
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: offset for time %d in topic id %d partition %d: %w", ts, topicID, partition, err)
	}
	if base == nil {
		return hwm, nil
	}
	return max(*base, logStart), nil
}

// partitionMissing explains why a live topic's partition row was not found.
func (c *Catalog) partitionMissing(ctx context.Context, topicID int64, partition int32) error {
	var n int32
	err := c.pool.QueryRow(ctx, `SELECT partitions FROM topics WHERE id = $1 AND deleted_at IS NULL`, topicID).Scan(&n)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("postgres: topic id %d: %w", topicID, catalog.ErrTopicNotFound)
	case err != nil:
		return fmt.Errorf("postgres: topic id %d: %w", topicID, err)
	}
	return fmt.Errorf("postgres: topic id %d partition %d (topic has %d): %w", topicID, partition, n, catalog.ErrPartitionOutOfRange)
}
