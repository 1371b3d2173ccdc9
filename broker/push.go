package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/push/egress"
)

// Push subscriptions (issue 36): a share group whose records the push role hands to a
// webhook or an AWS Lambda function. The rules of writing one are here: who may (alter
// on the group, and read on the group and each topic, since the role acquires as the
// principal that wrote it), which targets the node's egress policy allows, and the
// settings' ranges; the catalog keeps it (catalog.PushSubscriptions).

// PushStore keeps push subscriptions (both catalog backends).
type PushStore = catalog.PushSubscriptions

// PushRequest writes a push subscription.
type PushRequest struct {
	catalog.PushSubscription
}

// PushResult answers a write: the subscription as stored and, when it was created
// (or its secret rotated), the signing secret — shown this once.
type PushResult struct {
	Subscription catalog.PushSubscription
	Created      bool
	Secret       string
}

// lambdaARN is an AWS Lambda function's ARN, optionally with a version or alias.
var lambdaARN = regexp.MustCompile(`^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]{1,128})?$`)

func (b *Broker) checkPush() *Error {
	if e := b.checkShare(); e != nil {
		return e
	}
	if b.d.Push == nil {
		return newError(CodeRoleUnavailable, "this node keeps no push subscriptions")
	}
	return nil
}

func pushError(op string, err error, group string) *Error {
	var fe *catalog.PushFieldError
	switch {
	case errors.As(err, &fe):
		return newError(CodeInvalidParameter, "%s", strings.TrimPrefix(fe.Error(), catalog.ErrInvalidPushSubscription.Error()+": ")).with("field", fe.Field).cause(err)
	case errors.Is(err, catalog.ErrInvalidPushSubscription):
		return newError(CodeInvalidRequest, "push subscription of %q: invalid", group).cause(err)
	case errors.Is(err, catalog.ErrPushNotFound):
		return newError(CodePushNotFound, "share group %q has no push subscription", group).with("group", group).cause(err)
	}
	return shareError(op, err, group)
}

// newPushSecret makes a signing secret: 32 random bytes.
func newPushSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make a signing secret: %w", err)
	}
	return "whsec_" + hex.EncodeToString(b[:]), nil
}

// PutPush creates or replaces a share group's push subscription. Bad input (a target
// the egress policy refuses, settings out of range, unknown topics) changes nothing.
func (b *Broker) PutPush(ctx context.Context, who Principal, req PushRequest) (PushResult, error) {
	var out PushResult
	s := req.PushSubscription
	if e := b.checkPush(); e != nil {
		return out, e
	}
	if e := validGroup(s.Group); e != nil {
		return out, e
	}
	if e := b.authorize(ctx, who, acl.OpAlter, acl.Group(s.Group)); e != nil {
		return out, e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(s.Group)); e != nil {
		return out, e
	}
	s = s.WithDefaults()
	s.Principal, s.Secret = who.Name, ""
	if err := s.Check(); err != nil {
		return out, pushError("put push subscription", err, s.Group)
	}
	switch {
	case s.URL != "":
		if err := b.d.PushEgress.CheckURL(s.URL); err != nil {
			return out, newError(CodePushTargetNotAllowed, "url: %s", strings.TrimPrefix(err.Error(), egress.ErrNotAllowed.Error()+": ")).with("field", "url").cause(err)
		}
	case !lambdaARN.MatchString(s.LambdaARN):
		return out, newError(CodeInvalidParameter, "lambda_arn %q: want arn:aws:lambda:<region>:<account>:function:<name>", s.LambdaARN).with("field", "lambda_arn")
	}
	configs, err := b.d.Share.GroupConfigs(ctx, s.Group)
	if err != nil {
		return out, shareError("put push subscription", err, s.Group)
	}
	if e := pushLockRule(s.Group, s, configs); e != nil {
		return out, e
	}
	for _, t := range s.Topics {
		if e := b.authorize(ctx, who, acl.OpRead, acl.Topic(t)); e != nil {
			return out, e
		}
		if _, e := b.lookupTopic(ctx, t); e != nil {
			return out, e
		}
	}
	secret, err := newPushSecret()
	if err != nil {
		return out, AsError("put push subscription", err)
	}
	s.Secret = secret
	got, created, err := b.d.Push.PutPushSubscription(ctx, s)
	if err != nil {
		return out, pushError("put push subscription", err, s.Group)
	}
	out.Subscription, out.Created = got, created
	if created {
		out.Secret = got.Secret
	}
	out.Subscription.Secret = ""
	return out, nil
}

// PushLockRule is the detail "rule" of the refusal of a push subscription whose call
// could outlive its records' lock (pushLockRule).
const PushLockRule = "push_timeout_lock"

// pushLockRule refuses s when a call could outlive the lock on its records under the
// group's configs: a batch's first records are held through the linger and the call,
// and a lock that passes mid-call hands them to another member, delivered twice and
// acknowledged by neither. So timeout + linger must stay below
// share.record.lock.duration.ms (CodeInvalidConfig, rule PushLockRule).
func pushLockRule(group string, s catalog.PushSubscription, configs map[string]string) *Error {
	v, ok := configs[catalog.ShareLockDurationMs]
	if !ok {
		v = catalog.ShareGroupConfigNames[catalog.ShareLockDurationMs]
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil // ValidateShareGroupConfigs' to refuse
	}
	if lock := time.Duration(ms) * time.Millisecond; s.Timeout+s.Linger >= lock {
		return newError(CodeInvalidConfig, "group %q: a push call's timeout_ms (%d) plus linger_ms (%d) must be below %s (%d): a call longer than the records' lock hands them to another member mid-call",
			group, s.Timeout.Milliseconds(), s.Linger.Milliseconds(), catalog.ShareLockDurationMs, ms).
			with("config", catalog.ShareLockDurationMs).with("rule", PushLockRule)
	}
	return nil
}

// checkPushLock refuses group configs that would put the lock duration at or below
// the time a call of the group's push subscription may take (pushLockRule).
func (b *Broker) checkPushLock(ctx context.Context, group string, configs map[string]string) *Error {
	if b.d.Push == nil {
		return nil
	}
	s, err := b.d.Push.PushSubscription(ctx, group)
	if errors.Is(err, catalog.ErrPushNotFound) {
		return nil
	}
	if err != nil {
		return pushError("check push subscription", err, group)
	}
	return pushLockRule(group, s, configs)
}

// Push describes a share group's push subscription (describe on the group); the secret
// is never shown.
func (b *Broker) Push(ctx context.Context, who Principal, group string) (catalog.PushSubscription, error) {
	if e := b.checkPush(); e != nil {
		return catalog.PushSubscription{}, e
	}
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Group(group)); e != nil {
		return catalog.PushSubscription{}, e
	}
	s, err := b.d.Push.PushSubscription(ctx, group)
	if err != nil {
		return s, pushError("describe push subscription", err, group)
	}
	s.Secret = ""
	return s, nil
}

// DeletePush deletes a share group's push subscription (alter on the group); the
// share group and its state stay.
func (b *Broker) DeletePush(ctx context.Context, who Principal, group string) error {
	if e := b.checkPush(); e != nil {
		return e
	}
	if e := b.authorize(ctx, who, acl.OpAlter, acl.Group(group)); e != nil {
		return e
	}
	if err := b.d.Push.DeletePushSubscription(ctx, group); err != nil {
		return pushError("delete push subscription", err, group)
	}
	return nil
}

// SetPushPaused pauses or resumes a share group's push subscription (alter on the
// group); resuming clears the last error.
func (b *Broker) SetPushPaused(ctx context.Context, who Principal, group string, paused bool) error {
	if e := b.checkPush(); e != nil {
		return e
	}
	if e := b.authorize(ctx, who, acl.OpAlter, acl.Group(group)); e != nil {
		return e
	}
	reason := ""
	if paused {
		reason = "paused by " + who.name()
	}
	if err := b.d.Push.SetPushState(ctx, group, paused, reason); err != nil {
		return pushError("set push state", err, group)
	}
	return nil
}

// RotatePushSecret gives a share group's push subscription a new signing secret
// (alter on the group), answered this once; calls signed with the old one may still
// be in flight.
func (b *Broker) RotatePushSecret(ctx context.Context, who Principal, group string) (string, error) {
	if e := b.checkPush(); e != nil {
		return "", e
	}
	if e := b.authorize(ctx, who, acl.OpAlter, acl.Group(group)); e != nil {
		return "", e
	}
	secret, err := newPushSecret()
	if err != nil {
		return "", AsError("rotate push secret", err)
	}
	if err := b.d.Push.RotatePushSecret(ctx, group, secret); err != nil {
		return "", pushError("rotate push secret", err, group)
	}
	return secret, nil
}

// PushAckAcquisitions is ShareAckAcquisitions for the push role: with requeue, its
// releases give back the delivery they counted (catalog.ShareAck.Requeue) — a call
// that got no answer did not reach the function's decision.
func (b *Broker) PushAckAcquisitions(ctx context.Context, who Principal, group, member string, acks []ShareAcquisitionAck, requeue bool) error {
	return b.shareAckAcquisitions(ctx, who, group, member, acks, requeue)
}
