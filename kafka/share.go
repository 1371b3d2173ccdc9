package kafka

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/membudget"
)

// Share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
// ShareAcknowledge and the share-group offset administration, over the core's share
// groups (broker/share.go). What is Kafka's own here: topics named by id, and share
// sessions — a member's partitions on this node and the epoch of its requests, kept in
// memory per node as a Kafka broker keeps them (a node that restarts answers
// SHARE_SESSION_NOT_FOUND, and the client opens a new session).

// shareSessionKey names a share session: a member of a group.
type shareSessionKey struct{ group, member string }

// shareSession is a member's partitions on this node (with their topic ids) and the
// epoch its next request must carry.
type shareSession struct {
	epoch int32
	parts map[catalog.ShareTP][16]byte
}

// shareSessions holds this node's share sessions (the zero value is ready).
type shareSessions struct {
	mu sync.Mutex
	m  map[shareSessionKey]*shareSession
}

// maxShareSessions bounds the sessions one node keeps; past it a new session is
// refused (SHARE_SESSION_LIMIT_REACHED), as Kafka refuses it.
const maxShareSessions = 10000

func (s *Server) shareGroupHeartbeat(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp, nil
	}
	switch {
	case in.GroupID == "":
		return fail(kerr.InvalidRequest.Code, "GroupId is required")
	case in.MemberID == "" || len(in.MemberID) > 36:
		return fail(kerr.InvalidRequest.Code, "MemberId is required: a member chooses its id (a UUID, at most 36 characters) and keeps it")
	case in.MemberEpoch < catalog.LeaveEpoch:
		return fail(kerr.InvalidRequest.Code, "MemberEpoch: 0 joins, -1 leaves, else the member's epoch")
	case in.MemberEpoch == catalog.JoinEpoch && len(in.SubscribedTopicNames) == 0:
		return fail(kerr.InvalidRequest.Code, "SubscribedTopicNames is required to join")
	}
	hb := catalog.ShareHeartbeat{Group: in.GroupID, MemberID: in.MemberID, MemberEpoch: in.MemberEpoch, Topics: in.SubscribedTopicNames}
	res, err := s.deps.Core.ShareHeartbeat(ctx, r.who, hb)
	if err != nil {
		code, msg := s.kafkaError(err)
		switch {
		case hasCode(err, broker.CodeStaleMemberEpoch):
			code = kerr.FencedMemberEpoch.Code
		case hasCode(err, broker.CodeGroupNotFound), hasCode(err, broker.CodeGroupTypeMismatch):
			code = kerr.GroupIDNotFound.Code
		case hasCode(err, broker.CodeShuttingDown), hasCode(err, broker.CodeRoleUnavailable):
			code = kerr.NotCoordinator.Code
		case hasCode(err, broker.CodeCatalogUnavailable):
			code = kerr.CoordinatorNotAvailable.Code
		}
		return fail(code, *msg)
	}
	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(in.MemberID), res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
	if in.MemberEpoch == catalog.LeaveEpoch {
		return resp, nil
	}
	resp.Assignment = &kmsg.ShareGroupHeartbeatResponseAssignment{}
	for _, tp := range res.Assignment {
		ti, err := s.deps.Core.LookupTopic(ctx, r.who, tp.Topic)
		if err != nil {
			continue
		}
		t := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
		t.TopicID, t.Partitions = ti.UUID, tp.Partitions
		resp.Assignment.TopicPartitions = append(resp.Assignment.TopicPartitions, t)
	}
	return resp, nil
}

func (s *Server) shareGroupDescribe(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, name := range in.GroupIDs {
		rg := kmsg.NewShareGroupDescribeResponseGroup()
		rg.GroupID = name
		d, err := s.deps.Core.DescribeShareGroup(ctx, r.who, name)
		if err != nil {
			code, msg := s.kafkaError(err)
			if hasCode(err, broker.CodeGroupNotFound) {
				code = kerr.GroupIDNotFound.Code
			}
			rg.ErrorCode, rg.ErrorMessage = code, msg
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.GroupState, rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor = "Empty", d.Epoch, d.Epoch, "simple"
		if len(d.Members) > 0 {
			rg.GroupState = "Stable"
		}
		for _, m := range d.Members {
			rm := kmsg.NewShareGroupDescribeResponseGroupMember()
			rm.MemberID, rm.MemberEpoch, rm.SubscribedTopicNames = m.ID, m.Epoch, m.Topics
			for _, t := range m.Topics {
				ti, err := s.deps.Core.LookupTopic(ctx, r.who, t)
				if err != nil {
					continue
				}
				tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				tp.TopicID, tp.Topic = ti.UUID, t
				for p := range ti.Partitions {
					tp.Partitions = append(tp.Partitions, p)
				}
				rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, tp)
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// fetchAckBatches and ackBatches convert a partition's acknowledgement batches.
func fetchAckBatches(in []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) []catalog.AckBatch {
	out := make([]catalog.AckBatch, len(in))
	for i, b := range in {
		out[i] = catalog.AckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: b.AcknowledgeTypes}
	}
	return out
}

func ackBatches(in []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) []catalog.AckBatch {
	out := make([]catalog.AckBatch, len(in))
	for i, b := range in {
		out[i] = catalog.AckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: b.AcknowledgeTypes}
	}
	return out
}

// shareTopicNames resolves topic ids to names; unknown ones are left out.
func (s *Server) shareTopicNames(ctx context.Context, who broker.Principal, ids [][16]byte) (map[[16]byte]string, error) {
	uids := make([]catalog.UUID, len(ids))
	for i, id := range ids {
		uids[i] = id
	}
	names, err := s.deps.Core.TopicNamesByUUID(ctx, who, uids)
	if err != nil {
		return nil, err
	}
	out := make(map[[16]byte]string, len(names))
	for id, n := range names {
		out[id] = n
	}
	return out, nil
}

// shareSessionUpdate applies a request's session epoch: 0 opens (replacing any), -1
// closes (after the request), else it must be the session's. It answers the session
// (nil for a close) and a top-level error code.
func (s *Server) shareSessionUpdate(key shareSessionKey, epoch int32) (*shareSession, int16) {
	ss := &s.shares
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[shareSessionKey]*shareSession{}
	}
	switch {
	case epoch == 0:
		if _, ok := ss.m[key]; !ok && len(ss.m) >= maxShareSessions {
			return nil, kerr.ShareSessionLimitReached.Code
		}
		sess := &shareSession{epoch: 1, parts: map[catalog.ShareTP][16]byte{}}
		ss.m[key] = sess
		return sess, 0
	case epoch == -1:
		if _, ok := ss.m[key]; !ok {
			return nil, kerr.ShareSessionNotFound.Code
		}
		delete(ss.m, key)
		return nil, 0
	}
	sess, ok := ss.m[key]
	if !ok {
		return nil, kerr.ShareSessionNotFound.Code
	}
	if sess.epoch != epoch {
		return nil, kerr.InvalidShareSessionEpoch.Code
	}
	sess.epoch++
	return sess, 0
}

func (s *Server) shareFetch(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	if in.GroupID == nil || *in.GroupID == "" || in.MemberID == nil || *in.MemberID == "" {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("GroupId and MemberId are required")
		return resp, nil
	}
	group, member := *in.GroupID, *in.MemberID
	// Topic ids to names, for every topic the request names.
	var ids [][16]byte
	for _, t := range in.Topics {
		ids = append(ids, t.TopicID)
	}
	for _, t := range in.ForgottenTopicsData {
		ids = append(ids, t.TopicID)
	}
	names, err := s.shareTopicNames(ctx, r.who, ids)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.kafkaError(err)
		return resp, nil
	}
	hasAcks := false
	for _, t := range in.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) > 0 {
				hasAcks = true
			}
		}
	}
	if in.ShareSessionEpoch == 0 && hasAcks {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("acknowledgements need an open share session (epoch above 0)")
		return resp, nil
	}
	key := shareSessionKey{group, member}
	sess, code := s.shareSessionUpdate(key, in.ShareSessionEpoch)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	// The request's partitions join the session (those of unknown topics answer
	// UNKNOWN_TOPIC_ID); forgotten ones leave it.
	type slot struct {
		id   [16]byte
		tp   catalog.ShareTP
		code int16
		ack  int // index into acks, -1 none
	}
	var (
		slots []slot
		acks  []catalog.ShareAckPartition
		seen  = map[catalog.ShareTP]int{}
	)
	addSlot := func(id [16]byte, tp catalog.ShareTP) int {
		if i, ok := seen[tp]; ok {
			return i
		}
		seen[tp] = len(slots)
		slots = append(slots, slot{id: id, tp: tp, ack: -1})
		return len(slots) - 1
	}
	for _, t := range in.Topics {
		name, known := names[t.TopicID]
		for _, p := range t.Partitions {
			tp := catalog.ShareTP{Topic: name, Partition: p.Partition}
			if !known {
				slots = append(slots, slot{id: t.TopicID, tp: catalog.ShareTP{Partition: p.Partition}, code: kerr.UnknownTopicID.Code, ack: -1})
				continue
			}
			i := addSlot(t.TopicID, tp)
			if len(p.AcknowledgementBatches) > 0 {
				slots[i].ack = len(acks)
				acks = append(acks, catalog.ShareAckPartition{ShareTP: tp, Batches: fetchAckBatches(p.AcknowledgementBatches)})
			}
			if sess != nil {
				s.shares.mu.Lock()
				sess.parts[tp] = t.TopicID
				s.shares.mu.Unlock()
			}
		}
	}
	var fetchParts []catalog.ShareTP
	if sess != nil {
		s.shares.mu.Lock()
		for _, t := range in.ForgottenTopicsData {
			for _, p := range t.Partitions {
				delete(sess.parts, catalog.ShareTP{Topic: names[t.TopicID], Partition: p})
			}
		}
		for tp, id := range sess.parts {
			fetchParts = append(fetchParts, tp)
			addSlot(id, tp)
		}
		s.shares.mu.Unlock()
	}
	if in.IsRenewAck {
		fetchParts = nil // a renewal acquires nothing
	}
	fr := broker.ShareFetchRequest{Group: group, MemberID: member, Partitions: fetchParts, Acks: acks,
		MaxRecords: int(in.MaxRecords), MaxBytes: int64(in.MaxBytes), Memory: r.mem,
		Wait: time.Duration(max(in.MaxWaitMillis, 0)) * time.Millisecond}
	res, err := s.deps.Core.ShareFetch(ctx, r.who, fr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		resp.ErrorCode, resp.ErrorMessage = s.kafkaError(err)
		if hasCode(err, broker.CodeUnknownMember) || hasCode(err, broker.CodeGroupNotFound) {
			resp.ErrorCode = kerr.UnknownMemberID.Code
		}
		return resp, nil
	}
	resp.AcquisitionLockTimeoutMillis = int32(res.LockDuration.Milliseconds())
	if resp.AcquisitionLockTimeoutMillis <= 0 {
		resp.AcquisitionLockTimeoutMillis = int32(catalog.DefaultShareLockDuration.Milliseconds())
	}
	fetched := map[catalog.ShareTP]*broker.SharePartitionFetch{}
	for i := range res.Partitions {
		fetched[res.Partitions[i].ShareTP] = &res.Partitions[i]
	}
	topicAt := map[[16]byte]int{}
	for _, sl := range slots {
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition, rp.ErrorCode = sl.tp.Partition, sl.code
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		if sl.ack >= 0 && sl.ack < len(res.AckErrs) && res.AckErrs[sl.ack] != nil {
			rp.AcknowledgeErrorCode, rp.AcknowledgeErrorMessage = s.kafkaError(res.AckErrs[sl.ack])
		}
		if f := fetched[sl.tp]; f != nil && sl.code == 0 {
			if f.Err != nil {
				rp.ErrorCode, rp.ErrorMessage = s.kafkaError(f.Err)
			} else if len(f.Ranges) > 0 {
				if n := batchesLen(f.Batches); !r.mem.TryReserve(2*n, membudget.UseKafka) {
					// No room: the records stay acquired until their lock expires.
					rp.ErrorCode = s.code(&broker.Error{Code: broker.CodeMemoryExhausted})
				} else {
					rp.Records = kafkaBatches(f.Batches, f.BaseOffsets)
					r.sizeHint += len(rp.Records)
					r.release = append(r.release, rp.Records)
					for _, a := range f.Ranges {
						ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
						ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.DeliveryCount
						rp.AcquiredRecords = append(rp.AcquiredRecords, ar)
					}
				}
			}
		}
		if rp.ErrorCode == 0 && rp.AcknowledgeErrorCode == 0 && len(rp.AcquiredRecords) == 0 && sl.ack < 0 {
			continue // nothing to say about it
		}
		ti, ok := topicAt[sl.id]
		if !ok {
			ti = len(resp.Topics)
			topicAt[sl.id] = ti
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = sl.id
			resp.Topics = append(resp.Topics, rt)
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, rp)
	}
	return resp, nil
}

func (s *Server) shareAcknowledge(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	if in.GroupID == nil || *in.GroupID == "" || in.MemberID == nil || *in.MemberID == "" {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("GroupId and MemberId are required")
		return resp, nil
	}
	if in.ShareSessionEpoch == 0 {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidShareSessionEpoch.Code, kmsg.StringPtr("acknowledgements need an open share session (epoch above 0)")
		return resp, nil
	}
	group, member := *in.GroupID, *in.MemberID
	var ids [][16]byte
	for _, t := range in.Topics {
		ids = append(ids, t.TopicID)
	}
	names, err := s.shareTopicNames(ctx, r.who, ids)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.kafkaError(err)
		return resp, nil
	}
	if _, code := s.shareSessionUpdate(shareSessionKey{group, member}, in.ShareSessionEpoch); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	var acks []catalog.ShareAckPartition
	for _, t := range in.Topics {
		name, ok := names[t.TopicID]
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			acks = append(acks, catalog.ShareAckPartition{ShareTP: catalog.ShareTP{Topic: name, Partition: p.Partition}, Batches: ackBatches(p.AcknowledgementBatches)})
		}
	}
	errs, err := s.deps.Core.ShareAcknowledge(ctx, r.who, group, member, acks)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.kafkaError(err)
		return resp, nil
	}
	resp.AcquisitionLockTimeoutMillis = int32(catalog.DefaultShareLockDuration.Milliseconds())
	i := 0
	for _, t := range in.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		_, known := names[t.TopicID]
		for _, p := range t.Partitions {
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			if !known {
				rp.ErrorCode = kerr.UnknownTopicID.Code
			} else {
				if errs[i] != nil {
					rp.ErrorCode, rp.ErrorMessage = s.kafkaError(errs[i])
				}
				i++
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (s *Server) describeShareGroupOffsets(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, g := range in.Groups {
		rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID = g.GroupID
		offs, err := s.deps.Core.ShareOffsets(ctx, r.who, g.GroupID)
		if err != nil {
			rg.ErrorCode, rg.ErrorMessage = s.kafkaError(err)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		have := map[catalog.ShareTP]catalog.ShareOffset{}
		for _, o := range offs {
			have[o.ShareTP] = o
		}
		want := g.Topics
		if want == nil { // every partition the group has state for
			at := map[string]int{}
			for _, o := range offs {
				i, ok := at[o.Topic]
				if !ok {
					i = len(want)
					at[o.Topic] = i
					want = append(want, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: o.Topic})
				}
				want[i].Partitions = append(want[i].Partitions, o.Partition)
			}
		}
		for _, t := range want {
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic = t.Topic
			if ti, err := s.deps.Core.LookupTopic(ctx, r.who, t.Topic); err == nil {
				rt.TopicID = ti.UUID
			}
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.LeaderEpoch = p, 0
				if o, ok := have[catalog.ShareTP{Topic: t.Topic, Partition: p}]; ok {
					rp.StartOffset, rp.Lag = o.StartOffset, o.Lag
				} else {
					rp.StartOffset, rp.Lag = -1, -1
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

func (s *Server) alterShareGroupOffsets(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	var offs []catalog.ShareOffset
	for _, t := range in.Topics {
		for _, p := range t.Partitions {
			offs = append(offs, catalog.ShareOffset{ShareTP: catalog.ShareTP{Topic: t.Topic, Partition: p.Partition}, StartOffset: p.StartOffset})
		}
	}
	err := s.deps.Core.AlterShareOffsets(ctx, r.who, in.GroupID, offs)
	code, msg := s.kafkaError(err)
	if hasCode(err, broker.CodeGroupNotEmpty) {
		code = kerr.NonEmptyGroup.Code
	}
	if hasCode(err, broker.CodeGroupTypeMismatch) {
		resp.ErrorCode, resp.ErrorMessage = kerr.GroupIDNotFound.Code, msg
		return resp, nil
	}
	for _, t := range in.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		if ti, err := s.deps.Core.LookupTopic(ctx, r.who, t.Topic); err == nil {
			rt.TopicID = ti.UUID
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, code, msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (s *Server) deleteShareGroupOffsets(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	var topics []string
	for _, t := range in.Topics {
		topics = append(topics, t.Topic)
	}
	err := s.deps.Core.DeleteShareOffsets(ctx, r.who, in.GroupID, topics)
	if err != nil && !hasCode(err, broker.CodeTopicNotFound) {
		resp.ErrorCode, resp.ErrorMessage = s.kafkaError(err)
		if hasCode(err, broker.CodeGroupNotEmpty) {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
		}
		return resp, nil
	}
	for _, t := range in.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		if ti, err := s.deps.Core.LookupTopic(ctx, r.who, t.Topic); err == nil {
			rt.TopicID = ti.UUID
		} else {
			rt.ErrorCode, rt.ErrorMessage = s.kafkaError(err)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
