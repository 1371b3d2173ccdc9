package tlsreload

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/tlsreload/tlstest"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// serve runs a TLS echo listener with r's config and returns a function that dials it
// trusting pool and answers the serial the server presented.
func serve(t *testing.T, r *Reloader) func(pool tlstest.Pair) string {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); _, _ = io.Copy(io.Discard, c) })
		}
	})
	return func(trust tlstest.Pair) string {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(),
			&tls.Config{RootCAs: trust.Pool, ServerName: "127.0.0.1"})
		if err != nil {
			return "error: " + err.Error()
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	a, b, c := tlstest.New(t, "a"), tlstest.New(t, "b"), tlstest.New(t, "c")
	certFile, keyFile := a.Write(t, dir)
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	var logs bytes.Buffer
	r, err := New(certFile, keyFile, Options{CheckInterval: time.Second, Now: clock.now, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	dial := serve(t, r)
	serial := func(p tlstest.Pair) string { return p.Cert.SerialNumber.String() }

	if got := dial(a); got != serial(a) {
		t.Fatalf("first certificate: %s, want %s", got, serial(a))
	}
	// Replaced on disk: not looked at again within the interval, then served.
	b.Write(t, dir)
	if got := dial(a); got != serial(a) {
		t.Errorf("within the check interval: %s, want still %s", got, serial(a))
	}
	clock.add(time.Second)
	if got := dial(b); got != serial(b) {
		t.Errorf("after replacement: %s, want %s", got, serial(b))
	}
	if !strings.Contains(logs.String(), "certificate reloaded") {
		t.Errorf("no reload logged: %s", logs.String())
	}

	// Half replaced (certificate before key): the previous pair stays in use.
	tlstest.WriteFile(t, certFile, c.CertPEM)
	clock.add(time.Second)
	if got := dial(b); got != serial(b) {
		t.Errorf("with a mismatched pair on disk: %s, want still %s", got, serial(b))
	}
	if !strings.Contains(logs.String(), "do not load") {
		t.Errorf("the bad pair was not logged: %s", logs.String())
	}
	// Then the key arrives.
	tlstest.WriteFile(t, keyFile, c.KeyPEM)
	clock.add(time.Second)
	if got := dial(c); got != serial(c) {
		t.Errorf("after the key arrived: %s, want %s", got, serial(c))
	}

	// Overwritten in place rather than renamed, and a file missing for a moment.
	if err := os.WriteFile(certFile, a.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Second)
	if got := dial(c); got != serial(c) {
		t.Errorf("with the key missing: %s, want still %s", got, serial(c))
	}
	if err := os.WriteFile(keyFile, a.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Second)
	if got := dial(a); got != serial(a) {
		t.Errorf("after overwriting in place: %s, want %s", got, serial(a))
	}
}

func TestNewRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := tlstest.New(t, "a"), tlstest.New(t, "b")
	certFile, keyFile := a.Write(t, dir)
	if _, err := New(filepath.Join(dir, "missing.pem"), keyFile, Options{}); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("missing certificate: %v", err)
	}
	tlstest.WriteFile(t, keyFile, b.KeyPEM)
	if _, err := New(certFile, keyFile, Options{}); err == nil || !strings.Contains(err.Error(), "private key does not match") {
		t.Errorf("mismatched pair: %v", err)
	}
}
