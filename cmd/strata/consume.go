package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/strata-io/strata/client"
)

func consumeCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("consume", "strata consume TOPIC [--partition P|all] [--from beginning|end|OFFSET|TIME] [--max N] [--follow]",
		`Prints records as JSON lines on stdout: {"partition","offset","timestamp","key","value","headers"}.
Without --follow it reads up to each partition's high watermark as of the start and exits;
with --follow it tails every partition over Server-Sent Events until interrupted. It is a
plain reader: it never joins a group or commits offsets.`)
	sf := addServerFlags(c)
	partition := c.fs.String("partition", "all", "partition `number` to read, or all")
	from := c.fs.String("from", "beginning", "where to start in each partition: `beginning`, end, an offset, or an RFC 3339 time (2026-01-02T15:04:05Z)")
	maxRecs := c.fs.Int64("max", 0, "stop after this many records in all (0: no limit); with --group, what was printed is committed before the member leaves")
	follow := c.fs.Bool("follow", false, "keep waiting for new records (SSE tail per partition)")
	b64 := c.fs.Bool("base64", false, "print keys and values as base64 of their stored bytes")
	group := c.fs.String("group", "", "consume as a member of this consumer `group`: only the partitions it is assigned, from the group's committed offsets (--from applies where none), committing as it prints, until interrupted or --max; an unknown topic fails at once")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		topic, err := oneName(c.name, args)
		if err != nil {
			return err
		}
		var onlyPart int32 = -1
		if *partition != "all" {
			n, err := strconv.ParseInt(*partition, 10, 32)
			if err != nil || n < 0 {
				return usagef(c.name, "--partition %q: want a partition number (0, 1, ...) or all", *partition)
			}
			onlyPart = int32(n)
		}
		start, err := parseFrom(*from)
		if err != nil {
			return usagef(c.name, "%v", err)
		}
		if *maxRecs < 0 {
			return usagef(c.name, "--max %d: want 0 (no limit) or more", *maxRecs)
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		if *group != "" {
			return consumeGroup(ctx, e, c.name, cl, topic, *group, *partition, start, *maxRecs, *b64)
		}
		cs := &consumer{cl: cl, topic: topic, start: start, max: *maxRecs, base64: *b64, timeout: sf.timeout, stderr: e.stderr}
		return cs.run(ctx, e.stdout, onlyPart, *follow)
	}
}

// startAt is a parsed --from.
type startAt struct {
	kind   string // "beginning", "end", "offset", "time"
	offset int64
	time   time.Time
}

func parseFrom(s string) (startAt, error) {
	switch s {
	case "beginning", "earliest":
		return startAt{kind: "beginning"}, nil
	case "end", "latest":
		return startAt{kind: "end"}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return startAt{}, fmt.Errorf("--from %d: offsets start at 0", n)
		}
		return startAt{kind: "offset", offset: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return startAt{kind: "time", time: t}, nil
	}
	return startAt{}, fmt.Errorf("--from %q: want beginning, end, an offset (e.g. 42) or an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", s)
}

type consumer struct {
	cl      *client.Client
	topic   string
	start   startAt
	max     int64
	base64  bool
	timeout time.Duration
	stderr  io.Writer

	mu      sync.Mutex
	out     *bufio.Writer
	enc     *json.Encoder
	printed int64
}

// errEnough ends reading once --max records are printed.
var errEnough = errors.New("enough records")

func (cs *consumer) run(ctx context.Context, stdout io.Writer, only int32, follow bool) error {
	cs.out = bufio.NewWriterSize(stdout, 64<<10)
	cs.enc = json.NewEncoder(cs.out)
	defer cs.out.Flush()

	tctx, cancel := context.WithTimeout(ctx, cs.timeout)
	parts, err := cs.cl.Partitions(tctx, cs.topic)
	cancel()
	if err != nil {
		return err
	}
	if only >= 0 {
		if int(only) >= len(parts) {
			return fmt.Errorf("--partition %d: topic %s has partitions 0 to %d", only, cs.topic, len(parts)-1)
		}
		parts = []client.Partition{parts[only]}
	}
	starts := make([]int64, len(parts))
	for i, p := range parts {
		if starts[i], err = cs.startOffset(ctx, p); err != nil {
			return err
		}
		if err := cs.outOfRange(ctx, p, starts[i], follow); err != nil {
			return err
		}
	}
	if follow {
		return cs.follow(ctx, parts, starts)
	}
	for i, p := range parts {
		err := cs.readTo(ctx, p.Partition, starts[i], p.HighWatermark)
		if errors.Is(err, errEnough) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (cs *consumer) startOffset(ctx context.Context, p client.Partition) (int64, error) {
	switch cs.start.kind {
	case "beginning":
		return p.LogStartOffset, nil
	case "end":
		return p.HighWatermark, nil
	case "offset":
		return cs.start.offset, nil
	}
	ctx, cancel := context.WithTimeout(ctx, cs.timeout)
	defer cancel()
	return cs.cl.OffsetForTime(ctx, cs.topic, p.Partition, cs.start.time)
}

// outOfRange refuses a start outside what partition p holds, with the server's answer
// (416: the range it holds), before anything is printed: reading nothing and exiting 0
// would say the partition was read. With --follow a start beyond the end is waited
// for instead, and said to be on stderr.
func (cs *consumer) outOfRange(ctx context.Context, p client.Partition, start int64, follow bool) error {
	if start >= p.LogStartOffset && start <= p.HighWatermark {
		return nil
	}
	if follow && start > p.HighWatermark {
		fmt.Fprintf(cs.stderr, "strata consume: partition %d of %s ends at offset %d; waiting for offset %d\n", p.Partition, cs.topic, p.HighWatermark, start)
		return nil
	}
	fctx, cancel := context.WithTimeout(ctx, cs.timeout)
	defer cancel()
	_, err := cs.cl.Fetch(fctx, cs.topic, p.Partition, client.FetchOptions{Offset: start, MaxRecords: 1})
	if err == nil {
		// Records arrived in between: the range moved; read from there.
		return nil
	}
	return err
}

// print writes one record; it says errEnough once --max is reached.
func (cs *consumer) print(r client.Record, flush bool) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.max > 0 && cs.printed >= cs.max {
		return errEnough
	}
	if err := cs.enc.Encode(r); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	cs.printed++
	if flush {
		if err := cs.out.Flush(); err != nil {
			return fmt.Errorf("write record: %w", err)
		}
	}
	if cs.max > 0 && cs.printed >= cs.max {
		return errEnough
	}
	return nil
}

// readTo prints a partition's records from offset up to hw.
func (cs *consumer) readTo(ctx context.Context, partition int32, offset, hw int64) error {
	for offset < hw {
		fctx, cancel := context.WithTimeout(ctx, cs.timeout)
		res, err := cs.cl.Fetch(fctx, cs.topic, partition, client.FetchOptions{Offset: offset, Base64: cs.base64})
		cancel()
		if err != nil {
			return err
		}
		for _, r := range res.Records {
			if r.Offset >= hw {
				return nil
			}
			if err := cs.print(r, false); err != nil {
				return err
			}
		}
		if res.NextOffset <= offset {
			// No progress: the server has nothing more below hw for us (it moved on).
			return nil
		}
		offset = res.NextOffset
	}
	return nil
}

// follow tails every partition at once until ctx ends, --max is reached or a tail
// fails; the first failure stops the others.
func (cs *consumer) follow(ctx context.Context, parts []client.Partition, starts []int64) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := client.TailOptions{Base64: cs.base64, OnRetry: func(err error, wait time.Duration) {
				fmt.Fprintf(cs.stderr, "strata consume: partition %d: %v; reconnecting in %s\n", p.Partition, err, wait.Round(time.Millisecond))
			}}
			// A start beyond the end is waited for: the tail runs from the end, and
			// what comes before the start is not printed.
			from := min(starts[i], p.HighWatermark)
			err := cs.cl.TailWith(ctx, cs.topic, p.Partition, from, opts, func(r client.Record) error {
				if r.Offset < starts[i] {
					return nil
				}
				return cs.print(r, true)
			})
			if err != nil && ctx.Err() == nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	err := context.Cause(ctx)
	if errors.Is(err, errEnough) || errors.Is(err, context.Canceled) {
		return nil // --max reached, or interrupted: the normal ends of a tail
	}
	return err
}

// consumeGroup checks consume's flags for --group and runs a group member.
func consumeGroup(ctx context.Context, e *env, cmd string, cl *client.Client, topic, group, partition string, start startAt, max int64, b64 bool) error {
	if partition != "all" {
		return usagef(cmd, "--partition and --group do not mix: the group assigns the partitions")
	}
	g := &groupConsume{cl: cl, group: group, topic: topic, max: max, base64: b64, session: 10 * time.Second, stderr: e.stderr}
	switch start.kind {
	case "beginning":
		g.startAt = client.StartEarliest
	case "end":
		g.startAt = client.StartLatest
	default:
		return usagef(cmd, "--from with --group: beginning or end (where a partition without a committed offset starts); move committed offsets with 'strata groups reset'")
	}
	return g.run(ctx, e.stdout)
}

// groupConsume is consume --group: it joins the group and prints the records of the
// partitions the server assigns it, committing each batch as far as it was printed,
// until interrupted or --max records. A topic that does not exist ends it at once; a
// server it cannot reach is said on stderr, and retried until interrupted.
type groupConsume struct {
	cl      *client.Client
	group   string
	topic   string
	startAt string // client.StartEarliest or client.StartLatest
	max     int64
	base64  bool
	session time.Duration
	stderr  io.Writer

	mu       sync.Mutex
	out      *bufio.Writer
	enc      *json.Encoder
	printed  int64
	lastWarn string // the kind of failure last said on stderr, so each is said once
}

func (g *groupConsume) run(ctx context.Context, stdout io.Writer) error {
	g.out = bufio.NewWriterSize(stdout, 64<<10)
	g.enc = json.NewEncoder(g.out)
	// A person typed the topic's name: a typo fails now, with the server's words,
	// instead of joining a group that will never be assigned anything.
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := g.cl.Topic(tctx, g.topic)
	cancel()
	switch st := client.StatusOf(err); {
	case err == nil:
	case st == http.StatusNotFound, st == http.StatusUnauthorized, st == http.StatusForbidden:
		return err
	default:
		g.warn(err) // the consumer retries, and says it again if it changes
	}

	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	gc, err := client.NewConsumer(g.cl, client.ConsumerConfig{
		Group: g.group, Topics: []string{g.topic}, SessionTimeout: g.session, StartAt: g.startAt,
		ManualCommit: true, // each batch is committed as far as it was printed
		OnAssigned: func(_ context.Context, tps []client.TopicPartition) {
			g.say("", "strata consume: group %s: assigned %v\n", g.group, tps)
		},
		OnRevoked: func(_ context.Context, tps []client.TopicPartition) {
			g.say("", "strata consume: group %s: revoked %v\n", g.group, tps)
		},
		OnLost: func(tps []client.TopicPartition) {
			g.say("", "strata consume: group %s: lost %v (session timed out); joining again\n", g.group, tps)
		},
		OnError: func(err error) {
			if client.HasCode(err, "topic_not_found") {
				stop(err) // deleted since the check
				return
			}
			g.warn(err)
		},
	})
	if err != nil {
		return err
	}
	err = gc.Run(ctx, func(hctx context.Context, b client.Batch) error {
		next, done, err := g.print(b)
		if err != nil {
			return err
		}
		if next >= 0 {
			g.commit(hctx, gc, client.TopicPartition{Topic: b.Topic, Partition: b.Partition}, next)
		}
		if done {
			stop(errEnough)
		}
		return nil
	})
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errEnough):
		return nil // --max printed and committed; Run has left the group
	case client.HasCode(cause, "topic_not_found"):
		return cause
	}
	return err
}

// print writes a batch's records, up to --max in all, and answers the offset to commit
// (-1: nothing printed) and whether --max is reached.
func (g *groupConsume) print(b client.Batch) (next int64, done bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	next = -1
	for _, r := range b.Records {
		if g.max > 0 && g.printed >= g.max {
			break
		}
		if g.base64 {
			r = base64Record(r)
		}
		if err := g.enc.Encode(r); err != nil {
			return -1, false, fmt.Errorf("write record: %w", err)
		}
		g.printed++
		next = r.Offset + 1
	}
	if err := g.out.Flush(); err != nil {
		return -1, false, fmt.Errorf("write record: %w", err)
	}
	g.lastWarn = "" // progress: a new failure is worth saying again
	return next, g.max > 0 && g.printed >= g.max, nil
}

// commit commits what was printed. It outlives a stop (--max, an interrupt): records
// printed and not committed would be printed again by the next run.
func (g *groupConsume) commit(ctx context.Context, gc *client.Consumer, tp client.TopicPartition, next int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.session)
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := gc.Commit(ctx, map[client.TopicPartition]int64{tp: next})
		if err == nil {
			return
		}
		// Setting an offset is idempotent: a commit whose answer was lost may be sent
		// again. A refusal (fenced, not the owner) is final.
		if attempt == 5 || ctx.Err() != nil || (client.StatusOf(err) != 0 && !client.IsRetryable(err)) {
			g.say("", "strata consume: commit %s at %d: %v (the next run prints these records again)\n", tp, next, err)
			return
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}

// warn says on stderr what keeps the consumer from progress, once per kind of failure
// until it makes progress again.
func (g *groupConsume) warn(err error) {
	var ce *client.Error
	if !errors.As(err, &ce) {
		g.say("unreachable", "strata consume: cannot reach the server at %s (%v); retrying until interrupted\n", g.cl.BaseURL(), err)
		return
	}
	g.say(ce.Code+strconv.Itoa(ce.Status), "strata consume: group %s: %v; retrying until interrupted\n", g.group, err)
}

// say writes a line to stderr; a non-empty kind is said only when it differs from the
// last one said.
func (g *groupConsume) say(kind, format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if kind != "" {
		if kind == g.lastWarn {
			return
		}
		g.lastWarn = kind
	}
	fmt.Fprintf(g.stderr, format, args...)
}

// base64Record is r as --base64 shows it when the server was not asked for base64
// (a group consumer fetches in the topic's formats).
func base64Record(r client.Record) client.Record {
	if k, err := r.KeyBytes(); err == nil && r.Key != nil {
		r.Key, r.KeyEncoding = client.Binary(k), "base64"
	}
	if v, err := r.ValueBytes(); err == nil && r.Value != nil {
		r.Value, r.ValueEncoding = client.Binary(v), "base64"
	}
	return r
}
