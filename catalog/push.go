package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Push subscriptions (issue 36): a share group whose records the push role hands to a
// webhook or an AWS Lambda function. The catalog keeps, per share group, the
// subscription's settings, its state (active or paused, with the last error), the
// principal that created it (the role acquires as that principal), its signing secret
// and the role's lease with a fencing token, as the tables role's leases. The rules are
// the engine's (engine.Push), once for both backends; proved by catalogtest's "push"
// suite.
type PushSubscriptions interface {
	// PutPushSubscription creates group's subscription, or replaces its settings
	// (keeping its secret, state and lease), after s.Check (ErrInvalidPushSubscription).
	// A new subscription takes s.Secret (required then); a replaced one ignores it.
	// Answers the subscription as stored and whether it was created.
	PutPushSubscription(ctx context.Context, s PushSubscription) (PushSubscription, bool, error)
	// PushSubscription reads group's subscription: ErrPushNotFound when there is none.
	PushSubscription(ctx context.Context, group string) (PushSubscription, error)
	// PushSubscriptionList lists the subscriptions by group.
	PushSubscriptionList(ctx context.Context) ([]PushSubscription, error)
	// DeletePushSubscription deletes group's subscription: ErrPushNotFound when there
	// is none.
	DeletePushSubscription(ctx context.Context, group string) error
	// SetPushState pauses (with the reason) or resumes group's subscription:
	// ErrPushNotFound when there is none.
	SetPushState(ctx context.Context, group string, paused bool, lastError string) error
	// PausePush pauses group's subscription with lastError only if it was last
	// changed at seen (its Updated as read): the push role's pause, which must not undo
	// a resume or a change made since it read the subscription. ok false: it changed.
	PausePush(ctx context.Context, group string, seen time.Time, lastError string) (ok bool, err error)
	// RotatePushSecret replaces group's signing secret: ErrPushNotFound when there is
	// none.
	RotatePushSecret(ctx context.Context, group, secret string) error
	// AcquirePushLease leases group's delivery to holder for ttl, timed by the
	// database clock, as AcquireTableLease: a new holder gets a token one above the
	// last; ok false: someone else holds it, or there is no subscription.
	AcquirePushLease(ctx context.Context, group, holder string, ttl time.Duration) (l PushLease, ok bool, err error)
	// ReleasePushLease frees l, if it is still l.
	ReleasePushLease(ctx context.Context, l PushLease) error
}

var (
	// ErrPushNotFound: the share group has no push subscription.
	ErrPushNotFound = errors.New("push subscription not found")
	// ErrInvalidPushSubscription: settings no subscription may have.
	ErrInvalidPushSubscription = errors.New("invalid push subscription")
)

// Push subscription defaults and bounds.
const (
	DefaultPushBatchSize   = 10
	MaxPushBatchSize       = 1000
	DefaultPushLinger      = 100 * time.Millisecond
	MaxPushLinger          = 60 * time.Second
	DefaultPushConcurrency = 8
	MaxPushConcurrency     = 64
	DefaultPushTimeout     = 10 * time.Second
	MaxPushTimeout         = 15 * time.Minute
	// DefaultPushMaxBackoff caps the backoff after failed calls.
	DefaultPushMaxBackoff = 60 * time.Second
	// DefaultPushPauseAfter is how many failed calls in a row pause a subscription.
	DefaultPushPauseAfter = 100
)

// PushRetry is a subscription's retry policy for calls that fail without an answer
// (a 5xx, a connection error, a timeout): their records are released without using up
// a delivery attempt, the next call waits from MinBackoff doubling to MaxBackoff, and
// PauseAfter such failures in a row pause the subscription.
type PushRetry struct {
	MinBackoff time.Duration `json:"min_backoff"`
	MaxBackoff time.Duration `json:"max_backoff"`
	PauseAfter int           `json:"pause_after"`
}

// PushSubscription is a share group's push subscription.
type PushSubscription struct {
	Group  string   `json:"-"`
	Topics []string `json:"topics"`
	// URL (a webhook) or LambdaARN (an AWS Lambda function): exactly one.
	URL       string `json:"url,omitempty"`
	LambdaARN string `json:"lambda_arn,omitempty"`

	BatchSize   int           `json:"batch_size"`
	Linger      time.Duration `json:"linger"`
	Concurrency int           `json:"concurrency"`
	Timeout     time.Duration `json:"timeout"`
	Retry       PushRetry     `json:"retry"`

	// Principal is the principal that created the subscription: the role acquires as
	// it, so its ACLs are checked at each acquisition.
	Principal string `json:"principal"`

	// State, kept apart from the settings.
	Paused    bool      `json:"-"`
	LastError string    `json:"-"`
	Secret    string    `json:"-"`
	Created   time.Time `json:"-"`
	Updated   time.Time `json:"-"`
}

// WithDefaults fills the settings left zero with their defaults.
func (s PushSubscription) WithDefaults() PushSubscription {
	if s.BatchSize == 0 {
		s.BatchSize = DefaultPushBatchSize
	}
	if s.Linger == 0 {
		s.Linger = DefaultPushLinger
	}
	if s.Concurrency == 0 {
		s.Concurrency = DefaultPushConcurrency
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultPushTimeout
	}
	if s.Retry.MinBackoff == 0 {
		s.Retry.MinBackoff = 100 * time.Millisecond
	}
	if s.Retry.MaxBackoff == 0 {
		s.Retry.MaxBackoff = DefaultPushMaxBackoff
	}
	if s.Retry.PauseAfter == 0 {
		s.Retry.PauseAfter = DefaultPushPauseAfter
	}
	return s
}

// Check refuses settings no subscription may have (ErrInvalidPushSubscription, naming
// the field): defaults are applied first by WithDefaults, so zero is not out of range.
func (s PushSubscription) Check() error {
	bad := func(field, format string, args ...any) error {
		return &PushFieldError{Field: field, Err: fmt.Errorf("%w: %s: "+format, append([]any{ErrInvalidPushSubscription, field}, args...)...)}
	}
	switch {
	case s.Group == "":
		return bad("group", "required")
	case len(s.Topics) == 0:
		return bad("topics", "name at least one")
	case (s.URL == "") == (s.LambdaARN == ""):
		return bad("url", "give exactly one of url and lambda_arn")
	case s.BatchSize < 1 || s.BatchSize > MaxPushBatchSize:
		return bad("batch_size", "%d: want 1 to %d", s.BatchSize, MaxPushBatchSize)
	case s.Linger < 0 || s.Linger > MaxPushLinger:
		return bad("linger_ms", "%v: want 0 to %v", s.Linger, MaxPushLinger)
	case s.Concurrency < 1 || s.Concurrency > MaxPushConcurrency:
		return bad("concurrency", "%d: want 1 to %d", s.Concurrency, MaxPushConcurrency)
	case s.Timeout < 100*time.Millisecond || s.Timeout > MaxPushTimeout:
		return bad("timeout_ms", "%v: want 100ms to %v", s.Timeout, MaxPushTimeout)
	case s.Retry.MinBackoff < time.Millisecond || s.Retry.MaxBackoff < s.Retry.MinBackoff || s.Retry.MaxBackoff > time.Hour:
		return bad("retry", "backoff %v to %v: want 1ms ≤ min ≤ max ≤ 1h", s.Retry.MinBackoff, s.Retry.MaxBackoff)
	case s.Retry.PauseAfter < 1 || s.Retry.PauseAfter > 1_000_000:
		return bad("retry.pause_after", "%d: want 1 to 1000000", s.Retry.PauseAfter)
	}
	seen := map[string]bool{}
	for _, t := range s.Topics {
		if seen[t] || t == "" {
			return bad("topics", "%q empty or twice", t)
		}
		seen[t] = true
	}
	return nil
}

// PushFieldError is an ErrInvalidPushSubscription naming the field at fault.
type PushFieldError struct {
	Field string
	Err   error
}

func (e *PushFieldError) Error() string { return e.Err.Error() }
func (e *PushFieldError) Unwrap() error { return e.Err }

// PushLease is a push worker's claim on delivering one subscription.
type PushLease struct {
	Group  string
	Holder string
	// Token grows with every new holder.
	Token int64
}
