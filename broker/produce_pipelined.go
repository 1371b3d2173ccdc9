package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// Produce of record batches in three steps, for a front end that serves several
// requests of one client connection at a time (the Kafka protocol pipelines up to five
// produce requests per connection): validation runs concurrently, but the requests must
// reach the writer in the order the client sent them, or a partition's records would
// take offsets out of order. So: PrepareBatches (concurrently), Submit (in the client's
// order; it only buffers), Wait (concurrently). ProduceBatches is the three in a row.

// PreparedBatches is one partition's record batches validated under the topic's rules
// and ready to buffer.
type PreparedBatches struct {
	b     *Broker
	ti    TopicInfo
	part  int32
	wreq  writer.Request
	count int
	sub   *writer.Submitted
}

// PrepareBatches validates one partition's record batches (BatchesRequest) and turns
// them into the writer's request; nothing is buffered yet. The partition leader epoch
// of every batch is set to -1 first: clients fill it as they please, and it is the
// broker's. req.Batches must not change until the request is answered.
func (b *Broker) PrepareBatches(ctx context.Context, who Principal, req BatchesRequest) (*PreparedBatches, error) {
	if e := b.check(CapProduce); e != nil {
		return nil, e
	}
	if e := b.authorize(ctx, who, acl.OpWrite, acl.Topic(req.Topic)); e != nil {
		return nil, e
	}
	if len(req.Batches) == 0 {
		return nil, newError(CodeEmptyBatch, "the body holds no record batch")
	}
	ti, e := b.lookupPartition(ctx, req.Topic, req.Partition)
	if e != nil {
		return nil, e
	}
	maxRecords := req.MaxRecords
	if maxRecords <= 0 {
		maxRecords = int(^uint(0) >> 1)
	}
	segment.ResetLeaderEpochs(req.Batches)
	wreq, count, e := batchesRequest(req.Batches, &ti, req.Partition, limits{nowMs: b.now().UnixMilli(), maxRecords: maxRecords, perBatch: req.BatchSizeRule})
	if e == nil {
		e = b.txnBatches(ctx, who, req, &wreq)
	}
	if e == nil {
		e = b.authorizeProducer(ctx, who, wreq.Producer)
	}
	if e == nil && validates(&ti.Config) {
		e = b.validateBatches(ctx, &ti, &wreq)
	}
	if e != nil {
		return nil, e
	}
	wreq.Principal = who.Name
	return &PreparedBatches{b: b, ti: ti, part: req.Partition, wreq: wreq, count: count}, nil
}

// Submit buffers the request in the writer. Requests submitted one after the other
// take offsets in that order within a partition. Its error is a refusal before
// buffering (the buffer is full, the writer stopping, ...): nothing was written.
func (p *PreparedBatches) Submit(ctx context.Context) error { return p.submit(ctx, false) }

// SubmitWhenRoom is Submit that, while the writer's buffer is full, waits for room
// until ctx ends (then it refuses with CodeBufferFull), rather than refuse at once: for
// a front end that pushes its clients back by answering later, as a Kafka broker does.
func (p *PreparedBatches) SubmitWhenRoom(ctx context.Context) error { return p.submit(ctx, true) }

func (p *PreparedBatches) submit(ctx context.Context, wait bool) error {
	s := p.b.d.Submitter
	if s == nil {
		resp, err := p.b.d.Writer.Produce(ctx, p.wreq)
		p.sub = writer.Answered(resp, err)
		return nil
	}
	var sub *writer.Submitted
	var err error
	if wait {
		sub, err = s.SubmitWait(ctx, p.wreq)
	} else {
		sub, err = s.Submit(p.wreq)
	}
	if err != nil {
		return p.b.writeError(err, p.topics())
	}
	p.sub = sub
	return nil
}

// Wait waits for the submitted request's flush and answers where its records landed.
func (p *PreparedBatches) Wait(ctx context.Context) (BatchesResult, error) {
	if p.sub == nil {
		return BatchesResult{}, newError(CodeInternal, "produce: waited for a request never submitted").
			unexpected("produce", fmt.Errorf("PreparedBatches.Wait before Submit"))
	}
	resp, err := p.sub.Wait(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return BatchesResult{}, newError(CodeCommitOutcomeUnknown, "produce: stopped waiting before the records were answered: they may or may not be written")
	}
	if err != nil {
		return BatchesResult{}, p.b.writeError(err, p.topics())
	}
	// One request's records of one partition are one batch of one flush: their offsets
	// are contiguous. Anything else is a writer bug, not an answer to pass on.
	recs := resp.Records
	if len(recs) != p.count || recs[0].Partition != p.part || recs[len(recs)-1].Offset-recs[0].Offset != int64(len(recs)-1) {
		err := fmt.Errorf("writer answered %d records for %d, not one contiguous run of partition %d", len(recs), p.count, p.part)
		return BatchesResult{}, newError(CodeInternal, "produce: the writer answered for the wrong records").unexpected("produce", err)
	}
	res := BatchesResult{BaseOffset: recs[0].Offset, LastOffset: recs[len(recs)-1].Offset, Duplicate: resp.Duplicate, LogAppendTime: -1}
	if resp.LogAppendTime != 0 {
		res.LogAppendTime = resp.LogAppendTime
	}
	return res, nil
}

func (p *PreparedBatches) topics() map[string]TopicInfo { return map[string]TopicInfo{p.ti.Name: p.ti} }
