package catalog

// Idempotent and transactional producers (DESIGN.md "Write path"; the exactly-once
// issue). A producer asks InitProducer for an id and an epoch, then numbers the records
// it sends to each partition with a sequence, as Kafka's idempotent producer does. The
// commit checks each idempotent request against the producer's state on every
// partition it writes (Plan.CheckProducers, in the commit's transaction, after the
// partition rows are locked): a retry of a batch already committed answers its original
// offsets and writes nothing; a stale epoch is fenced; a sequence gap is refused with
// the sequence expected. The state kept per producer and partition is its epoch and its
// last ProducerBatchesKept batches, so a producer with at most that many requests in
// flight can retry any of them blindly.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
	"unicode/utf8"
)

// Producers is the producer part of the catalog, implemented by both backends beside
// Catalog and proved by catalogtest.RunProducers.
type Producers interface {
	// InitProducer hands out a producer identity. Without a transactional id it is a
	// new id at epoch 0, unless current names a producer without a transactional id at
	// its current epoch: that producer is bumped to the next epoch and keeps its id
	// (KIP-360; NextIdempotentEpoch decides). With one, a known id is returned again at
	// the next epoch, which fences every older instance (their requests get
	// ErrProducerFenced from then on); an unknown one (or one expired) gets a new id at
	// epoch 0. The epoch never wraps: past math.MaxInt16 the transactional id moves to
	// a new id at epoch 0. An invalid transactional id is ErrInvalidTransactionalID.
	//
	// current, when set, is the identity the caller holds now for this transactional
	// id: an instance bumping its own epoch (to restart its sequences after a refused
	// request) must not fence a newer instance that has taken the id over. The bump
	// then happens only if current is still the id's identity; otherwise
	// ErrProducerFenced (ErrUnknownProducer when the id has expired).
	//
	// InitProducer also forgets producers idle for longer than Options.ProducerExpiry.
	InitProducer(ctx context.Context, transactionalID string, current *Producer) (Producer, error)
}

var (
	// ErrProducerFenced: the request's epoch is older than the producer's current
	// epoch — a newer instance with the same transactional id has initialised. The
	// instance must stop; nothing it sends commits.
	ErrProducerFenced = errors.New("producer fenced")
	// ErrOutOfOrderSequence: a batch's base sequence is not the one the partition
	// expects from this producer (a gap, or a retry too old to be recognised). The
	// error is a *SequenceError saying which sequence was expected.
	ErrOutOfOrderSequence = errors.New("out of order sequence")
	// ErrUnknownProducer: the producer id was never handed out or has expired.
	// Initialise again.
	ErrUnknownProducer = errors.New("unknown producer id")
	// ErrInvalidTransactionalID: a transactional id that cannot exist.
	ErrInvalidTransactionalID = errors.New("invalid transactional id")
)

// SequenceError is an ErrOutOfOrderSequence refusal.
type SequenceError struct {
	TopicID   int64
	Partition int32
	// Expected is the base sequence the partition expects next from the producer at
	// this epoch (0 when it has no state there); Got is the batch's.
	Expected, Got int32
}

func (e *SequenceError) Error() string {
	return fmt.Sprintf("%s: topic id %d partition %d: base sequence %d, expected %d",
		ErrOutOfOrderSequence, e.TopicID, e.Partition, e.Got, e.Expected)
}

func (e *SequenceError) Unwrap() error { return ErrOutOfOrderSequence }

// ProducerBatchesKept is how many of a producer's latest batches per partition the
// commit remembers to recognise retries: Kafka's bound on in-flight requests of an
// idempotent producer (max.in.flight.requests.per.connection ≤ 5).
const ProducerBatchesKept = 5

// DefaultProducerExpiry is Options.ProducerExpiry when it is zero.
const DefaultProducerExpiry = 7 * 24 * time.Hour

// MaxTransactionalID bounds a transactional id's length in bytes.
const MaxTransactionalID = 255

// ValidateTransactionalID accepts 1 to 255 bytes of UTF-8 without control characters:
// ids are chosen by applications (a service name and a shard) and show in listings.
func ValidateTransactionalID(id string) error {
	if id == "" || len(id) > MaxTransactionalID || !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q: use 1 to %d bytes of UTF-8", ErrInvalidTransactionalID, truncateName(id), MaxTransactionalID)
	}
	for _, r := range id {
		if r < ' ' || r == 0x7f {
			return fmt.Errorf("%w: %q: control characters are not allowed", ErrInvalidTransactionalID, truncateName(id))
		}
	}
	return nil
}

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
func NextIdempotentEpoch(current Producer, found, transactional bool, epoch int16) (next int16, ok bool) {
	if !found || transactional || epoch != current.Epoch || epoch >= math.MaxInt16 {
		return 0, false
	}
	return epoch + 1, true
}

// CheckCurrent is InitProducer's rule for current (see Producers): the transactional
// id's row, if found, is at (id, epoch).
func CheckCurrent(current *Producer, found bool, id int64, epoch int16) error {
	switch {
	case current == nil:
		return nil
	case !found:
		return fmt.Errorf("%w: producer id %d epoch %d: the transactional id has expired", ErrUnknownProducer, current.ID, current.Epoch)
	case current.ID != id || current.Epoch != epoch:
		return fmt.Errorf("%w: producer id %d epoch %d: the transactional id is now at id %d epoch %d", ErrProducerFenced, current.ID, current.Epoch, id, epoch)
	}
	return nil
}

// ProducerTouchInterval is how stale a producer's last-used time may grow before a
// commit refreshes it: a hundredth of the expiry, so an active producer's registry row
// is written at most that often, yet is never seen idle for longer than the expiry.
func ProducerTouchInterval(expiry time.Duration) time.Duration {
	return max(expiry/100, time.Second)
}

// ProducerExpired says whether a producer last used at lastUsed has expired at now.
func ProducerExpired(lastUsed, now time.Time, expiry time.Duration) bool {
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
	TopicPartition
}

// ProducerState is a producer's state on one partition, as stored.
type ProducerState struct {
	// Epoch is the producer epoch of the batches kept.
	Epoch int16
	// Batches are the latest batches committed at Epoch, oldest first, at most
	// ProducerBatchesKept.
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
//     ProducerBatchesKept forgotten.
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
			s := get(ProducerPartition{pr.ID, TopicPartition{b.TopicID, b.Partition}})
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
			pc.Errs[ri] = fmt.Errorf("%w: producer id %d was never handed out or has expired: initialise the producer again", ErrUnknownProducer, pr.ID)
			continue
		case pr.Epoch < cur:
			pc.Errs[ri] = fmt.Errorf("%w: producer id %d epoch %d: a newer instance initialised epoch %d", ErrProducerFenced, pr.ID, pr.Epoch, cur)
			continue
		}
		// 4. Sequences, continuing within the request.
		next := map[TopicPartition]int32{}
		var serr error
		for _, b := range r.Batches {
			tp := TopicPartition{b.TopicID, b.Partition}
			want, ok := next[tp]
			if !ok {
				want = 0
				if s := get(ProducerPartition{pr.ID, tp}); s != nil && s.epoch == pr.Epoch && len(s.batches) > 0 {
					want = AddSequence(s.batches[len(s.batches)-1].last, 1)
				}
			}
			if b.BaseSequence != want {
				serr = &SequenceError{TopicID: b.TopicID, Partition: b.Partition, Expected: want, Got: b.BaseSequence}
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
			k := ProducerPartition{pr.ID, TopicPartition{b.TopicID, b.Partition}}
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
			if n := len(s.batches); n > ProducerBatchesKept {
				s.batches = append(s.batches[:0], s.batches[n-ProducerBatchesKept:]...)
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
		a.Results[ri] = Result{BaseOffsets: offs, Duplicate: true}
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
			k := ProducerPartition{r.Producer.ID, TopicPartition{b.TopicID, b.Partition}}
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

// GroupNames lists the distinct groups whose offsets the flush's requests commit,
// ascending: the order in which a backend locks them (after partitions and producer
// state).
func (p *Plan) GroupNames() []string {
	var names []string
	for _, r := range p.Segment.Requests {
		if g := r.GroupOffsets; g != nil {
			names = append(names, g.Group)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// OffsetTopics lists the distinct topic names the flush's group offsets name, sorted.
func (p *Plan) OffsetTopics() []string {
	var out []string
	for _, r := range p.Segment.Requests {
		if r.GroupOffsets == nil {
			continue
		}
		for _, o := range r.GroupOffsets.Offsets {
			out = append(out, o.Topic)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// GroupCheck is the outcome of Plan.CheckGroupOffsets.
type GroupCheck struct {
	// Errs is the errors passed in with the group refusals added.
	Errs []error
	plan *Plan
	tps  [][]TopicPartition // per request with group offsets: its offsets' partitions
}

// GroupOffsetRow is one committed offset a commit stores.
type GroupOffsetRow struct {
	Group string
	TopicPartition
	Offset      int64
	Metadata    string
	MemberID    string // "" for a commit from outside the group
	MemberEpoch int32
}

// CheckGroupOffsets checks, with CheckOffsetCommit, the group offsets of every request
// not already refused in errs. groups holds the groups named (loaded under their lock;
// a missing one does not exist: refused with ErrGroupNotFound unless the commit has no
// member, which creates it — the backend inserts its row), topics and highWatermarks
// what CheckOffsetCommit needs for OffsetTopics. A refused offset commit refuses its
// whole request, with the group error.
func (p *Plan) CheckGroupOffsets(errs []error, groups map[string]*GroupState, now time.Time, topics map[string]TopicMeta, highWatermarks map[TopicPartition]int64) *GroupCheck {
	gc := &GroupCheck{Errs: append([]error(nil), errs...), plan: p, tps: make([][]TopicPartition, len(errs))}
	for ri, r := range p.Segment.Requests {
		oc := r.GroupOffsets
		if oc == nil || gc.Errs[ri] != nil {
			continue
		}
		// The shape first, before anything loaded is looked at: as a backend that checks
		// the rest in SQL does.
		if err := ValidateOffsetCommit(*oc); err != nil {
			gc.Errs[ri] = fmt.Errorf("group offsets: %w", err)
			continue
		}
		st := groups[oc.Group]
		if st == nil {
			if oc.MemberID != "" {
				gc.Errs[ri] = GroupOffsetsRefusal(*oc, RefusedGroupNotFound, 0, 0)
				continue
			}
			st = NewGroupState(oc.Group, "", now)
		}
		tps, err := CheckOffsetCommit(st, now, *oc, topics, highWatermarks)
		if err != nil {
			gc.Errs[ri] = fmt.Errorf("group offsets: %w", err)
			continue
		}
		gc.tps[ri] = tps
	}
	return gc
}

// GroupOffsetsRefusal is the error CheckGroupOffsets refuses a request with when its
// offsets are refused with code (see OffsetCommitRefusal).
func GroupOffsetsRefusal(oc OffsetCommit, code string, row int, value int64) error {
	err := OffsetCommitRefusal(oc, code, row, value)
	if code == RefusedGroupNotFound {
		return err
	}
	return fmt.Errorf("group offsets: %w", err)
}

// Rows lists the offsets to store once results are final (after Assign and
// ProducerCheck.Finish): those of requests that committed now — not refused, not
// duplicates, whose offsets were stored the first time. When two requests of a flush
// commit one group partition, the later one wins, as if they had committed one after
// the other. Sorted by (group, topic, partition).
func (gc *GroupCheck) Rows(results []Result) []GroupOffsetRow {
	type key struct {
		group string
		tp    TopicPartition
	}
	at := map[key]int{}
	var rows []GroupOffsetRow
	for ri, r := range gc.plan.Segment.Requests {
		oc := r.GroupOffsets
		if oc == nil || gc.tps[ri] == nil || results[ri].Err != nil || results[ri].Duplicate {
			continue
		}
		for i, o := range oc.Offsets {
			row := GroupOffsetRow{Group: oc.Group, TopicPartition: gc.tps[ri][i], Offset: o.Offset,
				Metadata: o.Metadata, MemberID: oc.MemberID, MemberEpoch: oc.MemberEpoch}
			k := key{oc.Group, row.TopicPartition}
			if j, ok := at[k]; ok {
				rows[j] = row
				continue
			}
			at[k] = len(rows)
			rows = append(rows, row)
		}
	}
	slices.SortFunc(rows, func(a, b GroupOffsetRow) int {
		if c := cmp.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return comparePartitions(a.TopicPartition, b.TopicPartition)
	})
	return rows
}
