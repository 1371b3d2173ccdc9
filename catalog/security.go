package catalog

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/acl"
)

// Security is what the catalog keeps for authentication and authorization: API keys
// (their secrets only as SHA-256 digests), ACL bindings, and the audit log of
// administrative actions. Every change to keys or ACLs bumps one version in the same
// transaction and notifies (WatchSecurity), so each node's cached view follows within
// its poll interval at worst. Proved by catalogtest (its "security" suite).
type Security interface {
	// CreateKey stores k (ID, Principal, Digest and ExpiresAt set by the caller;
	// CreatedAt is the database clock's). An ID or digest already stored: ErrKeyExists.
	CreateKey(ctx context.Context, k APIKey) (APIKey, error)
	// RevokeKey marks a live key revoked and answers it. A key that does not exist or
	// is already revoked: ErrKeyNotFound.
	RevokeKey(ctx context.Context, id string) (APIKey, error)
	// Keys lists every key, revoked ones included, oldest first.
	Keys(ctx context.Context) ([]APIKey, error)

	// CreateACL stores a valid binding; storing one that exists changes nothing (an
	// ACL is a set member, as in Kafka). An invalid one: an error wrapping acl.ErrInvalid.
	CreateACL(ctx context.Context, b acl.Binding) error
	// DeleteACLs deletes the bindings f selects and answers them.
	DeleteACLs(ctx context.Context, f acl.Filter) ([]acl.Binding, error)
	// ACLs lists every binding.
	ACLs(ctx context.Context) ([]acl.Binding, error)

	// SecurityVersion is the version keys and ACLs are at (it grows with every change)
	// and the database clock, by which keys expire.
	SecurityVersion(ctx context.Context) (version int64, now time.Time, err error)
	// WatchSecurity calls fn after changes to keys or ACLs (best effort: callers poll
	// SecurityVersion too) until ctx ends, then returns nil.
	WatchSecurity(ctx context.Context, fn func()) error

	// AuditLog lists audit records with an ID above after, oldest first, at most limit
	// (at most MaxAuditPage).
	AuditLog(ctx context.Context, after int64, limit int) ([]AuditRecord, error)

	// ProducerOwner answers whom a producer id belongs to: the transactional id it was
	// handed out for, and the principal that created it. An unknown id:
	// ErrUnknownProducer.
	ProducerOwner(ctx context.Context, producerID int64) (ProducerOwner, error)
}

// Errors of Security.
var (
	ErrKeyNotFound = errors.New("no such key")
	ErrKeyExists   = errors.New("a key with this id or secret already exists")
)

// APIKey is a key as the catalog keeps it: never its secret, only the secret's SHA-256.
type APIKey struct {
	ID        string
	Principal string
	Digest    [sha256.Size]byte
	// Description is the operator's note (what the key is for).
	Description string
	// CreatedBy is the principal that created it.
	CreatedBy string
	CreatedAt time.Time
	// ExpiresAt, when not zero, is when the key stops working (database clock).
	ExpiresAt time.Time
	// RevokedAt, when not zero, is when it was revoked.
	RevokedAt time.Time
}

// Live says whether k authenticates at now (database clock).
func (k APIKey) Live(now time.Time) bool {
	return k.RevokedAt.IsZero() && (k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt))
}

// MaxAuditPage bounds one AuditLog page.
const MaxAuditPage = 1000

// Audit is an administrative action's audit record before it is written. The broker
// core attaches it to the action's context (WithAudit), and the catalog method that
// performs the action writes it in the action's own transaction, as its first write: an
// action that fails leaves no record, and none succeeds without one.
type Audit struct {
	// Principal acted; Action is what it did ("topic.create", "acl.delete", ...).
	Principal string
	Action    string
	// Resource is what it acted on.
	ResourceType string
	Resource     string
	// Details are the action's arguments worth keeping (configs set, offsets,...).
	Details map[string]any
}

// AuditRecord is an Audit as stored: with its ID (growing) and the database clock.
type AuditRecord struct {
	ID   int64
	Time time.Time
	Audit
}

type auditKey struct{}

// WithAudit attaches the audit record of the administrative action ctx will perform.
// It rides the context, not the signatures, so that every administrative method keeps
// the signature its many callers use; the backends write it in the transaction.
func WithAudit(ctx context.Context, a Audit) context.Context {
	return context.WithValue(ctx, auditKey{}, &a)
}

// AuditOf returns the audit record attached to ctx, if any.
func AuditOf(ctx context.Context) (*Audit, bool) {
	a, ok := ctx.Value(auditKey{}).(*Audit)
	return a, ok
}

// BindingColumns lays a binding out as the acls table's text columns, in the order
// principal, host, resource_type, resource_name, pattern_type, operation, permission.
func BindingColumns(b acl.Binding) [7]string {
	return [7]string{b.Principal, b.Host, b.Resource.String(), b.Name, b.Pattern.String(), b.Operation.String(), b.Permission.String()}
}

// ScanBinding reads the columns BindingColumns wrote.
func ScanBinding(cols [7]string) (acl.Binding, error) {
	b := acl.Binding{Principal: cols[0], Host: cols[1], Name: cols[3]}
	var err1, err2, err3, err4 error
	b.Resource, err1 = acl.ParseResourceType(cols[2])
	b.Pattern, err2 = acl.ParsePatternType(cols[4])
	b.Operation, err3 = acl.ParseOperation(cols[5])
	b.Permission, err4 = acl.ParsePermission(cols[6])
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return acl.Binding{}, fmt.Errorf("stored ACL: %w", err)
	}
	return b, nil
}
