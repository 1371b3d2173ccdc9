package broker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// The security calls: API keys, ACLs and the audit log, kept in the catalog and managed
// by principals allowed to alter the cluster (describe it, to read them), as Kafka's
// ACL requests are. Each change is audited in its own transaction.

// CreateKeyRequest asks for a new API key.
type CreateKeyRequest struct {
	// Principal is who the key authenticates as ("User:NAME").
	Principal   string
	Description string
	// ExpiresAt, when not zero, is when the key stops working.
	ExpiresAt time.Time
}

// NewKey is a created key with its secret, which exists nowhere else: the catalog keeps
// only its SHA-256.
type NewKey struct {
	catalog.APIKey
	Secret string
}

// KeySecretBytes is the randomness of a key's secret: 256 bits, written as 64 hex
// digits.
const KeySecretBytes = 32

// maxDescription bounds a key's description.
const maxDescription = 256

// CreateKey makes a key for req.Principal: a random secret of KeySecretBytes and a
// random id ("key-" and 16 hex digits, its SASL/PLAIN username).
func (b *Broker) CreateKey(ctx context.Context, who Principal, req CreateKeyRequest) (NewKey, error) {
	if e := b.securityCall(ctx, who, acl.OpAlter); e != nil {
		return NewKey{}, e
	}
	if err := acl.ValidatePrincipal(req.Principal, false); err != nil {
		return NewKey{}, newError(CodeInvalidRequest, "%s", err.Error()).with("field", "principal")
	}
	if len(req.Description) > maxDescription {
		return NewKey{}, newError(CodeInvalidRequest, "the description is %d bytes: at most %d", len(req.Description), maxDescription).with("field", "description")
	}
	if !req.ExpiresAt.IsZero() && !req.ExpiresAt.After(b.now()) {
		return NewKey{}, newError(CodeInvalidRequest, "the expiry %s has passed: give a time ahead", req.ExpiresAt.UTC().Format(time.RFC3339)).with("field", "expires_at")
	}
	var secret [KeySecretBytes]byte
	var id [8]byte
	rand.Read(secret[:]) // never fails (crypto/rand)
	rand.Read(id[:])
	nk := NewKey{Secret: hex.EncodeToString(secret[:])}
	k := catalog.APIKey{ID: "key-" + hex.EncodeToString(id[:]), Principal: req.Principal, Description: req.Description,
		CreatedBy: who.name(), ExpiresAt: req.ExpiresAt}
	k.Digest = digest(nk.Secret)
	details := map[string]any{"principal": k.Principal}
	if !k.ExpiresAt.IsZero() {
		details["expires_at"] = k.ExpiresAt.UTC().Format(time.RFC3339)
	}
	created, err := b.d.Security.CreateKey(withAuditOf(ctx, who, "key.create", "key", k.ID, details), k)
	if err != nil {
		return NewKey{}, catalogError("create key", err)
	}
	nk.APIKey = created
	return nk, nil
}

// RevokeKey revokes a key: within the nodes' poll interval it authenticates nothing,
// and the connections, streams and long polls it opened are cut.
func (b *Broker) RevokeKey(ctx context.Context, who Principal, id string) (catalog.APIKey, error) {
	if e := b.securityCall(ctx, who, acl.OpAlter); e != nil {
		return catalog.APIKey{}, e
	}
	k, err := b.d.Security.RevokeKey(withAuditOf(ctx, who, "key.revoke", "key", id, nil), id)
	if errors.Is(err, catalog.ErrKeyNotFound) {
		return catalog.APIKey{}, newError(CodeKeyNotFound, "no live key has id %q", truncate(id, 64))
	}
	if err != nil {
		return catalog.APIKey{}, catalogError("revoke key", err)
	}
	return k, nil
}

// Keys lists every key (never a secret), revoked ones included.
func (b *Broker) Keys(ctx context.Context, who Principal) ([]catalog.APIKey, error) {
	if e := b.securityCall(ctx, who, acl.OpDescribe); e != nil {
		return nil, e
	}
	ks, err := b.d.Security.Keys(ctx)
	if err != nil {
		return nil, catalogError("list keys", err)
	}
	return ks, nil
}

// CreateACL stores a binding; one that exists already changes nothing.
func (b *Broker) CreateACL(ctx context.Context, who Principal, bd acl.Binding) error {
	if e := b.securityCall(ctx, who, acl.OpAlter); e != nil {
		return e
	}
	if err := bd.Validate(); err != nil {
		return newError(CodeInvalidRequest, "%s", err.Error())
	}
	if err := b.d.Security.CreateACL(withAuditOf(ctx, who, "acl.create", "acl", bd.String(), bindingDetails(bd)), bd); err != nil {
		return catalogError("create ACL", err)
	}
	return nil
}

// DeleteACLs deletes the bindings f selects and answers them.
func (b *Broker) DeleteACLs(ctx context.Context, who Principal, f acl.Filter) ([]acl.Binding, error) {
	if e := b.securityCall(ctx, who, acl.OpAlter); e != nil {
		return nil, e
	}
	if err := f.Validate(); err != nil {
		return nil, newError(CodeInvalidRequest, "%s", err.Error())
	}
	bs, err := b.d.Security.DeleteACLs(withAuditOf(ctx, who, "acl.delete", "acl", "filter", filterDetails(f)), f)
	if err != nil {
		return nil, catalogError("delete ACLs", err)
	}
	return bs, nil
}

// DescribeACLs lists the bindings f selects.
func (b *Broker) DescribeACLs(ctx context.Context, who Principal, f acl.Filter) ([]acl.Binding, error) {
	if e := b.securityCall(ctx, who, acl.OpDescribe); e != nil {
		return nil, e
	}
	if err := f.Validate(); err != nil {
		return nil, newError(CodeInvalidRequest, "%s", err.Error())
	}
	all, err := b.d.Security.ACLs(ctx)
	if err != nil {
		return nil, catalogError("describe ACLs", err)
	}
	var out []acl.Binding
	for _, bd := range all {
		if f.Matches(bd) {
			out = append(out, bd)
		}
	}
	return out, nil
}

// DefaultAuditPage is the page a front end asks AuditLog for when its caller names
// none.
const DefaultAuditPage = 100

// AuditLog lists audit records with an ID above after, oldest first, at most limit:
// 1 to catalog.MaxAuditPage (DefaultAuditPage when the caller names none).
func (b *Broker) AuditLog(ctx context.Context, who Principal, after int64, limit int) ([]catalog.AuditRecord, error) {
	if e := b.securityCall(ctx, who, acl.OpDescribe); e != nil {
		return nil, e
	}
	if limit < 1 || limit > catalog.MaxAuditPage {
		return nil, newError(CodeInvalidParameter, "audit page of %d records: ask for 1 to %d", limit, catalog.MaxAuditPage).with("parameter", "limit")
	}
	if after < 0 {
		return nil, newError(CodeInvalidParameter, "after %d: an audit record id, from 0", after).with("parameter", "after")
	}
	rs, err := b.d.Security.AuditLog(ctx, after, limit)
	if err != nil {
		return nil, catalogError("read audit log", err)
	}
	return rs, nil
}

// securityCall checks the capability and op on the cluster.
func (b *Broker) securityCall(ctx context.Context, who Principal, op acl.Operation) *Error {
	if e := b.check(CapSecurity); e != nil {
		return e
	}
	return b.authorize(ctx, who, op, acl.Cluster())
}

func bindingDetails(bd acl.Binding) map[string]any {
	return map[string]any{
		"principal": bd.Principal, "host": bd.Host, "resource_type": bd.Resource.String(), "resource_name": bd.Name,
		"pattern_type": bd.Pattern.String(), "operation": bd.Operation.String(), "permission": bd.Permission.String(),
	}
}

func filterDetails(f acl.Filter) map[string]any {
	d := map[string]any{"resource_type": f.Resource.String(), "pattern_type": f.Pattern.String(),
		"operation": f.Operation.String(), "permission": f.Permission.String()}
	for k, v := range map[string]*string{"principal": f.Principal, "host": f.Host, "resource_name": f.Name} {
		if v != nil {
			d[k] = *v
		}
	}
	return d
}

// digest is what the catalog keeps of a secret.
func digest(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }
