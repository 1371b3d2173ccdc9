package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/catalog"
)

// Groups is the consumer-group part of the catalog (DESIGN.md "Groups"): membership by
// heartbeat, server-side assignment, committed offsets. Both catalog backends implement
// it beside Catalog.
type Groups interface {
	catalog.Groups
}

var _ Groups = catalog.Groups(nil)

// The group error codes (rows in errors.go's table).
const (
	CodeGroupNotFound    Code = "group_not_found"
	CodeInvalidGroupName Code = "invalid_group_name"
	CodeUnknownMember    Code = "unknown_member"
	CodeStaleMemberEpoch Code = "stale_member_epoch"
	CodeNotOwner         Code = "not_owner"
	CodeGroupNotEmpty    Code = "group_not_empty"
)

// groupsResource is /v1/groups.
type groupsResource struct {
	a *API
	g Groups
}

// Routes returns the router mounted at /v1/groups. "offsets:reset" is a literal path
// segment (chi gives ':' no meaning), in the style of a custom method.
func (rs *groupsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", rs.list)
	r.Route("/{group}", func(r chi.Router) {
		r.Get("/", rs.describe)
		r.Delete("/", rs.delete)
		r.Post("/heartbeat", rs.heartbeat)
		r.Post("/offsets", rs.commit)
		r.Get("/offsets", rs.offsets)
		r.Post("/offsets:reset", rs.reset)
		r.Get("/lag", rs.lag)
	})
	return r
}

// need answers role_unavailable on a node without groups (or without a catalog).
func (rs *groupsResource) need(w http.ResponseWriter, r *http.Request) bool {
	if rs.g == nil || rs.a.cat == nil {
		writeProblem(w, r, newProblem(CodeRoleUnavailable, "this node serves no consumer groups"))
		return false
	}
	return true
}

// groupParam returns the {group} path parameter, validated before the catalog is asked.
func groupParam(r *http.Request) (string, *problem) {
	name := chi.URLParam(r, "group")
	if err := catalog.ValidateGroupName(name); err != nil {
		return "", newProblem(CodeInvalidGroupName, "%s", err.Error())
	}
	return name, nil
}

// groupProblem maps a group error; the rest goes to catalogProblem.
func (a *API) groupProblem(r *http.Request, op string, err error) *problem {
	switch {
	case errors.Is(err, catalog.ErrGroupNotFound):
		return newProblem(CodeGroupNotFound, "%s", err.Error())
	case errors.Is(err, catalog.ErrInvalidGroupName):
		return newProblem(CodeInvalidGroupName, "%s", err.Error())
	case errors.Is(err, catalog.ErrUnknownMember):
		return newProblem(CodeUnknownMember, "%s", err.Error())
	case errors.Is(err, catalog.ErrStaleMemberEpoch):
		return newProblem(CodeStaleMemberEpoch, "%s", err.Error())
	case errors.Is(err, catalog.ErrNotOwner):
		return newProblem(CodeNotOwner, "%s", err.Error())
	case errors.Is(err, catalog.ErrGroupNotEmpty):
		return newProblem(CodeGroupNotEmpty, "%s", err.Error())
	case errors.Is(err, catalog.ErrInvalidOffset):
		return newProblem(CodeInvalidOffset, "%s", err.Error())
	case errors.Is(err, catalog.ErrInvalidGroupRequest):
		return newProblem(CodeInvalidRequest, "%s", err.Error())
	}
	return a.catalogProblem(r, op, err)
}

type topicPartitionsJSON struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

func toTopicPartitionsJSON(tps []catalog.TopicPartitions) []topicPartitionsJSON {
	out := make([]topicPartitionsJSON, 0, len(tps))
	for _, tp := range tps {
		ps := tp.Partitions
		if ps == nil {
			ps = []int32{}
		}
		out = append(out, topicPartitionsJSON{Topic: tp.Topic, Partitions: ps})
	}
	return out
}

type heartbeatRequest struct {
	MemberID         string                `json:"member_id"`
	MemberEpoch      *int32                `json:"member_epoch"`
	Topics           []string              `json:"topics"`
	Owned            []topicPartitionsJSON `json:"owned"`
	SessionTimeoutMs *int64                `json:"session_timeout_ms"`
	Assignor         string                `json:"assignor"`
}

type heartbeatResponse struct {
	MemberEpoch         int32                 `json:"member_epoch"`
	Assignment          []topicPartitionsJSON `json:"assignment"`
	HeartbeatIntervalMs int64                 `json:"heartbeat_interval_ms"`
}

func (rs *groupsResource) heartbeat(w http.ResponseWriter, r *http.Request) {
	if !rs.need(w, r) {
		return
	}
	group, p := groupParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	body, p := readBody(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	var req heartbeatRequest
	if p := decodeStrict(body, &req); p != nil {
		writeProblem(w, r, p)
		return
	}
	if req.MemberEpoch == nil {
		writeProblem(w, r, newProblem(CodeInvalidRequest, "member_epoch is required: 0 joins, -1 leaves, otherwise the epoch the last heartbeat answered").with("field", "member_epoch"))
		return
	}
	hb := catalog.Heartbeat{Group: group, MemberID: req.MemberID, MemberEpoch: *req.MemberEpoch, Topics: req.Topics, Assignor: req.Assignor}
	if req.SessionTimeoutMs != nil {
		ms := *req.SessionTimeoutMs
		if ms <= 0 || ms > catalog.MaxSessionTimeout.Milliseconds() {
			writeProblem(w, r, newProblem(CodeInvalidRequest, "session_timeout_ms %d: use between %d and %d", ms,
				catalog.MinSessionTimeout.Milliseconds(), catalog.MaxSessionTimeout.Milliseconds()).with("field", "session_timeout_ms"))
			return
		}
		hb.SessionTimeout = time.Duration(ms) * time.Millisecond
	}
	for _, o := range req.Owned {
		hb.Owned = append(hb.Owned, catalog.TopicPartitions{Topic: o.Topic, Partitions: o.Partitions})
	}
	res, err := rs.g.Heartbeat(r.Context(), hb)
	if err != nil {
		writeProblem(w, r, rs.a.groupProblem(r, "heartbeat", err))
		return
	}
	writeJSON(w, http.StatusOK, heartbeatResponse{
		MemberEpoch:         res.MemberEpoch,
		Assignment:          toTopicPartitionsJSON(res.Assignment),
		HeartbeatIntervalMs: res.HeartbeatInterval.Milliseconds(),
	})
}

type offsetJSON struct {
	Topic       string     `json:"topic"`
	Partition   *int32     `json:"partition"`
	Offset      *int64     `json:"offset"`
	Metadata    string     `json:"metadata"`
	CommittedAt *time.Time `json:"committed_at,omitempty"`
}

type commitRequest struct {
	MemberID    string       `json:"member_id"`
	MemberEpoch *int32       `json:"member_epoch"`
	Offsets     []offsetJSON `json:"offsets"`
}

// toCommitOffsets checks the fields every offset needs.
func toCommitOffsets(in []offsetJSON) ([]catalog.CommitOffset, *problem) {
	if len(in) == 0 {
		return nil, newProblem(CodeInvalidRequest, "offsets: give at least one").with("field", "offsets")
	}
	out := make([]catalog.CommitOffset, len(in))
	for i, o := range in {
		if o.Partition == nil || o.Offset == nil {
			return nil, newProblem(CodeInvalidRequest, "offsets[%d]: topic, partition and offset are required", i).with("field", "offsets")
		}
		if *o.Partition < 0 {
			return nil, newProblem(CodeInvalidPartition, "offsets[%d]: partition %d is negative", i, *o.Partition)
		}
		if *o.Offset < 0 {
			return nil, newProblem(CodeInvalidOffset, "offsets[%d]: offset %d is negative: an offset is the next one to read, from 0", i, *o.Offset)
		}
		out[i] = catalog.CommitOffset{Topic: o.Topic, Partition: *o.Partition, Offset: *o.Offset, Metadata: o.Metadata}
	}
	return out, nil
}

func fromCommitOffsets(in []catalog.CommitOffset) []offsetJSON {
	out := make([]offsetJSON, len(in))
	for i, o := range in {
		out[i] = offsetJSON{Topic: o.Topic, Partition: &o.Partition, Offset: &o.Offset, Metadata: o.Metadata}
	}
	return out
}

func (rs *groupsResource) commit(w http.ResponseWriter, r *http.Request) {
	if !rs.need(w, r) {
		return
	}
	group, p := groupParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	body, p := readBody(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	var req commitRequest
	if p := decodeStrict(body, &req); p != nil {
		writeProblem(w, r, p)
		return
	}
	c := catalog.OffsetCommit{Group: group, MemberID: req.MemberID}
	if req.MemberID != "" {
		if req.MemberEpoch == nil {
			writeProblem(w, r, newProblem(CodeInvalidRequest, "member_epoch is required with member_id").with("field", "member_epoch"))
			return
		}
		c.MemberEpoch = *req.MemberEpoch
	}
	offs, p := toCommitOffsets(req.Offsets)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	c.Offsets = offs
	if err := rs.g.CommitOffsets(r.Context(), c); err != nil {
		writeProblem(w, r, rs.a.groupProblem(r, "commit offsets", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "offsets": fromCommitOffsets(offs)})
}

func (rs *groupsResource) offsets(w http.ResponseWriter, r *http.Request) {
	if !rs.need(w, r) {
		return
	}
	group, p := groupParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	offs, err := rs.g.GroupOffsets(r.Context(), group)
	if err != nil {
		writeProblem(w, r, rs.a.groupProblem(r, "group offsets", err))
		return
	}
	topic := r.URL.Query().Get("topic")
	out := make([]offsetJSON, 0, len(offs))
	for _, o := range offs {
		if topic != "" && o.Topic != topic {
			continue
		}
		at := o.CommittedAt.UTC()
		out = append(out, offsetJSON{Topic: o.Topic, Partition: &o.Partition, Offset: &o.Offset, Metadata: o.Metadata, CommittedAt: &at})
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "offsets": out})
}

type lagJSON struct {
	Topic           string `json:"topic"`
	Partition       int32  `json:"partition"`
	CommittedOffset *int64 `json:"committed_offset"` // null: nothing committed
	LogStartOffset  int64  `json:"log_start_offset"`
	HighWatermark   int64  `json:"high_watermark"`
	Lag             int64  `json:"lag"`
	Owner           string `json:"owner,omitempty"`
}

func toLagJSON(ls []catalog.PartitionLag) ([]lagJSON, int64) {
	out := make([]lagJSON, len(ls))
	var total int64
	for i, l := range ls {
		out[i] = lagJSON{Topic: l.Topic, Partition: l.Partition, LogStartOffset: l.LogStartOffset,
			HighWatermark: l.HighWatermark, Lag: l.Lag, Owner: l.Owner}
		if l.Committed >= 0 {
			c := l.Committed
			out[i].CommittedOffset = &c
		}
		total += l.Lag
	}
	return out, total
}

func (rs *groupsResource) lag(w http.ResponseWriter, r *http.Request) {
	if !rs.need(w, r) {
		return
	}
	group, p := groupParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	ls, err := rs.g.GroupLag(r.Context(), group)
	if err != nil {
		writeProblem(w, r, rs.a.groupProblem(r, "group lag", err))
		return
	}
	parts, total := toLagJSON(ls)
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "total_lag": total, "partitions": parts})
}

type groupSummaryJSON struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Members  int    `json:"members"`
	Assignor string `json:"assignor"`
}

func (rs *groupsResource) list(w http.ResponseWriter, r *http.Request) {
	if !rs.need(w, r) {
		return
	}
	gs, err := rs.g.ListGroups(r.Context())
	if err != nil {
		writeProblem(w, r, rs.a.groupProblem(r, "list groups", err))
		return
	}
	out := make([]groupSummaryJSON, len(gs))
	for i, g := range gs {
		out[i] = groupSummaryJSON{Name: g.Name, State: g.State, Members: g.Members, Assignor: g.Assignor}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, map[string]any{"groups": out})
}

type memberJSON struct {
	MemberID         string                `json:"member_id"`
	MemberEpoch      int32                 `json:"member_epoch"`
	Topics           []string              `json:"topics"`
	SessionTimeoutMs int64                 `json:"session_timeout_ms"`
	LeaseExpiresAt   time.Time             `json:"lease_expires_at"`
	Assignment       []topicPartitionsJSON `json:"assignment"`
	Revoking         []topicPartitionsJSON `json:"revoking"`
	Pending          []topicPartitionsJSON `json:"pending"`
}

type groupJSON struct {
	Name       string       `json:"name"`
	State      string       `json:"state"`
	Assignor   string       `json:"assignor"`
	Epoch      int32        `json:"epoch"`
	CreatedAt  time.Time    `json:"created_at"`
	Members    []memberJSON `json:"members"`
	TotalLag   int64        `json:"total_lag"`
	Partitions []lagJSON    `json:"partitions"`
}

func (rs *groupsResource) describe(w http.ResponseWriter, r *http.Request) {
	if !rs.need(w, r) {
		return
	}
	group, p := groupParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	d, err := rs.g.DescribeGroup(r.Context(), group)
	if err != nil {
		writeProblem(w, r, rs.a.groupProblem(r, "describe group", err))
		return
	}
	ls, err := rs.g.GroupLag(r.Context(), group)
	if err != nil {
		writeProblem(w, r, rs.a.groupProblem(r, "describe group", err))
		return
	}
	out := groupJSON{Name: d.Name, State: d.State, Assignor: d.Assignor, Epoch: d.Epoch, CreatedAt: d.CreatedAt.UTC(), Members: []memberJSON{}}
	for _, m := range d.Members {
		topics := m.Topics
		if topics == nil {
			topics = []string{}
		}
		out.Members = append(out.Members, memberJSON{
			MemberID: m.ID, MemberEpoch: m.Epoch, Topics: topics, SessionTimeoutMs: m.SessionTimeout.Milliseconds(),
			LeaseExpiresAt: m.ExpiresAt.UTC(), Assignment: toTopicPartitionsJSON(m.Assignment),
			Revoking: toTopicPartitionsJSON(m.Revoking), Pending: toTopicPartitionsJSON(m.Pending),
		})
	}
	out.Partitions, out.TotalLag = toLagJSON(ls)
	writeJSON(w, http.StatusOK, out)
}

func (rs *groupsResource) delete(w http.ResponseWriter, r *http.Request) {
	if !rs.need(w, r) {
		return
	}
	group, p := groupParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	if err := rs.g.DeleteGroup(r.Context(), group); err != nil {
		writeProblem(w, r, rs.a.groupProblem(r, "delete group", err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type resetRequest struct {
	Topic      string          `json:"topic"`
	Partitions []int32         `json:"partitions"` // empty: every partition
	To         string          `json:"to"`         // earliest, latest, timestamp, offset
	Timestamp  json.RawMessage `json:"timestamp"`  // unix ms or RFC 3339, with "timestamp"
	Offset     *int64          `json:"offset"`     // with "offset"
}

// reset resolves the target offsets from the partitions' current state and stores them
// while the group has no live members (the catalog checks that again when it writes).
func (rs *groupsResource) reset(w http.ResponseWriter, r *http.Request) {
	a := rs.a
	if !rs.need(w, r) {
		return
	}
	group, p := groupParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	body, p := readBody(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	var req resetRequest
	if p := decodeStrict(body, &req); p != nil {
		writeProblem(w, r, p)
		return
	}
	var ts int64
	switch req.To {
	case "earliest", "latest":
	case "timestamp":
		var s string
		var n int64
		switch {
		case json.Unmarshal(req.Timestamp, &n) == nil && n >= 0:
			ts = n
		case json.Unmarshal(req.Timestamp, &s) == nil:
			v, ok := parseTime(s)
			if !ok {
				writeProblem(w, r, newProblem(CodeInvalidTimestamp, "timestamp %q: use unix milliseconds or RFC 3339", truncate(s, 40)))
				return
			}
			ts = v
		default:
			writeProblem(w, r, newProblem(CodeInvalidTimestamp, "timestamp is required with \"to\":\"timestamp\": unix milliseconds or RFC 3339"))
			return
		}
	case "offset":
		if req.Offset == nil || *req.Offset < 0 {
			writeProblem(w, r, newProblem(CodeInvalidOffset, "offset is required with \"to\":\"offset\" and must not be negative"))
			return
		}
	default:
		writeProblem(w, r, newProblem(CodeInvalidRequest, "to %q: use earliest, latest, timestamp or offset", truncate(req.To, 40)).with("field", "to"))
		return
	}
	if err := catalog.ValidateTopicName(req.Topic); err != nil {
		writeProblem(w, r, newProblem(CodeInvalidTopicName, "%s", err.Error()))
		return
	}
	t, err := a.cat.Topic(r.Context(), req.Topic)
	if err != nil {
		writeProblem(w, r, a.catalogProblem(r, "reset offsets", err))
		return
	}
	parts, err := a.cat.Partitions(r.Context(), t.ID)
	if err != nil {
		writeProblem(w, r, a.catalogProblem(r, "reset offsets", err))
		return
	}
	want := map[int32]bool{}
	for _, p := range req.Partitions {
		if p < 0 || p >= t.Partitions {
			writeProblem(w, r, newProblem(CodePartitionOutOfRange, "topic %s has %d partitions, not %d", t.Name, t.Partitions, p))
			return
		}
		want[p] = true
	}
	var offs []catalog.CommitOffset
	for _, pi := range parts {
		if len(want) > 0 && !want[pi.Partition] {
			continue
		}
		o := catalog.CommitOffset{Topic: t.Name, Partition: pi.Partition}
		switch req.To {
		case "earliest":
			o.Offset = pi.LogStartOffset
		case "latest":
			o.Offset = pi.HighWatermark
		case "timestamp":
			off, err := a.cat.OffsetForTime(r.Context(), t.ID, pi.Partition, ts)
			if err != nil {
				writeProblem(w, r, a.catalogProblem(r, "reset offsets", err))
				return
			}
			o.Offset = off
		case "offset":
			o.Offset = *req.Offset
		}
		offs = append(offs, o)
	}
	if err := rs.g.ResetOffsets(r.Context(), group, offs); err != nil {
		writeProblem(w, r, a.groupProblem(r, "reset offsets", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "offsets": fromCommitOffsets(offs)})
}
