package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/strata-io/strata/client"
)

// The share-group verbs (share consume|describe|reset): queues on the log.

func shareVerbs() []verb {
	return []verb{
		{"share list", shareListCommand},
		{"share consume", shareConsumeCommand},
		{"share describe", shareDescribeCommand},
		{"share reset", shareResetCommand},
	}
}

// shareLine is one record as share consume prints it.
type shareLine struct {
	Topic         string          `json:"topic"`
	Partition     int32           `json:"partition"`
	Offset        int64           `json:"offset"`
	DeliveryCount int             `json:"delivery_count"`
	Timestamp     int64           `json:"timestamp"`
	Key           json.RawMessage `json:"key"`
	Value         json.RawMessage `json:"value"`
	Headers       any             `json:"headers"`
}

// errShareMax releases the records acquired past --max.
var errShareMax = errors.New("past --max")

func shareConsumeCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("share consume", "strata share consume GROUP --topic T [--topic T2 ...] [--max N] [--release]",
		`Joins a share group and prints the records it acquires as JSON lines on stdout:
{"topic","partition","offset","delivery_count","timestamp","key","value","headers"}.
Each record printed is accepted (with --release: released, to be delivered again), so
any number of share consume processes divide the records between them, each record
going to one. Runs until interrupted or --max; records acquired but not printed are
released on the way out.`)
	sf := addServerFlags(c)
	var topics stringList
	c.fs.Var(&topics, "topic", "a `topic` to acquire records of (repeat for several)")
	maxRecs := c.fs.Int64("max", 0, "stop after printing this many records (0: no limit)")
	release := c.fs.Bool("release", false, "release each record printed instead of accepting it (a look that leaves the queue as it was, but for delivery counts)")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		group, err := oneGroup(c.name, args)
		if err != nil {
			return err
		}
		if len(topics.vals) == 0 {
			return usagef(c.name, "--topic is required")
		}
		if *maxRecs < 0 {
			return usagef(c.name, "--max %d: want 0 (no limit) or more", *maxRecs)
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		per := 100
		if *maxRecs > 0 {
			per = int(min(*maxRecs, 100))
		}
		sc, err := client.NewShareConsumer(cl, client.ShareConsumerConfig{Group: group, Topics: topics.vals, MaxRecords: per, Wait: 2 * time.Second})
		if err != nil {
			return usagef(c.name, "%v", err)
		}
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		enc := json.NewEncoder(e.stdout)
		var mu sync.Mutex
		var printed int64
		var werr error
		err = sc.Run(ctx, func(_ context.Context, r client.ShareRecord) error {
			mu.Lock()
			defer mu.Unlock()
			if werr != nil || *maxRecs > 0 && printed >= *maxRecs {
				return errShareMax
			}
			line := shareLine{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, DeliveryCount: r.DeliveryCount,
				Timestamp: time.Time(r.Timestamp).UnixMilli(), Key: r.Key, Value: r.Value, Headers: r.Headers}
			if werr = enc.Encode(line); werr != nil {
				stop()
				return werr
			}
			printed++
			if *maxRecs > 0 && printed >= *maxRecs {
				stop() // the rest of this acquisition is released
			}
			if *release {
				return errShareMax
			}
			return nil
		})
		if err != nil {
			return err
		}
		return werr
	}
}

func shareListCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("share list", "strata share list [--json]", "Lists the share groups with their state and live member count.")
	sf := addServerFlags(c)
	asJSON := c.fs.Bool("json", false, "print one JSON object per share group instead of a table")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q", args[0])
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		gs, err := cl.ListShareGroups(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			for _, g := range gs {
				if err := enc.Encode(g); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSTATE\tMEMBERS")
		for _, g := range gs {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", g.Name, g.State, g.Members)
		}
		return tw.Flush()
	}
}

func shareDescribeCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("share describe", "strata share describe GROUP [--json]",
		"Shows a share group's live members with their subscriptions, and per share-partition\nthe start offset (everything below it is done), the records in flight by state\n(available, acquired, acknowledged, archived, dead-letter pending) and the lag; and\nthe running total of records copied to the group's dead-letter topic.")
	sf := addServerFlags(c)
	asJSON := c.fs.Bool("json", false, "print one JSON object instead of text")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		name, err := oneGroup(c.name, args)
		if err != nil {
			return err
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		g, err := cl.DescribeShareGroup(ctx, name)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(g)
		}
		fmt.Fprintf(e.stdout, "Share group:   %s\nEpoch:         %d\nDead-lettered: %d\n\n", g.Name, g.Epoch, g.DeadLettered)
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER\tEPOCH\tTOPICS")
		for _, m := range g.Members {
			fmt.Fprintf(tw, "%s\t%d\t%v\n", m.MemberID, m.MemberEpoch, m.Topics)
		}
		if len(g.Members) == 0 {
			fmt.Fprintln(tw, "(no live members)")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout)
		tw = tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTART\tLAG\tAVAILABLE\tACQUIRED\tACKNOWLEDGED\tARCHIVED\tDLQ_PENDING")
		for _, p := range g.Partitions {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", p.Topic, p.Partition, p.StartOffset, p.Lag, p.Available, p.Acquired, p.Acknowledged, p.Archived, p.DeadLetterPending)
		}
		return tw.Flush()
	}
}

func shareResetCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("share reset", "strata share reset GROUP --topic T --to earliest|latest|OFFSET|TIME [--partition P ...] [--create]",
		"Moves a share group's start offsets of one topic — to the log start, to the end, to an\noffset, or to the first record at or after an RFC 3339 time — dropping what was in\nflight there. Only while the group has no live members. A group that does not exist\nis refused, unless --create positions it before its first member.")
	sf := addServerFlags(c)
	rf := addResetFlags(c, "the `topic` whose start offsets move", "create the share group when it does not exist yet")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		name, err := oneGroup(c.name, args)
		if err != nil {
			return err
		}
		r, err := rf.request(c.name)
		if err != nil {
			return err
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		offs, err := cl.ResetShareOffsets(ctx, name, r)
		if client.HasCode(err, "group_not_found") {
			return fmt.Errorf("%w (--create makes it, positioned for its first member)", err)
		}
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTART OFFSET")
		for _, o := range offs {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", o.Topic, o.Partition, o.Offset)
		}
		return tw.Flush()
	}
}
