package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strata-io/strata/client"
)

// The API-key verbs (keys create|list|revoke) and the audit log (audit): self-contained,
// each a command over the client library.

func keysCreateCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("keys create", "strata keys create --principal User:NAME [--description TEXT] [--expires-in 720h] [--json]",
		"Makes an API key for a principal: a random 256-bit secret, printed once (the server keeps\nonly its SHA-256). Send it as Authorization: Bearer SECRET; on the Kafka listener, SASL/PLAIN\nwith the key's id as username and the secret as password. Needs alter on the cluster.")
	sf := addServerFlags(c)
	principal := c.fs.String("principal", "", "who the key authenticates as: `User:NAME`")
	description := c.fs.String("description", "", "what the key is for (`text`)")
	expiresIn := c.fs.Duration("expires-in", 0, "`duration` after which the key stops working (default: never)")
	asJSON := c.fs.Bool("json", false, "print the key as JSON")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q", args[0])
		}
		if *principal == "" {
			return usagef(c.name, "--principal is required, e.g. --principal User:alice")
		}
		if *expiresIn < 0 {
			return usagef(c.name, "--expires-in %s: want a positive duration", *expiresIn)
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		k, err := cl.CreateKey(ctx, client.NewKey{Principal: *principal, Description: *description, ExpiresIn: *expiresIn})
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(k)
		}
		fmt.Fprintf(e.stdout, "id:        %s\nprincipal: %s\nsecret:    %s\n", k.ID, k.Principal, k.Secret)
		if k.ExpiresAt != nil {
			fmt.Fprintf(e.stdout, "expires:   %s\n", k.ExpiresAt.Format(time.RFC3339))
		}
		fmt.Fprintf(e.stderr, "The secret is shown this once: store it now.\n")
		return nil
	}
}

func keysListCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("keys list", "strata keys list [--json]", "Lists the API keys made in the catalog (never their secrets), revoked ones included.")
	sf := addServerFlags(c)
	asJSON := c.fs.Bool("json", false, "print one JSON object per key instead of a table")
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
		ks, err := cl.ListKeys(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return encodeEach(e, ks)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPRINCIPAL\tSTATE\tCREATED\tEXPIRES\tDESCRIPTION")
		for _, k := range ks {
			state, expires := "live", "-"
			if k.ExpiresAt != nil {
				expires = k.ExpiresAt.Format(time.RFC3339)
				if !k.ExpiresAt.After(time.Now()) {
					state = "expired"
				}
			}
			if k.RevokedAt != nil {
				state = "revoked"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Principal, state, k.CreatedAt.Format(time.RFC3339), expires, k.Description)
		}
		return tw.Flush()
	}
}

func keysRevokeCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("keys revoke", "strata keys revoke ID",
		"Revokes an API key: within a second every node refuses it, and the Kafka connections,\nSSE streams and long polls it opened are closed.")
	sf := addServerFlags(c)
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) != 1 {
			return usagef(c.name, "one key id expected: strata keys revoke ID (see strata keys list)")
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		k, err := cl.RevokeKey(ctx, args[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "revoked %s (%s)\n", k.ID, k.Principal)
		return nil
	}
}

func auditCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("audit", "strata audit [--after ID] [--limit N] [--json]",
		"Prints the audit log: one record per administrative action (topics created, altered and\ndeleted, records deleted, offsets reset, groups deleted, ACL and key changes), oldest first.\nNeeds describe on the cluster.")
	sf := addServerFlags(c)
	after := c.fs.Int64("after", 0, "print records after this `id`")
	limit := c.fs.Int("limit", 100, "print at most `N` records")
	asJSON := c.fs.Bool("json", false, "print one JSON object per record")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q", args[0])
		}
		if *limit < 1 || *limit > 1000 {
			return usagef(c.name, "--limit %d: want 1 to 1000", *limit)
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		rs, err := cl.AuditLog(ctx, *after, *limit)
		if err != nil {
			return err
		}
		if *asJSON {
			return encodeEach(e, rs)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTIME\tPRINCIPAL\tACTION\tRESOURCE\tDETAILS")
		for _, r := range rs {
			details := ""
			if len(r.Details) > 0 {
				b, _ := json.Marshal(r.Details)
				details = string(b)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Time.Format(time.RFC3339), r.Principal, r.Action,
				strings.TrimSpace(r.ResourceType+" "+r.Resource), details)
		}
		return tw.Flush()
	}
}

// encodeEach prints one JSON object per item.
func encodeEach[T any](e *env, items []T) error {
	enc := json.NewEncoder(e.stdout)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			return err
		}
	}
	return nil
}
