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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/kafka"
)

// No unauthenticated exhaustion: the outside review's reproductions on a node with
// keys required. Sockets that never authenticate, HTTP requests whose body never comes,
// and a key that declares huge Kafka frames and stalls each took a node's connection
// slots, file descriptors or memory budget; here each is bounded, and a client with a
// key is served meanwhile.

// dialFrom connects to addr from the loopback address from (all of 127.0.0.0/8 is
// loopback on Linux), so that one test can be several hosts.
func dialFrom(from, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return d.Dial("tcp", addr)
}

// closedAt waits for the server to close c (a read that ends otherwise than at its
// deadline) and sends when; a connection still open at the deadline sends the zero time.
func closedAt(c net.Conn, deadline time.Time, out chan<- time.Time) {
	_ = c.SetReadDeadline(deadline)
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		out <- time.Time{}
		return
	}
	out <- time.Now()
}

// gauge reads a metric of the node's registry (0 when absent).
func (s *stack) gauge(name string) float64 {
	s.t.Helper()
	mfs, err := s.node.Registry.Gather()
	if err != nil {
		s.t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// labelled reads one series of a counter: name{label=value}.
func labelled(reg prometheus.Gatherer, name, label, value string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// produceAs produces one record to topic with a franz-go client of key id and secret,
// connecting from 127.0.0.1.
func (s *stack) produceAs(ctx context.Context, cl *kgo.Client, topic string) error {
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("keyed")}).FirstErr()
}

// TestUnauthenticatedKafkaConnectionsTimeOut: 1,000 connections that never send a
// byte (from four addresses, so that the per-address share does not refuse them) are
// all closed once the auth timeout has passed, and not before; meanwhile a client with
// a key connects and produces, and goes on producing after.
func TestUnauthenticatedKafkaConnectionsTimeOut(t *testing.T) {
	const timeout = 5 * time.Second
	needFiles(t, 4096) // 1,000 connections, both ends, and the node's own
	s := startStackOpts(t, stackOpts{kafka: func(c *kafka.Config) { c.AuthTimeout = timeout }})
	s.topic("keyed", 1, 0)
	id, secret := s.key("User:app")
	s.allow("User:app", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "keyed"})

	const n = 1000
	closed := make(chan time.Time, n)
	opened := make([]time.Time, n)
	var wg sync.WaitGroup
	var dialErr atomic.Value
	sem := make(chan struct{}, 100)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			opened[i] = time.Now()
			c, err := dialFrom(fmt.Sprintf("127.0.0.%d", 2+i%4), s.kafka)
			if err != nil {
				dialErr.Store(err)
				closed <- time.Time{}
				return
			}
			t.Cleanup(func() { c.Close() })
			go closedAt(c, time.Now().Add(timeout+30*time.Second), closed)
		})
	}
	wg.Wait()
	if err := dialErr.Load(); err != nil {
		t.Fatalf("dial: %v", err)
	}
	// The first dial: goroutines start in any order, so it is not opened[0].
	first := slices.MinFunc(opened, func(a, b time.Time) int { return a.Compare(b) })
	testwait.Until(t, 10*time.Second, "the listener holding the 1,000 connections", func() bool {
		return s.gauge("strata_kafka_connections") >= n
	})

	cl := s.kclient(id, secret)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.produceAs(ctx, cl, "keyed"); err != nil {
		t.Fatalf("a keyed produce while 1,000 strangers hold connections: %v", err)
	}
	if open := s.gauge("strata_kafka_connections"); open < n {
		t.Fatalf("only %v connections open when the keyed produce was answered: it did not run meanwhile (too loaded a machine?)", open)
	}

	for range n {
		at := <-closed
		if at.IsZero() {
			t.Fatal("a connection that never authenticated is still open 30s after its auth timeout")
		}
		if at.Before(first.Add(timeout)) {
			t.Fatalf("a connection closed %v after the first was opened, before the %v auth timeout", at.Sub(first), timeout)
		}
	}
	if got := labelled(s.node.Registry, "strata_kafka_connections_closed_total", "reason", "auth_timeout"); got != n {
		t.Errorf("auth_timeout closes: %v, want %d", got, n)
	}
	if err := s.produceAs(ctx, cl, "keyed"); err != nil {
		t.Fatalf("the keyed client after the strangers were closed: %v", err)
	}
}

// TestUnauthenticatedKafkaShare: the review's 45 sockets under --kafka-max-connections
// 40. Those not yet authenticated hold at most half of the slots, and one address at
// most 16 of those: the rest are refused as they are accepted, and a keyed client from
// elsewhere connects and produces. Once the strangers' auth timeout passes, their
// slots are free again.
func TestUnauthenticatedKafkaShare(t *testing.T) {
	const timeout = 3 * time.Second
	s := startStackOpts(t, stackOpts{kafka: func(c *kafka.Config) { c.MaxConnections, c.AuthTimeout = 40, timeout }})
	s.topic("keyed", 1, 0)
	id, secret := s.key("User:app")
	s.allow("User:app", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "keyed"})

	// open dials k connections from one address and answers how many the listener
	// refused (closed at once: an EOF well before the auth timeout).
	var strangers []net.Conn
	open := func(from string, k int) (refused int) {
		t.Helper()
		closed := make(chan time.Time, k)
		for range k {
			c, err := dialFrom(from, s.kafka)
			if err != nil {
				t.Fatal(err)
			}
			strangers = append(strangers, c)
			go closedAt(c, time.Now().Add(timeout/2), closed)
		}
		for range k {
			if !(<-closed).IsZero() {
				refused++
			}
		}
		return refused
	}
	defer func() {
		for _, c := range strangers {
			c.Close()
		}
	}()
	if r := open("127.0.0.2", 45); r != 45-16 {
		t.Fatalf("45 connections from one address: %d refused, want %d (16 admitted)", r, 45-16)
	}
	cl := s.kclient(id, secret)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.produceAs(ctx, cl, "keyed"); err != nil {
		t.Fatalf("a keyed client while one address holds its share: %v", err)
	}
	// A second address takes what is left of the share of all, and no more.
	if r := open("127.0.0.3", 10); r != 6 {
		t.Fatalf("10 more from a second address: %d refused, want 6 (20 not yet authenticated at most)", r)
	}
	if got := labelled(s.node.Registry, "strata_kafka_connections_refused_total", "reason", "unauthenticated_per_host"); got != 29 {
		t.Errorf("refused per address: %v, want 29", got)
	}
	if got := labelled(s.node.Registry, "strata_kafka_connections_refused_total", "reason", "unauthenticated"); got != 6 {
		t.Errorf("refused as unauthenticated: %v, want 6", got)
	}
	// The keyed client's connections are authenticated: it goes on producing.
	if err := s.produceAs(ctx, cl, "keyed"); err != nil {
		t.Fatalf("the keyed client beside 20 strangers: %v", err)
	}
	// Once the strangers are closed by their auth timeout, a new keyed client gets in.
	testwait.Until(t, timeout+20*time.Second, "the strangers closed", func() bool {
		return labelled(s.node.Registry, "strata_kafka_connections_closed_total", "reason", "auth_timeout") == 20
	})
	if err := s.produceAs(ctx, s.kclient(id, secret), "keyed"); err != nil {
		t.Fatalf("a new keyed client after the auth timeout: %v", err)
	}
}

// TestUnauthenticatedHTTPBodies: 1,000 requests without a key, each declaring a body
// it never sends, are each answered 401 within a second and their connections closed,
// while requests with a key are served.
func TestUnauthenticatedHTTPBodies(t *testing.T) {
	needFiles(t, 4096) // 1,000 connections, both ends, and the node's own
	s := startStack(t)
	s.topic("keyed", 1, 0)
	_, secret := s.key("User:app")
	s.allow("User:app", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "keyed"})
	addr := strings.TrimPrefix(s.url, "http://")

	stop := make(chan struct{})
	var keyed, keyedFailed atomic.Int64
	var kwg sync.WaitGroup
	kwg.Go(func() {
		hc := &http.Client{Timeout: 10 * time.Second}
		for {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest("POST", s.url+"/v1/topics/keyed/records", strings.NewReader(`{"records":[{"value":1}]}`))
			req.Header.Set("Authorization", "Bearer "+secret)
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil || resp.StatusCode != 200 {
				keyedFailed.Add(1)
			} else {
				keyed.Add(1)
			}
			if resp != nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	})

	const n = 1000
	type result struct {
		status int
		took   time.Duration
		closed bool
		err    error
	}
	results := make(chan result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				results <- result{err: err}
				return
			}
			defer c.Close()
			<-start
			path := []string{"/v1/topics/keyed/records", "/v1/topics", "/v1/records", "/v1/acls"}[i%4]
			begin := time.Now()
			if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, 1000+i); err != nil {
				results <- result{err: err}
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				results <- result{err: err}
				return
			}
			took := time.Since(begin)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			_, err = br.ReadByte()
			results <- result{status: resp.StatusCode, took: took, closed: err != nil && !isTimeout(err)}
		})
	}
	close(start)
	wg.Wait()
	close(stop)
	kwg.Wait()
	close(results)
	var slowest time.Duration
	late := 0
	for r := range results {
		if r.err != nil {
			t.Fatalf("a request without a key: %v", r.err)
		}
		if r.status != http.StatusUnauthorized || !r.closed {
			t.Fatalf("a request without a key: HTTP %d, connection closed %v; want 401 and closed", r.status, r.closed)
		}
		slowest = max(slowest, r.took)
		if r.took > slowdown*time.Second {
			late++
		}
	}
	t.Logf("1,000 requests without a key, bodies unsent: slowest 401 after %v; %d keyed produces served meanwhile", slowest, keyed.Load())
	if late > 0 {
		t.Errorf("%d of the 401s took more than %v (slowest %v)", late, slowdown*time.Second, slowest)
	}
	if keyed.Load() == 0 || keyedFailed.Load() != 0 {
		t.Errorf("keyed produces meanwhile: %d served, %d failed", keyed.Load(), keyedFailed.Load())
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestPrincipalFrameShare: the review's key with no ACLs that declared four 99 MiB
// Produce frames and stalled. On a node with a 256 MiB budget its share of frames
// still arriving is a quarter of what the cache leaves: the first frame is reserved,
// the others wait for its share, and another principal produces meanwhile.
func TestPrincipalFrameShare(t *testing.T) {
	s := startStackOpts(t, stackOpts{memory: 256 << 20})
	s.topic("keyed", 1, 0)
	id, secret := s.key("User:app")
	s.allow("User:app", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "keyed"})
	attackerID, attackerSecret := s.key("User:stranger")
	mem := s.node.Memory
	idle := mem.Idle()

	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	for range 4 {
		c := saslConn(t, s.kafka, attackerID, attackerSecret)
		hdr := binary.BigEndian.AppendUint32(nil, 99<<20)
		hdr = binary.BigEndian.AppendUint16(hdr, 0) // Produce
		if _, err := c.Write(hdr); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, c)
	}
	testwait.Until(t, 10*time.Second, "the first frame reserved, the others held back by the share", func() bool {
		return mem.Arriving("User:stranger") == 99<<20 && labelled(s.node.Registry, "strata_memory_share_waits_total", "use", "kafka") >= 3
	})
	if used := mem.Used() - idle; used > 99<<20+8<<20 {
		t.Fatalf("%d MiB of the budget reserved beside the cache, want the one 99 MiB frame (the share is %d MiB)", used>>20, mem.ShareOf()>>20)
	}
	cl := s.kclient(id, secret)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.produceAs(ctx, cl, "keyed"); err != nil {
		t.Fatalf("another principal's produce while the stranger stalls: %v", err)
	}
	if a := mem.Arriving("User:stranger"); a != 99<<20 {
		t.Fatalf("the stranger holds %d bytes still arriving, want one frame", a)
	}
	for _, c := range stalled {
		c.Close()
	}
	testwait.Until(t, 10*time.Second, "the stranger's reservations released", func() bool {
		return mem.Arriving("User:stranger") == 0
	})
	if mem.Peak() > mem.Limit() || mem.Overreleased() != 0 {
		t.Fatalf("peak %d of %d, overreleased %d", mem.Peak(), mem.Limit(), mem.Overreleased())
	}
}

// saslConn is a Kafka connection authenticated by SASL/PLAIN (SaslHandshake v1, then
// SaslAuthenticate v1), for a test to write raw frames on.
func saslConn(t *testing.T, addr, user, pass string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00"+user+"\x00"+pass)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	for i, req := range []kmsg.Request{hs, au} {
		buf := kmsg.NewRequestFormatter().AppendRequest(nil, req, int32(i))
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatalf("SASL: %v", err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			t.Fatalf("SASL: %v", err)
		}
		resp := req.ResponseKind()
		resp.SetVersion(1)
		if err := resp.ReadFrom(body[4:]); err != nil {
			t.Fatalf("SASL answer: %v", err)
		}
		if r, ok := resp.(*kmsg.SASLAuthenticateResponse); ok && r.ErrorCode != 0 {
			t.Fatalf("SASL: error %d", r.ErrorCode)
		}
	}
	_ = c.SetDeadline(time.Time{})
	return c
}
