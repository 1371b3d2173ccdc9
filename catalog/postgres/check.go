package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

var _ catalog.Inventory = (*Catalog)(nil)

// InventoryPage reads one page of segments with their chunk rows (engine.InventoryBackend).
func (e pgEngine) InventoryPage(ctx context.Context, after string, limit int, row func(catalog.SegmentRecord, *catalog.Chunk)) error {
	c := e.c
	rows, err := c.pool.Query(ctx, `
		WITH s AS (
			SELECT id, key, size, state, created_at, marked_at FROM segments
			WHERE key > $1 ORDER BY key LIMIT $2)
		SELECT s.key, s.size, s.state, s.created_at, s.marked_at,
		       c.topic_id, c.partition, c.base_offset, c.last_offset, c.pos, c.len, c.max_timestamp, c.real_offsets
		FROM s LEFT JOIN chunks c ON c.segment_id = s.id
		ORDER BY s.key, c.topic_id, c.partition, c.base_offset`, after, limit)
	if err != nil {
		return fmt.Errorf("postgres: inventory segments after %q: %w", after, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			s                                    catalog.SegmentRecord
			state                                string
			marked                               *time.Time
			topic, base, last, pos, length, maxT *int64
			part                                 *int32
			real                                 *bool
		)
		if err := rows.Scan(&s.Key, &s.Size, &state, &s.CreatedAt, &marked, &topic, &part, &base, &last, &pos, &length, &maxT, &real); err != nil {
			return fmt.Errorf("postgres: inventory segments: %w", err)
		}
		s.State = catalog.SegmentState(state)
		if marked != nil {
			s.MarkedAt = *marked
		}
		var ch *catalog.Chunk
		if topic != nil {
			ch = &catalog.Chunk{TopicID: *topic, Partition: *part, BaseOffset: *base, LastOffset: *last,
				Pos: *pos, Len: *length, MaxTimestamp: *maxT, RealOffsets: *real}
		}
		row(s, ch)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: inventory segments: %w", err)
	}
	return nil
}
