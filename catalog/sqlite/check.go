package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

var _ catalog.Inventory = (*Catalog)(nil)

// InventoryPage reads one page of segments with their chunk rows (engine.InventoryBackend).
func (e sqliteEngine) InventoryPage(ctx context.Context, after string, limit int, row func(catalog.SegmentRecord, *catalog.Chunk)) error {
	c := e.c
	rows, err := c.r.QueryContext(ctx, `
		WITH s AS (
			SELECT id, key, size, state, created_at, marked_at FROM segments
			WHERE key > ?1 ORDER BY key LIMIT ?2)
		SELECT s.key, s.size, s.state, s.created_at, s.marked_at,
		       c.topic_id, c.partition, c.base_offset, c.last_offset, c.pos, c.len, c.max_timestamp, c.real_offsets
		FROM s LEFT JOIN chunks c ON c.segment_id = s.id
		ORDER BY s.key, c.topic_id, c.partition, c.base_offset`, after, limit)
	if err != nil {
		return fmt.Errorf("sqlite: inventory segments after %q: %w", after, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			s                                    catalog.SegmentRecord
			state                                string
			created                              int64
			marked                               sql.NullInt64
			topic, base, last, pos, length, maxT sql.NullInt64
			part                                 sql.NullInt32
			real                                 sql.NullBool
		)
		if err := rows.Scan(&s.Key, &s.Size, &state, &created, &marked, &topic, &part, &base, &last, &pos, &length, &maxT, &real); err != nil {
			return fmt.Errorf("sqlite: inventory segments: %w", err)
		}
		s.State, s.CreatedAt = catalog.SegmentState(state), time.UnixMilli(created)
		if marked.Valid {
			s.MarkedAt = time.UnixMilli(marked.Int64)
		}
		var ch *catalog.Chunk
		if topic.Valid {
			ch = &catalog.Chunk{TopicID: topic.Int64, Partition: part.Int32, BaseOffset: base.Int64, LastOffset: last.Int64,
				Pos: pos.Int64, Len: length.Int64, MaxTimestamp: maxT.Int64, RealOffsets: real.Bool}
		}
		row(s, ch)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: inventory segments: %w", err)
	}
	return nil
}
