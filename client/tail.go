package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
)

// TailOptions tune Tail beyond its defaults.
type TailOptions struct {
	// Base64 asks for keys and values as base64 of the stored bytes.
	Base64 bool
	// Isolation is the stream's (FetchOptions.Isolation): the server's read_committed
	// when empty.
	Isolation Isolation
	// MinBackoff and MaxBackoff bound the wait between reconnects (defaults 100ms, 5s);
	// the server's SSE "retry" field or Retry-After takes precedence.
	MinBackoff, MaxBackoff time.Duration
	// IdleTimeout reconnects a stream that has sent nothing, not even a heartbeat, for
	// this long: a connection that died without a FIN (a load balancer dropped it) reads
	// nothing forever otherwise. The server sends heartbeats every 15s by default.
	// Default 60s; negative disables it.
	IdleTimeout time.Duration
	// OnRetry, when set, is told why the stream broke and how long Tail waits before it
	// reconnects, e.g. to log it. It must not block.
	OnRetry func(err error, wait time.Duration)
}

// Tail follows one partition from offset over Server-Sent Events, calling fn for every
// record in offset order, each exactly once. When the stream breaks it reconnects with
// Last-Event-ID (the last offset delivered) and backs off while the server is
// unreachable or answers 429/5xx. It returns fn's error as is when fn fails, ctx's error
// when ctx ends, and an *Error when the server refuses the tail (unknown topic, offset
// out of range, ...).
func (c *Client) Tail(ctx context.Context, topic string, partition int32, offset int64, fn func(Record) error) error {
	return c.TailWith(ctx, topic, partition, offset, TailOptions{}, fn)
}

// TailWith is Tail with options.
func (c *Client) TailWith(ctx context.Context, topic string, partition int32, offset int64, o TailOptions, fn func(Record) error) error {
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 60 * time.Second
	}
	t := &tail{c: c, topic: topic, partition: partition, next: offset, lastID: "", opts: o, fn: fn}
	backoff := o.MinBackoff
	for {
		progressed, err := t.stream(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fnErr *callbackError
		if errors.As(err, &fnErr) {
			return fnErr.err
		}
		var e *Error
		if errors.As(err, &e) && e.Status < 500 && e.Status != http.StatusTooManyRequests {
			return fmt.Errorf("tail %s/%d at %d: %w", topic, partition, t.next, err)
		}
		if progressed {
			backoff = o.MinBackoff
		}
		wait := backoff
		if t.retry > 0 {
			wait = t.retry
		}
		if e != nil && e.RetryAfter > 0 {
			wait = e.RetryAfter
		}
		if o.OnRetry != nil {
			o.OnRetry(err, wait)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return err
		}
		backoff = min(backoff*2, o.MaxBackoff)
	}
}

// callbackError marks fn's own error, so Tail returns it unchanged.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

type tail struct {
	c         *Client
	topic     string
	partition int32
	next      int64  // the next offset to deliver
	lastID    string // the last event id seen, for Last-Event-ID
	retry     time.Duration
	opts      TailOptions
	fn        func(Record) error
}

// stream runs one connection until it breaks; progressed says whether it delivered
// anything (a healthy stream resets the backoff).
func (t *tail) stream(ctx context.Context) (progressed bool, err error) {
	p := strconv.Itoa(int(t.partition))
	u, err := t.c.endpoint(fetchQuery(FetchOptions{Offset: t.next, Base64: t.opts.Base64, Isolation: t.opts.Isolation}), "v1", "topics", t.topic, "partitions", p, "records")
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := t.c.newRequest(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if t.lastID != "" {
		req.Header.Set("Last-Event-ID", t.lastID)
	}
	resp, err := t.c.hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return false, parseError(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return false, &Error{Status: resp.StatusCode, Detail: fmt.Sprintf("tail answered with %q, not text/event-stream", resp.Header.Get("Content-Type"))}
	}
	var body io.Reader = resp.Body
	if t.opts.IdleTimeout > 0 {
		w := &idleWatch{r: resp.Body, d: t.opts.IdleTimeout}
		w.t = time.AfterFunc(w.d, func() { cancel(errIdle) })
		defer w.t.Stop()
		body = w
	}
	err = readEvents(body, func(ev event) error {
		if ev.retry > 0 {
			t.retry = ev.retry
		}
		switch ev.name {
		case "", "record", "records", "message":
		case "error":
			var pr v1.Problem
			if json.Unmarshal(ev.data, &pr) != nil {
				return &Error{Status: http.StatusBadGateway, Detail: "tail error event: " + string(ev.data)}
			}
			return problemError(pr, 0)
		default:
			return nil // heartbeats and kinds this client does not know
		}
		if len(bytes.TrimSpace(ev.data)) == 0 {
			return nil
		}
		recs, err := decodeEventRecords(ev.data)
		if err != nil {
			return fmt.Errorf("tail: decode event: %w", err)
		}
		for _, w := range recs {
			r, err := fetchedRecord(w, t.partition, t.opts.Base64)
			if err != nil {
				return fmt.Errorf("tail: decode event: %w", err)
			}
			// A resumed stream may repeat what was delivered: whatever the server
			// makes of Last-Event-ID, offsets below next were already handed over.
			if r.Offset < t.next {
				continue
			}
			if err := t.fn(r); err != nil {
				return &callbackError{err}
			}
			t.next = r.Offset + 1
			progressed = true
		}
		if ev.id != "" {
			t.lastID = ev.id
		} else if progressed {
			t.lastID = strconv.FormatInt(t.next-1, 10)
		}
		return nil
	})
	if err == nil {
		err = io.ErrUnexpectedEOF // the server ended the stream: resume
	}
	if errors.Is(context.Cause(ctx), errIdle) {
		err = errIdle
	}
	return progressed, err
}

// errIdle ends a stream that went silent for longer than TailOptions.IdleTimeout.
var errIdle = errors.New("tail: stream idle, reconnecting")

// idleWatch re-arms its timer whenever the stream delivers bytes.
type idleWatch struct {
	r io.Reader
	d time.Duration
	t *time.Timer
}

func (w *idleWatch) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.t.Reset(w.d)
	}
	return n, err
}

// decodeEventRecords reads an event's data: one record object, an array of them, or an
// object with a "records" array.
func decodeEventRecords(data []byte) ([]v1.Record, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var rs []v1.Record
		err := json.Unmarshal(data, &rs)
		return rs, err
	}
	var probe v1.FetchResponse
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, err
	}
	if probe.Records != nil {
		return probe.Records, nil
	}
	var r v1.Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	return []v1.Record{r}, nil
}

// event is one Server-Sent Event.
type event struct {
	id    string
	name  string
	data  []byte
	retry time.Duration
}

// maxEventLine bounds one SSE line: a record can be a few MiB once rendered as JSON.
const maxEventLine = 32 << 20

// readEvents parses an SSE stream (the WHATWG event-stream format) and calls fn per
// event until the stream ends (nil) or fails or fn fails (that error).
func readEvents(r io.Reader, fn func(event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var ev event
	var data bytes.Buffer
	hasData := false
	for sc.Scan() {
		line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		if len(line) == 0 {
			if hasData || ev.id != "" || ev.retry > 0 {
				ev.data = bytes.Clone(bytes.TrimSuffix(data.Bytes(), []byte("\n")))
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev, hasData = event{}, false
			data.Reset()
			continue
		}
		if line[0] == ':' {
			continue // comment: a keep-alive
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			data.Write(value)
			data.WriteByte('\n')
			hasData = true
		case "event":
			ev.name = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.id = string(value)
			}
		case "retry":
			if ms, err := strconv.ParseInt(string(value), 10, 64); err == nil && ms >= 0 {
				ev.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	return sc.Err()
}
