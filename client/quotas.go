package client

import (
	"context"
	"net/http"
	"net/url"

	v1 "github.com/strata-io/strata/api/v1"
)

// Client quotas: byte rates, request share and mutation rate per user and client id,
// and the caps per principal. Reading them needs describe-configs on the cluster,
// changing them alter-configs.

// QuotaEntity is who a quota applies to: User ("User:alice" or "<default>"), ClientID
// (or "<default>"), or both.
type QuotaEntity = v1.QuotaEntity

// Quota is an entity with its quotas by key.
type Quota = v1.QuotaEntry

// ListQuotas lists the entities with quotas; a non-empty user or clientID narrows the
// list to entities with that part.
func (c *Client) ListQuotas(ctx context.Context, user, clientID string) ([]Quota, error) {
	q := url.Values{}
	if user != "" {
		q.Set("user", user)
	}
	if clientID != "" {
		q.Set("client_id", clientID)
	}
	out := listOf[Quota]{field: "quotas"}
	err := c.do(ctx, "list quotas", http.MethodGet, q, nil, &out, "v1", "quotas")
	return out.items, err
}

// SetQuotas sets the keys given on e (a nil value removes the key) and answers the
// entity's quotas as they now stand.
func (c *Client) SetQuotas(ctx context.Context, e QuotaEntity, quotas map[string]*float64) (Quota, error) {
	var out Quota
	err := c.do(ctx, "set quotas", http.MethodPut, nil, v1.PutQuotasRequest{Entity: e, Quotas: quotas}, &out, "v1", "quotas")
	return out, err
}
