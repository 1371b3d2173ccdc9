package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

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

// command is one subcommand's flag set. Every flag is also read from the environment
// variable STRATA_<NAME> (upper case, '-' as '_'), shown in -h; a flag on the command
// line wins over the environment.
type command struct {
	name     string // as typed: "topics create"
	synopsis string // "strata topics create NAME [flags]"
	about    string // what it does, a sentence or two
	fs       *flag.FlagSet
}

func newCommand(name, synopsis, about string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by run
	return &command{name: name, synopsis: synopsis, about: about, fs: fs}
}

// envName is the environment variable of a flag.
func envName(flagName string) string {
	return "STRATA_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// envSetter is implemented by flag values that read the environment differently from
// the command line (lists: the variable holds several values).
type envSetter interface {
	SetEnv(string) error
}

// usage writes the command's help.
func (c *command) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", c.synopsis, c.about)
	var flags []*flag.Flag
	c.fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	if len(flags) == 0 {
		return
	}
	fmt.Fprintf(w, "\nFlags (each also read from the environment variable shown):\n")
	for _, f := range flags {
		name, use := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(w, " %s", name)
		}
		fmt.Fprintf(w, "\n      %s", strings.ReplaceAll(use, "\n", "\n      "))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "\n      env %s", envName(f.Name))
		if _, ok := f.Value.(envSetter); ok {
			fmt.Fprintf(w, " (space-separated)")
		}
		fmt.Fprintln(w)
	}
}

// hinted replaces the flag package's bare "parse error" with what a value should
// look like.
type hinted struct {
	flag.Value
	hint string
}

func (h hinted) Set(v string) error {
	if err := h.Value.Set(v); err != nil {
		return errors.New(h.hint)
	}
	return nil
}

type hintedBool struct{ hinted }

func (hintedBool) IsBoolFlag() bool { return true }

// addHints wraps the standard flag types so that a bad value says what is expected.
func (c *command) addHints() {
	c.fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		switch g.Get().(type) {
		case time.Duration:
			f.Value = hinted{f.Value, "want a duration such as 50ms, 2s or 1m30s"}
		case bool:
			f.Value = hintedBool{hinted{f.Value, "want true or false"}}
		case int, int64:
			f.Value = hinted{f.Value, "want a whole number"}
		}
	})
}

// parse applies the environment, then the command line, whose flags may come before,
// between or after the positional arguments (strata topics create orders --partitions
// 3). It returns the positional arguments. -h returns flag.ErrHelp.
func (c *command) parse(args []string, getenv func(string) string) ([]string, error) {
	c.addHints()
	var envErr error
	c.fs.VisitAll(func(f *flag.Flag) {
		env := envName(f.Name)
		v := getenv(env)
		if v == "" || envErr != nil {
			return
		}
		var err error
		if es, ok := f.Value.(envSetter); ok {
			err = es.SetEnv(v)
		} else {
			err = f.Value.Set(v)
		}
		if err != nil {
			envErr = usagef(c.name, "environment variable %s=%q: %v (it sets --%s)", env, redact.String(v), err, f.Name)
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef(c.name, "%v", err)
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// flag stops at the first non-flag; "--" ends flags for good.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// stringList is a repeatable flag (--config a=1 --config b=2). In the environment it
// holds several space-separated values; the command line, when used, replaces them.
type stringList struct {
	vals    []string
	fromEnv bool
}

func (l *stringList) String() string { return strings.Join(l.vals, " ") }

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
