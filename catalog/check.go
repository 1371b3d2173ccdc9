package catalog

import (
	"context"
	"time"
)

// SegmentRecord is one segment row with its chunk rows, as `strata check` compares
// them with the object store.
type SegmentRecord struct {
	Key       string
	Size      int64
	State     SegmentState
	CreatedAt time.Time // when the row was written (database clock)
	MarkedAt  time.Time // when it left 'live'; zero while live
	// Chunks are the rows pointing into the object, ascending by topic, partition and
	// offset, with SegmentKey and SegmentSize filled.
	Chunks []Chunk
}

// Inventory is the read-only view of the catalog that a consistency check needs,
// implemented by catalog/postgres and catalog/sqlite. It is separate from Catalog so
// that nothing on the hot paths depends on it.
type Inventory interface {
	// InventorySegments calls fn for every segment row in key order, with its chunk
	// rows, until fn returns an error (returned as is). Rows of deleted topics are
	// included. Segments are read in batches, each its own snapshot: a row that a
	// concurrent compaction moves may be seen twice or not at all.
	InventorySegments(ctx context.Context, fn func(SegmentRecord) error) error
	// Now is the database clock.
	Now(ctx context.Context) (time.Time, error)
}

// InventoryBatch is how many segments one page of InventorySegments reads.
const InventoryBatch = 500

// InventoryPages is InventorySegments for both backends, around their SQL: keyset pages
// of segments in key order. page reads up to limit segments with keys after after, each
// with its chunk rows, in one query ordered by segment key, and calls row for every row
// of the answer: the segment's columns, and its chunk row (nil for a segment without
// rows). InventoryPages groups the rows into SegmentRecords and hands them to fn.
func InventoryPages(ctx context.Context, page func(ctx context.Context, after string, limit int, row func(SegmentRecord, *Chunk)) error, fn func(SegmentRecord) error) error {
	after := ""
	for {
		var recs []SegmentRecord
		err := page(ctx, after, InventoryBatch, func(s SegmentRecord, c *Chunk) {
			if len(recs) == 0 || recs[len(recs)-1].Key != s.Key {
				recs = append(recs, s)
			}
			if c != nil {
				cur := &recs[len(recs)-1]
				c.SegmentKey, c.SegmentSize = cur.Key, cur.Size
				cur.Chunks = append(cur.Chunks, *c)
			}
		})
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(recs) < InventoryBatch {
			return nil
		}
		after = recs[len(recs)-1].Key
	}
}
