package api

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"sort"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/writer"
)

// Idempotent and transactional producers (DESIGN.md "HTTP API v1"). POST /v1/producers
// hands out a producer id and epoch; a produce request that carries them, with a base
// sequence per partition, is committed at most once however often it is sent: a retry
// of a committed request answers 200 with its original offsets and "duplicate": true.
// Every field that decides where a record lands is in the body (explicit partitions,
// the producer, the sequences), so a client retries a request byte for byte.

// Producers is the part of the catalog that hands out producer identities. The API
// finds it on the catalog (both backends implement it).
type Producers interface {
	InitProducer(ctx context.Context, transactionalID string, current *catalog.Producer) (catalog.Producer, error)
}

var _ Producers = catalog.Producers(nil)

// The producer error codes (rows in errors.go's table).
const (
	CodeProducerFenced         Code = "producer_fenced"
	CodeOutOfOrderSequence     Code = "out_of_order_sequence"
	CodeUnknownProducer        Code = "unknown_producer_id"
	CodeInvalidTransactionalID Code = "invalid_transactional_id"
)

// producersResource is /v1/producers.
type producersResource struct{ a *API }

// Routes returns the router mounted at /v1/producers.
func (rs *producersResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Post("/", rs.init)
	return r
}

type initProducerRequest struct {
	TransactionalID *string `json:"transactional_id"`
	// ProducerID and Epoch, with a transactional id, are the identity the caller holds:
	// it bumps its own epoch, and is fenced if a newer instance has taken the id over.
	ProducerID *int64 `json:"producer_id"`
	Epoch      *int64 `json:"epoch"`
}

type initProducerResponse struct {
	ProducerID int64 `json:"producer_id"`
	Epoch      int16 `json:"epoch"`
}

// init answers a new producer id at epoch 0, or, for a known transactional_id, its id
// at the next epoch, which fences the instance that held it.
func (rs *producersResource) init(w http.ResponseWriter, r *http.Request) {
	a := rs.a
	if !a.needCatalog(w, r) {
		return
	}
	pc, ok := a.cat.(Producers)
	if !ok {
		writeProblem(w, r, newProblem(CodeRoleUnavailable, "this node's catalog hands out no producer ids"))
		return
	}
	var req initProducerRequest
	// An empty body asks for a plain idempotent producer: curl -X POST works as is.
	if r.ContentLength != 0 {
		body, p := readBody(r)
		if p != nil {
			writeProblem(w, r, p)
			return
		}
		if len(body) > 0 {
			if p := decodeStrict(body, &req); p != nil {
				writeProblem(w, r, p)
				return
			}
		}
	}
	tid := ""
	if req.TransactionalID != nil {
		tid = *req.TransactionalID
		if err := catalog.ValidateTransactionalID(tid); err != nil {
			writeProblem(w, r, newProblem(CodeInvalidTransactionalID, "%s", err.Error()).with("field", "transactional_id"))
			return
		}
	}
	var current *catalog.Producer
	if req.ProducerID != nil || req.Epoch != nil {
		pj := producerJSON{ID: req.ProducerID, Epoch: req.Epoch}
		cur, p := pj.identity()
		if p == nil && tid == "" {
			p = newProblem(CodeInvalidRequest, "producer_id and epoch go with a transactional_id: a producer without one gets a new id each time")
		}
		if p != nil {
			writeProblem(w, r, p.with("field", "producer_id"))
			return
		}
		current = cur
	}
	p, err := pc.InitProducer(r.Context(), tid, current)
	if err != nil {
		writeProblem(w, r, a.producerProblem(r, "init producer", err, nil))
		return
	}
	writeJSON(w, http.StatusOK, initProducerResponse{ProducerID: p.ID, Epoch: p.Epoch})
}

// producerJSON is a produce request's "producer": its identity and its base sequences,
// {"<partition>": seq} on /v1/topics/{topic}/records and {"<topic>": {"<partition>":
// seq}} on /v1/records.
type producerJSON struct {
	ID        *int64          `json:"id"`
	Epoch     *int64          `json:"epoch"`
	Sequences json.RawMessage `json:"sequences"`
}

// identity validates the producer's id and epoch.
func (pj *producerJSON) identity() (*catalog.Producer, *problem) {
	if pj.ID == nil || pj.Epoch == nil {
		return nil, newProblem(CodeInvalidRequest, "producer: id and epoch are required (POST /v1/producers hands them out)").with("field", "producer")
	}
	if *pj.ID < 0 || *pj.Epoch < 0 || *pj.Epoch > math.MaxInt16 {
		return nil, newProblem(CodeInvalidRequest, "producer: id %d epoch %d: use what POST /v1/producers answered", *pj.ID, *pj.Epoch).with("field", "producer")
	}
	return &catalog.Producer{ID: *pj.ID, Epoch: int16(*pj.Epoch)}, nil
}

// partitionSequences reads {"<partition>": seq}.
func partitionSequences(raw json.RawMessage, field string) (map[int32]int32, *problem) {
	var m map[string]int64
	if isNull(raw) {
		return nil, newProblem(CodeInvalidRequest, "%s: a base sequence per partition written is required", field).with("field", field)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, newProblem(CodeInvalidRequest, "%s: want {\"<partition>\": base sequence, ...}: %v", field, err).with("field", field)
	}
	out := make(map[int32]int32, len(m))
	for k, v := range m {
		part, ok := parseDigits(k, math.MaxInt32)
		if !ok {
			return nil, newProblem(CodeInvalidRequest, "%s: %q is not a partition number", field, truncate(k, 32)).with("field", field)
		}
		if v < 0 || v > math.MaxInt32 {
			return nil, newProblem(CodeInvalidRequest, "%s[%s]: base sequence %d: sequences run from 0 to %d", field, k, v, math.MaxInt32).with("field", field)
		}
		out[int32(part)] = int32(v)
	}
	return out, nil
}

// sequencesFor checks that seqs names exactly the partitions recs write (a sequence for
// a partition nothing writes would be a client's bookkeeping error) and keys them by
// topic id. names maps topic ids to names for the messages.
func sequencesFor(recs []writer.Record, seqs map[int64]map[int32]int32, names map[int64]string) (map[writer.TopicPartition]int32, *problem) {
	out := make(map[writer.TopicPartition]int32)
	for i := range recs {
		r := &recs[i]
		tp := writer.TopicPartition{TopicID: r.TopicID, Partition: r.Partition}
		if _, ok := out[tp]; ok {
			continue
		}
		seq, ok := seqs[r.TopicID][r.Partition]
		if !ok {
			return nil, newProblem(CodeInvalidRequest, "producer.sequences: no base sequence for %s partition %d, which records[%d] writes", names[r.TopicID], r.Partition, i).
				with("field", "producer.sequences").with("record", i)
		}
		out[tp] = seq
	}
	n := 0
	for _, ps := range seqs {
		n += len(ps)
	}
	if n != len(out) {
		var extra []string
		for tid, ps := range seqs {
			for p := range ps {
				if _, ok := out[writer.TopicPartition{TopicID: tid, Partition: p}]; !ok {
					extra = append(extra, names[tid]+"/"+strconv.Itoa(int(p)))
				}
			}
		}
		sort.Strings(extra)
		return nil, newProblem(CodeInvalidRequest, "producer.sequences: no record writes %v: send a sequence for exactly the partitions written", extra).
			with("field", "producer.sequences")
	}
	return out, nil
}

// producerProblem maps the producer and group refusals of a produce (or of
// InitProducer); names resolves topic ids for an out-of-order answer. The rest goes to
// writerProblem or catalogProblem.
func (a *API) producerProblem(r *http.Request, op string, err error, names map[int64]string) *problem {
	var se *catalog.SequenceError
	switch {
	case errors.As(err, &se):
		p := newProblem(CodeOutOfOrderSequence, "%s", err.Error()).
			with("expected_sequence", se.Expected).with("sequence", se.Got).with("partition", se.Partition)
		if name, ok := names[se.TopicID]; ok {
			p = p.with("topic", name)
		}
		return p
	case errors.Is(err, catalog.ErrProducerFenced):
		return newProblem(CodeProducerFenced, "%s: a newer instance with this transactional id has initialised; stop this one", err.Error())
	case errors.Is(err, catalog.ErrUnknownProducer):
		return newProblem(CodeUnknownProducer, "%s", err.Error())
	case errors.Is(err, catalog.ErrInvalidTransactionalID):
		return newProblem(CodeInvalidTransactionalID, "%s", err.Error())
	case errors.Is(err, catalog.ErrGroupNotFound), errors.Is(err, catalog.ErrInvalidGroupName),
		errors.Is(err, catalog.ErrUnknownMember), errors.Is(err, catalog.ErrStaleMemberEpoch),
		errors.Is(err, catalog.ErrNotOwner), errors.Is(err, catalog.ErrGroupNotEmpty),
		errors.Is(err, catalog.ErrInvalidOffset), errors.Is(err, catalog.ErrInvalidGroupRequest):
		return a.groupProblem(r, op, err)
	case op == "init producer":
		return a.catalogProblem(r, op, err)
	}
	return a.writerProblem(r, err)
}

// appendDuplicate ends a produce answer: `,"duplicate":true` for a retry of a committed
// request, so the common answer stays as it was.
func appendDuplicate(out []byte, dup bool) []byte {
	if dup {
		out = append(out, `,"duplicate":true`...)
	}
	return append(out, "}\n"...)
}
