package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

var _ catalog.Inventory = (*Catalog)(nil)

// inventoryBatch is how many segments one query of InventorySegments reads.
const inventoryBatch = 500

// InventorySegments implements catalog.Inventory: keyset pages of segments, each read
// with its chunk rows in one query on the read pool.
func (c *Catalog) InventorySegments(ctx context.Context, fn func(catalog.SegmentRecord) error) error {
	after := ""
	for {
		rows, err := c.r.QueryContext(ctx, `
			WITH s AS (
				SELECT id, key, size, state, created_at, marked_at FROM segments
				WHERE key > ?1 ORDER BY key LIMIT ?2)
			SELECT s.key, s.size, s.state, s.created_at, s.marked_at,
			       c.topic_id, c.partition, c.base_offset, c.last_offset, c.pos, c.len, c.max_timestamp, c.real_offsets
			FROM s LEFT JOIN chunks c ON c.segment_id = s.id
			ORDER BY s.key, c.topic_id, c.partition, c.base_offset`, after, inventoryBatch)
		if err != nil {
			return fmt.Errorf("sqlite: inventory segments after %q: %w", after, err)
		}
		var (
			recs []catalog.SegmentRecord
			cur  *catalog.SegmentRecord
		)
		for rows.Next() {
			var (
				key, state                           string
				size, created                        int64
				marked                               sql.NullInt64
				topic, base, last, pos, length, maxT sql.NullInt64
				part                                 sql.NullInt32
				real                                 sql.NullBool
			)
			if err := rows.Scan(&key, &size, &state, &created, &marked, &topic, &part, &base, &last, &pos, &length, &maxT, &real); err != nil {
				rows.Close()
				return fmt.Errorf("sqlite: inventory segments: %w", err)
			}
			if cur == nil || cur.Key != key {
				recs = append(recs, catalog.SegmentRecord{Key: key, Size: size, State: catalog.SegmentState(state),
					CreatedAt: time.UnixMilli(created)})
				cur = &recs[len(recs)-1]
				if marked.Valid {
					cur.MarkedAt = time.UnixMilli(marked.Int64)
				}
			}
			if topic.Valid {
				cur.Chunks = append(cur.Chunks, catalog.Chunk{TopicID: topic.Int64, Partition: part.Int32, BaseOffset: base.Int64,
					LastOffset: last.Int64, SegmentKey: key, SegmentSize: size, Pos: pos.Int64, Len: length.Int64,
					MaxTimestamp: maxT.Int64, RealOffsets: real.Bool})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: inventory segments: %w", err)
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(recs) < inventoryBatch {
			return nil
		}
		after = recs[len(recs)-1].Key
	}
}
