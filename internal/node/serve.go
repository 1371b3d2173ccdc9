package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/stallconn"
)

// DefaultShutdownTimeout is Config.ShutdownTimeout's default.
const DefaultShutdownTimeout = 30 * time.Second

// HTTPConfig is the HTTP API's listener.
type HTTPConfig struct {
	// Listen is the address to serve on, host:port (port 0 picks a free one). Empty:
	// Start opens no listener and Serve refuses — the API is reached through
	// Node.API's handler (Lambda's invocations).
	Listen string
	// TLS, when set, serves HTTPS only; its certificate comes from it (it may reload
	// one).
	TLS *tls.Config
}

// ListenError is a listener that could not be opened: the address is taken, or not
// one this machine has. The command that chose the address says how to choose
// another.
type ListenError struct {
	Front string // "HTTP" or "Kafka"
	Addr  string
	Err   error
}

func (e *ListenError) Error() string {
	return fmt.Sprintf("node: %s: listen on %s: %v", e.Front, e.Addr, e.Err)
}
func (e *ListenError) Unwrap() error { return e.Err }

// front is a front end served beside the HTTP API: it serves from Start, and stops
// with the HTTP server, before the roles, so that its requests in flight are answered
// while the writer still runs.
type front struct {
	name   string
	failed chan error // its failure while it serves (buffered: one)
	stop   func()     // stops accepting, lets requests in flight be answered, returns
	once   sync.Once
}

func (f *front) shut() { f.once.Do(f.stop) }

// listen opens the node's listeners: the HTTP API's (served by Serve) and the front
// ends', which serve at once. Front ends log that they serve as they start; the HTTP
// API is announced last, so that a reader of the log that waits for it (strata bench,
// the process harness) knows every address by then.
func (n *Node) listen(ctx context.Context) error {
	if a := n.cfg.HTTP.Listen; a != "" {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return &ListenError{Front: "HTTP", Addr: a, Err: err}
		}
		n.httpLn = ln
		scheme := "http://"
		if n.cfg.HTTP.TLS != nil {
			scheme = "https://"
		}
		n.URL = scheme + displayAddr(ln.Addr())
	}
	if err := n.startKafka(ctx); err != nil {
		return err
	}
	if n.URL != "" {
		n.log.Info("serving HTTP API", "url", n.URL)
	}
	return nil
}

// HTTPAddr is the address the HTTP API listens on (nil without a listener).
func (n *Node) HTTPAddr() net.Addr {
	if n.httpLn == nil {
		return nil
	}
	return n.httpLn.Addr()
}

// Stop stops the node without serving out HTTP requests (Serve does that): the front
// ends, then the roles — the connect worker first, while the writer still takes its
// tasks' last commits; the writer drains its buffer — and waits for them until ctx
// ends. It may be called more than once.
func (n *Node) Stop(ctx context.Context) error {
	n.once.Do(func() {
		if n.httpLn != nil {
			_ = n.httpLn.Close() // unless Serve has closed it already
		}
		go func() {
			var fwg sync.WaitGroup
			for _, f := range n.fronts {
				fwg.Go(f.shut)
			}
			fwg.Wait()
			if n.stopConnect != nil {
				n.stopConnect()
				<-n.connectDone
			}
			n.stop()
			n.wg.Wait()
			if n.stopUsage != nil {
				n.stopUsage()
				<-n.usageDone
			}
			close(n.ended)
		}()
	})
	select {
	case <-n.ended:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("node: the roles did not stop in time: %w", ctx.Err())
	}
}

// Serve serves the API on the node's HTTP listener until ctx ends, the server fails, a
// front end fails or a role fails, then shuts down in order: stop accepting, let
// requests in flight finish (the writer still runs, so produces get their answers), end
// long polls and tails a moment in (they never finish by themselves), drain the writer,
// stop the other roles. The front ends (the Kafka listener) stop together with the
// HTTP server, before the roles. The whole shutdown takes at most
// Config.ShutdownTimeout. It returns why it stopped, nil for ctx.
func (n *Node) Serve(ctx context.Context) error {
	if n.httpLn == nil {
		return errors.New("node: serve: no HTTP listener (Config.HTTP.Listen is empty)")
	}
	shutdownTimeout := n.cfg.ShutdownTimeout
	if shutdownTimeout <= 0 {
		shutdownTimeout = DefaultShutdownTimeout
	}
	baseCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	ln := stallconn.Listen(n.httpLn, n.cfg.StallTimeout)
	frontErr := make(chan error, len(n.fronts))
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	for _, f := range n.fronts {
		go func() {
			select {
			case err := <-f.failed:
				frontErr <- fmt.Errorf("%s: %w", f.name, err)
			case <-watchCtx.Done():
			}
		}()
	}
	// Before a request is authenticated, only its headers are read, within
	// ReadHeaderTimeout (the TLS handshake too); its body is read only once it is (the
	// API answers 401 without reading it, and closes the connection), within the API's
	// body timeout (--body-timeout, from the handler's start), which is why there is no
	// ReadTimeout here.
	tlsCfg := n.cfg.HTTP.TLS
	srv := &http.Server{
		Handler:           n.API.Handler(),
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
		TLSConfig:         tlsCfg,
	}
	serveErr := make(chan error, 1)
	if tlsCfg != nil {
		go func() { serveErr <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { serveErr <- srv.Serve(ln) }()
	}

	var failure error
	select {
	case <-ctx.Done():
		n.log.Info("shutting down: signal received")
	case err := <-serveErr:
		failure = fmt.Errorf("serve HTTP: %w", err)
	case err := <-frontErr:
		failure = err
		n.log.Error("shutting down: a front end failed", "err", err)
	case err := <-n.errs:
		failure = err
		n.log.Error("shutting down: a role failed", "err", err)
	}

	shCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	grace := time.AfterFunc(min(2*time.Second, shutdownTimeout/4), cancelRequests)
	var fwg sync.WaitGroup
	for _, f := range n.fronts {
		fwg.Go(f.shut)
	}
	if err := srv.Shutdown(shCtx); err != nil {
		n.log.Warn("HTTP shutdown incomplete: closing remaining connections", "err", err)
		_ = srv.Close()
	}
	grace.Stop()
	cancelRequests()
	fwg.Wait()
	if err := n.Stop(shCtx); err != nil {
		return errors.Join(failure, fmt.Errorf("roles did not stop within the shutdown timeout %s", shutdownTimeout))
	}
	n.log.Info("stopped")
	return failure
}

// displayAddr turns a listener address into one a browser, curl or a Kafka client on
// this machine can use: a wildcard host becomes 127.0.0.1.
func displayAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
