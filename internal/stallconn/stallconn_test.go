package stallconn

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// A peer that reads slowly but steadily gets everything, however long it takes; one
// that stops reading makes the write fail after the timeout; a quiet connection longer
// than the timeout between writes is not cut.
func TestStall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := Listen(ln, time.Second)
	defer sl.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := sl.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() (client, server net.Conn) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s := <-accepted
		t.Cleanup(func() { s.Close() })
		return c, s
	}

	// Steady reader: 32 MiB at 256 KiB every 20ms takes ~3s, several times the timeout.
	// (Linux wakes a blocked writer once a third of the send buffer is free, so the
	// slowest reader a timeout lets through is about a third of the buffer per timeout.)
	client, server := dial()
	big := make([]byte, 32<<20)
	done := make(chan error, 1)
	go func() { _, err := server.Write(big); done <- err }()
	buf := make([]byte, 256<<10)
	got := 0
	for got < len(big) {
		client.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := io.ReadFull(client, buf[:min(len(buf), len(big)-got)])
		got += n
		if err != nil {
			t.Fatalf("after %d bytes: %v (the write: %v)", got, err, <-done)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatalf("a steady reader's write failed: %v", err)
	}

	// Quiet longer than the timeout, then a write: fine.
	time.Sleep(1500 * time.Millisecond)
	if _, err := server.Write([]byte("still here")); err != nil {
		t.Fatalf("a write after a quiet spell: %v", err)
	}

	// The wrapper keeps TCP's half-close, which net/http relies on to have a refusal
	// read before the connection is reset.
	if cw, ok := server.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
		t.Fatal("no CloseWrite through the wrapper")
	}
	if n, err := client.Read(make([]byte, 64)); n != len("still here") || err != nil {
		t.Fatalf("read before the half-close: %d, %v", n, err)
	}
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the half-close the client reads %v, want EOF", err)
	}

	// A reader that stops: the write fails with a timeout, within a few timeouts.
	_, server = dial()
	start := time.Now()
	_, err = server.Write(make([]byte, 64<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a peer that never reads: %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the stalled write took %s to fail", d)
	}
}
