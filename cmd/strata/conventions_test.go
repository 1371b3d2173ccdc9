package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The command line's conventions, as kubectl, gh and rpk have them.

// Global flags go before or after the verb, or come from the environment.
func TestGlobalFlagsAnywhere(t *testing.T) {
	f, url := newFakeServer(t)
	f.topics["orders"] = 3
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
	}{
		{"before the verb", nil, []string{"--server", url, "topics", "list"}},
		{"between group and verb", nil, []string{"topics", "--server", url, "list"}},
		{"after the verb", nil, []string{"topics", "list", "--server", url}},
		{"with =", nil, []string{"--server=" + url, "topics", "list"}},
		{"one dash, as the flag package took it", nil, []string{"-server", url, "topics", "list"}},
		{"environment", map[string]string{"STRATA_SERVER": url}, []string{"topics", "list"}},
	} {
		code, stdout, stderr := runCLI(t, tc.vars, "", tc.args...)
		if code != 0 || !strings.Contains(stdout, "orders  3") {
			t.Errorf("%s: strata %s: exit %d, %q %q", tc.name, strings.Join(tc.args, " "), code, stdout, stderr)
		}
	}
	// A verb's own flags, one dash or two, before or after its argument.
	for _, args := range [][]string{
		{"topics", "create", "a", "--partitions", "2", "--server", url},
		{"--server", url, "topics", "create", "--partitions", "2", "b"},
		{"topics", "create", "-partitions", "2", "c", "-server=" + url},
	} {
		code, stdout, stderr := runCLI(t, nil, "", args...)
		if code != 0 || !strings.Contains(stdout, "with 2 partitions") {
			t.Errorf("strata %s: exit %d, %q %q", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	// The server's commands take no global flag: it would be silently ignored.
	code, _, stderr := runCLI(t, nil, "", "--server", url, "dev")
	if code != 2 || !strings.Contains(stderr, "--server is for the commands that talk to a server") {
		t.Errorf("strata --server URL dev: exit %d, %q", code, stderr)
	}
}

func TestSuggestions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topics", "lsit"}, `unknown command "lsit" for "strata topics"; did you mean "list"?`},
		{[]string{"topcs", "list"}, `unknown command "topcs" for "strata"; did you mean "topics"?`},
		{[]string{"groups", "delte", "g"}, `did you mean "delete"?`},
		{[]string{"consme", "orders"}, `did you mean "consume"?`},
		{[]string{"topics", "create", "x", "--partiton", "3"}, "unknown flag: --partiton; did you mean --partitions?"},
	} {
		code, stdout, stderr := runCLI(t, nil, "", tc.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("strata %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.want)
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	for shell, marker := range map[string]string{
		"bash":       "__start_strata",
		"zsh":        "#compdef strata",
		"fish":       "complete -c strata",
		"powershell": "Register-ArgumentCompleter",
	} {
		code, stdout, stderr := runCLI(t, nil, "", "completion", shell)
		if code != 0 || !strings.Contains(stdout, marker) {
			t.Errorf("strata completion %s: exit %d, %d bytes without %q; stderr %q", shell, code, len(stdout), marker, stderr)
		}
	}
	// The scripts ask the binary: it answers the verbs of a group and a verb's flags.
	code, stdout, _ := runCLI(t, nil, "", "__complete", "topics", "")
	for _, verb := range []string{"create", "list", "describe", "delete", "alter"} {
		if code != 0 || !strings.Contains(stdout, verb) {
			t.Errorf("completing 'strata topics ': exit %d, %q lacks %s", code, stdout, verb)
		}
	}
	code, stdout, _ = runCLI(t, nil, "", "__complete", "consume", "orders", "--fr")
	if code != 0 || !strings.Contains(stdout, "--from") {
		t.Errorf("completing 'strata consume orders --fr': exit %d, %q", code, stdout)
	}
}

// Every command, groups and cobra's own included, answers --help on stdout, exit 0.
func TestHelpForEveryCommand(t *testing.T) {
	tr := newTree(t.Context(), discard)
	n := 0
	walk(tr.root, func(c *cobra.Command) {
		if !documented(c) {
			return
		}
		n++
		for _, h := range []string{"--help", "-h", "-help"} {
			args := append(strings.Fields(commandName(c)), h)
			code, stdout, stderr := runCLI(t, nil, "", args...)
			if code != 0 || !strings.Contains(stdout, "Usage") || stderr != "" {
				t.Errorf("strata %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, truncateS(stdout, 80), stderr)
			}
		}
	})
	if n < 25 {
		t.Errorf("only %d commands in the tree", n)
	}
}

// One environment variable, one meaning: a variable read by several commands is a
// shared flag's, STRATA_<FLAG>; every other is STRATA_<COMMAND>_<FLAG>.
func TestEnvironmentScheme(t *testing.T) {
	tr := newTree(t.Context(), discard)
	readers := map[string][]string{}
	for c, cmd := range tr.cmds {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			name := envName(cmd.name, f)
			_, shared := f.Annotations[sharedAnnotation]
			want := "STRATA_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
			if !shared {
				want = "STRATA_" + strings.ToUpper(strings.NewReplacer(" ", "_", "-", "_").Replace(cmd.name+"_"+f.Name))
			}
			if name != want {
				t.Errorf("%s --%s: env %s, want %s", cmd.name, f.Name, name, want)
			}
			if !shared {
				readers[name] = append(readers[name], cmd.name)
			}
		})
	}
	for name, cmds := range readers {
		if len(cmds) > 1 {
			t.Errorf("%s is read by %v: a command's own variable is its alone", name, cmds)
		}
	}
	// The variables deployments set keep their names.
	for _, tc := range []struct{ cmd, flag, want string }{
		{"serve", "catalog", "STRATA_CATALOG"}, {"serve", "bucket", "STRATA_BUCKET"}, {"serve", "api-keys", "STRATA_API_KEYS"},
		{"dev", "listen", "STRATA_LISTEN"}, {"lambda", "streaming", "STRATA_STREAMING"}, {"serve", "tls-required", "STRATA_TLS_REQUIRED"},
		{"check", "catalog", "STRATA_CATALOG"}, {"dev", "data", "STRATA_DATA"},
		{"bench", "duration", "STRATA_BENCH_DURATION"}, {"torture", "duration", "STRATA_TORTURE_DURATION"},
		{"produce", "batch", "STRATA_PRODUCE_BATCH"}, {"bench", "batch", "STRATA_BENCH_BATCH"},
		{"bench", "catalog", "STRATA_BENCH_CATALOG"},
	} {
		var got string
		for c, cmd := range tr.cmds {
			if cmd.name == tc.cmd {
				got = envName(cmd.name, c.Flags().Lookup(tc.flag))
			}
		}
		if got != tc.want {
			t.Errorf("%s --%s: env %s, want %s", tc.cmd, tc.flag, got, tc.want)
		}
	}
	// And they are read: STRATA_BENCH_DURATION reaches bench, STRATA_DURATION does not.
	code, _, stderr := runCLI(t, map[string]string{"STRATA_BENCH_DURATION": "nonsense"}, "", "bench")
	if code != 2 || !strings.Contains(stderr, "STRATA_BENCH_DURATION") {
		t.Errorf("bench with STRATA_BENCH_DURATION=nonsense: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, map[string]string{"STRATA_DURATION": "nonsense"}, "", "torture", "--history", "/no/such/file")
	if code != 1 || strings.Contains(stderr, "STRATA_DURATION") {
		t.Errorf("torture with STRATA_DURATION set: exit %d, %q (the variable is not torture's)", code, stderr)
	}
}

func truncateS(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
