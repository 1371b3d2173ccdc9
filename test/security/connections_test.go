package security_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/internal/testkit/kafkatest"
)

// TestSASLUsernameNotTheKeys: a key's secret under another key's id (or an unknown id)
// is refused with SASL_AUTHENTICATION_FAILED and the connection closed; the right pair
// authenticates.
func TestSASLUsernameNotTheKeys(t *testing.T) {
	s := startStack(t)
	s.topic("sasl", 1, 0)
	aID, aSecret := s.key("User:a")
	bID, _ := s.key("User:b")
	s.allow("User:a", grant{op: acl.OpDescribe, typ: acl.TypeTopic, name: "sasl"})
	for _, tc := range []struct{ name, user, pass string }{
		{"another key's id", bID, aSecret},
		{"an unknown id", "key-0000000000000000", aSecret},
		{"the static form of the id", "0123456789abcdef", aSecret},
	} {
		k := kafkatest.Dial(t, s.kafka)
		if code := k.Authenticate(tc.user, tc.pass); code != kerr.SaslAuthenticationFailed.Code {
			t.Errorf("%s: SaslAuthenticate code %d, want SASL_AUTHENTICATION_FAILED", tc.name, code)
		}
		if err := k.ClosedWithin(2 * time.Second); err != nil {
			t.Errorf("%s: connection %v", tc.name, err)
		}
	}
	k := kafkatest.Dial(t, s.kafka)
	if code := k.Authenticate(aID, aSecret); code != 0 {
		t.Fatalf("the key's own id: code %d", code)
	}
	if resp, err := k.Metadata("sasl"); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata after authenticating: %v %+v", err, resp)
	}
}

// stream is an HTTP request left open (an SSE tail, a long poll); done receives how
// its read ended.
type stream struct {
	done   chan error
	cancel context.CancelFunc
}

func (s *stack) open(key, path string, headers ...string) *stream {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	st := &stream{done: make(chan error, 1), cancel: cancel}
	started := make(chan error, 2)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			started <- err
			st.done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err := fmt.Errorf("status %d", resp.StatusCode)
			started <- err
			st.done <- err
			return
		}
		started <- nil
		_, err = io.Copy(io.Discard, bufio.NewReader(resp.Body))
		st.done <- err
	}()
	select {
	case err := <-started:
		if err != nil {
			s.t.Fatalf("GET %s: %v", path, err)
		}
	case <-time.After(500 * time.Millisecond):
		// A long poll answers its headers only when it ends: it is waiting.
	}
	s.t.Cleanup(cancel)
	return st
}

// endedWithin waits for the stream to end otherwise than cleanly.
func (st *stream) endedWithin(d time.Duration) error {
	select {
	case err := <-st.done:
		if err == nil {
			return errors.New("it ended cleanly, as if it had been answered")
		}
		return nil
	case <-time.After(d):
		return fmt.Errorf("still open after %v", d)
	}
}

// TestRevocationCutsConnections: once a key is revoked its Kafka connection, SSE
// stream and long poll are closed and its requests refused, all within a second; an
// expired key's likewise, at its expiry. Another key's are untouched.
func TestRevocationCutsConnections(t *testing.T) {
	s := startStack(t)
	s.topic("live", 1, 1)
	for _, p := range []string{"User:rev", "User:other"} {
		s.allow(p, grant{op: acl.OpRead, typ: acl.TypeTopic, name: "live"})
	}
	revID, rev := s.key("User:rev")
	_, other := s.key("User:other")
	s.sync()

	k := kafkatest.Dial(t, s.kafka)
	if code := k.Authenticate(revID, rev); code != 0 {
		t.Fatalf("SASL: code %d", code)
	}
	if resp, err := k.Metadata("live"); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata: %v", err)
	}
	sse := s.open(rev, "/v1/topics/live/partitions/0/records?offset=0", "Accept", "text/event-stream")
	poll := s.open(rev, "/v1/topics/live/partitions/0/records?offset=1&wait_ms=30000")
	otherSSE := s.open(other, "/v1/topics/live/partitions/0/records?offset=0", "Accept", "text/event-stream")

	revoked := time.Now()
	s.must(http.StatusOK, "DELETE", "/v1/keys/"+revID, "")
	for what, err := range map[string]error{
		"Kafka connection": k.ClosedWithin(time.Second - time.Since(revoked)),
		"SSE stream":       sse.endedWithin(time.Second - time.Since(revoked)),
		"long poll":        poll.endedWithin(time.Second - time.Since(revoked)),
	} {
		if err != nil {
			t.Errorf("%s of the revoked key: %v", what, err)
		}
	}
	if r := s.do(rev, "GET", "/v1/topics/live", ""); r.status != http.StatusUnauthorized {
		t.Errorf("a request with the revoked key: %d %s", r.status, r.body)
	}
	if err := otherSSE.endedWithin(200 * time.Millisecond); err == nil {
		t.Error("another key's stream was cut too")
	}
	if !strings.Contains(s.logs.String(), "cut the connections of revoked or expired keys") {
		t.Error("the cut is not logged")
	}

	// Expiry: a key that works until it expires, its stream cut then.
	body := `{"principal":"User:rev","expires_in_ms":1500}`
	m := s.must(http.StatusCreated, "POST", "/v1/keys", body).json(t)
	exp := m["secret"].(string)
	s.sync()
	expSSE := s.open(exp, "/v1/topics/live/partitions/0/records?offset=0", "Accept", "text/event-stream")
	if r := s.do(exp, "GET", "/v1/topics/live", ""); r.status != http.StatusOK {
		t.Fatalf("before its expiry: %d %s", r.status, r.body)
	}
	if err := expSSE.endedWithin(3 * time.Second); err != nil {
		t.Errorf("the expiring key's stream: %v", err)
	}
	if r := s.do(exp, "GET", "/v1/topics/live", ""); r.status != http.StatusUnauthorized {
		t.Errorf("after its expiry: %d %s", r.status, r.body)
	}
}
