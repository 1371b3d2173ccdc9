package api

import (
	"encoding/json"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
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
	r.Post("/", rs.a.serveProduce(rs.produce)) // admitted: admission.go
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

// offsetCommit reads "group_offsets"; the core checks them under the group rules.
func offsetCommit(g *groupOffsetsJSON) (*catalog.OffsetCommit, *problem) {
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

func (rs *transactResource) produce(w http.ResponseWriter, r *http.Request) *problem {
	a := rs.a
	req, p := decodeJSON[transactRequest](r)
	if p != nil {
		return p
	}
	switch n := len(req.Records); {
	case n == 0:
		return newProblem(CodeEmptyBatch, `"records" must hold at least one record (commit offsets alone with POST /v1/groups/{group}/offsets)`)
	case n > a.cfg.MaxRecordsPerRequest:
		return newProblem(CodeTooManyRecords, "%d records in one request; at most %d", n, a.cfg.MaxRecordsPerRequest).
			with("max_records", a.cfg.MaxRecordsPerRequest)
	}
	recs := getRecords(len(req.Records))
	defer putRecords(recs)
	creq := broker.ProduceRequest{Records: *recs}
	if req.Producer != nil {
		if creq.Producer, p = req.Producer.identity(); p == nil {
			creq.Sequences, p = topicSequences(req.Producer.Sequences)
		}
		if p != nil {
			return p
		}
	}
	if req.GroupOffsets != nil {
		if creq.GroupOffsets, p = offsetCommit(req.GroupOffsets); p != nil {
			return p
		}
	}
	// Each record's fields are decoded by its topic's formats (the topic looked up in
	// the core's cache once per name).
	formats := map[string]*catalog.Config{}
	for i := range req.Records {
		tr := &req.Records[i]
		cfg, ok := formats[tr.Topic]
		if !ok {
			if err := catalog.ValidateTopicName(tr.Topic); err != nil {
				return newProblem(CodeInvalidTopicName, "records[%d].topic: %s", i, err.Error()).with("record", i).with("field", "topic")
			}
			if p := a.authorize(r, acl.OpWrite, acl.Topic(tr.Topic)); p != nil {
				return p
			}
			ti, err := a.core.LookupTopic(r.Context(), principal(r), tr.Topic)
			if err != nil {
				return a.problemFor(r, err)
			}
			cfg = &ti.Config
			formats[tr.Topic] = cfg
		}
		if p := decodeRecord(i, &tr.produceRecord, cfg, &creq.Records[i]); p != nil {
			return p
		}
		creq.Records[i].Topic = tr.Topic
	}
	res, err := a.core.Produce(produceContext(r), principal(r), creq)
	if err != nil {
		return a.problemFor(r, err)
	}
	writeOffsets(w, res, func(i int) string { return req.Records[i].Topic })
	return nil
}
