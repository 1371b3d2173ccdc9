package api

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// Client quotas at /v1/quotas (package quota enforces them; the core decides who may
// read and change them).
type quotaResource struct{ a *API }

func (rs *quotaResource) mount(v1 chi.Router) {
	s := func(h handlerFunc) http.HandlerFunc { return rs.a.serve(broker.CapTopics, h) }
	v1.Get("/quotas", s(rs.list))
	v1.Put("/quotas", s(rs.put))
}

func toQuotaEntry(e catalog.QuotaEntry) v1.QuotaEntry {
	return v1.QuotaEntry{Entity: v1.QuotaEntity{User: e.Entity.User, ClientID: e.Entity.ClientID}, Quotas: e.Values}
}

// list answers every entity with quotas; ?user= and ?client_id= narrow it to entities
// with that part (<default> for the default).
func (rs *quotaResource) list(w http.ResponseWriter, r *http.Request) *problem {
	parts := map[string]string{}
	q := r.URL.Query()
	for param, typ := range map[string]string{"user": broker.EntityUser, "client_id": broker.EntityClientID} {
		if v, ok := q[param]; ok {
			parts[typ] = v[0]
		}
	}
	es, err := rs.a.core.DescribeQuotas(r.Context(), principal(r), broker.PartsFilter(parts, false))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := v1.QuotaList{Quotas: make([]v1.QuotaEntry, len(es))}
	for i, e := range es {
		out.Quotas[i] = toQuotaEntry(e)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (rs *quotaResource) put(w http.ResponseWriter, r *http.Request) *problem {
	j, p := decodeJSON[v1.PutQuotasRequest](r)
	if p != nil {
		return p
	}
	if len(j.Quotas) == 0 {
		return newProblem(CodeInvalidRequest, "quotas is empty: name the keys to set (or null to remove)").with("field", "quotas")
	}
	alt := catalog.QuotaAlteration{Entity: catalog.QuotaEntity{User: j.Entity.User, ClientID: j.Entity.ClientID}, Set: map[string]float64{}}
	for k, v := range j.Quotas {
		if v == nil {
			alt.Remove = append(alt.Remove, k)
		} else {
			alt.Set[k] = *v
		}
	}
	who := principal(r)
	if err := rs.a.core.AlterQuotas(r.Context(), who, []catalog.QuotaAlteration{alt}, false); err != nil {
		return rs.a.problemFor(r, err)
	}
	es, err := rs.a.core.DescribeQuotas(r.Context(), who, entityFilter(alt.Entity))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := v1.QuotaEntry{Entity: j.Entity, Quotas: map[string]float64{}}
	if len(es) == 1 {
		out = toQuotaEntry(es[0])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// entityFilter is a filter matching exactly e.
func entityFilter(e catalog.QuotaEntity) broker.QuotaFilter {
	parts := map[string]string{}
	if e.User != "" {
		parts[broker.EntityUser] = e.User
	}
	if e.ClientID != "" {
		parts[broker.EntityClientID] = e.ClientID
	}
	return broker.PartsFilter(parts, true)
}

// admitQuota refuses, before anything is read or done, a caller that owes more for its
// byte-rate quota than an answer is held back for (the core decides: 429 with
// Retry-After).
func (a *API) admitQuota(r *http.Request, fetch bool) *problem {
	if err := a.core.AdmitBytes(principal(r), fetch); err != nil {
		return a.problemFor(r, err)
	}
	return nil
}

// holdForQuota counts n bytes served to the caller and holds its answer back for the
// throttle time the core answers (bounded), as a Kafka client pauses for its
// throttle_time_ms; a request that ends meanwhile stops waiting.
func (a *API) holdForQuota(r *http.Request, fetch bool, n int) {
	d := a.core.DelayFor(principal(r), fetch, int64(n))
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}
