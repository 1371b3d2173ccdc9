// Package tlsreload serves a certificate and key from files and picks up new files
// without a restart: certificates are renewed (cert-manager, ACME clients, a mounted
// secret) far more often than nodes are restarted. Any TLS listener uses it through
// tls.Config.GetCertificate: the HTTP API's, and the Kafka listener's.
//
// There is no watcher goroutine: a handshake at most every CheckInterval looks at the
// files' size, modification time and inode, and reloads when one changed. A pair that
// does not load (a certificate replaced before its key) keeps the previous one in use,
// logged, and is tried again at the next check.
package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
)

// DefaultCheckInterval is how often handshakes look at the files.
const DefaultCheckInterval = time.Second

// Options tune a Reloader; the zero value is usable.
type Options struct {
	// CheckInterval bounds how often the files are looked at (default
	// DefaultCheckInterval): a replaced certificate is served at most this long after
	// it is complete on disk.
	CheckInterval time.Duration
	Log           *slog.Logger
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Reloader holds the current certificate of a pair of files. It is safe for
// concurrent use.
type Reloader struct {
	certFile, keyFile string
	opts              Options

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     [2]fileStamp // of the files the current certificate came from
	lastCheck time.Time
	failed    [2]fileStamp // a pair that did not load, not retried until it changes
}

// fileStamp tells whether a file changed.
type fileStamp struct {
	size    int64
	modTime time.Time
	inode   uint64
}

func stampOf(path string) (fileStamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	fs := fileStamp{size: st.Size(), modTime: st.ModTime()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		fs.inode = sys.Ino
	}
	return fs, nil
}

// New loads the pair; an error says why it cannot be served.
func New(certFile, keyFile string, opts Options) (*Reloader, error) {
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, opts: opts}
	stamp, cert, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cert, r.stamp, r.lastCheck = cert, stamp, opts.Now()
	return r, nil
}

// load reads both files, stamped before reading: a change during the read is seen at
// the next check.
func (r *Reloader) load() ([2]fileStamp, *tls.Certificate, error) {
	var stamp [2]fileStamp
	var err error
	if stamp[0], err = stampOf(r.certFile); err != nil {
		return stamp, nil, fmt.Errorf("tls: certificate: %w", err)
	}
	if stamp[1], err = stampOf(r.keyFile); err != nil {
		return stamp, nil, fmt.Errorf("tls: key: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return stamp, nil, fmt.Errorf("tls: load %s and %s: %w", r.certFile, r.keyFile, err)
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		cert.Leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	return stamp, &cert, nil
}

// Certificate returns the current certificate, reloading the files first if they
// changed and the last check is CheckInterval old.
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opts.Now()
	if now.Sub(r.lastCheck) < r.opts.CheckInterval {
		return r.cert
	}
	r.lastCheck = now
	var cur [2]fileStamp
	var err0, err1 error
	cur[0], err0 = stampOf(r.certFile)
	cur[1], err1 = stampOf(r.keyFile)
	if err0 != nil || err1 != nil || cur == r.stamp || cur == r.failed {
		// Missing files (mid-replacement) keep the current certificate.
		return r.cert
	}
	stamp, cert, err := r.load()
	if err != nil {
		r.failed = cur
		r.opts.Log.Warn("tls: new certificate files do not load; still serving the previous certificate", "err", err)
		return r.cert
	}
	r.cert, r.stamp, r.failed = cert, stamp, [2]fileStamp{}
	r.opts.Log.Info("tls: certificate reloaded", "subject", subject(cert), "not_after", notAfter(cert))
	return r.cert
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.Certificate(), nil
}

// ServerConfig is a server tls.Config serving the reloaded certificate: TLS 1.2 or
// later, HTTP/2 and HTTP/1.1 offered.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
	}
}

func subject(c *tls.Certificate) string {
	if c.Leaf == nil {
		return ""
	}
	return c.Leaf.Subject.String()
}

func notAfter(c *tls.Certificate) time.Time {
	if c.Leaf == nil {
		return time.Time{}
	}
	return c.Leaf.NotAfter
}
