// Package metered wraps an objstore.Store with Prometheus metrics: requests by
// operation and result, bytes moved, and latency. Object-store requests are what the
// operator pays for, so they are counted where every role sees them.
package metered

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/prom"

	"github.com/strata-io/strata/objstore"
)

// Operation label values.
const (
	opPut      = "put"
	opGet      = "get"
	opGetRange = "get_range"
	opHead     = "head"
	opDelete   = "delete"
	opList     = "list"
)

// Result label values of strata_objstore_requests_total.
const (
	ResultOK       = "ok"
	ResultNotFound = "not_found" // objstore.ErrNotExist
	ResultExists   = "exists"    // objstore.ErrExists: a create-only put refused
	ResultCanceled = "canceled"  // the caller's context ended
	ResultError    = "error"     // anything else
)

// Store is an objstore.Store that records metrics about calls to an inner store.
type Store struct {
	inner    objstore.Store
	requests *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

var (
	_ objstore.Store        = (*Store)(nil)
	_ objstore.CRC32CPutter = (*Store)(nil)
)

// New returns a Store recording into reg. Several Stores may share one registry (they
// then share the series); a nil reg records without exposing anything.
func New(inner objstore.Store, reg prometheus.Registerer) *Store {
	s := &Store{
		inner: inner,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_objstore_requests_total",
			Help: "Object store calls by operation and result (ok, not_found, exists, canceled, error).",
		}, []string{"op", "result"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_objstore_bytes_total",
			Help: "Object bytes sent by successful puts and received by successful gets.",
		}, []string{"op"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "strata_objstore_request_seconds",
			Help: "Latency of object store calls, whatever their result; a list counts all its pages.",
			// 1 ms to ~33 s: loopback MinIO answers small requests in a millisecond, an
			// 8 MiB put to S3 takes a few hundred, retries take seconds.
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"op"}),
	}
	if reg != nil {
		s.requests = prom.Register(reg, s.requests)
		s.bytes = prom.Register(reg, s.bytes)
		s.seconds = prom.Register(reg, s.seconds)
	}
	// Create the series up front so dashboards see zeros rather than gaps.
	for _, op := range []string{opPut, opGet, opGetRange, opHead, opDelete, opList} {
		s.seconds.WithLabelValues(op)
		s.requests.WithLabelValues(op, ResultOK)
		switch op {
		case opPut, opGet, opGetRange:
			s.bytes.WithLabelValues(op)
		}
	}
	return s
}

func (s *Store) observe(ctx context.Context, op string, start time.Time, err error) {
	s.seconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
	s.requests.WithLabelValues(op, result(ctx, err)).Inc()
}

func result(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, objstore.ErrNotExist):
		return ResultNotFound
	case errors.Is(err, objstore.ErrExists):
		return ResultExists
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil:
		return ResultCanceled
	}
	return ResultError
}

// Put implements objstore.Store: PutParts of one part.
func (s *Store) Put(ctx context.Context, key string, body []byte) error {
	return s.PutParts(ctx, key, [][]byte{body})
}

// PutParts implements objstore.Store.
func (s *Store) PutParts(ctx context.Context, key string, parts [][]byte) error {
	return s.put(ctx, parts, func() error { return s.inner.PutParts(ctx, key, parts) })
}

// put measures put, a PUT of parts.
func (s *Store) put(ctx context.Context, parts [][]byte, put func() error) error {
	start := time.Now()
	err := put()
	s.observe(ctx, opPut, start, err)
	if err == nil {
		s.bytes.WithLabelValues(opPut).Add(float64(objstore.PartsLen(parts)))
	}
	return err
}

// PutPartsCRC32C implements objstore.CRC32CPutter, through the inner store's (or
// objstore.PutPartsCRC32C's check when it has none).
func (s *Store) PutPartsCRC32C(ctx context.Context, key string, parts [][]byte, crc uint32) error {
	return s.put(ctx, parts, func() error { return objstore.PutPartsCRC32C(ctx, s.inner, key, parts, crc) })
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	start := time.Now()
	b, err := s.inner.Get(ctx, key)
	s.observe(ctx, opGet, start, err)
	if err == nil {
		s.bytes.WithLabelValues(opGet).Add(float64(len(b)))
	}
	return b, err
}

// GetRange implements objstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	start := time.Now()
	b, err := s.inner.GetRange(ctx, key, off, n)
	s.observe(ctx, opGetRange, start, err)
	if err == nil {
		s.bytes.WithLabelValues(opGetRange).Add(float64(len(b)))
	}
	return b, err
}

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.Info, error) {
	start := time.Now()
	info, err := s.inner.Head(ctx, key)
	s.observe(ctx, opHead, start, err)
	return info, err
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := s.inner.Delete(ctx, key)
	s.observe(ctx, opDelete, start, err)
	return err
}

// List implements objstore.Store. A listing counts as one request however many pages it
// took, and its latency includes the time fn spent. A listing that fn stopped with an
// error counts as ok: the store did not fail.
func (s *Store) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	start := time.Now()
	var fnErr error
	err := s.inner.List(ctx, prefix, func(i objstore.Info) error {
		fnErr = fn(i)
		return fnErr
	})
	if fnErr != nil && errors.Is(err, fnErr) {
		s.observe(ctx, opList, start, nil)
	} else {
		s.observe(ctx, opList, start, err)
	}
	return err
}
