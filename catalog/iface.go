package catalog

import (
	"context"
	"time"
)

// Catalog is the whole catalog, implemented by catalog/postgres and catalog/sqlite and
// proved by catalog/catalogtest. The roles declare the narrow parts they use.
type Catalog interface {
	CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (Topic, error)
	Topic(ctx context.Context, name string) (Topic, error)
	TopicByID(ctx context.Context, id int64) (Topic, error)
	Topics(ctx context.Context) ([]Topic, error)
	DeleteTopic(ctx context.Context, name string) error
	// UpdateTopic grows the partition count (0: unchanged; fewer: ErrInvalidPartitions)
	// and sets or (with an empty value) removes configs, validated as a whole.
	UpdateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (Topic, error)
	Partitions(ctx context.Context, topicID int64) ([]PartitionInfo, error)

	// Commit commits one flush in one transaction and one round trip. A request that
	// fails its checks gets its own Result.Err and leaves no rows. The error return is
	// for the whole flush: ErrCommitTooLate, or anything else, after which the outcome
	// is unknown and must be settled with Settle.
	Commit(ctx context.Context, seg Segment) ([]Result, error)
	// Settle settles a commit whose outcome is unknown with the fencing insert on
	// seg.Key: it waits for any in-flight commit of the key, then either finds it
	// (results read back from chunk rows; requests without rows get
	// ErrCommitAborted) or wins and returns ErrCommitAborted.
	Settle(ctx context.Context, seg Segment) ([]Result, error)

	// Chunks returns the chunks holding offset and the following ones, up to about
	// maxBytes (at least one chunk). offset == high watermark returns no chunks;
	// outside [log start, high watermark] returns ErrOffsetOutOfRange (wrapped) with
	// the partition's state in the ChunkList.
	Chunks(ctx context.Context, topicID int64, partition int32, offset, maxBytes int64) (ChunkList, error)
	// OffsetForTime returns the earliest offset whose record timestamp is at or after
	// ts (unix ms), at chunk granularity (the base offset of the first chunk whose
	// running maximum timestamp reaches ts), or the high watermark when none.
	OffsetForTime(ctx context.Context, topicID int64, partition int32, ts int64) (int64, error)

	// Listen calls fn for commit notifications until ctx ends, reconnecting as needed.
	// Notifications are best effort: readers also poll.
	Listen(ctx context.Context, fn func(Watermark)) error
	// Now is the database clock.
	Now(ctx context.Context) (time.Time, error)
	Close() error
}
