package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/acl"
	v1 "github.com/strata-io/strata/api/v1"
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

// topicSequences reads {"<topic>": {"<partition>": seq}}.
func topicSequences(m map[string]map[string]int64) (map[string]map[int32]int32, *problem) {
	if m == nil {
		return nil, newProblem(CodeInvalidRequest, "producer.sequences: a base sequence per partition written is required").with("field", "producer.sequences")
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
	if p := a.admitQuota(r, false); p != nil {
		return p
	}
	req, p := decodeJSON[v1.TransactRequest](r)
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
	if pr := req.Producer; pr != nil {
		if creq.Producer, p = producerIdentity(pr.ID, pr.Epoch); p == nil {
			creq.Sequences, p = topicSequences(pr.Sequences)
		}
		if p != nil {
			return p
		}
	}
	if g := req.GroupOffsets; g != nil {
		if creq.GroupOffsets, p = offsetCommit(g.Group, g.MemberID, g.MemberEpoch, g.Offsets, "group_offsets."); p != nil {
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
		if p := decodeRecord(i, &tr.ProduceRecord, cfg, &creq.Records[i]); p != nil {
			return p
		}
		creq.Records[i].Topic = tr.Topic
	}
	res, err := a.core.Produce(produceContext(r), principal(r), creq)
	if err != nil {
		return a.problemFor(r, err)
	}
	size := int(r.ContentLength)
	if size < 0 { // chunked: the records' keys and values
		size = 0
		for _, rec := range creq.Records {
			size += len(rec.Key) + len(rec.Value)
		}
	}
	a.holdForQuota(r, false, size)
	writeOffsets(w, res, func(i int) string { return req.Records[i].Topic })
	return nil
}
