package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// This file holds the commit's rules, shared by both backends so that they differ only in
// SQL. A backend's Commit runs, in one transaction:
//
//	plan, err := PlanSegment(seg)                 // shape; before any SQL
//	CheckCommitTime(plan.KeyTime, now, timeout)   // by the database clock
//	errs := plan.CheckRequests(topics, now)       // per request, with the topic rows
//	a, err := plan.Assign(errs, partitions)       // offsets and chunk rows from the watermarks
//	... insert a.Chunks, apply a.Advances, return a.Results
//
// A backend that does the checks and the assignment inside SQL (one round trip) uses
// PlanSegment to validate and flatten the flush into arrays before the call, and
// Plan.ResultsFromChunks to map the chunk rows it returns back to per-request results;
// the rules it must reproduce are the ones Assign states, and its answers must equal
// Assign's.

// LogAppendTimeSkew is how far ahead of the database clock a batch of a LogAppendTime
// topic may be stamped: the writer stamps records with its own clock, and a writer clock
// running ahead would otherwise pin data against time retention.
const LogAppendTimeSkew = time.Second

func comparePartitions(a, b catalog.TopicPartition) int {
	if c := cmp.Compare(a.TopicID, b.TopicID); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Plan is a Segment whose shape has been validated, with its batches grouped by
// partition in object order.
type Plan struct {
	Segment catalog.Segment
	// Partitions holds one entry per partition the flush touches, sorted by (TopicID,
	// Partition): the order in which a backend locks partition rows.
	Partitions []PartitionBatches
	// Topics lists the distinct topic ids, ascending.
	Topics []int64
}

// PartitionBatches is one partition's batches of a flush, in object order (ascending
// Pos), whichever requests they belong to.
type PartitionBatches struct {
	catalog.TopicPartition
	Batches []BatchRef
}

// BatchRef points at one batch of a flush.
type BatchRef struct {
	Request int // index in Segment.Requests
	Batch   int // index in Segment.Requests[Request].Batches
	Pos     int64
	Len     int64
	Records int32
	// MaxTimestamp is the batch's maximum record timestamp, unix ms.
	MaxTimestamp int64
	// Adjacent: the batch starts where the previous batch of the same partition ends, so
	// one chunk row may cover both. False for the partition's first batch.
	Adjacent bool
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", catalog.ErrInvalidSegment, fmt.Sprintf(format, args...))
}

// PlanSegment validates the shape of a flush and groups its batches by partition in
// object order. The shape rules, each an ErrInvalidSegment:
//
//   - the key is not empty and the size is positive;
//   - there is at least one request, and every request has at least one batch;
//   - every batch has Records > 0, Len > 0 and lies inside [0, Size);
//   - no two batches overlap;
//   - a request carries group offsets or source offsets, not both;
//   - a transactional request (Txn) has a producer and a transactional id, and
//     carries neither;
//   - a request's batches for one partition are adjacent in the object (one
//     contiguous byte range), so a request never straddles another's batch;
//   - an idempotent request (Producer set) has a non-negative producer id and epoch
//     and a non-negative BaseSequence on every batch, and within a partition the
//     requests of one producer id lie in request order, so that sequence order (checked
//     in request order) is offset order (assigned in object order).
//
// Topic ids and partitions are not checked here: an unknown topic or a partition out
// of range fails only its own request (CheckRequests).
func PlanSegment(seg catalog.Segment) (*Plan, error) {
	if seg.Key == "" {
		return nil, invalid("empty key")
	}
	if seg.Size <= 0 {
		return nil, invalid("%s: size %d", seg.Key, seg.Size)
	}
	if len(seg.Requests) == 0 {
		return nil, invalid("%s: no requests", seg.Key)
	}
	byPart := map[catalog.TopicPartition][]BatchRef{}
	n := 0
	for ri, r := range seg.Requests {
		if len(r.Batches) == 0 {
			return nil, invalid("%s: request %d has no batches", seg.Key, ri)
		}
		if r.Source != nil && r.GroupOffsets != nil {
			return nil, invalid("%s: request %d commits both group offsets and source offsets", seg.Key, ri)
		}
		if r.Txn != nil && (r.Producer == nil || r.Source != nil || r.GroupOffsets != nil || r.Txn.TransactionalID == "") {
			return nil, invalid("%s: request %d: a transactional request needs a producer and a transactional id, and carries no offsets", seg.Key, ri)
		}
		if pr := r.Producer; pr != nil {
			if pr.ID < 0 || pr.Epoch < 0 {
				return nil, invalid("%s: request %d: producer id %d epoch %d", seg.Key, ri, pr.ID, pr.Epoch)
			}
			for bi, b := range r.Batches {
				if b.BaseSequence < 0 {
					return nil, invalid("%s: request %d batch %d: idempotent, with base sequence %d", seg.Key, ri, bi, b.BaseSequence)
				}
			}
		}
		for bi, b := range r.Batches {
			switch {
			case b.Records <= 0:
				return nil, invalid("%s: request %d batch %d: %d records", seg.Key, ri, bi, b.Records)
			case b.Pos < 0 || b.Len <= 0 || b.Len > seg.Size-b.Pos:
				return nil, invalid("%s: request %d batch %d: byte range [%d, +%d) outside object of %d bytes", seg.Key, ri, bi, b.Pos, b.Len, seg.Size)
			}
			tp := catalog.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}
			byPart[tp] = append(byPart[tp], BatchRef{
				Request: ri, Batch: bi, Pos: b.Pos, Len: b.Len,
				Records: b.Records, MaxTimestamp: b.MaxTimestamp,
			})
			n++
		}
	}

	// No overlaps, across partitions too: sort every batch by position once.
	all := make([]BatchRef, 0, n)
	for _, refs := range byPart {
		all = append(all, refs...)
	}
	slices.SortFunc(all, func(a, b BatchRef) int { return cmp.Compare(a.Pos, b.Pos) })
	for i := 1; i < len(all); i++ {
		if p := all[i-1]; all[i].Pos < p.Pos+p.Len {
			return nil, invalid("%s: request %d batch %d [%d, +%d) overlaps request %d batch %d [%d, +%d)",
				seg.Key, all[i].Request, all[i].Batch, all[i].Pos, all[i].Len, p.Request, p.Batch, p.Pos, p.Len)
		}
	}

	p := &Plan{Segment: seg, Partitions: make([]PartitionBatches, 0, len(byPart))}
	for tp, refs := range byPart {
		slices.SortFunc(refs, func(a, b BatchRef) int { return cmp.Compare(a.Pos, b.Pos) })
		// A request's batches for this partition must be consecutive in object order
		// and touch each other: once a request's run ends it must not reappear.
		done := map[int]bool{}
		lastOf := map[int64]int{} // producer id → its last request seen here
		for i := range refs {
			if pr := seg.Requests[refs[i].Request].Producer; pr != nil {
				if last, ok := lastOf[pr.ID]; ok && refs[i].Request < last {
					return nil, invalid("%s: requests %d and %d of producer id %d lie out of request order in topic %d partition %d",
						seg.Key, last, refs[i].Request, pr.ID, tp.TopicID, tp.Partition)
				}
				lastOf[pr.ID] = refs[i].Request
			}
			if i > 0 {
				prev := refs[i-1]
				refs[i].Adjacent = refs[i].Pos == prev.Pos+prev.Len
				if prev.Request == refs[i].Request {
					if !refs[i].Adjacent {
						return nil, invalid("%s: request %d: batches %d and %d for topic %d partition %d are not adjacent",
							seg.Key, prev.Request, prev.Batch, refs[i].Batch, tp.TopicID, tp.Partition)
					}
					continue
				}
				done[prev.Request] = true
			}
			if done[refs[i].Request] {
				return nil, invalid("%s: request %d: batches for topic %d partition %d are not adjacent",
					seg.Key, refs[i].Request, tp.TopicID, tp.Partition)
			}
		}
		p.Partitions = append(p.Partitions, PartitionBatches{TopicPartition: tp, Batches: refs})
	}
	slices.SortFunc(p.Partitions, func(a, b PartitionBatches) int {
		return comparePartitions(a.TopicPartition, b.TopicPartition)
	})
	for _, pb := range p.Partitions {
		if len(p.Topics) == 0 || p.Topics[len(p.Topics)-1] != pb.TopicID {
			p.Topics = append(p.Topics, pb.TopicID)
		}
	}
	return p, nil
}

// KeyTime returns the creation time in a segment key, as an ErrInvalidSegment when the
// key is not one segment.NewKey makes.
func KeyTime(key string) (time.Time, error) {
	t, err := segment.KeyTime(key)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %v", catalog.ErrInvalidSegment, err)
	}
	return t, nil
}

// CheckCommitTime refuses, with ErrCommitTooLate, a segment whose key time is more than
// timeout before now (the database clock): past that the orphan sweep may own the
// object, so the commit must never land. A key time in the future is accepted; it only
// delays the sweep.
func CheckCommitTime(keyTime, now time.Time, timeout time.Duration) error {
	if age := now.Sub(keyTime); age > timeout {
		return fmt.Errorf("%w: key time %s is %s old by the database clock (commit timeout %s)",
			catalog.ErrCommitTooLate, keyTime.UTC().Format(time.RFC3339Nano), age.Round(time.Millisecond), timeout)
	}
	return nil
}

// TopicState is what the per-request checks need of one topic, read in the commit's
// transaction.
type TopicState struct {
	Partitions    int32
	LogAppendTime bool // message.timestamp.type=LogAppendTime
}

// CheckRequests applies the per-request checks and returns one error per request, nil
// for a request that may commit. topics holds the live (not deleted) topics the flush
// names; a topic missing from it does not exist. A request fails as a whole on its first
// failing batch, with:
//
//   - ErrTopicNotFound: the topic does not exist or was deleted;
//   - ErrPartitionOutOfRange: the partition is negative or not below the topic's count;
//   - ErrTimestampOutOfRange: the topic uses LogAppendTime and the batch's MaxTimestamp
//     is more than LogAppendTimeSkew ahead of now (the database clock).
func (p *Plan) CheckRequests(topics map[int64]TopicState, now time.Time) []error {
	errs := make([]error, len(p.Segment.Requests))
	limit := now.Add(LogAppendTimeSkew).UnixMilli()
	for ri, r := range p.Segment.Requests {
	batches:
		for bi, b := range r.Batches {
			t, ok := topics[b.TopicID]
			switch {
			case !ok:
				errs[ri] = fmt.Errorf("%w: topic id %d", catalog.ErrTopicNotFound, b.TopicID)
			case b.Partition < 0 || b.Partition >= t.Partitions:
				errs[ri] = fmt.Errorf("%w: topic id %d partition %d (topic has %d)", catalog.ErrPartitionOutOfRange, b.TopicID, b.Partition, t.Partitions)
			case t.LogAppendTime && b.MaxTimestamp > limit:
				errs[ri] = fmt.Errorf("%w: batch %d of topic id %d partition %d stamped %d ms ahead of the database clock (LogAppendTime allows %d ms)",
					catalog.ErrTimestampOutOfRange, bi, b.TopicID, b.Partition, b.MaxTimestamp-now.UnixMilli(), LogAppendTimeSkew.Milliseconds())
			default:
				continue
			}
			break batches
		}
	}
	return errs
}

// PartitionState is what offset assignment needs of one partition, read (locked) in the
// commit's transaction.
type PartitionState struct {
	HighWatermark int64
	// MaxTimestamp is the partition's running maximum timestamp: that of its last chunk,
	// NoTimestamp when it has none.
	MaxTimestamp int64
}

// Advance is one partition's new state after a commit.
type Advance struct {
	catalog.TopicPartition
	HighWatermark int64
	MaxTimestamp  int64 // new running maximum timestamp
	AddBytes      int64 // bytes of the new chunk rows
}

// Assignment is what a commit writes and answers.
type Assignment struct {
	Results  []catalog.Result   // Results[i] answers Segment.Requests[i]
	Chunks   []catalog.ChunkRow // partition order (as Plan.Partitions), then object order
	Advances []Advance          // one per partition that received chunk rows, sorted
}

// Assign assigns offsets to the accepted requests and lays out their chunk rows. errs
// comes from CheckRequests (nil entries are accepted); state holds every partition that
// an accepted request touches. The rules:
//
//   - within each partition, accepted batches take dense offsets from the high
//     watermark in object order; refused batches take none;
//   - a chunk row covers a maximal run of accepted batches that are adjacent in the
//     object, so a refused request's batch (or a gap in the bytes) splits the run and
//     its bytes are never served;
//   - a chunk's running maximum timestamp is the maximum of the partition's previous
//     running maximum and the chunk's own;
//   - a refused request gets its error and no offsets; an accepted one gets the base
//     offset of each of its batches.
func (p *Plan) Assign(errs []error, state map[catalog.TopicPartition]PartitionState) (Assignment, error) {
	reqs := p.Segment.Requests
	if len(errs) != len(reqs) {
		return Assignment{}, fmt.Errorf("catalog: assign %s: %d request errors for %d requests", p.Segment.Key, len(errs), len(reqs))
	}
	a := Assignment{Results: make([]catalog.Result, len(reqs))}
	for ri := range reqs {
		if errs[ri] != nil {
			a.Results[ri].Err = errs[ri]
		} else {
			a.Results[ri].BaseOffsets = make([]int64, len(reqs[ri].Batches))
		}
	}
	for _, pb := range p.Partitions {
		var st PartitionState
		stateKnown := false
		run := -1 // index in a.Chunks of the run being extended, -1 after a refused batch
		var added int64
		for _, b := range pb.Batches {
			if errs[b.Request] != nil {
				run = -1
				continue
			}
			if !stateKnown {
				s, ok := state[pb.TopicPartition]
				if !ok {
					return Assignment{}, fmt.Errorf("catalog: assign %s: no state for topic %d partition %d", p.Segment.Key, pb.TopicID, pb.Partition)
				}
				st, stateKnown = s, true
			}
			base := st.HighWatermark
			a.Results[b.Request].BaseOffsets[b.Batch] = base
			st.HighWatermark += int64(b.Records)
			st.MaxTimestamp = max(st.MaxTimestamp, b.MaxTimestamp)
			added += b.Len
			if run >= 0 && b.Adjacent {
				c := &a.Chunks[run]
				c.LastOffset = st.HighWatermark - 1
				c.Len += b.Len
				c.MaxTimestamp = max(c.MaxTimestamp, b.MaxTimestamp)
				c.RunningMaxTimestamp = st.MaxTimestamp
				continue
			}
			a.Chunks = append(a.Chunks, catalog.ChunkRow{
				TopicID: pb.TopicID, Partition: pb.Partition,
				BaseOffset: base, LastOffset: st.HighWatermark - 1,
				Pos: b.Pos, Len: b.Len,
				MaxTimestamp: b.MaxTimestamp, RunningMaxTimestamp: st.MaxTimestamp,
			})
			run = len(a.Chunks) - 1
		}
		if stateKnown {
			a.Advances = append(a.Advances, Advance{
				TopicPartition: pb.TopicPartition,
				HighWatermark:  st.HighWatermark, MaxTimestamp: st.MaxTimestamp, AddBytes: added,
			})
		}
	}
	return a, nil
}

// ResultsFromChunks maps chunk rows read back for this flush's key to per-request
// results, as Settle answers (and as a backend that assigns offsets in SQL answers
// Commit, with the requests' own errors in place of ErrCommitAborted). rows may come in
// any order.
//
// A request all of whose batches lie inside chunk rows committed: each batch's base
// offset is its chunk's base offset plus the records of the batches before it in that
// chunk. A request none of whose batches is covered did not commit and gets
// ErrCommitAborted (retryable: it may have been refused for a reason the rows do not
// record). Rows that do not tile the flush's batches exactly, or a request covered only
// in part, mean the rows are not this flush's (or were rewritten since): an error.
func (p *Plan) ResultsFromChunks(rows []catalog.ChunkRow) ([]catalog.Result, error) {
	reqs := p.Segment.Requests
	base := make([][]int64, len(reqs))
	covered := make([]int, len(reqs))
	for ri := range reqs {
		base[ri] = make([]int64, len(reqs[ri].Batches))
	}
	byPart := make(map[catalog.TopicPartition][]BatchRef, len(p.Partitions))
	for _, pb := range p.Partitions {
		byPart[pb.TopicPartition] = pb.Batches
	}
	for _, c := range rows {
		refs := byPart[catalog.TopicPartition{TopicID: c.TopicID, Partition: c.Partition}]
		i, _ := slices.BinarySearchFunc(refs, c.Pos, func(b BatchRef, pos int64) int { return cmp.Compare(b.Pos, pos) })
		pos, off := c.Pos, c.BaseOffset
		for ; i < len(refs) && pos < c.Pos+c.Len; i++ {
			b := refs[i]
			if b.Pos != pos {
				break
			}
			base[b.Request][b.Batch] = off
			covered[b.Request]++
			pos += b.Len
			off += int64(b.Records)
		}
		if pos != c.Pos+c.Len || off != c.LastOffset+1 {
			return nil, fmt.Errorf("catalog: chunk row topic %d partition %d offsets [%d, %d] bytes [%d, +%d) does not match the batches of %s",
				c.TopicID, c.Partition, c.BaseOffset, c.LastOffset, c.Pos, c.Len, p.Segment.Key)
		}
	}
	out := make([]catalog.Result, len(reqs))
	for ri, r := range reqs {
		switch covered[ri] {
		case len(r.Batches):
			out[ri].BaseOffsets = base[ri]
		case 0:
			out[ri].Err = fmt.Errorf("%w: request %d of %s has no chunk rows", catalog.ErrCommitAborted, ri, p.Segment.Key)
		default:
			return nil, fmt.Errorf("catalog: request %d of %s: %d of its %d batches have chunk rows; a request commits whole",
				ri, p.Segment.Key, covered[ri], len(r.Batches))
		}
	}
	return out, nil
}

// CheckSettled vouches for results read back from a segment's chunk rows
// (ResultsFromChunks) only while those rows are sure to be the commit's own: within
// SettleAge of the commit (committed, now: the database clock). Later, a request without
// rows may have had them rewritten by a merge rather than never had them, and
// ErrSettleExpired says so. (A writer settles that late only when the catalog was
// unreachable for longer than SettleAge; the reliability harness's pg-restart class found
// such requests answered as refused although their records were visible.)
func CheckSettled(results []catalog.Result, committed, now time.Time, commitTimeout time.Duration) error {
	age := now.Sub(committed)
	if age < catalog.SettleAge(commitTimeout) {
		return nil
	}
	for ri, r := range results {
		if r.Err != nil {
			return fmt.Errorf("%w: request %d has no chunk rows %s after the commit (settle age %s)",
				catalog.ErrSettleExpired, ri, age.Round(time.Millisecond), catalog.SettleAge(commitTimeout))
		}
	}
	return nil
}

// Request error codes carry a per-request error through SQL or an API as a stable
// string; RequestErrorCode and RequestError convert.
const (
	CodeTopicNotFound       = "topic_not_found"
	CodePartitionOutOfRange = "partition_out_of_range"
	CodeTimestampOutOfRange = "timestamp_out_of_range"
	CodeCommitAborted       = "commit_aborted"
)

var requestCodes = []struct {
	code string
	err  error
}{
	{CodeTopicNotFound, catalog.ErrTopicNotFound},
	{CodePartitionOutOfRange, catalog.ErrPartitionOutOfRange},
	{CodeTimestampOutOfRange, catalog.ErrTimestampOutOfRange},
	{CodeCommitAborted, catalog.ErrCommitAborted},
	{CodeProducerFenced, catalog.ErrProducerFenced},
	{CodeOutOfOrderSequence, catalog.ErrOutOfOrderSequence},
	{CodeUnknownProducer, catalog.ErrUnknownProducer},
}

// RequestErrorCode returns the code of a per-request error, "" for nil or an error
// without a code.
func RequestErrorCode(err error) string {
	if err == nil {
		return ""
	}
	for _, rc := range requestCodes {
		if errors.Is(err, rc.err) {
			return rc.code
		}
	}
	return ""
}

// RequestError returns the error for a code ("" gives nil), wrapping its sentinel with
// detail when detail is not empty.
func RequestError(code, detail string) error {
	if code == "" {
		return nil
	}
	for _, rc := range requestCodes {
		if rc.code == code {
			if detail == "" {
				return rc.err
			}
			return fmt.Errorf("%w: %s", rc.err, detail)
		}
	}
	return fmt.Errorf("catalog: unknown request error code %q: %s", code, detail)
}
