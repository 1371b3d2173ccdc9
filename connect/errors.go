package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/segment"
)

// Error handling (Kafka Connect's errors.* configs, KIP-298/610/779), applied the same
// way at every stage a record passes: a retriable failure is retried within
// errors.retry.timeout; then, with errors.tolerance=all, the record is skipped —
// logged when errors.log.enable, and sent to errors.deadletterqueue.topic.name with its
// context in __connect.errors.* headers — and the task carries on; with none, the task
// fails with a trace saying where and why.

// The stages, as Kafka Connect names them in the stage header.
const (
	stagePoll           = "TASK_POLL"
	stageKeyConverter   = "KEY_CONVERTER"
	stageValueConverter = "VALUE_CONVERTER"
	stageTransform      = "TRANSFORMATION"
	stagePut            = "TASK_PUT"
	stageProduce        = "KAFKA_PRODUCE"
)

// The dead-letter context headers.
const (
	hdrTopic     = "__connect.errors.topic"
	hdrPartition = "__connect.errors.partition"
	hdrOffset    = "__connect.errors.offset"
	hdrConnector = "__connect.errors.connector.name"
	hdrTask      = "__connect.errors.task.id"
	hdrStage     = "__connect.errors.stage"
	hdrClass     = "__connect.errors.class.name"
	hdrExClass   = "__connect.errors.exception.class.name"
	hdrExMessage = "__connect.errors.exception.message"
	hdrExTrace   = "__connect.errors.exception.stacktrace"
)

// errorPolicy is a task's error handling, from its config.
type errorPolicy struct {
	tolerateAll   bool
	retryTimeout  time.Duration // <0: forever
	retryDelayMax time.Duration
	logErrors     bool
	logMessages   bool
	dlq           string
	dlqHeaders    bool
	connector     string
	task          int32
	log           *slog.Logger
}

func newErrorPolicy(g getter, connector string, task int32, log *slog.Logger) errorPolicy {
	rt := g.int64(cfgRetryTimeout)
	p := errorPolicy{
		tolerateAll:   g.str(cfgTolerance) == "all",
		retryTimeout:  time.Duration(rt) * time.Millisecond,
		retryDelayMax: time.Duration(g.int64(cfgRetryDelayMax)) * time.Millisecond,
		logErrors:     g.bool(cfgLogEnable),
		logMessages:   g.bool(cfgLogMessages),
		dlq:           g.str(cfgDLQTopic),
		dlqHeaders:    g.bool(cfgDLQHeaders),
		connector:     connector,
		task:          task,
		log:           log,
	}
	if rt < 0 {
		p.retryTimeout = -1
	}
	return p
}

// failure is one record's failure at a stage, with what the dead-letter record needs.
type failure struct {
	stage     string
	class     string // the class at the stage (converter, transform, connector)
	err       error
	topic     string
	partition int32
	offset    int64 // -1: none (source records)
	key       []byte
	value     []byte
	headers   []segment.Header
}

// failedError is a failure the policy does not tolerate: the task fails with it. Its
// message — the task's status trace — names the record by topic, partition and offset,
// and keeps nothing of its bytes out of the cause's words (scrubRecord).
type failedError struct{ f failure }

// content is what the failing record carried.
func (f failure) content() [][]byte {
	out := [][]byte{f.key, f.value}
	for _, h := range f.headers {
		out = append(out, []byte(h.Key), h.Value)
	}
	return out
}

// hasRecord says whether the failure is a record's (whose bytes its words may quote).
func (f failure) hasRecord() bool {
	return f.key != nil || f.value != nil || len(f.headers) > 0 || f.offset >= 0
}

// cause is the failure's words, scrubbed of the record's bytes.
func (f failure) cause(msg string) string {
	if !f.hasRecord() {
		return msg
	}
	return scrubRecord(msg, f.content()...)
}

func (e *failedError) Error() string {
	f := e.f
	where := fmt.Sprintf("stage %s", f.stage)
	if f.class != "" {
		where += " (" + f.class + ")"
	}
	if f.topic != "" {
		where += fmt.Sprintf(", topic %s partition %d", f.topic, f.partition)
		if f.offset >= 0 {
			where += fmt.Sprintf(" offset %d", f.offset)
		}
	}
	return fmt.Sprintf("Tolerance exceeded in error handler (errors.tolerance=none): %s: %s", where, f.cause(f.err.Error()))
}

func (e *failedError) Unwrap() error { return e.f.err }

// tolerate applies the policy to f: the dead-letter record to send with the task's next
// commit (nil: none), or the error that fails the task.
func (p *errorPolicy) tolerate(f failure) (*broker.Record, error) {
	if !p.tolerateAll {
		return nil, &failedError{f: f}
	}
	if p.logErrors {
		attrs := []any{"connector", p.connector, "task", p.task, "stage", f.stage, "class", f.class, "topic", f.topic,
			"partition", f.partition, "offset", f.offset, "err", f.err}
		if p.logMessages {
			attrs = append(attrs, "key", string(f.key), "value", string(f.value))
		}
		p.log.Warn("record failed; skipped (errors.tolerance=all)", attrs...)
	}
	if p.dlq == "" {
		return nil, nil
	}
	rec := &broker.Record{Topic: p.dlq, Partition: -1, Key: f.key, Value: f.value, Timestamp: -1,
		Headers: append([]segment.Header(nil), f.headers...)}
	if p.dlqHeaders {
		h := func(k, v string) { rec.Headers = append(rec.Headers, segment.Header{Key: k, Value: []byte(v)}) }
		h(hdrTopic, f.topic)
		h(hdrPartition, strconv.Itoa(int(f.partition)))
		if f.offset >= 0 {
			h(hdrOffset, strconv.FormatInt(f.offset, 10))
		}
		h(hdrConnector, p.connector)
		h(hdrTask, strconv.Itoa(int(p.task)))
		h(hdrStage, f.stage)
		h(hdrClass, f.class)
		h(hdrExClass, fmt.Sprintf("%T", errors.Unwrap(f.err)))
		h(hdrExMessage, f.err.Error())
		h(hdrExTrace, errorChain(f.err))
	}
	return rec, nil
}

// errorChain lists an error and its causes, one per line: the nearest thing Go has to a
// stack trace of a failure. The causes of a record's failure are scrubbed of its bytes
// (its own message is, by failedError).
func errorChain(err error) string {
	var (
		s   string
		rec *failure
	)
	for i, e := 0, err; e != nil; i, e = i+1, errors.Unwrap(e) {
		msg := e.Error()
		if rec != nil {
			msg = rec.cause(msg)
		}
		if i == 0 {
			s = fmt.Sprintf("%T: %s", e, msg)
		} else {
			s += fmt.Sprintf("\n\tcaused by %T: %s", e, msg)
		}
		if fe, ok := e.(*failedError); ok && rec == nil {
			rec = &fe.f
		}
	}
	return s
}

// retriable reports whether err may pass if tried again: a task's RetriableError, or a
// core refusal that says a retry helps.
func retriable(err error) bool {
	var re *RetriableError
	var be *broker.Error
	return errors.As(err, &re) || (errors.As(err, &be) && be.Retriable() && be.Code != broker.CodeCommitOutcomeUnknown)
}

// retry runs op until it succeeds, fails for good, ctx ends, or retriable failures have
// lasted errors.retry.timeout (forever when negative; with 0, once). Backoff doubles
// from 100ms up to errors.retry.delay.max.ms, jittered.
func (p *errorPolicy) retry(ctx context.Context, op func() error) error {
	start := time.Now()
	delay := 100 * time.Millisecond
	for {
		err := op()
		if err == nil || !retriable(err) {
			return err
		}
		if p.retryTimeout >= 0 && time.Since(start)+delay > p.retryTimeout {
			return err
		}
		if ctxwait.Sleep(ctx, delay/2+rand.N(delay/2+1)) != nil {
			return ctx.Err()
		}
		delay = min(2*delay, max(p.retryDelayMax, 100*time.Millisecond))
	}
}
