package crc32c

import (
	"bytes"
	"testing"
)

func TestCombine(t *testing.T) {
	a, b := []byte("the quick brown fox "), bytes.Repeat([]byte("jumps over the lazy dog "), 50_000)
	whole := append(append([]byte(nil), a...), b...)
	if got, want := Combine(Checksum(a), Checksum(b), int64(len(b))), Checksum(whole); got != want {
		t.Fatalf("Combine = %#08x, the whole's CRC-32C %#08x", got, want)
	}
	if got, want := Combine(Checksum(a), Checksum(nil), 0), Checksum(a); got != want {
		t.Fatalf("Combine with an empty B = %#08x, want %#08x", got, want)
	}
	if got, want := Combine(Checksum(nil), Checksum(b), int64(len(b))), Checksum(b); got != want {
		t.Fatalf("Combine with an empty A = %#08x, want %#08x", got, want)
	}
	// A changed byte of B changes the result: Combine does not ignore crcB's bytes.
	c := bytes.Clone(b)
	c[len(c)/2] ^= 1
	if Combine(Checksum(a), Checksum(c), int64(len(c))) == Checksum(whole) {
		t.Fatal("Combine of a changed B matches the original")
	}
}

func FuzzCombine(f *testing.F) {
	f.Add([]byte("a"), []byte("b"))
	f.Add([]byte{}, []byte("only b"))
	f.Add(bytes.Repeat([]byte{0xff}, 1000), []byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		whole := append(append([]byte(nil), a...), b...)
		if got, want := Combine(Checksum(a), Checksum(b), int64(len(b))), Checksum(whole); got != want {
			t.Fatalf("Combine(%x, %x) = %#08x, want %#08x", a, b, got, want)
		}
		if got, want := Update(Checksum(a), b), Checksum(whole); got != want {
			t.Fatalf("Update = %#08x, want %#08x", got, want)
		}
	})
}

func BenchmarkCombine(b *testing.B) {
	crc := Checksum([]byte("x"))
	for b.Loop() {
		crc = Combine(crc, 0x12345678, 512<<10)
	}
}
