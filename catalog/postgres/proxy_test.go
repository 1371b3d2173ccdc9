package postgres

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cutProxy is a TCP proxy between pgx and Postgres that understands just enough of the
// frontend/backend protocol to cut a connection at the message that carries a call of
// strata_commit: before forwarding it (the commit never reaches the server), or right
// after forwarding it and its Sync (the server commits, the client never hears). It
// also counts round trips (flights).
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

	flights []flight // every round trip
	taken   int      // flights before this one were returned by takeFlights

	delay atomic.Int64 // ns added to every round trip (setDelay)
}

// setDelay adds d to every round trip from now on: the database as far away as a
// managed one in another zone.
func (p *cutProxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

// flight is one round trip: what a client sent, on one connection, while it had no
// answer outstanding, until it waited. A pipeline of many statements is one flight.
type flight struct {
	conn int
	sqls []string // the statements it carried (Parse, Bind of a prepared one, Query)
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

func newCutProxy(t testing.TB, target string) *cutProxy {
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
		id := len(p.conns) / 2
		p.mu.Unlock()
		s := &proxySession{p: p, client: client, server: server, commitStmts: map[string]bool{}, stmtSQL: map[string]string{}, id: id}
		p.wg.Go(s.clientToServer)
		p.wg.Go(s.serverToClient)
	}
}

type proxySession struct {
	p              *cutProxy
	client, server net.Conn
	commitStmts    map[string]bool // prepared statements whose text calls strata_commit
	stmtSQL        map[string]string
	id             int
	// pending counts the Syncs and simple queries sent and not yet answered with
	// ReadyForQuery. A flight is open from the client's first message until the
	// ReadyForQuery that leaves nothing pending: the client was waiting for it. (A
	// client that waits after a Flush without a Sync would merge two trips into one;
	// pgx never does.)
	pending atomic.Int64
	open    atomic.Bool
	flight  int // index in p.flights of this session's current flight, -1 before any

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
	s.flight = -1
	for {
		typ, msg, err := readMessage(s.client)
		if err != nil {
			return
		}
		body := msg[5:]
		if !s.open.Load() && typ != 'X' {
			s.open.Store(true)
			s.flight = s.p.newFlight(s.id)
		}
		trigger := false
		switch typ {
		case 'P': // Parse: statement name, query text
			name, rest := cstring(body)
			query, _ := cstring(rest)
			if bytes.Contains([]byte(query), commitMarker) {
				s.commitStmts[name] = true
			}
			s.stmtSQL[name] = query
			s.p.note(s.flight, query)
		case 'B': // Bind: portal, statement name
			_, rest := cstring(body)
			stmt, _ := cstring(rest)
			trigger = s.commitStmts[stmt]
			if stmt != "" { // an unnamed statement was noted at its Parse
				s.p.note(s.flight, s.stmtSQL[stmt])
			}
		case 'Q': // simple query
			trigger = bytes.Contains(body, commitMarker)
			q, _ := cstring(body)
			s.p.note(s.flight, q)
		}
		if typ == 'S' || typ == 'Q' {
			s.pending.Add(1)
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
		if typ == 'Z' {
			if d := s.p.delay.Load(); d > 0 {
				time.Sleep(time.Duration(d))
			}
			// Before forwarding, so the client's next message finds no answer pending.
			// (The ReadyForQuery that ends the startup answers no Sync.)
			for p := s.pending.Load(); p > 0; p = s.pending.Load() {
				if s.pending.CompareAndSwap(p, p-1) {
					if p == 1 {
						s.open.Store(false)
					}
					break
				}
			}
		}
		if _, err := s.client.Write(msg); err != nil {
			return
		}
	}
}

func (p *cutProxy) newFlight(conn int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flights = append(p.flights, flight{conn: conn})
	return len(p.flights) - 1
}

func (p *cutProxy) note(i int, sql string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= 0 && i < len(p.flights) {
		p.flights[i].sqls = append(p.flights[i].sqls, sql)
	}
}

// takeFlights returns the flights that carried statements since the last call,
// leaving out those of pg_notify (the commit notification, sent after the transaction
// by its own goroutine) and the pool's pings of idle connections.
func (p *cutProxy) takeFlights() []flight {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []flight
	for _, f := range p.flights[p.taken:] {
		pingOnly := len(f.sqls) == 1 && f.sqls[0] == "-- ping" // the pool checking an idle connection
		if len(f.sqls) > 0 && !pingOnly && !slices.ContainsFunc(f.sqls, func(s string) bool { return strings.Contains(s, "pg_notify") }) {
			out = append(out, f)
		}
	}
	p.taken = len(p.flights)
	return out
}
