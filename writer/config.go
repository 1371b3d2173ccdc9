package writer

import (
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/segment"
)

// Defaults applied to zero fields of Config.
const (
	DefaultLinger        = 50 * time.Millisecond
	DefaultMaxFlushBytes = 8 << 20
	DefaultBufferBytes   = 64 << 20
	DefaultMaxInflight   = 4
	DefaultPutTimeout    = 30 * time.Second
	DefaultCommitTimeout = 10 * time.Second
	DefaultSettleTimeout = 30 * time.Second
)

// maxObjectBytes is the largest object one S3 PUT may create.
const maxObjectBytes = 5 << 30

// Config tunes a Writer. The zero value of every field means its default.
type Config struct {
	// Linger is how long a request may wait in the buffer before its flush is cut: the
	// flush interval, counted from the first request of the flush. Longer lingers mean
	// fewer, larger objects (PUTs and catalog transactions are what the operator pays
	// for) and more latency. A lingered buffer that no in-flight slot (MaxInflight)
	// would take yet is not cut: it goes on filling until a slot frees or it is full.
	// Default 50ms.
	Linger time.Duration
	// MaxFlushBytes cuts a flush early when the buffer reaches it, so objects stay
	// bounded. Sizes are estimated as uncompressed record bytes plus Kafka's record and
	// batch overheads. A single request larger than this is refused with ErrTooLarge.
	// Default 8 MiB; at most 5 GiB (one S3 PUT).
	MaxFlushBytes int64
	// BufferBytes caps the bytes held by the writer: buffered, uploading and
	// committing. Beyond it Produce fails at once with ErrBufferFull (back-pressure)
	// rather than let memory grow without bound. At least MaxFlushBytes.
	// Default 64 MiB, or MaxFlushBytes when that is larger.
	BufferBytes int64
	// MaxInflight is how many flushes may be between the start of their upload and the
	// end of their commit at once. Uploads overlap; commits still run one at a time in
	// flush order. Default 4.
	MaxInflight int
	// Compression is the codec for requests that leave Request.Compression at
	// CompressionNone. Default CompressionNone: the write path is CPU-bound long before
	// the object store is, and object stores bill PUTs, not bytes.
	Compression segment.Compression
	// PutTimeout bounds one object PUT (the SDK's own retries included). Default 30s.
	PutTimeout time.Duration
	// HedgeQuantile: a PUT slower than this quantile of the recent ones is sent again
	// under a fresh key, and the first to land is committed (hedge.go). 0: the
	// default, DefaultHedgeQuantile; below 0: never hedge.
	HedgeQuantile float64
	// CommitTimeout bounds one catalog commit; past it the outcome is unknown and is
	// settled. Keep it below the catalog's commit_timeout. Default 10s.
	CommitTimeout time.Duration
	// SettleTimeout bounds how long an unknown commit outcome is retried with Settle
	// before its requests are answered with ErrCommit and ErrOutcomeUnknown.
	// Default 30s.
	SettleTimeout time.Duration
	// Memory is the node's memory budget: every request's bytes are reserved there
	// while the writer holds them (buffered, encoding, uploading), beside BufferBytes;
	// when it is spent, Produce fails at once with ErrBufferFull. Nil: not accounted.
	Memory *membudget.Budget
	// Committed, when set, is told the partitions' new high watermarks after each
	// commit, on the commit's goroutine: the node's reader wakes its long-polls and
	// tails from it at once, instead of after the catalog's notification has gone
	// out to the catalog and back (under load, a round trip through a busy pool and
	// the listener's connection). It must not block. The catalog's notification still
	// goes out, for the other nodes.
	Committed func([]catalog.Watermark)
	// Written, when set, is handed each object once its PUT has succeeded and before
	// its commit, on the flush's goroutine: the node's reader caches it for the tails
	// and long-polls that will read it the moment it is committed. parts alias request
	// bodies: it must copy what it keeps before it returns.
	Written func(key string, parts [][]byte)
	// Usage, when set, is told after each flush whose PUT succeeded what it carried
	// per (topic, principal): the share of the object (and of its commit) by batch
	// bytes, and the bytes and records that committed. One call per flush, on the
	// flush's goroutine: it must not block.
	Usage func([]TopicUsage)
	// Now is the writer's clock: it stamps LogAppendTime records and dates segment
	// keys. Default time.Now; tests inject their own. Linger uses real time.
	Now func() time.Time
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.MaxFlushBytes == 0 {
		c.MaxFlushBytes = DefaultMaxFlushBytes
	}
	if c.BufferBytes == 0 {
		c.BufferBytes = max(DefaultBufferBytes, c.MaxFlushBytes)
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.PutTimeout == 0 {
		c.PutTimeout = DefaultPutTimeout
	}
	if c.HedgeQuantile == 0 {
		c.HedgeQuantile = DefaultHedgeQuantile
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = DefaultCommitTimeout
	}
	if c.SettleTimeout == 0 {
		c.SettleTimeout = DefaultSettleTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every field that is wrong, once defaults are applied, and how to fix
// it. Call it at start-up: New panics on a config that does not validate.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("writer config: "+format, args...))
	}
	if c.Linger < 0 {
		bad("Linger is %s: set a positive duration (0 means the default, %s)", c.Linger, DefaultLinger)
	}
	if c.MaxFlushBytes < 0 || c.MaxFlushBytes > maxObjectBytes {
		bad("MaxFlushBytes is %d: set it between 1 and %d (5 GiB, one S3 PUT); 0 means the default, %d", c.MaxFlushBytes, int64(maxObjectBytes), DefaultMaxFlushBytes)
	}
	if c.BufferBytes < 0 {
		bad("BufferBytes is %d: set a positive size (0 means the default, %d)", c.BufferBytes, DefaultBufferBytes)
	} else if c.BufferBytes < c.MaxFlushBytes {
		bad("BufferBytes (%d) is below MaxFlushBytes (%d): a full flush must fit in the buffer; raise BufferBytes or lower MaxFlushBytes", c.BufferBytes, c.MaxFlushBytes)
	}
	if c.MaxInflight < 0 || c.MaxInflight > 64 {
		bad("MaxInflight is %d: set it between 1 and 64 (0 means the default, %d)", c.MaxInflight, DefaultMaxInflight)
	}
	if c.HedgeQuantile >= 1 {
		bad("HedgeQuantile is %g: set it between 0.5 and 0.999 (0 means the default, %g; below 0 never hedges)", c.HedgeQuantile, DefaultHedgeQuantile)
	} else if c.HedgeQuantile > 0 && c.HedgeQuantile < 0.5 {
		bad("HedgeQuantile is %g: below 0.5 would send a second PUT for most flushes; set it between 0.5 and 0.999", c.HedgeQuantile)
	}
	if c.Compression < segment.CompressionNone || c.Compression > segment.CompressionZstd {
		bad("Compression is %d: use one of none (0), gzip (1), snappy (2), lz4 (3), zstd (4)", c.Compression)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"PutTimeout", c.PutTimeout}, {"CommitTimeout", c.CommitTimeout}, {"SettleTimeout", c.SettleTimeout}} {
		if d.v < 0 {
			bad("%s is %s: set a positive duration (0 means the default)", d.name, d.v)
		}
	}
	return errors.Join(errs...)
}
