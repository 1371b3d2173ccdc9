package api

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// pushRoutes serves a share group's push subscription (issue 36) under
// /v1/share-groups/{group}: the rules (who may, which targets, the ranges) are the
// core's.
func (rs *shareGroupsResource) pushRoutes(r chi.Router, h func(handlerFunc) http.HandlerFunc) {
	r.Put("/push", h(rs.putPush))
	r.Get("/push", h(rs.getPush))
	r.Delete("/push", h(rs.deletePush))
	r.Post("/push:pause", h(rs.pausePush(true)))
	r.Post("/push:resume", h(rs.pausePush(false)))
	r.Post("/push:rotate-secret", h(rs.rotatePush))
}

func pushWire(s catalog.PushSubscription) v1.PushSubscription {
	state := "active"
	if s.Paused {
		state = "paused"
	}
	topics := s.Topics
	if topics == nil {
		topics = []string{}
	}
	return v1.PushSubscription{Group: s.Group, Topics: topics, URL: s.URL, LambdaARN: s.LambdaARN, BatchSize: s.BatchSize,
		LingerMs: s.Linger.Milliseconds(), Concurrency: s.Concurrency, TimeoutMs: s.Timeout.Milliseconds(),
		Retry:     v1.PushRetry{MinBackoffMs: s.Retry.MinBackoff.Milliseconds(), MaxBackoffMs: s.Retry.MaxBackoff.Milliseconds(), PauseAfter: s.Retry.PauseAfter},
		Principal: s.Principal, State: state, LastError: s.LastError, CreatedMs: s.Created.UnixMilli(), UpdatedMs: s.Updated.UnixMilli()}
}

func (rs *shareGroupsResource) putPush(w http.ResponseWriter, r *http.Request) *problem {
	req, p := decodeJSON[v1.PushSubscriptionRequest](r)
	if p != nil {
		return p
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, f := range []struct {
		name string
		v    int64
	}{{"linger_ms", req.LingerMs}, {"timeout_ms", req.TimeoutMs}} {
		if f.v < 0 || f.v > int64(time.Hour/time.Millisecond) {
			return newProblem(CodeInvalidParameter, "%s %d: want 0 to 3600000", f.name, f.v).with("field", f.name)
		}
	}
	s := catalog.PushSubscription{Group: groupParam(r), Topics: req.Topics, URL: req.URL, LambdaARN: req.LambdaARN,
		BatchSize: req.BatchSize, Linger: ms(req.LingerMs), Concurrency: req.Concurrency, Timeout: ms(req.TimeoutMs)}
	if req.Retry != nil {
		if req.Retry.MinBackoffMs < 0 || req.Retry.MaxBackoffMs < 0 || req.Retry.MaxBackoffMs > int64(time.Hour/time.Millisecond) {
			return newProblem(CodeInvalidParameter, "retry: backoffs from 0 to 3600000 ms").with("field", "retry")
		}
		s.Retry = catalog.PushRetry{MinBackoff: ms(req.Retry.MinBackoffMs), MaxBackoff: ms(req.Retry.MaxBackoffMs), PauseAfter: req.Retry.PauseAfter}
	}
	res, err := rs.a.core.PutPush(r.Context(), principal(r), broker.PushRequest{PushSubscription: s})
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := pushWire(res.Subscription)
	out.Secret = res.Secret
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, out)
	return nil
}

func (rs *shareGroupsResource) getPush(w http.ResponseWriter, r *http.Request) *problem {
	s, err := rs.a.core.Push(r.Context(), principal(r), groupParam(r))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, pushWire(s))
	return nil
}

func (rs *shareGroupsResource) deletePush(w http.ResponseWriter, r *http.Request) *problem {
	if err := rs.a.core.DeletePush(r.Context(), principal(r), groupParam(r)); err != nil {
		return rs.a.problemFor(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (rs *shareGroupsResource) pausePush(paused bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) *problem {
		if err := rs.a.core.SetPushPaused(r.Context(), principal(r), groupParam(r), paused); err != nil {
			return rs.a.problemFor(r, err)
		}
		return rs.getPush(w, r)
	}
}

func (rs *shareGroupsResource) rotatePush(w http.ResponseWriter, r *http.Request) *problem {
	secret, err := rs.a.core.RotatePushSecret(r.Context(), principal(r), groupParam(r))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, v1.PushSecret{Secret: secret})
	return nil
}
