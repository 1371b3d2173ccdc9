package client

import (
	"context"
	"net/http"
	"net/url"

	v1 "github.com/strata-io/strata/api/v1"
)

// ScramUser is a user's SCRAM credentials (mechanisms and iteration counts only).
type ScramUser = v1.ScramUser

// ListScramUsers lists the users with SCRAM credentials (needs describe on the
// cluster).
func (c *Client) ListScramUsers(ctx context.Context) ([]ScramUser, error) {
	out := listOf[ScramUser]{field: "users"}
	err := c.do(ctx, "list SCRAM credentials", http.MethodGet, nil, nil, &out, "v1", "scram-credentials")
	return out.items, err
}

// SetScramCredential sets user's credential of mechanism (SCRAM-SHA-256 or
// SCRAM-SHA-512) from password, with iterations (0: the server's default). The server
// draws the salt and keeps only the derived keys; the user's connections logged in
// with the old credential are closed.
func (c *Client) SetScramCredential(ctx context.Context, user, mechanism, password string, iterations int32) (ScramUser, error) {
	var out ScramUser
	in := v1.SetScramCredentialRequest{Mechanism: mechanism, Password: password, Iterations: iterations}
	err := c.do(ctx, "set SCRAM credential of "+user, http.MethodPut, nil, in, &out, "v1", "scram-credentials", user)
	return out, err
}

// DeleteScramCredential deletes user's credential of mechanism; the connections it
// opened are closed.
func (c *Client) DeleteScramCredential(ctx context.Context, user, mechanism string) (ScramUser, error) {
	var out ScramUser
	err := c.do(ctx, "delete SCRAM credential of "+user, http.MethodDelete, url.Values{"mechanism": {mechanism}}, nil, &out,
		"v1", "scram-credentials", user)
	return out, err
}
