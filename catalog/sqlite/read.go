package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/strata-io/strata/catalog"
)

// MaxChunks bounds one Chunks answer whatever the byte budget, so that a partition of
// tiny chunks cannot make one lookup unbounded; the reader asks again from where it got.
const MaxChunks = 10000

// The read path's lookups: index seeks whatever the partition's size (proved by
// TestQueryPlans on a million rows).
const (
	// selectPartitionState answers for a live topic: its partition count and, when the
	// partition exists, its state.
	selectPartitionState = `SELECT t.partitions, p.log_start_offset, p.high_watermark, p.bytes, ` + openTxnSQL + `
		FROM topics t LEFT JOIN partitions p ON p.topic_id = t.id AND p.partition = ?2
		WHERE t.id = ?1 AND t.deleted_at IS NULL`
	// openTxnSQL is the first offset of partition p's earliest ongoing transaction
	// (NULL: none), read with the partition: the last stable offset, when not NULL
	// (docs/design.md "Transactions"). An index seek of txn_partitions_open.
	openTxnSQL = `(SELECT min(x.first_offset) FROM txn_partitions x
		WHERE x.topic_id = p.topic_id AND x.partition = p.partition AND x.first_offset IS NOT NULL)`
	// markersFrom lists the markers from ?3 to ?4, and abortsFrom the abort markers at
	// or after ?3 whose transaction began at or before ?4.
	markersFrom = `SELECT marker_offset, producer_id, producer_epoch, is_commit, timestamp_ms FROM txn_markers
		WHERE topic_id = ?1 AND partition = ?2 AND marker_offset >= ?3 AND marker_offset <= ?4 ORDER BY marker_offset`
	abortsFrom = `SELECT producer_id, first_offset, marker_offset FROM txn_markers
		WHERE topic_id = ?1 AND partition = ?2 AND marker_offset >= ?3 AND is_commit = 0 AND first_offset IS NOT NULL
		  AND first_offset <= ?4 ORDER BY marker_offset`
	// chunksByOffset seeks chunks_by_offset to the chunk holding the offset: the first
	// whose last offset reaches it.
	chunksByOffset = `SELECT c.base_offset, c.last_offset, s.key, s.size, c.pos, c.len, c.max_timestamp, c.real_offsets
		FROM chunks c JOIN segments s ON s.id = c.segment_id
		WHERE c.topic_id = ?1 AND c.partition = ?2 AND c.last_offset >= ?3
		ORDER BY c.last_offset LIMIT ?4`
	// chunkByTime seeks chunks_by_time: running maxima never decrease with the offset,
	// so the first row reaching ts in (running max, last offset) order is the earliest
	// chunk that may hold a timestamp at or after ts.
	chunkByTime = `SELECT base_offset FROM chunks
		WHERE topic_id = ?1 AND partition = ?2 AND running_max_timestamp >= ?3
		ORDER BY running_max_timestamp, last_offset LIMIT 1`
)

// partitionState reads one partition of a live topic, mapping what is missing to the
// catalog's errors.
func partitionState(ctx context.Context, q queryer, topicID int64, partition int32) (catalog.PartitionInfo, error) {
	var (
		count                     int32
		logStart, hw, nbytes, lso sql.NullInt64
		info                      = catalog.PartitionInfo{TopicID: topicID, Partition: partition}
	)
	err := q.QueryRowContext(ctx, selectPartitionState, topicID, partition).Scan(&count, &logStart, &hw, &nbytes, &lso)
	if errors.Is(err, sql.ErrNoRows) {
		return info, fmt.Errorf("topic id %d: %w", topicID, catalog.ErrTopicNotFound)
	}
	if err != nil {
		return info, err
	}
	if partition < 0 || partition >= count || !hw.Valid {
		return info, fmt.Errorf("topic id %d partition %d (topic has %d): %w", topicID, partition, count, catalog.ErrPartitionOutOfRange)
	}
	info.LogStartOffset, info.HighWatermark, info.Bytes = logStart.Int64, hw.Int64, nbytes.Int64
	info.LastStableOffset = info.HighWatermark
	if lso.Valid {
		info.LastStableOffset = lso.Int64
	}
	return info, nil
}

// Partitions lists a live topic's partitions in order.
func (c *Catalog) Partitions(ctx context.Context, topicID int64) ([]catalog.PartitionInfo, error) {
	tx, err := c.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite: partitions of topic id %d: %w", topicID, err)
	}
	defer tx.Rollback()
	var count int32
	err = tx.QueryRowContext(ctx, `SELECT partitions FROM topics WHERE id = ? AND deleted_at IS NULL`, topicID).Scan(&count)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: partitions of topic id %d: %w", topicID, catalog.ErrTopicNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: partitions of topic id %d: %w", topicID, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT partition, log_start_offset, high_watermark, bytes,
			coalesce(`+openTxnSQL+`, high_watermark)
		FROM partitions p WHERE topic_id = ? AND partition < ? ORDER BY partition`, topicID, count)
	if err != nil {
		return nil, fmt.Errorf("sqlite: partitions of topic id %d: %w", topicID, err)
	}
	defer rows.Close()
	ps := make([]catalog.PartitionInfo, 0, count)
	for rows.Next() {
		p := catalog.PartitionInfo{TopicID: topicID}
		if err := rows.Scan(&p.Partition, &p.LogStartOffset, &p.HighWatermark, &p.Bytes, &p.LastStableOffset); err != nil {
			return nil, fmt.Errorf("sqlite: partitions of topic id %d: %w", topicID, err)
		}
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: partitions of topic id %d: %w", topicID, err)
	}
	return ps, nil
}

// Chunks returns the chunk holding offset and the following ones within maxBytes (see
// catalog.Catalog), at most MaxChunks.
func (c *Catalog) Chunks(ctx context.Context, topicID int64, partition int32, offset, maxBytes int64) (catalog.ChunkList, error) {
	// One read transaction: the partition state and the chunks come from one snapshot.
	tx, err := c.r.BeginTx(ctx, nil)
	if err != nil {
		return catalog.ChunkList{}, fmt.Errorf("sqlite: chunks of topic id %d partition %d: %w", topicID, partition, err)
	}
	defer tx.Rollback()
	info, err := partitionState(ctx, tx, topicID, partition)
	list := catalog.ChunkList{Partition: info}
	if err != nil {
		return list, fmt.Errorf("sqlite: chunks: %w", err)
	}
	if offset < info.LogStartOffset || offset > info.HighWatermark {
		return list, fmt.Errorf("sqlite: chunks of topic id %d partition %d: offset %d outside [%d, %d]: %w",
			topicID, partition, offset, info.LogStartOffset, info.HighWatermark, catalog.ErrOffsetOutOfRange)
	}
	if offset == info.HighWatermark {
		return list, nil
	}
	rows, err := tx.QueryContext(ctx, chunksByOffset, topicID, partition, offset, MaxChunks)
	if err != nil {
		return list, fmt.Errorf("sqlite: chunks of topic id %d partition %d: %w", topicID, partition, err)
	}
	defer rows.Close()
	var total int64
	// end is the last offset the answer covers: before the first chunk left out, else
	// the high watermark's (markers up to it are part of the answer).
	end, rowsRead := info.HighWatermark-1, 0
	for rows.Next() {
		rowsRead++
		ch := catalog.Chunk{TopicID: topicID, Partition: partition}
		if err := rows.Scan(&ch.BaseOffset, &ch.LastOffset, &ch.SegmentKey, &ch.SegmentSize, &ch.Pos, &ch.Len,
			&ch.MaxTimestamp, &ch.RealOffsets); err != nil {
			return list, fmt.Errorf("sqlite: chunks of topic id %d partition %d: %w", topicID, partition, err)
		}
		if len(list.Chunks) > 0 && total+ch.Len > maxBytes {
			end = ch.BaseOffset - 1
			break
		}
		total += ch.Len
		list.Chunks = append(list.Chunks, ch)
	}
	if rowsRead == MaxChunks {
		end = list.Chunks[len(list.Chunks)-1].LastOffset // more may follow
	}
	if err := rows.Err(); err != nil {
		return list, fmt.Errorf("sqlite: chunks of topic id %d partition %d: %w", topicID, partition, err)
	}
	rows.Close()
	if err := readMarkers(ctx, tx, &list, offset, end); err != nil {
		return list, fmt.Errorf("sqlite: markers of topic id %d partition %d: %w", topicID, partition, err)
	}
	return list, nil
}

// readMarkers adds the markers and aborted transactions of offset..end
// (catalog.ChunkList), read in list's snapshot.
func readMarkers(ctx context.Context, q rowQueryer, list *catalog.ChunkList, offset, end int64) error {
	p := list.Partition
	rows, err := q.QueryContext(ctx, markersFrom, p.TopicID, p.Partition, offset, end)
	if err != nil {
		return err
	}
	for rows.Next() {
		var m catalog.Marker
		if err := rows.Scan(&m.Offset, &m.ProducerID, &m.ProducerEpoch, &m.Commit, &m.Timestamp); err != nil {
			rows.Close()
			return err
		}
		list.Markers = append(list.Markers, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = q.QueryContext(ctx, abortsFrom, p.TopicID, p.Partition, offset, end)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a catalog.AbortedTxn
		if err := rows.Scan(&a.ProducerID, &a.FirstOffset, &a.LastOffset); err != nil {
			return err
		}
		list.Aborted = append(list.Aborted, a)
	}
	return rows.Err()
}

// OffsetForTime returns the earliest offset at or after ts at chunk granularity (see
// catalog.Catalog).
func (c *Catalog) OffsetForTime(ctx context.Context, topicID int64, partition int32, ts int64) (int64, error) {
	tx, err := c.r.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("sqlite: offset for time %d of topic id %d partition %d: %w", ts, topicID, partition, err)
	}
	defer tx.Rollback()
	info, err := partitionState(ctx, tx, topicID, partition)
	if err != nil {
		return 0, fmt.Errorf("sqlite: offset for time %d: %w", ts, err)
	}
	var base int64
	err = tx.QueryRowContext(ctx, chunkByTime, topicID, partition, ts).Scan(&base)
	if errors.Is(err, sql.ErrNoRows) {
		return info.HighWatermark, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: offset for time %d of topic id %d partition %d: %w", ts, topicID, partition, err)
	}
	return max(base, info.LogStartOffset), nil
}
