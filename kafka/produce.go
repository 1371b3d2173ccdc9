package kafka

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
)

// produceParallel bounds the partitions of one Produce request validated or awaited at
// once.
const produceParallel = 16

// partitionProduce is one partition of a Produce request: its own core request, as
// Kafka's Produce is not atomic across partitions (one bad partition fails alone).
type partitionProduce struct {
	topic     string
	partition int32
	records   []byte
	prepared  *broker.PreparedBatches
	res       broker.BatchesResult
	err       error
	logStart  int64 // answered with an error: -1, or the partition's log start offset
}

// produce serves Produce: every partition is validated concurrently, then submitted to
// the writer in the order the connection's Produce requests came (a client pipelines
// up to five per connection, and a partition's batches must take offsets in that
// order), then awaited concurrently. acks=0 is answered with nothing, once done.
func (s *Server) produce(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var parts []*partitionProduce
	for _, t := range in.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, &partitionProduce{topic: t.Topic, partition: p.Partition, records: p.Records})
		}
	}
	// Transactional batches name their transactional id; from v12 (transactions v2) the
	// produce adds its partition to the transaction itself.
	tid, implicit := deref(in.TransactionID), in.Version >= 12
	each(len(parts), func(i int) {
		p := parts[i]
		p.prepared, p.err = s.deps.Core.PrepareBatches(ctx, r.who, broker.BatchesRequest{Topic: p.topic, Partition: p.partition, Batches: p.records,
			BatchSizeRule: true, TransactionalID: tid, ImplicitTxnAdd: implicit})
	})
	wctx := ctx
	if in.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, time.Duration(in.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	// Submitting only buffers; with the writer's buffer full it waits for room, which
	// slows this connection's producer down as a Kafka broker does (a refusal would send
	// it into its retry backoff). The next Produce of the connection waits its turn
	// meanwhile.
	select {
	case <-r.turn:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for _, p := range parts {
		if p.err == nil {
			p.err = p.prepared.SubmitWhenRoom(wctx)
		}
	}
	r.endTurn()
	var abandoned atomic.Bool
	each(len(parts), func(i int) {
		p := parts[i]
		if p.err == nil {
			p.res, p.err = p.prepared.Wait(wctx)
			// Stopped waiting: the writer may still read the records in the frame.
			if p.err != nil && wctx.Err() != nil {
				abandoned.Store(true)
			}
		}
		p.logStart = s.logStartFor(ctx, r, p)
	})
	r.keepFrame = abandoned.Load()
	// The quota counts what the client sent, once per request; over it, the answer
	// says how long to pause and the connection is not read for that long (conn.go).
	var sent int64
	for _, p := range parts {
		sent += int64(len(p.records))
	}
	throttle := s.deps.Core.ProduceThrottle(r.who, sent)
	if in.Acks == 0 {
		r.conn.mute(throttle)
		return nil, nil
	}
	resp.ThrottleMillis = throttleMillis(throttle)
	i := 0
	for _, t := range in.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for range t.Partitions {
			p := parts[i]
			i++
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.partition
			switch {
			case p.err != nil:
				rp.ErrorCode, rp.ErrorMessage = s.kafkaError(p.err)
				rp.ErrorRecords = refusedRecord(p.err, rp.ErrorMessage)
				rp.LogStartOffset = p.logStart
			default:
				rp.BaseOffset = p.res.BaseOffset
				rp.LogAppendTime = p.res.LogAppendTime
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// logStartFor is the partition's log start offset for a refusal that a producer
// reads it with, else -1. A producer refused with UNKNOWN_PRODUCER_ID or
// OUT_OF_ORDER_SEQUENCE_NUMBER compares it with its last acknowledged offset: above
// it, its records were deleted (not lost) and it may reset its sequences (KIP-360;
// franz-go, the Java client). Only these rare refusals pay a catalog read; answers
// without an error carry -1, as the log start offset is not known without one.
func (s *Server) logStartFor(ctx context.Context, r *request, p *partitionProduce) int64 {
	var e *broker.Error
	if !errors.As(p.err, &e) || (e.Code != broker.CodeUnknownProducer && e.Code != broker.CodeOutOfOrderSequence) {
		return -1
	}
	off, err := s.deps.Core.ListOffset(ctx, r.who, p.topic, p.partition, broker.Earliest)
	if err != nil {
		return -1
	}
	return off
}

// each runs fn(0..n-1), at most produceParallel at once, and waits for them.
func each(n int, fn func(i int)) {
	if n == 1 {
		fn(0)
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, produceParallel)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}
