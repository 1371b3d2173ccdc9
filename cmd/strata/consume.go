package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	maxRecs := c.fs.Int64("max", 0, "stop after this many records in all (0: no limit)")
	follow := c.fs.Bool("follow", false, "keep waiting for new records (SSE tail per partition)")
	b64 := c.fs.Bool("base64", false, "print keys and values as base64 of their stored bytes")
	group := c.fs.String("group", "", "consume as a member of this consumer `group`: only the partitions it is assigned, from the group's committed offsets (--from applies where none), committing as it prints, until interrupted or --max")
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
			err := cs.cl.TailWith(ctx, cs.topic, p.Partition, starts[i], opts, func(r client.Record) error {
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
