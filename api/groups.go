package api

import (
	"encoding/json"
	"net/http"
	"sort"

	"github.com/go-chi/chi/v5"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// groupsResource is /v1/groups: consumer groups (docs/design.md "Groups"), served by
// the core's group calls.
type groupsResource struct{ a *API }

// Routes returns the router mounted at /v1/groups. "offsets:reset" is a literal path
// segment (chi gives ':' no meaning), in the style of a custom method.
func (rs *groupsResource) Routes() chi.Router {
	h := func(f handlerFunc) http.HandlerFunc { return rs.a.serve(broker.CapGroups, f) }
	r := chi.NewRouter()
	r.Get("/", h(rs.list))
	r.Route("/{group}", func(r chi.Router) {
		r.Get("/", h(rs.describe))
		r.Delete("/", h(rs.delete))
		r.Post("/heartbeat", h(rs.heartbeat))
		r.Post("/offsets", h(rs.commit))
		r.Get("/offsets", h(rs.offsets))
		r.Post("/offsets:reset", h(rs.reset))
		r.Get("/lag", h(rs.lag))
	})
	return r
}

// groupParam returns the {group} path parameter; the core checks the name.
func groupParam(r *http.Request) string { return chi.URLParam(r, "group") }

func toTopicPartitions(tps []catalog.TopicPartitions) []v1.TopicPartitions {
	out := make([]v1.TopicPartitions, 0, len(tps))
	for _, tp := range tps {
		ps := tp.Partitions
		if ps == nil {
			ps = []int32{}
		}
		out = append(out, v1.TopicPartitions{Topic: tp.Topic, Partitions: ps})
	}
	return out
}

func (rs *groupsResource) heartbeat(w http.ResponseWriter, r *http.Request) *problem {
	group := groupParam(r)
	req, p := decodeJSON[v1.HeartbeatRequest](r)
	if p != nil {
		return p
	}
	if req.MemberEpoch == nil {
		return newProblem(CodeInvalidRequest, "member_epoch is required: 0 joins, -1 leaves, otherwise the epoch the last heartbeat answered").with("field", "member_epoch")
	}
	hb := catalog.Heartbeat{Group: group, MemberID: req.MemberID, MemberEpoch: *req.MemberEpoch, Topics: req.Topics, Assignor: req.Assignor,
		StandbyReplicas: req.StandbyReplicas}
	if req.TaskLags != nil {
		hb.TaskLags = make([]catalog.TaskLag, len(req.TaskLags))
		for i, l := range req.TaskLags {
			hb.TaskLags[i] = catalog.TaskLag(l)
		}
	}
	if req.SessionTimeoutMs != nil {
		// Given explicitly, even 0 is checked (in the heartbeat, 0 keeps the member's).
		hb.SessionTimeout = millis(*req.SessionTimeoutMs)
		if err := broker.CheckSessionTimeout(hb.SessionTimeout); err != nil {
			return rs.a.problemFor(r, err)
		}
	}
	for _, o := range req.Owned {
		hb.Owned = append(hb.Owned, catalog.TopicPartitions{Topic: o.Topic, Partitions: o.Partitions})
	}
	res, err := rs.a.core.Heartbeat(r.Context(), principal(r), hb)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, v1.HeartbeatResponse{
		MemberEpoch:         res.MemberEpoch,
		Assignment:          toTopicPartitions(res.Assignment),
		HeartbeatIntervalMs: res.HeartbeatInterval.Milliseconds(),
		Standbys:            toTopicPartitions(res.Standbys),
	})
	return nil
}

// toCommitOffsets reads a commit's offsets: the fields each needs are present (the
// core checks their values).
func toCommitOffsets(in []v1.CommitOffset) ([]catalog.CommitOffset, *problem) {
	if len(in) == 0 {
		return nil, newProblem(CodeInvalidRequest, "offsets: give at least one").with("field", "offsets")
	}
	out := make([]catalog.CommitOffset, len(in))
	for i, o := range in {
		if o.Partition == nil || o.Offset == nil {
			return nil, newProblem(CodeInvalidRequest, "offsets[%d]: topic, partition and offset are required", i).with("field", "offsets")
		}
		out[i] = catalog.CommitOffset{Topic: o.Topic, Partition: *o.Partition, Offset: *o.Offset, Metadata: o.Metadata}
	}
	return out, nil
}

// offsetCommit reads a commit's member and offsets (POST /v1/groups/{group}/offsets, a
// /v1/records request's group_offsets); field prefixes what a refusal names.
func offsetCommit(group, memberID string, epoch *int32, offsets []v1.CommitOffset, field string) (*catalog.OffsetCommit, *problem) {
	c := &catalog.OffsetCommit{Group: group, MemberID: memberID}
	if memberID != "" {
		if epoch == nil {
			return nil, newProblem(CodeInvalidRequest, "%smember_epoch is required with member_id", field).with("field", field+"member_epoch")
		}
		c.MemberEpoch = *epoch
	}
	offs, p := toCommitOffsets(offsets)
	if p != nil {
		return nil, p
	}
	c.Offsets = offs
	return c, nil
}

func fromCommitOffsets(in []catalog.CommitOffset) []v1.GroupOffset {
	out := make([]v1.GroupOffset, len(in))
	for i, o := range in {
		out[i] = v1.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata}
	}
	return out
}

func (rs *groupsResource) commit(w http.ResponseWriter, r *http.Request) *problem {
	group := groupParam(r)
	req, p := decodeJSON[v1.OffsetCommitRequest](r)
	if p != nil {
		return p
	}
	c, p := offsetCommit(group, req.MemberID, req.MemberEpoch, req.Offsets, "")
	if p != nil {
		return p
	}
	if err := rs.a.core.CommitOffsets(r.Context(), principal(r), *c); err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, v1.GroupOffsets{Group: group, Offsets: fromCommitOffsets(c.Offsets)})
	return nil
}

func (rs *groupsResource) offsets(w http.ResponseWriter, r *http.Request) *problem {
	group := groupParam(r)
	offs, err := rs.a.core.GroupOffsets(r.Context(), principal(r), group)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	topic := r.URL.Query().Get("topic")
	out := make([]v1.GroupOffset, 0, len(offs))
	for _, o := range offs {
		if topic != "" && o.Topic != topic {
			continue
		}
		out = append(out, v1.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata, CommittedAt: o.CommittedAt.UTC()})
	}
	writeJSON(w, http.StatusOK, v1.GroupOffsets{Group: group, Offsets: out})
	return nil
}

func toPartitionLags(ls []catalog.PartitionLag) ([]v1.PartitionLag, int64) {
	out := make([]v1.PartitionLag, len(ls))
	var total int64
	for i, l := range ls {
		out[i] = v1.PartitionLag{Topic: l.Topic, Partition: l.Partition, LogStartOffset: l.LogStartOffset,
			HighWatermark: l.HighWatermark, Lag: l.Lag, Owner: l.Owner}
		if l.Committed >= 0 {
			c := l.Committed
			out[i].CommittedOffset = &c
		}
		total += l.Lag
	}
	return out, total
}

func (rs *groupsResource) lag(w http.ResponseWriter, r *http.Request) *problem {
	group := groupParam(r)
	ls, err := rs.a.core.GroupLag(r.Context(), principal(r), group)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	parts, total := toPartitionLags(ls)
	writeJSON(w, http.StatusOK, v1.GroupLag{Group: group, TotalLag: total, Partitions: parts})
	return nil
}

func (rs *groupsResource) list(w http.ResponseWriter, r *http.Request) *problem {
	gs, err := rs.a.core.ListGroups(r.Context(), principal(r))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := make([]v1.GroupSummary, len(gs))
	for i, g := range gs {
		out[i] = v1.GroupSummary{Name: g.Name, State: g.State, Members: g.Members, Assignor: g.Assignor}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, v1.GroupList{Groups: out})
	return nil
}

func (rs *groupsResource) describe(w http.ResponseWriter, r *http.Request) *problem {
	group := groupParam(r)
	d, ls, err := rs.a.core.DescribeGroup(r.Context(), principal(r), group)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := v1.Group{Name: d.Name, State: d.State, Assignor: d.Assignor, Epoch: d.Epoch, CreatedAt: d.CreatedAt.UTC(), Members: []v1.GroupMember{}}
	for _, m := range d.Members {
		topics := m.Topics
		if topics == nil {
			topics = []string{}
		}
		out.Members = append(out.Members, v1.GroupMember{
			MemberID: m.ID, MemberEpoch: m.Epoch, Topics: topics, SessionTimeoutMs: m.SessionTimeout.Milliseconds(),
			LeaseExpiresAt: m.ExpiresAt.UTC(), Assignment: toTopicPartitions(m.Assignment),
			Revoking: toTopicPartitions(m.Revoking), Pending: toTopicPartitions(m.Pending),
		})
	}
	out.Partitions, out.TotalLag = toPartitionLags(ls)
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (rs *groupsResource) delete(w http.ResponseWriter, r *http.Request) *problem {
	if err := rs.a.core.DeleteGroup(r.Context(), principal(r), groupParam(r)); err != nil {
		return rs.a.problemFor(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// reset resolves the target offsets from the partitions' current state and stores them
// while the group has no live members (the catalog checks that again when it writes).
func (rs *groupsResource) reset(w http.ResponseWriter, r *http.Request) *problem {
	group := groupParam(r)
	req, p := decodeJSON[v1.ResetOffsetsRequest](r)
	if p != nil {
		return p
	}
	cr, p := toResetRequest(req)
	if p != nil {
		return p
	}
	offs, err := rs.a.core.ResetOffsets(r.Context(), principal(r), group, cr)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, v1.GroupOffsets{Group: group, Offsets: fromCommitOffsets(offs)})
	return nil
}

// toResetRequest reads a reset's target (a group's or a share group's).
func toResetRequest(req v1.ResetOffsetsRequest) (broker.ResetRequest, *problem) {
	cr := broker.ResetRequest{Topic: req.Topic, Partitions: req.Partitions, Create: req.Create}
	switch req.To {
	case "earliest":
		cr.To = broker.Earliest
	case "latest":
		cr.To = broker.Latest
	case "timestamp":
		var s string
		var n int64
		switch {
		case json.Unmarshal(req.Timestamp, &n) == nil && n >= 0:
			cr.To = n
		case json.Unmarshal(req.Timestamp, &s) == nil:
			v, ok := parseTime(s)
			if !ok {
				return cr, newProblem(CodeInvalidTimestamp, "timestamp %q: use unix milliseconds or RFC 3339", truncate(s, 40))
			}
			cr.To = v
		default:
			return cr, newProblem(CodeInvalidTimestamp, "timestamp is required with \"to\":\"timestamp\": unix milliseconds or RFC 3339")
		}
	case "offset":
		if req.Offset == nil {
			return cr, newProblem(CodeInvalidOffset, "offset is required with \"to\":\"offset\" and must not be negative")
		}
		cr.To, cr.ToOffset = *req.Offset, true
	default:
		return cr, newProblem(CodeInvalidRequest, "to %q: use earliest, latest, timestamp or offset", truncate(req.To, 40)).with("field", "to")
	}
	return cr, nil
}
