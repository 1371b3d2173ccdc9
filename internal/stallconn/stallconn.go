// Package stallconn bounds how long a connection's writes may make no progress. A
// listener wrapped by Listen hands out connections whose every write — cut into pieces
// of at most Chunk bytes — must complete within the timeout, a deadline set afresh
// before each piece: a client that reads slowly but steadily is served for as long as
// it takes, one that stops reading loses its connection after the timeout, and with it
// whatever memory its unsent answer held. Unlike http.Server.WriteTimeout, which
// bounds a whole response, it never cuts a Server-Sent Events stream or a long-poll
// that is merely quiet: the deadline only runs while a write is pending.
package stallconn

import (
	"net"
	"time"
)

// Chunk is the most one write hands the kernel under one deadline: a writer must
// progress by at least Chunk bytes per timeout.
const Chunk = 256 << 10

// Listen wraps ln so that every accepted connection's writes stall out after timeout.
// timeout <= 0 returns ln unchanged.
func Listen(ln net.Listener, timeout time.Duration) net.Listener {
	if timeout <= 0 {
		return ln
	}
	return &listener{Listener: ln, timeout: timeout}
}

type listener struct {
	net.Listener
	timeout time.Duration
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, timeout: l.timeout}, nil
}

// conn sets a write deadline before each piece of each write. A deadline the caller
// sets itself (SetWriteDeadline, SetDeadline) applies until the next write replaces it.
type conn struct {
	net.Conn
	timeout time.Duration
}

// CloseWrite half-closes the connection when the underlying one can (TCP): net/http
// half-closes before it closes a connection it refused, so that the client reads the
// refusal (a 431) before a reset can discard it; a wrapper without it loses that.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *conn) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		piece := p[written:min(len(p), written+Chunk)]
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(piece)
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, nil
}
