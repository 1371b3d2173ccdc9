package engine

import (
	"context"

	"github.com/strata-io/strata/catalog"
)

// inventoryBatch is how many segments one page of InventorySegments reads.
const inventoryBatch = 500

// InventoryPages is InventorySegments for both backends, around their SQL: keyset pages
// of segments in key order. page reads up to limit segments with keys after after, each
// with its chunk rows, in one query ordered by segment key, and calls row for every row
// of the answer: the segment's columns, and its chunk row (nil for a segment without
// rows). InventoryPages groups the rows into SegmentRecords and hands them to fn.
func InventoryPages(ctx context.Context, page func(ctx context.Context, after string, limit int, row func(catalog.SegmentRecord, *catalog.Chunk)) error, fn func(catalog.SegmentRecord) error) error {
	after := ""
	for {
		var recs []catalog.SegmentRecord
		err := page(ctx, after, inventoryBatch, func(s catalog.SegmentRecord, c *catalog.Chunk) {
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
		if len(recs) < inventoryBatch {
			return nil
		}
		after = recs[len(recs)-1].Key
	}
}

// InventoryBackend reads the inventory's pages (InventoryPages' page).
type InventoryBackend interface {
	InventoryPage(ctx context.Context, after string, limit int, row func(catalog.SegmentRecord, *catalog.Chunk)) error
}
