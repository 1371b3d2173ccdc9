package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

var _ catalog.Inventory = (*Catalog)(nil)

// inventoryBatch is how many segments one query of InventorySegments reads.
const inventoryBatch = 500

// InventorySegments implements catalog.Inventory: keyset pages of segments, each read
// with its chunk rows in one query.
func (c *Catalog) InventorySegments(ctx context.Context, fn func(catalog.SegmentRecord) error) error {
	after := ""
	for {
		rows, err := c.pool.Query(ctx, `
			WITH s AS (
				SELECT id, key, size, state, created_at, marked_at FROM segments
				WHERE key > $1 ORDER BY key LIMIT $2)
			SELECT s.key, s.size, s.state, s.created_at, s.marked_at,
			       c.topic_id, c.partition, c.base_offset, c.last_offset, c.pos, c.len, c.max_timestamp, c.real_offsets
			FROM s LEFT JOIN chunks c ON c.segment_id = s.id
			ORDER BY s.key, c.topic_id, c.partition, c.base_offset`, after, inventoryBatch)
		if err != nil {
			return fmt.Errorf("postgres: inventory segments after %q: %w", after, err)
		}
		var (
			recs []catalog.SegmentRecord
			cur  *catalog.SegmentRecord
		)
		for rows.Next() {
			var (
				key, state                           string
				size                                 int64
				created                              time.Time
				marked                               *time.Time
				topic, base, last, pos, length, maxT *int64
				part                                 *int32
				real                                 *bool
			)
			if err := rows.Scan(&key, &size, &state, &created, &marked, &topic, &part, &base, &last, &pos, &length, &maxT, &real); err != nil {
				rows.Close()
				return fmt.Errorf("postgres: inventory segments: %w", err)
			}
			if cur == nil || cur.Key != key {
				recs = append(recs, catalog.SegmentRecord{Key: key, Size: size, State: catalog.SegmentState(state), CreatedAt: created})
				cur = &recs[len(recs)-1]
				if marked != nil {
					cur.MarkedAt = *marked
				}
			}
			if topic != nil {
				cur.Chunks = append(cur.Chunks, catalog.Chunk{TopicID: *topic, Partition: *part, BaseOffset: *base, LastOffset: *last,
					SegmentKey: key, SegmentSize: size, Pos: *pos, Len: *length, MaxTimestamp: *maxT, RealOffsets: *real})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("postgres: inventory segments: %w", err)
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
