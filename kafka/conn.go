package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/security"
)

// conn is one client connection. Its pipeline: the reader goroutine reads a frame,
// reserves the next place in the answer order (a slot), and starts serving it; the
// writer goroutine writes the slots' answers strictly in order as they complete. At
// most MaxInflight slots exist at once; the reader waits for a free one before reading
// the next frame, so a connection never holds more than MaxInflight requests in memory.
// A slot may carry no answer (Produce with acks=0) or say to close the connection once
// the answers before it are written (a request Kafka would close on).
type conn struct {
	s      *Server
	nc     net.Conn
	br     *bufio.Reader
	ctx    context.Context // requests run under it; cancelled when the connection closes
	cancel context.CancelFunc
	remote string

	queue    chan *slot    // slots in answer order
	sem      chan struct{} // one token per slot in flight
	stopRead chan struct{} // closed by stopReading
	stopOnce sync.Once

	mu       sync.Mutex
	inflight int
	idle     *time.Timer // closes the connection; runs only while inflight == 0

	closeOnce sync.Once

	// Authentication state, touched only by the reader goroutine (SASL requests are
	// served inline there, so they see each other's effects in order).
	authed    bool
	principal string
	host      string // the client's address, for ACLs that name hosts
	mechanism string // set by a successful SaslHandshake
	rawToken  bool   // a v0 SaslHandshake: the next frame is a bare SASL token
	// saslActive: a handshake chose mechanism and its exchange has not ended;
	// saslMechanism is the mechanism the connection logged in with (a
	// re-authentication, KIP-368, must use it again); scram is a SCRAM exchange in
	// progress; oauthErr, an OAUTHBEARER refusal sent as a challenge, to fail the
	// exchange with on the client's next message.
	saslActive    bool
	saslMechanism string
	scram         *security.ScramLogin
	oauthErr      error
	// sessionTimer (guarded by mu) closes the connection when its token expires,
	// unless it re-authenticates first.
	sessionTimer *time.Timer
	// untrack stops the guard from cutting this connection when its key is revoked.
	untrack func()
	// With authentication on (limits.go): authTimer (guarded by mu) closes the
	// connection unless it authenticates first; addrKey is what the per-address limits count it under (set
	// by admit); unauthCounted (guarded by s.mu) says it is still in the counts of
	// connections not yet authenticated.
	authTimer     *time.Timer
	addrKey       string
	unauthCounted bool

	// mutedUntil (unix ns) is when the connection may be read again: a request over a
	// quota mutes it for its throttle time, as Kafka does (KIP-219).
	mutedUntil atomic.Int64

	// lastSubmit is closed once the connection's latest Produce has submitted its
	// batches (request.turn); touched only by the reader goroutine.
	lastSubmit chan struct{}
}

// slot is one request's place in the answer order.
type slot struct {
	done       chan struct{}
	out        []byte          // the framed response; nil: nothing to send
	closeAfter bool            // close the connection once the answers before this are written
	mem        *membudget.Hold // the request's memory, released once its answer is written
}

func newConn(ctx context.Context, s *Server, nc net.Conn) *conn {
	cctx, cancel := context.WithCancel(ctx)
	c := &conn{
		s:        s,
		nc:       nc,
		br:       bufio.NewReaderSize(nc, 16<<10),
		ctx:      cctx,
		cancel:   cancel,
		remote:   nc.RemoteAddr().String(),
		host:     hostOf(nc.RemoteAddr()),
		untrack:  func() {},
		queue:    make(chan *slot, s.cfg.MaxInflight),
		sem:      make(chan struct{}, s.cfg.MaxInflight),
		stopRead: make(chan struct{}),
	}
	c.lastSubmit = make(chan struct{})
	close(c.lastSubmit) // the first Produce has its turn at once
	c.idle = time.AfterFunc(s.cfg.IdleTimeout, func() {
		s.metrics.closed.WithLabelValues("idle").Inc()
		c.close()
	})
	if s.authRequired() {
		// Set under mu, which close takes to read it: the timer may fire before this
		// assignment would otherwise be seen.
		c.mu.Lock()
		c.authTimer = time.AfterFunc(s.cfg.AuthTimeout, func() {
			s.metrics.closed.WithLabelValues("auth_timeout").Inc()
			s.log.Debug("closing connection: not authenticated in time", "remote", c.remote, "auth_timeout", s.cfg.AuthTimeout)
			c.close()
		})
		c.mu.Unlock()
	}
	return c
}

// serve runs the connection until the client leaves, a request closes it, or the
// server stops it; every goroutine it started has ended when it returns.
func (c *conn) serve() {
	defer c.close()
	defer func() { c.untrack() }()
	c.certificate()
	var wg sync.WaitGroup
	wg.Go(c.writeLoop)
	c.readLoop()
	close(c.queue)
	wg.Wait()
}

// close closes the connection at once; requests still in flight see their context end.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.idle.Stop()
		c.stopAuthTimer()
		c.setSessionExpiry(time.Time{}, "")
		c.cancel()
		c.nc.Close()
	})
}

// stopReading ends the reader (server shutdown): what was read is still answered.
func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		close(c.stopRead)
		_ = c.nc.SetReadDeadline(time.Now())
	})
}

func (c *conn) began() {
	c.mu.Lock()
	c.inflight++
	c.idle.Stop()
	c.mu.Unlock()
}

func (c *conn) ended() {
	c.mu.Lock()
	c.inflight--
	if c.inflight == 0 {
		c.idle.Reset(c.s.cfg.IdleTimeout)
	}
	c.mu.Unlock()
}

// readLoop reads and dispatches frames until the connection ends or a slot says to
// close it.
func (c *conn) readLoop() {
	for {
		select {
		case c.sem <- struct{}{}:
		case <-c.stopRead:
			return
		}
		if !c.waitUnmuted() {
			<-c.sem
			return
		}
		preAuth := c.preAuth()
		frame, mem, ok := c.readFrame(preAuth)
		if !ok {
			<-c.sem
			return
		}
		c.began()
		sl := &slot{done: make(chan struct{}), mem: mem}
		c.queue <- sl // never blocks: the token above reserved room
		more := c.dispatch(sl, frame)
		if preAuth {
			// Served inline (only ApiVersions and SASL are served before
			// authentication): the frame is done with, and the pool's room goes to
			// the next one, whether or not the client reads its answer.
			mem.Release()
		}
		if !more {
			return
		}
	}
}

// preAuth says whether the connection's next frame comes before authentication.
func (c *conn) preAuth() bool { return c.s.authRequired() && !c.authed }

// readFrame reads one size-prefixed frame. The size is checked against the limit before
// anything is allocated; a frame over it, or too short to hold a request header, closes
// the connection. The frame is then reserved — in the node's memory budget, in a hold
// its answer joins, or before authentication in the listener's own pool — counted
// against its principal's (or address's) share until it has been read: without room
// the connection is not read further until there is.
func (c *conn) readFrame(preAuth bool) ([]byte, *membudget.Hold, bool) {
	var sz [4]byte
	if _, err := io.ReadFull(c.br, sz[:]); err != nil {
		c.readFailed(err, false)
		return nil, nil, false
	}
	size := int32(binary.BigEndian.Uint32(sz[:]))
	limit := c.s.cfg.MaxFrameBytes
	if preAuth {
		limit = min(limit, PreAuthMaxFrameBytes)
	}
	minSize := int32(10) // api key, version, correlation id, client id length
	if c.rawToken {
		minSize = 0
	}
	if size < minSize || size > limit {
		c.s.metrics.protocolError("frame_size")
		c.s.log.Debug("closing connection: frame size out of bounds", "remote", c.remote, "size", size, "limit", limit, "authenticated", !preAuth)
		return nil, nil, false
	}
	mem, err := c.reserveFrame(int64(size), preAuth)
	if err != nil {
		c.s.log.Debug("closing connection: no memory for a frame", "remote", c.remote, "size", size, "err", err)
		return nil, nil, false
	}
	var buf []byte
	// A Produce frame is read into a reused buffer (its request gives it back once
	// answered): a fresh one per request was zeroed and collected, as much of the
	// node's CPU as the rest of the Produce. (Not a bare SASL token, which may be
	// shorter than the key peeked at.)
	if !c.rawToken && isProduce(c.br) {
		buf = getBuf(int(size))[:size]
	} else {
		buf = make([]byte, size)
	}
	if _, err := io.ReadFull(c.br, buf); err != nil {
		mem.Release()
		c.readFailed(err, true)
		return nil, nil, false
	}
	mem.Arrived()
	return buf, mem, true
}

// isProduce says whether the frame next in br, at least a request header long, is a
// Produce request.
func isProduce(br *bufio.Reader) bool {
	key, err := br.Peek(2)
	return err == nil && int16(binary.BigEndian.Uint16(key)) == produceKey
}

// reserveFrame reserves a frame of size bytes (membudget's Frame hook), waiting for
// room for as long as the connection lives: the client's requests queue in TCP. Before
// authentication it comes from the listener's pool, counted by address; after, from
// the node's budget, counted by principal (without authentication everyone is the
// same anonymous caller, and there is no one to share between).
func (c *conn) reserveFrame(size int64, preAuth bool) (*membudget.Hold, error) {
	budget, owner, use := c.s.deps.Memory, "", membudget.UseKafka
	switch {
	case preAuth:
		budget, owner, use = c.s.preAuth, c.addrKey, membudget.UseKafkaPreAuth
	case c.s.cfg.Auth != nil:
		owner = c.principal
	}
	for {
		h, err := budget.Frame(c.ctx, owner, size, time.Second, use)
		if !errors.Is(err, membudget.ErrExhausted) {
			return h, err
		}
		select {
		case <-c.stopRead:
			return nil, err
		default:
		}
	}
}

func (c *conn) readFailed(err error, midFrame bool) {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, net.ErrClosed):
	case midFrame:
		c.s.metrics.protocolError("truncated_frame")
		c.s.log.Debug("closing connection: frame cut short", "remote", c.remote, "err", err)
	case !errors.Is(err, io.EOF):
		c.s.log.Debug("connection read", "remote", c.remote, "err", err)
	}
}

// header is a request header (v1, or v2 for flexible versions).
type header struct {
	key, version int16
	correlation  int32
	clientID     *string
}

// dispatch serves one frame into sl. It returns false when the connection is to close
// after the answers before sl (sl then says so).
func (c *conn) dispatch(sl *slot, frame []byte) bool {
	if c.rawToken {
		c.rawToken = false
		return c.rawSASL(sl, frame)
	}
	b := kbin.Reader{Src: frame}
	h := header{key: b.Int16(), version: b.Int16(), correlation: b.Int32()}
	h.clientID = b.NullableString()
	if !b.Ok() {
		return c.refuse(sl, "bad_header", h, "request header does not parse")
	}
	a, known := c.s.apis[h.key]
	if !known {
		if why, ok := unserved(h.key); ok {
			// A client that ignored ApiVersions: say why, where an operator looks.
			c.s.log.Info("closing connection: a Kafka API this server does not serve", "remote", c.remote,
				"api", kmsg.NameForKey(h.key), "why", why, "client_id", deref(h.clientID))
			return c.refuse(sl, "unserved_api", h, "unserved API")
		}
		return c.refuse(sl, "unknown_api", h, "unknown API key")
	}
	if h.key == apiVersionsKey && h.version > a.max {
		// KIP-511: answered in v0 form, so a client newer than this server learns
		// which ApiVersions versions to retry with.
		c.complete(sl, h, &request{}, apiVersionsTooNew(a), a, time.Now(), nil)
		return true
	}
	if h.version < a.min || h.version > a.max {
		return c.refuse(sl, "unsupported_version", h, "unsupported API version")
	}
	if c.s.authRequired() && !c.authed && !a.preAuth {
		// As Kafka: a SASL listener expects nothing but the handshake before
		// authentication.
		return c.refuse(sl, "unauthenticated", h, "request before SASL authentication")
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		kmsg.SkipTags(&b)
	}
	if !b.Ok() {
		return c.refuse(sl, "bad_header", h, "request header tags do not parse")
	}
	if err := req.ReadFrom(b.Src); err != nil {
		return c.refuse(sl, "bad_request", h, "request body does not parse")
	}
	start := time.Now()
	rq := &request{conn: c, header: h, who: broker.Principal{Name: c.principal, Host: c.host, ClientID: deref(h.clientID)}, mem: sl.mem}
	if h.key == produceKey {
		rq.turn, rq.submitted = c.lastSubmit, make(chan struct{})
		c.lastSubmit = rq.submitted
		rq.frame = frame
	}
	serve := func() {
		if rq.submitted != nil {
			defer rq.endTurn()
		}
		ctx, acc := broker.WithAccess(c.ctx)
		resp, err := a.handle(ctx, rq, req)
		if resp != nil {
			resp.SetVersion(h.version)
		}
		if !a.preAuth {
			c.throttle(rq, resp, time.Since(start))
		}
		c.logAccess(rq, a, acc, resp, err, time.Since(start))
		c.complete(sl, h, rq, resp, a, start, err)
	}
	if a.inline {
		serve()
		return !sl.closeAfter
	}
	go serve()
	return true
}

// throttle applies the caller's request_percentage to the handler time d, sets the
// answer's throttle time to the longest any quota asks, and mutes the connection for
// it — for the byte rates and the request share, as Kafka does; a request refused for
// controller_mutation_rate (KIP-599) only tells the client when to retry.
func (c *conn) throttle(rq *request, resp kmsg.Response, d time.Duration) {
	ms := throttleMillis(c.s.deps.Core.RequestThrottle(rq.who, d))
	tr, ok := resp.(kmsg.ThrottleResponse)
	if !ok {
		c.mute(time.Duration(ms) * time.Millisecond)
		return
	}
	cur, _ := tr.Throttle()
	if ms > cur {
		if st, ok := resp.(kmsg.SetThrottleResponse); ok {
			st.SetThrottle(ms)
		}
	}
	if rq.header.key == produceKey || rq.header.key == fetchKey {
		ms = max(ms, cur) // the byte rates mute; a refused mutation only says when to retry
	}
	c.mute(time.Duration(ms) * time.Millisecond)
}

// mute stops reading the connection for d (from now), unless it is muted longer.
func (c *conn) mute(d time.Duration) {
	if d <= 0 {
		return
	}
	until := time.Now().Add(d).UnixNano()
	for {
		cur := c.mutedUntil.Load()
		if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitUnmuted waits until the connection may be read; false if it ended meanwhile.
func (c *conn) waitUnmuted() bool {
	for {
		wait := time.Until(time.Unix(0, c.mutedUntil.Load()))
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.stopRead:
			t.Stop()
			return false
		case <-c.ctx.Done():
			t.Stop()
			return false
		}
	}
}

// throttleMillis is d as a response's throttle_time_ms, rounded up.
func throttleMillis(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(min((d+time.Millisecond-1)/time.Millisecond, 1<<31-1))
}

// refuse closes the connection after the answers before sl, as Kafka does for requests
// it cannot read or will not serve.
func (c *conn) refuse(sl *slot, reason string, h header, msg string) bool {
	c.s.metrics.protocolError(reason)
	c.s.log.Debug("closing connection: "+msg, "remote", c.remote, "api_key", h.key, "api_version", h.version)
	sl.closeAfter = true
	close(sl.done)
	return false
}

// errAnswerThenClose, returned by a handler with its response, sends the response and
// then closes the connection (a failed SASL exchange, as Kafka does).
var errAnswerThenClose = errors.New("answer, then close the connection")

// complete fills sl with resp, framed for h, and records the request's metrics. A nil
// resp sends nothing; an error closes the connection after the answers before sl (and,
// for errAnswerThenClose, after resp).
func (c *conn) complete(sl *slot, h header, rq *request, resp kmsg.Response, a api, start time.Time, err error) {
	defer close(sl.done)
	failed := err != nil || (resp != nil && hasErrorCode(resp))
	c.s.metrics.observe(a.name, h.version, h.version >= a.min && h.version <= a.max, time.Since(start), failed)
	if err != nil {
		sl.closeAfter = true
		if !errors.Is(err, errAnswerThenClose) {
			c.s.log.Warn("closing connection: request failed", "remote", c.remote, "api", a.name, "api_version", h.version, "err", err)
			return
		}
	}
	if resp != nil {
		sl.out = frameResponse(h, resp, rq.sizeHint)
	}
	for _, b := range rq.release {
		putBuf(b)
	}
	if rq.frame != nil && !rq.keepFrame {
		putBuf(rq.frame)
	}
}

// frameResponse encodes resp with its size prefix and response header: v1 (with tags)
// for flexible versions, except ApiVersions, whose header is always v0 so that a client
// can read it whatever version it asked for.
func frameResponse(h header, resp kmsg.Response, sizeHint int) []byte {
	buf := getBuf(128 + sizeHint)[:4]
	buf = kbin.AppendInt32(buf, h.correlation)
	if resp.IsFlexible() && h.key != apiVersionsKey {
		buf = append(buf, 0) // no tagged fields
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}

// writeLoop writes answers in slot order. After a write fails it keeps draining the
// slots (without writing) so that every request's goroutine is waited for.
func (c *conn) writeLoop() {
	broken := false
	for sl := range c.queue {
		<-sl.done
		if !broken && sl.out != nil {
			_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
			if _, err := c.nc.Write(sl.out); err != nil {
				broken = true
				c.s.log.Debug("connection write", "remote", c.remote, "err", err)
				c.close()
			}
		}
		putBuf(sl.out)
		sl.mem.Release()
		if sl.closeAfter && !broken {
			broken = true
			c.close()
		}
		c.ended()
		<-c.sem
	}
}

// hostOf is an address without its port.
func hostOf(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
