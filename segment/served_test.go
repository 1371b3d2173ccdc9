package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestServed: both ways of serving a stored batch give the same bytes — the base offset
// given, every other byte as stored — and leave the stored batch as it was.
func TestServed(t *testing.T) {
	stored := make([]byte, 70)
	for i := range stored {
		stored[i] = byte(i)
	}
	orig := bytes.Clone(stored)
	want := bytes.Clone(stored)
	binary.BigEndian.PutUint64(want, 1234567)

	got := AppendServed([]byte("prefix"), stored, 1234567)
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendServed: %x, want prefix then %x", got, want)
	}
	var w bytes.Buffer
	if err := WriteServed(&w, stored, 1234567); err != nil || !bytes.Equal(w.Bytes(), want) {
		t.Fatalf("WriteServed: %v, %x, want %x", err, w.Bytes(), want)
	}
	if !bytes.Equal(stored, orig) {
		t.Fatal("serving wrote into the stored batch")
	}
	boom := errors.New("closed")
	if err := WriteServed(failWriter{boom}, stored, 1); !errors.Is(err, boom) {
		t.Fatalf("WriteServed to a failing writer: %v", err)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }
