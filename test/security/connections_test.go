package security_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/acl"
)

// rawKafka is a bare Kafka connection, for what a client library hides: a refusal
// followed by a close, a connection cut while idle.
type rawKafka struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialKafka(t *testing.T, addr string) *rawKafka {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawKafka{t: t, c: c}
}

// roundTrip sends req (a non-flexible version) and reads its answer into resp.
func (k *rawKafka) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	k.corr++
	buf := make([]byte, 4, 64)
	buf = kbin.AppendInt16(buf, req.Key())
	buf = kbin.AppendInt16(buf, req.GetVersion())
	buf = kbin.AppendInt32(buf, k.corr)
	buf = kbin.AppendNullableString(buf, nil)
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	_ = k.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := k.c.Write(buf); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(k.c, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(k.c, body); err != nil {
		return err
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(body[4:]) // after the correlation id (header v0)
}

// authenticate runs SaslHandshake and SaslAuthenticate (v1) with PLAIN credentials and
// answers SaslAuthenticate's error code.
func (k *rawKafka) authenticate(user, pass string) int16 {
	k.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	hsr := kmsg.NewPtrSASLHandshakeResponse()
	if err := k.roundTrip(hs, hsr); err != nil || hsr.ErrorCode != 0 {
		k.t.Fatalf("SaslHandshake: %v, code %d", err, hsr.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00"+user+"\x00"+pass)
	aur := kmsg.NewPtrSASLAuthenticateResponse()
	if err := k.roundTrip(au, aur); err != nil {
		k.t.Fatalf("SaslAuthenticate: %v", err)
	}
	return aur.ErrorCode
}

// metadata asks for one topic (v1, not flexible).
func (k *rawKafka) metadata(topic string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = &topic
	req.Topics = append(req.Topics, mt)
	resp := kmsg.NewPtrMetadataResponse()
	return resp, k.roundTrip(req, resp)
}

// closedWithin waits for the server to close the connection: a read that ends in EOF
// or a reset, not in the deadline.
func (k *rawKafka) closedWithin(d time.Duration) error {
	_ = k.c.SetReadDeadline(time.Now().Add(d))
	_, err := k.c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("still open after %v", d)
	}
	if err == nil {
		return errors.New("the server sent more")
	}
	return nil
}

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
		k := dialKafka(t, s.kafka)
		if code := k.authenticate(tc.user, tc.pass); code != kerr.SaslAuthenticationFailed.Code {
			t.Errorf("%s: SaslAuthenticate code %d, want SASL_AUTHENTICATION_FAILED", tc.name, code)
		}
		if err := k.closedWithin(2 * time.Second); err != nil {
			t.Errorf("%s: connection %v", tc.name, err)
		}
	}
	k := dialKafka(t, s.kafka)
	if code := k.authenticate(aID, aSecret); code != 0 {
		t.Fatalf("the key's own id: code %d", code)
	}
	if resp, err := k.metadata("sasl"); err != nil || resp.Topics[0].ErrorCode != 0 {
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

	k := dialKafka(t, s.kafka)
	if code := k.authenticate(revID, rev); code != 0 {
		t.Fatalf("SASL: code %d", code)
	}
	if resp, err := k.metadata("live"); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata: %v", err)
	}
	sse := s.open(rev, "/v1/topics/live/partitions/0/records?offset=0", "Accept", "text/event-stream")
	poll := s.open(rev, "/v1/topics/live/partitions/0/records?offset=1&wait_ms=30000")
	otherSSE := s.open(other, "/v1/topics/live/partitions/0/records?offset=0", "Accept", "text/event-stream")

	revoked := time.Now()
	s.must(http.StatusOK, "DELETE", "/v1/keys/"+revID, "")
	for what, err := range map[string]error{
		"Kafka connection": k.closedWithin(time.Second - time.Since(revoked)),
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
