package node

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/catalog"
)

// liveIDs are the ids of the nodes the catalog lists as live brokers.
func liveIDs(t *testing.T, cat catalog.Backend) []int32 {
	t.Helper()
	nodes, err := cat.LiveNodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	return ids
}

// TestKafkaListener: a node with Config.Kafka listens, registers itself in the catalog
// before Start returns, answers Kafka clients (a record produced over Kafka is fetched
// over HTTP's core), and leaves the registry when it stops.
func TestKafkaListener(t *testing.T) {
	cfg := newConfig(t)
	cfg.HTTP.Listen, cfg.ShutdownTimeout = "127.0.0.1:0", 10*time.Second
	cfg.Kafka = KafkaConfig{Listen: "127.0.0.1:0", NodeLease: 5 * time.Second}
	n, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx) }()
	if n.KafkaAddr == "" || n.URL == "" {
		t.Fatalf("addresses: Kafka %q, HTTP %q", n.KafkaAddr, n.URL)
	}
	if ids := liveIDs(t, cfg.Catalog); !slices.Contains(ids, n.KafkaNodeID) {
		t.Fatalf("live brokers %v, want node %d registered when Start returns", ids, n.KafkaNodeID)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte("over kafka")}).FirstErr(); err != nil {
		t.Fatalf("produce over Kafka: %v", err)
	}
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil || len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != n.KafkaNodeID {
		t.Fatalf("metadata: %v %+v, want this node as the one broker", err, resp)
	}
	// The HTTP API lists the same registry (the console's overview).
	hr, err := http.Get(n.URL + "/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	var nodes v1.NodeList
	err = json.NewDecoder(hr.Body).Decode(&nodes)
	hr.Body.Close()
	if err != nil || hr.StatusCode != 200 || len(nodes.Nodes) != 1 || nodes.Nodes[0].ID != n.KafkaNodeID || nodes.Nodes[0].Address != n.KafkaAddr ||
		!nodes.Nodes[0].LeaseUntil.After(time.Now()) {
		t.Fatalf("GET /v1/nodes: %d %+v %v, want this node at %s", hr.StatusCode, nodes, err, n.KafkaAddr)
	}
	stop()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if ids := liveIDs(t, cfg.Catalog); slices.Contains(ids, n.KafkaNodeID) {
		t.Fatalf("live brokers %v after the node stopped: it did not deregister", ids)
	}
}

// TestKafkaAddressInUse: a Kafka address already taken fails Start with a ListenError
// naming the listener, and leaves nothing running; with BusyWarning the node starts
// without the listener instead (strata dev's default port).
func TestKafkaAddressInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := newConfig(t)
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Kafka = KafkaConfig{Listen: taken.Addr().String()}
	_, err = Start(t.Context(), cfg)
	var le *ListenError
	if !errors.As(err, &le) || le.Front != "Kafka" || le.Addr != taken.Addr().String() {
		t.Fatalf("Start on a taken Kafka address: %v, want a ListenError for Kafka", err)
	}
	if ids := liveIDs(t, cfg.Catalog); len(ids) != 0 {
		t.Fatalf("live brokers %v after a failed start", ids)
	}

	cfg.Kafka.BusyWarning = "Kafka listener off"
	n, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Start with BusyWarning: %v", err)
	}
	defer n.Stop(context.Background())
	if n.KafkaAddr != "" || n.URL == "" {
		t.Fatalf("with the Kafka address taken: Kafka %q, HTTP %q; want no listener, and the API", n.KafkaAddr, n.URL)
	}
}

// TestConfigRefused: configurations no node can run are refused before anything starts.
func TestConfigRefused(t *testing.T) {
	for name, mutate := range map[string]func(*Config){
		"Kafka without the writer": func(c *Config) { c.Writer, c.Kafka.Listen = false, "127.0.0.1:0" },
		"Kafka without the reader": func(c *Config) { c.Reader, c.Kafka.Listen = false, "127.0.0.1:0" },
		"a listener on Lambda":     func(c *Config) { c.Lambda, c.HTTP.Listen = true, "127.0.0.1:0" },
		"connect without a reader": func(c *Config) { c.Connect, c.Reader = true, false },
	} {
		cfg := newConfig(t)
		mutate(&cfg)
		if n, err := Start(t.Context(), cfg); err == nil {
			n.Stop(context.Background())
			t.Errorf("%s: started", name)
		}
	}
}
