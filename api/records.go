package api

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/acl"
	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
)

// recordsResource is /v1/topics/{topic}/records: produce to one topic. (Fetch lives
// under a partition: partitionsResource.)
type recordsResource struct{ a *API }

// Routes returns the router mounted at /v1/topics/{topic}/records.
func (rs *recordsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Post("/", rs.a.serveProduce(rs.produce)) // admitted: admission.go
	return r
}

// produce is the hot path: one body decode, a cached topic lookup for the topic's
// formats (no catalog read), one call of the core, which returns once the records are
// durable and committed.
func (rs *recordsResource) produce(w http.ResponseWriter, r *http.Request) *problem {
	if isRecordBatchBody(r) { // Kafka v2 record batches instead of JSON (binary.go)
		if r.URL.Query().Has(v1.ParamSchema) {
			return newProblem(CodeInvalidParameter, "schema applies to JSON bodies: record batches are stored as sent (validated, when the topic validates)").
				with("parameter", v1.ParamSchema)
		}
		return rs.produceBinary(w, r)
	}
	a := rs.a
	name := topicParam(r)
	if p := a.authorize(r, acl.OpWrite, acl.Topic(name)); p != nil {
		return p
	}
	if p := a.admitQuota(r, false); p != nil {
		return p
	}
	body, p := readBody(r)
	if p != nil {
		return p
	}
	req, p := decodeProduce(body, a.cfg.MaxRecordsPerRequest)
	if p != nil {
		return p
	}
	var creq broker.ProduceRequest
	if pj := req.Producer; pj != nil {
		prod, p := producerIdentity(pj.ID, pj.Epoch)
		var seqs map[int32]int32
		if p == nil {
			seqs, p = partitionSequences(pj.Sequences, "producer.sequences")
		}
		if p != nil {
			return p
		}
		creq.Producer, creq.Sequences = prod, map[string]map[int32]int32{name: seqs}
	}
	ti, err := a.core.LookupTopic(r.Context(), principal(r), name)
	if err != nil {
		return a.problemFor(r, err)
	}
	sel, withSchema, p := valueSchemaParam(r)
	if p != nil {
		return p
	}
	cfg := &ti.Config
	if withSchema { // values are JSON, whatever value.format says
		c := ti.Config
		c.ValueFormat = formatJSON
		cfg = &c
	}
	recs := getRecords(len(req.Records))
	defer putRecords(recs)
	creq.Records = *recs
	for i := range req.Records {
		if p := decodeRecord(i, &req.Records[i], cfg, &creq.Records[i]); p != nil {
			return p
		}
		creq.Records[i].Topic = name
	}
	if withSchema {
		if err := a.core.EncodeValues(r.Context(), principal(r), name, sel, creq.Records); err != nil {
			return a.problemFor(r, err)
		}
	}
	res, err := a.core.Produce(produceContext(r), principal(r), creq)
	if err != nil {
		return a.problemFor(r, err)
	}
	a.holdForQuota(r, false, len(body))
	writeOffsets(w, res, nil)
	return nil
}

// writeOffsets answers a produce with where each record landed,
// {"offsets":[{"partition":P,"offset":O}, ...]}, each offset led by "topic" when
// topicOf names it (POST /v1/records), and "duplicate": true for a retry of a
// committed request.
func writeOffsets(w http.ResponseWriter, res broker.ProduceResult, topicOf func(i int) string) {
	out := make([]byte, 0, 16+len(res.Offsets)*56)
	out = append(out, `{"offsets":[`...)
	for i, o := range res.Offsets {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, '{')
		if topicOf != nil {
			out = append(out, `"topic":`...)
			out = appendString(out, topicOf(i))
			out = append(out, ',')
		}
		out = append(out, `"partition":`...)
		out = strconv.AppendInt(out, int64(o.Partition), 10)
		out = append(out, `,"offset":`...)
		out = strconv.AppendInt(out, o.Offset, 10)
		out = append(out, '}')
	}
	out = append(out, ']')
	writeJSONBytes(w, http.StatusOK, appendDuplicate(out, res.Duplicate))
}

// valueSchemaParam reads ?schema= of a JSON produce: "latest" or a schema id, the
// schema the values (JSON) are encoded to (the core's rule: broker.EncodeValues).
func valueSchemaParam(r *http.Request) (broker.ValueSchema, bool, *problem) {
	s := r.URL.Query().Get(v1.ParamSchema)
	if s == "" {
		return broker.ValueSchema{}, false, nil
	}
	sel, ok := broker.ParseValueSchema(s)
	if !ok {
		return sel, false, newProblem(CodeInvalidParameter, "schema %q: use latest or a schema id (a positive integer)", truncate(s, 32)).with("parameter", v1.ParamSchema)
	}
	return sel, true, nil
}
