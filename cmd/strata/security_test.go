package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/testsvc"
)

const testKey = "k-0123456789abcdef0123456789"

// get answers GET url with the key (none when ""): status and body.
func get(t *testing.T, url, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDevAPIKeys: dev takes keys like serve (flag or STRATA_API_KEYS) and then refuses
// requests without one; the probes stay open.
func TestDevAPIKeys(t *testing.T) {
	for name, setup := range map[string]func(data string) (map[string]string, []string){
		"env": func(data string) (map[string]string, []string) {
			return map[string]string{"STRATA_API_KEYS": testKey}, nil
		},
		"flag": func(data string) (map[string]string, []string) { return nil, []string{"--api-keys", testKey} },
	} {
		t.Run(name, func(t *testing.T) {
			data := t.TempDir()
			vars, extra := setup(data)
			p := startInProcess(t, vars, append([]string{"dev", "--data", data, "--listen", "127.0.0.1:0"}, extra...)...)
			if p.url == "" {
				t.Fatalf("dev did not serve:\n%s", p.out)
			}
			if code, body := get(t, p.url+"/v1/topics", ""); code != 401 || !strings.Contains(body, `"unauthorized"`) {
				t.Errorf("without a key: %d %s", code, body)
			}
			if code, body := get(t, p.url+"/v1/topics", "wrong-key-0123456789"); code != 401 {
				t.Errorf("with a wrong key: %d %s", code, body)
			}
			if code, body := get(t, p.url+"/v1/topics", testKey); code != 200 {
				t.Errorf("with the key: %d %s", code, body)
			}
			if code, _ := get(t, p.url+"/readyz", ""); code != 200 {
				t.Errorf("/readyz without a key: %d", code)
			}
			if !strings.Contains(p.out.String(), "API keys are required") {
				t.Errorf("the banner does not say keys are required:\n%s", p.out)
			}
			if strings.Contains(p.out.String(), testKey) {
				t.Errorf("the output shows the key")
			}
		})
	}
	code, _, errOut := runCLI(t, map[string]string{"STRATA_API_KEYS": "short"}, "", "dev", "--data", t.TempDir())
	if code != 2 || !strings.Contains(errOut, "--api-keys: key 1") {
		t.Errorf("dev with a bad key: exit %d: %s", code, errOut)
	}
}

// TestKeylessWarning: serve and dev warn at start-up when they serve without keys on
// an address other machines can reach, and only then.
func TestKeylessWarning(t *testing.T) {
	dir := t.TempDir()
	serve := []string{"serve", "--catalog", "sqlite:" + filepath.Join(dir, "catalog.db"), "--create", "--bucket", "file://" + filepath.Join(dir, "objects")}
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"serve on every address", append(slices.Clone(serve), "--listen", "0.0.0.0:0"), true},
		{"serve on :0", append(slices.Clone(serve), "--listen", ":0"), true},
		{"serve on loopback", append(slices.Clone(serve), "--listen", "127.0.0.1:0"), false},
		{"serve on every address with keys", append(slices.Clone(serve), "--listen", "0.0.0.0:0", "--api-keys", testKey), false},
		{"dev on loopback", []string{"dev", "--data", filepath.Join(dir, "dev"), "--listen", "127.0.0.1:0"}, false},
		{"dev on every address", []string{"dev", "--data", filepath.Join(dir, "dev"), "--listen", "0.0.0.0:0"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startInProcess(t, nil, tc.args...)
			if p.url == "" {
				t.Fatalf("did not serve:\n%s", p.out)
			}
			if code := p.exit(t); code != 0 {
				t.Errorf("exit %d", code)
			}
			if got := strings.Contains(p.out.String(), "serving without API keys on"); got != tc.warn {
				t.Errorf("warned %v, want %v:\n%s", got, tc.warn, p.out)
			}
		})
	}
}

// TestReadyzNamesDependency: /readyz names the dependency that does not answer —
// a dead bucket, then a stopped catalog too — and never shows its raw error, which
// goes to the log.
func TestReadyzNamesDependency(t *testing.T) {
	pg := testsvc.StartPrivatePostgres(t)
	dead := "s3://AKIAEXAMPLE:" + testSecret + "@mybucket/p?endpoint=http://127.0.0.1:1&region=us-east-1"
	p := startInProcess(t, nil, "serve", "--catalog", pg.DSN, "--bucket", dead, "--listen", "127.0.0.1:0")
	if p.url == "" {
		t.Fatalf("serve did not start:\n%s", p.out)
	}
	check := func(want []string) {
		t.Helper()
		code, body := get(t, p.url+"/readyz", "")
		var prob struct {
			Code         string
			Detail       string
			Dependencies []string
		}
		if err := json.Unmarshal([]byte(body), &prob); err != nil || code != 503 || prob.Code != "not_ready" || !slices.Equal(prob.Dependencies, want) {
			t.Errorf("/readyz: %d %s; want 503 not_ready naming %v", code, body, want)
		}
		for _, raw := range []string{"127.0.0.1", "mybucket", "refused", "dial", "strata-readyz-probe", testSecret} {
			if strings.Contains(body, raw) {
				t.Errorf("/readyz shows the raw error (%q): %s", raw, body)
			}
		}
	}
	check([]string{"bucket"})
	pg.Stop(t, "immediate")
	check([]string{"catalog", "bucket"})
	log := p.out.String()
	if !strings.Contains(log, `"msg":"not ready"`) || !strings.Contains(log, "127.0.0.1:1") {
		t.Errorf("the log lacks the causes:\n%s", log)
	}
	if strings.Contains(log, testSecret) {
		t.Errorf("the log shows the bucket's secret key")
	}
}
