package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/strata-io/strata/client"
)

// maxBatchBytes keeps one produce request well under the server's body limit (16 MiB by
// default) whatever --batch says.
const maxBatchBytes = 4 << 20

func produceCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("produce", "strata produce TOPIC [--file F] [--batch 500] [--value-only] [--key-field NAME]",
		`Reads JSON lines from stdin (or --file) and produces them to TOPIC in batches.
Each line is a record object {"key","value","headers","partition","timestamp"} (only
"value" is required; null is a tombstone), or with --value-only the value itself.
Batches are sent one after the other, so records keep their order. 429 and 503 answers
are retried as the server's Retry-After says.`)
	sf := addServerFlags(c)
	file := c.fs.String("file", "-", "read from this `file` instead of stdin (-)")
	batch := c.fs.Int("batch", 500, "records per request")
	valueOnly := c.fs.Bool("value-only", false, "each line is the record's value, not a record object")
	keyField := c.fs.String("key-field", "", "take a record's key from this top-level `field` of its (JSON object) value when it has no key")
	retries := c.fs.Int("retries", 20, "how many times to retry one batch answered 429 or 503")
	progress := c.fs.Duration("progress", 10*time.Second, "`interval` between progress lines on stderr when it is not a terminal (0: none); on a terminal the line is redrawn every second")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		topic, err := oneName(c.name, args)
		if err != nil {
			return err
		}
		if *batch < 1 || *batch > 10000 {
			return usagef(c.name, "--batch %d: want between 1 and 10000 records per request", *batch)
		}
		if *retries < 0 {
			return usagef(c.name, "--retries %d: want 0 or more", *retries)
		}
		if *progress < 0 {
			return usagef(c.name, "--progress %s: want a positive interval, or 0 for no progress lines", *progress)
		}
		cl, err := sf.client(c.name, client.WithRetries(*retries, 200*time.Millisecond))
		if err != nil {
			return err
		}
		in := e.stdin
		if *file != "-" {
			f, err := os.Open(*file)
			if err != nil {
				return usagef(c.name, "--file: %v", err)
			}
			defer f.Close()
			in = f
		}
		p := &producer{
			cl: cl, topic: topic, batch: *batch, valueOnly: *valueOnly, keyField: *keyField,
			timeout: sf.timeout, stderr: e.stderr, tty: e.stderrTTY, every: *progress,
		}
		return p.run(ctx, in)
	}
}

// producer sends a stream of JSON lines.
type producer struct {
	cl        *client.Client
	topic     string
	batch     int
	valueOnly bool
	keyField  string
	keyFormat string
	timeout   time.Duration

	stderr io.Writer
	tty    bool
	every  time.Duration

	sent      int
	start     time.Time
	lastShown time.Time
	shownTTY  bool
}

func (p *producer) run(ctx context.Context, in io.Reader) error {
	// Knowing the topic first turns a typo into one clear error rather than one per
	// batch, and tells how --key-field must render keys.
	tctx, cancel := context.WithTimeout(ctx, p.timeout)
	t, err := p.cl.Topic(tctx, p.topic)
	cancel()
	if err != nil {
		return err
	}
	p.keyFormat = t.Configs["key.format"]
	if p.keyFormat == "" {
		p.keyFormat = "string"
	}

	p.start = time.Now()
	p.lastShown = p.start
	br := bufio.NewReaderSize(in, 1<<20)
	var recs []client.Record
	var size, firstLine, lineNo int
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, p.timeout+time.Minute) // retries included
		_, err := p.cl.Produce(ctx, p.topic, recs)
		cancel()
		if err != nil {
			p.endProgress()
			return fmt.Errorf("lines %d-%d were not produced (%d records before them were): %w", firstLine, lineNo, p.sent, err)
		}
		p.sent += len(recs)
		recs, size = recs[:0], 0
		p.showProgress(false)
		return nil
	}
	for {
		line, rerr := br.ReadBytes('\n')
		if len(line) > 0 {
			lineNo++
			line = bytes.TrimSpace(line)
			if len(line) > 0 {
				r, err := p.parseLine(line)
				if err != nil {
					p.endProgress()
					return fmt.Errorf("line %d: %w (%d records before it were produced)", lineNo, err, p.sent)
				}
				if len(recs) == 0 {
					firstLine = lineNo
				}
				recs = append(recs, r)
				size += len(line)
				if len(recs) >= p.batch || size >= maxBatchBytes {
					if err := flush(); err != nil {
						return err
					}
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			p.endProgress()
			return fmt.Errorf("read input after line %d: %w", lineNo, rerr)
		}
		if ctx.Err() != nil {
			p.endProgress()
			return fmt.Errorf("interrupted after %d records (line %d)", p.sent, lineNo)
		}
	}
	if err := flush(); err != nil {
		return err
	}
	p.showProgress(true)
	return nil
}

// lineRecord is a record object as read from a line.
type lineRecord struct {
	Key       json.RawMessage `json:"key"`
	Value     json.RawMessage `json:"value"`
	Headers   json.RawMessage `json:"headers"`
	Partition *int32          `json:"partition"`
	Timestamp json.RawMessage `json:"timestamp"`
}

func (p *producer) parseLine(line []byte) (client.Record, error) {
	var r client.Record
	if len(line) == 0 {
		return r, errors.New("empty line")
	}
	if p.valueOnly {
		if !json.Valid(line) {
			return r, errors.New("not valid JSON: with --value-only each line must be one JSON value")
		}
		r.Value = json.RawMessage(bytes.Clone(line))
	} else {
		if line[0] != '{' {
			return r, errors.New(`not a record object: each line must look like {"key":...,"value":...}; use --value-only to send each line as the value`)
		}
		var lr lineRecord
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&lr); err != nil {
			return r, fmt.Errorf("%v: a record object has only key, value, headers, partition and timestamp; use --value-only to send each line as the value", err)
		}
		if lr.Value == nil {
			return r, errors.New(`no "value": give "value":null for a tombstone, or use --value-only to send each line as the value`)
		}
		if string(lr.Value) != "null" {
			r.Value = lr.Value
		}
		if lr.Key != nil && string(lr.Key) != "null" {
			r.Key = lr.Key
		}
		r.Partition = lr.Partition
		if lr.Partition != nil && *lr.Partition < 0 {
			return r, fmt.Errorf("partition %d: want 0 or more, or leave it out to let the server choose", *lr.Partition)
		}
		var err error
		if r.Headers, err = parseHeaders(lr.Headers); err != nil {
			return r, err
		}
		if r.Timestamp, err = parseTimestamp(lr.Timestamp); err != nil {
			return r, err
		}
	}
	if r.Key == nil && p.keyField != "" {
		k, err := p.keyFrom(r.Value)
		if err != nil {
			return r, err
		}
		r.Key = k
	}
	return r, nil
}

// keyFrom takes --key-field from a JSON object value and renders it for the topic's
// key.format: a "string" key takes a JSON string (other JSON values by their text), a
// "json" key any JSON, a "binary" key base64.
func (p *producer) keyFrom(value json.RawMessage) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if len(value) == 0 || value[0] != '{' || json.Unmarshal(value, &obj) != nil {
		return nil, fmt.Errorf("--key-field %s: the value is not a JSON object", p.keyField)
	}
	raw, ok := obj[p.keyField]
	if !ok || string(raw) == "null" {
		return nil, nil // a null key, as the record would have without the flag
	}
	text := []byte(raw)
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("--key-field %s: %w", p.keyField, err)
		}
		text = []byte(s)
	}
	switch p.keyFormat {
	case "json":
		return raw, nil
	case "binary":
		return client.Binary(text), nil
	default:
		return client.String(string(text)), nil
	}
}

func parseHeaders(raw json.RawMessage) ([]client.Header, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '{' {
		var m map[string]*string
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf(`headers: want {"name":"value",...} or [{"key":"name","value":"value"},...]: %v`, err)
		}
		hs := make([]client.Header, 0, len(m))
		for _, k := range sortedKeys(m) {
			h := client.Header{Key: k}
			if v := m[k]; v != nil {
				h.Value = []byte(*v)
			}
			hs = append(hs, h)
		}
		return hs, nil
	}
	var hs []client.Header
	if err := json.Unmarshal(raw, &hs); err != nil {
		return nil, fmt.Errorf(`headers: want {"name":"value",...} or [{"key":"name","value":"value"},...]: %v`, err)
	}
	return hs, nil
}

// parseTimestamp reads unix milliseconds or an RFC 3339 string.
func parseTimestamp(raw json.RawMessage) (time.Time, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("timestamp %s: want unix milliseconds or an RFC 3339 time such as 2026-01-02T15:04:05Z", raw)
		}
		return t, nil
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp %s: want unix milliseconds or an RFC 3339 time such as 2026-01-02T15:04:05Z", raw)
	}
	return time.UnixMilli(ms), nil
}

// showProgress prints records/s: redrawn in place every second on a terminal, a line
// every --progress otherwise, and a summary at the end.
func (p *producer) showProgress(final bool) {
	now := time.Now()
	elapsed := now.Sub(p.start)
	rate := float64(p.sent) / max(elapsed.Seconds(), 1e-3)
	if final {
		p.endProgress()
		fmt.Fprintf(p.stderr, "produced %d %s to %s in %s (%.0f records/s)\n", p.sent, plural(p.sent, "record"), p.topic, elapsed.Round(time.Millisecond), rate)
		return
	}
	switch {
	case p.tty && now.Sub(p.lastShown) >= time.Second:
		fmt.Fprintf(p.stderr, "\r%d records, %.0f records/s ", p.sent, rate)
		p.shownTTY = true
	case !p.tty && p.every > 0 && now.Sub(p.lastShown) >= p.every:
		fmt.Fprintf(p.stderr, "%d records, %.0f records/s\n", p.sent, rate)
	default:
		return
	}
	p.lastShown = now
}

// endProgress ends a line being redrawn, so what follows starts on its own line.
func (p *producer) endProgress() {
	if p.shownTTY {
		fmt.Fprintln(p.stderr)
		p.shownTTY = false
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
