package api

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-io/strata/security"
)

const (
	testKey1 = "k1-0123456789abcdef0123456789abcdef"
	testKey2 = "k2-fedcba9876543210fedcba9876543210"
)

// TestAuthRefusesAndWritesNothing: without a key, with a wrong key, a key of another
// scheme or a prefix of a good key, every route but the probes answers 401 and neither
// the catalog nor the writer is reached; each good key works.
func TestAuthRefusesAndWritesNothing(t *testing.T) {
	e := newEnv(t, Config{Auth: AuthConfig{Keys: []string{testKey1, testKey2}}})
	e.createTopic("orders", 1, nil)
	produce := `{"records":[{"value":1}]}`

	bad := []struct {
		name   string
		auth   string
		wantTk bool // WWW-Authenticate carries error="invalid_token"
	}{
		{"no header", "", false},
		{"wrong key", "Bearer " + strings.Repeat("x", len(testKey1)), true},
		{"prefix of a key", "Bearer " + testKey1[:len(testKey1)-1], true},
		{"key plus a byte", "Bearer " + testKey1 + "0", true},
		{"basic scheme", "Basic " + testKey1, true},
		{"bare key", testKey1, true},
		{"empty bearer", "Bearer ", true},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			for _, rq := range []struct{ method, path, body string }{
				{"POST", "/v1/topics/orders/records", produce},
				{"POST", "/v1/topics", `{"name":"new","partitions":1}`},
				{"DELETE", "/v1/topics/orders", ""},
				{"GET", "/v1/topics", ""},
				{"GET", "/v1/topics/orders/partitions/0/records", ""},
				{"GET", "/v1/openapi.json", ""},
				{"GET", "/metrics", ""},
				{"GET", "/no/such/route", ""},
			} {
				rec := e.do(rq.method, rq.path, rq.body, header{"Authorization", tc.auth})
				wantProblem(t, rec, http.StatusUnauthorized, CodeUnauthorized)
				ch := rec.Header().Get("WWW-Authenticate")
				if !strings.HasPrefix(ch, `Bearer realm="strata"`) || strings.Contains(ch, "invalid_token") != tc.wantTk {
					t.Errorf("%s %s: WWW-Authenticate %q", rq.method, rq.path, ch)
				}
				if strings.Contains(rec.Body.String(), testKey1) {
					t.Errorf("the problem echoes the key: %s", rec.Body)
				}
			}
			if w, calls, n := e.c.stats(); w != 0 || calls != 0 || n != 0 {
				t.Fatalf("refused requests reached the cluster: %d catalog writes, %d produce calls, %d records", w, calls, n)
			}
		})
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		if rec := e.do("GET", path, ""); rec.Code != http.StatusOK {
			t.Errorf("%s without a key: %d, want 200 (probes stay open)", path, rec.Code)
		}
	}

	for i, key := range []string{testKey1, testKey2} {
		for _, auth := range []string{"Bearer " + key, "bearer " + key} {
			if rec := e.do("POST", "/v1/topics/orders/records", produce, header{"Authorization", auth}); rec.Code != http.StatusOK {
				t.Fatalf("key %d (%q scheme): produce %d %s", i+1, auth[:6], rec.Code, rec.Body)
			}
		}
		if rec := e.do("GET", "/metrics", "", header{"Authorization", "Bearer " + key}); rec.Code != http.StatusOK {
			t.Errorf("key %d: /metrics %d", i+1, rec.Code)
		}
	}
	if _, calls, n := e.c.stats(); calls != 4 || n != 4 {
		t.Errorf("after four authorised produces: %d produce calls, %d records", calls, n)
	}
}

func TestAuthPublicMetricsAndOff(t *testing.T) {
	e := newEnv(t, Config{Auth: AuthConfig{Keys: []string{testKey1}, PublicMetrics: true}})
	if rec := e.do("GET", "/metrics", ""); rec.Code != http.StatusOK {
		t.Errorf("public /metrics without a key: %d", rec.Code)
	}
	wantProblem(t, e.do("GET", "/v1/topics", ""), http.StatusUnauthorized, CodeUnauthorized)

	// No keys: everything is open, and a stray Authorization header is ignored.
	open := newEnv(t, Config{})
	for _, auth := range []string{"", "Bearer whatever"} {
		if rec := open.do("GET", "/v1/topics", "", header{"Authorization", auth}); rec.Code != http.StatusOK {
			t.Errorf("no keys configured, Authorization %q: %d", auth, rec.Code)
		}
	}
}

func TestParseAPIKeys(t *testing.T) {
	long := strings.Repeat("a", 16)
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"", nil, ""},
		{" \n\n", nil, ""},
		{long, []string{long}, ""},
		{testKey1 + "," + testKey2, []string{testKey1, testKey2}, ""},
		{testKey1 + " , " + testKey2 + " " + testKey1, []string{testKey1, testKey2}, ""},
		{"# rotated 2024-05\n" + testKey1 + "\r\n" + testKey2 + "\n", []string{testKey1, testKey2}, ""},
		{"short", nil, "too short"},
		{testKey1 + ",short", nil, "key 2"},
		{strings.Repeat("b", 513), nil, "too long"},
		{"abcdefghijklmnop\x00", nil, "not visible ASCII"},
		{"abcdefghijklmnopé", nil, "not visible ASCII"},
	} {
		got, err := ParseAPIKeys(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseAPIKeys(%q) error %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("ParseAPIKeys(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestStaticKeyMatch: the static keys' guard matches a key exactly.
func TestStaticKeyMatch(t *testing.T) {
	g := AuthConfig{Keys: []string{testKey1, testKey2}}.authenticator()
	for _, tc := range []struct {
		tok  string
		want bool
	}{
		{testKey1, true},
		{testKey2, true},
		{"", false},
		{testKey1[:20], false},
		{strings.ToUpper(testKey1), false},
		{testKey1 + testKey2, false},
	} {
		if _, err := g.Authenticate(t.Context(), tc.tok); (err == nil) != tc.want {
			t.Errorf("Authenticate(%q) = %v, want match %v", tc.tok, err, tc.want)
		}
	}
}

// TestNoStreaming: with NoStreaming a tail answers 406 streaming_unsupported, while a
// plain fetch on the same URL is served.
func TestNoStreaming(t *testing.T) {
	e := newEnv(t, Config{NoStreaming: true})
	e.createTopic("orders", 1, nil)
	rec := e.do("GET", "/v1/topics/orders/partitions/0/records", "", header{"Accept", "text/event-stream"})
	wantProblem(t, rec, http.StatusNotAcceptable, CodeStreamingUnsupported)
	if rec := e.do("GET", "/v1/topics/orders/partitions/0/records?offset=earliest", ""); rec.Code != http.StatusOK {
		t.Errorf("fetch with NoStreaming: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do("GET", "/v1/topics/orders/partitions/0/records?offset=earliest", "", header{"Accept", "application/json, text/plain"}); rec.Code != http.StatusOK {
		t.Errorf("fetch with NoStreaming, Accept json: %d %s", rec.Code, rec.Body)
	}
}

// TestBasicAuth: HTTP Basic with a key's id and secret authenticates as the key does
// (schema registry clients send credentials so); a wrong secret or another key's id is
// refused.
func TestBasicAuth(t *testing.T) {
	e := newEnv(t, Config{Auth: AuthConfig{Keys: []string{testKey1, testKey2}}})
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	rec := e.do("GET", "/v1/topics", "", header{"Authorization", basic(security.StaticKeyID(testKey1), testKey1)})
	if rec.Code != http.StatusOK {
		t.Fatalf("Basic with the key's id and secret: %d %s", rec.Code, rec.Body)
	}
	for _, bad := range []string{
		basic(security.StaticKeyID(testKey1), testKey2),
		basic(security.StaticKeyID(testKey2), testKey1),
		basic("nobody", testKey1),
	} {
		rec := e.do("GET", "/v1/topics", "", header{"Authorization", bad})
		wantProblem(t, rec, http.StatusUnauthorized, CodeUnauthorized)
	}
}
