package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/strata-io/strata/client"
)

// The push verbs (push create|describe|pause|resume|rotate-secret|delete): a share
// group's push subscription to a webhook or an AWS Lambda function (README "Push
// delivery").

func pushVerbs() []verb {
	return []verb{
		{"push create", pushCreateCommand},
		{"push describe", pushDescribeCommand},
		{"push pause", pushStateCommand("pause")},
		{"push resume", pushStateCommand("resume")},
		{"push rotate-secret", pushRotateCommand},
		{"push delete", pushDeleteCommand},
	}
}

func pushCreateCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("push create", "strata push create GROUP --topic T [--topic T2 ...] (--url https://... | --lambda-arn ARN) [--batch-size N] [--concurrency N] [--call-timeout D] [--linger D]",
		`Creates (or replaces) a share group's push subscription: the push role hands the
group's records to the webhook or Lambda function, signed with the subscription's
secret, and acknowledges them by the answer. The secret is printed when the
subscription is created, and never again (rotate it with push rotate-secret).
Replacing keeps the secret and the state.`)
	sf := addServerFlags(c)
	var topics stringList
	c.fs.Var(&topics, "topic", "a `topic` the group reads (repeat for several)")
	url := c.fs.String("url", "", "the webhook: an https `URL` the server's --push-allow lists")
	arn := c.fs.String("lambda-arn", "", "an AWS Lambda function's `ARN` (instead of --url)")
	batch := c.fs.Int("batch-size", 0, "most records per call, 1 to 1000 (0: 10)")
	conc := c.fs.Int("concurrency", 0, "calls in flight, 1 to 64 (0: 8)")
	callTimeout := c.fs.Duration("call-timeout", 0, "bound on each call (0: 10s)")
	linger := c.fs.Duration("linger", 0, "how long a call waits to fill its batch (0: 100ms)")
	asJSON := c.fs.Bool("json", false, "print the answer as one JSON object")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		group, err := oneGroup(c.name, args)
		if err != nil {
			return err
		}
		if len(topics.vals) == 0 {
			return usagef(c.name, "--topic is required")
		}
		if (*url == "") == (*arn == "") {
			return usagef(c.name, "give exactly one of --url and --lambda-arn")
		}
		cl, err := sf.client(c.name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, sf.timeout)
		defer cancel()
		s, err := cl.PutPush(ctx, group, client.PushSubscriptionRequest{Topics: topics.vals, URL: *url, LambdaARN: *arn,
			BatchSize: *batch, Concurrency: *conc, TimeoutMs: callTimeout.Milliseconds(), LingerMs: linger.Milliseconds()})
		if err != nil {
			return err
		}
		return printPush(e.stdout, s, *asJSON)
	}
}

func printPush(w io.Writer, s client.PushSubscription, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(s)
	}
	target := s.URL
	if target == "" {
		target = s.LambdaARN
	}
	fmt.Fprintf(w, "Share group: %s\nTopics:      %v\nTarget:      %s\nState:       %s\n", s.Group, s.Topics, target, s.State)
	if s.LastError != "" {
		fmt.Fprintf(w, "Last error:  %s\n", s.LastError)
	}
	fmt.Fprintf(w, "Batch size:  %d\nLinger:      %v\nConcurrency: %d\nTimeout:     %v\nPrincipal:   %s\n", s.BatchSize,
		time.Duration(s.LingerMs)*time.Millisecond, s.Concurrency, time.Duration(s.TimeoutMs)*time.Millisecond, s.Principal)
	if s.Secret != "" {
		fmt.Fprintf(w, "Secret:      %s\n(shown this once: keep it where the receiver verifies Strata-Signature)\n", s.Secret)
	}
	return nil
}

func pushDescribeCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("push describe", "strata push describe GROUP [--json]",
		"Shows a share group's push subscription: its target, settings and state (with the\nerror that paused it). The secret is never shown.")
	sf := addServerFlags(c)
	asJSON := c.fs.Bool("json", false, "print one JSON object instead of text")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		return withGroup(ctx, sf, c.name, args, func(ctx context.Context, cl *client.Client, group string) error {
			s, err := cl.Push(ctx, group)
			if err != nil {
				return err
			}
			return printPush(e.stdout, s, *asJSON)
		})
	}
}

func pushStateCommand(verb string) func() (*command, func(context.Context, *env, *command, []string) error) {
	return func() (*command, func(context.Context, *env, *command, []string) error) {
		about := "Pauses a share group's push subscription: calls stop, the records stay in the group."
		if verb == "resume" {
			about = "Resumes a share group's push subscription, clearing the error that paused it."
		}
		c := newCommand("push "+verb, "strata push "+verb+" GROUP", about)
		sf := addServerFlags(c)
		return c, func(ctx context.Context, e *env, c *command, args []string) error {
			return withGroup(ctx, sf, c.name, args, func(ctx context.Context, cl *client.Client, group string) error {
				call := cl.PausePush
				if verb == "resume" {
					call = cl.ResumePush
				}
				s, err := call(ctx, group)
				if err != nil {
					return err
				}
				return printPush(e.stdout, s, false)
			})
		}
	}
}

func pushRotateCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("push rotate-secret", "strata push rotate-secret GROUP",
		"Gives a share group's push subscription a new signing secret and prints it, this\nonce. Calls already in flight may carry the old one.")
	sf := addServerFlags(c)
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		return withGroup(ctx, sf, c.name, args, func(ctx context.Context, cl *client.Client, group string) error {
			secret, err := cl.RotatePushSecret(ctx, group)
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, secret)
			return nil
		})
	}
}

func pushDeleteCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("push delete", "strata push delete GROUP",
		"Deletes a share group's push subscription; the share group and its state stay.")
	sf := addServerFlags(c)
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		return withGroup(ctx, sf, c.name, args, func(ctx context.Context, cl *client.Client, group string) error {
			if err := cl.DeletePush(ctx, group); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "Deleted the push subscription of share group %s\n", group)
			return nil
		})
	}
}

// withGroup runs do for the one GROUP argument with a client of the server flags,
// bounded by their timeout.
func withGroup(ctx context.Context, sf *serverFlags, cmd string, args []string, do func(context.Context, *client.Client, string) error) error {
	group, err := oneGroup(cmd, args)
	if err != nil {
		return err
	}
	cl, err := sf.client(cmd)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sf.timeout)
	defer cancel()
	return do(ctx, cl, group)
}
