package api

import (
	"net/http"

	v1 "github.com/strata-io/strata/api/v1"
)

// listNodes is GET /v1/nodes: the registry's live nodes (the web console's overview).
func (a *API) listNodes(w http.ResponseWriter, r *http.Request) *problem {
	ns, err := a.core.Nodes(r.Context(), principal(r))
	if err != nil {
		return a.problemFor(r, err)
	}
	out := v1.NodeList{Nodes: make([]v1.Node, len(ns))}
	for i, n := range ns {
		out.Nodes[i] = v1.Node{ID: n.ID, Address: n.Addr, LeaseUntil: n.LeaseUntil.UTC()}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
