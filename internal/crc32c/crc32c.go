// Package crc32c computes and combines CRC-32C (Castagnoli) checksums, the checksum of
// Kafka record batches, of segment footers and of S3's x-amz-checksum-crc32c: the one
// table the module uses. Combine gives the checksum
// of A‖B from those of A and B and B's length without reading either, so a segment
// object's checksum is made from its batches' own CRCs instead of a pass over their
// bytes (zlib's crc32_combine: multiplying by x^(8·len(B)) modulo the polynomial).
package crc32c

import "hash/crc32"

var table = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, table) }

// Update is the CRC-32C of the bytes crc covers followed by b.
func Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, table, b) }

// Combine is the CRC-32C of A‖B, given crcA of A, crcB of B and lenB, B's length.
func Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	return multModP(xPow8n(lenB), crcA) ^ crcB
}

// poly is the Castagnoli polynomial, bit-reversed as the checksum is computed.
const poly = 0x82f63b78

// multModP is a·b modulo poly, both polynomials in reversed bit order (x^0 is the top
// bit). a must not be 0.
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
}

// x2n[k] is x^(2^k) modulo poly.
var x2n = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = multModP(p, p)
	}
	return t
}()

// xPow8n is x^(8n) modulo poly: the factor that shifts a CRC past n zero bytes.
func xPow8n(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; k++ {
		if n&1 != 0 {
			p = multModP(x2n[k&31], p)
		}
		n >>= 1
	}
	return p
}
