package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The README is run, not only read. Its shell blocks, in order, against a fresh
// `strata dev` (the binary this test builds, on PATH, in an empty directory; the
// README's localhost:8080 is the test's address): each must succeed, and each line of
// a command's output the README shows after it ("# → ...") must match, with
// timestamps, times and request ids normalised and "..." matching anything. A block
// shown but not run (a deployment, a service, a run that lasts) says why on the line
// before it: <!-- readme: skip: REASON -->.

const readmePath = "../../README.md"

// readmeBlock is one fenced block of the README.
type readmeBlock struct {
	lang, text string
	line       int    // of the opening fence
	skip       string // the reason it is not run
}

var skipMarker = regexp.MustCompile(`^<!-- readme: skip: (.+) -->$`)

func readmeBlocks(md string) []readmeBlock {
	var out []readmeBlock
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok || lang == "" {
			continue
		}
		b := readmeBlock{lang: lang, line: i + 1}
		for j := i - 1; j >= 0; j-- {
			if prev := strings.TrimSpace(lines[j]); prev != "" {
				if m := skipMarker.FindStringSubmatch(prev); m != nil {
					b.skip = m[1]
				}
				break
			}
		}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		b.text = strings.Join(body, "\n")
		out = append(out, b)
	}
	return out
}

// shellCommand is one command of a block and the output the README shows for it.
type shellCommand struct {
	text string
	want []string
}

var heredoc = regexp.MustCompile(`<<-?'?"?(\w+)'?"?`)

// splitCommands cuts a block into commands: a command runs on over lines ending in a
// backslash, inside an open single quote, or to the end of a here-document. Comment
// lines are comments, but "# → " lines are the output of the command before them.
func splitCommands(block string) []shellCommand {
	var out []shellCommand
	lines := strings.Split(block, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		switch {
		case t == "":
			continue
		case strings.HasPrefix(t, "# → ") || t == "# →":
			if len(out) > 0 {
				out[len(out)-1].want = append(out[len(out)-1].want, strings.TrimPrefix(strings.TrimPrefix(t, "# →"), " "))
			}
			continue
		case strings.HasPrefix(t, "#"):
			continue
		}
		cmd := []string{l}
		end := ""
		if m := heredoc.FindStringSubmatch(l); m != nil {
			end = m[1]
		}
		quotes := strings.Count(stripComment(l), "'")
		for i+1 < len(lines) && (end != "" || strings.HasSuffix(l, "\\") || quotes%2 == 1) {
			i++
			l = lines[i]
			cmd = append(cmd, l)
			if end != "" {
				if strings.TrimSpace(l) == end {
					end = ""
					l = ""
				}
				continue
			}
			quotes += strings.Count(l, "'")
		}
		out = append(out, shellCommand{text: strings.Join(cmd, "\n")})
	}
	return out
}

// stripComment drops a trailing "  # comment" outside quotes.
func stripComment(l string) string {
	in := false
	for i, r := range l {
		switch {
		case r == '\'':
			in = !in
		case r == '#' && !in && i > 0 && l[i-1] == ' ':
			return l[:i]
		}
	}
	return l
}

var (
	msTimestamp = regexp.MustCompile(`\b1[0-9]{12}\b`)
	rfc3339     = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
	requestID   = regexp.MustCompile(`"request_id":"[^"]*"`)
)

// normalise replaces what varies from run to run.
func normalise(s string) string {
	s = msTimestamp.ReplaceAllString(s, "<ms>")
	s = rfc3339.ReplaceAllString(s, "<time>")
	s = requestID.ReplaceAllString(s, `"request_id":"<id>"`)
	return strings.TrimRight(s, " ")
}

// matchLines matches a command's output against the README's lines; a line "..."
// alone stands for any number of lines.
func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "..." {
		for i := 0; i <= len(got); i++ {
			if matchLines(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && matches(want[0], got[0]) && matchLines(want[1:], got[1:])
}

// matches reports whether got matches a README line, where "..." matches anything.
func matches(want, got string) bool {
	parts := strings.Split(normalise(want), "...")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(normalise(got))
}

func TestReadmeRuns(t *testing.T) {
	md, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(string(md))
	bin := buildStrata(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	// --connect-file-dirs as the README's Connect quick start gives it.
	dev, _ := startStrata(t, bin, nil, addr, "dev", "--data", filepath.Join(dir, "strata-data"), "--listen", addr, "--log-level", "warn", "--kafka-listen", "",
		"--connect-file-dirs", "/tmp")
	defer dev.stop(t)
	env := append(cleanEnv(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), "STRATA_SERVER=http://"+addr)
	addrs := strings.NewReplacer("localhost:8080", addr, "127.0.0.1:8080", addr)

	ran, skipped, checked := 0, 0, 0
	for _, b := range blocks {
		if b.lang != "sh" && b.lang != "bash" {
			continue
		}
		if b.skip != "" {
			skipped++
			continue
		}
		ran++
		cmds := splitCommands(b.text)
		var script strings.Builder
		script.WriteString("set -euo pipefail\n")
		for i, c := range cmds {
			fmt.Fprintf(&script, "printf '\\n@@%d@@\\n'\n%s\n", i, addrs.Replace(c.text))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		sh := exec.CommandContext(ctx, "bash", "-c", script.String())
		sh.Dir, sh.Env = dir, env
		var stdout, stderr bytes.Buffer
		sh.Stdout, sh.Stderr = &stdout, &stderr
		err := sh.Run()
		cancel()
		outs := splitOutputs(stdout.String(), len(cmds))
		if err != nil {
			last := 0
			for i := range cmds {
				if outs[i] != nil {
					last = i
				}
			}
			t.Fatalf("README.md:%d: the block failed (%v) at:\n%s\nstdout:\n%s\nstderr:\n%s", b.line, err, cmds[last].text, stdout.String(), stderr.String())
		}
		for i, c := range cmds {
			if len(c.want) == 0 {
				continue
			}
			checked++
			if got := outs[i]; !matchLines(c.want, got) {
				t.Errorf("README.md:%d: %s\nprinted:\n  %s\nthe README says:\n  %s", b.line, c.text, strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		}
	}
	t.Logf("%d blocks run, %d shown only; %d outputs checked", ran, skipped, checked)
	if ran < 4 || checked < 15 {
		t.Errorf("only %d blocks ran, %d outputs checked", ran, checked)
	}
}

// splitOutputs cuts a script's stdout at the markers printed before each command:
// the lines each printed (nil for a command that did not run).
func splitOutputs(stdout string, n int) [][]string {
	out := make([][]string, n)
	cur := -1
	for _, l := range strings.Split(stdout, "\n") {
		var i int
		if _, err := fmt.Sscanf(l, "@@%d@@", &i); err == nil && strings.HasPrefix(l, "@@") {
			cur = i
			out[cur] = []string{}
			continue
		}
		if cur >= 0 {
			out[cur] = append(out[cur], l)
		}
	}
	for i := range out {
		// The marker starts with a newline: drop the empty line before the next one.
		for len(out[i]) > 0 && out[i][len(out[i])-1] == "" {
			out[i] = out[i][:len(out[i])-1]
		}
	}
	return out
}

// TestReadmeConventions: every shell block is run or says why not; Go examples name
// their imports in full; links point to files of the repository.
func TestReadmeConventions(t *testing.T) {
	md, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range readmeBlocks(string(md)) {
		switch b.lang {
		case "sh", "bash", "go", "text", "json":
		default:
			t.Errorf("README.md:%d: a %q block: use sh (run, or marked skip), go, text or json", b.line, b.lang)
		}
		if b.lang != "go" {
			continue
		}
		for pkg, path := range map[string]string{
			"client": "github.com/strata-io/strata/client", "streams": "github.com/strata-io/strata/streams",
			"serde": "github.com/strata-io/strata/streams/serde", "window": "github.com/strata-io/strata/streams/window",
			"kgo": "github.com/twmb/franz-go/pkg/kgo", "kadm": "github.com/twmb/franz-go/pkg/kadm",
		} {
			if regexp.MustCompile(`\b`+pkg+`\.[A-Z]`).MatchString(b.text) && !strings.Contains(b.text, `"`+path+`"`) {
				t.Errorf("README.md:%d: the Go example uses %s. without importing %q", b.line, pkg, path)
			}
		}
	}
	// GitHub's anchors: headings lower-cased, punctuation but hyphens dropped, spaces
	// as hyphens.
	anchors := map[string]bool{}
	for _, h := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(md), -1) {
		slug := regexp.MustCompile(`[^\pL\pN -]`).ReplaceAllString(strings.ToLower(h[1]), "")
		anchors[strings.ReplaceAll(slug, " ", "-")] = true
	}
	links := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, m := range links.FindAllStringSubmatch(string(md), -1) {
		target := m[1]
		switch {
		case strings.HasPrefix(target, "#"):
			if !anchors[target[1:]] {
				t.Errorf("README link %s: no such heading", target)
			}
			continue
		case strings.Contains(target, "://"):
			t.Errorf("README links outside the repository: %s", target)
			continue
		}
		path, _, _ := strings.Cut(target, "#")
		if rel := filepath.Clean(path); strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) {
			t.Errorf("README link %s leaves the repository", target)
		} else if _, err := os.Stat(filepath.Join("../..", rel)); err != nil {
			t.Errorf("README link %s: %v", target, err)
		}
	}
}

func TestSplitCommands(t *testing.T) {
	cmds := splitCommands(`# a comment
curl -X POST x -d '{"records":[
  {"key":"a"}]}'
# → {"offsets":[]}
cat > f <<'EOF'
{"value":1}
EOF
strata topics list \
  --json   # inline comment
# → one
# → two`)
	if len(cmds) != 3 || len(cmds[0].want) != 1 || !strings.HasSuffix(cmds[1].text, "EOF") || len(cmds[2].want) != 2 {
		t.Fatalf("%#v", cmds)
	}
	if !matches(`{"t":...,"ts":1767225600000}`, `{"t":"x","ts":1767300000123}`) || matches("a", "b") {
		t.Error("matches")
	}
	if !matchLines([]string{"a", "...", "d"}, []string{"a", "b", "c", "d"}) || !matchLines([]string{"a", "..."}, []string{"a"}) ||
		matchLines([]string{"a", "...", "d"}, []string{"a", "b"}) || matchLines([]string{"a"}, []string{"a", "b"}) {
		t.Error("matchLines")
	}
}
