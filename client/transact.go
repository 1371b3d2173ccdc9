package client

import (
	"context"
	"errors"
	"fmt"
)

// TransformFunc turns one consumed batch into the records to produce (any topics; none
// is fine). It may run again for the same records after a crash or a rebalance, so it
// must not have other side effects that matter.
type TransformFunc func(ctx context.Context, b Batch) ([]TopicRecord, error)

// Transact runs an exactly-once consume-transform-produce loop: gc (a group consumer
// with ManualCommit) hands each batch to transform, and Transact sends the records it
// returns together with the batch's next offset as the group's committed offset, in one
// request (POST /v1/records) that commits both or neither. A crash between batches
// resumes from the last committed offset, whose output is exactly what was produced;
// a member the group has fenced (its session lapsed, or the partition moved) has its
// request refused whole, so a paused or partitioned worker's late output never becomes
// visible. It returns when gc.Run does: nil when ctx ends, or the error that stopped
// it (transform's, or ErrProducerFenced when a newer instance took over p's
// transactional id).
//
// A batch's request waits for its answer before the next batch of the partition, and
// before a revoked partition is given back, so a partition's offsets only move forward.
func (p *Producer) Transact(ctx context.Context, gc *Consumer, transform TransformFunc) error {
	if p.cfg.NotIdempotent {
		return errors.New("producer: Transact needs an idempotent producer")
	}
	if !gc.cfg.ManualCommit {
		return errors.New("producer: Transact needs a consumer with ManualCommit: the offsets are committed with the records")
	}
	return gc.Run(ctx, func(ctx context.Context, b Batch) error {
		out, err := transform(ctx, b)
		if err != nil {
			return err
		}
		tp := TopicPartition{b.Topic, b.Partition}
		if len(out) == 0 {
			// Nothing to produce: the offset alone, as a plain member commit.
			err := gc.Commit(ctx, map[TopicPartition]int64{tp: b.NextOffset})
			if err != nil && groupRefused(err) {
				<-ctx.Done() // the consumer stops this partition: not processed
				return ctx.Err()
			}
			return err
		}
		g := &txnGroup{
			Group: gc.cfg.Group, MemberID: gc.MemberID(), MemberEpoch: gc.Epoch(),
			Offsets: []GroupOffset{{Topic: b.Topic, Partition: b.Partition, Offset: b.NextOffset}},
			refresh: gc.Epoch,
		}
		if g.MemberEpoch <= 0 {
			<-ctx.Done() // not a member right now: the consumer is stopping this partition
			return ctx.Err()
		}
		_, err = p.produceAtomic(context.WithoutCancel(ctx), out, g)
		switch {
		case err == nil:
			return nil
		case groupRefused(err):
			// The group fenced this member or moved the partition: nothing of the
			// request is visible. The consumer notices and stops the partition; until
			// then the batch counts as not processed.
			gc.log.Warn("transaction refused by the group: dropping the partition's batch", "partition", tp.String(), "err", err)
			<-ctx.Done()
			return ctx.Err()
		}
		return fmt.Errorf("transact %s: %w", tp, err)
	})
}

// groupRefused says whether the group refused a member's commit: it is not (or no
// longer) a member at that epoch, or does not own the partition.
func groupRefused(err error) bool {
	return HasCode(err, CodeUnknownMember) || HasCode(err, CodeStaleMemberEpoch) ||
		HasCode(err, CodeNotOwner) || HasCode(err, CodeGroupNotFound)
}
