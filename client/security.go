package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
)

// Security administration: API keys, ACL bindings and the audit log. Changing them
// needs alter on the cluster, reading them describe on the cluster.

// Key is an API key as the server describes it. Secret is set only in CreateKey's
// answer: the server keeps no copy.
type Key = v1.Key

// NewKey asks for a key (v1.CreateKeyRequest, with the expiry as a duration).
type NewKey struct {
	Principal   string
	Description string
	// ExpiresIn, when set, is how long the key works.
	ExpiresIn time.Duration
}

// CreateKey makes a key for k.Principal and answers it with its secret.
func (c *Client) CreateKey(ctx context.Context, k NewKey) (Key, error) {
	in := v1.CreateKeyRequest{Principal: k.Principal, Description: k.Description}
	if k.ExpiresIn > 0 {
		ms := k.ExpiresIn.Milliseconds()
		in.ExpiresInMs = &ms
	}
	var out Key
	err := c.do(ctx, "create key", http.MethodPost, nil, in, &out, "v1", "keys")
	return out, err
}

// ListKeys lists the keys, revoked ones included.
func (c *Client) ListKeys(ctx context.Context) ([]Key, error) {
	out := listOf[Key]{field: "keys"}
	err := c.do(ctx, "list keys", http.MethodGet, nil, nil, &out, "v1", "keys")
	return out.items, err
}

// RevokeKey revokes a key: every node refuses it within a second and cuts what it has
// open.
func (c *Client) RevokeKey(ctx context.Context, id string) (Key, error) {
	var out Key
	err := c.do(ctx, "revoke key "+id, http.MethodDelete, nil, nil, &out, "v1", "keys", id)
	return out, err
}

// ACL is one ACL binding. Host "" is every host; PatternType "" is literal; Permission
// "" is allow.
type ACL = v1.ACLBinding

// ACLFilter selects bindings; empty fields select every value. PatternType "match"
// with a ResourceName selects the bindings that apply to that resource.
type ACLFilter struct {
	Principal, Host, ResourceType, ResourceName, PatternType, Operation, Permission string
}

func (f ACLFilter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"principal": f.Principal, "host": f.Host, "resource_type": f.ResourceType,
		"resource_name": f.ResourceName, "pattern_type": f.PatternType, "operation": f.Operation, "permission": f.Permission} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// ListACLs lists the bindings f selects.
func (c *Client) ListACLs(ctx context.Context, f ACLFilter) ([]ACL, error) {
	out := listOf[ACL]{field: "acls"}
	err := c.do(ctx, "list ACLs", http.MethodGet, f.query(), nil, &out, "v1", "acls")
	return out.items, err
}

// CreateACL stores a binding (one that exists changes nothing) and answers it as
// stored.
func (c *Client) CreateACL(ctx context.Context, a ACL) (ACL, error) {
	var out ACL
	err := c.do(ctx, "create ACL", http.MethodPost, nil, a, &out, "v1", "acls")
	return out, err
}

// DeleteACLs deletes the bindings f selects and answers them. An empty filter is
// refused by the server; ResourceType "any" selects every binding.
func (c *Client) DeleteACLs(ctx context.Context, f ACLFilter) ([]ACL, error) {
	out := listOf[ACL]{field: "deleted"}
	err := c.do(ctx, "delete ACLs", http.MethodDelete, f.query(), nil, &out, "v1", "acls")
	return out.items, err
}

// AuditRecord is one administrative action.
type AuditRecord = v1.AuditRecord

// AuditLog reads up to limit records (0: the server's default) with an id above
// after, oldest first; the next page starts after the last one's ID.
func (c *Client) AuditLog(ctx context.Context, after int64, limit int) ([]AuditRecord, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	out := listOf[AuditRecord]{field: "records"}
	err := c.do(ctx, "read the audit log", http.MethodGet, q, nil, &out, "v1", "audit")
	return out.items, err
}
