package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Store is the part of the object store the floor measures: the bucket the nodes
// write to (objstore.Store has it).
type Store interface {
	Put(ctx context.Context, key string, body []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
}

// Floor is what the machine does without Strata in the way, measured in the same run:
// the object store with segment-sized and flush-sized objects, and the catalog
// database with transactions of the commit's shape.
type Floor struct {
	SegmentBytes int64   `json:"segment_bytes"`
	Streams      int     `json:"streams"`
	PutMiBps     float64 `json:"put_mib_per_s"`
	GetMiBps     float64 `json:"get_mib_per_s"`
	// PutAfterMiBps is the PUT bandwidth measured again after the maximum-load phases:
	// the produce targets are against the mean of the two (PutBound), which brackets
	// the phases in time, so that the machine drifting between the floor and the phase
	// (the two measurements differed by up to 14% within one run on the 2-core
	// development machine) is not counted as the node's.
	PutAfterMiBps float64 `json:"put_after_mib_per_s,omitempty"`
	// FlushPut is the latency of one PUT at a time of FlushBytes objects: the size of
	// the flushes the half-load phase made.
	FlushBytes int64   `json:"flush_bytes"`
	FlushPut   Latency `json:"flush_put"`
	// Commit is one connection running one-statement transactions that update 8 rows,
	// back to back: what one writer's in-order commits could at best do.
	CommitsPerSec float64 `json:"commits_per_s"`
	Commit        Latency `json:"commit"`
}

// PutBound is the PUT bandwidth the produce targets are measured against: the mean of
// the measurements before and after the maximum-load phases, or the one made.
func (f *Floor) PutBound() float64 {
	if f.PutAfterMiBps > 0 {
		return (f.PutMiBps + f.PutAfterMiBps) / 2
	}
	return f.PutMiBps
}

// floorStreams is how many PUTs (and GETs) of segment-sized objects the floor keeps in
// flight: as many as a node's writer does (writer.DefaultMaxInflight).
const floorStreams = 4

// floorStore measures PUT (and, with measureGet, GET) bandwidth of segment-sized objects
// with streams concurrent requests, each for about d, under prefix; the objects are
// deleted after.
func floorStore(ctx context.Context, st Store, prefix string, size int64, streams int, d time.Duration, measureGet bool) (put, get float64, err error) {
	body := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte(rng.Uint32())
	}
	var (
		mu   sync.Mutex
		keys []string
		seq  atomic.Int64
	)
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, k := range keys {
			_ = st.Delete(dctx, k)
		}
	}()
	// Each stream runs whole requests until d has passed and every stream has done
	// one: the rate is of whole requests over the time to the last one's end.
	run := func(op func(ctx context.Context, i int) error) (float64, error) {
		var wg sync.WaitGroup
		var n atomic.Int64
		errs := make(chan error, streams)
		start := time.Now()
		for s := range streams {
			wg.Go(func() {
				for i := s; ctx.Err() == nil && (time.Since(start) < d || i == s); i += streams {
					if err := op(ctx, i); err != nil {
						errs <- err
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return 0, err
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return float64(n.Load()) * float64(size) / (1 << 20) / time.Since(start).Seconds(), nil
	}
	put, err = run(func(ctx context.Context, _ int) error {
		k := prefix + "seg-" + strconv.FormatInt(seq.Add(1), 10)
		if err := st.Put(ctx, k, body); err != nil {
			return fmt.Errorf("floor: put %s: %w", k, err)
		}
		mu.Lock()
		keys = append(keys, k)
		mu.Unlock()
		return nil
	})
	if err != nil || !measureGet {
		return put, 0, err
	}
	mu.Lock()
	have := append([]string(nil), keys...)
	mu.Unlock()
	get, err = run(func(ctx context.Context, i int) error {
		k := have[i%len(have)]
		b, err := st.Get(ctx, k)
		if err == nil && int64(len(b)) != size {
			err = fmt.Errorf("got %d bytes, want %d", len(b), size)
		}
		if err != nil {
			return fmt.Errorf("floor: get %s: %w", k, err)
		}
		return nil
	})
	return put, get, err
}

// floorPutLatency measures PUTs of size-byte objects one at a time for about d.
func floorPutLatency(ctx context.Context, st Store, prefix string, size int64, d time.Duration) (Latency, error) {
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i * 31)
	}
	var lat []time.Duration
	var keys []string
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, k := range keys {
			_ = st.Delete(dctx, k)
		}
	}()
	for end := time.Now().Add(d); time.Now().Before(end) || len(lat) < 20; {
		k := prefix + "flush-" + strconv.Itoa(len(keys))
		start := time.Now()
		if err := st.Put(ctx, k, body); err != nil {
			return Latency{}, fmt.Errorf("floor: put %s: %w", k, err)
		}
		lat = append(lat, time.Since(start))
		keys = append(keys, k)
		if len(lat) >= 2000 {
			break
		}
	}
	return summarize(lat), nil
}

// floorCommit runs commit, one at a time, for about d.
func floorCommit(ctx context.Context, commit func(context.Context) error, d time.Duration) (perSec float64, lat Latency, err error) {
	var ds []time.Duration
	start := time.Now()
	for time.Since(start) < d || len(ds) < 20 {
		t := time.Now()
		if err := commit(ctx); err != nil {
			return 0, Latency{}, fmt.Errorf("floor: commit: %w", err)
		}
		ds = append(ds, time.Since(t))
	}
	return float64(len(ds)) / time.Since(start).Seconds(), summarize(ds), nil
}
