package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
)

// Error is an error answer from the server, parsed from its application/problem+json
// body. Code is the API's stable machine-readable code (e.g. "topic_not_found"); Detail
// is the human explanation. An answer that is not problem+json (a proxy's error page)
// leaves Code empty and puts the start of the body in Detail.
type Error struct {
	Status int
	Code   string
	Title  string
	Detail string
	// Hint is the API's advice in its own terms (member_epoch, POST /v1/producers),
	// when the problem carries one.
	Hint string
	// RequestID is the X-Request-Id the server answered with: its log has the
	// request's error chain under it.
	RequestID string
	// RetryAfter is the server's Retry-After, zero when it sent none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	msg := e.Detail
	if msg == "" {
		msg = e.Title
	}
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code != "" {
		return fmt.Sprintf("%s (code %s, HTTP %d)", msg, e.Code, e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d)", msg, e.Status)
}

// Retryable says whether the same call may succeed later unchanged: 429 (back-pressure)
// and 503 (a dependency unavailable; by the API's contract nothing was done).
func (e *Error) Retryable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
}

// IsRetryable reports whether err is, or wraps, a retryable *Error.
func IsRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable()
}

// HasCode reports whether err is, or wraps, an *Error with the given code.
func HasCode(err error, code string) bool {
	var e *Error
	return code != "" && errors.As(err, &e) && e.Code == code
}

// StatusOf returns the HTTP status of an *Error in err's chain, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// problemError is a problem body as an *Error; status 0 takes the body's.
func problemError(p v1.Problem, status int) *Error {
	if status == 0 {
		status = p.Status
	}
	return &Error{Status: status, Code: p.Code, Title: p.Title, Detail: p.Detail, Hint: p.Hint, RequestID: p.RequestID}
}

// parseError turns an error answer into *Error. It never fails: whatever the body is,
// the status alone is an answer.
func parseError(resp *http.Response) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var p v1.Problem
	if (mt == v1.ContentTypeProblem || mt == v1.ContentTypeJSON) && json.Unmarshal(body, &p) == nil {
		e = problemError(p, resp.StatusCode)
	} else {
		e.Detail = strings.TrimSpace(string(body))
		if len(e.Detail) > 200 {
			e.Detail = e.Detail[:200] + "…"
		}
	}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		e.RetryAfter = d
	}
	return e
}

// parseRetryAfter reads either form RFC 9110 allows: delay-seconds or an HTTP-date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, 3600)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
