package engine

import (
	"fmt"
	"slices"

	"github.com/strata-io/strata/catalog"
)

// A flush's transactional requests (Request.Txn: Kafka's transactional batches),
// checked in the flush commit after the partition and producer locks, under each
// transaction's row lock (docs/design.md "Transactions"). Postgres's strata_commit_txn
// is the SQL twin of CheckTxns and TxnCheck.Writes; catalogtest guards that they agree.

// TxnFlushState is what CheckTxns needs of one transactional id, loaded under its row
// lock: its producer id and state, and which of the flush's partitions its transaction
// holds (with or without a first offset).
type TxnFlushState struct {
	ProducerID int64
	State      string
	// Partitions maps each of the flush's partitions the transaction holds to whether
	// it has a first offset there.
	Partitions map[catalog.TopicPartition]bool
}

// TxnIDs lists the distinct transactional ids the flush's requests name, sorted: the
// transactions rows a backend locks (after producers) and loads for CheckTxns.
func (p *Plan) TxnIDs() []string {
	var ids []string
	for _, r := range p.Segment.Requests {
		if r.Txn != nil {
			ids = append(ids, r.Txn.TransactionalID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// TxnCheck is the outcome of CheckTxns.
type TxnCheck struct {
	// Errs is the errors passed in with the transaction refusals added.
	Errs []error
	plan *Plan
	txns map[string]*TxnFlushState
}

// CheckTxns checks, in request order, every transactional request not already refused
// in errs, against txns (the ids of TxnIDs; a missing one has no transactions row) and
// registry (the producers' current epochs, as CheckProducers takes them):
//
//  1. the transactional id's producer must be the request's (else
//     ErrInvalidProducerIDMapping: a producer without a transactional id, or another
//     id's);
//  2. at its current epoch (else ErrProducerFenced; a transactional producer never
//     bumps its own epoch);
//  3. the transaction ongoing with each of the request's partitions in it — or, with
//     Txn.ImplicitAdd (transactions v2), anything: the produce begins the transaction
//     and adds its partitions; otherwise ErrInvalidTxnState.
//
// A producer id missing from registry is left to CheckProducers (ErrUnknownProducer).
// Run it before CheckProducers: a duplicate of a committed request still answers its
// original offsets whatever these say.
func (p *Plan) CheckTxns(errs []error, registry map[int64]int16, txns map[string]*TxnFlushState) *TxnCheck {
	tc := &TxnCheck{Errs: append([]error(nil), errs...), plan: p, txns: txns}
	for ri, r := range p.Segment.Requests {
		if r.Txn == nil || tc.Errs[ri] != nil {
			continue
		}
		pr := *r.Producer
		st := txns[r.Txn.TransactionalID]
		epoch, known := registry[pr.ID]
		code, row, value := "", 0, int64(0)
		switch {
		case !known:
		case st == nil || st.ProducerID != pr.ID:
			code = RefusedTxnMapping
		case pr.Epoch != epoch:
			code, value = RefusedTxnFenced, int64(epoch)
		case r.Txn.ImplicitAdd:
		case st.State != catalog.TxnOngoing:
			code = RefusedTxnNotOngoing
		default:
			for bi, b := range r.Batches {
				if _, ok := st.Partitions[catalog.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}]; !ok {
					code, row = RefusedTxnNotAdded, bi
					break
				}
			}
		}
		if code != "" {
			tc.Errs[ri] = TxnRefusal(r, code, row, value)
		}
	}
	return tc
}

// The refusals of CheckTxns, by code: Postgres's strata_commit_txn answers one of these
// (row and value as said), and TxnRefusal turns it into the error the Go check answers.
const (
	RefusedTxnMapping    = "txn:invalid_producer_id_mapping"
	RefusedTxnFenced     = "txn:producer_fenced"     // value: the producer's epoch
	RefusedTxnNotOngoing = "txn:no_transaction"      // v1: nothing ongoing
	RefusedTxnNotAdded   = "txn:partition_not_added" // row: the request's batch
)

// TxnRefusal is the error for refusing transactional request r with code.
func TxnRefusal(r catalog.Request, code string, row int, value int64) error {
	tid, pr := r.Txn.TransactionalID, r.Producer
	switch code {
	case RefusedTxnMapping:
		return fmt.Errorf("%w: producer id %d is not the producer of transactional id %q", catalog.ErrInvalidProducerIDMapping, pr.ID, tid)
	case RefusedTxnFenced:
		return fmt.Errorf("%w: transactional id %q: epoch %d, the producer is at epoch %d", catalog.ErrProducerFenced, tid, pr.Epoch, value)
	case RefusedTxnNotOngoing:
		return fmt.Errorf("%w: transactional id %q has no transaction ongoing: add the partitions (AddPartitionsToTxn) first", catalog.ErrInvalidTxnState, tid)
	case RefusedTxnNotAdded:
		var b catalog.Batch
		if row >= 0 && row < len(r.Batches) {
			b = r.Batches[row]
		}
		return fmt.Errorf("%w: topic id %d partition %d is not in transactional id %q's transaction: add it (AddPartitionsToTxn) first",
			catalog.ErrInvalidTxnState, b.TopicID, b.Partition, tid)
	}
	return fmt.Errorf("catalog: unknown transactional refusal %q for %q", code, tid)
}

// TxnFirstOffset is a transaction's first offset on a partition, for a backend to
// record (the transaction's txn_partitions row, added if missing).
type TxnFirstOffset struct {
	TransactionalID string
	catalog.TopicPartition
	Offset int64
}

// Writes lists what the transactional requests that committed now (not refused, not
// duplicates) write once results are final: the transactions they begin (not ongoing
// before: ImplicitAdd), sorted, and the first offsets of their partitions where the
// transaction had none, sorted by (id, partition) — the earliest of the flush's.
func (tc *TxnCheck) Writes(results []catalog.Result) (begins []string, firsts []TxnFirstOffset) {
	at := map[TxnFirstOffset]int{} // key without Offset → index
	for ri, r := range tc.plan.Segment.Requests {
		if r.Txn == nil || results[ri].Err != nil || results[ri].Duplicate {
			continue
		}
		tid := r.Txn.TransactionalID
		st := tc.txns[tid]
		if st == nil {
			continue // cannot happen: CheckTxns refused it
		}
		if st.State != catalog.TxnOngoing && !slices.Contains(begins, tid) {
			begins = append(begins, tid)
		}
		for bi, b := range r.Batches {
			tp := catalog.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}
			if st.State == catalog.TxnOngoing && st.Partitions[tp] {
				continue // it has a first offset already
			}
			k := TxnFirstOffset{TransactionalID: tid, TopicPartition: tp}
			off := results[ri].BaseOffsets[bi]
			if i, ok := at[k]; ok {
				firsts[i].Offset = min(firsts[i].Offset, off)
				continue
			}
			at[k] = len(firsts)
			k.Offset = off
			firsts = append(firsts, k)
		}
	}
	slices.Sort(begins)
	slices.SortFunc(firsts, func(a, b TxnFirstOffset) int {
		if a.TransactionalID != b.TransactionalID {
			return compareStrings(a.TransactionalID, b.TransactionalID)
		}
		return comparePartitions(a.TopicPartition, b.TopicPartition)
	})
	return begins, firsts
}
