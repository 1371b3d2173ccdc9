package postgres

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cutProxy is a TCP proxy between pgx and Postgres that understands just enough of the
// frontend/backend protocol to cut a connection at the message that carries a call of
// strata_commit: before forwarding it (the commit never reaches the server), or right
// after forwarding it and its Sync (the server commits, the client never hears).
type cutProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	mode    cutMode
	conns   []net.Conn
	dropped []string // the server's messages swallowed after a cut, for failure reports

	fired      chan struct{} // closed when the client side has been cut
	serverDone chan struct{} // cutAfter: closed when the server answered the cut call
	wg         sync.WaitGroup
}

type cutMode int

const (
	passThrough cutMode = iota
	cutBefore
	cutAfter
)

var commitMarker = []byte("strata_commit")

// cancelRequestCode opens a CancelRequest startup packet.
const cancelRequestCode = 80877102

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

// arm makes the next commit call cut its connection.
func (p *cutProxy) arm(m cutMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
	p.fired = make(chan struct{})
	p.serverDone = make(chan struct{})
}

// take returns the armed mode and disarms: one cut per arm.
func (p *cutProxy) take() (cutMode, chan struct{}, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.mode
	p.mode = passThrough
	return m, p.fired, p.serverDone
}

func (p *cutProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		s := &proxySession{p: p, client: client, server: server, commitStmts: map[string]bool{}}
		p.wg.Go(s.clientToServer)
		p.wg.Go(s.serverToClient)
	}
}

type proxySession struct {
	p              *cutProxy
	client, server net.Conn
	commitStmts    map[string]bool // prepared statements whose text calls strata_commit

	dropReplies  atomic.Bool // the client has been cut: swallow the server's answers
	serverDone   chan struct{}
	doneOnce     sync.Once
	cutAfterSync bool
	fired        chan struct{}
}

// readMessage reads one typed message (type byte, int32 length including itself, body).
func readMessage(r io.Reader) (typ byte, msg []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > 1<<30 {
		return 0, nil, errors.New("proxy: bad message length")
	}
	msg = make([]byte, 5+n-4)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return 0, nil, err
	}
	return hdr[0], msg, nil
}

func cstring(b []byte) (string, []byte) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return string(b), nil
	}
	return string(b[:i]), b[i+1:]
}

func (s *proxySession) clientToServer() {
	defer s.server.Close()
	defer s.client.Close()
	// The startup message has no type byte.
	var lenBuf [4]byte
	if _, err := io.ReadFull(s.client, lenBuf[:]); err != nil {
		return
	}
	startup := make([]byte, binary.BigEndian.Uint32(lenBuf[:]))
	copy(startup, lenBuf[:])
	if _, err := io.ReadFull(s.client, startup[4:]); err != nil {
		return
	}
	// pgx sends a CancelRequest on a new connection when one breaks mid-query. A cut
	// network would lose it too; forwarding it would make the cut commit's fate a race.
	if len(startup) == 16 && binary.BigEndian.Uint32(startup[4:8]) == cancelRequestCode {
		return
	}
	if _, err := s.server.Write(startup); err != nil {
		return
	}
	for {
		typ, msg, err := readMessage(s.client)
		if err != nil {
			return
		}
		body := msg[5:]
		trigger := false
		switch typ {
		case 'P': // Parse: statement name, query text
			name, rest := cstring(body)
			query, _ := cstring(rest)
			if bytes.Contains([]byte(query), commitMarker) {
				s.commitStmts[name] = true
			}
		case 'B': // Bind: portal, statement name
			_, rest := cstring(body)
			stmt, _ := cstring(rest)
			trigger = s.commitStmts[stmt]
		case 'Q': // simple query
			trigger = bytes.Contains(body, commitMarker)
		}
		if trigger {
			switch mode, fired, done := s.p.take(); mode {
			case cutBefore:
				close(fired)
				return
			case cutAfter:
				s.serverDone, s.fired = done, fired
				s.dropReplies.Store(true) // publishes serverDone to serverToClient
				s.cutAfterSync = typ == 'B'
				if typ == 'Q' {
					s.server.Write(msg)
					s.cutClient()
					return
				}
			}
		}
		if _, err := s.server.Write(msg); err != nil {
			return
		}
		if typ == 'S' && s.cutAfterSync {
			s.cutClient()
			return
		}
	}
}

// cutClient closes the client's side only; serverToClient keeps reading the server's
// answer (dropping it) until ReadyForQuery, so the commit runs to its end.
func (s *proxySession) cutClient() {
	s.client.Close()
	close(s.fired)
	// Keep the server connection open: clientToServer's deferred close must not run
	// before the server has answered.
	select {
	case <-s.serverDone:
	case <-time.After(30 * time.Second):
	}
}

func (s *proxySession) serverToClient() {
	defer s.client.Close()
	defer func() {
		if s.dropReplies.Load() {
			s.doneOnce.Do(func() { close(s.serverDone) })
		}
	}()
	for {
		typ, msg, err := readMessage(s.server)
		if err != nil {
			return
		}
		if s.dropReplies.Load() {
			s.p.mu.Lock()
			s.p.dropped = append(s.p.dropped, string(typ))
			if typ == 'E' {
				s.p.dropped = append(s.p.dropped, string(msg[5:]))
			}
			s.p.mu.Unlock()
			if typ == 'Z' {
				s.server.Close()
				return
			}
			continue
		}
		if _, err := s.client.Write(msg); err != nil {
			return
		}
	}
}
