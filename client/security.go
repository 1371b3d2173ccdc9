package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Security administration: API keys, ACL bindings and the audit log. Changing them
// needs alter on the cluster, reading them describe on the cluster.

// Key is an API key as the server describes it. Secret is set only in CreateKey's
// answer: the server keeps no copy.
type Key struct {
	ID          string     `json:"id"`
	Principal   string     `json:"principal"`
	Description string     `json:"description,omitempty"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
	Secret      string     `json:"secret,omitempty"`
}

// NewKey asks for a key.
type NewKey struct {
	Principal   string `json:"principal"`
	Description string `json:"description,omitempty"`
	// ExpiresIn, when set, is how long the key works.
	ExpiresIn time.Duration `json:"-"`
}

// CreateKey makes a key for k.Principal and answers it with its secret.
func (c *Client) CreateKey(ctx context.Context, k NewKey) (Key, error) {
	in := struct {
		NewKey
		ExpiresInMs *int64 `json:"expires_in_ms,omitempty"`
	}{NewKey: k}
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
type ACL struct {
	Principal    string `json:"principal"`
	Host         string `json:"host,omitempty"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name,omitempty"`
	PatternType  string `json:"pattern_type,omitempty"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission,omitempty"`
}

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
type AuditRecord struct {
	ID           int64          `json:"id"`
	Time         time.Time      `json:"time"`
	Principal    string         `json:"principal"`
	Action       string         `json:"action"`
	ResourceType string         `json:"resource_type"`
	Resource     string         `json:"resource"`
	Details      map[string]any `json:"details,omitempty"`
}

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
