package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// Kafka transactions (docs/design.md "Transactions"): the coordinator's APIs decoded,
// handed to the core, their answers encoded. Any node coordinates any transactional id
// (the state is the catalog's); FindCoordinator answers a rendezvous of the id over the
// live nodes all the same, so clients spread their coordinators.

// txnCode maps a coordinator call's refusal: a stale or fenced epoch is
// PRODUCER_FENCED (Kafka's answer since KIP-588), an unknown producer (a transactional
// id that expired) INVALID_PRODUCER_ID_MAPPING; the rest as every call maps them.
func (s *Server) txnCode(err error) int16 {
	switch {
	case hasCode(err, broker.CodeProducerFenced):
		s.code(err)
		return kerr.ProducerFenced.Code
	case hasCode(err, broker.CodeUnknownProducer):
		s.code(err)
		return kerr.InvalidProducerIDMapping.Code
	}
	return s.code(err)
}

// initTxnProducerID serves InitProducerId with a transactional id: a new instance
// fences the one before and aborts its transaction; v3+ may name the identity the
// caller holds (KIP-360).
func (s *Server) initTxnProducerID(ctx context.Context, r *request, in *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) (kmsg.Response, error) {
	req := broker.InitTxnRequest{TransactionalID: *in.TransactionalID, Timeout: time.Duration(in.TransactionTimeoutMillis) * time.Millisecond}
	if in.ProducerID >= 0 && in.ProducerEpoch >= 0 {
		req.Current = &catalog.Producer{ID: in.ProducerID, Epoch: in.ProducerEpoch}
	}
	p, err := s.deps.Core.InitTxnProducer(ctx, r.who, req)
	if err != nil {
		resp.ErrorCode = s.txnCode(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = p.ID, p.Epoch
	return resp, nil
}

// addPartitionsToTxn serves AddPartitionsToTxn: v0-v3 one transactional id (a client's),
// v4 a batch of them (a broker's, VerifyOnly to check without adding). A partition
// refused (unknown, not writable) is answered with its code and the others with
// OPERATION_NOT_ATTEMPTED: nothing is added.
func (s *Server) addPartitionsToTxn(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if in.Version < 4 {
		topics := make([]catalog.TopicPartitions, len(in.Topics))
		for i, t := range in.Topics {
			topics[i] = catalog.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions}
		}
		codes := s.addTxnPartitions(ctx, r, in.TransactionalID, catalog.Producer{ID: in.ProducerID, Epoch: in.ProducerEpoch}, topics, false)
		for _, t := range in.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes.of(t.Topic, p)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	for _, tx := range in.Transactions {
		topics := make([]catalog.TopicPartitions, len(tx.Topics))
		for i, t := range tx.Topics {
			topics[i] = catalog.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions}
		}
		codes := s.addTxnPartitions(ctx, r, tx.TransactionalID, catalog.Producer{ID: tx.ProducerID, Epoch: tx.ProducerEpoch}, topics, tx.VerifyOnly)
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		for _, t := range tx.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes.of(t.Topic, p)
				rt.Partitions = append(rt.Partitions, rp)
			}
			rtx.Topics = append(rtx.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return resp, nil
}

// partitionCodes answers each partition of a call: one code for all, or per partition.
type partitionCodes struct {
	all int16
	per map[string]map[int32]int16 // when set, all is for the partitions not in it
}

func (c partitionCodes) of(topic string, p int32) int16 {
	if code, ok := c.per[topic][p]; ok {
		return code
	}
	return c.all
}

func (s *Server) addTxnPartitions(ctx context.Context, r *request, tid string, p catalog.Producer, topics []catalog.TopicPartitions, verifyOnly bool) partitionCodes {
	if verifyOnly {
		return s.verifyTxnPartitions(ctx, r, tid, p, topics)
	}
	failed, err := s.deps.Core.AddTxnPartitions(ctx, r.who, broker.TxnPartitionsRequest{TransactionalID: tid, Producer: p, Partitions: topics})
	if err != nil {
		return partitionCodes{all: s.txnCode(err)}
	}
	if len(failed) == 0 {
		return partitionCodes{}
	}
	c := partitionCodes{all: kerr.OperationNotAttempted.Code, per: map[string]map[int32]int16{}}
	for _, f := range failed {
		if c.per[f.Topic] == nil {
			c.per[f.Topic] = map[int32]int16{}
		}
		c.per[f.Topic][f.Partition] = s.code(f.Err)
	}
	return c
}

// verifyTxnPartitions answers a broker's VerifyOnly request: each partition is in the
// producer's ongoing transaction, or INVALID_TXN_STATE.
func (s *Server) verifyTxnPartitions(ctx context.Context, r *request, tid string, p catalog.Producer, topics []catalog.TopicPartitions) partitionCodes {
	ds, err := s.deps.Core.DescribeTxns(ctx, r.who, []string{tid})
	if err != nil {
		return partitionCodes{all: s.code(err)}
	}
	d := ds[0]
	switch {
	case d.Err != nil && hasCode(d.Err, broker.CodeForbidden):
		return partitionCodes{all: s.code(d.Err)}
	case d.Err != nil || d.ProducerID != p.ID:
		return partitionCodes{all: kerr.InvalidProducerIDMapping.Code}
	case d.Epoch != p.Epoch:
		return partitionCodes{all: kerr.ProducerFenced.Code}
	}
	in := map[string]map[int32]bool{}
	for _, t := range d.Partitions {
		in[t.Topic] = map[int32]bool{}
		for _, pt := range t.Partitions {
			in[t.Topic][pt] = true
		}
	}
	c := partitionCodes{per: map[string]map[int32]int16{}}
	for _, t := range topics {
		for _, pt := range t.Partitions {
			if !in[t.Topic][pt] || d.State != catalog.TxnOngoing {
				if c.per[t.Topic] == nil {
					c.per[t.Topic] = map[int32]int16{}
				}
				c.per[t.Topic][pt] = kerr.InvalidTxnState.Code
			}
		}
	}
	return c
}

// addOffsetsToTxn serves AddOffsetsToTxn: the group joins the producer's transaction.
func (s *Server) addOffsetsToTxn(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	err := s.deps.Core.AddTxnGroup(ctx, r.who, broker.TxnGroupRequest{TransactionalID: in.TransactionalID,
		Producer: catalog.Producer{ID: in.ProducerID, Epoch: in.ProducerEpoch}, Group: in.Group})
	if err != nil {
		resp.ErrorCode = s.txnCode(err)
	}
	return resp, nil
}

// txnOffsetCommit serves TxnOffsetCommit: the offsets wait in the transaction and
// reach the group when it commits. v0-v2 carry no member, and v3+ may send generation
// -1 without one (pre-KIP-447 commits): no member checks then. v5+ adds the group to
// the transaction itself (KIP-890). All the offsets or none: one code for every
// partition.
func (s *Server) txnOffsetCommit(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	c := broker.TxnOffsetsRequest{TransactionalID: in.TransactionalID, Producer: catalog.Producer{ID: in.ProducerID, Epoch: in.ProducerEpoch},
		Group: in.Group, Generation: -1, AddGroup: in.Version >= 5}
	if in.Version >= 3 {
		c.MemberID, c.InstanceID, c.Generation = in.MemberID, deref(in.InstanceID), in.Generation
	}
	for _, t := range in.Topics {
		for _, p := range t.Partitions {
			c.Offsets = append(c.Offsets, catalog.CommitOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, Metadata: deref(p.Metadata)})
		}
	}
	code := int16(0)
	if len(c.Offsets) > 0 {
		if err := s.deps.Core.TxnCommitOffsets(ctx, r.who, c); err != nil {
			code = s.txnCode(err)
			if hasCode(err, broker.CodeStaleMemberEpoch) || hasCode(err, broker.CodeNotOwner) || hasCode(err, broker.CodeGroupNotFound) {
				code = s.commitCode(err, 9) // a member's refusal, as OffsetCommit answers it
			}
		}
	}
	for _, t := range in.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// endTxn serves EndTxn: v5+ (transactions v2) bumps the epoch with the decision and
// answers the new one; a retry at the epoch before the bump answers its outcome.
func (s *Server) endTxn(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	res, err := s.deps.Core.EndTxn(ctx, r.who, broker.EndTxnRequest{TransactionalID: in.TransactionalID,
		Producer: catalog.Producer{ID: in.ProducerID, Epoch: in.ProducerEpoch}, Commit: in.Commit, BumpEpoch: in.Version >= 5})
	if err != nil {
		resp.ErrorCode = s.txnCode(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = res.Producer.ID, res.Producer.Epoch
	return resp, nil
}

// kafkaTxnStates names the catalog's states as Kafka does.
var kafkaTxnStates = map[string]string{
	catalog.TxnEmpty:          "Empty",
	catalog.TxnOngoing:        "Ongoing",
	catalog.TxnCompleteCommit: "CompleteCommit",
	catalog.TxnCompleteAbort:  "CompleteAbort",
}

// describeTransactions serves DescribeTransactions.
func (s *Server) describeTransactions(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	ds, err := s.deps.Core.DescribeTxns(ctx, r.who, in.TransactionalIDs)
	for i, id := range in.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
		switch {
		case err != nil:
			st.ErrorCode = s.code(err)
		case ds[i].Err != nil && hasCode(ds[i].Err, broker.CodeForbidden):
			st.ErrorCode = s.code(ds[i].Err)
		case ds[i].Err != nil:
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
		default:
			d := ds[i]
			st.State, st.TimeoutMillis, st.ProducerID, st.ProducerEpoch = kafkaTxnStates[d.State], int32(d.Timeout.Milliseconds()), d.ProducerID, d.Epoch
			if !d.StartedAt.IsZero() {
				st.StartTimestamp = d.StartedAt.UnixMilli()
			}
			for _, tp := range d.Partitions {
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic, t.Partitions = tp.Topic, tp.Partitions
				st.Topics = append(st.Topics, t)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}

// listTransactions serves ListTransactions: by state, producer id and (v1) the time
// ongoing; only the transactional ids the principal may describe.
func (s *Server) listTransactions(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := catalog.TxnFilter{ProducerIDs: in.ProducerIDFilters}
	for _, st := range in.StateFilters {
		found := false
		for ours, theirs := range kafkaTxnStates {
			if theirs == st {
				f.States, found = append(f.States, ours), true
			}
		}
		if !found {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, st)
		}
	}
	if len(in.StateFilters) > 0 && len(f.States) == 0 {
		return resp, nil // only states that never occur here
	}
	if in.Version >= 1 && in.DurationFilterMillis >= 0 {
		f.OngoingFor = time.Duration(in.DurationFilterMillis) * time.Millisecond
		f.States = []string{catalog.TxnOngoing}
	}
	ds, err := s.deps.Core.ListTxns(ctx, r.who, f)
	if err != nil {
		resp.ErrorCode = s.code(err)
		return resp, nil
	}
	for _, d := range ds {
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = d.TransactionalID, d.ProducerID, kafkaTxnStates[d.State]
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp, nil
}
