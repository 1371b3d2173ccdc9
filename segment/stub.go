package segment

// STUB: the segment helper replaces this file with the real implementation.

import "time"

// EncodeOptions tunes Encode.
type EncodeOptions struct {
	// IndexInterval, when > 0, adds a sparse index entry at least every IndexInterval
	// bytes (compactor objects, whose batches carry real offsets).
	IndexInterval int64
}

// TrailerSize is the fixed size of the trailer that ends every object; reading the
// last TrailerSize bytes tells the footer's length.
const TrailerSize = 16

// Encode lays out batches as one object. infos[i] describes batches[i].
func Encode(batches []Batch, opts EncodeOptions) (obj []byte, infos []BatchInfo, err error) {
	panic("todo")
}

// ReadFooter decodes the footer of a whole object.
func ReadFooter(obj []byte) (Footer, error) { panic("todo") }

// ParseTrailer reads the trailer (the last TrailerSize bytes of an object) and returns
// the footer's length in bytes (the footer ends where the trailer starts).
func ParseTrailer(tail []byte) (footerLen int64, err error) { panic("todo") }

// DecodeFooter decodes footer bytes (without trailer).
func DecodeFooter(b []byte) (Footer, error) { panic("todo") }

// SplitBatches splits data holding whole batches into one sub-slice per batch,
// checking lengths, magic and CRC (no decompression).
func SplitBatches(data []byte) ([][]byte, error) { panic("todo") }

// SetBaseOffset rewrites a raw batch's base offset in place (not covered by the CRC).
func SetBaseOffset(batch []byte, base int64) { panic("todo") }

// DecodeBatch decodes one raw batch, decompressing and validating it.
func DecodeBatch(raw []byte) (DecodedBatch, error) { panic("todo") }

// NewKey returns a new unique, time-ordered object key for a segment created at t.
func NewKey(t time.Time) string { panic("todo") }

// KeyTime returns the creation time encoded in a key made by NewKey.
func KeyTime(key string) (time.Time, error) { panic("todo") }
