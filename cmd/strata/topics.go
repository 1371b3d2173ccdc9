package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/strata-io/strata/client"
)

// DefaultServer is where the CLI verbs look for a server: what `strata dev` listens on.
const DefaultServer = "http://127.0.0.1:8080"

// serverFlags are the global flags of every verb that talks to a server: persistent
// flags of the root, so they go before or after the verb.
type serverFlags struct {
	server  string
	apiKey  string
	timeout time.Duration
	fs      *pflag.FlagSet
}

// register defines the flags on the root's persistent set.
func (s *serverFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&s.server, "server", DefaultServer, "the Strata server's base `URL`")
	fs.StringVar(&s.apiKey, "api-key", "", "API `key` sent as a bearer token, for servers that require one")
	fs.DurationVar(&s.timeout, "timeout", 30*time.Second, "how long one request may take before it is abandoned")
	fs.VisitAll(func(f *pflag.Flag) {
		_ = fs.SetAnnotation(f.Name, sharedAnnotation, []string{"true"})
		f.Value = hinted{f.Value, "want a duration such as 50ms, 2s or 1m30s"}
		if f.Value.Type() != "duration" {
			f.Value = f.Value.(hinted).Value
		}
	})
	s.fs = fs
}

// flags are the global flags, for help.
func (s *serverFlags) flags() *pflag.FlagSet { return s.fs }

// addServerFlags makes c a verb that talks to a server: it takes the global flags,
// whose values it finds in the answer when it runs.
func addServerFlags(c *command) *serverFlags {
	c.server = &serverFlags{}
	return c.server
}

func (s *serverFlags) client(cmd string, extra ...client.Option) (*client.Client, error) {
	u, err := url.Parse(s.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef(cmd, "--server %q: want the server's base URL, like %s (flag --server or env STRATA_SERVER)", s.server, DefaultServer)
	}
	if s.timeout <= 0 {
		return nil, usagef(cmd, "--timeout %s: want a positive duration such as 30s", s.timeout)
	}
	opts := []client.Option{client.WithUserAgent("strata-cli/" + strings.Fields(versionString())[0])}
	if s.apiKey != "" {
		opts = append(opts, client.WithAPIKey(s.apiKey))
	}
	return client.New(s.server, append(opts, extra...)...), nil
}

// oneName checks that a verb got exactly the one topic name it needs.
func oneName(cmd string, args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", usagef(cmd, "missing the topic name: strata %s NAME", cmd)
	case 1:
		return args[0], nil
	default:
		return "", usagef(cmd, "one topic name expected, got %d arguments (%s); flags may go before or after the name", len(args), strings.Join(args, " "))
	}
}

func topicsCreateCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("topics create", "strata topics create NAME [--partitions N] [--config KEY=VALUE ...]",
		"Creates a topic. Configs are Kafka-style topic configs (retention.ms, cleanup.policy,\nkey.format, value.format, ...); unset ones take their defaults.")
	sf := addServerFlags(c)
	partitions := c.fs.Int("partitions", 1, "number of `partitions` (can grow later, never shrink)")
	var configs stringList
	c.fs.Var(&configs, "config", "topic config as `KEY=VALUE`; repeat for several")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		name, err := oneName(c.name, args)
		if err != nil {
			return err
		}
		if *partitions < 1 || *partitions > 10000 {
			return usagef(c.name, "--partitions %d: want between 1 and 10000", *partitions)
		}
		cfg, err := keyValues(configs.vals, "config")
		if err != nil {
			return usagef(c.name, "%v", err)
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		t, err := cl.CreateTopic(ctx, name, int32(*partitions), cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "created topic %s with %d partitions\n", t.Name, t.Partitions)
		return nil
	}
}

func topicsListCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("topics list", "strata topics list [--json]", "Lists the topics and their partition counts.")
	sf := addServerFlags(c)
	asJSON := c.fs.Bool("json", false, "print one JSON object per topic instead of a table")
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
		ts, err := cl.ListTopics(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			for _, t := range ts {
				if err := enc.Encode(t); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tPARTITIONS")
		for _, t := range ts {
			fmt.Fprintf(tw, "%s\t%d\n", t.Name, t.Partitions)
		}
		return tw.Flush()
	}
}

func topicsDescribeCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("topics describe", "strata topics describe NAME [--json]",
		"Shows a topic's configs and, per partition, its log start offset and high watermark.")
	sf := addServerFlags(c)
	asJSON := c.fs.Bool("json", false, "print one JSON object instead of text")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		name, err := oneName(c.name, args)
		if err != nil {
			return err
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		t, err := cl.Topic(ctx, name)
		if err != nil {
			return err
		}
		parts, err := cl.Partitions(ctx, name)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(struct {
				client.Topic
				PartitionStates []client.Partition `json:"partition_states"`
			}{t, parts})
		}
		fmt.Fprintf(e.stdout, "Topic:      %s\nPartitions: %d\n", t.Name, t.Partitions)
		if !t.CreatedAt.IsZero() {
			fmt.Fprintf(e.stdout, "Created:    %s\n", t.CreatedAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(e.stdout, "Configs:")
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		shown := 0
		for _, k := range sortedKeys(t.Configs) {
			fmt.Fprintf(tw, "  %s\t%s\n", k, t.Configs[k])
			shown++
		}
		for _, k := range sortedKeys(t.EffectiveConfigs) {
			if _, set := t.Configs[k]; !set {
				fmt.Fprintf(tw, "  %s\t%s\t(default)\n", k, t.EffectiveConfigs[k])
				shown++
			}
		}
		if shown == 0 {
			fmt.Fprintln(tw, "  (all defaults)")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout)
		tw = tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "PARTITION\tLOG START\tHIGH WATERMARK\tRECORDS\tBYTES\t")
		for _, p := range parts {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t\n", p.Partition, p.LogStartOffset, p.HighWatermark, p.HighWatermark-p.LogStartOffset, formatBytes(p.Bytes))
		}
		return tw.Flush()
	}
}

func topicsDeleteCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("topics delete", "strata topics delete NAME",
		"Deletes a topic. Its data becomes unreadable at once and is removed by the compactor;\na topic created later under the same name starts empty.")
	sf := addServerFlags(c)
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		name, err := oneName(c.name, args)
		if err != nil {
			return err
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		if err := cl.DeleteTopic(ctx, name); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "deleted topic %s\n", name)
		return nil
	}
}

func topicsAlterCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("topics alter", "strata topics alter NAME [--partitions N] [--config KEY=VALUE ...] [--delete-config KEY ...]",
		"Grows a topic's partition count and sets or removes configs, as one change, and says what\nchanged. Keyed records of existing keys may move partition when the count grows.")
	sf := addServerFlags(c)
	partitions := c.fs.Int("partitions", 0, "new partition `count`, more than the current one (0: unchanged)")
	var configs, deletes stringList
	c.fs.Var(&configs, "config", "set a topic config, `KEY=VALUE`; repeat for several")
	c.fs.Var(&deletes, "delete-config", "remove an explicit config, back to its default: `KEY`; repeat for several")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		name, err := oneName(c.name, args)
		if err != nil {
			return err
		}
		if *partitions < 0 || *partitions > 10000 {
			return usagef(c.name, "--partitions %d: want between 1 and 10000 (or 0 to leave it)", *partitions)
		}
		cfg, err := keyValues(configs.vals, "config")
		if err != nil {
			return usagef(c.name, "%v", err)
		}
		for _, k := range deletes.vals {
			if _, both := cfg[k]; both {
				return usagef(c.name, "%s is both set (--config) and removed (--delete-config): choose one", k)
			}
		}
		if *partitions == 0 && len(cfg) == 0 && len(deletes.vals) == 0 {
			return usagef(c.name, "nothing to change: give --partitions, --config or --delete-config")
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		before, err := cl.Topic(ctx, name)
		if err != nil {
			return err
		}
		if *partitions != 0 && int32(*partitions) <= before.Partitions {
			return fmt.Errorf("--partitions %d: topic %s has %d partitions, and partitions only grow: ask for more than %d", *partitions, name, before.Partitions, before.Partitions)
		}
		after, err := cl.AlterTopic(ctx, name, client.TopicAlter{Partitions: int32(*partitions), Configs: cfg, DeleteConfigs: deletes.vals})
		if err != nil {
			return err
		}
		if after.EffectiveConfigs == nil {
			// The answer to a change may leave out the defaults: read them.
			if t, err := cl.Topic(ctx, name); err == nil {
				after = t
			}
		}
		writeTopicChanges(e.stdout, before, after)
		return nil
	}
}

// writeTopicChanges says what an alter changed: the partition count and each config
// whose value changed, defaults marked.
func writeTopicChanges(w io.Writer, before, after client.Topic) {
	var lines [][2]string
	if after.Partitions != before.Partitions {
		lines = append(lines, [2]string{"partitions", fmt.Sprintf("%d -> %d", before.Partitions, after.Partitions)})
	}
	show := func(t client.Topic, k string) string {
		if v, ok := t.Configs[k]; ok {
			return v
		}
		if v, ok := t.EffectiveConfigs[k]; ok {
			return v + " (default)"
		}
		return "(default)"
	}
	keys := map[string]bool{}
	for k := range before.Configs {
		keys[k] = true
	}
	for k := range after.Configs {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		if b, a := show(before, k), show(after, k); a != b {
			lines = append(lines, [2]string{k, b + " -> " + a})
		}
	}
	if len(lines) == 0 {
		fmt.Fprintf(w, "topic %s unchanged: it was as asked already\n", after.Name)
		return
	}
	fmt.Fprintf(w, "altered topic %s:\n", after.Name)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, l := range lines {
		fmt.Fprintf(tw, "  %s\t%s\n", l[0], l[1])
	}
	_ = tw.Flush()
}

func topicsUsageCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("topics usage", "strata topics usage NAME [--since 1h] [--json]",
		"Shows what a topic used over a window — bytes and records in and out, object-store "+
			"requests attributed by its byte share of each object, catalog commits, stored bytes — "+
			"per principal, and its estimated monthly cost at the server's list prices.")
	sf := addServerFlags(c)
	since := c.fs.String("since", "", "start of the window: a duration back from now (15m, 24h) or an RFC 3339 time (default: the server's, the last hour)")
	asJSON := c.fs.Bool("json", false, "print the server's JSON object instead of text")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		name, err := oneName(c.name, args)
		if err != nil {
			return err
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		u, err := cl.TopicUsage(ctx, name, *since)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(u)
		}
		fmt.Fprintf(e.stdout, "Topic:   %s\nWindow:  %s to %s\nStored:  %s\nCost:    $%.4f a month (PUTs $%.4f, GETs $%.4f, commits $%.4f, storage $%.4f)\n\n",
			u.Topic, u.Since.UTC().Format(time.RFC3339), u.Until.UTC().Format(time.RFC3339), formatBytes(u.StoredBytes),
			u.EstimatedCostUSD, u.Cost.PutUSD, u.Cost.GetUSD, u.Cost.CommitUSD, u.Cost.StorageUSD)
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "PRINCIPAL\tBYTES IN\tRECORDS IN\tBYTES OUT\tRECORDS OUT\tPUTS\tGETS\tCOMMITS\t")
		row := func(who string, bin, rin, bout, rout int64, puts, gets, commits float64) {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%.2f\t%.2f\t%.2f\t\n", who, formatBytes(bin), rin, formatBytes(bout), rout, puts, gets, commits)
		}
		for _, p := range u.Principals {
			who := p.Principal
			if who == "" {
				who = "(anonymous, GETs)"
			}
			row(who, p.BytesIn, p.RecordsIn, p.BytesOut, p.RecordsOut, p.PutRequests, p.GetRequests, p.CatalogCommits)
		}
		row("total", u.BytesIn, u.RecordsIn, u.BytesOut, u.RecordsOut, u.PutRequests, u.GetRequests, u.CatalogCommits)
		return tw.Flush()
	}
}
