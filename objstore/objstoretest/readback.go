package objstoretest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"maps"
	"slices"
	"testing"

	"github.com/strata-io/strata/internal/crc32c"
	"github.com/strata-io/strata/objstore"
)

// Reader reads what a store wrote without going through the store: another client of
// the same service (minio-go for S3), so that what Strata writes is shown to be plain
// objects any tool reads alike.
type Reader interface {
	// List lists every object under the store's root (its bucket and prefix), keys
	// relative to it, with sizes; Body and Checksums may be empty.
	List(t *testing.T) []RawObject
	// Get reads one object (key relative to the root) with its bytes and the checksums
	// the service reports for it, by name.
	Get(t *testing.T, key string) RawObject
}

// RawObject is an object as another client sees it.
type RawObject struct {
	Key  string
	Size int64
	Body []byte
	// Checksums by name ("x-amz-checksum-crc32c", "x-amz-meta-strata-crc32c"), each
	// base64 of a big-endian CRC-32C, as S3 spells it.
	Checksums map[string]string
}

// ReadBack adds the read-back test to the suite.
type ReadBack struct {
	// New returns a Reader of what s stores.
	New func(t *testing.T, s objstore.Store) Reader
	// Checksums are the names every object must have among its Checksums, each the
	// CRC-32C of its bytes.
	Checksums []string
}

// Option adds to the suite.
type Option func(*options)

type options struct {
	readBack *ReadBack
}

// WithReadBack runs the read-back test: what the store put, another client lists and
// reads with the same keys, sizes, bytes and checksums.
func WithReadBack(rb ReadBack) Option { return func(o *options) { o.readBack = &rb } }

// CRC32C is body's CRC-32C as S3 spells checksums: base64 of the big-endian value.
func CRC32C(body []byte) string {
	sum := crc32c.Checksum(body)
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, sum))
}

func testReadBack(t *testing.T, s objstore.Store, rb ReadBack) {
	objects := map[string][]byte{
		"segments/0001.seg":      pattern(64<<10+3, 3),
		"segments/nested/2.seg":  []byte("a small object"),
		"empty":                  {},
		"big":                    pattern(2<<20+5, 4),
		"odd keys/a b+c=d%e&f~é": []byte("a key that needs escaping on the wire"),
	}
	for k, b := range objects {
		mustPut(t, s, k, b)
	}
	r := rb.New(t, s)

	listed := map[string]int64{}
	for _, o := range r.List(t) {
		listed[o.Key] = o.Size
	}
	want := map[string]int64{}
	for k, b := range objects {
		want[k] = int64(len(b))
	}
	if !maps.Equal(listed, want) {
		t.Errorf("another client lists %v, want %v (keys relative to the store's root, sizes)", listed, want)
	}
	for _, k := range slices.Sorted(maps.Keys(objects)) {
		body := objects[k]
		o := r.Get(t, k)
		if o.Size != int64(len(body)) || !bytes.Equal(o.Body, body) {
			t.Errorf("another client reads %q as %d bytes (size %d), want the %d put", k, len(o.Body), o.Size, len(body))
		}
		sum := CRC32C(body)
		for _, name := range rb.Checksums {
			if got, ok := o.Checksums[name]; !ok || got != sum {
				t.Errorf("%q: checksum %s is %q (present %v), want %q (CRC-32C of the bytes put)", k, name, got, ok, sum)
			}
		}
	}

	// A delete is seen by the other client too.
	if err := s.Delete(t.Context(), "segments/0001.seg"); err != nil {
		t.Fatal(err)
	}
	for _, o := range r.List(t) {
		if o.Key == "segments/0001.seg" {
			t.Errorf("another client still lists %q after Delete", o.Key)
		}
	}
}
