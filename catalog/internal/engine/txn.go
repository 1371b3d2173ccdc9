package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-io/strata/catalog"
)

// The transaction coordinator (docs/design.md "Transactions"). Each call of
// catalog.Transactions is one catalog transaction, run here once for both backends: the
// backend takes the locks and reads a TxnLoad asks for (TxnBackend.TxnTx), the rules
// below decide on what it read, and the backend writes the TxnWrites they answer. A
// backend holds only its SQL.
//
// Lock order: partitions (sorted), the producers row, the transactions row, then groups.
// A call that writes markers must hold every partition of the transaction, and learns
// them only by reading: it locks those it expects, reads the transaction under its row
// lock, and starts again with the full set when the set grew meanwhile (a produce
// adding a partition holds that partition and the transaction's row, so once both are
// held the set cannot change).

// TxnRow is a transactions row.
type TxnRow struct {
	ProducerID int64
	State      string
	Timeout    time.Duration
	StartedAt  time.Time // zero unless ongoing
	// Prev is the identity before the last bump (KIP-360: a producer that missed the
	// bump may name it); Last the identity the last decided transaction ran under (a
	// retried EndTxn names it). ID -1: none.
	Prev, Last catalog.Producer
}

// TxnOffsetRow is a pending transactional offset.
type TxnOffsetRow struct {
	Group string
	catalog.TopicPartition
	Offset      int64
	Metadata    string
	MemberID    string
	MemberEpoch int32
}

// TxnLoad is what a coordinator call locks and reads.
type TxnLoad struct {
	TransactionalID string
	// LockTxnPartitions: lock the partitions the transaction holds now, and Partitions
	// (both sorted, with the rest, in one order).
	LockTxnPartitions bool
	Partitions        []catalog.TopicPartition
	// TopicNames and TopicIDs are resolved (live topics only) for the call's checks.
	TopicNames []string
	TopicIDs   []int64
	// ExpiredOnly: the call is the reaper's; the backend may skip the transaction when
	// it is not ongoing past its timeout (an optimisation: the rules check again).
	ExpiredOnly bool
}

// TxnView is what a backend read, under the locks.
type TxnView struct {
	Now time.Time
	// Producer is the transactional id's producers row (ID -1: none).
	Producer catalog.Producer
	// Txn is its transactions row, nil when none.
	Txn *TxnRow
	// Partitions maps the transaction's partitions to their first offset (-1: none yet).
	Partitions map[catalog.TopicPartition]int64
	Groups     []string
	Offsets    []TxnOffsetRow
	// Locked lists the partitions locked, with their high watermarks.
	Locked map[catalog.TopicPartition]int64
	// Topics are the live topics named, by name and by id.
	Topics     map[string]TopicMeta
	TopicsByID map[int64]TopicMeta
}

// TxnWrites is what a call writes, in this order: the producer (a new row, its epoch,
// the retired one), the transactions row, its child rows, the markers (each moves its
// partition's high watermark past it), and the group offsets of a commit.
type TxnWrites struct {
	TransactionalID string
	// NewProducer inserts a producers row for the id at epoch 0; the backend sets
	// NewProducerID to its id, which the transactions row then takes.
	NewProducer   bool
	NewProducerID int64
	// Owner is the new producers row's principal (catalog.InitTxn.Owner).
	Owner string
	// Epoch moves the producers row's epoch (-1: unchanged); RetireProducer deletes a
	// producer row and its state (an exhausted id), 0 for none.
	Epoch          int16
	RetireProducer int64
	// Txn is the transactions row to write (nil: unchanged).
	Txn *TxnRow
	// ClearChildren deletes the transaction's partitions, groups and offsets first.
	ClearChildren bool
	AddPartitions []catalog.TopicPartition
	AddGroups     []string
	UpsertOffsets []TxnOffsetRow
	Markers       []MarkerRow
	// GroupOffsets are stored into their groups (lock them for share, sorted; create a
	// group that does not exist).
	GroupOffsets []GroupOffsetRow
}

// MarkerRow is one marker to write: it takes Offset (the partition's high watermark)
// and moves the high watermark to Offset+1.
type MarkerRow struct {
	catalog.TopicPartition
	catalog.Marker
	// FirstOffset is the transaction's first offset on the partition, -1 when it wrote
	// nothing there.
	FirstOffset int64
}

// TxnBackend runs one coordinator transaction: TxnTx takes the locks and reads load
// asks for (in the lock order), calls decide with them, writes what decide answers and
// commits. An error from decide rolls back and is returned as it is. A backend that
// cannot commit for sure returns an error: callers treat any error as "not decided".
type TxnBackend interface {
	TxnTx(ctx context.Context, load TxnLoad, decide func(*TxnView) (*TxnWrites, error)) error
}

// errTxnPartitionsMoved: the transaction holds partitions that were not locked; run
// again with them.
var errTxnPartitionsMoved = errors.New("transaction partitions moved")

// ErrTxnRaced is what a backend answers when another node created the transactional
// id's rows while this call ran (a unique key taken): the call runs again.
var ErrTxnRaced = errors.New("transactional id created concurrently")

// maxTxnAttempts bounds the runs of one call whose transaction keeps gaining
// partitions under it.
const maxTxnAttempts = 8

// runTxn runs decide in a catalog transaction, holding every partition of the
// transaction when lockAll.
func runTxn(ctx context.Context, b TxnBackend, load TxnLoad, lockAll bool, decide func(*TxnView) (*TxnWrites, error)) error {
	load.LockTxnPartitions = lockAll
	for attempt := 0; ; attempt++ {
		var missing []catalog.TopicPartition
		err := b.TxnTx(ctx, load, func(v *TxnView) (*TxnWrites, error) {
			if lockAll {
				for tp := range v.Partitions {
					if _, ok := v.Locked[tp]; !ok {
						missing = append(missing, tp)
					}
				}
				if len(missing) > 0 {
					return nil, errTxnPartitionsMoved
				}
			}
			return decide(v)
		})
		if errors.Is(err, ErrTxnRaced) && attempt+1 < maxTxnAttempts {
			missing = nil
			continue
		}
		if !errors.Is(err, errTxnPartitionsMoved) {
			return err
		}
		if attempt+1 >= maxTxnAttempts {
			return fmt.Errorf("transaction %q: its partitions kept changing while it was being decided", load.TransactionalID)
		}
		load.Partitions = sortedPartitions(append(load.Partitions, missing...))
	}
}

func sortedPartitions(tps []catalog.TopicPartition) []catalog.TopicPartition {
	slices.SortFunc(tps, comparePartitions)
	return slices.Compact(tps)
}

// checkTxnProducer is every call's first check: p is the transactional id's producer,
// at its epoch.
func checkTxnProducer(v *TxnView, tid string, p catalog.Producer) error {
	if v.Txn == nil || v.Producer.ID < 0 || v.Producer.ID != p.ID || v.Txn.ProducerID != p.ID {
		return fmt.Errorf("%w: producer id %d is not the producer of transactional id %q: initialise it (InitProducerId)", catalog.ErrInvalidProducerIDMapping, p.ID, tid)
	}
	if p.Epoch != v.Producer.Epoch {
		return fmt.Errorf("%w: transactional id %q: epoch %d, the producer is at epoch %d", catalog.ErrProducerFenced, tid, p.Epoch, v.Producer.Epoch)
	}
	return nil
}

// begin makes the transaction ongoing at now, if it was not.
func begin(w *TxnWrites, t TxnRow, now time.Time) TxnRow {
	if t.State != catalog.TxnOngoing {
		t.State, t.StartedAt = catalog.TxnOngoing, now
		w.ClearChildren = true // nothing should be left; make sure
	}
	w.Txn = &t
	return t
}

// bump moves the producer to its next epoch (a new producer id past the last epoch).
// t.Prev is cleared: only the reaper's bump, which the producer does not see, leaves
// the identity before it acceptable (AbortExpiredTxn sets it).
func bump(w *TxnWrites, t *TxnRow, cur catalog.Producer) catalog.Producer {
	t.Prev = noProducer
	next, newID := NextEpoch(cur.Epoch)
	if newID {
		w.NewProducer, w.RetireProducer = true, cur.ID
		return catalog.Producer{ID: -1, Epoch: 0} // the id is the backend's
	}
	w.Epoch = next
	return catalog.Producer{ID: cur.ID, Epoch: next}
}

// complete writes the decision of v's ongoing transaction: a marker on each partition,
// the pending offsets into their groups on commit, the child rows gone.
func complete(v *TxnView, w *TxnWrites, t *TxnRow, cur catalog.Producer, commit bool) {
	ts := v.Now.UnixMilli()
	for _, tp := range sortedPartitions(keysOf(v.Partitions)) {
		w.Markers = append(w.Markers, MarkerRow{
			TopicPartition: tp,
			Marker:         catalog.Marker{Offset: v.Locked[tp], ProducerID: cur.ID, ProducerEpoch: cur.Epoch, Commit: commit, Timestamp: ts},
			FirstOffset:    v.Partitions[tp],
		})
	}
	if commit {
		for _, o := range v.Offsets {
			w.GroupOffsets = append(w.GroupOffsets, GroupOffsetRow{Group: o.Group, TopicPartition: o.TopicPartition,
				Offset: o.Offset, Metadata: o.Metadata, MemberID: o.MemberID, MemberEpoch: o.MemberEpoch})
		}
		slices.SortFunc(w.GroupOffsets, func(a, b GroupOffsetRow) int {
			if a.Group != b.Group {
				return compareStrings(a.Group, b.Group)
			}
			return comparePartitions(a.TopicPartition, b.TopicPartition)
		})
	}
	w.ClearChildren = true
	t.State = catalog.TxnCompleteAbort
	if commit {
		t.State = catalog.TxnCompleteCommit
	}
	t.StartedAt, t.Last = time.Time{}, cur
}

func keysOf[V any](m map[catalog.TopicPartition]V) []catalog.TopicPartition {
	out := make([]catalog.TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// InitTxnProducer is catalog.Transactions.InitTxnProducer.
func InitTxnProducer(ctx context.Context, b TxnBackend, req catalog.InitTxn) (catalog.Producer, error) {
	if err := catalog.ValidateTransactionalID(req.TransactionalID); err != nil {
		return catalog.Producer{}, err
	}
	if req.Timeout <= 0 {
		return catalog.Producer{}, fmt.Errorf("%w: %s: a transaction's timeout must be positive", catalog.ErrInvalidTxnTimeout, req.Timeout)
	}
	var out catalog.Producer
	var w *TxnWrites
	err := runTxn(ctx, b, TxnLoad{TransactionalID: req.TransactionalID}, true, func(v *TxnView) (*TxnWrites, error) {
		w = &TxnWrites{TransactionalID: req.TransactionalID, Epoch: -1, Owner: req.Owner}
		if v.Producer.ID < 0 {
			if req.Current != nil {
				return nil, fmt.Errorf("%w: producer id %d epoch %d: transactional id %q has expired", catalog.ErrUnknownProducer, req.Current.ID, req.Current.Epoch, req.TransactionalID)
			}
			w.NewProducer = true
			w.Txn = &TxnRow{State: catalog.TxnEmpty, Timeout: req.Timeout, Prev: noProducer, Last: noProducer}
			out = catalog.Producer{ID: -1, Epoch: 0}
			return w, nil
		}
		cur := v.Producer
		t := TxnRow{State: catalog.TxnEmpty, Prev: noProducer, Last: noProducer}
		if v.Txn != nil {
			t = *v.Txn
		}
		t.ProducerID = cur.ID
		if c := req.Current; c != nil && *c != cur && *c != t.Prev {
			return nil, fmt.Errorf("%w: producer id %d epoch %d: transactional id %q is now at id %d epoch %d", catalog.ErrProducerFenced, c.ID, c.Epoch, req.TransactionalID, cur.ID, cur.Epoch)
		}
		if t.State == catalog.TxnOngoing {
			complete(v, w, &t, cur, false)
		}
		t.Timeout = req.Timeout
		out = bump(w, &t, cur)
		w.Txn = &t
		return w, nil
	})
	if err != nil {
		return catalog.Producer{}, err
	}
	if out.ID < 0 {
		out.ID = w.NewProducerID
	}
	return out, nil
}

var noProducer = catalog.Producer{ID: -1, Epoch: -1}

// AddTxnPartitions is catalog.Transactions.AddTxnPartitions.
func AddTxnPartitions(ctx context.Context, b TxnBackend, req catalog.TxnPartitions) error {
	if len(req.Partitions) == 0 {
		return fmt.Errorf("%w: no partitions to add", catalog.ErrInvalidTxnState)
	}
	parts := sortedPartitions(slices.Clone(req.Partitions))
	ids := make([]int64, 0, len(parts))
	for _, tp := range parts {
		ids = append(ids, tp.TopicID)
	}
	return runTxn(ctx, b, TxnLoad{TransactionalID: req.TransactionalID, TopicIDs: slices.Compact(ids)}, false, func(v *TxnView) (*TxnWrites, error) {
		if err := checkTxnProducer(v, req.TransactionalID, req.Producer); err != nil {
			return nil, err
		}
		for _, tp := range parts {
			t, ok := v.TopicsByID[tp.TopicID]
			switch {
			case !ok:
				return nil, fmt.Errorf("%w: topic id %d", catalog.ErrTopicNotFound, tp.TopicID)
			case tp.Partition < 0 || tp.Partition >= t.Partitions:
				return nil, fmt.Errorf("%w: topic %s has %d partitions, not %d", catalog.ErrPartitionOutOfRange, t.Name, t.Partitions, tp.Partition)
			}
		}
		w := &TxnWrites{TransactionalID: req.TransactionalID, Epoch: -1}
		begin(w, *v.Txn, v.Now)
		for _, tp := range parts {
			if _, ok := v.Partitions[tp]; !ok || w.ClearChildren {
				w.AddPartitions = append(w.AddPartitions, tp)
			}
		}
		return w, nil
	})
}

// AddTxnGroup is catalog.Transactions.AddTxnGroup.
func AddTxnGroup(ctx context.Context, b TxnBackend, req catalog.TxnGroup) error {
	if err := catalog.ValidateGroupName(req.Group); err != nil {
		return err
	}
	return runTxn(ctx, b, TxnLoad{TransactionalID: req.TransactionalID}, false, func(v *TxnView) (*TxnWrites, error) {
		if err := checkTxnProducer(v, req.TransactionalID, req.Producer); err != nil {
			return nil, err
		}
		w := &TxnWrites{TransactionalID: req.TransactionalID, Epoch: -1}
		begin(w, *v.Txn, v.Now)
		if !slices.Contains(v.Groups, req.Group) || w.ClearChildren {
			w.AddGroups = []string{req.Group}
		}
		return w, nil
	})
}

// TxnCommitOffsets is catalog.Transactions.TxnCommitOffsets.
func TxnCommitOffsets(ctx context.Context, b TxnBackend, req catalog.TxnOffsetCommit) error {
	names, err := CommitTopics(catalog.OffsetCommit{Group: req.Group, Offsets: req.Offsets})
	if err != nil {
		return err
	}
	slices.Sort(names)
	return runTxn(ctx, b, TxnLoad{TransactionalID: req.TransactionalID, TopicNames: slices.Compact(names)}, false, func(v *TxnView) (*TxnWrites, error) {
		if err := checkTxnProducer(v, req.TransactionalID, req.Producer); err != nil {
			return nil, err
		}
		w := &TxnWrites{TransactionalID: req.TransactionalID, Epoch: -1}
		t := *v.Txn
		inTxn := t.State == catalog.TxnOngoing && slices.Contains(v.Groups, req.Group)
		switch {
		case inTxn:
		case !req.AddGroup && t.State != catalog.TxnOngoing:
			return nil, fmt.Errorf("%w: transactional id %q has no transaction ongoing: begin one (AddOffsetsToTxn) first", catalog.ErrInvalidTxnState, req.TransactionalID)
		case !req.AddGroup:
			return nil, fmt.Errorf("%w: group %s is not in transactional id %q's transaction: add it (AddOffsetsToTxn) first", catalog.ErrInvalidTxnState, req.Group, req.TransactionalID)
		default:
			begin(w, t, v.Now)
			w.AddGroups = []string{req.Group}
		}
		for _, o := range req.Offsets {
			tm, ok := v.Topics[o.Topic]
			switch {
			case !ok:
				return nil, fmt.Errorf("%w: %q", catalog.ErrTopicNotFound, o.Topic)
			case o.Partition >= tm.Partitions:
				return nil, fmt.Errorf("%w: topic %s has %d partitions, not %d", catalog.ErrPartitionOutOfRange, o.Topic, tm.Partitions, o.Partition)
			}
			w.UpsertOffsets = append(w.UpsertOffsets, TxnOffsetRow{Group: req.Group,
				TopicPartition: catalog.TopicPartition{TopicID: tm.ID, Partition: o.Partition},
				Offset:         o.Offset, Metadata: o.Metadata, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch})
		}
		return w, nil
	})
}

// EndTxn is catalog.Transactions.EndTxn.
func EndTxn(ctx context.Context, b TxnBackend, req catalog.EndTxn) (catalog.EndTxnResult, error) {
	var res catalog.EndTxnResult
	var w *TxnWrites
	err := runTxn(ctx, b, TxnLoad{TransactionalID: req.TransactionalID}, true, func(v *TxnView) (*TxnWrites, error) {
		res = catalog.EndTxnResult{}
		w = &TxnWrites{TransactionalID: req.TransactionalID, Epoch: -1}
		if v.Txn != nil && v.Producer.ID >= 0 && isRetry(v, req) {
			if (req.Commit && v.Txn.State != catalog.TxnCompleteCommit) || (!req.Commit && v.Txn.State != catalog.TxnCompleteAbort) {
				return nil, fmt.Errorf("%w: transactional id %q: the transaction of epoch %d was %s already", catalog.ErrInvalidTxnState,
					req.TransactionalID, req.Producer.Epoch, decided(v.Txn.State))
			}
			res.Producer, res.Retry = v.Producer, true
			return nil, nil
		}
		if err := checkTxnProducer(v, req.TransactionalID, req.Producer); err != nil {
			return nil, err
		}
		t, cur := *v.Txn, v.Producer
		switch {
		case t.State == catalog.TxnOngoing:
			complete(v, w, &t, cur, req.Commit)
			res.Markers = len(w.Markers)
		case req.BumpEpoch && !req.Commit:
			// Transactions v2: an abort of a transaction that never began bumps the
			// epoch, as Kafka answers it.
			t.State, t.Last = catalog.TxnCompleteAbort, cur
		default:
			return nil, fmt.Errorf("%w: transactional id %q has no transaction ongoing to %s", catalog.ErrInvalidTxnState, req.TransactionalID, verb(req.Commit))
		}
		res.Producer = cur
		if req.BumpEpoch {
			res.Producer = bump(w, &t, cur)
		}
		w.Txn = &t
		return w, nil
	})
	if err != nil {
		return catalog.EndTxnResult{}, err
	}
	if res.Producer.ID < 0 {
		res.Producer.ID = w.NewProducerID
	}
	return res, nil
}

// isRetry says whether req repeats the last decision: it names the identity that
// transaction ran under, which a v2 decision has bumped since (and a v1 one has not).
func isRetry(v *TxnView, req catalog.EndTxn) bool {
	t := v.Txn
	if t.State != catalog.TxnCompleteCommit && t.State != catalog.TxnCompleteAbort || req.Producer != t.Last {
		return false
	}
	if req.BumpEpoch {
		return v.Producer != t.Last
	}
	return v.Producer == t.Last
}

func decided(state string) string {
	if state == catalog.TxnCompleteCommit {
		return "committed"
	}
	return "aborted"
}

func verb(commit bool) string {
	if commit {
		return "commit"
	}
	return "abort"
}

// AbortExpiredTxn aborts tid's transaction if it is still the one of producer p,
// ongoing past its timeout at the database clock, bumping the epoch so the late
// producer is fenced. ok: it aborted it.
func AbortExpiredTxn(ctx context.Context, b TxnBackend, tid string, p catalog.Producer) (desc catalog.TxnDescription, ok bool, err error) {
	err = runTxn(ctx, b, TxnLoad{TransactionalID: tid, ExpiredOnly: true}, true, func(v *TxnView) (*TxnWrites, error) {
		ok = false
		if v.Txn == nil || v.Producer != p || v.Txn.State != catalog.TxnOngoing || v.Now.Before(v.Txn.StartedAt.Add(v.Txn.Timeout)) {
			return nil, nil // decided, fenced or renewed meanwhile
		}
		w := &TxnWrites{TransactionalID: tid, Epoch: -1}
		t := *v.Txn
		desc = catalog.TxnDescription{TransactionalID: tid, ProducerID: p.ID, Epoch: p.Epoch, State: catalog.TxnOngoing,
			Timeout: t.Timeout, StartedAt: t.StartedAt}
		complete(v, w, &t, p, false)
		bump(w, &t, p)
		// The producer never saw this bump: InitProducerId naming its old identity is
		// its recovery (KIP-360), not a fenced instance. Its own EndTxn is no retry of
		// this decision (Last cleared): it is fenced.
		t.Prev, t.Last = p, noProducer
		w.Txn = &t
		ok = true
		return w, nil
	})
	return desc, ok, err
}
