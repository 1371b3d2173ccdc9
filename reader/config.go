package reader

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/strata-io/strata/internal/membudget"
)

// Config tunes a Reader. A zero field takes its default.
type Config struct {
	// Got, when set, is told the topics each object-store GET made to serve a fetch
	// was for (per-topic usage), with each one's share of the GET: by its batches'
	// bytes in the range read when the object's footer is at hand (in the range, as
	// for an object read whole, or in the footer cache), else wholly the fetch's
	// topic. A GET's shares sum to 1. Called on the fetch's goroutine: it must not
	// block. GETs made for no fetch (prefetching) are not told.
	Got func(topicID int64, share float64)
	// CacheBytes bounds the in-memory block cache (LRU by bytes). Decoded footers of
	// objects read through their footer are kept besides, in up to CacheBytes/16.
	// Default 256 MiB.
	CacheBytes int64
	// BlockSize is the cache's unit: blocks are aligned ranges of an object, and a
	// miss GETs the block(s) covering what a fetch needs, clamped to the object's
	// size. Default 4 MiB.
	BlockSize int64
	// PollInterval is how often a long-poll re-reads the high watermark when no
	// commit notification wakes it (notifications are best effort). Default 500ms.
	PollInterval time.Duration
	// DefaultMaxRecords applies when a Fetch leaves MaxRecords at 0. Default 500.
	DefaultMaxRecords int
	// DefaultMaxBytes applies when a Fetch leaves MaxBytes at 0. Default 1 MiB.
	DefaultMaxBytes int64
	// MaxRecords caps Fetch.MaxRecords (larger asks are clamped). Default 10,000.
	MaxRecords int
	// MaxBytes caps Fetch.MaxBytes (larger asks are clamped). Default 16 MiB.
	MaxBytes int64
	// MaxWait caps Fetch.Wait (longer asks are clamped). Default 30s.
	MaxWait time.Duration
	// DiskCacheDir, when set, gives the block cache a disk tier there: blocks evicted
	// from memory are written to files and read back instead of GET again, and kept
	// across restarts. One directory per node. Default: none (memory only).
	DiskCacheDir string
	// DiskCacheBytes bounds the disk tier. Default 4 GiB when DiskCacheDir is set.
	DiskCacheBytes int64
	// WholeObjectBytes: an object up to this size is read whole on its first miss,
	// in one GET, rather than block by block as its chunks are asked for; a first
	// reader of new data then costs one GET per writer object. Default three blocks
	// (12 MiB), above the writer's default flush; -1 turns it off.
	WholeObjectBytes int64
	// Memory is the node's memory budget. Blocks are reserved there while they are
	// read into the cache (the cache itself is a standing reservation the node makes:
	// MemoryBytes), and evicted blocks while they wait for the disk tier; a fetch's own
	// bytes go to the hold it carries (Fetch.Memory). Nil: not accounted.
	Memory *membudget.Budget
	// MemoryWait bounds how long a fetch waits for room in the budget before it fails
	// with ErrMemoryExhausted (a later batch that finds no room ends the fetch early,
	// smaller, instead). Default 1s.
	MemoryWait time.Duration
	// NoPrefetch turns off reading ahead for sequential readers: by default, once a
	// fetch is served, the bytes that follow it (the rest of its chunk or the head of
	// the next one) are loaded into the cache in the background while Run runs.
	NoPrefetch bool
}

// Defaults.
const (
	DefaultCacheBytes        = 256 << 20
	DefaultBlockSize         = 4 << 20
	DefaultPollInterval      = 500 * time.Millisecond
	DefaultDefaultMaxRecords = 500
	DefaultDefaultMaxBytes   = 1 << 20
	DefaultMaxRecordsCap     = 10000
	DefaultMaxBytesCap       = 16 << 20
	DefaultMaxWait           = 30 * time.Second
	DefaultDiskCacheBytes    = 4 << 30
	DefaultMemoryWait        = time.Second
)

// maxMaxBytes bounds Config.MaxBytes.
const maxMaxBytes = 1 << 30

// minBlockSize keeps the cache from degenerating into one GET per batch header.
const minBlockSize = 4 << 10

// ErrInvalidConfig is wrapped by every Config.Validate error.
var ErrInvalidConfig = errors.New("reader: invalid config")

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.DefaultMaxRecords == 0 {
		c.DefaultMaxRecords = DefaultDefaultMaxRecords
	}
	if c.DefaultMaxBytes == 0 {
		c.DefaultMaxBytes = DefaultDefaultMaxBytes
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = DefaultMaxRecordsCap
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytesCap
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.WholeObjectBytes == 0 {
		c.WholeObjectBytes = 3 * c.BlockSize
	}
	if c.MemoryWait == 0 {
		c.MemoryWait = DefaultMemoryWait
	}
	if c.DiskCacheDir != "" && c.DiskCacheBytes == 0 {
		c.DiskCacheBytes = DefaultDiskCacheBytes
	}
	return c
}

// MemoryBytes is what the reader holds for its whole life, the node's standing
// reservation for it: the block cache and the decoded footers kept beside it.
func (c Config) MemoryBytes() int64 {
	c = c.withDefaults()
	return c.CacheBytes + c.CacheBytes/16
}

// Validate checks c (zero fields meaning their defaults) and says how to fix it.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case c.BlockSize < minBlockSize:
		return bad("block size %d: must be at least %d bytes (default %d)", c.BlockSize, minBlockSize, DefaultBlockSize)
	case c.CacheBytes < c.BlockSize:
		return bad("cache bytes %d: must hold at least one block (block size %d); raise the cache or lower the block size", c.CacheBytes, c.BlockSize)
	case c.PollInterval < time.Millisecond:
		return bad("poll interval %s: must be at least 1ms (default %s)", c.PollInterval, DefaultPollInterval)
	case c.MaxRecords < 1:
		return bad("max records %d: must be positive (default %d)", c.MaxRecords, DefaultMaxRecordsCap)
	case c.MaxBytes < 1 || c.MaxBytes > maxMaxBytes:
		// A fetch is held in memory whole.
		return bad("max bytes %d: must be between 1 and %d (default %d)", c.MaxBytes, maxMaxBytes, DefaultMaxBytesCap)
	case c.DefaultMaxRecords < 1 || c.DefaultMaxRecords > c.MaxRecords:
		return bad("default max records %d: must be between 1 and max records %d", c.DefaultMaxRecords, c.MaxRecords)
	case c.DefaultMaxBytes < 1 || c.DefaultMaxBytes > c.MaxBytes:
		return bad("default max bytes %d: must be between 1 and max bytes %d", c.DefaultMaxBytes, c.MaxBytes)
	case c.MaxWait < 0:
		return bad("max wait %s: must not be negative (default %s)", c.MaxWait, DefaultMaxWait)
	case c.DiskCacheBytes < 0 || (c.DiskCacheDir != "" && c.DiskCacheBytes < c.BlockSize):
		return bad("disk cache bytes %d: must hold at least one block (block size %d); default %d", c.DiskCacheBytes, c.BlockSize, int64(DefaultDiskCacheBytes))
	case c.DiskCacheBytes > 0 && c.DiskCacheDir == "":
		return bad("disk cache bytes %d without a disk cache directory: set DiskCacheDir too", c.DiskCacheBytes)
	}
	if c.DiskCacheDir != "" {
		// Checked here, at start-up, rather than failing on the first eviction.
		if err := os.MkdirAll(c.DiskCacheDir, 0o755); err != nil {
			return bad("disk cache directory: %v: give a writable directory", err)
		}
		f, err := os.CreateTemp(c.DiskCacheDir, ".tmp-*")
		if err != nil {
			return bad("disk cache directory %s is not writable: %v", c.DiskCacheDir, err)
		}
		f.Close()
		os.Remove(f.Name())
	}
	return nil
}
