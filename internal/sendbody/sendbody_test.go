package sendbody

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// body is a Body that says how it was read.
type body struct {
	*bytes.Reader
	reads, writeTos int
}

func (b *body) Read(p []byte) (int, error) { b.reads++; return b.Reader.Read(p) }

func (b *body) Close() error { return nil }

func (b *body) WriteTo(w io.Writer) (int64, error) { b.writeTos++; return b.Reader.WriteTo(w) }

// TestBodies sends bodies of each kind through a Dial transport and checks that every
// byte arrives, and that a Body of known length is written by its WriteTo (after at
// most the bytes that fill the transport's header buffer) instead of being read through
// a copy buffer.
func TestBodies(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		if got, err = io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{
		DialContext: Dial((&net.Dialer{Timeout: 5 * time.Second}).DialContext),
	}}
	defer hc.CloseIdleConnections()
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	send := func(t *testing.T, r io.Reader, length int64) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL, r)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("the server got %d bytes, not the %d sent", len(got), len(payload))
		}
	}
	t.Run("body", func(t *testing.T) {
		// Not a type net/http knows to be in memory: it sends the headers first, and
		// the whole body goes to the connection's ReadFrom.
		b := &body{Reader: bytes.NewReader(payload)}
		send(t, b, int64(len(payload)))
		// (net/http calls WriteTo once more, to io.Discard, to see that nothing is left.)
		if b.writeTos == 0 || b.reads != 0 {
			t.Errorf("WriteTo called %d times and Read %d, want WriteTo and never Read", b.writeTos, b.reads)
		}
	})
	t.Run("SetBody", func(t *testing.T) {
		// A request made without a body, given one by SetBody: written by WriteTo, and
		// GetBody gives a new one from the start.
		var made []*body
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		SetBody(req, func() Body {
			b := &body{Reader: bytes.NewReader(payload)}
			made = append(made, b)
			return b
		})
		if req.ContentLength != int64(len(payload)) {
			t.Errorf("ContentLength %d, want %d", req.ContentLength, len(payload))
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !bytes.Equal(got, payload) {
			t.Fatalf("the server got %d bytes, not the %d sent", len(got), len(payload))
		}
		if made[0].writeTos == 0 || made[0].reads != 0 {
			t.Errorf("WriteTo called %d times and Read %d, want WriteTo and never Read", made[0].writeTos, made[0].reads)
		}
		again, err := req.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(again); len(made) != 2 || !bytes.Equal(b, payload) {
			t.Errorf("GetBody: %d bodies made, read %d bytes; want a second body with the whole payload", len(made), len(b))
		}
	})
	t.Run("wrapped body", func(t *testing.T) {
		// Hidden behind a wrapper: copied as before, and intact.
		b := &body{Reader: bytes.NewReader(payload)}
		send(t, io.NopCloser(struct{ io.Reader }{b}), int64(len(payload)))
		if b.writeTos != 0 || b.reads == 0 {
			t.Errorf("WriteTo called %d times and Read %d, want never and some", b.writeTos, b.reads)
		}
	})
	t.Run("bytes.Reader", func(t *testing.T) {
		// The headers' buffer takes the body's first bytes; the rest is one write.
		send(t, bytes.NewReader(payload), int64(len(payload)))
	})
	t.Run("plain reader", func(t *testing.T) {
		send(t, io.MultiReader(bytes.NewReader(payload[:100]), bytes.NewReader(payload[100:])), int64(len(payload)))
	})
	t.Run("unknown length", func(t *testing.T) {
		send(t, io.MultiReader(strings.NewReader(string(payload))), -1)
	})
}
