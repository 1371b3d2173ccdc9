package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/kafkatest"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

const bootstrapKey = "bootstrap-key-0123456789abcdef0123"

// keyStatus is the status of GET url/v1/topics/lifecycle with key.
func keyStatus(t *testing.T, base, key string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/v1/topics/lifecycle", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// untilStatus polls until every node answers want for key, and answers how long it
// took; it fails the test past limit.
func untilStatus(t *testing.T, nodes []string, key string, want int, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	for {
		all := true
		for _, n := range nodes {
			all = all && keyStatus(t, n, key) == want
		}
		if all {
			return time.Since(since)
		}
		if time.Since(since) > limit {
			t.Fatalf("after %v the nodes do not all answer %d", time.Since(since), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openStream opens GET path with key, answering a channel that receives how its
// reading ended (an error for a cut connection). It returns once the node serves the
// request: an SSE stream has answered its headers, a long poll (which answers its
// headers only when it ends) shows in the node's gauge of long polls being served.
func openStream(t *testing.T, base, key, path string, headers ...string) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	done, answered := make(chan error, 1), make(chan struct{})
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("status %d", resp.StatusCode)
			return
		}
		close(answered)
		_, err = io.Copy(io.Discard, bufio.NewReader(resp.Body))
		done <- err
	}()
	sse := slices.Contains(headers, "text/event-stream")
	served := testwait.Within(30*time.Second, func() bool {
		select {
		case <-answered:
			return true
		default:
		}
		return len(done) > 0 || !sse && metricValue(t, base, `strata_http_reads_active{kind="long_polls"}`) > 0
	})
	if !served {
		t.Fatalf("GET %s: not served within 30s", path)
	}
	select {
	case err := <-done:
		t.Fatalf("GET %s ended at once: %v", path, err)
	default:
	}
	return done
}

// metricValue is the value of the sample named line (with its labels) on base's
// /metrics (read with the bootstrap key: metrics are not public here), 0 when it is
// absent.
func metricValue(t *testing.T, base, line string) float64 {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+bootstrapKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: HTTP %d %s", base, resp.StatusCode, b)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, line+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

func cutWithin(t *testing.T, what string, done <-chan error, since time.Time, limit time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("%s ended cleanly, as if answered", what)
		}
		t.Logf("%s cut %v after it was due", what, time.Since(since).Round(time.Millisecond))
	case <-time.After(limit - time.Since(since)):
		t.Errorf("%s still open %v after it was due", what, limit)
	}
}

// TestKeyLifecycleTwoServeNodes: a key made with strata keys create on one node works
// on both; revoked with strata keys revoke, it is refused by both within a second, and
// its open Kafka connection, SSE stream and long poll (on the other node) are cut
// within that second; a key made to expire stops working on both at its expiry.
func TestKeyLifecycleTwoServeNodes(t *testing.T) {
	dsn := os.Getenv("STRATA_TEST_POSTGRES")
	if dsn == "" {
		testsvc.Unavailable(t, "set STRATA_TEST_POSTGRES (eval \"$(scripts/services.sh)\") to run against Postgres")
	}
	catalogURL := testDatabase(t, dsn)
	bucket := "file://" + filepath.Join(t.TempDir(), "objects")
	bin := buildStrata(t)
	serve := func() (string, string) {
		addr, kafkaAddr := freeAddr(t), freeAddr(t)
		s, _ := startStrata(t, bin, []string{"STRATA_API_KEYS=" + bootstrapKey}, addr, "serve", "--catalog", catalogURL,
			"--bucket", bucket, "--listen", addr, "--log-level", "warn", "--kafka-listen", kafkaAddr)
		return s.url, kafkaAddr
	}
	a, _ := serve()
	b, kb := serve()
	nodes := []string{a, b}
	admin := map[string]string{"STRATA_SERVER": a, "STRATA_API_KEY": bootstrapKey}
	cli := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, admin, "", args...)
		if code != 0 {
			t.Fatalf("strata %s: exit %d: %s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	cli("topics", "create", "lifecycle", "--partitions", "1")
	cli("acls", "create", "--principal", "User:app", "--operation", "read", "--topic", "lifecycle")
	var key struct{ ID, Secret string }
	created := time.Now()
	if err := json.Unmarshal([]byte(cli("keys", "create", "--principal", "User:app", "--json")), &key); err != nil || key.Secret == "" {
		t.Fatalf("keys create --json: %v", err)
	}
	t.Logf("a new key works on both nodes %v after it was made", untilStatus(t, nodes, key.Secret, http.StatusOK, created, time.Second))
	if out := cli("keys", "list"); !strings.Contains(out, key.ID) || !strings.Contains(out, "User:app") || strings.Contains(out, key.Secret) {
		t.Fatalf("keys list:\n%s", out)
	}

	// Open on B: a Kafka connection, an SSE stream and a long poll; and a stream on A.
	k := kafkatest.Dial(t, kb)
	if code := k.Authenticate(key.ID, key.Secret); code != 0 {
		t.Fatalf("SASL/PLAIN with the key's id: code %d", code)
	}
	if resp, err := k.Metadata("lifecycle"); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata over Kafka: %v", err)
	}
	sseB := openStream(t, b, key.Secret, "/v1/topics/lifecycle/partitions/0/records?offset=0", "Accept", "text/event-stream")
	pollB := openStream(t, b, key.Secret, "/v1/topics/lifecycle/partitions/0/records?offset=0&wait_ms=30000")
	sseA := openStream(t, a, key.Secret, "/v1/topics/lifecycle/partitions/0/records?offset=0", "Accept", "text/event-stream")

	revoked := time.Now()
	cli("keys", "revoke", key.ID)
	if err := k.ClosedWithin(time.Second - time.Since(revoked)); err != nil {
		t.Errorf("the Kafka connection on B: %v", err)
	} else {
		t.Logf("Kafka connection on B cut %v after the revocation", time.Since(revoked).Round(time.Millisecond))
	}
	cutWithin(t, "SSE stream on B", sseB, revoked, time.Second)
	cutWithin(t, "long poll on B", pollB, revoked, time.Second)
	cutWithin(t, "SSE stream on A", sseA, revoked, time.Second)
	t.Logf("both nodes refuse the revoked key %v after the revocation", untilStatus(t, nodes, key.Secret, http.StatusUnauthorized, revoked, time.Second))
	k2 := kafkatest.Dial(t, kb)
	if code := k2.Authenticate(key.ID, key.Secret); code == 0 {
		t.Error("SASL with the revoked key succeeded")
	}

	// Expiry.
	var exp struct{ Secret string }
	if err := json.Unmarshal([]byte(cli("keys", "create", "--principal", "User:app", "--expires-in", "3s", "--json")), &exp); err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(3 * time.Second)
	untilStatus(t, nodes, exp.Secret, http.StatusOK, time.Now(), time.Second)
	sseExp := openStream(t, b, exp.Secret, "/v1/topics/lifecycle/partitions/0/records?offset=0", "Accept", "text/event-stream")
	time.Sleep(time.Until(expires)) // the expiry the test set; the cut is timed from it
	cutWithin(t, "the expiring key's SSE stream on B", sseExp, expires, time.Second)
	t.Logf("both nodes refuse the expired key %v after its expiry", untilStatus(t, nodes, exp.Secret, http.StatusUnauthorized, expires, time.Second))

	if out := cli("audit"); !strings.Contains(out, "key.revoke") || !strings.Contains(out, "User:bootstrap") {
		t.Errorf("strata audit:\n%s", out)
	}
}
