package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/writer"
)

// transactResource is POST /v1/records: records for several topics and partitions, an
// optional producer, and optional consumer-group offsets, committed as one request —
// everything visible in one catalog commit, or nothing. A single request is the whole
// transaction: there is no state staged across calls, so any stateless node serves
// it, and exactly-once consume-transform-produce is one call per step.
type transactResource struct{ a *API }

// Routes returns the router mounted at /v1/records.
func (rs *transactResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.With(rs.a.admitProduce).Post("/", rs.produce) // admission.go
	return r
}

type transactRecord struct {
	Topic string `json:"topic"`
	produceRecord
}

type groupOffsetsJSON struct {
	Group       string       `json:"group"`
	MemberID    string       `json:"member_id"`
	MemberEpoch *int32       `json:"member_epoch"`
	Offsets     []offsetJSON `json:"offsets"`
}

type transactRequest struct {
	Records      []transactRecord  `json:"records"`
	Producer     *producerJSON     `json:"producer"`
	GroupOffsets *groupOffsetsJSON `json:"group_offsets"`
}

// offsetCommit validates "group_offsets" before anything is buffered, with the group
// rules' own codes.
func (a *API) offsetCommit(r *http.Request, g *groupOffsetsJSON) (*catalog.OffsetCommit, *problem) {
	if err := catalog.ValidateGroupName(g.Group); err != nil {
		return nil, newProblem(CodeInvalidGroupName, "group_offsets.group: %s", err.Error()).with("field", "group_offsets.group")
	}
	oc := &catalog.OffsetCommit{Group: g.Group, MemberID: g.MemberID}
	if g.MemberID != "" {
		if g.MemberEpoch == nil {
			return nil, newProblem(CodeInvalidRequest, "group_offsets.member_epoch is required with member_id").with("field", "group_offsets.member_epoch")
		}
		oc.MemberEpoch = *g.MemberEpoch
	}
	offs, p := toCommitOffsets(g.Offsets)
	if p != nil {
		return nil, p
	}
	oc.Offsets = offs
	if err := catalog.ValidateOffsetCommit(*oc); err != nil {
		return nil, a.groupProblem(r, "produce", err)
	}
	return oc, nil
}

// topicSequences reads {"<topic>": {"<partition>": seq}}.
func topicSequences(raw json.RawMessage) (map[string]map[int32]int32, *problem) {
	var m map[string]json.RawMessage
	if isNull(raw) {
		return nil, newProblem(CodeInvalidRequest, "producer.sequences: a base sequence per partition written is required").with("field", "producer.sequences")
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, newProblem(CodeInvalidRequest, "producer.sequences: want {\"<topic>\": {\"<partition>\": base sequence}}: %v", err).with("field", "producer.sequences")
	}
	out := make(map[string]map[int32]int32, len(m))
	for topic, ps := range m {
		seqs, p := partitionSequences(ps, "producer.sequences."+truncate(topic, 64))
		if p != nil {
			return nil, p
		}
		out[topic] = seqs
	}
	return out, nil
}

func (rs *transactResource) produce(w http.ResponseWriter, r *http.Request) {
	a := rs.a
	if a.wr == nil {
		writeProblem(w, r, newProblem(CodeRoleUnavailable, "this node does not run the writer role; send produce requests to a writer node"))
		return
	}
	if !a.needCatalog(w, r) {
		return
	}
	body, p := readBody(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	var req transactRequest
	if p := decodeStrict(body, &req); p != nil {
		writeProblem(w, r, p)
		return
	}
	switch n := len(req.Records); {
	case n == 0:
		writeProblem(w, r, newProblem(CodeEmptyBatch, `"records" must hold at least one record (commit offsets alone with POST /v1/groups/{group}/offsets)`))
		return
	case n > a.cfg.MaxRecordsPerRequest:
		writeProblem(w, r, newProblem(CodeTooManyRecords, "%d records in one request; at most %d", n, a.cfg.MaxRecordsPerRequest).
			with("max_records", a.cfg.MaxRecordsPerRequest))
		return
	}

	wreq := writer.Request{Records: make([]writer.Record, len(req.Records))}
	var seqsByName map[string]map[int32]int32
	if req.Producer != nil {
		if wreq.Producer, p = req.Producer.identity(); p == nil {
			seqsByName, p = topicSequences(req.Producer.Sequences)
		}
		if p != nil {
			writeProblem(w, r, p)
			return
		}
		for i := range req.Records {
			if isNull(req.Records[i].Partition) {
				writeProblem(w, r, newProblem(CodeInvalidRequest, "records[%d].partition: an idempotent request (with \"producer\") names every record's partition, so that a retry lands where the first attempt did", i).
					with("record", i).with("field", "partition"))
				return
			}
		}
	}
	if req.GroupOffsets != nil {
		if wreq.GroupOffsets, p = a.offsetCommit(r, req.GroupOffsets); p != nil {
			writeProblem(w, r, p)
			return
		}
	}

	// Resolve each topic once (cached), and build every record under its topic's
	// config. A partition beyond a cached count re-reads the topic once.
	topics := map[string]topicInfo{}
	refreshed := map[string]bool{}
	names := map[int64]string{}
	now := a.now()
	for i := range req.Records {
		tr := &req.Records[i]
		if err := catalog.ValidateTopicName(tr.Topic); err != nil {
			writeProblem(w, r, newProblem(CodeInvalidTopicName, "records[%d].topic: %s", i, err.Error()).with("record", i).with("field", "topic"))
			return
		}
		ti, ok := topics[tr.Topic]
		if !ok {
			var err error
			if ti, err = a.topics.get(r.Context(), tr.Topic); err != nil {
				writeProblem(w, r, a.catalogProblem(r, "get topic", err))
				return
			}
			topics[tr.Topic] = ti
			names[ti.topic.ID] = ti.topic.Name
		}
		p := buildRecord(i, &tr.produceRecord, ti, now, &wreq.Records[i])
		if p != nil && p.code == CodePartitionOutOfRange && !refreshed[tr.Topic] {
			refreshed[tr.Topic] = true
			var err error
			if ti, err = a.topics.refresh(r.Context(), tr.Topic); err != nil {
				writeProblem(w, r, a.catalogProblem(r, "get topic", err))
				return
			}
			topics[tr.Topic] = ti
			p = buildRecord(i, &tr.produceRecord, ti, now, &wreq.Records[i])
		}
		if p != nil {
			writeProblem(w, r, p)
			return
		}
	}
	if wreq.Producer != nil {
		byID := make(map[int64]map[int32]int32, len(seqsByName))
		for name, ps := range seqsByName {
			ti, ok := topics[name]
			if !ok {
				writeProblem(w, r, newProblem(CodeInvalidRequest, "producer.sequences: no record writes topic %q: send a sequence for exactly the partitions written", truncate(name, 64)).
					with("field", "producer.sequences"))
				return
			}
			byID[ti.topic.ID] = ps
		}
		if wreq.Sequences, p = sequencesFor(wreq.Records, byID, names); p != nil {
			writeProblem(w, r, p)
			return
		}
	}

	resp, err := a.wr.Produce(r.Context(), wreq)
	if err != nil {
		p := a.producerProblem(r, "produce", err, names)
		if p.code == CodeTopicNotFound || p.code == CodePartitionOutOfRange {
			for name := range topics {
				a.topics.invalidate(name) // a cached entry is stale
			}
		}
		writeProblem(w, r, p)
		return
	}
	if len(resp.Records) != len(wreq.Records) {
		a.logUnexpected(r, "produce", errWriterAnswer{len(wreq.Records), len(resp.Records)})
		writeProblem(w, r, newProblem(CodeInternal, "produce: the writer answered for the wrong number of records"))
		return
	}
	out := make([]byte, 0, 16+len(resp.Records)*56)
	out = append(out, `{"offsets":[`...)
	for i, rr := range resp.Records {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"topic":`...)
		out = appendString(out, req.Records[i].Topic)
		out = append(out, `,"partition":`...)
		out = strconv.AppendInt(out, int64(rr.Partition), 10)
		out = append(out, `,"offset":`...)
		out = strconv.AppendInt(out, rr.Offset, 10)
		out = append(out, '}')
	}
	out = append(out, ']')
	writeJSONBytes(w, http.StatusOK, appendDuplicate(out, resp.Duplicate))
}
