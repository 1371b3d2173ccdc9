package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/strata-io/strata/internal/crc32c"
)

// PartsLen is the size of an object given as parts laid end to end.
func PartsLen(parts [][]byte) int64 {
	var n int64
	for _, p := range parts {
		n += int64(len(p))
	}
	return n
}

// PartsEqual reports whether parts laid end to end are b.
func PartsEqual(parts [][]byte, b []byte) bool {
	if PartsLen(parts) != int64(len(b)) {
		return false
	}
	for _, p := range parts {
		if !bytes.Equal(p, b[:len(p)]) {
			return false
		}
		b = b[len(p):]
	}
	return true
}

// PartsReader reads parts laid end to end without joining them. It seeks, so an HTTP
// client can send it again on a retry.
type PartsReader struct {
	parts [][]byte
	size  int64
	off   int64 // position in the whole
	i     int   // the part holding off
	in    int   // off's position in parts[i]
}

// NewPartsReader returns a reader of parts laid end to end.
func NewPartsReader(parts [][]byte) *PartsReader {
	return &PartsReader{parts: parts, size: PartsLen(parts)}
}

// Close does nothing (the parts are the caller's); with it a PartsReader is an HTTP
// request body that sendbody's connections write uncopied.
func (r *PartsReader) Close() error { return nil }

// Len is how many bytes are left to read.
func (r *PartsReader) Len() int { return int(r.size - r.off) }

// Read implements io.Reader.
func (r *PartsReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.i < len(r.parts) {
		c := copy(p[n:], r.parts[r.i][r.in:])
		n += c
		r.in += c
		r.off += int64(c)
		if r.in == len(r.parts[r.i]) {
			r.i, r.in = r.i+1, 0
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// WriteTo implements io.WriterTo: each part goes to w as it is, uncopied.
func (r *PartsReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for r.i < len(r.parts) {
		n, err := w.Write(r.parts[r.i][r.in:])
		total += int64(n)
		r.off += int64(n)
		r.in += n
		if err != nil {
			return total, err
		}
		r.i, r.in = r.i+1, 0
	}
	return total, nil
}

// Seek implements io.Seeker.
func (r *PartsReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.size
	default:
		return r.off, errors.New("objstore: parts reader: bad whence")
	}
	if offset < 0 {
		return r.off, errors.New("objstore: parts reader: negative position")
	}
	r.off, r.i, r.in = offset, 0, 0
	for rest := offset; r.i < len(r.parts); r.i++ {
		if rest < int64(len(r.parts[r.i])) {
			r.in = int(rest)
			break
		}
		rest -= int64(len(r.parts[r.i]))
	}
	return offset, nil
}

// CRC32CPutter is a Store that takes the CRC-32C of the parts it puts from the caller
// and has the object store verify it (S3's x-amz-checksum-crc32c), instead of reading
// the parts to compute one.
type CRC32CPutter interface {
	// PutPartsCRC32C is PutParts of parts whose CRC-32C, laid end to end, is crc; when
	// their bytes do not match it the error wraps ErrChecksum and nothing is stored.
	PutPartsCRC32C(ctx context.Context, key string, parts [][]byte, crc uint32) error
}

// PutPartsCRC32C puts parts under key through s, checked against crc, their CRC-32C
// laid end to end: by the store when s is a CRC32CPutter, else here before PutParts.
// A writer whose object holds Kafka batches knows crc from the batches' own CRCs,
// checked when they were accepted (segment.EncodeParts), so bytes changed in memory
// since fail the put (ErrChecksum) instead of being stored.
func PutPartsCRC32C(ctx context.Context, s interface {
	PutParts(ctx context.Context, key string, parts [][]byte) error
}, key string, parts [][]byte, crc uint32) error {
	if cp, ok := s.(CRC32CPutter); ok {
		return cp.PutPartsCRC32C(ctx, key, parts, crc)
	}
	var got uint32
	for _, p := range parts {
		got = crc32c.Update(got, p)
	}
	if got != crc {
		return fmt.Errorf("objstore: put %s: the parts' CRC-32C is %#08x, not %#08x: %w", key, got, crc, ErrChecksum)
	}
	return s.PutParts(ctx, key, parts)
}
