package faultproxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/internal/testkit/testsvc"
)

func TestHTTP(t *testing.T) {
	var puts int
	body := bytes.Repeat([]byte("0123456789"), 10)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			puts++
		}
		if r.Host == "" || strings.HasPrefix(r.Host, strings.TrimPrefix(targetHost, "http://")) {
			w.WriteHeader(http.StatusTeapot) // the Host header must be the proxy's
			return
		}
		_, _ = w.Write(body)
	}))
	defer target.Close()
	targetHost = target.URL
	p, err := NewHTTP(target.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	do := func(method string) (int, []byte, error) {
		req, _ := http.NewRequest(method, p.URL()+"/b/k", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	for _, tc := range []struct {
		name    string
		fault   *Fault
		method  string
		status  int
		body    []byte
		failErr bool
		puts    int // PUTs that reached the target
	}{
		{name: "pass through", method: "GET", status: 200, body: body},
		{name: "error", fault: &Fault{Status: 503}, method: "PUT", status: 503, puts: 0},
		{name: "other method untouched", fault: &Fault{Status: 503, Methods: []string{"PUT"}}, method: "GET", status: 200, body: body},
		{name: "slow", fault: &Fault{Latency: 50 * time.Millisecond}, method: "GET", status: 200, body: body},
		{name: "lost response", fault: &Fault{LoseResponse: true}, method: "PUT", failErr: true, puts: 1},
		{name: "truncated", fault: &Fault{Truncate: true}, method: "GET", status: 200, body: body[:50]},
		{name: "bit flipped", fault: &Fault{FlipBit: true}, method: "GET", status: 200,
			body: append(append(append([]byte(nil), body[:50]...), body[50]^1), body[51:]...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			puts = 0
			if tc.fault != nil {
				p.Set(*tc.fault)
			} else {
				p.Set()
			}
			start := time.Now()
			status, got, err := do(tc.method)
			if tc.failErr {
				if err == nil {
					t.Fatalf("status %d: want a broken connection", status)
				}
			} else if err != nil || status != tc.status || (tc.body != nil && !bytes.Equal(got, tc.body)) {
				t.Fatalf("status %d body %q err %v; want %d %q", status, got, err, tc.status, tc.body)
			}
			if puts != tc.puts {
				t.Errorf("%d PUTs reached the target, want %d", puts, tc.puts)
			}
			if tc.fault != nil && tc.fault.Latency > 0 && time.Since(start) < tc.fault.Latency {
				t.Errorf("answered in %s, before the latency", time.Since(start))
			}
		})
	}
}

var targetHost string

// A transaction cut after its commit is committed, and the client hears nothing.
func TestPostgresCutAfterCommit(t *testing.T) {
	dsn := testsvc.PostgresDSN(t)
	u, _ := url.Parse(dsn)
	p, err := NewPostgres(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pu := *u
	pu.Host = p.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	direct, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	if _, err := direct.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, pu.String())
	if err != nil {
		t.Fatal(err)
	}
	// Reads pass, and so do writes while healed.
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("count %d err %v", n, err)
	}
	p.SetCutRate(1)
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (2)"); err == nil {
		t.Fatal("insert through a cutting proxy answered")
	}
	if err := direct.QueryRow(ctx, "SELECT count(*) FROM t WHERE x = 2").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the cut insert: %d rows, err %v; want it committed", n, err)
	}
	// An explicit transaction: cut after COMMIT.
	conn2, err := pgx.Connect(ctx, pu.String())
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (3)"); err == nil {
		t.Log("insert inside a transaction answered (cut comes at commit)")
	}
	_ = tx.Commit(ctx)
	if commits, cuts := p.Counts(); cuts < 2 || commits < cuts {
		t.Errorf("commits %d cuts %d", commits, cuts)
	}
	p.SetCutRate(0)
	conn3, err := pgx.Connect(ctx, pu.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn3.Close(ctx)
	if _, err := conn3.Exec(ctx, "INSERT INTO t VALUES (4)"); err != nil {
		t.Fatalf("healed: %v", err)
	}
}
