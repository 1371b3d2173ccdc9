package badinput

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/writer"
)

// update rewrites testdata/details.txt from the answers of this run.
var update = flag.Bool("update", false, "rewrite testdata/details.txt with this run's answers")

const detailsFile = "testdata/details.txt"

// answerLog collects each case's answer: status, code and detail, the whole contract
// a person reads. The file is the same for every backend: a detail that names one is a
// leak.
type answerLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *answerLog) add(name string, status int, code, detail string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%s\n\t%d %s: %s", name, status, code, detail))
}

func (l *answerLog) check(t *testing.T) {
	if t.Failed() && !*update {
		return // a broken run says nothing about the details
	}
	l.mu.Lock()
	got := strings.Join(l.lines, "\n") + "\n"
	l.mu.Unlock()
	if *update {
		if err := os.WriteFile(detailsFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(detailsFile)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			g, w := "", ""
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("answers differ from %s at line %d:\n got: %s\nwant: %s\n(go test ./test/badinput -run %s -update rewrites it; review the diff)", detailsFile, i+1, g, w, t.Name())
				return
			}
		}
	}
}

// backendWords name what is behind the API: a detail written for the user names
// topics, partitions, offsets and groups, never the catalog's backend or its ids.
var backendWords = regexp.MustCompile(`(?i)\b(sqlite|postgres|pgx|sqlstate|modernc|topic id|pq:)|%!`)

var word = regexp.MustCompile(`[\pL\pN._-]+`)

// detailProblems says what is wrong with a problem detail: a backend's name or an
// internal id, or a phrase said twice (an error wrapped by several layers that each
// restate what was being done).
func detailProblems(detail string) []string {
	var bad []string
	if m := backendWords.FindString(detail); m != "" {
		bad = append(bad, fmt.Sprintf("names the backend (%q)", m))
	}
	if p := repeatedPhrase(detail, 4); p != "" {
		bad = append(bad, fmt.Sprintf("says %q twice", p))
	}
	return bad
}

// repeatedPhrase returns the first run of n words that occurs twice in s, or "".
func repeatedPhrase(s string, n int) string {
	words := word.FindAllString(strings.ToLower(s), -1)
	seen := map[string]bool{}
	for i := 0; i+n <= len(words); i++ {
		p := strings.Join(words[i:i+n], " ")
		if seen[p] {
			return p
		}
		seen[p] = true
	}
	return ""
}

func TestDetailProblems(t *testing.T) {
	for _, tc := range []struct {
		detail string
		bad    int
	}{
		// The example, as the API answered before.
		{"sqlite: delete records of topic id 1 partition 0 before 100: offset out of range: delete records before 100 of topic id 1 partition 0: want an offset between 0 and the high watermark 2", 2},
		{"postgres: topic \"x\": topic not found", 1},
		{"offset 100 of partition 0 of topic \"orders\" is beyond its high watermark 2: delete records before an offset from 0 to 2", 0},
		{"topic \"orders\" does not exist", 0},
	} {
		if got := detailProblems(tc.detail); len(got) != tc.bad {
			t.Errorf("%q: %q, want %d problems", tc.detail, got, tc.bad)
		}
	}
}

// startSQLiteServer serves an in-process node on SQLite and the filesystem store on a
// real listener (the raw cases write to the socket), configured as startServer's.
func startSQLiteServer(t *testing.T) *server {
	t.Helper()
	n := startNode(t, writer.Config{Linger: 5 * time.Millisecond}, api.Config{BodyTimeout: 2 * time.Second})
	return &server{url: n.URL, store: n.Store, cli: client.New(n.URL)}
}
