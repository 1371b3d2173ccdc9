package segment

import "math/bits"

// Kafka's record fields are zigzag varints (int32) and varlongs (int64); the footer uses
// the same encodings. The readers here are stricter than Kafka's: they refuse overlong
// (non-minimal) encodings and bits beyond the type's width, so every value has exactly
// one encoding and a successful decode re-encodes to the same bytes.

func uvarintLen(u uint64) int { return (bits.Len64(u|1) + 6) / 7 }

func zigzag32(v int32) uint64 { return uint64(uint32(v<<1) ^ uint32(v>>31)) }

func zigzag64(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func varintLen(v int32) int { return uvarintLen(zigzag32(v)) }

func varlongLen(v int64) int { return uvarintLen(zigzag64(v)) }

// bytesLen is the encoded size of a Kafka varint-length-prefixed byte string; nil is
// the null string (length -1).
func bytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int32(len(b))) + len(b)
}

func appendUvarint(dst []byte, u uint64) []byte {
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

func appendVarlong(dst []byte, v int64) []byte { return appendUvarint(dst, zigzag64(v)) }

// readUvarint reads a minimal unsigned varint of at most maxBytes bytes whose last byte
// is at most lastMax. It returns n == 0 on any malformation or truncation.
func readUvarint(b []byte, maxBytes int, lastMax byte) (uint64, int) {
	var x uint64
	for i := 0; i < len(b) && i < maxBytes; i++ {
		c := b[i]
		if c < 0x80 {
			if i > 0 && c == 0 {
				return 0, 0 // overlong
			}
			if i == maxBytes-1 && c > lastMax {
				return 0, 0 // overflows the type
			}
			return x | uint64(c)<<(7*uint(i)), i + 1
		}
		x |= uint64(c&0x7f) << (7 * uint(i))
	}
	return 0, 0
}

// readVarint32 reads a zigzag varint that fits in an int32 (at most 5 bytes).
func readVarint32(b []byte) (int32, int) {
	u, n := readUvarint(b, 5, 0x0f)
	if n == 0 {
		return 0, 0
	}
	return int32(uint32(u)>>1) ^ -int32(u&1), n
}

// readVarint64 reads a zigzag varlong (at most 10 bytes).
func readVarint64(b []byte) (int64, int) {
	u, n := readUvarint(b, 10, 0x01)
	if n == 0 {
		return 0, 0
	}
	return int64(u>>1) ^ -int64(u&1), n
}

// readUvarint64 reads an unsigned varint of up to 64 bits.
func readUvarint64(b []byte) (uint64, int) { return readUvarint(b, 10, 0x01) }
