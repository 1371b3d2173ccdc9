// Command strata is Strata's one binary: the server (serve, with the writer, reader and
// compactor roles; dev, everything embedded on one machine) and the command-line verbs
// that talk to a running server over the HTTP API (topics, produce, consume). The
// command tree is in cli.go; docs/cli has every command's reference.
//
// Exit codes: 0 success, 1 error, 2 usage.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
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
