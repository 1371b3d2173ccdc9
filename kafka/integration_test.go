package kafka_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/catalog/sqlite"
	inode "github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/kafka"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/security"
	"github.com/strata-io/strata/writer"
)

// nodeCatalog is a whole catalog backend with the node registry (both backends).
type nodeCatalog interface {
	catalog.Backend
	catalog.Cluster
}

// node is a Kafka listener over a whole node on a real catalog — writer, reader and the
// broker core over a store — registered like a strata node (internal/node, through
// nodetest), and the HTTP API over the same core.
type node struct {
	addr string
	id   int32 // the node's id in the catalog's registry
	core *broker.Broker
	http string // the HTTP API's base URL
}

func startNode(t *testing.T, cat nodeCatalog, cfg kafka.Config) *node {
	t.Helper()
	store, err := fs.New(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	return startNodeOn(t, cat, store, cfg)
}

// startNodeOn starts a node on store (nodes sharing a catalog share a store).
func startNodeOn(t *testing.T, cat nodeCatalog, store objstore.Store, cfg kafka.Config) *node {
	t.Helper()
	n := nodetest.Start(t, nodetest.On(cat, store), nodetest.Kafka(func(c *kafka.Config) { *c = cfg }),
		nodetest.Mutate(func(c *inode.Config) {
			c.WriterConfig = writer.Config{Linger: 5 * time.Millisecond}
			c.ReaderConfig = reader.Config{PollInterval: 100 * time.Millisecond}
		}))
	return &node{addr: n.KafkaAddr, id: n.KafkaNodeID, core: n.Broker, http: n.URL}
}

func openSQLite(t *testing.T) *sqlite.Catalog {
	t.Helper()
	c, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func admin(t *testing.T, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// franz-go's admin client against one node on the embedded catalog: brokers, topics
// with their ids, cluster id, coordinator, API versions.
func TestFranzGoAgainstNode(t *testing.T) {
	cat := openSQLite(t)
	orders, err := cat.CreateTopic(t.Context(), "orders", 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cat, kafka.Config{})
	adm := admin(t, kgo.SeedBrokers(n.addr))
	ctx := ctx10(t)

	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clusterID, _ := cat.ClusterID(t.Context())
	if md.Cluster != clusterID || md.Controller != n.id {
		t.Errorf("cluster %q controller %d, want %q and %d", md.Cluster, md.Controller, clusterID, n.id)
	}
	if len(md.Brokers) != 1 || fmt.Sprintf("%s:%d", md.Brokers[0].Host, md.Brokers[0].Port) != n.addr {
		t.Fatalf("brokers %+v, want one at %s", md.Brokers, n.addr)
	}
	td, ok := md.Topics["orders"]
	if !ok || td.Err != nil || len(td.Partitions) != 3 || [16]byte(td.ID) != orders.UUID {
		t.Fatalf("orders: %+v, want 3 partitions and id %s", td, orders.UUID)
	}
	for _, p := range td.Partitions {
		if p.Err != nil || p.Leader != n.id {
			t.Errorf("partition %d: leader %d, err %v", p.Partition, p.Leader, p.Err)
		}
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil || !slices.Equal(topics.Names(), []string{"orders"}) {
		t.Fatalf("ListTopics = %v, %v", topics.Names(), err)
	}
	co := adm.FindGroupCoordinators(ctx, "billing")
	if r, ok := co["billing"]; !ok || r.Err != nil || r.NodeID != n.id {
		t.Fatalf("FindGroupCoordinators: %+v", co)
	}
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, bv := range vs {
		if bv.Err != nil {
			t.Fatal(bv.Err)
		}
		if mn, mx, ok := bv.KeyVersions(3); !ok || mn != 0 || mx != 12 {
			t.Errorf("Metadata versions %d..%d (%v), want 0..12", mn, mx, ok)
		}
	}
}

// SASL/PLAIN through franz-go: the key's id and secret get in; another key's id with
// the secret does not.
func TestFranzGoSASLPlain(t *testing.T) {
	const key, other = "kafka-sasl-key-0123456789", "kafka-other-key-0123456789"
	cat := openSQLite(t)
	if _, err := cat.CreateTopic(t.Context(), "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cat, kafka.Config{Auth: security.New(security.Config{StaticKeys: []string{key, other}}, nil)})
	good := admin(t, kgo.SeedBrokers(n.addr), kgo.SASL(plain.Auth{User: security.StaticKeyID(key), Pass: key}.AsMechanism()))
	if topics, err := good.ListTopics(ctx10(t)); err != nil || !topics.Has("orders") {
		t.Fatalf("with the key: %v, %v", topics.Names(), err)
	}
	bad := admin(t, kgo.SeedBrokers(n.addr), kgo.SASL(plain.Auth{User: security.StaticKeyID(other), Pass: key}.AsMechanism()),
		kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if _, err := bad.ListTopics(ctx10(t)); err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("with another key's id: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	none := admin(t, kgo.SeedBrokers(n.addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if _, err := none.ListTopics(ctx10(t)); err == nil {
		t.Fatal("without credentials: listed topics")
	}
}

func TestFranzGoTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	cat := openSQLite(t)
	if _, err := cat.CreateTopic(t.Context(), "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cat, kafka.Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	adm := admin(t, kgo.SeedBrokers(n.addr), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}))
	if topics, err := adm.ListTopics(ctx10(t)); err != nil || !topics.Has("orders") {
		t.Fatalf("over TLS: %v, %v", topics.Names(), err)
	}
	plainText := admin(t, kgo.SeedBrokers(n.addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if _, err := plainText.ListTopics(ctx10(t)); err == nil {
		t.Fatal("plain TCP to a TLS listener listed topics")
	}
}

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "strata-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// kcatMetadata is `kcat -L -J`'s answer.
type kcatMetadata struct {
	ControllerID int32 `json:"controllerid"`
	Brokers      []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Leader    int32 `json:"leader"`
		} `json:"partitions"`
	} `json:"topics"`
}

func kcatList(t *testing.T, addr string, extra ...string) kcatMetadata {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	args := append([]string{"-b", addr, "-L", "-J", "-m", "10"}, extra...)
	out, err := exec.CommandContext(ctx, testsvc.Kcat(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var md kcatMetadata
	if err := json.Unmarshal(out, &md); err != nil {
		t.Fatalf("kcat -L -J output: %v\n%s", err, out)
	}
	return md
}

// librdkafka 2.0.2 (kcat) lists the node and the topics, with and without SASL.
func TestKcatListsBrokersAndTopics(t *testing.T) {
	testsvc.Kcat(t)
	const key = "kcat-sasl-key-0123456789"
	cat := openSQLite(t)
	for _, tp := range []struct {
		name string
		n    int32
	}{{"orders", 3}, {"payments", 1}} {
		if _, err := cat.CreateTopic(t.Context(), tp.name, tp.n, nil); err != nil {
			t.Fatal(err)
		}
	}
	check := func(md kcatMetadata, addr string) {
		t.Helper()
		if len(md.Brokers) != 1 || md.Brokers[0].Name != addr {
			t.Fatalf("kcat brokers %+v, want one at %s", md.Brokers, addr)
		}
		got := map[string]int{}
		for _, tp := range md.Topics {
			if tp.Error != "" {
				t.Fatalf("topic %s: %s", tp.Topic, tp.Error)
			}
			got[tp.Topic] = len(tp.Partitions)
		}
		if got["orders"] != 3 || got["payments"] != 1 || got["__consumer_offsets"] != 1 || len(got) != 3 {
			t.Fatalf("kcat topics %v, want orders:3 payments:1 (and the internal __consumer_offsets:1)", got)
		}
	}
	n := startNode(t, cat, kafka.Config{})
	check(kcatList(t, n.addr), n.addr)

	s := startNode(t, cat, kafka.Config{Auth: security.New(security.Config{StaticKeys: []string{key}}, nil)})
	sasl := []string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=" + security.StaticKeyID(key)}
	md := kcatList(t, s.addr, append(sasl, "-X", "sasl.password="+key)...)
	if len(md.Brokers) != 2 { // both nodes share the catalog's registry
		t.Fatalf("with SASL: brokers %+v, want both nodes", md.Brokers)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	args := append([]string{"-b", s.addr, "-L", "-m", "3"}, append(sasl, "-X", "sasl.password=wrong-key-0123456789")...)
	out, err := exec.CommandContext(ctx, testsvc.Kcat(t), args...).CombinedOutput()
	if err == nil {
		t.Fatalf("kcat with a wrong key listed metadata:\n%s", out)
	}
}

// Two nodes on one Postgres catalog: a client bootstrapped at either sees both brokers
// and the same leader for every partition, the same controller and cluster id — as
// franz-go and as kcat.
func TestTwoNodesAgree(t *testing.T) {
	dsn := testsvc.PostgresDSN(t)
	open := func() *postgres.Catalog {
		c, err := postgres.Open(t.Context(), dsn, catalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := open(), open()
	for i := range 12 {
		if _, err := a.CreateTopic(t.Context(), fmt.Sprintf("topic-%02d", i), int32(1+i%5), nil); err != nil {
			t.Fatal(err)
		}
	}
	na, nb := startNode(t, a, kafka.Config{}), startNode(t, b, kafka.Config{})
	if na.id == nb.id {
		t.Fatalf("both nodes registered as %d", na.id)
	}
	summary := func(md kadm.Metadata) string {
		var s []string
		s = append(s, fmt.Sprintf("cluster=%s controller=%d", md.Cluster, md.Controller))
		for _, br := range md.Brokers {
			s = append(s, fmt.Sprintf("broker %d=%s:%d", br.NodeID, br.Host, br.Port))
		}
		for _, name := range md.Topics.Names() {
			td := md.Topics[name]
			for _, p := range td.Partitions.Sorted() {
				s = append(s, fmt.Sprintf("%s/%d id=%x leader=%d epoch=%d", name, p.Partition, td.ID, p.Leader, p.LeaderEpoch))
			}
		}
		return strings.Join(s, "\n")
	}
	var views []string
	leaders := map[int32]int{}
	for _, n := range []*node{na, nb} {
		md, err := admin(t, kgo.SeedBrokers(n.addr)).Metadata(ctx10(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(md.Brokers) != 2 {
			t.Fatalf("node %s lists brokers %+v, want both", n.addr, md.Brokers)
		}
		for _, td := range md.Topics {
			for _, p := range td.Partitions {
				leaders[p.Leader]++
			}
		}
		views = append(views, summary(md))
	}
	if views[0] != views[1] {
		t.Fatalf("the nodes disagree:\n--- %s\n%s\n--- %s\n%s", na.addr, views[0], nb.addr, views[1])
	}
	if len(leaders) != 2 {
		t.Errorf("every partition led by one node: %v", leaders)
	}
	ka, kb := kcatList(t, na.addr), kcatList(t, nb.addr)
	ja, _ := json.Marshal(ka)
	jb, _ := json.Marshal(kb)
	if string(ja) != string(jb) || len(ka.Brokers) != 2 {
		t.Fatalf("kcat sees the nodes disagree:\n%s\n%s", ja, jb)
	}
}
