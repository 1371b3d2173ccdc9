package objstore

import (
	"bytes"
	"io"
	"testing"
)

func TestPartsReader(t *testing.T) {
	whole := []byte("0123456789abcdefghij")
	parts := [][]byte{whole[:3], {}, whole[3:4], whole[4:15], whole[15:]}
	if !PartsEqual(parts, whole) || PartsEqual(parts, whole[1:]) || PartsLen(parts) != int64(len(whole)) {
		t.Fatal("PartsEqual or PartsLen wrong")
	}
	r := NewPartsReader(parts)
	got, err := io.ReadAll(io.LimitReader(r, 7)) // small reads across part boundaries
	if err != nil || string(got) != "0123456" || r.Len() != len(whole)-7 {
		t.Fatalf("first 7: %q, %v, %d left", got, err, r.Len())
	}
	for _, off := range []int64{0, 3, 4, 14, 15, 19, 20} {
		if _, err := r.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := r.WriteTo(&buf); err != nil || !bytes.Equal(buf.Bytes(), whole[off:]) {
			t.Fatalf("from %d: %q, %v", off, buf.Bytes(), err)
		}
	}
	if pos, _ := r.Seek(-5, io.SeekEnd); pos != 15 {
		t.Fatalf("seek from the end: %d", pos)
	}
	got, _ = io.ReadAll(r)
	if string(got) != "fghij" {
		t.Fatalf("after seeking back: %q", got)
	}
	if _, err := r.Seek(-1, io.SeekStart); err == nil {
		t.Fatal("a negative position accepted")
	}
}
