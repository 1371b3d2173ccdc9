package segment

import (
	"encoding/binary"
	"io"
)

// A stored batch goes out with its real base offset: offsets are assigned by the
// catalog's commit, after the object was uploaded, so the stored batch carries none (the
// CRC does not cover the field). Every front end that serves stored batches — the HTTP
// API's binary fetch and the Kafka protocol's Fetch — writes them through these two
// functions, so the rewriting is done once, the same way. Stored batches are shared with
// the reader's cache and never written: both functions leave batch as it is.

// AppendServed appends batch to dst as served: its base offset set to base, every
// other byte as stored. It panics if batch is shorter than 8 bytes: callers pass batches
// SplitBatches checked.
func AppendServed(dst, batch []byte, base int64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(base))
	return append(dst, batch[offLength:]...)
}

// WriteServed writes batch to w as AppendServed serves it, without copying it: its
// base offset, then the rest as stored (a large batch goes to w as it is).
func WriteServed(w io.Writer, batch []byte, base int64) error {
	var head [offLength]byte
	binary.BigEndian.PutUint64(head[:], uint64(base))
	if _, err := w.Write(head[:]); err != nil {
		return err
	}
	_, err := w.Write(batch[offLength:])
	return err
}
