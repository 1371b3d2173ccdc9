package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
)

// The SCRAM verbs (scram set|list|delete): the credentials Kafka clients log in with
// over SASL SCRAM-SHA-256/512, each a command over the client library.

func scramSetCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("scram set", "strata scram set USER (--password-file FILE | --password PASSWORD) [--mechanism SCRAM-SHA-512] [--iterations 8192]",
		"Sets a user's SCRAM credential: Kafka clients then log in with SASL SCRAM-SHA-256 or\nSCRAM-SHA-512 as principal User:USER (ACLs apply as for keys). The server draws the salt and\nkeeps only the keys derived from the salted password. Replacing a credential closes the\nconnections that logged in with the old one. Needs alter on the cluster.")
	sf := addServerFlags(c)
	mechanism := c.fs.String("mechanism", "SCRAM-SHA-256", "`SCRAM-SHA-256` or SCRAM-SHA-512")
	password := c.fs.String("password", "", "the `password`; prefer --password-file or the environment to the command line")
	passwordFile := c.fs.String("password-file", "", "`file` whose first line is the password")
	iterations := c.fs.Int32("iterations", 0, "PBKDF2 `iterations`, 4096 to 16384 (default: the server's, 8192)")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) != 1 {
			return usagef(c.name, "one user expected: strata scram set USER --password-file FILE")
		}
		pw := *password
		if *passwordFile != "" {
			if pw != "" {
				return usagef(c.name, "give --password or --password-file, not both")
			}
			b, err := os.ReadFile(*passwordFile)
			if err != nil {
				return fmt.Errorf("--password-file: %w", err)
			}
			pw, _, _ = strings.Cut(string(b), "\n")
			pw = strings.TrimSuffix(pw, "\r")
		}
		if pw == "" {
			return usagef(c.name, "a password is required: --password-file FILE (or --password)")
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		u, err := cl.SetScramCredential(ctx, args[0], *mechanism, pw, *iterations)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "set %s credential of %s (principal %s)\n", *mechanism, u.User, u.Principal)
		return nil
	}
}

func scramListCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("scram list", "strata scram list [--json]", "Lists the users with SCRAM credentials: their mechanisms and iteration counts (never a key). Needs describe on the cluster.")
	sf := addServerFlags(c)
	asJSON := c.fs.Bool("json", false, "print one JSON object per user instead of a table")
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
		us, err := cl.ListScramUsers(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return encodeEach(e, us)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "USER\tPRINCIPAL\tMECHANISM\tITERATIONS")
		for _, u := range us {
			for _, cr := range u.Credentials {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", u.User, u.Principal, cr.Mechanism, cr.Iterations)
			}
		}
		return tw.Flush()
	}
}

func scramDeleteCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("scram delete", "strata scram delete USER [--mechanism SCRAM-SHA-512]",
		"Deletes a user's SCRAM credential: within a second every node refuses it, and the Kafka\nconnections that logged in with it are closed. Needs alter on the cluster.")
	sf := addServerFlags(c)
	mechanism := c.fs.String("mechanism", "SCRAM-SHA-256", "`SCRAM-SHA-256` or SCRAM-SHA-512")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) != 1 {
			return usagef(c.name, "one user expected: strata scram delete USER")
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		if _, err := cl.DeleteScramCredential(ctx, args[0], *mechanism); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "deleted %s credential of %s\n", *mechanism, args[0])
		return nil
	}
}
