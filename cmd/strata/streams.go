package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/strata-io/strata/streams"
)

// The Streams API's verbs (streams reset); the logic is the library's (streams.Reset),
// so an application can reset itself the same way.

func streamsResetCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("streams reset", "strata streams reset --application APP [--to-datetime TIME] [--input-topic T ...] [--state-dir DIR] [--dry-run]",
		"Rewinds a Streams application so that its next run reprocesses its inputs: deletes its\n"+
			"group with the offsets (refused while any instance is alive), deletes its internal\n"+
			"topics (<app>-…-changelog, -repartition, -subscription, -response, <app>-instances),\n"+
			"positions its inputs at their log start or at an RFC 3339 time, and wipes\n"+
			"<state-dir>/<app> on this machine. Output topics are left as they are.")
	sf := addServerFlags(c)
	app := c.fs.String("application", "", "the application id (its group and the prefix of its topics)")
	toTime := c.fs.String("to-datetime", "", "reprocess from the first record at or after this RFC 3339 `time` (default: from the log start)")
	var inputs stringList
	c.fs.Var(&inputs, "input-topic", "an input `topic` to rewind (repeat; default: every topic the group committed offsets of, internal ones aside)")
	stateDir := c.fs.String("state-dir", "", "the application's state `directory` on this machine: <dir>/<app> is wiped")
	dryRun := c.fs.Bool("dry-run", false, "print what would be done, and do nothing")
	asJSON := c.fs.Bool("json", false, "print the report as JSON")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q (the application is --application APP)", args[0])
		}
		if *app == "" {
			return usagef(c.name, "--application is required")
		}
		o := streams.ResetOptions{Application: *app, InputTopics: inputs.vals, StateDir: *stateDir, DryRun: *dryRun}
		if *toTime != "" {
			t, err := time.Parse(time.RFC3339Nano, *toTime)
			if err != nil {
				return usagef(c.name, "--to-datetime %q: want an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", *toTime)
			}
			o.ToTime = t
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		rep, err := streams.Reset(ctx, cl, o)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(rep)
		}
		verb := ""
		if *dryRun {
			verb = "would be "
		}
		fmt.Fprintf(e.stdout, "application %s: group %sdeleted: %v\n", *app, verb, rep.GroupDeleted)
		fmt.Fprintf(e.stdout, "internal topics %sdeleted: %s\n", verb, orNone(rep.DeletedTopics))
		fmt.Fprintf(e.stdout, "inputs %sreprocessed from %s: %s\n", verb, rep.ReprocessFrom, orNone(rep.InputTopics))
		if rep.WipedStateDir != "" {
			fmt.Fprintf(e.stdout, "local state %swiped: %s\n", verb, rep.WipedStateDir)
		}
		return nil
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, " ")
}
