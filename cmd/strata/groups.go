package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strata-io/strata/client"
)

// The consumer-group verbs (groups list|describe|reset|delete); consume --group is in
// consume.go.

// oneGroup checks that a verb got exactly the one group name it needs.
func oneGroup(cmd string, args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", usagef(cmd, "missing the group name: strata %s GROUP", cmd)
	case 1:
		return args[0], nil
	default:
		return "", usagef(cmd, "one group name expected, got %d arguments (%s)", len(args), strings.Join(args, " "))
	}
}

func groupsListCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("groups list", "strata groups list [--json]", "Lists the consumer groups with their state and live member count.")
	sf := addServerFlags(c)
	asJSON := c.fs.Bool("json", false, "print one JSON object per group instead of a table")
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
		gs, err := cl.ListGroups(ctx)
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
		fmt.Fprintln(tw, "NAME\tSTATE\tMEMBERS\tASSIGNOR")
		for _, g := range gs {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", g.Name, g.State, g.Members, g.Assignor)
		}
		return tw.Flush()
	}
}

func formatTPs(tps []client.TopicPartitions) string {
	var parts []string
	for _, tp := range tps {
		ps := make([]string, len(tp.Partitions))
		for i, p := range tp.Partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, tp.Topic+":"+strings.Join(ps, ","))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func groupsDescribeCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("groups describe", "strata groups describe GROUP [--json]",
		"Shows a group's state, its members with their epochs and assignments (owned, being\nrevoked, waiting), and per partition the committed offset and lag.")
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
		g, err := cl.DescribeGroup(ctx, name)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(g)
		}
		fmt.Fprintf(e.stdout, "Group:     %s\nState:     %s\nAssignor:  %s\nEpoch:     %d\nTotal lag: %d\n\n", g.Name, g.State, g.Assignor, g.Epoch, g.TotalLag)
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER\tEPOCH\tSESSION\tASSIGNED\tREVOKING\tWAITING FOR")
		for _, m := range g.Members {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", m.MemberID, m.MemberEpoch, time.Duration(m.SessionTimeoutMs)*time.Millisecond,
				formatTPs(m.Assignment), formatTPs(m.Revoking), formatTPs(m.Pending))
		}
		if len(g.Members) == 0 {
			fmt.Fprintln(tw, "(no live members)")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout)
		tw = tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tHIGH WATERMARK\tLAG\tOWNER")
		for _, p := range g.Partitions {
			committed, owner := "-", p.Owner
			if p.CommittedOffset != nil {
				committed = strconv.FormatInt(*p.CommittedOffset, 10)
			}
			if owner == "" {
				owner = "-"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\n", p.Topic, p.Partition, committed, p.HighWatermark, p.Lag, owner)
		}
		return tw.Flush()
	}
}

func groupsDeleteCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("groups delete", "strata groups delete GROUP",
		"Deletes a group and its committed offsets. Refused while the group has live members.")
	sf := addServerFlags(c)
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
		if err := cl.DeleteGroup(ctx, name); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "deleted group %s\n", name)
		return nil
	}
}

// int32List is a repeatable integer flag.
type int32List struct{ vals []int32 }

func (l *int32List) String() string { return fmt.Sprint(l.vals) }

func (l *int32List) Type() string { return "partitions" }

func (l *int32List) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a partition number", s)
		}
		l.vals = append(l.vals, int32(n))
	}
	return nil
}

// resetFlags are the flags of a reset (groups reset and share reset take the same ones).
type resetFlags struct {
	topic, to *string
	parts     int32List
	create    *bool
}

func addResetFlags(c *command, topicHelp, createHelp string) *resetFlags {
	f := &resetFlags{
		topic: c.fs.String("topic", "", topicHelp),
		to:    c.fs.String("to", "", "`earliest`, latest, an offset, or an RFC 3339 time"),
	}
	c.fs.Var(&f.parts, "partition", "a partition `number` to reset (repeat or comma-separate; default all)")
	f.create = c.fs.Bool("create", false, createHelp)
	return f
}

// request is the reset the flags ask for.
func (f *resetFlags) request(cmd string) (client.OffsetReset, error) {
	r := client.OffsetReset{Topic: *f.topic, Partitions: f.parts.vals, Create: *f.create}
	if r.Topic == "" {
		return r, usagef(cmd, "--topic is required")
	}
	switch to := *f.to; to {
	case "":
		return r, usagef(cmd, "--to is required: earliest, latest, an offset or an RFC 3339 time")
	case "earliest", "beginning":
		r.To = "earliest"
	case "latest", "end":
		r.To = "latest"
	default:
		if n, err := strconv.ParseInt(to, 10, 64); err == nil && n >= 0 {
			r.To, r.Offset = "offset", n
		} else if t, err := time.Parse(time.RFC3339Nano, to); err == nil {
			r.To, r.Timestamp = "timestamp", t
		} else {
			return r, usagef(cmd, "--to %q: want earliest, latest, an offset (e.g. 42) or an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", to)
		}
	}
	return r, nil
}

func groupsResetCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("groups reset", "strata groups reset GROUP --topic T --to earliest|latest|OFFSET|TIME [--partition P ...] [--create]",
		"Moves a group's committed offsets of one topic: to the log start, to the end, to an\noffset, or to the first record at or after an RFC 3339 time. Only while the group\nhas no live members (stop its consumers first). A group that does not exist is\nrefused, unless --create positions it before its first consumer.")
	sf := addServerFlags(c)
	rf := addResetFlags(c, "the `topic` whose offsets move", "create the group when it does not exist yet (without it, a mistyped name is refused rather than made a new group)")
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
		offs, err := cl.ResetOffsets(ctx, name, r)
		if client.HasCode(err, "group_not_found") {
			return fmt.Errorf("%w (--create makes it, positioned for its first consumer)", err)
		}
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tOFFSET")
		for _, o := range offs {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", o.Topic, o.Partition, o.Offset)
		}
		return tw.Flush()
	}
}
