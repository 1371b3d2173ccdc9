// Package objstore owns access to the object store: a small interface with create-only
// puts, and its implementations (S3 and compatible stores such as MinIO, and the local
// filesystem for the embedded mode), plus decorators (faults, metrics).
package objstore

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrNotExist is returned (wrapped) when a key does not exist.
	ErrNotExist = errors.New("object does not exist")
	// ErrExists is returned (wrapped) by Put when the key already holds different content.
	ErrExists = errors.New("object already exists")
)

// Info describes one stored object.
type Info struct {
	Key      string
	Size     int64
	Modified time.Time
}

// Store is the whole object store interface. Consumers declare the narrow part they
// need; implementations assert they satisfy Store.
type Store interface {
	// Put creates key with body. It never overwrites: when key exists with the same
	// size and checksum (an SDK retry of a put that had already succeeded) it returns
	// nil; with other content it returns ErrExists.
	Put(ctx context.Context, key string, body []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange returns exactly n bytes starting at off, or an error.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	Head(ctx context.Context, key string) (Info, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List calls fn for every key with prefix, in lexical order, paging as needed.
	List(ctx context.Context, prefix string, fn func(Info) error) error
}
