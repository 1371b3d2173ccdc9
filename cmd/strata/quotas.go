package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/strata-io/strata/client"
)

// The quota verbs (quotas list|set), over the client library. An entity is named as
// kafka-configs.sh names it: --user and/or --client-id, each a name or --user-default /
// --client-id-default; the user is a principal (User:NAME).

type quotaFlags struct {
	user, clientID               string
	userDefault, clientIDDefault bool
}

func addQuotaFlags(c *command) *quotaFlags {
	f := &quotaFlags{}
	c.fs.StringVar(&f.user, "user", "", "the user the quota applies to: a `principal`, User:NAME")
	c.fs.StringVar(&f.clientID, "client-id", "", "the client `id` the quota applies to")
	c.fs.BoolVar(&f.userDefault, "user-default", false, "the default user: every user no entity names")
	c.fs.BoolVar(&f.clientIDDefault, "client-id-default", false, "the default client id: every client id no entity names")
	return f
}

func (f *quotaFlags) entity(cmd string) (client.QuotaEntity, error) {
	e := client.QuotaEntity{User: f.user, ClientID: f.clientID}
	if f.userDefault {
		if e.User != "" {
			return e, usagef(cmd, "give --user or --user-default, not both")
		}
		e.User = "<default>"
	}
	if f.clientIDDefault {
		if e.ClientID != "" {
			return e, usagef(cmd, "give --client-id or --client-id-default, not both")
		}
		e.ClientID = "<default>"
	}
	return e, nil
}

func printQuotas(e *env, qs []client.Quota) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tCLIENT ID\tQUOTAS")
	for _, q := range qs {
		keys := make([]string, 0, len(q.Quotas))
		for k := range q.Quotas {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+"="+strconv.FormatFloat(q.Quotas[k], 'f', -1, 64))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", or(q.Entity.User, "-"), or(q.Entity.ClientID, "-"), strings.Join(parts, " "))
	}
	return tw.Flush()
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func quotasListCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("quotas list", "strata quotas list [--user User:NAME|--user-default] [--client-id ID|--client-id-default] [--json]",
		"Lists the entities with client quotas (all, or those with the user or client id given).\nNeeds describe-configs on the cluster.")
	sf := addServerFlags(c)
	f := addQuotaFlags(c)
	asJSON := c.fs.Bool("json", false, "print one JSON object per entity")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q", args[0])
		}
		ent, err := f.entity(c.name)
		if err != nil {
			return err
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		qs, err := cl.ListQuotas(ctx, ent.User, ent.ClientID)
		if err != nil {
			return err
		}
		if *asJSON {
			return encodeEach(e, qs)
		}
		return printQuotas(e, qs)
	}
}

func quotasSetCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("quotas set", "strata quotas set (--user User:NAME|--user-default) [--client-id ID|--client-id-default] --quota KEY=VALUE... [--remove KEY...]",
		"Sets (or with --remove, removes) quotas of one entity: producer_byte_rate and consumer_byte_rate\n"+
			"(bytes per second), request_percentage (handler time, percent of one thread),\n"+
			"controller_mutation_rate (partitions created or deleted per second), and per user alone\n"+
			"topic_count and connector_count. Each node enforces a rate divided by the live node\n"+
			"count. Needs alter-configs on the cluster. Example:\n"+
			"  strata quotas set --user User:alice --quota producer_byte_rate=1048576 --quota topic_count=50")
	sf := addServerFlags(c)
	f := addQuotaFlags(c)
	var set, remove stringList
	c.fs.Var(&set, "quota", "a quota as `KEY=VALUE`; repeat for several")
	c.fs.Var(&remove, "remove", "a quota `KEY` to remove; repeat for several")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q", args[0])
		}
		ent, err := f.entity(c.name)
		if err != nil {
			return err
		}
		if ent == (client.QuotaEntity{}) {
			return usagef(c.name, "name the entity: --user User:NAME, --client-id ID, or their defaults")
		}
		if len(set.vals) == 0 && len(remove.vals) == 0 {
			return usagef(c.name, "give --quota KEY=VALUE or --remove KEY")
		}
		quotas := map[string]*float64{}
		for _, kv := range set.vals {
			k, v, ok := strings.Cut(kv, "=")
			n, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				return usagef(c.name, "--quota %q: write KEY=NUMBER, e.g. producer_byte_rate=1048576", kv)
			}
			quotas[k] = &n
		}
		for _, k := range remove.vals {
			quotas[k] = nil
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		q, err := cl.SetQuotas(ctx, ent, quotas)
		if err != nil {
			return err
		}
		return printQuotas(e, []client.Quota{q})
	}
}
