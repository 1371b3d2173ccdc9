package faultproxy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
)

// Postgres is a TCP proxy in front of a Postgres server that can cut a connection the
// moment a writing transaction has committed, before the client reads the answer: the
// commit landed, and the client cannot know. It reads the protocol just enough to
// tell: the client's statements (simple queries, and prepared statements by name) and
// the server's CommandComplete and ReadyForQuery messages.
//
// Clients must not negotiate TLS or GSS encryption through it (sslmode=disable).
type Postgres struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	rate    float64
	match   []string
	conns   map[*pgConn]struct{}
	closed  bool
	cuts    atomic.Int64
	commits atomic.Int64
	wg      sync.WaitGroup
}

// DefaultMatch are the statement fragments (lower case) that make a transaction a
// write whose commit may be cut: Strata's one-round-trip commit function and explicit
// transactions.
var DefaultMatch = []string{"strata_commit", "commit", "insert", "update", "delete"}

// NewPostgres starts a proxy on a free loopback port forwarding to target (host:port).
func NewPostgres(target string) (*Postgres, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Postgres{target: target, ln: ln, match: DefaultMatch, conns: map[*pgConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Postgres) Addr() string { return p.ln.Addr().String() }

// SetCutRate sets the share (0 to 1) of committed writing transactions after which
// the connection is cut. 0 heals.
func (p *Postgres) SetCutRate(r float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = r
}

// Counts returns how many writing transactions committed through the proxy and how
// many of their connections were cut.
func (p *Postgres) Counts() (commits, cuts int64) { return p.commits.Load(), p.cuts.Load() }

// CutAll closes every connection now.
func (p *Postgres) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.close()
	}
}

// Close stops accepting and closes every connection.
func (p *Postgres) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.CutAll()
	p.wg.Wait()
	return err
}

type pgConn struct {
	client, server net.Conn
	once           sync.Once
	stmts          sync.Map    // prepared statement name -> bool (writes)
	write          atomic.Bool // the current transaction ran a matching statement
}

func (c *pgConn) close() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
	})
}

func (p *Postgres) accept() {
	defer p.wg.Done()
	for {
		cl, err := p.ln.Accept()
		if err != nil {
			return
		}
		sv, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = cl.Close()
			continue
		}
		c := &pgConn{client: cl, server: sv}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.clientToServer(c) }()
		go func() {
			defer p.wg.Done()
			p.serverToClient(c)
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
		}()
	}
}

func (p *Postgres) matches(sql string) bool {
	s := strings.ToLower(sql)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.match {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// clientToServer forwards the client's bytes, noting statements that write. The
// first message (startup) has no type byte.
func (p *Postgres) clientToServer(c *pgConn) {
	defer c.close()
	var buf []byte
	tmp := make([]byte, 32<<10)
	started := false
	for {
		n, err := c.client.Read(tmp)
		if n > 0 {
			buf = append(buf, tmp[:n]...)
			for {
				if !started {
					if len(buf) < 4 {
						break
					}
					l := int(binary.BigEndian.Uint32(buf))
					if len(buf) < l {
						break
					}
					buf, started = buf[l:], true
					continue
				}
				if len(buf) < 5 {
					break
				}
				l := int(binary.BigEndian.Uint32(buf[1:]))
				if len(buf) < 1+l {
					break
				}
				p.noteClient(c, buf[0], buf[5:1+l])
				buf = buf[1+l:]
			}
			if _, werr := c.server.Write(tmp[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func cstring(b []byte) (string, []byte) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return string(b), nil
	}
	return string(b[:i]), b[i+1:]
}

func (p *Postgres) noteClient(c *pgConn, typ byte, body []byte) {
	switch typ {
	case 'Q': // simple query
		q, _ := cstring(body)
		if p.matches(q) {
			c.write.Store(true)
		}
	case 'P': // Parse: name, query
		name, rest := cstring(body)
		q, _ := cstring(rest)
		c.stmts.Store(name, p.matches(q))
		if name == "" && p.matches(q) {
			c.write.Store(true)
		}
	case 'B': // Bind: portal, statement
		_, rest := cstring(body)
		stmt, _ := cstring(rest)
		if v, ok := c.stmts.Load(stmt); ok && v.(bool) {
			c.write.Store(true)
		}
	}
}

// serverToClient forwards the server's messages, and cuts the connection instead of
// forwarding a ReadyForQuery(idle) that ends a writing transaction, when told to.
func (p *Postgres) serverToClient(c *pgConn) {
	defer c.close()
	var buf []byte
	tmp := make([]byte, 32<<10)
	for {
		n, err := c.server.Read(tmp)
		if n > 0 {
			buf = append(buf, tmp[:n]...)
			// Forward whole messages only, so a cut never leaves half a message sent.
			off := 0
			for len(buf)-off >= 5 {
				l := int(binary.BigEndian.Uint32(buf[off+1:]))
				if len(buf)-off < 1+l {
					break
				}
				typ := buf[off]
				end := off + 1 + l
				if typ == 'Z' && l >= 5 && buf[off+5] == 'I' && c.write.Swap(false) {
					p.commits.Add(1)
					if p.cut() {
						p.cuts.Add(1)
						// The transaction's answer is never sent.
						return
					}
				}
				off = end
			}
			if off > 0 {
				if _, werr := c.client.Write(buf[:off]); werr != nil {
					return
				}
				buf = append(buf[:0], buf[off:]...)
			}
		}
		if err != nil {
			if err != io.EOF && len(buf) > 0 {
				_, _ = c.client.Write(buf)
			}
			return
		}
	}
}

func (p *Postgres) cut() bool {
	p.mu.Lock()
	r := p.rate
	p.mu.Unlock()
	return r > 0 && rand.Float64() < r
}
