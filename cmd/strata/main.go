// Command strata is Strata's one binary: the server (serve, with the writer, reader and
// compactor roles; dev, everything embedded on one machine) and the command-line verbs
// that talk to a running server over the HTTP API (topics, produce, consume).
//
// Exit codes: 0 success, 1 error, 2 usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
)

// version is set at build time (-ldflags "-X main.version=v1.2.3"); otherwise the
// module's build info tells what it can.
var version = ""

func versionString() string {
	v, rev, dirty := version, "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev
		if dirty {
			v += "+dirty"
		}
	}
	return v
}

// env is the process's surroundings, injected so commands can be tested in-process.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// stderrTTY says whether stderr is a terminal (progress lines are redrawn in place).
	stderrTTY bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, stderrTTY: isTerminal(os.Stderr)}
	code := run(ctx, e, os.Args[1:])
	stop()
	os.Exit(code)
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// verb is one runnable subcommand.
type verb struct {
	name string // "topics create"
	new  func() (*command, func(ctx context.Context, e *env, c *command, args []string) error)
}

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
		{"produce", produceCommand},
		{"consume", consumeCommand},
		{"groups list", groupsListCommand},
		{"groups describe", groupsDescribeCommand},
		{"groups reset", groupsResetCommand},
		{"groups delete", groupsDeleteCommand},
		{"keys create", keysCreateCommand},
		{"keys list", keysListCommand},
		{"keys revoke", keysRevokeCommand},
		{"acls list", aclsListCommand},
		{"acls create", aclsCreateCommand},
		{"acls delete", aclsDeleteCommand},
		{"audit", auditCommand},
		{"check", checkCommand},
		{"torture", tortureCommand},
		{"bench", benchCommand},
		{"version", versionCommand},
	}, connectorVerbs()...)
}

const topUsage = `strata - a streaming platform on object storage

Usage: strata COMMAND [flags]

Servers:
  dev              run everything in one process on a local directory (SQLite, files)
  serve            run a node: --roles writer,reader against Postgres and S3
  lambda           answer AWS Lambda invocations (the default inside Lambda)

Talking to a server (--server, env STRATA_SERVER, default http://127.0.0.1:8080):
  topics create    create a topic
  topics list      list topics
  topics describe  show a topic's configs and partitions
  topics delete    delete a topic
  topics alter     add partitions, set or remove configs
  produce          send JSON lines from stdin or a file
  consume          print records as JSON lines (--group G: as a member of a consumer group)
  groups list      list consumer groups
  groups describe  show a group's members, assignments, committed offsets and lag
  groups reset     move a group's committed offsets (no live members)
  groups delete    delete a group and its offsets
  connectors ...   manage connectors (strata connectors -h)
  keys create      make an API key for a principal (its secret is printed once)
  keys list        list the API keys
  keys revoke      revoke an API key: refused everywhere within a second
  acls list        list ACL bindings
  acls create      allow or deny a principal an operation on a resource
  acls delete      delete ACL bindings
  audit            print the audit log of administrative actions

Other:
  check            compare the catalog with the bucket (missing, stray, corrupt objects)
  torture          run the reliability harness: faults, a recorded workload, a checked history
  bench            measure throughput, latency and cost beside this machine's floor
  version          print the version

Run 'strata COMMAND -h' for a command's flags. Exit codes: 0 ok, 1 error, 2 usage.
`

// subVerbs are the commands with verbs of their own (beside topics and groups).
var subVerbs = map[string]string{"keys": "create|list|revoke", "acls": "list|create|delete"}

// run runs one command line and returns the exit code.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 && e.getenv("AWS_LAMBDA_RUNTIME_API") != "" {
		// Lambda runs the binary (named bootstrap) without arguments.
		args = []string{"lambda"}
	}
	if len(args) == 0 {
		fmt.Fprint(e.stderr, topUsage)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(e.stdout, topUsage)
		return 0
	case "-v", "-version", "--version":
		args = []string{"version"}
	}
	name, rest := args[0], args[1:]
	if name == "groups" && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = "groups "+rest[0], rest[1:]
	} else if name == "groups" {
		const u = "Usage: strata groups list|describe|reset|delete ...\nRun 'strata groups VERB -h' for a verb's flags.\n"
		if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help") {
			fmt.Fprint(e.stdout, u)
			return 0
		}
		fmt.Fprint(e.stderr, u)
		return 2
	}
	if name == "connectors" {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			u := "Usage: strata connectors list|create|update|describe|pause|resume|stop|delete|restart|offsets|plugins|validate ...\n" + connectorsUsage +
				"Run 'strata connectors VERB -h' for a verb's flags.\n"
			if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help") {
				fmt.Fprint(e.stdout, u)
				return 0
			}
			fmt.Fprint(e.stderr, u)
			return 2
		}
		name, rest = "connectors "+rest[0], rest[1:]
	}
	if name == "topics" {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			const u = "Usage: strata topics create|list|describe|delete|alter ...\nRun 'strata topics VERB -h' for a verb's flags.\n"
			if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help") {
				fmt.Fprint(e.stdout, u)
				return 0
			}
			fmt.Fprint(e.stderr, u)
			return 2
		}
		name, rest = "topics "+rest[0], rest[1:]
	}
	if sub, ok := subVerbs[name]; ok {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			u := "Usage: strata " + name + " " + sub + " ...\nRun 'strata " + name + " VERB -h' for a verb's flags.\n"
			if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help") {
				fmt.Fprint(e.stdout, u)
				return 0
			}
			fmt.Fprint(e.stderr, u)
			return 2
		}
		name, rest = name+" "+rest[0], rest[1:]
	}
	if name == "lambda" {
		// Before the flags: the secrets are some of their environment.
		withSecrets, err := withLambdaSecrets(ctx, e)
		if err != nil {
			return report(e, name, err)
		}
		e = withSecrets
	}
	for _, v := range verbs() {
		if v.name != name {
			continue
		}
		cmd, fn := v.new()
		pos, err := cmd.parse(rest, e.getenv)
		if errors.Is(err, flag.ErrHelp) {
			cmd.usage(e.stdout)
			return 0
		}
		if err == nil {
			err = fn(ctx, e, cmd, pos)
		}
		return report(e, name, err)
	}
	fmt.Fprintf(e.stderr, "strata: unknown command %q\n\n%s", name, topUsage)
	return 2
}

// report prints err the way a person can act on it and returns the exit code. A
// server's refusal (*client.Error) already reads "detail (code C, HTTP N)".
func report(e *env, cmd string, err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "strata %s: %s\nRun 'strata %s -h' for usage.\n", cmd, ue.msg, cmd)
		return 2
	}
	fmt.Fprintf(e.stderr, "strata %s: %v\n", cmd, err)
	return 1
}

func versionCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("version", "strata version", "Prints the version of this binary.")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q", args[0])
		}
		fmt.Fprintf(e.stdout, "strata %s\n", versionString())
		return nil
	}
}
