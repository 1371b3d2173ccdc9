package connect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/ctxwait"
)

// A task acts as its connector's principal, and the core authorizes every call it
// makes. A refusal may pass (an ACL granted a moment late reaches every node within the
// security poll interval), so the task tries again after a backoff that doubles up to
// refusalDelayMax — but it never spins: after maxRefusals refusals in a row it fails,
// with a status trace naming what was refused, and stays FAILED until it is restarted.

const (
	maxRefusals     = 5
	refusalDelay    = 250 * time.Millisecond
	refusalDelayMax = 5 * time.Second
)

// refusals counts a task's consecutive refusals of each call (what), so that the
// success of one call (a fetch) does not hide the refusals of another (a heartbeat).
type refusals map[string]*refusal

type refusal struct {
	n     int
	delay time.Duration
}

// refusedError fails a task whose principal was refused.
type refusedError struct {
	stage     string
	what      string
	principal string
	tries     int
	err       *broker.Error
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("stage %s (%s): the connector runs as %s, which the broker refused %d times in a row: %s (grant it, then restart the task)",
		e.stage, e.what, principalName(e.principal), e.tries, e.err.Message)
}

func (e *refusedError) Unwrap() error { return e.err }

func principalName(p string) string {
	if p == "" {
		return broker.AnonymousName
	}
	return p
}

// forbidden returns err as the core's authorization refusal, if it is one.
func forbidden(err error) (*broker.Error, bool) {
	var be *broker.Error
	if errors.As(err, &be) && be.Code == broker.CodeForbidden {
		return be, true
	}
	return nil, false
}

// refused handles a refusal of a call (what) at stage: it waits out the backoff and
// answers nil (try again), or, at the last refusal, the error that fails the task. A
// ctx that ends during the wait answers nil: the task is stopping anyway.
func (e *taskEnv) refused(ctx context.Context, stage, what string, be *broker.Error) error {
	if e.refusals == nil {
		e.refusals = refusals{}
	}
	r := e.refusals[what]
	if r == nil {
		r = &refusal{}
		e.refusals[what] = r
	}
	r.n++
	if r.n >= maxRefusals {
		return &refusedError{stage: stage, what: what, principal: e.who.Name, tries: r.n, err: be}
	}
	if r.delay == 0 {
		r.delay = refusalDelay
	}
	e.log.Warn("refused by the broker; trying again after a backoff", "stage", stage, "call", what, "runs_as", principalName(e.who.Name),
		"refusal", r.n, "of", maxRefusals, "delay", r.delay, "err", be.Message)
	_ = ctxwait.Sleep(ctx, r.delay)
	r.delay = min(2*r.delay, refusalDelayMax)
	return nil
}

// allowed resets the count of a call: it went through.
func (e *taskEnv) allowed(what string) { delete(e.refusals, what) }
