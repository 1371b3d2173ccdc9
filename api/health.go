package api

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds Deps.Ready so a hung dependency fails the probe instead of
// holding it until the prober gives up.
const readyTimeout = 5 * time.Second

// healthz says only that the process serves HTTP: it must not fail when a dependency
// is down, or an orchestrator would restart healthy nodes during an outage.
func (a *API) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz asks Deps.Ready whether this node should receive traffic.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	if a.ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := a.ready(ctx); err != nil {
			writeProblem(w, r, newProblem(CodeNotReady, "%s", err.Error()))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (a *API) metricsHandler() http.Handler {
	return promhttp.HandlerFor(a.gatherer, promhttp.HandlerOpts{})
}
