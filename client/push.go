package client

import (
	"context"
	"net/http"

	v1 "github.com/strata-io/strata/api/v1"
)

// Push subscriptions (issue 36): a share group whose records the server's push role
// hands to a webhook or an AWS Lambda function.

// Push error codes the server answers with; branch with HasCode.
const (
	CodePushNotFound         = v1.CodePushNotFound
	CodePushTargetNotAllowed = v1.CodePushTargetNotAllowed
)

// PushSubscriptionRequest creates or replaces a push subscription.
type PushSubscriptionRequest = v1.PushSubscriptionRequest

// PushRetry is a push subscription's retry policy.
type PushRetry = v1.PushRetry

// PushSubscription is a share group's push subscription; Secret is set only in the
// answer that created it.
type PushSubscription = v1.PushSubscription

// PutPush creates or replaces group's push subscription. The signing secret is in
// the answer (Secret) only when it created the subscription.
func (c *Client) PutPush(ctx context.Context, group string, req PushSubscriptionRequest) (PushSubscription, error) {
	var out PushSubscription
	err := c.do(ctx, "put push subscription of share group "+group, http.MethodPut, nil, req, &out, "v1", "share-groups", group, "push")
	return out, err
}

// Push describes group's push subscription (never its secret).
func (c *Client) Push(ctx context.Context, group string) (PushSubscription, error) {
	var out PushSubscription
	err := c.do(ctx, "describe push subscription of share group "+group, http.MethodGet, nil, nil, &out, "v1", "share-groups", group, "push")
	return out, err
}

// DeletePush deletes group's push subscription; the share group stays.
func (c *Client) DeletePush(ctx context.Context, group string) error {
	return c.do(ctx, "delete push subscription of share group "+group, http.MethodDelete, nil, nil, nil, "v1", "share-groups", group, "push")
}

// PausePush pauses group's push subscription.
func (c *Client) PausePush(ctx context.Context, group string) (PushSubscription, error) {
	var out PushSubscription
	err := c.do(ctx, "pause push subscription of share group "+group, http.MethodPost, nil, nil, &out, "v1", "share-groups", group, "push:pause")
	return out, err
}

// ResumePush resumes group's push subscription, clearing its last error.
func (c *Client) ResumePush(ctx context.Context, group string) (PushSubscription, error) {
	var out PushSubscription
	err := c.do(ctx, "resume push subscription of share group "+group, http.MethodPost, nil, nil, &out, "v1", "share-groups", group, "push:resume")
	return out, err
}

// RotatePushSecret gives group's push subscription a new signing secret and answers
// it (shown this once).
func (c *Client) RotatePushSecret(ctx context.Context, group string) (string, error) {
	var out v1.PushSecret
	err := c.do(ctx, "rotate push secret of share group "+group, http.MethodPost, nil, nil, &out, "v1", "share-groups", group, "push:rotate-secret")
	return out.Secret, err
}
