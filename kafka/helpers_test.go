package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// The offsets topic's name and id, as the core lists it (broker/internal_topics.go).
var (
	offsetsTopic   = broker.OffsetsTopic
	offsetsTopicID = broker.OffsetsTopicID
)

// fakeCluster is an in-memory Topics and Membership for unit tests of the listener's
// logic (the real catalogs are exercised in integration_test.go).
type fakeCluster struct {
	mu        sync.Mutex
	topics    map[string]catalog.Topic
	nodes     []catalog.Node
	clusterID string
	listErr   error
	// block, when set, holds Topic and Topics calls until it is closed; active counts
	// the calls held at once, peak the most.
	block        chan struct{}
	active, peak int
	// delay holds Topic(name) calls for a while, per name.
	delay map[string]time.Duration
}

func newFakeCluster(nodes ...catalog.Node) *fakeCluster {
	return &fakeCluster{topics: map[string]catalog.Topic{}, nodes: nodes, clusterID: "test-cluster-id-abcdefg"}
}

func (f *fakeCluster) add(name string, partitions int32) catalog.Topic {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := catalog.Topic{ID: int64(len(f.topics) + 1), UUID: catalog.NewUUID(), Name: name, Partitions: partitions}
	f.topics[name] = t
	return t
}

func (f *fakeCluster) hold(ctx context.Context, name string) {
	f.mu.Lock()
	block, d := f.block, f.delay[name]
	f.active++
	f.peak = max(f.peak, f.active)
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.active--; f.mu.Unlock() }()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
		}
	}
	if d > 0 {
		time.Sleep(d)
	}
}

func (f *fakeCluster) Topics(ctx context.Context) ([]catalog.Topic, error) {
	f.hold(ctx, "")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	var ts []catalog.Topic
	for _, t := range f.topics {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b catalog.Topic) int { return cmpString(a.Name, b.Name) })
	return ts, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (f *fakeCluster) Topic(ctx context.Context, name string) (catalog.Topic, error) {
	f.hold(ctx, name)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := catalog.ValidateTopicName(name); err != nil {
		return catalog.Topic{}, catalog.ErrTopicNotFound
	}
	t, ok := f.topics[name]
	if !ok {
		return catalog.Topic{}, catalog.ErrTopicNotFound
	}
	return t, nil
}

func (f *fakeCluster) TopicByUUID(_ context.Context, id catalog.UUID) (catalog.Topic, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.topics {
		if t.UUID == id {
			return t, nil
		}
	}
	return catalog.Topic{}, catalog.ErrTopicNotFound
}

func (f *fakeCluster) CreateTopic(_ context.Context, name string, partitions int32, _ map[string]string) (catalog.Topic, error) {
	if err := catalog.ValidateTopicName(name); err != nil {
		return catalog.Topic{}, err
	}
	f.mu.Lock()
	_, exists := f.topics[name]
	f.mu.Unlock()
	if exists {
		return catalog.Topic{}, catalog.ErrTopicExists
	}
	return f.add(name, partitions), nil
}

// The rest of the core's catalog: nothing the listener's own tests reach.
func (f *fakeCluster) DeleteTopic(context.Context, string) error { return errors.ErrUnsupported }
func (f *fakeCluster) UpdateTopic(context.Context, string, int32, map[string]string) (catalog.Topic, error) {
	return catalog.Topic{}, errors.ErrUnsupported
}
func (f *fakeCluster) Partitions(context.Context, int64) ([]catalog.PartitionInfo, error) {
	return nil, errors.ErrUnsupported
}
func (f *fakeCluster) OffsetForTime(context.Context, int64, int32, int64) (int64, error) {
	return 0, errors.ErrUnsupported
}

// core is a broker core over f alone (no roles), its topic cache off so that changes
// to f show at once.
func (f *fakeCluster) core() *broker.Broker {
	return broker.New(broker.Config{TopicCacheTTL: -1}, broker.Deps{Catalog: f})
}

func (f *fakeCluster) LiveNodes(context.Context) ([]catalog.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.nodes), nil
}

func (f *fakeCluster) ClusterID(context.Context) (string, error) { return f.clusterID, nil }

type fixedSelf catalog.Node

func (s fixedSelf) Node() catalog.Node { return catalog.Node(s) }

// testServer runs a Server on a loopback port until the test ends.
type testServer struct {
	*Server
	addr string
	reg  *prometheus.Registry
}

func startServer(t testing.TB, cfg Config, fc *fakeCluster, deps ...func(*Deps)) *testServer {
	t.Helper()
	if len(fc.nodes) == 0 {
		fc.nodes = []catalog.Node{{ID: 0, Addr: "127.0.0.1:9092"}}
	}
	reg := prometheus.NewRegistry()
	d := Deps{Core: fc.core(), Membership: fc, Self: fixedSelf(fc.nodes[0])}
	for _, f := range deps {
		f(&d)
	}
	s, err := New(cfg, d, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{Server: s, addr: ln.Addr().String(), reg: reg}
}

// client speaks the protocol by hand, frame by frame.
type client struct {
	t    testing.TB
	nc   net.Conn
	corr int32
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc}
}

// send writes req at version v and returns its correlation id.
func (c *client) send(req kmsg.Request, v int16) int32 {
	c.t.Helper()
	req.SetVersion(v)
	c.corr++
	id := "test-client"
	buf := kmsg.NewRequestFormatter(kmsg.FormatterClientID(id)).AppendRequest(nil, req, c.corr)
	c.write(buf)
	return c.corr
}

func (c *client) write(b []byte) {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// frame reads one response frame's body.
func (c *client) frame() ([]byte, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var sz [4]byte
	if _, err := io.ReadFull(c.nc, sz[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(sz[:]))
	_, err := io.ReadFull(c.nc, b)
	return b, err
}

// recv reads the response to a request of req's kind and version, checking its
// correlation id.
func (c *client) recv(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	b, err := c.frame()
	if err != nil {
		c.t.Fatalf("read response to %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return decodeResponse(c.t, req, corr, b)
}

func decodeResponse(t testing.TB, req kmsg.Request, corr int32, b []byte) kmsg.Response {
	t.Helper()
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		t.Fatalf("response correlation id %d, want %d", got, corr)
	}
	b = b[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != apiVersionsKey {
		if b[0] != 0 {
			t.Fatalf("response header has %d tagged fields, want 0", b[0])
		}
		b = b[1:]
	}
	if err := resp.ReadFrom(b); err != nil {
		t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// roundTrip sends req at v and returns the response.
func (c *client) roundTrip(req kmsg.Request, v int16) kmsg.Response {
	c.t.Helper()
	return c.recv(req, c.send(req, v))
}

// expectClosed asserts the server closes the connection without sending anything more.
func (c *client) expectClosed() {
	c.t.Helper()
	b, err := c.frame()
	if err == nil {
		c.t.Fatalf("got a %d-byte frame, want the connection closed", len(b))
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !isReset(err) {
		c.t.Fatalf("read: %v, want the connection closed (EOF)", err)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}
