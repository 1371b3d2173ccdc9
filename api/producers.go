package api

import (
	"encoding/json"
	"math"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// Idempotent and transactional producers (docs/design.md "HTTP API v1"). POST /v1/producers
// hands out a producer id and epoch; a produce request that carries them, with a base
// sequence per partition, is committed at most once however often it is sent: a retry
// of a committed request answers 200 with its original offsets and "duplicate": true.
// Every field that decides where a record lands is in the body (explicit partitions,
// the producer, the sequences), so a client retries a request byte for byte.

// producersResource is /v1/producers.
type producersResource struct{ a *API }

// Routes returns the router mounted at /v1/producers.
func (rs *producersResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Post("/", rs.a.serve(broker.CapProducers, rs.init))
	return r
}

type initProducerRequest struct {
	TransactionalID *string `json:"transactional_id"`
	// ProducerID and Epoch are the identity the caller holds: with a transactional id
	// it bumps its own epoch, and is fenced if a newer instance has taken the id over;
	// without one it keeps its id at the next epoch (restarting its sequences), or gets a
	// new id if that identity is no longer current.
	ProducerID *int64 `json:"producer_id"`
	Epoch      *int64 `json:"epoch"`
}

type initProducerResponse struct {
	ProducerID int64 `json:"producer_id"`
	Epoch      int16 `json:"epoch"`
}

// init answers a new producer id at epoch 0, or, for a known transactional_id, its id
// at the next epoch, which fences the instance that held it.
func (rs *producersResource) init(w http.ResponseWriter, r *http.Request) *problem {
	a := rs.a
	var req initProducerRequest
	// An empty body asks for a plain idempotent producer: curl -X POST works as is.
	if r.ContentLength != 0 {
		body, p := readBody(r)
		if p != nil {
			return p
		}
		if len(body) > 0 {
			if p := decodeStrict(body, &req); p != nil {
				return p
			}
		}
	}
	creq := broker.InitProducerRequest{TransactionalID: req.TransactionalID}
	if req.ProducerID != nil || req.Epoch != nil {
		pj := producerJSON{ID: req.ProducerID, Epoch: req.Epoch}
		cur, p := pj.identity()
		if p != nil {
			return p.with("field", "producer_id")
		}
		creq.Current = cur
	}
	p, err := a.core.InitProducer(r.Context(), principal(r), creq)
	if err != nil {
		return a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, initProducerResponse{ProducerID: p.ID, Epoch: p.Epoch})
	return nil
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

// appendDuplicate ends a produce answer: `,"duplicate":true` for a retry of a committed
// request, so the common answer stays as it was.
func appendDuplicate(out []byte, dup bool) []byte {
	if dup {
		out = append(out, `,"duplicate":true`...)
	}
	return append(out, "}\n"...)
}
