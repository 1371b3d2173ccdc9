package v1

// Push subscriptions (issue 36): a share group whose records the push role hands to a
// webhook (an HTTPS URL) or an AWS Lambda function, retried, throttled and paused by
// the answers (README.md "Push delivery").

// PushSubscriptionRequest is PUT /v1/share-groups/{group}/push: create or replace the
// group's push subscription. Exactly one of url and lambda_arn.
type PushSubscriptionRequest struct {
	Topics    []string `json:"topics"`
	URL       string   `json:"url,omitempty"`
	LambdaARN string   `json:"lambda_arn,omitempty"`
	// BatchSize is the most records per call (1 to 1000; 0: 10).
	BatchSize int `json:"batch_size,omitempty"`
	// LingerMs is how long a call waits to fill its batch (0: 100).
	LingerMs int64 `json:"linger_ms,omitempty"`
	// Concurrency is the calls in flight per subscription (1 to 64; 0: 8).
	Concurrency int `json:"concurrency,omitempty"`
	// TimeoutMs bounds each call (100 to 900000; 0: 10000).
	TimeoutMs int64      `json:"timeout_ms,omitempty"`
	Retry     *PushRetry `json:"retry,omitempty"`
}

// PushRetry is the retry policy of calls that get no answer (a 5xx, a connection
// error, a timeout): backoff from min to max, and how many in a row pause.
type PushRetry struct {
	MinBackoffMs int64 `json:"min_backoff_ms,omitempty"`
	MaxBackoffMs int64 `json:"max_backoff_ms,omitempty"`
	PauseAfter   int   `json:"pause_after,omitempty"`
}

// PushSubscription is GET /v1/share-groups/{group}/push, and the answer to a PUT, which
// carries the signing secret when it created the subscription (shown this once).
type PushSubscription struct {
	Group       string    `json:"group"`
	Topics      []string  `json:"topics"`
	URL         string    `json:"url,omitempty"`
	LambdaARN   string    `json:"lambda_arn,omitempty"`
	BatchSize   int       `json:"batch_size"`
	LingerMs    int64     `json:"linger_ms"`
	Concurrency int       `json:"concurrency"`
	TimeoutMs   int64     `json:"timeout_ms"`
	Retry       PushRetry `json:"retry"`
	// Principal is who created it: the push role acquires as this principal.
	Principal string `json:"principal"`
	// State is "active" or "paused"; LastError says why it paused.
	State     string `json:"state"`
	LastError string `json:"last_error,omitempty"`
	// Secret is the signing secret, only in the answer that created it.
	Secret    string `json:"secret,omitempty"`
	CreatedMs int64  `json:"created_ms"`
	UpdatedMs int64  `json:"updated_ms"`
}

// PushSecret answers POST /v1/share-groups/{group}/push:rotate-secret: the new signing
// secret, shown this once.
type PushSecret struct {
	Secret string `json:"secret"`
}
