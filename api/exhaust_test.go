package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/security"
)

// rawRequest sends head (request line and headers, without the blank line) and the
// start of a body on a connection of its own, and reads the answer's status line and
// headers. The connection is returned open, for the caller to see it closed.
func rawRequest(t *testing.T, addr, head, body string) (net.Conn, *http.Response, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	start := time.Now()
	if _, err := io.WriteString(c, head+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: no answer while the body is unsent: %v", strings.SplitN(head, "\r\n", 2)[0], err)
	}
	took := time.Since(start)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// Whatever follows must be the end of the connection, not a wait for more body.
	if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
		t.Errorf("%s: after the answer: %d bytes, %v; want the connection closed", strings.SplitN(head, "\r\n", 2)[0], n, err)
	}
	return c, resp, took
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// A request without valid credentials is answered 401 at once, with its body unsent
// (net/http would otherwise read up to 256 KiB of it first, for as long as the client
// takes), and its connection closed; likewise a probe that was sent a body. A request
// with a key keeps its connection.
func TestUnauthenticatedBodyNotRead(t *testing.T) {
	e := newEnv(t, Config{Auth: AuthConfig{Keys: []string{testKey1}}})
	e.createTopic("t", 1, nil)
	srv := httptest.NewServer(e.h) // net/http's defaults: no read timeout at all
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	for _, tc := range []struct {
		name, head, body string
		status           int
	}{
		{"no key, 1000-byte body unsent", "POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000", "", 401},
		{"no key, body half sent", "POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000", `{"records":[` + strings.Repeat(" ", 50000), 401},
		{"wrong key", "POST /v1/topics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + strings.Repeat("x", 40) + "\r\nContent-Length: 10", "", 401},
		{"no key, chunked", "POST /v1/records HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked", "10\r\n{\"recor", 401},
		{"no key, expect 100-continue", "POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1000", "", 401},
		{"no key, no body", "GET /v1/topics HTTP/1.1\r\nHost: x", "", 401},
		{"probe with a body", "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000", "", 200},
		{"private metrics with a body", "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000", "", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, resp, took := rawRequest(t, addr, tc.head, tc.body)
			if resp.StatusCode != tc.status || took > time.Second {
				t.Fatalf("HTTP %d after %v, want %d at once", resp.StatusCode, took, tc.status)
			}
			if !resp.Close {
				t.Errorf("no Connection: close: %v", resp.Header)
			}
		})
	}
	// With a key, a whole body is read and the connection kept.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	body := `{"records":[{"value":1}]}`
	for range 2 {
		fmt.Fprintf(c, "POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", testKey1, len(body), body)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("keyed produce: HTTP %d, close %v", resp.StatusCode, resp.Close)
		}
	}
}

// twoPrincipals is a security catalog of two keys, for User:a and User:b.
type twoPrincipals struct{}

const (
	keyOfA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	keyOfB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func (twoPrincipals) Keys(context.Context) ([]catalog.APIKey, error) {
	return []catalog.APIKey{
		{ID: "key-a", Principal: "User:a", Digest: sha256.Sum256([]byte(keyOfA))},
		{ID: "key-b", Principal: "User:b", Digest: sha256.Sum256([]byte(keyOfB))},
	}, nil
}
func (twoPrincipals) ACLs(context.Context) ([]acl.Binding, error) { return nil, nil }
func (twoPrincipals) SecurityVersion(context.Context) (int64, time.Time, error) {
	return 1, time.Now(), nil
}
func (twoPrincipals) WatchSecurity(ctx context.Context, fn func()) error { <-ctx.Done(); return nil }

// A principal that declares large produce bodies and stalls holds no more than its
// share of the bodies still arriving — of the memory budget, and of the produce bytes
// admitted — while another principal's produce is served.
func TestPrincipalBodyShare(t *testing.T) {
	g := security.New(security.Config{Required: true}, twoPrincipals{})
	if err := g.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		budget     int64
		admission  int64
		held, code string // what A may hold, and the code its next body is refused with
	}{
		// The budget's share: 8 MiB of 32; two 4 MiB bodies, the third waits, then 429.
		{"budget", 32 << 20, 64 << 20, "8MiB", "buffer_full"},
		// Admission's share: 4 MiB of 16; one 3 MiB body, the second refused at once.
		{"admission", 256 << 20, 16 << 20, "3MiB", "buffer_full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := membudget.New(tc.budget, nil)
			e := newEnv(t, Config{Auth: AuthConfig{Authenticator: g}, MaxInflightProduceBytes: tc.admission, MemoryWait: 100 * time.Millisecond},
				func(d *testDeps) { d.Memory = mem })
			e.createTopic("t", 1, nil)
			srv := httptest.NewServer(e.h)
			defer srv.Close()
			var stalled []net.Conn
			for range 3 {
				c, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				fmt.Fprintf(c, "POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", keyOfA, 3<<20)
				stalled = append(stalled, c)
			}
			want := map[string]int64{"8MiB": 8 << 20, "3MiB": 3 << 20}[tc.held]
			deadline := time.Now().Add(10 * time.Second)
			held := func() int64 {
				if tc.name == "budget" {
					return mem.Arriving("User:a")
				}
				e.api.admission.mu.Lock()
				defer e.api.admission.mu.Unlock()
				return e.api.admission.unread["User:a"]
			}
			// A's bodies beyond its share are refused; the others stay unanswered,
			// holding the share, until their connections close.
			answers := make(chan string, len(stalled))
			for _, c := range stalled {
				go func() {
					resp, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						return // closed at the end of the test
					}
					b, _ := io.ReadAll(resp.Body)
					answers <- fmt.Sprintf("%d %s", resp.StatusCode, b)
				}()
			}
			wantRefused := map[string]int{"budget": 1, "admission": 2}[tc.name]
			for range wantRefused {
				select {
				case a := <-answers:
					if !strings.HasPrefix(a, "429 ") || !strings.Contains(a, tc.code) {
						t.Fatalf("A's body beyond its share: %s", a)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("fewer than %d of A's bodies refused", wantRefused)
				}
			}
			for held() != want {
				if time.Now().After(deadline) {
					t.Fatalf("A holds %d bytes still arriving, want its share, %d", held(), want)
				}
				time.Sleep(5 * time.Millisecond)
			}
			// B is served meanwhile.
			req, _ := http.NewRequest("POST", srv.URL+"/v1/topics/t/records", strings.NewReader(`{"records":[{"value":1}]}`))
			req.Header.Set("Authorization", "Bearer "+keyOfB)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("B's produce while A stalls: HTTP %d %s", resp.StatusCode, b)
			}
			for _, c := range stalled {
				c.Close()
			}
			select {
			case a := <-answers:
				t.Fatalf("one more of A's bodies was answered: %s", a)
			default:
			}
			for mem.Used() != 0 || held() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("after A left: budget %d, A's share %d", mem.Used(), held())
				}
				time.Sleep(5 * time.Millisecond)
			}
			if mem.Overreleased() != 0 {
				t.Fatal("released twice")
			}
		})
	}
}

func (twoPrincipals) ScramCredentials(context.Context) ([]catalog.ScramCredential, error) {
	return nil, nil
}
