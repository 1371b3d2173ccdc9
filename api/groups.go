package api

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/go-chi/chi/v5"

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

// groupParam returns the {group} path parameter, validated before the catalog is asked.
func groupParam(r *http.Request) (string, *problem) {
	name := chi.URLParam(r, "group")
	if err := catalog.ValidateGroupName(name); err != nil {
		return "", newProblem(CodeInvalidGroupName, "%s", err.Error())
	}
	return name, nil
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

func (rs *groupsResource) heartbeat(w http.ResponseWriter, r *http.Request) *problem {
	group, p := groupParam(r)
	if p != nil {
		return p
	}
	req, p := decodeJSON[heartbeatRequest](r)
	if p != nil {
		return p
	}
	if req.MemberEpoch == nil {
		return newProblem(CodeInvalidRequest, "member_epoch is required: 0 joins, -1 leaves, otherwise the epoch the last heartbeat answered").with("field", "member_epoch")
	}
	hb := catalog.Heartbeat{Group: group, MemberID: req.MemberID, MemberEpoch: *req.MemberEpoch, Topics: req.Topics, Assignor: req.Assignor}
	if req.SessionTimeoutMs != nil {
		ms := *req.SessionTimeoutMs
		if ms <= 0 || ms > catalog.MaxSessionTimeout.Milliseconds() {
			return newProblem(CodeInvalidRequest, "session_timeout_ms %d: use between %d and %d", ms,
				catalog.MinSessionTimeout.Milliseconds(), catalog.MaxSessionTimeout.Milliseconds()).with("field", "session_timeout_ms")
		}
		hb.SessionTimeout = time.Duration(ms) * time.Millisecond
	}
	for _, o := range req.Owned {
		hb.Owned = append(hb.Owned, catalog.TopicPartitions{Topic: o.Topic, Partitions: o.Partitions})
	}
	res, err := rs.a.core.Heartbeat(r.Context(), principal(r), hb)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, heartbeatResponse{
		MemberEpoch:         res.MemberEpoch,
		Assignment:          toTopicPartitionsJSON(res.Assignment),
		HeartbeatIntervalMs: res.HeartbeatInterval.Milliseconds(),
	})
	return nil
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

func (rs *groupsResource) commit(w http.ResponseWriter, r *http.Request) *problem {
	group, p := groupParam(r)
	if p != nil {
		return p
	}
	req, p := decodeJSON[commitRequest](r)
	if p != nil {
		return p
	}
	c := catalog.OffsetCommit{Group: group, MemberID: req.MemberID}
	if req.MemberID != "" {
		if req.MemberEpoch == nil {
			return newProblem(CodeInvalidRequest, "member_epoch is required with member_id").with("field", "member_epoch")
		}
		c.MemberEpoch = *req.MemberEpoch
	}
	if c.Offsets, p = toCommitOffsets(req.Offsets); p != nil {
		return p
	}
	if err := rs.a.core.CommitOffsets(r.Context(), principal(r), c); err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "offsets": fromCommitOffsets(c.Offsets)})
	return nil
}

func (rs *groupsResource) offsets(w http.ResponseWriter, r *http.Request) *problem {
	group, p := groupParam(r)
	if p != nil {
		return p
	}
	offs, err := rs.a.core.GroupOffsets(r.Context(), principal(r), group)
	if err != nil {
		return rs.a.problemFor(r, err)
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
	return nil
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

func (rs *groupsResource) lag(w http.ResponseWriter, r *http.Request) *problem {
	group, p := groupParam(r)
	if p != nil {
		return p
	}
	ls, err := rs.a.core.GroupLag(r.Context(), principal(r), group)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	parts, total := toLagJSON(ls)
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "total_lag": total, "partitions": parts})
	return nil
}

type groupSummaryJSON struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Members  int    `json:"members"`
	Assignor string `json:"assignor"`
}

func (rs *groupsResource) list(w http.ResponseWriter, r *http.Request) *problem {
	gs, err := rs.a.core.ListGroups(r.Context(), principal(r))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := make([]groupSummaryJSON, len(gs))
	for i, g := range gs {
		out[i] = groupSummaryJSON{Name: g.Name, State: g.State, Members: g.Members, Assignor: g.Assignor}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, map[string]any{"groups": out})
	return nil
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

func (rs *groupsResource) describe(w http.ResponseWriter, r *http.Request) *problem {
	group, p := groupParam(r)
	if p != nil {
		return p
	}
	d, ls, err := rs.a.core.DescribeGroup(r.Context(), principal(r), group)
	if err != nil {
		return rs.a.problemFor(r, err)
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
	return nil
}

func (rs *groupsResource) delete(w http.ResponseWriter, r *http.Request) *problem {
	group, p := groupParam(r)
	if p != nil {
		return p
	}
	if err := rs.a.core.DeleteGroup(r.Context(), principal(r), group); err != nil {
		return rs.a.problemFor(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type resetRequest struct {
	Topic      string          `json:"topic"`
	Partitions []int32         `json:"partitions"` // empty: every partition
	To         string          `json:"to"`         // earliest, latest, timestamp, offset
	Timestamp  json.RawMessage `json:"timestamp"`  // unix ms or RFC 3339, with "timestamp"
	Offset     *int64          `json:"offset"`     // with "offset"
	// Create: position a group that does not exist yet; without it, 404 group_not_found.
	Create bool `json:"create"`
}

// reset resolves the target offsets from the partitions' current state and stores them
// while the group has no live members (the catalog checks that again when it writes).
func (rs *groupsResource) reset(w http.ResponseWriter, r *http.Request) *problem {
	group, p := groupParam(r)
	if p != nil {
		return p
	}
	req, p := decodeJSON[resetRequest](r)
	if p != nil {
		return p
	}
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
				return newProblem(CodeInvalidTimestamp, "timestamp %q: use unix milliseconds or RFC 3339", truncate(s, 40))
			}
			cr.To = v
		default:
			return newProblem(CodeInvalidTimestamp, "timestamp is required with \"to\":\"timestamp\": unix milliseconds or RFC 3339")
		}
	case "offset":
		if req.Offset == nil {
			return newProblem(CodeInvalidOffset, "offset is required with \"to\":\"offset\" and must not be negative")
		}
		cr.To, cr.ToOffset = *req.Offset, true
	default:
		return newProblem(CodeInvalidRequest, "to %q: use earliest, latest, timestamp or offset", truncate(req.To, 40)).with("field", "to")
	}
	offs, err := rs.a.core.ResetOffsets(r.Context(), principal(r), group, cr)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "offsets": fromCommitOffsets(offs)})
	return nil
}
