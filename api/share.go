package api

import (
	"bytes"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/membudget"
)

// shareGroupsResource is /v1/share-groups: share groups (docs/design.md "Share
// groups"), served by the core's share calls. The rules — who may join, what an
// acquisition id holds, when an acknowledgement is late — are the core's.
type shareGroupsResource struct{ a *API }

// Routes returns the router mounted at /v1/share-groups.
func (rs *shareGroupsResource) Routes() chi.Router {
	h := func(f handlerFunc) http.HandlerFunc { return rs.a.serve(broker.CapShareGroups, f) }
	r := chi.NewRouter()
	r.Get("/", h(rs.list))
	r.Route("/{group}", func(r chi.Router) {
		r.Get("/", h(rs.describe))
		r.Put("/", h(rs.configure))
		r.Delete("/", h(rs.delete))
		r.Post("/records", h(rs.records))
		r.Post("/acks", h(rs.acks))
		r.Post("/offsets:reset", h(rs.reset))
		r.Delete("/members/{member}", h(rs.leave))
		rs.pushRoutes(r, h)
	})
	return r
}

// list answers the share groups the caller may describe.
func (rs *shareGroupsResource) list(w http.ResponseWriter, r *http.Request) *problem {
	gs, err := rs.a.core.ShareGroupSummaries(r.Context(), principal(r))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := v1.ShareGroupList{ShareGroups: make([]v1.ShareGroupSummary, len(gs))}
	for i, g := range gs {
		out.ShareGroups[i] = v1.ShareGroupSummary{Name: g.Name, State: strings.ToLower(g.State), Members: g.Members}
	}
	sort.Slice(out.ShareGroups, func(i, j int) bool { return out.ShareGroups[i].Name < out.ShareGroups[j].Name })
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (rs *shareGroupsResource) describe(w http.ResponseWriter, r *http.Request) *problem {
	group := groupParam(r)
	d, err := rs.a.core.DescribeShareGroup(r.Context(), principal(r), group)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	offs, err := rs.a.core.ShareOffsets(r.Context(), principal(r), group)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	lag := map[catalog.ShareTP]int64{}
	for _, o := range offs {
		lag[o.ShareTP] = o.Lag
	}
	out := v1.ShareGroup{Name: d.Name, Epoch: d.Epoch, Members: []v1.ShareGroupMember{}, Partitions: []v1.SharePartition{}, DeadLettered: d.DeadLettered}
	for _, m := range d.Members {
		ts := m.Topics
		if ts == nil {
			ts = []string{}
		}
		out.Members = append(out.Members, v1.ShareGroupMember{MemberID: m.ID, MemberEpoch: m.Epoch, Topics: ts})
	}
	for _, p := range d.Partitions {
		out.Partitions = append(out.Partitions, v1.SharePartition{Topic: p.Topic, Partition: p.Partition, StartOffset: p.StartOffset,
			Lag: lag[p.ShareTP], Available: p.Available, Acquired: p.Acquired, Acknowledged: p.Acknowledged, Archived: p.Archived,
			DeadLetterPending: p.DeadLetterPending})
	}
	sort.Slice(out.Partitions, func(i, j int) bool {
		a, b := out.Partitions[i], out.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	if out.Configs, err = rs.a.core.VisibleGroupConfigs(r.Context(), principal(r), group); err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// configure sets the group's configs (replacing those set before), whether or not the
// group exists yet, and answers them all with their defaults.
func (rs *shareGroupsResource) configure(w http.ResponseWriter, r *http.Request) *problem {
	group := groupParam(r)
	req, p := decodeJSON[v1.ShareGroupConfigs](r)
	if p != nil {
		return p
	}
	if req.Configs == nil {
		return newProblem(CodeInvalidRequest, "configs is required: an object of group config names to values ({} clears them)").with("field", "configs")
	}
	names := make([]string, 0, len(req.Configs))
	for k := range req.Configs {
		names = append(names, k)
	}
	sort.Strings(names) // one refusal, the same each time
	alter := broker.AlterConfigsRequest{Replace: true}
	for _, k := range names {
		alter.Changes = append(alter.Changes, broker.ConfigChange{Name: k, Op: broker.ConfigSet, Value: req.Configs[k]})
	}
	if err := rs.a.core.AlterGroupConfigs(r.Context(), principal(r), group, alter); err != nil {
		return rs.a.problemFor(r, err)
	}
	configs, _, err := rs.a.core.GroupConfigs(r.Context(), principal(r), group)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, v1.ShareGroupConfigs{Configs: configs})
	return nil
}

func (rs *shareGroupsResource) delete(w http.ResponseWriter, r *http.Request) *problem {
	if err := rs.a.core.DeleteShareGroup(r.Context(), principal(r), groupParam(r)); err != nil {
		return rs.a.problemFor(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (rs *shareGroupsResource) records(w http.ResponseWriter, r *http.Request) *problem {
	req, p := decodeJSON[v1.ShareRecordsRequest](r)
	if p != nil {
		return p
	}
	kind := kindFetch
	if req.WaitMs > 0 {
		kind = kindLongPoll
	}
	release, p := rs.a.slots.acquire(kind)
	if p != nil {
		return p
	}
	defer release()
	res, err := rs.a.core.ShareRecords(r.Context(), principal(r), broker.ShareRecordsRequest{Group: groupParam(r),
		MemberID: req.MemberID, Topics: req.Topics, MaxRecords: req.MaxRecords, Wait: millis(req.WaitMs), Memory: hold(r)})
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	// As a fetch's: the rendered answer is reserved beside the records read, until it
	// is written.
	size := 96
	for _, p := range res.Partitions {
		size += 160 + len(p.AcquisitionID)
		for i := range p.Records {
			size += 24 + recordJSONSize(&p.Records[i].DecodedRecord)
		}
	}
	if err := hold(r).Reserve(r.Context(), int64(size), rs.a.cfg.MemoryWait, membudget.UseFetch); err != nil {
		return rs.a.memoryProblem(r, broker.CapFetch, err)
	}
	rs.a.holdForQuota(r, true, size)
	writeJSONBytes(w, http.StatusOK, appendShareRecords(make([]byte, 0, size), &res))
	return nil
}

// appendShareRecords renders an acquisition (v1.ShareRecordsResponse), each record as
// a fetch shows it (appendRecord) with its delivery count.
func appendShareRecords(dst []byte, res *broker.ShareRecordsResult) []byte {
	var scratch bytes.Buffer
	dst = append(dst, `{"member_id":`...)
	dst = appendString(dst, res.MemberID)
	dst = append(dst, `,"lock_duration_ms":`...)
	dst = strconv.AppendInt(dst, res.LockDuration.Milliseconds(), 10)
	dst = append(dst, `,"partitions":[`...)
	for i := range res.Partitions {
		p := &res.Partitions[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"topic":`...)
		dst = appendString(dst, p.Topic)
		dst = append(dst, `,"partition":`...)
		dst = strconv.AppendInt(dst, int64(p.Partition), 10)
		dst = append(dst, `,"acquisition_id":`...)
		dst = appendString(dst, p.AcquisitionID)
		dst = append(dst, `,"lock_deadline":`...)
		dst = strconv.AppendInt(dst, p.LockDeadline.UnixMilli(), 10)
		dst = append(dst, `,"records":[`...)
		o := newRenderOpts(p.Config, false)
		for j := range p.Records {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendRecord(dst, &p.Records[j].DecodedRecord, o, &scratch)
			dst = append(dst[:len(dst)-1], `,"delivery_count":`...) // inside the record's object
			dst = strconv.AppendInt(dst, int64(p.Records[j].DeliveryCount), 10)
			dst = append(dst, '}')
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}\n"...)
}

func (rs *shareGroupsResource) acks(w http.ResponseWriter, r *http.Request) *problem {
	req, p := decodeJSON[v1.ShareAckRequest](r)
	if p != nil {
		return p
	}
	acks := make([]broker.ShareAcquisitionAck, len(req.Acks))
	for i, a := range req.Acks {
		acks[i].AcquisitionID = a.AcquisitionID
		for j, rg := range a.Ranges {
			field := "acks[" + strconv.Itoa(i) + "].ranges[" + strconv.Itoa(j) + "]"
			if rg.First == nil {
				return newProblem(CodeInvalidRequest, "%s.first is required", field).with("field", field+".first")
			}
			last := *rg.First
			if rg.Last != nil {
				last = *rg.Last
			}
			acks[i].Ranges = append(acks[i].Ranges, broker.ShareAckRange{First: *rg.First, Last: last, Type: rg.Type})
		}
	}
	if err := rs.a.core.ShareAckAcquisitions(r.Context(), principal(r), groupParam(r), req.MemberID, acks); err != nil {
		return rs.a.problemFor(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// reset positions a share group's start offsets on a topic while it has no live
// members.
func (rs *shareGroupsResource) reset(w http.ResponseWriter, r *http.Request) *problem {
	group := groupParam(r)
	req, p := decodeJSON[v1.ResetOffsetsRequest](r)
	if p != nil {
		return p
	}
	cr, p := toResetRequest(req)
	if p != nil {
		return p
	}
	offs, err := rs.a.core.ResetShareOffsets(r.Context(), principal(r), group, cr)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := v1.GroupOffsets{Group: group, Offsets: []v1.GroupOffset{}}
	for _, o := range offs {
		out.Offsets = append(out.Offsets, v1.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.StartOffset})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// leave takes a member out of the group, releasing what it holds.
func (rs *shareGroupsResource) leave(w http.ResponseWriter, r *http.Request) *problem {
	if err := rs.a.core.LeaveShareGroup(r.Context(), principal(r), groupParam(r), chi.URLParam(r, "member")); err != nil {
		return rs.a.problemFor(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
