package api

import (
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/acl"
	v1 "github.com/strata-io/strata/api/v1"
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
	rs.mountScram(v1)
}

func toBinding(b acl.Binding) v1.ACLBinding {
	return v1.ACLBinding{Principal: b.Principal, Host: b.Host, ResourceType: b.Resource.String(), ResourceName: b.Name,
		PatternType: b.Pattern.String(), Operation: b.Operation.String(), Permission: b.Permission.String()}
}

func toBindings(bs []acl.Binding) []v1.ACLBinding {
	out := make([]v1.ACLBinding, len(bs))
	for i, b := range bs {
		out[i] = toBinding(b)
	}
	return out
}

// binding reads a binding: host defaults to *, pattern_type to literal, permission to
// allow; the cluster's name may be left out.
func binding(j v1.ACLBinding) (acl.Binding, *problem) {
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
	writeJSON(w, http.StatusOK, v1.ACLList{ACLs: toBindings(bs)})
	return nil
}

func (rs *securityResource) createACL(w http.ResponseWriter, r *http.Request) *problem {
	j, p := decodeJSON[v1.ACLBinding](r)
	if p != nil {
		return p
	}
	b, p := binding(j)
	if p != nil {
		return p
	}
	if err := rs.a.core.CreateACL(r.Context(), principal(r), b); err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusCreated, toBinding(b))
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
	writeJSON(w, http.StatusOK, v1.ACLDeleted{Deleted: toBindings(bs)})
	return nil
}

func toKey(k catalog.APIKey) v1.Key {
	j := v1.Key{ID: k.ID, Principal: k.Principal, Description: k.Description, CreatedBy: k.CreatedBy, CreatedAt: k.CreatedAt}
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
	out := make([]v1.Key, len(ks))
	for i, k := range ks {
		out[i] = toKey(k)
	}
	writeJSON(w, http.StatusOK, v1.KeyList{Keys: out})
	return nil
}

func (rs *securityResource) createKey(w http.ResponseWriter, r *http.Request) *problem {
	j, p := decodeJSON[v1.CreateKeyRequest](r)
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
	out := toKey(k.APIKey)
	out.Secret = k.Secret
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (rs *securityResource) revokeKey(w http.ResponseWriter, r *http.Request) *problem {
	k, err := rs.a.core.RevokeKey(r.Context(), principal(r), chi.URLParam(r, "key"))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, toKey(k))
	return nil
}

// audit serves GET /v1/audit?after=ID&limit=N: records after ID, oldest first; the
// answer's next_after continues. The page's bounds are the core's.
func (rs *securityResource) audit(w http.ResponseWriter, r *http.Request) *problem {
	q := r.URL.Query()
	var after int64
	limit := broker.DefaultAuditPage
	for _, p := range []struct {
		name string
		dst  func(int64)
	}{
		{"after", func(n int64) { after = n }},
		{"limit", func(n int64) { limit = int(min(n, math.MaxInt32)) }},
	} {
		if s := q.Get(p.name); s != "" {
			n, ok := parseDigits(s, 1<<63-1)
			if !ok {
				return newProblem(CodeInvalidParameter, "%s %q: a non-negative integer", p.name, truncate(s, 32)).with("parameter", p.name)
			}
			p.dst(n)
		}
	}
	recs, err := rs.a.core.AuditLog(r.Context(), principal(r), after, limit)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	page := v1.AuditPage{Records: make([]v1.AuditRecord, len(recs)), NextAfter: after}
	for i, a := range recs {
		page.Records[i] = v1.AuditRecord{ID: a.ID, Time: a.Time, Principal: a.Principal, Action: a.Action, ResourceType: a.ResourceType, Resource: a.Resource, Details: a.Details}
		page.NextAfter = a.ID
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
