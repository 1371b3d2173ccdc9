package v1

import "time"

// ACLBinding is one ACL binding: POST /v1/acls takes one and answers it as stored, GET
// lists them (ACLList), DELETE answers those deleted (ACLDeleted). In a request, Host
// defaults to *, PatternType to literal, Permission to allow, and the cluster's
// ResourceName may be left out.
type ACLBinding struct {
	Principal    string `json:"principal"`
	Host         string `json:"host,omitempty"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name,omitempty"`
	PatternType  string `json:"pattern_type,omitempty"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission,omitempty"`
}

// ACLList answers GET /v1/acls.
type ACLList struct {
	ACLs []ACLBinding `json:"acls"`
}

// ACLDeleted answers DELETE /v1/acls.
type ACLDeleted struct {
	Deleted []ACLBinding `json:"deleted"`
}

// Key is an API key as the server describes it. Secret is set only in the answer that
// creates the key: the server keeps no copy.
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

// KeyList answers GET /v1/keys.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// CreateKeyRequest is POST /v1/keys.
type CreateKeyRequest struct {
	Principal   string `json:"principal"`
	Description string `json:"description,omitempty"`
	// ExpiresAt (unix milliseconds or RFC 3339) or ExpiresInMs (from now): at most one.
	ExpiresAt   string `json:"expires_at,omitempty"`
	ExpiresInMs *int64 `json:"expires_in_ms,omitempty"`
}

// AuditRecord is one administrative action of the audit log.
type AuditRecord struct {
	ID           int64          `json:"id"`
	Time         time.Time      `json:"time"`
	Principal    string         `json:"principal"`
	Action       string         `json:"action"`
	ResourceType string         `json:"resource_type"`
	Resource     string         `json:"resource"`
	Details      map[string]any `json:"details,omitempty"`
}

// AuditPage answers GET /v1/audit?after=ID&limit=N: records after ID, oldest first;
// NextAfter continues.
type AuditPage struct {
	Records   []AuditRecord `json:"records"`
	NextAfter int64         `json:"next_after"`
}
