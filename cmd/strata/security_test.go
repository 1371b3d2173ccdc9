package main

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/tlsreload/tlstest"
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

// TestTLSListener: with --tls-cert and --tls-key the API is served over HTTPS, a plain
// HTTP request is refused before it reaches a handler, and a certificate replaced on
// disk is served without a restart.
func TestTLSListener(t *testing.T) {
	dir := t.TempDir()
	a, b := tlstest.New(t, "first"), tlstest.New(t, "second")
	certFile, keyFile := a.Write(t, dir)
	p := startInProcess(t, nil, "serve", "--catalog", "sqlite:"+filepath.Join(dir, "catalog.db"), "--create",
		"--bucket", "file://"+filepath.Join(dir, "objects"), "--listen", "127.0.0.1:0",
		"--tls-cert", certFile, "--tls-key", keyFile, "--tls-required")
	if !strings.HasPrefix(p.url, "https://") {
		t.Fatalf("serve did not serve HTTPS:\n%s", p.out)
	}
	// Both certificates are trusted: the test looks at which one is presented.
	pool := a.Pool.Clone()
	pool.AddCert(b.Cert)
	newClient := func() *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	}
	presented := func() string {
		t.Helper()
		resp, err := newClient().Get(p.url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("/readyz over HTTPS: %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	if got := presented(); got != "first" {
		t.Errorf("certificate %q, want first", got)
	}

	// Plain HTTP on the same port: refused, and nothing it asked for happens.
	plain := "http://" + strings.TrimPrefix(p.url, "https://")
	resp, err := http.Post(plain+"/v1/topics", "application/json", strings.NewReader(`{"name":"plain","partitions":1}`))
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), "HTTPS") {
			t.Errorf("plain HTTP: %d %s; want 400 refused", resp.StatusCode, body)
		}
	}
	resp, err = newClient().Get(p.url + "/v1/topics/plain")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("the plain request created its topic: GET over HTTPS answered %d", resp.StatusCode)
	}

	// Renewed on disk: served within seconds, no restart.
	b.Write(t, dir)
	deadline := time.Now().Add(15 * time.Second)
	for presented() != "second" {
		if time.Now().After(deadline) {
			t.Fatalf("the replaced certificate was not served within 15s:\n%s", p.out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code := p.exit(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	if !strings.Contains(p.out.String(), "certificate reloaded") {
		t.Errorf("the reload was not logged")
	}
}

func TestTLSFlagValidation(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := tlstest.New(t, "a").Write(t, dir)
	other := tlstest.New(t, "b")
	otherKey := filepath.Join(dir, "other-key.pem")
	tlstest.WriteFile(t, otherKey, other.KeyPEM)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-required"}, "--tls-required: give --tls-cert and --tls-key"},
		{[]string{"--tls-cert", certFile}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", certFile, "--tls-key", otherKey}, "private key does not match"},
		{[]string{"--tls-cert", filepath.Join(dir, "nope.pem"), "--tls-key", keyFile}, "nope.pem"},
	} {
		for _, cmd := range [][]string{{"dev", "--data", dir}, {"serve", "--catalog", "sqlite:x.db", "--create", "--bucket", "file:///tmp/x"}} {
			code, _, errOut := runCLI(t, nil, "", append(cmd, tc.args...)...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Errorf("%s %v: exit %d: %s; want %q", cmd[0], tc.args, code, errOut, tc.want)
			}
		}
	}
	// STRATA_TLS_REQUIRED in a deployment template refuses a node without certificate.
	code, _, errOut := runCLI(t, map[string]string{"STRATA_TLS_REQUIRED": "true"}, "", "dev", "--data", dir)
	if code != 2 || !strings.Contains(errOut, "--tls-required") {
		t.Errorf("STRATA_TLS_REQUIRED without a certificate: exit %d: %s", code, errOut)
	}
}

// TestReadmeDocumentsServerFlags: every flag of the server commands is in the README.
func TestReadmeDocumentsServerFlags(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range verbs() {
		if v.name != "serve" && v.name != "dev" && v.name != "lambda" {
			continue
		}
		cmd, _ := v.new()
		cmd.fs.VisitAll(func(f *pflag.Flag) {
			if !strings.Contains(string(readme), "`--"+f.Name+"`") {
				t.Errorf("README.md does not document strata %s --%s", v.name, f.Name)
			}
		})
	}
}
