// Package objstore owns access to the object store: a small interface with create-only
// puts, and its implementations (S3 and compatible stores such as MinIO, and the local
// filesystem for the embedded mode), plus decorators (faults, metrics).
package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrNotExist is returned (wrapped) when a key does not exist.
	ErrNotExist = errors.New("object does not exist")
	// ErrExists is returned (wrapped) by Put when the key already holds different content.
	ErrExists = errors.New("object already exists")
	// ErrRange is returned (wrapped) by GetRange when the requested range does not lie
	// inside the object, so the caller can tell a bad offset from a missing object.
	ErrRange = errors.New("range outside object")
	// ErrInvalidKey is returned (wrapped) for a key that CheckKey refuses.
	ErrInvalidKey = errors.New("invalid object key")
	// ErrChecksum is returned (wrapped) by PutPartsCRC32C when the parts' bytes do not
	// match the checksum given for them; nothing is stored.
	ErrChecksum = errors.New("object bytes do not match their checksum")
)

// CheckKey reports whether key is portable across every implementation: non-empty
// slash-separated segments, none empty, "." or "..", no leading slash, no backslash or
// NUL. S3 would accept more, but a key that works there and not on the filesystem store
// would make the embedded mode behave differently from production, so every
// implementation refuses the same keys.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("%w: %q contains a backslash or NUL", ErrInvalidKey, key)
	}
	for _, seg := range strings.Split(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %q has an empty segment (leading, trailing or double slash)", ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrInvalidKey, key, seg)
		}
	}
	return nil
}

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
	// PutParts is Put of the parts laid end to end, without joining them: a writer
	// sends an object built around buffers it already holds (segment.EncodeParts).
	PutParts(ctx context.Context, key string, parts [][]byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange returns exactly n bytes starting at off, or an error.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	Head(ctx context.Context, key string) (Info, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List calls fn for every key with prefix, in lexical order, paging as needed.
	List(ctx context.Context, prefix string, fn func(Info) error) error
}
