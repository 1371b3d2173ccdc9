package engine

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/strata-io/strata/catalog"
)

// Idempotent and transactional producers (docs/design.md "Write path"; the exactly-once
// issue). A producer asks InitProducer for an id and an epoch, then numbers the records
// it sends to each partition with a sequence, as Kafka's idempotent producer does. The
// commit checks each idempotent request against the producer's state on every
// partition it writes (Plan.CheckProducers, in the commit's transaction, after the
// partition rows are locked): a retry of a batch already committed answers its original
// offsets and writes nothing; a stale epoch is fenced; a sequence gap is refused with
// the sequence expected. The state kept per producer and partition is its epoch and its
// last producerBatchesKept batches, so a producer with at most that many requests in
// flight can retry any of them blindly.

// producerBatchesKept is how many of a producer's latest batches per partition the
// commit remembers to recognise retries: Kafka's bound on in-flight requests of an
// idempotent producer (max.in.flight.requests.per.connection ≤ 5).
const producerBatchesKept = 5

// NextEpoch is InitProducer's rule for a known transactional id at epoch e: the next
// epoch, or, when e is the last one an int16 holds, a new producer id (newID) at 0.
func NextEpoch(e int16) (next int16, newID bool) {
	if e >= math.MaxInt16 {
		return 0, true
	}
	return e + 1, false
}

// NextIdempotentEpoch is InitProducer's rule for a producer without a transactional id
// that names its current identity (KIP-360: a Kafka client resetting its sequences
// after an error): found says whether the registry has current.ID, with transactional
// whether that row has a transactional id and epoch its epoch. ok: the row moves to
// next and the producer keeps its id. Otherwise it gets a new id at epoch 0, as Kafka
// answers any InitProducerId without a transactional id: an unknown or expired id, one
// that belongs to a transactional producer, a stale epoch, or the last epoch an int16
// holds.
func NextIdempotentEpoch(current catalog.Producer, found, transactional bool, epoch int16) (next int16, ok bool) {
	if !found || transactional || epoch != current.Epoch || epoch >= math.MaxInt16 {
		return 0, false
	}
	return epoch + 1, true
}

// CheckCurrent is InitProducer's rule for current (see Producers): the transactional
// id's row, if found, is at (id, epoch).
func CheckCurrent(current *catalog.Producer, found bool, id int64, epoch int16) error {
	switch {
	case current == nil:
		return nil
	case !found:
		return fmt.Errorf("%w: producer id %d epoch %d: the transactional id has expired", catalog.ErrUnknownProducer, current.ID, current.Epoch)
	case current.ID != id || current.Epoch != epoch:
		return fmt.Errorf("%w: producer id %d epoch %d: the transactional id is now at id %d epoch %d", catalog.ErrProducerFenced, current.ID, current.Epoch, id, epoch)
	}
	return nil
}

// ProducerTouchInterval is how stale a producer's last-used time may grow before a
// commit refreshes it: a hundredth of the expiry, so an active producer's registry row
// is written at most that often, yet is never seen idle for longer than the expiry.
func ProducerTouchInterval(expiry time.Duration) time.Duration {
	return max(expiry/100, time.Second)
}

// producerExpired says whether a producer last used at lastUsed has expired at now.
func producerExpired(lastUsed, now time.Time, expiry time.Duration) bool {
	return !lastUsed.After(now.Add(-expiry))
}

// AddSequence adds n to a sequence the way Kafka does: sequences run from 0 to
// math.MaxInt32 and wrap to 0.
func AddSequence(seq, n int32) int32 {
	return int32((int64(seq) + int64(n)) % (math.MaxInt32 + 1))
}

// ProducerPartition names one producer's state on one partition.
type ProducerPartition struct {
	ProducerID int64
	catalog.TopicPartition
}

// ProducerState is a producer's state on one partition, as stored.
type ProducerState struct {
	// Epoch is the producer epoch of the batches kept.
	Epoch int16
	// Batches are the latest batches committed at Epoch, oldest first, at most
	// producerBatchesKept.
	Batches []ProducerBatch
}

// ProducerBatch is one remembered batch.
type ProducerBatch struct {
	FirstSequence int32
	LastSequence  int32
	BaseOffset    int64
}

// ProducerStateRow is a producer state a commit writes (insert or replace).
type ProducerStateRow struct {
	ProducerPartition
	ProducerState
}

// errDuplicate marks a duplicate request in ProducerCheck.Errs: Assign must give it no
// offsets, and ProducerCheck.Finish turns it into a Duplicate result.
var errDuplicate = errors.New("duplicate of a committed request")

// Producer request error codes, for backends that check in SQL and for the API.
const (
	CodeProducerFenced     = "producer_fenced"
	CodeOutOfOrderSequence = "out_of_order_sequence"
	CodeUnknownProducer    = "unknown_producer_id"
)

// pendingRef marks a remembered batch committed by this very flush: its base offset is
// known only after Assign.
type pendingRef struct {
	request, batch int
}

// liveBatch is a remembered batch during the checks: committed before (base known) or
// accepted earlier in this flush (pending).
type liveBatch struct {
	first, last int32
	base        int64
	pending     *pendingRef
}

type liveState struct {
	epoch   int16
	batches []liveBatch
	touched bool // changed by this flush: to be written
}

// ProducerCheck is the outcome of Plan.CheckProducers.
type ProducerCheck struct {
	// Errs is CheckRequests' answer with the producer refusals added: pass it to
	// Assign. A duplicate request carries an internal marker here (it must take no
	// offsets); Finish gives it its result.
	Errs []error
	// Producers lists the producer ids of the requests accepted, ascending: the
	// registry rows whose last-used time a backend refreshes (when older than
	// ProducerTouchInterval).
	Producers []int64
	// Bumps lists the producers whose epoch an accepted request moved up (rule 3),
	// ascending by id, with the new epoch: the registry rows a backend updates.
	Bumps []ProducerEpoch

	plan  *Plan
	dups  [][]liveBatch // per duplicate request, per batch: its original
	state map[ProducerPartition]*liveState
	keys  []ProducerPartition // touched states, in first-touch order
}

// Duplicate reports whether request i is a duplicate of a committed request.
func (pc *ProducerCheck) Duplicate(i int) bool { return pc.dups[i] != nil }

// CheckProducers applies the idempotence rules to the requests that carry a Producer,
// in request order (which, within a partition, is object order: PlanSegment checks it),
// after CheckRequests and any other per-request check. errs holds those checks'
// answers; registry the current epoch of every producer id the flush names (a missing
// id is unknown or expired); state the stored state of every (producer, partition) the
// flush's idempotent batches name (missing: none). The rules, per request:
//
//  1. A duplicate — every batch matches, by first and last sequence, a batch kept for
//     its partition at the request's epoch (committed before, or accepted earlier in
//     this flush) — answers the original offsets with Duplicate set, whatever else
//     would refuse it: it committed once, and writes nothing now.
//  2. A request already refused (errs) stays refused.
//  3. An unknown producer id: ErrUnknownProducer. An epoch behind the current one:
//     ErrProducerFenced. An epoch ahead of it is the producer bumping its own epoch, as
//     Kafka's idempotent producers do after some errors without asking (KIP-360): it
//     goes on to rule 4, where every partition's sequence must start again at 0 (its
//     state is of an older epoch), and if accepted it becomes the producer's epoch
//     (Bumps) — requests of the flush after it at an older epoch are fenced. Ahead by
//     any amount, as Kafka accepts it: a client whose bumped requests were refused
//     before their commit (too large, say) bumps again, and refusing an epoch two
//     ahead would send it bumping for ever.
//  4. Each batch's base sequence must be the next one the partition expects: the
//     last kept batch's last sequence plus one (AddSequence) at the same epoch, or 0
//     when the producer has no state there or state from an older epoch. Otherwise a
//     *SequenceError. A request with two batches for one partition continues from the
//     first.
//  5. An accepted request's batches become the latest kept for their partitions (at
//     the request's epoch; state of an older epoch is dropped), the oldest beyond
//     producerBatchesKept forgotten.
func (p *Plan) CheckProducers(errs []error, registry map[int64]int16, state map[ProducerPartition]ProducerState) *ProducerCheck {
	reqs := p.Segment.Requests
	pc := &ProducerCheck{
		Errs:  append([]error(nil), errs...),
		plan:  p,
		dups:  make([][]liveBatch, len(reqs)),
		state: map[ProducerPartition]*liveState{},
	}
	get := func(k ProducerPartition) *liveState {
		if s, ok := pc.state[k]; ok {
			return s
		}
		st, ok := state[k]
		if !ok {
			pc.state[k] = nil
			return nil
		}
		s := &liveState{epoch: st.Epoch, batches: make([]liveBatch, len(st.Batches))}
		for i, b := range st.Batches {
			s.batches[i] = liveBatch{first: b.FirstSequence, last: b.LastSequence, base: b.BaseOffset}
		}
		pc.state[k] = s
		return s
	}
	accepted := map[int64]bool{}
	// A bump changes the registry for the requests after it: work on a copy.
	stored, registry := registry, maps.Clone(registry)
	for ri, r := range reqs {
		pr := r.Producer
		if pr == nil {
			continue
		}
		// 1. A duplicate of a committed (or earlier accepted) request.
		origins := make([]liveBatch, len(r.Batches))
		dup := true
		for bi, b := range r.Batches {
			s := get(ProducerPartition{pr.ID, catalog.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}})
			last := AddSequence(b.BaseSequence, b.Records-1)
			found := false
			if s != nil && s.epoch == pr.Epoch {
				for _, kb := range s.batches {
					if kb.first == b.BaseSequence && kb.last == last {
						origins[bi], found = kb, true
						break
					}
				}
			}
			if !found {
				dup = false
				break
			}
		}
		if dup {
			pc.dups[ri] = origins
			pc.Errs[ri] = errDuplicate
			continue
		}
		// 2. Refused already.
		if pc.Errs[ri] != nil {
			continue
		}
		// 3. The producer's identity.
		cur, ok := registry[pr.ID]
		switch {
		case !ok:
			pc.Errs[ri] = fmt.Errorf("%w: producer id %d was never handed out or has expired: initialise the producer again", catalog.ErrUnknownProducer, pr.ID)
			continue
		case pr.Epoch < cur:
			pc.Errs[ri] = fmt.Errorf("%w: producer id %d epoch %d: a newer instance initialised epoch %d", catalog.ErrProducerFenced, pr.ID, pr.Epoch, cur)
			continue
		}
		// 4. Sequences, continuing within the request.
		next := map[catalog.TopicPartition]int32{}
		var serr error
		for _, b := range r.Batches {
			tp := catalog.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}
			want, ok := next[tp]
			if !ok {
				want = 0
				if s := get(ProducerPartition{pr.ID, tp}); s != nil && s.epoch == pr.Epoch && len(s.batches) > 0 {
					want = AddSequence(s.batches[len(s.batches)-1].last, 1)
				}
			}
			if b.BaseSequence != want {
				serr = &catalog.SequenceError{TopicID: b.TopicID, Partition: b.Partition, Expected: want, Got: b.BaseSequence}
				break
			}
			next[tp] = AddSequence(b.BaseSequence, b.Records)
		}
		if serr != nil {
			pc.Errs[ri] = fmt.Errorf("producer id %d epoch %d: %w", pr.ID, pr.Epoch, serr)
			continue
		}
		// 5. Accepted: remember its batches, and its epoch (if ahead, rule 3).
		accepted[pr.ID], registry[pr.ID] = true, pr.Epoch
		for bi, b := range r.Batches {
			k := ProducerPartition{pr.ID, catalog.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}}
			s := get(k)
			if s == nil || s.epoch != pr.Epoch {
				// A request of an earlier epoch in this flush may have touched it.
				s = &liveState{epoch: pr.Epoch, touched: s != nil && s.touched}
				pc.state[k] = s
			}
			if !s.touched {
				s.touched = true
				pc.keys = append(pc.keys, k)
			}
			s.batches = append(s.batches, liveBatch{
				first: b.BaseSequence, last: AddSequence(b.BaseSequence, b.Records-1),
				pending: &pendingRef{ri, bi},
			})
			if n := len(s.batches); n > producerBatchesKept {
				s.batches = append(s.batches[:0], s.batches[n-producerBatchesKept:]...)
			}
		}
	}
	pc.collect(accepted, stored, registry)
	return pc
}

// collect lists the producers accepted, and those whose epoch the flush moved from
// stored to now, by id.
func (pc *ProducerCheck) collect(accepted map[int64]bool, stored, now map[int64]int16) {
	for id := range accepted {
		pc.Producers = append(pc.Producers, id)
		if now[id] != stored[id] {
			pc.Bumps = append(pc.Bumps, ProducerEpoch{ID: id, Epoch: now[id]})
		}
	}
	sortInt64s(pc.Producers)
	slices.SortFunc(pc.Bumps, func(a, b ProducerEpoch) int { return cmp.Compare(a.ID, b.ID) })
}

// ProducerEpoch is a producer id and an epoch of it.
type ProducerEpoch struct {
	ID    int64
	Epoch int16
}

// Finish completes an Assignment made with pc.Errs: duplicates get their original
// offsets with Duplicate set, and it returns the producer states to write, sorted by
// (topic, partition, producer) — the lock order of producer state rows.
func (pc *ProducerCheck) Finish(a *Assignment) ([]ProducerStateRow, error) {
	resolve := func(b liveBatch) (int64, error) {
		if b.pending == nil {
			return b.base, nil
		}
		res := a.Results[b.pending.request]
		if res.Err != nil || b.pending.batch >= len(res.BaseOffsets) {
			return 0, fmt.Errorf("catalog: producer state refers to request %d batch %d, which has no offset", b.pending.request, b.pending.batch)
		}
		return res.BaseOffsets[b.pending.batch], nil
	}
	for ri, origins := range pc.dups {
		if origins == nil {
			continue
		}
		offs := make([]int64, len(origins))
		for bi, o := range origins {
			base, err := resolve(o)
			if err != nil {
				return nil, err
			}
			offs[bi] = base
		}
		a.Results[ri] = catalog.Result{BaseOffsets: offs, Duplicate: true}
	}
	rows := make([]ProducerStateRow, 0, len(pc.keys))
	for _, k := range pc.keys {
		s := pc.state[k]
		row := ProducerStateRow{ProducerPartition: k, ProducerState: ProducerState{Epoch: s.epoch, Batches: make([]ProducerBatch, len(s.batches))}}
		for i, b := range s.batches {
			base, err := resolve(b)
			if err != nil {
				return nil, err
			}
			row.Batches[i] = ProducerBatch{FirstSequence: b.first, LastSequence: b.last, BaseOffset: base}
		}
		rows = append(rows, row)
	}
	sortProducerRows(rows)
	return rows, nil
}

// ProducerKeys lists the (producer, partition) states a flush's idempotent batches
// name, sorted as Finish sorts rows, and the distinct producer ids, ascending: what a
// backend reads (locked) before CheckProducers.
func (p *Plan) ProducerKeys() (keys []ProducerPartition, ids []int64) {
	seen := map[ProducerPartition]bool{}
	idSeen := map[int64]bool{}
	for _, r := range p.Segment.Requests {
		if r.Producer == nil {
			continue
		}
		if !idSeen[r.Producer.ID] {
			idSeen[r.Producer.ID] = true
			ids = append(ids, r.Producer.ID)
		}
		for _, b := range r.Batches {
			k := ProducerPartition{r.Producer.ID, catalog.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sortInt64s(ids)
	rows := make([]ProducerStateRow, len(keys))
	for i, k := range keys {
		rows[i].ProducerPartition = k
	}
	sortProducerRows(rows)
	for i := range rows {
		keys[i] = rows[i].ProducerPartition
	}
	return keys, ids
}

// Idempotent reports whether any request of the flush carries a Producer.
func (p *Plan) Idempotent() bool {
	for _, r := range p.Segment.Requests {
		if r.Producer != nil {
			return true
		}
	}
	return false
}

func sortInt64s(s []int64) { slices.Sort(s) }

func sortProducerRows(rows []ProducerStateRow) {
	slices.SortFunc(rows, func(a, b ProducerStateRow) int {
		if c := comparePartitions(a.TopicPartition, b.TopicPartition); c != 0 {
			return c
		}
		return cmp.Compare(a.ProducerID, b.ProducerID)
	})
}
