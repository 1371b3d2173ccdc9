package api

import (
	"math"
	"net/http"

	"github.com/go-chi/chi/v5"

	v1 "github.com/strata-io/strata/api/v1"
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

// init answers a new producer id at epoch 0, or, for a known transactional_id, its id
// at the next epoch, which fences the instance that held it.
func (rs *producersResource) init(w http.ResponseWriter, r *http.Request) *problem {
	a := rs.a
	var req v1.InitProducerRequest
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
		cur, p := producerIdentity(req.ProducerID, req.Epoch)
		if p != nil {
			return p.with("field", "producer_id")
		}
		creq.Current = cur
	}
	p, err := a.core.InitProducer(r.Context(), principal(r), creq)
	if err != nil {
		return a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, v1.InitProducerResponse{ID: p.ID, Epoch: p.Epoch})
	return nil
}

// producerIdentity reads a producer's id and epoch: both present, each what POST
// /v1/producers answers (an id from 0, an epoch that fits Kafka's int16).
func producerIdentity(id, epoch *int64) (*catalog.Producer, *problem) {
	if id == nil || epoch == nil {
		return nil, newProblem(CodeInvalidRequest, "producer: id and epoch are required (POST /v1/producers hands them out)").with("field", "producer")
	}
	if *id < 0 || *epoch < 0 || *epoch > math.MaxInt16 {
		return nil, newProblem(CodeInvalidRequest, "producer: id %d epoch %d: use what POST /v1/producers answered", *id, *epoch).with("field", "producer")
	}
	return &catalog.Producer{ID: *id, Epoch: int16(*epoch)}, nil
}

// partitionSequences reads {"<partition>": seq}.
func partitionSequences(m map[string]int64, field string) (map[int32]int32, *problem) {
	if m == nil {
		return nil, newProblem(CodeInvalidRequest, "%s: a base sequence per partition written is required", field).with("field", field)
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
