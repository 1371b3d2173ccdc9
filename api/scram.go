package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// SCRAM credentials at /v1/scram-credentials, beside /v1/keys: the logins of Kafka
// clients with SASL SCRAM-SHA-256/512 (the principal is User: and the user). Setting
// and deleting need alter on the cluster, listing describe on it (the core decides).

func (rs *securityResource) mountScram(v1 chi.Router) {
	s := func(h handlerFunc) http.HandlerFunc { return rs.a.serve(broker.CapSecurity, h) }
	v1.Get("/scram-credentials", s(rs.listScram))
	v1.Put("/scram-credentials/{user}", s(rs.setScram))
	v1.Delete("/scram-credentials/{user}", s(rs.deleteScram))
}

func toScramUser(u broker.ScramUser) v1.ScramUser {
	j := v1.ScramUser{User: u.User, Principal: "User:" + u.User, Credentials: []v1.ScramCredential{}}
	for _, c := range u.Credentials {
		j.Credentials = append(j.Credentials, v1.ScramCredential{Mechanism: c.Mechanism.String(), Iterations: c.Iterations})
	}
	return j
}

func (rs *securityResource) listScram(w http.ResponseWriter, r *http.Request) *problem {
	us, err := rs.a.core.DescribeScramCredentials(r.Context(), principal(r), nil)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := v1.ScramUserList{Users: make([]v1.ScramUser, len(us))}
	for i, u := range us {
		out.Users[i] = toScramUser(u)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func scramMechanism(s, where string) (catalog.ScramMechanism, *problem) {
	m, err := broker.ParseScramMechanism(s)
	if err != nil {
		code := CodeInvalidRequest
		if where == "parameter" {
			code = CodeInvalidParameter
		}
		return 0, newProblem(code, "mechanism %q: SCRAM-SHA-256 or SCRAM-SHA-512", truncate(s, 32)).with(where, "mechanism")
	}
	return m, nil
}

func (rs *securityResource) setScram(w http.ResponseWriter, r *http.Request) *problem {
	j, p := decodeJSON[v1.SetScramCredentialRequest](r)
	if p != nil {
		return p
	}
	m, p := scramMechanism(j.Mechanism, "field")
	if p != nil {
		return p
	}
	if j.Password == "" {
		return newProblem(CodeInvalidRequest, "give the password").with("field", "password")
	}
	user := chi.URLParam(r, "user")
	err := rs.a.core.UpsertScramCredential(r.Context(), principal(r), broker.ScramUpsert{User: user, Mechanism: m,
		Iterations: j.Iterations, Password: j.Password})
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	return rs.writeScramUser(w, r, user)
}

func (rs *securityResource) deleteScram(w http.ResponseWriter, r *http.Request) *problem {
	m, p := scramMechanism(r.URL.Query().Get("mechanism"), "parameter")
	if p != nil {
		return p
	}
	user := chi.URLParam(r, "user")
	if err := rs.a.core.DeleteScramCredential(r.Context(), principal(r), user, m); err != nil {
		return rs.a.problemFor(r, err)
	}
	return rs.writeScramUser(w, r, user)
}

// writeScramUser answers the user's credentials after a change.
func (rs *securityResource) writeScramUser(w http.ResponseWriter, r *http.Request, user string) *problem {
	us, err := rs.a.core.DescribeScramCredentials(r.Context(), principal(r), []string{user})
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, toScramUser(us[0]))
	return nil
}
