package api

import (
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// Security administration (docs/design.md "Security"): ACL bindings at /v1/acls, API
// keys at /v1/keys, the audit log at /v1/audit. Changing them needs alter on the
// cluster, reading them describe on the cluster (the core decides).

// securityResource serves the three.
type securityResource struct{ a *API }

func (rs *securityResource) mount(v1 chi.Router) {
	s := func(h handlerFunc) http.HandlerFunc { return rs.a.serve(broker.CapSecurity, h) }
	v1.Get("/acls", s(rs.listACLs))
	v1.Post("/acls", s(rs.createACL))
	v1.Delete("/acls", s(rs.deleteACLs))
	v1.Get("/keys", s(rs.listKeys))
	v1.Post("/keys", s(rs.createKey))
	v1.Delete("/keys/{key}", s(rs.revokeKey))
	v1.Get("/audit", s(rs.audit))
}

type bindingJSON struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

func toBindingJSON(b acl.Binding) bindingJSON {
	return bindingJSON{Principal: b.Principal, Host: b.Host, ResourceType: b.Resource.String(), ResourceName: b.Name,
		PatternType: b.Pattern.String(), Operation: b.Operation.String(), Permission: b.Permission.String()}
}

func bindingsJSON(bs []acl.Binding) []bindingJSON {
	out := make([]bindingJSON, len(bs))
	for i, b := range bs {
		out[i] = toBindingJSON(b)
	}
	return out
}

// binding reads a binding: host defaults to *, pattern_type to literal, permission to
// allow; the cluster's name may be left out.
func (j bindingJSON) binding() (acl.Binding, *problem) {
	b := acl.Binding{Principal: j.Principal, Host: or(j.Host, acl.Wildcard), Name: j.ResourceName}
	var err error
	fields := []struct {
		field string
		parse func() error
	}{
		{"resource_type", func() (e error) { b.Resource, e = acl.ParseResourceType(j.ResourceType); return }},
		{"pattern_type", func() (e error) { b.Pattern, e = acl.ParsePatternType(or(j.PatternType, "literal")); return }},
		{"operation", func() (e error) { b.Operation, e = acl.ParseOperation(j.Operation); return }},
		{"permission", func() (e error) { b.Permission, e = acl.ParsePermission(or(j.Permission, "allow")); return }},
	}
	for _, f := range fields {
		if err = f.parse(); err != nil {
			return acl.Binding{}, newProblem(CodeInvalidRequest, "%s: %v", f.field, err).with("field", f.field)
		}
	}
	if b.Resource == acl.TypeCluster && b.Name == "" {
		b.Name = acl.ClusterName
	}
	return b, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// filterParams reads a filter from the query: each parameter narrows it; resource_type,
// pattern_type (any, match, literal, prefixed), operation and permission default to any.
func filterParams(q url.Values) (acl.Filter, *problem) {
	f := acl.MatchAll()
	var err error
	for _, p := range []struct {
		name  string
		parse func(string) error
	}{
		{"resource_type", func(s string) (e error) { f.Resource, e = acl.ParseResourceType(s); return }},
		{"pattern_type", func(s string) (e error) { f.Pattern, e = acl.ParsePatternType(s); return }},
		{"operation", func(s string) (e error) { f.Operation, e = acl.ParseOperation(s); return }},
		{"permission", func(s string) (e error) { f.Permission, e = acl.ParsePermission(s); return }},
	} {
		if s := q.Get(p.name); s != "" {
			if err = p.parse(s); err != nil {
				return acl.Filter{}, newProblem(CodeInvalidParameter, "%s: %v", p.name, err).with("parameter", p.name)
			}
		}
	}
	for name, dst := range map[string]**string{"principal": &f.Principal, "host": &f.Host, "resource_name": &f.Name} {
		if q.Has(name) {
			v := q.Get(name)
			*dst = &v
		}
	}
	return f, nil
}

func (rs *securityResource) listACLs(w http.ResponseWriter, r *http.Request) *problem {
	f, p := filterParams(r.URL.Query())
	if p != nil {
		return p
	}
	bs, err := rs.a.core.DescribeACLs(r.Context(), principal(r), f)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"acls": bindingsJSON(bs)})
	return nil
}

func (rs *securityResource) createACL(w http.ResponseWriter, r *http.Request) *problem {
	j, p := decodeJSON[bindingJSON](r)
	if p != nil {
		return p
	}
	b, p := j.binding()
	if p != nil {
		return p
	}
	if err := rs.a.core.CreateACL(r.Context(), principal(r), b); err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusCreated, toBindingJSON(b))
	return nil
}

func (rs *securityResource) deleteACLs(w http.ResponseWriter, r *http.Request) *problem {
	q := r.URL.Query()
	if len(q) == 0 {
		return newProblem(CodeInvalidParameter, "name what to delete with query parameters (principal, resource_type, resource_name, pattern_type, operation, permission, host); ?resource_type=any deletes every ACL")
	}
	f, p := filterParams(q)
	if p != nil {
		return p
	}
	bs, err := rs.a.core.DeleteACLs(r.Context(), principal(r), f)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": bindingsJSON(bs)})
	return nil
}

type keyJSON struct {
	ID          string     `json:"id"`
	Principal   string     `json:"principal"`
	Description string     `json:"description,omitempty"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
	// Secret is answered once, when the key is created.
	Secret string `json:"secret,omitempty"`
}

func toKeyJSON(k catalog.APIKey) keyJSON {
	j := keyJSON{ID: k.ID, Principal: k.Principal, Description: k.Description, CreatedBy: k.CreatedBy, CreatedAt: k.CreatedAt}
	if !k.ExpiresAt.IsZero() {
		j.ExpiresAt = &k.ExpiresAt
	}
	if !k.RevokedAt.IsZero() {
		j.RevokedAt = &k.RevokedAt
	}
	return j
}

func (rs *securityResource) listKeys(w http.ResponseWriter, r *http.Request) *problem {
	ks, err := rs.a.core.Keys(r.Context(), principal(r))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := make([]keyJSON, len(ks))
	for i, k := range ks {
		out[i] = toKeyJSON(k)
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out})
	return nil
}

type createKeyJSON struct {
	Principal   string `json:"principal"`
	Description string `json:"description"`
	// ExpiresAt is unix ms or RFC 3339; ExpiresInMs is from now. At most one.
	ExpiresAt   string `json:"expires_at"`
	ExpiresInMs *int64 `json:"expires_in_ms"`
}

func (rs *securityResource) createKey(w http.ResponseWriter, r *http.Request) *problem {
	j, p := decodeJSON[createKeyJSON](r)
	if p != nil {
		return p
	}
	req := broker.CreateKeyRequest{Principal: j.Principal, Description: j.Description}
	switch {
	case j.ExpiresAt != "" && j.ExpiresInMs != nil:
		return newProblem(CodeInvalidRequest, "give expires_at or expires_in_ms, not both").with("field", "expires_in_ms")
	case j.ExpiresAt != "":
		ms, ok := parseTime(j.ExpiresAt)
		if !ok {
			return newProblem(CodeInvalidRequest, "expires_at %q: use unix milliseconds or RFC 3339", truncate(j.ExpiresAt, 40)).with("field", "expires_at")
		}
		req.ExpiresAt = time.UnixMilli(ms)
	case j.ExpiresInMs != nil:
		if *j.ExpiresInMs <= 0 || *j.ExpiresInMs > 100*365*24*3600*1000 {
			return newProblem(CodeInvalidRequest, "expires_in_ms must be a positive number of milliseconds").with("field", "expires_in_ms")
		}
		req.ExpiresAt = time.Now().Add(time.Duration(*j.ExpiresInMs) * time.Millisecond)
	}
	k, err := rs.a.core.CreateKey(r.Context(), principal(r), req)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := toKeyJSON(k.APIKey)
	out.Secret = k.Secret
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (rs *securityResource) revokeKey(w http.ResponseWriter, r *http.Request) *problem {
	k, err := rs.a.core.RevokeKey(r.Context(), principal(r), chi.URLParam(r, "key"))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, toKeyJSON(k))
	return nil
}

type auditJSON struct {
	ID           int64          `json:"id"`
	Time         time.Time      `json:"time"`
	Principal    string         `json:"principal"`
	Action       string         `json:"action"`
	ResourceType string         `json:"resource_type"`
	Resource     string         `json:"resource"`
	Details      map[string]any `json:"details,omitempty"`
}

// audit serves GET /v1/audit?after=ID&limit=N: records after ID, oldest first; the
// answer's next_after continues.
func (rs *securityResource) audit(w http.ResponseWriter, r *http.Request) *problem {
	q := r.URL.Query()
	var after int64
	limit := 100
	if s := q.Get("after"); s != "" {
		n, ok := parseDigits(s, 1<<63-1)
		if !ok {
			return newProblem(CodeInvalidParameter, "after %q: an audit record id", truncate(s, 32)).with("parameter", "after")
		}
		after = n
	}
	if s := q.Get("limit"); s != "" {
		n, ok := parseDigits(s, catalog.MaxAuditPage)
		if !ok || n == 0 {
			return newProblem(CodeInvalidParameter, "limit %q: between 1 and %d", truncate(s, 32), catalog.MaxAuditPage).with("parameter", "limit")
		}
		limit = int(n)
	}
	rs2, err := rs.a.core.AuditLog(r.Context(), principal(r), after, limit)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := make([]auditJSON, len(rs2))
	next := after
	for i, a := range rs2 {
		out[i] = auditJSON{ID: a.ID, Time: a.Time, Principal: a.Principal, Action: a.Action, ResourceType: a.ResourceType, Resource: a.Resource, Details: a.Details}
		next = a.ID
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": out, "next_after": next})
	return nil
}
