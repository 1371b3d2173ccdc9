package api

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/writer"
)

// recordsResource is /v1/topics/{topic}/records: produce to one topic. (Fetch lives
// under a partition: partitionsResource.)
type recordsResource struct{ a *API }

// Routes returns the router mounted at /v1/topics/{topic}/records.
func (rs *recordsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.With(rs.a.admitProduce).Post("/", rs.produce) // admission.go
	return r
}

// produce is the hot path: one body decode, a cached topic lookup (no catalog read),
// one writer.Produce that returns once the records are durable and committed.
// Everything that can be refused is refused before the writer sees the request, so bad
// input changes nothing.
func (rs *recordsResource) produce(w http.ResponseWriter, r *http.Request) {
	if isRecordBatchBody(r) { // Kafka v2 record batches instead of JSON (binary.go)
		rs.produceBinary(w, r)
		return
	}
	a := rs.a
	if a.wr == nil {
		writeProblem(w, r, newProblem(CodeRoleUnavailable, "this node does not run the writer role; send produce requests to a writer node"))
		return
	}
	if !a.needCatalog(w, r) {
		return
	}
	name, p := topicParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	body, p := readBody(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	req, p := decodeProduce(body, a.cfg.MaxRecordsPerRequest)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	var (
		prod     *catalog.Producer
		partSeqs map[int32]int32
	)
	if req.Producer != nil {
		if prod, p = req.Producer.identity(); p == nil {
			partSeqs, p = partitionSequences(req.Producer.Sequences, "producer.sequences")
		}
		if p == nil {
			p = explicitPartitions(req.Records)
		}
		if p != nil {
			writeProblem(w, r, p)
			return
		}
	}
	ti, err := a.topics.get(r.Context(), name)
	if err != nil {
		writeProblem(w, r, a.catalogProblem(r, "get topic", err))
		return
	}
	now := a.now()
	recs, p := buildRecords(&req, ti, now)
	if p != nil && p.code == CodePartitionOutOfRange {
		// The topic may have grown since it was cached: look again before refusing.
		if ti, err = a.topics.refresh(r.Context(), name); err != nil {
			writeProblem(w, r, a.catalogProblem(r, "get topic", err))
			return
		}
		recs, p = buildRecords(&req, ti, now)
	}
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	wreq := writer.Request{Records: recs}
	names := map[int64]string{ti.topic.ID: ti.topic.Name}
	if prod != nil {
		seqs, p := sequencesFor(recs, map[int64]map[int32]int32{ti.topic.ID: partSeqs}, names)
		if p != nil {
			writeProblem(w, r, p)
			return
		}
		wreq.Producer, wreq.Sequences = prod, seqs
	}
	resp, err := a.wr.Produce(r.Context(), wreq)
	if err != nil {
		p := a.producerProblem(r, "produce", err, names)
		if p.code == CodeTopicNotFound || p.code == CodePartitionOutOfRange {
			a.topics.invalidate(name) // the cached entry is stale
		}
		writeProblem(w, r, p)
		return
	}
	if len(resp.Records) != len(recs) {
		a.logUnexpected(r, "produce", errWriterAnswer{len(recs), len(resp.Records)})
		writeProblem(w, r, newProblem(CodeInternal, "produce: the writer answered for the wrong number of records"))
		return
	}
	out := make([]byte, 0, 16+len(resp.Records)*36)
	out = append(out, `{"offsets":[`...)
	for i, rr := range resp.Records {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"partition":`...)
		out = strconv.AppendInt(out, int64(rr.Partition), 10)
		out = append(out, `,"offset":`...)
		out = strconv.AppendInt(out, rr.Offset, 10)
		out = append(out, '}')
	}
	out = append(out, ']')
	writeJSONBytes(w, http.StatusOK, appendDuplicate(out, resp.Duplicate))
}

// explicitPartitions requires every record of an idempotent request to name its
// partition: a retry must land where the first attempt did, and a key's partition
// moves when the topic grows, a sticky one with every flush.
func explicitPartitions(recs []produceRecord) *problem {
	for i := range recs {
		if isNull(recs[i].Partition) {
			return newProblem(CodeInvalidRequest, "records[%d].partition: an idempotent request (with \"producer\") names every record's partition, so that a retry lands where the first attempt did", i).
				with("record", i).with("field", "partition")
		}
	}
	return nil
}

type errWriterAnswer struct{ sent, answered int }

func (e errWriterAnswer) Error() string {
	return "writer answered " + strconv.Itoa(e.answered) + " records for " + strconv.Itoa(e.sent)
}
