package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	v1 "github.com/strata-io/strata/api/v1"
)

// readyTimeout bounds Deps.Ready so a hung dependency fails the probe instead of
// holding it until the prober gives up.
const readyTimeout = 5 * time.Second

// NotReadyError is what Deps.Ready returns for a dependency that does not answer
// (errors.Join several for several). /readyz names the dependency and logs Err: the
// probe is open to anyone who can reach the node, and a raw error would show
// addresses, bucket names and driver messages.
type NotReadyError struct {
	Dependency string // "catalog", "bucket"
	Err        error
}

func (e *NotReadyError) Error() string { return e.Dependency + " not ready: " + e.Err.Error() }
func (e *NotReadyError) Unwrap() error { return e.Err }

// healthz says only that the process serves HTTP: it must not fail when a dependency
// is down, or an orchestrator would restart healthy nodes during an outage.
func (a *API) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, v1.Status{Status: "ok"})
}

// readyz asks Deps.Ready whether this node should receive traffic.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	if a.ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := a.ready(ctx); err != nil {
			deps := notReady(err)
			a.log.Warn("not ready", "dependencies", deps, "err", err)
			p := newProblem(CodeNotReady, "not ready (the node's log has the cause)")
			if len(deps) > 0 {
				p = newProblem(CodeNotReady, "not ready: %s unreachable (the node's log has the cause)", strings.Join(deps, " and ")).with("dependencies", deps)
			}
			writeProblem(w, r, p)
			return
		}
	}
	writeJSON(w, http.StatusOK, v1.Status{Status: "ready"})
}

// notReady names the dependencies err blames, in order: none for a Ready that returns
// a bare error.
func notReady(err error) []string {
	var deps []string
	var walk func(error)
	walk = func(err error) {
		var nr *NotReadyError
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range e.Unwrap() {
				walk(e)
			}
		default:
			if errors.As(err, &nr) && !slices.Contains(deps, nr.Dependency) {
				deps = append(deps, nr.Dependency)
			}
		}
	}
	walk(err)
	return deps
}

func (a *API) metricsHandler() http.Handler {
	return promhttp.HandlerFor(a.gatherer, promhttp.HandlerOpts{})
}
