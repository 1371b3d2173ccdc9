package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strata-io/strata/internal/redact"
)

// usageError is a mistake in how strata was invoked: exit code 2, with a hint to -h.
type usageError struct {
	cmd string // "topics create"
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd, format string, a ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, a...)}
}

// command is one command's flags and words. Every flag is also read from an
// environment variable, shown in --help: STRATA_<FLAG> (upper case, '-' as '_') for a
// flag that means the same to every command that has it (the server flags, shared by
// dev, serve and lambda through their helpers; --server, --api-key and --timeout),
// STRATA_<COMMAND>_<FLAG> for a command's own (STRATA_BENCH_DURATION beside
// STRATA_TORTURE_DURATION). A flag on the command line wins over the environment.
type command struct {
	name     string // as typed: "topics create"
	synopsis string // "strata topics create NAME [flags]"
	about    string // what it does, a sentence or two
	cmd      *cobra.Command
	fs       *pflag.FlagSet
	// server is set by addServerFlags: the command talks to a server and takes the
	// global flags.
	server *serverFlags
	// beforeEnv, when set, may change the environment before the flags read it
	// (lambda: secrets from Secrets Manager).
	beforeEnv func(context.Context, *env) (*env, error)
}

// sharedAnnotation marks a flag whose environment variable is STRATA_<FLAG>.
const sharedAnnotation = "strata_shared_env"

func newCommand(name, synopsis, about string) *command {
	// The first sentence, until the tree gives it the command list's words.
	short, _, _ := strings.Cut(strings.ReplaceAll(about, "\n", " "), ". ")
	c := &command{name: name, synopsis: synopsis, about: about,
		cmd: &cobra.Command{Use: name, Short: strings.TrimSuffix(strings.TrimSpace(short), "."), Long: about}}
	c.fs = c.cmd.Flags()
	return c
}

// shared marks the flags defined from now until the returned function is called as
// meaning the same to every command (environment STRATA_<FLAG>): a helper that adds
// the same flags to several commands starts with defer c.shared()().
func (c *command) shared() func() {
	before := map[string]bool{}
	c.fs.VisitAll(func(f *pflag.Flag) { before[f.Name] = true })
	return func() {
		c.fs.VisitAll(func(f *pflag.Flag) {
			if !before[f.Name] {
				_ = c.fs.SetAnnotation(f.Name, sharedAnnotation, []string{"true"})
			}
		})
	}
}

// shareEnv marks named flags as meaning what they mean elsewhere (check's --catalog
// is the nodes' catalog).
func (c *command) shareEnv(names ...string) {
	for _, n := range names {
		if err := c.fs.SetAnnotation(n, sharedAnnotation, []string{"true"}); err != nil {
			panic("strata: " + c.name + ": " + err.Error())
		}
	}
}

// envName is the environment variable of a flag of command cmd ("topics create").
func envName(cmd string, f *pflag.Flag) string {
	name := f.Name
	if _, shared := f.Annotations[sharedAnnotation]; !shared && cmd != "" {
		name = cmd + "_" + name
	}
	return "STRATA_" + strings.ToUpper(strings.NewReplacer("-", "_", " ", "_").Replace(name))
}

// envSetter is implemented by flag values that read the environment differently from
// the command line (lists: the variable holds several values).
type envSetter interface {
	SetEnv(string) error
}

// usage writes the command's help: what it does, its flags with their environment
// variables, and the global flags when it takes them.
func (c *command) usage(w io.Writer, globals *serverFlags) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", c.synopsis, c.about)
	var flags []*pflag.Flag
	c.fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && !f.Hidden && (globals.flags() == nil || globals.flags().Lookup(f.Name) == nil) {
			flags = append(flags, f)
		}
	})
	if len(flags) > 0 {
		fmt.Fprintf(w, "\nFlags (each also read from the environment variable shown):\n")
		for _, f := range flags {
			writeFlag(w, c.name, f)
		}
	}
	if c.server != nil {
		fmt.Fprintf(w, "\nGlobal flags (before or after the command):\n")
		globals.flags().VisitAll(func(f *pflag.Flag) { writeFlag(w, "", f) })
	}
	fmt.Fprintf(w, "\n  -h, --help\n      this help\n")
}

func writeFlag(w io.Writer, cmd string, f *pflag.Flag) {
	name, use := pflag.UnquoteUsage(f)
	fmt.Fprintf(w, "  --%s", f.Name)
	if name != "" && f.NoOptDefVal == "" {
		fmt.Fprintf(w, " %s", name)
	}
	fmt.Fprintf(w, "\n      %s", strings.ReplaceAll(use, "\n", "\n      "))
	if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
		fmt.Fprintf(w, " (default %s)", f.DefValue)
	}
	fmt.Fprintf(w, "\n      env %s", envName(cmd, f))
	if _, ok := f.Value.(envSetter); ok {
		fmt.Fprintf(w, " (space-separated)")
	}
	fmt.Fprintln(w)
}

// hinted replaces pflag's parse error with what a value should look like.
type hinted struct {
	pflag.Value
	hint string
}

func (h hinted) Set(v string) error {
	if err := h.Value.Set(v); err != nil {
		return errors.New(h.hint)
	}
	return nil
}

// addHints wraps the standard flag types so that a bad value says what is expected.
func (c *command) addHints() {
	c.fs.VisitAll(func(f *pflag.Flag) {
		if _, done := f.Value.(hinted); done {
			return
		}
		switch f.Value.Type() {
		case "duration":
			f.Value = hinted{f.Value, "want a duration such as 50ms, 2s or 1m30s"}
		case "bool":
			f.Value = hinted{f.Value, "want true or false"}
		case "int", "int64", "int32":
			f.Value = hinted{f.Value, "want a whole number"}
		}
	})
}

// applyEnv sets every flag not given on the command line from its environment
// variable, when that is set.
func (c *command) applyEnv(getenv func(string) string) error {
	var envErr error
	visit := func(f *pflag.Flag, cmd string) {
		if f.Changed || envErr != nil {
			return
		}
		name := envName(cmd, f)
		v := getenv(name)
		if v == "" {
			return
		}
		var err error
		if es, ok := f.Value.(envSetter); ok {
			err = es.SetEnv(v)
		} else {
			err = f.Value.Set(v)
		}
		if err != nil {
			envErr = usagef(c.name, "environment variable %s=%q: %v (it sets --%s)", name, redact.String(v), err, f.Name)
		}
	}
	c.fs.VisitAll(func(f *pflag.Flag) { visit(f, c.name) })
	if c.server != nil && c.cmd.HasParent() {
		c.cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { visit(f, "") })
	}
	return envErr
}

// parse parses args as the command line of c alone (no tree: the bench's in-process
// node parses serve's flags so), then the environment, and returns the positional
// arguments.
func (c *command) parse(args []string, getenv func(string) string) ([]string, error) {
	c.addHints()
	if err := c.fs.Parse(args); err != nil {
		return nil, usagef(c.name, "%v", err)
	}
	if err := c.applyEnv(getenv); err != nil {
		return nil, err
	}
	return c.fs.Args(), nil
}

// stringList is a repeatable flag (--config a=1 --config b=2). In the environment it
// holds several space-separated values; the command line, when used, replaces them.
type stringList struct {
	vals    []string
	fromEnv bool
}

func (l *stringList) String() string { return strings.Join(l.vals, " ") }

func (l *stringList) Type() string { return "strings" }

func (l *stringList) Set(v string) error {
	if l.fromEnv {
		l.vals, l.fromEnv = nil, false
	}
	l.vals = append(l.vals, v)
	return nil
}

func (l *stringList) SetEnv(v string) error {
	l.vals, l.fromEnv = strings.Fields(v), true
	return nil
}

// keyValues parses k=v items (--config) into a map, refusing duplicates and empty keys.
func keyValues(items []string, flagName string) (map[string]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(items))
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want KEY=VALUE, e.g. --%s retention.ms=86400000", flagName, it, flagName)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("--%s: %s given twice", flagName, k)
		}
		m[k] = v
	}
	return m, nil
}

// byteSize is a size flag: a number of bytes with an optional unit (KiB, MiB, GiB, TiB;
// KB, MB, GB, TB are decimal; k, m, g are taken as binary).
type byteSize int64

func (b *byteSize) String() string { return formatBytes(int64(*b)) }

func (b *byteSize) Type() string { return "size" }

func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	mult, ok := byteUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit, e.g. 8MiB, 512KiB, 1GiB", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit, e.g. 8MiB", s)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int64(v), nil
}

func formatBytes(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// oneOfFlag is a string flag limited to a few choices.
type oneOfFlag struct {
	val     string
	choices []string
}

func (o *oneOfFlag) String() string { return o.val }

func (o *oneOfFlag) Type() string { return "string" }

func (o *oneOfFlag) Set(v string) error {
	for _, c := range o.choices {
		if v == c {
			o.val = v
			return nil
		}
	}
	return fmt.Errorf("%q: use one of %s", v, strings.Join(o.choices, ", "))
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
