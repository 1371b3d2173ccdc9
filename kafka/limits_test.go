package kafka

import (
	"context"
	"crypto/x509"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/security"
)

// principals is an Authenticator whose SASL/PLAIN username is the principal's name and
// whose password is "secret": several principals, without a catalog.
type principals struct{}

func (principals) AuthenticatePlain(_ context.Context, user, pass string) (security.Identity, error) {
	if pass != "secret" || user == "" {
		return security.Identity{}, ErrAuthFailed
	}
	return security.Identity{Principal: "User:" + user}, nil
}
func (principals) CertPrincipal(*x509.Certificate) (string, error) { return "", ErrAuthFailed }
func (principals) Track(string, func()) (func(), bool)             { return func() {}, true }
func (principals) OAuthEnabled() bool                              { return false }
func (principals) StartScram(context.Context, string) (*security.ScramLogin, error) {
	return nil, ErrAuthFailed
}
func (principals) AuthenticateToken(context.Context, string) (security.Identity, error) {
	return security.Identity{}, ErrAuthFailed
}

// dialFrom connects to addr from the loopback address from (127.0.0.0/8 is all
// loopback on Linux), so that tests can be several hosts.
func dialFrom(t *testing.T, from, addr string) *client {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc}
}

// login authenticates c as User:name.
func login(t *testing.T, c *client, name string) {
	t.Helper()
	if r := handshake(t, c, 1, "PLAIN"); r.ErrorCode != 0 {
		t.Fatalf("handshake: %d", r.ErrorCode)
	}
	if r := authenticate(t, c, plain(name, "secret")); r.ErrorCode != 0 {
		t.Fatalf("authenticate %s: %d", name, r.ErrorCode)
	}
}

// A connection that does not authenticate within the auth timeout is closed; one
// that did, opened before it, is not.
func TestAuthTimeout(t *testing.T) {
	fc := newFakeCluster()
	fc.add("orders", 1)
	ts := startServer(t, Config{Auth: principals{}, AuthTimeout: 300 * time.Millisecond}, fc)
	authed := dial(t, ts.addr)
	login(t, authed, "a")
	silent, talker := dial(t, ts.addr), dial(t, ts.addr)
	// ApiVersions before authenticating does not extend the deadline.
	talker.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3)
	start := time.Now()
	silent.expectClosed()
	talker.expectClosed()
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("closed %v after the 300ms auth timeout", d)
	}
	if n := testutil.ToFloat64(ts.metrics.closed.WithLabelValues("auth_timeout")); n != 2 {
		t.Errorf("auth_timeout closes = %v, want 2", n)
	}
	// Opened before the two, past its deadline, and authenticated: still served.
	if md := authed.roundTrip(metadataFor("orders"), 12).(*kmsg.MetadataResponse); md.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata on the authenticated connection: %+v", md.Topics[0])
	}
}

// Connections not yet authenticated hold at most their share of the slots, and one
// address at most its share of that; authenticating gives the slot back to them.
func TestUnauthenticatedShare(t *testing.T) {
	ts := startServer(t, Config{Auth: principals{}, MaxConnections: 8, MaxUnauthenticated: 4, MaxUnauthenticatedPerHost: 2}, newFakeCluster())
	admitted := func(c *client) {
		t.Helper()
		c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3)
	}
	a1, a2 := dialFrom(t, "127.0.0.1", ts.addr), dialFrom(t, "127.0.0.1", ts.addr)
	admitted(a1)
	admitted(a2)
	dialFrom(t, "127.0.0.1", ts.addr).expectClosed() // the address's share
	b1, b2 := dialFrom(t, "127.0.0.2", ts.addr), dialFrom(t, "127.0.0.2", ts.addr)
	admitted(b1)
	admitted(b2)
	dialFrom(t, "127.0.0.3", ts.addr).expectClosed() // the share of all
	if n := testutil.ToFloat64(ts.metrics.refused.WithLabelValues("unauthenticated_per_host")); n != 1 {
		t.Errorf("refused per host = %v, want 1", n)
	}
	if n := testutil.ToFloat64(ts.metrics.refused.WithLabelValues("unauthenticated")); n != 1 {
		t.Errorf("refused as unauthenticated = %v, want 1", n)
	}
	// Authenticating frees a slot of both shares: another address, and the first one,
	// get in again.
	login(t, a1, "a")
	login(t, b1, "b")
	for _, from := range []string{"127.0.0.3", "127.0.0.1"} {
		c := dialFrom(t, from, ts.addr)
		admitted(c)
		login(t, c, "c")
	}
	// Authenticated connections fill the rest, up to the connection limit.
	for _, from := range []string{"127.0.0.4", "127.0.0.5"} {
		login(t, dialFrom(t, from, ts.addr), "d")
	}
	dialFrom(t, "127.0.0.6", ts.addr).expectClosed()
	if n := testutil.ToFloat64(ts.metrics.refused.WithLabelValues("max_connections")); n != 1 {
		t.Errorf("refused at the connection limit = %v, want 1", n)
	}
	// Closed connections leave the counts.
	b2.nc.Close()
	a2.nc.Close()
	testwait.Until(t, 10*time.Second, "the closed connections released", func() bool { return testutil.ToFloat64(ts.metrics.connections) == 6 })
	ts.mu.Lock()
	unauth, hosts := ts.unauth, len(ts.unauthByHost)
	ts.mu.Unlock()
	if unauth != 0 || hosts != 0 {
		t.Fatalf("%d connections counted unauthenticated from %d addresses, want none", unauth, hosts)
	}
}

func TestHostKey(t *testing.T) {
	for addr, want := range map[string]string{
		"10.1.2.3:9092":               "10.1.2.3",
		"[::ffff:10.1.2.3]:9092":      "10.1.2.3",
		"[2001:db8:1:2:3:4:5:6]:9092": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:1":    "2001:db8:1:2::/64",
		"[fe80::1%eth0]:9092":         "fe80::/64",
		"[2001:db8:1:3:3:4:5:6]:9092": "2001:db8:1:3::/64",
		"[::1]:9092":                  "::/64",
		"not an address":              "not an address",
		"pipe":                        "pipe",
	} {
		if got := hostKey(fakeAddr(addr)); got != want {
			t.Errorf("hostKey(%s) = %s, want %s", addr, got, want)
		}
	}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

// A frame before authentication above 64 KiB closes the connection before anything
// is reserved; one within it is reserved in the listener's pool, never in the node's
// budget.
func TestPreAuthFrames(t *testing.T) {
	mem := membudget.New(64<<20, nil)
	ts := startServer(t, Config{Auth: principals{}}, newFakeCluster(), func(d *Deps) { d.Memory = mem })
	idle := mem.Idle()
	if idle != DefaultPreAuthMemoryBytes || ts.preAuth.Limit() != DefaultPreAuthMemoryBytes {
		t.Fatalf("the pool (%d) is not carved out of the budget (idle %d)", ts.preAuth.Limit(), idle)
	}
	c := dial(t, ts.addr)
	c.write(binary.BigEndian.AppendUint32(nil, PreAuthMaxFrameBytes+1))
	c.expectClosed()
	if n := testutil.ToFloat64(ts.metrics.protocol.WithLabelValues("frame_size")); n != 1 {
		t.Errorf("frame_size protocol errors = %v, want 1", n)
	}

	// A 60 KiB SASL token: read, refused, and closed.
	c = dial(t, ts.addr)
	handshake(t, c, 1, "PLAIN")
	if r := authenticate(t, c, []byte(strings.Repeat("M", 60<<10))); r.ErrorCode == 0 {
		t.Fatal("a 60 KiB token was accepted")
	}
	c.expectClosed()
	if mem.Peak() != idle || mem.Used() != idle {
		t.Fatalf("the node's budget moved before authentication: peak %d, used %d, idle %d", mem.Peak(), mem.Used(), idle)
	}
	if p := ts.preAuth.Peak(); p < 60<<10 || p > PreAuthMaxFrameBytes {
		t.Fatalf("the pool's peak %d: the frame was not reserved there", p)
	}
	testwait.Until(t, 10*time.Second, "the pool released", func() bool { return ts.preAuth.Used() == 0 })

	// One address holds at most one frame of the largest size in the pool: a second
	// one it declares and stalls waits, and another address is served meanwhile.
	var two []*client
	for range 2 {
		c := dialFrom(t, "127.0.0.2", ts.addr)
		handshake(t, c, 1, "PLAIN")
		two = append(two, c)
	}
	for _, c := range two {
		c.write(binary.BigEndian.AppendUint32(nil, PreAuthMaxFrameBytes))
	}
	testwait.Until(t, 10*time.Second, "the second frame of one address held back", func() bool {
		return ts.preAuth.Used() == PreAuthMaxFrameBytes && counter(t, ts.reg, "strata_memory_share_waits_total", "kafka_preauth") >= 1
	})
	login(t, dialFrom(t, "127.0.0.3", ts.addr), "b")

	// After authenticating, a frame is the budget's, and larger ones are allowed.
	c = dial(t, ts.addr)
	login(t, c, "a")
	req := kmsg.NewPtrMetadataRequest()
	long := strings.Repeat("t", 200)
	for range 500 { // ~100 KiB
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &long
		req.Topics = append(req.Topics, rt)
	}
	c.roundTrip(req, 12)
	if mem.Peak() < idle+100<<10 {
		t.Fatalf("peak %d: the authenticated frame was not reserved in the budget", mem.Peak())
	}
	testwait.Until(t, 10*time.Second, "the budget back at its idle level", func() bool { return mem.Used() == idle })
	if mem.Overreleased() != 0 || ts.preAuth.Overreleased() != 0 {
		t.Fatal("released twice")
	}
}

// The outside review's reproduction, scaled down: a principal that declares several
// large Produce frames and stalls holds no more of the budget than its share (a first
// frame excepted); another principal is served meanwhile, its own frames reserved.
func TestPrincipalFrameShare(t *testing.T) {
	reg := prometheus.NewRegistry()
	mem := membudget.New(16<<20+DefaultPreAuthMemoryBytes, reg)
	ts := startServer(t, Config{Auth: principals{}}, newFakeCluster(), func(d *Deps) { d.Memory = mem })
	idle, share := mem.Idle(), mem.ShareOf()
	if share != 4<<20 {
		t.Fatalf("share %d, want 4 MiB", share)
	}
	// A Produce header declaring a 3 MiB frame, and nothing after it.
	stall := func(c *client) {
		b := binary.BigEndian.AppendUint32(nil, 3<<20)
		b = binary.BigEndian.AppendUint16(b, uint16(produceKey))
		c.write(b)
	}
	var attacker []*client
	for range 4 {
		c := dial(t, ts.addr)
		login(t, c, "attacker")
		stall(c)
		attacker = append(attacker, c)
	}
	// The first frame is reserved; the others wait for the attacker's share.
	testwait.Until(t, 10*time.Second, "the first frame reserved", func() bool { return mem.Arriving("User:attacker") == 3<<20 })
	testwait.Until(t, 10*time.Second, "the three others held back by the share", func() bool {
		return counter(t, reg, "strata_memory_share_waits_total", "kafka") >= 3
	})
	if mem.Used() != idle+3<<20 {
		t.Fatalf("used %d, want idle + one frame", mem.Used())
	}
	victim := dial(t, ts.addr)
	login(t, victim, "victim")
	if md := victim.roundTrip(metadataFor("none"), 12).(*kmsg.MetadataResponse); len(md.Topics) != 1 {
		t.Fatalf("the other principal's metadata: %+v", md)
	}
	stall(victim)
	testwait.Until(t, 10*time.Second, "the other principal's frame reserved", func() bool { return mem.Arriving("User:victim") == 3<<20 })
	if a := mem.Arriving("User:attacker"); a > max(share, 3<<20) {
		t.Fatalf("the attacker holds %d bytes still arriving, above its share %d", a, share)
	}
	if mem.Used() != idle+6<<20 {
		t.Fatalf("used %d, want idle + the two frames", mem.Used())
	}
	for _, c := range append(attacker, victim) {
		c.nc.Close()
	}
	testwait.Until(t, 10*time.Second, "the budget back at its idle level", func() bool { return mem.Used() == idle })
	if mem.Arriving("User:attacker") != 0 || mem.Overreleased() != 0 || mem.Peak() > mem.Limit() {
		t.Fatalf("after: attacker %d, overreleased %d, peak %d", mem.Arriving("User:attacker"), mem.Overreleased(), mem.Peak())
	}
}

// counter is the value of the counter name{use=use} in reg (0 when absent).
func counter(t *testing.T, reg *prometheus.Registry, name, use string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "use" && l.GetValue() == use {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
