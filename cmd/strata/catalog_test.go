package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testsvc"
)

// testSecret is a password no run may print.
const testSecret = "hunter2-sekrit"

// inProcess is a server command (serve, dev) running in this process.
type inProcess struct {
	url  string
	out  *lockedBuffer // stdout and stderr: the banner and the log
	done chan int
	stop context.CancelFunc
}

// startInProcess runs a server command in this process with the given environment
// and waits until it serves (or exits: then url is "" and the exit code is in done).
func startInProcess(t *testing.T, vars map[string]string, args ...string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{out: &lockedBuffer{}, done: make(chan int, 1), stop: cancel}
	e := &env{stdin: strings.NewReader(""), stdout: p.out, stderr: p.out, getenv: func(k string) string { return vars[k] }}
	go func() { p.done <- run(ctx, e, args) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-p.done:
			p.done <- code
		case <-time.After(45 * time.Second):
			t.Errorf("%s did not stop within 45s", args[0])
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case code := <-p.done:
			p.done <- code
			return p
		case <-time.After(50 * time.Millisecond):
		}
		for _, line := range strings.Split(p.out.String(), "\n") {
			var rec struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving HTTP API" {
				p.url = rec.URL
				return p
			}
			if u, ok := strings.CutPrefix(line, "Strata dev server on "); ok {
				p.url, _, _ = strings.Cut(u, " ")
				return p
			}
		}
	}
	t.Fatalf("%s did not serve within 60s:\n%s", args[0], p.out.String())
	return nil
}

// exit stops the command and returns its exit code.
func (p *inProcess) exit(t *testing.T) int {
	t.Helper()
	p.stop()
	select {
	case code := <-p.done:
		p.done <- code
		return code
	case <-time.After(45 * time.Second):
		t.Fatal("no exit within 45s")
		return -1
	}
}

// TestCatalogDSNForms starts serve on each form of --catalog (a URL, a libpq keyword
// string, from the flag or from STRATA_CATALOG, SQLite paths) and checks what each run
// prints: never a password, and a refusal that shows both forms for a path that names
// nothing.
func TestCatalogDSNForms(t *testing.T) {
	dsn := testsvc.PostgresDSN(t)
	base, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pass, _ := base.User.Password()
	keyword := testsvc.KeywordDSN(t, dsn)
	wrong := *base
	wrong.User = url.UserPassword(base.User.Username(), testSecret)
	inQuery := *base
	inQuery.User = url.User(base.User.Username())
	q := inQuery.Query()
	q.Set("password", testSecret)
	inQuery.RawQuery = q.Encode()
	wrongKeyword := strings.Replace(keyword, "password='"+pass+"'", "password='"+testSecret+"'", 1)
	dir := t.TempDir()
	newDB := filepath.Join(dir, "new", "catalog.db")
	bucket := "file://" + filepath.Join(dir, "objects")
	common := []string{"--bucket", bucket, "--listen", "127.0.0.1:0", "--log-level", "debug"}

	for _, tc := range []struct {
		name   string
		vars   map[string]string
		args   []string
		serves bool
		code   int      // exit code when it does not serve
		want   []string // in the output
	}{
		{name: "url from the flag", args: []string{"--catalog", base.String()}, serves: true},
		{name: "url from STRATA_CATALOG", vars: map[string]string{"STRATA_CATALOG": base.String()}, serves: true},
		{name: "keyword dsn", args: []string{"--catalog", keyword}, serves: true, want: []string{`"catalog":"host=` + base.Hostname()}},
		{name: "wrong password in the url", args: []string{"--catalog", wrong.String()}, code: 1, want: []string{"password authentication failed"}},
		{name: "wrong password in the query", vars: map[string]string{"STRATA_CATALOG": inQuery.String()}, code: 1, want: []string{"password authentication failed"}},
		{name: "wrong password in a keyword dsn", args: []string{"--catalog", wrongKeyword}, code: 1, want: []string{"password authentication failed"}},
		{name: "new sqlite path", args: []string{"--catalog", "sqlite:" + newDB}, code: 2, want: []string{"no such file (add --create", "postgres://USER:PASSWORD@HOST", "sqlite:PATH"}},
		{name: "missing plain path", args: []string{"--catalog", newDB}, code: 2, want: []string{"no such file, and not a Postgres connection string", "host=HOST user=USER"}},
		{name: "new sqlite path with --create", args: []string{"--catalog", "sqlite:" + newDB, "--create"}, serves: true},
		{name: "existing sqlite path", args: []string{"--catalog", newDB}, serves: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startInProcess(t, tc.vars, append(append([]string{"serve"}, tc.args...), common...)...)
			if tc.serves {
				if p.url == "" {
					t.Fatalf("did not serve:\n%s", p.out)
				}
				resp, err := http.Get(p.url + "/readyz")
				if err != nil || resp.StatusCode != 200 {
					t.Errorf("/readyz: %v %v", resp, err)
				}
				if code := p.exit(t); code != 0 {
					t.Errorf("exit %d", code)
				}
			} else if code := p.exit(t); p.url != "" || code != tc.code {
				t.Errorf("served %q, exit %d; want exit %d", p.url, code, tc.code)
			}
			out := p.out.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			// The test server's real password is also its user name, so look for it
			// where a password would stand.
			for _, leak := range []string{testSecret, ":" + pass + "@", "password=" + pass, "password='" + pass} {
				if strings.Contains(out, leak) {
					t.Errorf("output shows the password (%q)", leak)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "objects")); err != nil {
		t.Errorf("no run served from the bucket: %v", err)
	}
}

// TestHelpHidesSecrets: -h with a password in the environment prints no password,
// nor does a bad value in the environment.
func TestHelpHidesSecrets(t *testing.T) {
	vars := map[string]string{"STRATA_CATALOG": "postgres://u:" + testSecret + "@db/x", "STRATA_API_KEYS": testSecret + "-0123456789"}
	for _, args := range [][]string{{"serve", "-h"}, {"dev", "-h"}, {"check", "-h"}, {"lambda", "-h"}, {"bench", "-h"}} {
		_, out, errOut := runCLI(t, vars, "", args...)
		if strings.Contains(out+errOut, testSecret) {
			t.Errorf("%s shows a secret from the environment", strings.Join(args, " "))
		}
	}
	_, out, errOut := runCLI(t, map[string]string{"STRATA_COMMIT_TIMEOUT": "postgres://u:" + testSecret + "@db/x"}, "", "serve")
	if !strings.Contains(errOut, "STRATA_COMMIT_TIMEOUT") || strings.Contains(out+errOut, testSecret) {
		t.Errorf("a bad environment value: %s", errOut)
	}
}

// TestDevCreatesItsCatalog: dev is the one command that creates a SQLite catalog
// unasked, in its --data directory.
func TestDevCreatesItsCatalog(t *testing.T) {
	data := filepath.Join(t.TempDir(), "fresh")
	p := startInProcess(t, nil, "dev", "--data", data, "--listen", "127.0.0.1:0", "--log-level", "warn")
	if p.url == "" {
		t.Fatalf("dev did not serve:\n%s", p.out)
	}
	if code := p.exit(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	if st, err := os.Stat(filepath.Join(data, "catalog.db")); err != nil || st.Size() == 0 {
		t.Errorf("dev made no catalog: %v", err)
	}
}

// TestCheckMissingCatalog: a mistyped --catalog path fails with the rule's message
// and creates nothing (before, it became an empty catalog whose every object was
// reported stray).
func TestCheckMissingCatalog(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such", "file")
	code, _, errOut := runCLI(t, nil, "", "check", "--catalog", missing, "--bucket", "file://"+filepath.Join(dir, "objects"))
	if code != 2 || !strings.Contains(errOut, fmt.Sprintf("--catalog %q: no such file", missing)) ||
		!strings.Contains(errOut, "postgres://USER:PASSWORD@HOST") || !strings.Contains(errOut, "sqlite:PATH") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI(t, nil, "", "check", "--catalog", "/no/such/file", "--bucket", "file://"+filepath.Join(dir, "objects"))
	if code != 2 || !strings.Contains(errOut, `--catalog "/no/such/file": no such file`) {
		t.Errorf("/no/such/file: exit %d: %s", code, errOut)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("check created %v (%v)", entries, err)
	}
	if _, err := os.Stat("/no/such/file"); err == nil {
		t.Error("/no/such/file exists")
	}
}
