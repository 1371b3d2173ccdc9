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
