package kafka

import (
	"encoding/binary"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestApiVersions(t *testing.T) {
	ts := startServer(t, Config{}, newFakeCluster())
	c := dial(t, ts.addr)
	// Exactly what is served: transactions (22, 24-26, 28, 65, 66) but not
	// WriteTxnMarkers (27), no OffsetForLeaderEpoch (23); groups of both protocols (8,
	// 9, 11-16, 42, 47, 68, 69).
	want := map[int16][2]int16{
		18: {0, 3}, 3: {0, 12}, 10: {0, 4}, 60: {0, 1},
		0: {3, 12}, 1: {4, 12}, 2: {0, 7}, 8: {0, 9}, 9: {0, 9}, 19: {0, 7}, 20: {0, 6}, 21: {0, 2},
		22: {0, 5}, 29: {0, 3}, 30: {0, 3}, 31: {0, 3}, 32: {0, 4}, 33: {0, 2}, 37: {0, 3}, 44: {0, 1},
		11: {0, 9}, 12: {0, 4}, 13: {0, 5}, 14: {0, 5}, 15: {0, 5}, 16: {0, 5}, 42: {0, 2}, 47: {0, 0}, 48: {0, 1}, 49: {0, 1}, 68: {0, 1}, 69: {0, 1},
		24: {0, 4}, 25: {0, 4}, 26: {0, 5}, 28: {0, 5}, 65: {0, 0}, 66: {0, 1},
		76: {1, 1}, 77: {1, 1}, 78: {1, 2}, 79: {1, 2}, 90: {0, 1}, 91: {0, 0}, 92: {0, 0},
		50: {0, 0}, 51: {0, 0}, // SCRAM credentials
	}
	for v := int16(0); v <= 3; v++ {
		resp := c.roundTrip(kmsg.NewPtrApiVersionsRequest(), v).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		got := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		if len(got) != len(want) {
			t.Fatalf("v%d: advertised %v, want %v", v, got, want)
		}
		for k, r := range want {
			if got[k] != r {
				t.Errorf("v%d: key %d advertised %v, want %v", v, k, got[k], r)
			}
		}
		// SASL is advertised only when keys are configured.
		if _, ok := got[saslHandshakeKey]; ok {
			t.Errorf("v%d: SaslHandshake advertised without keys", v)
		}
		// Transactions v2 is a finalized feature, carried from v3.
		if v >= 3 && (resp.FinalizedFeaturesEpoch < 0 || len(resp.FinalizedFeatures) != 1 ||
			resp.FinalizedFeatures[0].Name != "transaction.version" || resp.FinalizedFeatures[0].MaxVersionLevel != 2) {
			t.Errorf("v%d: finalized features %+v (epoch %d), want transaction.version 2", v, resp.FinalizedFeatures, resp.FinalizedFeaturesEpoch)
		}
	}
}

// An ApiVersions request newer than the server is answered in v0 form (KIP-511): the
// client can read it whatever it sent, and learns the range to retry in.
func TestApiVersionsTooNew(t *testing.T) {
	ts := startServer(t, Config{}, newFakeCluster())
	c := dial(t, ts.addr)
	var b []byte
	b = append(b, 0, 0, 0, 0)
	b = kbin.AppendInt16(b, apiVersionsKey)
	b = kbin.AppendInt16(b, 99)
	b = kbin.AppendInt32(b, 7)
	b = kbin.AppendNullableString(b, nil)
	b = append(b, 0xde, 0xad, 0xbe, 0xef) // a body no version of ours can read
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	c.write(b)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	resp := c.recv(req, 7).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error code %d, want UNSUPPORTED_VERSION (35)", resp.ErrorCode)
	}
	if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 3 {
		t.Fatalf("api keys %+v, want only ApiVersions 0..3", resp.ApiKeys)
	}
	if n := testutil.ToFloat64(ts.metrics.requests.WithLabelValues("ApiVersions", "unsupported")); n != 1 {
		t.Errorf("too-new ApiVersions counted %v times under version \"unsupported\", want 1", n)
	}
	// The connection stays usable: the client retries at a version it now knows.
	if r := c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("retry at v3: error %d", r.ErrorCode)
	}
}

// Requests that Kafka closes the connection on: the answers before them still arrive,
// in order, and nothing after.
func TestClosesOnUnknownAndUnsupported(t *testing.T) {
	for _, tc := range []struct {
		name   string
		key    int16
		ver    int16
		reason string
	}{
		{"unknown api key", 9999, 0, "unknown_api"},
		{"share group heartbeat v0 (early access)", 76, 0, "unsupported_version"},
		{"streams group heartbeat not served", 88, 0, "unserved_api"},
		{"write txn markers not served", 27, 1, "unserved_api"},
		{"offset for leader epoch not served", 23, 4, "unserved_api"},
		{"produce v13", 0, 13, "unsupported_version"},
		{"fetch v13", 1, 13, "unsupported_version"},
		{"metadata v13", 3, 13, "unsupported_version"},
		{"describe cluster v2", 60, 2, "unsupported_version"},
		{"negative version", 3, -1, "unsupported_version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Config{}, newFakeCluster())
			c := dial(t, ts.addr)
			first := c.send(kmsg.NewPtrApiVersionsRequest(), 3)
			var b []byte
			b = append(b, 0, 0, 0, 0)
			b = kbin.AppendInt16(b, tc.key)
			b = kbin.AppendInt16(b, tc.ver)
			b = kbin.AppendInt32(b, 100)
			b = kbin.AppendNullableString(b, nil)
			b = append(b, make([]byte, 32)...)
			binary.BigEndian.PutUint32(b, uint32(len(b)-4))
			c.write(b)
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(3)
			c.recv(req, first)
			c.expectClosed()
			if n := testutil.ToFloat64(ts.metrics.protocol.WithLabelValues(tc.reason)); n != 1 {
				t.Errorf("protocol errors %q = %v, want 1", tc.reason, n)
			}
		})
	}
}

// A size prefix over the limit closes the connection before the frame is allocated.
func TestFrameOverLimitNotAllocated(t *testing.T) {
	ts := startServer(t, Config{}, newFakeCluster())
	for _, size := range []uint32{DefaultMaxFrameBytes + 1, 1<<31 - 1, 0xffffffff /* -1 */, 3} {
		c := dial(t, ts.addr)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var sz [4]byte
		binary.BigEndian.PutUint32(sz[:], size)
		c.write(sz[:])
		c.expectClosed()
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
			t.Errorf("size prefix %d: the process allocated %d bytes meanwhile, want the frame refused before allocating", size, grew)
		}
	}
	if n := testutil.ToFloat64(ts.metrics.protocol.WithLabelValues("frame_size")); n != 4 {
		t.Errorf("frame_size protocol errors = %v, want 4", n)
	}
}

func TestGarbageAndHalfFrames(t *testing.T) {
	ts := startServer(t, Config{}, newFakeCluster())
	for name, b := range map[string][]byte{
		"http":             []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"header too short": {0, 0, 0, 12, 0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff},
		// Five topics announced, the first one's name running past the frame.
		"metadata cut short":  {0, 0, 0, 20, 0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 5, 0, 40, 'a', 'b', 'c', 'd'},
		"client id runs over": {0, 0, 0, 12, 0, 18, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, ts.addr)
			c.write(b)
			c.expectClosed()
		})
	}
	t.Run("half frame then hang up", func(t *testing.T) {
		c := dial(t, ts.addr)
		c.write([]byte{0, 0, 0, 100, 0, 18, 0, 0})
		c.nc.Close()
	})
	// The server still serves.
	c := dial(t, ts.addr)
	if r := c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("ApiVersions after bad input: error %d", r.ErrorCode)
	}
}

// Pipelined requests are answered in the order sent, however long each takes.
func TestAnswersInOrder(t *testing.T) {
	fc := newFakeCluster()
	fc.add("slow", 1)
	fc.add("fast", 1)
	fc.delay = map[string]time.Duration{"slow": 300 * time.Millisecond}
	ts := startServer(t, Config{}, fc)
	c := dial(t, ts.addr)
	type sent struct {
		corr  int32
		req   kmsg.Request
		topic string
	}
	var order []sent
	for i := range 6 {
		topic := "fast"
		if i%3 == 0 {
			topic = "slow"
		}
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &topic
		req.Topics = []kmsg.MetadataRequestTopic{rt}
		order = append(order, sent{c.send(req, 9), req, topic})
	}
	for _, s := range order {
		resp := c.recv(s.req, s.corr).(*kmsg.MetadataResponse)
		if got := *resp.Topics[0].Topic; got != s.topic {
			t.Fatalf("response %d names %s, want %s", s.corr, got, s.topic)
		}
	}
}

// No more than MaxInflight requests of a connection are served at once; the rest wait
// unread.
func TestInflightBound(t *testing.T) {
	fc := newFakeCluster()
	fc.add("t", 1)
	fc.block = make(chan struct{})
	ts := startServer(t, Config{MaxInflight: 3}, fc)
	c := dial(t, ts.addr)
	var corrs []int32
	req := kmsg.NewPtrMetadataRequest()
	name := "t"
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &name
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	for range 8 {
		corrs = append(corrs, c.send(req, 9))
	}
	testwait.Until(t, 10*time.Second, "three requests in flight", func() bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		return fc.active >= 3
	})
	fc.mu.Lock()
	peak := fc.peak
	fc.mu.Unlock()
	if peak != 3 {
		t.Errorf("%d requests served at once, want MaxInflight = 3", peak)
	}
	close(fc.block)
	for _, corr := range corrs {
		c.recv(req, corr)
	}
}

// The idle timeout runs only while no request is in flight.
func TestIdleTimeout(t *testing.T) {
	fc := newFakeCluster()
	fc.add("slow", 1)
	fc.delay = map[string]time.Duration{"slow": 600 * time.Millisecond}
	ts := startServer(t, Config{IdleTimeout: 250 * time.Millisecond}, fc)

	c := dial(t, ts.addr)
	req := kmsg.NewPtrMetadataRequest()
	name := "slow"
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &name
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	c.roundTrip(req, 9) // in flight for longer than the idle timeout: not closed
	start := time.Now()
	c.expectClosed() // then idle: closed
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("closed %v after going idle, want about 250ms", d)
	}
	if n := testutil.ToFloat64(ts.metrics.closed.WithLabelValues("idle")); n != 1 {
		t.Errorf("idle closes = %v, want 1", n)
	}
}

func TestConnectionLimit(t *testing.T) {
	ts := startServer(t, Config{MaxConnections: 2}, newFakeCluster())
	a, b := dial(t, ts.addr), dial(t, ts.addr)
	a.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3)
	b.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3)
	c := dial(t, ts.addr)
	c.expectClosed()
	if n := testutil.ToFloat64(ts.metrics.refused.WithLabelValues("max_connections")); n != 1 {
		t.Errorf("refused connections = %v, want 1", n)
	}
	a.nc.Close()
	testwait.Until(t, 5*time.Second, "the closed connection released", func() bool { return testutil.ToFloat64(ts.metrics.connections) == 1 })
	d := dial(t, ts.addr)
	d.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3)
}

func TestMetricsPerAPIAndVersion(t *testing.T) {
	fc := newFakeCluster()
	ts := startServer(t, Config{}, fc)
	c := dial(t, ts.addr)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3)
	req := kmsg.NewPtrMetadataRequest()
	name := "missing"
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &name
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	c.roundTrip(req, 12)
	if n := testutil.ToFloat64(ts.metrics.requests.WithLabelValues("ApiVersions", "3")); n != 2 {
		t.Errorf("ApiVersions v3 requests = %v, want 2", n)
	}
	if n := testutil.ToFloat64(ts.metrics.errors.WithLabelValues("Metadata", "12")); n != 1 {
		t.Errorf("Metadata v12 errors = %v, want 1 (an unknown topic)", n)
	}
	if n := testutil.ToFloat64(ts.metrics.errors.WithLabelValues("ApiVersions", "3")); n != 0 {
		t.Errorf("ApiVersions v3 errors = %v, want 0", n)
	}
	if n := testutil.ToFloat64(ts.metrics.connections); n != 1 {
		t.Errorf("open connections = %v, want 1", n)
	}
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	for _, want := range []string{"strata_kafka_requests_total", "strata_kafka_request_seconds", "strata_kafka_connections"} {
		if !slices.Contains(names, want) {
			t.Errorf("registry lacks %s (has %s)", want, strings.Join(names, ", "))
		}
	}
}
