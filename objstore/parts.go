package objstore

import (
	"bytes"
	"errors"
	"io"
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
