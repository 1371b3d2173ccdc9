package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strata-io/strata/client"
)

// The command tree, on cobra (the library of kubectl, gh and rpk): verbs() is the one
// list of commands; each is one constructor in its own file, returning its flags and
// what it runs. run builds the tree from the list, parses the command line (flags
// before or after the verb, persistent ones before it too), fills unset flags from the
// environment, and maps the outcome to an exit code: 0 ok, 1 error, 2 usage.

// verb is one runnable subcommand.
type verb struct {
	name string // "topics create": a space makes "create" a subcommand of "topics"
	new  func() (*command, runFunc)
}

// runFunc runs a command with its positional arguments, once its flags are parsed.
type runFunc = func(ctx context.Context, e *env, c *command, args []string) error

// verbs is the one place a command is registered.
func verbs() []verb {
	return append([]verb{
		{"dev", devCommand},
		{"serve", serveCommand},
		{"lambda", lambdaCommand},
		{"topics create", topicsCreateCommand},
		{"topics list", topicsListCommand},
		{"topics describe", topicsDescribeCommand},
		{"topics delete", topicsDeleteCommand},
		{"topics alter", topicsAlterCommand},
		{"topics usage", topicsUsageCommand},
		{"produce", produceCommand},
		{"consume", consumeCommand},
		{"groups list", groupsListCommand},
		{"groups describe", groupsDescribeCommand},
		{"groups reset", groupsResetCommand},
		{"groups delete", groupsDeleteCommand},
		{"streams reset", streamsResetCommand},
		{"keys create", keysCreateCommand},
		{"keys list", keysListCommand},
		{"keys revoke", keysRevokeCommand},
		{"scram set", scramSetCommand},
		{"scram list", scramListCommand},
		{"scram delete", scramDeleteCommand},
		{"acls list", aclsListCommand},
		{"acls create", aclsCreateCommand},
		{"acls delete", aclsDeleteCommand},
		{"quotas list", quotasListCommand},
		{"quotas set", quotasSetCommand},
		{"audit", auditCommand},
		{"check", checkCommand},
		{"torture", tortureCommand},
		{"bench", benchCommand},
		{"version", versionCommand},
	}, append(append(append(connectorVerbs(), schemaVerbs()...), shareVerbs()...), pushVerbs()...)...)
}

// groups are the commands that only hold others, with what they are for.
var groupAbout = map[string]string{
	"topics":     "create, list, describe, alter and delete topics",
	"groups":     "list, describe, reset and delete consumer groups",
	"share":      "consume from, describe and reset share groups (queues: each record to one member)",
	"push":       "push a share group's records to a webhook or Lambda function (create, describe, pause, resume, rotate-secret, delete)",
	"streams":    "manage Streams applications (reset one to reprocess its inputs)",
	"keys":       "create, list and revoke API keys kept in the catalog",
	"scram":      "set, list and delete SCRAM credentials (Kafka SASL SCRAM-SHA-256/512 logins)",
	"acls":       "list, create and delete ACL bindings (who may do what)",
	"quotas":     "list and set client quotas (byte rates, request share, mutation rate, caps)",
	"schemas":    "register, get, list and check schemas in the schema registry",
	"connectors": "run connectors on nodes with the connect role (Kafka Connect's REST API)",
}

// errUsageShown: the usage has been printed already; exit 2 without another word.
var errUsageShown = errors.New("usage shown")

// tree is a built command tree, with what run needs to report.
type tree struct {
	root    *cobra.Command
	globals *serverFlags
	cmds    map[*cobra.Command]*command
}

// newTree builds the command tree for one run in e.
func newTree(ctx context.Context, e *env) *tree {
	t := &tree{globals: &serverFlags{}, cmds: map[*cobra.Command]*command{}}
	root := &cobra.Command{
		Use:   "strata",
		Short: "a streaming platform on object storage",
		// Suggest commands up to two edits away (topics lsit: list).
		SuggestionsMinimumDistance: 2,
		SilenceErrors:              true,
		SilenceUsage:               true,
		// Completion scripts: strata completion bash|zsh|fish|powershell.
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
		Args:              noVerbArgs,
		RunE: func(c *cobra.Command, args []string) error {
			fmt.Fprint(e.stderr, topUsage(c))
			return errUsageShown
		},
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetIn(e.stdin)
	root.SetContext(ctx)
	t.globals.register(root.PersistentFlags())
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef(commandName(c), "%s", flagErrorText(c, err))
	})
	cobraHelp := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		w := c.OutOrStdout()
		switch cmd := t.cmds[c]; {
		case c == root:
			fmt.Fprint(w, topUsage(c))
		case cmd != nil:
			cmd.usage(w, t.globals)
		case c.HasSubCommands():
			fmt.Fprint(w, groupUsage(c))
		default:
			cobraHelp(c, args) // cobra's own commands: completion SHELL
		}
	})
	for _, v := range verbs() {
		t.add(root, e, v)
	}
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd() // only once the root has subcommands
	if c := findChild(root, "completion"); c != nil {
		c.Short = listedShort("completion")
	}
	t.root = root
	return t
}

// add puts a verb in the tree under its group, making the group when it is the first.
func (t *tree) add(root *cobra.Command, e *env, v verb) {
	parent := root
	words := strings.Fields(v.name)
	for _, g := range words[:len(words)-1] {
		next := findChild(parent, g)
		if next == nil {
			next = groupCommand(e, g)
			parent.AddCommand(next)
		}
		parent = next
	}
	c, fn := v.new()
	c.addHints()
	c.cmd.Use = words[len(words)-1]
	if short := listedShort(v.name); short != "" {
		c.cmd.Short = short
	}
	c.cmd.RunE = func(cc *cobra.Command, args []string) error {
		ee := e
		if c.beforeEnv != nil {
			var err error
			if ee, err = c.beforeEnv(cc.Context(), e); err != nil {
				return err
			}
		}
		if err := c.applyEnv(ee.getenv); err != nil {
			return err
		}
		if c.server != nil {
			*c.server = *t.globals
		} else if f := changedGlobal(cc); f != "" {
			return usagef(c.name, "--%s is for the commands that talk to a server (topics, produce, consume, groups); %s does not", f, c.name)
		}
		return fn(cc.Context(), ee, c, args)
	}
	t.cmds[c.cmd] = c
	parent.AddCommand(c.cmd)
}

func findChild(parent *cobra.Command, name string) *cobra.Command {
	for _, c := range parent.Commands() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// groupCommand is a command that only holds verbs: alone it prints its usage (exit 2),
// with an unknown verb it says so and suggests the nearest.
func groupCommand(e *env, name string) *cobra.Command {
	return &cobra.Command{
		Use:                        name,
		Short:                      groupAbout[name],
		SuggestionsMinimumDistance: 2,
		Args:                       noVerbArgs,
		RunE: func(c *cobra.Command, args []string) error {
			fmt.Fprint(e.stderr, groupUsage(c))
			return errUsageShown
		},
	}
}

// noVerbArgs: a command that holds others takes no argument but one of them.
func noVerbArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return unknownCommand(c, args[0])
	}
	return nil
}

// unknownCommand is a usage error naming the nearest commands.
func unknownCommand(c *cobra.Command, typed string) error {
	msg := fmt.Sprintf("unknown command %q for %q", typed, c.CommandPath())
	if s := c.SuggestionsFor(typed); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", orList(s))
	}
	return usagef(commandName(c), "%s", msg)
}

// flagErrorText is pflag's error with the nearest flag suggested for an unknown one.
func flagErrorText(c *cobra.Command, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return msg
	}
	var best string
	bestD := 3 // at most 2 edits away
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if d := levenshtein(name, f.Name); d < bestD {
			best, bestD = f.Name, d
		}
	})
	if best != "" {
		msg += fmt.Sprintf("; did you mean --%s?", best)
	}
	return msg
}

func orList(s []string) string {
	if len(s) == 1 {
		return fmt.Sprintf("%q", s[0])
	}
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// commandName is a command's path without "strata ": "topics create".
func commandName(c *cobra.Command) string {
	return strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), "strata"), " ")
}

// changedGlobal names a global flag set on the command line, "" for none.
func changedGlobal(c *cobra.Command) string {
	var name string
	c.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if f.Changed && name == "" {
			name = f.Name
		}
	})
	return name
}

// run runs one command line and returns the exit code.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 && e.getenv("AWS_LAMBDA_RUNTIME_API") != "" {
		// Lambda runs the binary (named bootstrap) without arguments.
		args = []string{"lambda"}
	}
	t := newTree(ctx, e)
	t.root.SetArgs(normalizeArgs(t.root, args))
	c, err := t.root.ExecuteC()
	name := ""
	if c != nil {
		name = commandName(c)
	}
	return report(e, name, err)
}

// normalizeArgs keeps the standard flag package's forms working on pflag: -v and
// -version print the version, and a long flag written with one dash (-help,
// -partitions 3, -server=URL) is taken as written with two, when the command has a
// flag of that name. "-" and negative numbers are left alone, and nothing after "--".
func normalizeArgs(root *cobra.Command, args []string) []string {
	if len(args) > 0 {
		switch args[0] {
		case "-v", "-version", "--version":
			return append([]string{"version"}, args[1:]...)
		}
	}
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		cmd = root
	}
	known := func(name string) bool {
		return name == "help" || cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil ||
			cmd.PersistentFlags().Lookup(name) != nil || root.PersistentFlags().Lookup(name) != nil
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if known(name) {
			out[i] = "-" + a
		}
	}
	return out
}

// report prints err the way a person can act on it and returns the exit code.
func report(e *env, cmd string, err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsageShown):
		return 2
	case errors.Is(err, errIncompatible):
		return 1 // schemas check has said why
	case errors.As(err, &ue):
		where := "strata"
		if cmd != "" {
			where += " " + cmd
		}
		fmt.Fprintf(e.stderr, "%s: %s\nRun '%s --help' for usage.\n", where, ue.msg, where)
		return 2
	}
	fmt.Fprintf(e.stderr, "strata %s: %s\n", cmd, errorText(err))
	return 1
}

// commandList is the root help's list of commands by kind, and each command's one-line
// description (its Short).
const commandList = `Servers:
  dev                 run everything in one process on a local directory (SQLite, files)
  serve               run a node: --roles writer,reader against Postgres and S3
  lambda              answer AWS Lambda invocations (the default inside Lambda)

Talking to a server (--server, env STRATA_SERVER, default http://127.0.0.1:8080):
  topics create       create a topic
  topics list         list topics
  topics describe     show a topic's configs and partitions
  topics delete       delete a topic
  topics alter        add partitions, set or remove configs
  topics usage        show a topic's bytes, records and requests, and its estimated monthly cost
  produce             send JSON lines from stdin or a file
  consume             print records as JSON lines (--group G: as a member of a consumer group)
  groups list         list consumer groups
  groups describe     show a group's members, assignments, committed offsets and lag
  groups reset        move a group's committed offsets (no live members)
  groups delete       delete a group and its offsets
  share consume       print records a share group acquires, accepting each (queue semantics)
  share describe      show a share group's members, start offsets, records in flight and lag
  share reset         move a share group's start offsets (no live members)
  push create         push a share group's records to a webhook or Lambda function (prints the secret once)
  push describe       show a push subscription's target, settings and state
  push pause|resume   stop or restart a push subscription's calls
  push rotate-secret  give a push subscription a new signing secret (printed once)
  push delete         delete a push subscription (the share group stays)
  streams reset       rewind a Streams application to reprocess its inputs (no live instances)
  connectors list     list connectors with their state and tasks
  connectors create   create a connector from --config KEY=VALUE and/or --config-file
  connectors describe show a connector's status, tasks and config
  keys create         make an API key for a principal (its secret is printed once)
  keys list           list the API keys
  keys revoke         revoke an API key: refused everywhere within a second
  scram set           set a user's SCRAM credential (Kafka SASL SCRAM-SHA-256/512)
  scram list          list the users with SCRAM credentials
  scram delete        delete a SCRAM credential: its connections are closed
  acls list           list ACL bindings
  acls create         allow or deny a principal an operation on a resource
  acls delete         delete ACL bindings
  quotas list         list client quotas
  quotas set          set or remove an entity's quotas
  audit               print the audit log of administrative actions
  schemas register    register a schema under a subject (prints its id and version)
  schemas get         print a subject's version of a schema, or a schema by id
  schemas list        list subjects with their latest version and schema id
  schemas check       check a schema against a subject's versions without registering it

Other:
  check               compare the catalog with the bucket (missing, stray, corrupt objects)
  torture             run the reliability harness: faults, a recorded workload, a checked history
  bench               measure throughput, latency and cost beside this machine's floor
  completion          print a shell completion script: bash, zsh, fish or powershell
  version             print the version
`

// listedShort is a command's description in commandList, "" when it is not listed.
func listedShort(name string) string {
	for _, line := range strings.Split(commandList, "\n") {
		if rest, ok := strings.CutPrefix(line, "  "+name+" "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// topUsage is the root's help: the commands by kind, then any registered since the
// list was written.
func topUsage(root *cobra.Command) string {
	var b strings.Builder
	b.WriteString("strata - a streaming platform on object storage\n\nUsage: strata COMMAND [flags]\n\n")
	b.WriteString(commandList)
	var more []string
	walk(root, func(c *cobra.Command) {
		name := commandName(c)
		if c.Runnable() && !c.HasSubCommands() && name != "" && documented(c) &&
			c.Parent().Name() != "completion" && listedShort(name) == "" {
			more = append(more, fmt.Sprintf("  %-16s %s", name, c.Short))
		}
	})
	if len(more) > 0 {
		sort.Strings(more)
		fmt.Fprintf(&b, "\nMore:\n%s\n", strings.Join(more, "\n"))
	}
	b.WriteString(`
Global flags (before or after the command; for the commands that talk to a server):
  --server URL     the Strata server's base URL (env STRATA_SERVER, default http://127.0.0.1:8080)
  --api-key KEY    API key sent as a bearer token (env STRATA_API_KEY)
  --timeout D      how long one request may take (env STRATA_TIMEOUT, default 30s)

Run 'strata COMMAND --help' for a command's flags. Exit codes: 0 ok, 1 error, 2 usage.
`)
	return b.String()
}

// groupUsage is a group's help: its verbs.
func groupUsage(c *cobra.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s VERB [flags]\n\n%s\n\nVerbs:\n", c.CommandPath(), c.Short)
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			fmt.Fprintf(&b, "  %-10s %s\n", sub.Name(), sub.Short)
		}
	}
	fmt.Fprintf(&b, "\nRun '%s VERB --help' for a verb's flags.\n", c.CommandPath())
	return b.String()
}

// walk visits c and every command below it, in order.
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// discard is for trees built only to be looked at (docs, tests).
var discard = &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}

// errorText is how a failed command says why. A server's refusal reads as the API's
// title and detail ("Topic not found: topic "x" does not exist"); the problem's hint
// is advice in the API's terms, not the CLI's, and is left out. A server failure adds
// its request id, under which the server's log has the cause.
func errorText(err error) string {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return err.Error()
	}
	msg := ce.Detail
	switch {
	case msg == "":
		msg = ce.Title
	case ce.Title != "":
		msg = ce.Title + ": " + msg
	}
	if msg == "" {
		msg = fmt.Sprintf("HTTP %d", ce.Status)
	}
	if ce.Status >= 500 && ce.RequestID != "" {
		msg += " (request id " + ce.RequestID + ")"
	}
	// The words around the refusal stay ("lines 3-4 were not produced: ..."), but not
	// the client's name for its call ("describe topic orders: "), which the command's
	// name and the detail say already.
	said := ce.Error()
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.Unwrap(e) == error(ce) {
			said = e.Error()
			break
		}
	}
	return strings.Replace(err.Error(), said, msg, 1)
}
