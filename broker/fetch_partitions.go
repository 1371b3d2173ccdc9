package broker

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/reader"
)

// Fetch of stored batches from several partitions at once, as a Kafka Fetch asks: the
// answer comes as soon as MinBytes are ready across the partitions, or when Wait has
// passed, whichever is first; a long-poll is woken by commit notifications on any of
// the partitions (and polls besides, notifications being best effort).

// fetchParallel bounds the partitions read at once by one FetchPartitions.
const fetchParallel = 8

// PartitionsFetch asks for stored batches of several partitions.
type PartitionsFetch struct {
	// Partitions are read from Offset, each up to MaxBytes (0: the reader's default);
	// MaxRecords and Wait of each are ignored.
	Partitions []FetchRequest
	// MaxBytes bounds the whole answer, counted in whole batches in the order of
	// Partitions, except that the first batch is always answered, however large (as
	// Kafka does, so that a batch larger than the limits can still be consumed).
	// 0: no bound but the partitions'.
	MaxBytes int64
	// MinBytes: answer once this many bytes are ready (0 or 1: as soon as any is).
	MinBytes int64
	// Wait is how long to wait for MinBytes; capped at Config.MaxWait, as a fetch's.
	Wait time.Duration
}

// PartitionBatches answers one partition of a PartitionsFetch: its batches
// (BatchesFetch), or Err, this partition's refusal (an *Error), the others answering
// regardless.
type PartitionBatches struct {
	BatchesFetch
	Err error
}

// watchlessPoll is how often a FetchPartitions waiting without a Watcher looks again.
const watchlessPoll = 50 * time.Millisecond

// FetchPartitions reads stored batches of several partitions (BatchesFetch each),
// waiting up to req.Wait for req.MinBytes. A partition that cannot be read (unknown,
// out of range, ...) answers its error and ends the wait at once, as Kafka answers.
func (b *Broker) FetchPartitions(ctx context.Context, who Principal, req PartitionsFetch) ([]PartitionBatches, error) {
	if e := b.check(CapFetchBatches); e != nil {
		return nil, e
	}
	out := make([]PartitionBatches, len(req.Partitions))
	fetches := make([]*reader.Fetch, len(req.Partitions)) // nil: refused before reading
	var watch []reader.WatchPartition
	for i := range req.Partitions {
		f, e := b.fetch(ctx, who, &req.Partitions[i])
		if e != nil {
			out[i].Err = e
			continue
		}
		f.MaxRecords, f.Wait = math.MaxInt32, 0 // bytes alone bound a batch fetch
		fetches[i] = &f
		watch = append(watch, reader.WatchPartition{TopicID: f.TopicID, Partition: f.Partition, Offset: f.Offset})
	}
	deadline := time.Now().Add(min(max(req.Wait, 0), b.maxWait))
	var w *reader.Watch
	if b.d.Watcher != nil && req.Wait > 0 && len(watch) > 0 {
		// Before the first look: a commit between the look and the wait still wakes it.
		w = b.d.Watcher.Watch(watch)
		defer w.Stop()
	}
	for {
		ready, failed := b.fetchOnce(ctx, fetches, out, req.MaxBytes)
		if failed || ready >= max(req.MinBytes, 1) || !time.Now().Before(deadline) {
			for i := range out {
				if fetches[i] != nil && out[i].Err == nil {
					b.countBatches(fetches[i].TopicID, who, out[i].Batches)
				}
			}
			return out, nil
		}
		if w != nil {
			if _, err := w.Wait(ctx, deadline); err != nil {
				return nil, newError(CodeShuttingDown, "fetch: the request was cancelled")
			}
			continue
		}
		if ctxwait.Sleep(ctx, min(watchlessPoll, time.Until(deadline))) != nil {
			return nil, newError(CodeShuttingDown, "fetch: the request was cancelled")
		}
	}
}

// fetchOnce reads every partition without waiting, into out (partitions refused before
// reading keep their error), and trims the answer to maxBytes. It answers the bytes
// answered, and whether any partition failed.
func (b *Broker) fetchOnce(ctx context.Context, fetches []*reader.Fetch, out []PartitionBatches, maxBytes int64) (ready int64, failed bool) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, fetchParallel)
	for i := range fetches {
		if fetches[i] == nil {
			continue // refused before reading
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := b.d.Batches.FetchRawShared(ctx, *fetches[i])
			if err != nil {
				out[i] = PartitionBatches{Err: fetchError(err)}
				return
			}
			out[i] = PartitionBatches{BatchesFetch: res}
		})
	}
	wg.Wait()
	budget := maxBytes
	if budget <= 0 {
		budget = math.MaxInt64
	}
	for i := range out {
		p := &out[i]
		if p.Err != nil {
			failed = true
			continue
		}
		keep := 0
		for _, raw := range p.Batches {
			n := int64(len(raw))
			if ready > 0 && n > budget-ready {
				break
			}
			ready += n
			keep++
		}
		if keep < len(p.Batches) {
			// The next offset is where the first batch left out begins (offsets between
			// are holes left by key compaction, if any).
			p.NextOffset = p.BaseOffsets[keep]
			if keep == 0 {
				p.NextOffset = fetches[i].Offset
			}
			p.Batches, p.BaseOffsets = p.Batches[:keep], p.BaseOffsets[:keep]
		}
	}
	return ready, failed
}
