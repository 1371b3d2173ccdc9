package api

import (
	"context"
	"errors"
	"io"
	"math/bits"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/internal/prom"
)

// The API's part of the node's memory budget (docs/design.md "Memory"). Every /v1
// request gets a hold (serve): its body is reserved there before a byte is read — by
// Content-Length, or as it arrives when it has none, counted against its principal's
// share of bytes still arriving until it has been read (membudget.OwnerShare, with
// authentication on) — and so is everything its answer allocates (a fetch's batches,
// the rendered JSON, an SSE event batch); the hold is released once the answer is
// written. A produce keeps its body until the writer has answered it (the records
// alias it), so its handler waits for that even when the client has gone. Body
// buffers come from a pool rather than being allocated and zeroed per request.

// reqState is what serve keeps for one request: its hold and its pooled body buffer.
type reqState struct {
	a     *API // nil outside serve: nothing is accounted
	need  broker.Capability
	owner string // whose share the body counts against until it has arrived (API.owner)
	hold  *membudget.Hold
	body  *[]byte // from bodyPools; nil when none was taken
	// admitted is what a produce's admission holds (admission.go), unread whether it
	// still counts as its owner's bytes still arriving.
	admitted int64
	unread   bool
}

type stateKey struct{}

// state returns the request's state; a request outside serve (tests calling a handler
// directly) gets an unaccounted one.
func state(r *http.Request) *reqState {
	if s, ok := r.Context().Value(stateKey{}).(*reqState); ok {
		return s
	}
	return &reqState{}
}

// hold is the request's hold on the node's memory budget.
func hold(r *http.Request) *membudget.Hold { return state(r).hold }

// admitBody opens the request's hold and reserves its declared body in it, waiting
// up to MemoryWait. Without room a produce answers 429 buffer_full (back-pressure, as
// when the writer is full), anything else 503 memory_exhausted.
// A produce's body is admitted first (admission.go).
func (a *API) admitBody(r *http.Request, need broker.Capability, admit bool) (*http.Request, *reqState, *problem) {
	st := &reqState{a: a, need: need, owner: a.owner(r), hold: a.mem.NewHold()}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	if admit {
		if p := a.admitProduce(r, st); p != nil {
			return r, st, p
		}
	}
	if n := r.ContentLength; n > 0 {
		if err := st.hold.ReserveInbound(r.Context(), st.owner, poolSize(n), a.cfg.MemoryWait, membudget.UseProduce); err != nil {
			return r, st, a.memoryProblem(r, need, err)
		}
	}
	return r, st, nil
}

// arrived says the body has been read, or will not be: it no longer counts against
// its principal's share, in the budget and in admission.
func (st *reqState) arrived() {
	st.hold.Arrived()
	if st.unread {
		st.unread = false
		st.a.admission.arrived(st.owner, st.admitted)
	}
}

// memoryProblem answers a reservation that failed.
func (a *API) memoryProblem(r *http.Request, need broker.Capability, err error) *problem {
	a.metrics.memoryRefused.Inc()
	if need == broker.CapProduce {
		return newProblem(CodeBufferFull, "this node's memory budget is spent; retry after a short wait").
			with("memory_budget_bytes", a.mem.Limit())
	}
	if r.Context().Err() != nil {
		err = r.Context().Err()
	}
	return newProblem(CodeMemoryExhausted, "this node's memory budget is spent on answers still being sent: %v; retry after a short wait, or on another node", err).
		with("memory_budget_bytes", a.mem.Limit())
}

// produceContext is the context a produce hands the core: the request's, except that a
// client going away does not cut the wait short. The writer refers to the body's
// bytes until it has answered (writer.Produce), so the handler — and the pooled body,
// and its reservation — wait for that answer, which the writer's own timeouts bound.
func produceContext(r *http.Request) context.Context { return context.WithoutCancel(r.Context()) }

// done ends the request's accounting: its body buffer goes back to the pool and its
// hold is released.
func (st *reqState) done() {
	if st.body != nil {
		putBody(st.body)
		st.body = nil
	}
	st.arrived()
	st.hold.Release()
	if st.admitted > 0 {
		st.a.admission.release(st.admitted)
		st.admitted = 0
	}
}

// Body buffers are pooled by size class, powers of two from 64 KiB: a produce body is
// read into a buffer that held an earlier one, not into fresh memory the runtime must
// zero and the collector find. A pooled buffer is garbage to the collector (sync.Pool
// empties across collections), so under a tight GOMEMLIMIT the pool gives way first.
const (
	minPoolClass = 16 // 64 KiB
	maxPoolClass = 30 // 1 GiB: beyond any MaxBodyBytes worth pooling
)

var bodyPools [maxPoolClass + 1]sync.Pool // *[]byte of cap 1<<class

// poolSize is the capacity a body of n bytes is read into (and reserved as).
func poolSize(n int64) int64 {
	c := poolClass(n)
	if c > maxPoolClass {
		return n
	}
	return 1 << c
}

func poolClass(n int64) int {
	if n <= 1<<minPoolClass {
		return minPoolClass
	}
	return bits.Len64(uint64(n - 1))
}

// getBody returns an empty buffer with room for n bytes.
func getBody(n int64) *[]byte {
	c := poolClass(n)
	if c > maxPoolClass {
		b := make([]byte, 0, n)
		return &b
	}
	if p, ok := bodyPools[c].Get().(*[]byte); ok {
		*p = (*p)[:0]
		return p
	}
	b := make([]byte, 0, 1<<c)
	return &b
}

// putBody gives b back; nothing may refer to its bytes any more.
func putBody(b *[]byte) {
	c := cap(*b)
	if c < 1<<minPoolClass || c&(c-1) != 0 || bits.Len(uint(c))-1 > maxPoolClass {
		return
	}
	bodyPools[bits.Len(uint(c))-1].Put(b)
}

// readPooled reads r's body into a pooled buffer, which serve gives back once the
// request is answered. A body of declared length was reserved by admitBody; one
// without a length is reserved as it arrives, each time the buffer grows (a client
// streaming a body holds only what it has sent), up to MaxBodyBytes
// (bodyLimitMiddleware's reader fails past it).
func readPooled(r *http.Request) ([]byte, *problem) {
	st := state(r)
	defer st.arrived()
	reserve := func(n int64) *problem {
		if st.a == nil {
			return nil
		}
		if err := st.hold.ReserveInbound(r.Context(), st.owner, n, st.a.cfg.MemoryWait, membudget.UseProduce); err != nil {
			return st.a.memoryProblem(r, st.need, err)
		}
		return nil
	}
	n := r.ContentLength
	sized := n >= 0
	if !sized {
		n = 0
		if p := reserve(poolSize(0)); p != nil {
			return nil, p
		}
	}
	buf := getBody(n)
	st.body = buf
	b := *buf
	for {
		if len(b) == cap(b) {
			if sized && int64(len(b)) >= r.ContentLength {
				// The declared length is read; one more read must find the end.
				var one [1]byte
				if m, err := r.Body.Read(one[:]); m > 0 || (err != nil && err != io.EOF) {
					if err == nil || m > 0 {
						err = errors.New("the body is longer than its Content-Length")
					}
					return nil, bodyReadProblem(err)
				}
				break
			}
			grow := max(int64(cap(b)), 1<<minPoolClass)
			if p := reserve(grow); p != nil {
				return nil, p
			}
			nb := getBody(int64(cap(b)) + grow)
			*nb = append(*nb, b...)
			putBody(buf)
			buf, b = nb, *nb
			st.body = buf
		}
		m, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		*buf = b
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bodyReadProblem(err)
		}
	}
	return b, nil
}

// bodyReadProblem answers a body that could not be read.
func bodyReadProblem(err error) *problem {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return bodyTooLarge(mbe.Limit)
	}
	if errors.Is(err, errBodyTimeout) {
		return newProblem(CodeRequestTimeout, "%v; nothing was written", err)
	}
	return newProblem(CodeInvalidRequest, "reading the request body: %v", err)
}

// streamKind is what a GET of records is, for the per-node caps: a plain fetch, a
// long-poll (wait_ms > 0) or a Server-Sent Events tail.
type streamKind int

const (
	kindFetch streamKind = iota
	kindLongPoll
	kindStream
)

var kindNames = [...]string{"fetches", "long_polls", "streams"}

// slots caps how many requests of each kind a node serves at once. Each holds a
// goroutine, a connection and its buffers, which are too small to account one by one
// and too many to leave unbounded (an outside review held 2,000 SSE streams open).
type slots struct {
	max    [3]int64
	in     [3]atomic.Int64
	active *prometheus.GaugeVec
	refuse *prometheus.CounterVec
}

func newSlots(cfg Config, reg prometheus.Registerer) *slots {
	s := &slots{max: [3]int64{int64(cfg.MaxFetches), int64(cfg.MaxLongPolls), int64(cfg.MaxStreams)}}
	s.active = prom.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_http_reads_active",
		Help: "Fetches, long-polls and Server-Sent Events streams being served, by kind.",
	}, []string{"kind"}))
	s.refuse = prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_http_reads_refused_total",
		Help: "Fetches, long-polls and streams refused with 429 concurrency_limit because the node's cap for their kind was reached, by kind.",
	}, []string{"kind"}))
	for _, k := range kindNames {
		s.active.WithLabelValues(k)
		s.refuse.WithLabelValues(k)
	}
	return s
}

// acquire takes a slot of kind k, or answers 429 concurrency_limit.
func (s *slots) acquire(k streamKind) (release func(), p *problem) {
	if s.in[k].Add(1) > s.max[k] {
		s.in[k].Add(-1)
		s.refuse.WithLabelValues(kindNames[k]).Inc()
		return nil, newProblem(CodeConcurrencyLimit, "this node serves at most %d %s at once; retry after a short wait, or on another node", s.max[k], kindNames[k]).
			with("limit", kindNames[k]).with("max", s.max[k])
	}
	g := s.active.WithLabelValues(kindNames[k])
	g.Inc()
	return func() { s.in[k].Add(-1); g.Dec() }, nil
}
