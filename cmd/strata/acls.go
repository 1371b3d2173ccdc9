package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/strata-io/strata/client"
)

// The ACL verbs (acls list|create|delete), self-contained over the client library.
// The resource is named as kafka-acls.sh names it: --topic, --group,
// --transactional-id or --cluster, literally or with --prefixed; --connector and
// --subject name Strata's own types (Kafka has none).

// aclFlags name a binding, or a filter of bindings.
type aclFlags struct {
	principal, host, operation        string
	topic, group, transactionalID     string
	connector                         string
	subject                           string
	cluster, prefixed, deny, matching bool
}

func addACLFlags(c *command, filter bool) *aclFlags {
	f := &aclFlags{}
	c.fs.StringVar(&f.principal, "principal", "", "the `principal`: User:NAME, or User:* for everyone")
	c.fs.StringVar(&f.host, "host", "", "the client `address` the binding applies to (default every host, *)")
	c.fs.StringVar(&f.operation, "operation", "", "`op`: all, read, write, create, delete, alter, describe, describe-configs, alter-configs (read, write, delete and alter imply describe; alter-configs implies describe-configs)")
	c.fs.StringVar(&f.topic, "topic", "", "a topic `name` (* for every topic; a prefix with --prefixed)")
	c.fs.StringVar(&f.group, "group", "", "a consumer group `name` (* for every group; a prefix with --prefixed)")
	c.fs.StringVar(&f.transactionalID, "transactional-id", "", "a transactional `id` (* for every one; a prefix with --prefixed)")
	c.fs.StringVar(&f.connector, "connector", "", "a connector `name` (* for every connector; a prefix with --prefixed): create, describe (config, status, offsets), alter (reconfigure, pause, resume, stop, restart, offsets), delete")
	c.fs.StringVar(&f.subject, "subject", "", "a schema registry subject `name` (* for every subject; a prefix with --prefixed): read, write (register), delete, alter-configs and describe-configs (its compatibility level and mode)")
	c.fs.BoolVar(&f.cluster, "cluster", false, "the cluster: creating topics and connectors (create), managing keys and ACLs (alter, describe), broker configs and timestamps far ahead (alter-configs)")
	c.fs.BoolVar(&f.prefixed, "prefixed", false, "the name is a prefix: the binding covers every resource whose name starts with it")
	c.fs.BoolVar(&f.deny, "deny", false, "deny instead of allow (a deny wins over any allow)")
	if filter {
		c.fs.BoolVar(&f.matching, "matching", false, "with a resource name, select the bindings that apply to it (literal, wildcard and prefixes) rather than those of exactly that name")
	}
	return f
}

// resource is the resource type and name given, "" when none.
func (f *aclFlags) resource() (typ, name string, err error) {
	n := 0
	for _, r := range []struct {
		set       bool
		typ, name string
	}{
		{f.topic != "", "topic", f.topic},
		{f.group != "", "group", f.group},
		{f.transactionalID != "", "transactional-id", f.transactionalID},
		{f.connector != "", "connector", f.connector},
		{f.subject != "", "subject", f.subject},
		{f.cluster, "cluster", "kafka-cluster"},
	} {
		if r.set {
			n++
			typ, name = r.typ, r.name
		}
	}
	if n > 1 {
		return "", "", fmt.Errorf("name one resource: --topic, --group, --transactional-id, --connector, --subject or --cluster")
	}
	return typ, name, nil
}

func (f *aclFlags) binding(cmd string) (client.ACL, error) {
	typ, name, err := f.resource()
	switch {
	case err != nil:
		return client.ACL{}, usagef(cmd, "%v", err)
	case typ == "":
		return client.ACL{}, usagef(cmd, "name the resource: --topic NAME, --group NAME, --transactional-id ID, --connector NAME, --subject NAME or --cluster")
	case f.principal == "":
		return client.ACL{}, usagef(cmd, "--principal is required, e.g. --principal User:alice")
	case f.operation == "":
		return client.ACL{}, usagef(cmd, "--operation is required, e.g. --operation read")
	}
	a := client.ACL{Principal: f.principal, Host: f.host, ResourceType: typ, ResourceName: name, Operation: f.operation, Permission: "allow", PatternType: "literal"}
	if f.prefixed {
		a.PatternType = "prefixed"
	}
	if f.deny {
		a.Permission = "deny"
	}
	return a, nil
}

func (f *aclFlags) filter(cmd string) (client.ACLFilter, error) {
	typ, name, err := f.resource()
	if err != nil {
		return client.ACLFilter{}, usagef(cmd, "%v", err)
	}
	flt := client.ACLFilter{Principal: f.principal, Host: f.host, ResourceType: typ, ResourceName: name, Operation: f.operation}
	switch {
	case f.matching:
		flt.PatternType = "match"
	case f.prefixed:
		flt.PatternType = "prefixed"
	}
	if f.deny {
		flt.Permission = "deny"
	}
	return flt, nil
}

func printACLs(e *env, as []client.ACL) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tPERMISSION\tOPERATION\tRESOURCE\tNAME\tPATTERN\tHOST")
	for _, a := range as {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Principal, a.Permission, a.Operation, a.ResourceType, a.ResourceName, a.PatternType, a.Host)
	}
	return tw.Flush()
}

func aclsListCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("acls list", "strata acls list [--principal P] [--topic T|--group G|--transactional-id ID|--connector C|--subject S|--cluster] [--matching] [--json]",
		"Lists the ACL bindings the flags select (all without any). Needs describe on the cluster.")
	sf := addServerFlags(c)
	f := addACLFlags(c, true)
	asJSON := c.fs.Bool("json", false, "print one JSON object per binding")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q", args[0])
		}
		flt, err := f.filter(c.name)
		if err != nil {
			return err
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		as, err := cl.ListACLs(ctx, flt)
		if err != nil {
			return err
		}
		if *asJSON {
			return encodeEach(e, as)
		}
		return printACLs(e, as)
	}
}

func aclsCreateCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("acls create", "strata acls create --principal User:NAME --operation OP (--topic T|--group G|--transactional-id ID|--connector C|--subject S|--cluster) [--prefixed] [--deny] [--host H]",
		"Allows (or with --deny, denies) a principal an operation on a resource. Needs alter on the\ncluster. Examples:\n  strata acls create --principal User:app --operation write --topic orders\n  strata acls create --principal User:app --operation read --group app- --prefixed\n  strata acls create --principal User:etl --operation all --connector etl- --prefixed")
	sf := addServerFlags(c)
	f := addACLFlags(c, false)
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q", args[0])
		}
		a, err := f.binding(c.name)
		if err != nil {
			return err
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		got, err := cl.CreateACL(ctx, a)
		if err != nil {
			return err
		}
		return printACLs(e, []client.ACL{got})
	}
}

func aclsDeleteCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("acls delete", "strata acls delete [--principal P] [--operation OP] [--topic T|--group G|--transactional-id ID|--connector C|--subject S|--cluster] [--prefixed] [--deny] [--all]",
		"Deletes the ACL bindings the flags select and prints them. Needs alter on the cluster.")
	sf := addServerFlags(c)
	f := addACLFlags(c, true)
	all := c.fs.Bool("all", false, "with no other flag: delete every binding")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q", args[0])
		}
		flt, err := f.filter(c.name)
		if err != nil {
			return err
		}
		if flt == (client.ACLFilter{}) {
			if !*all {
				return usagef(c.name, "say which bindings to delete (e.g. --principal User:app), or --all for every one")
			}
			flt.ResourceType = "any"
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		as, err := cl.DeleteACLs(ctx, flt)
		if err != nil {
			return err
		}
		return printACLs(e, as)
	}
}
