package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// kcatBrokers runs `kcat -L -J` against addr and returns "id=host:port" per broker and
// "topic=partitions" per topic.
func kcatBrokers(t *testing.T, addr string, extra ...string) (brokers, topics []string) {
	t.Helper()
	kcat := testsvc.Kcat(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kcat, append([]string{"-b", addr, "-L", "-J", "-m", "10"}, extra...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -b %s -L: %v\n%s", addr, err, out)
	}
	var md struct {
		Brokers []struct {
			ID   int32  `json:"id"`
			Name string `json:"name"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string            `json:"topic"`
			Partitions []json.RawMessage `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(out, &md); err != nil {
		t.Fatalf("kcat -L -J: %v\n%s", err, out)
	}
	for _, b := range md.Brokers {
		brokers = append(brokers, fmt.Sprintf("%d=%s", b.ID, b.Name))
	}
	for _, tp := range md.Topics {
		if tp.Topic == "__consumer_offsets" { // Kafka's internal topic, always listed
			continue
		}
		topics = append(topics, fmt.Sprintf("%s=%d", tp.Topic, len(tp.Partitions)))
	}
	return brokers, topics
}

// `strata dev` serves the Kafka protocol: kcat lists the node and the topics made over
// HTTP, and one it names is auto-created; records go through kcat with every codec
// (kafka_records_e2e_test.go).
func TestKafkaDevWithKcat(t *testing.T) {
	testsvc.Kcat(t)
	bin := buildStrata(t)
	addr, kafkaAddr := freeAddr(t), freeAddr(t)
	s, out := startStrata(t, bin, nil, addr, "dev", "--data", filepath.Join(t.TempDir(), "data"), "--listen", addr,
		"--kafka-listen", kafkaAddr, "--log-level", "warn")
	if want := "Kafka clients: bootstrap " + kafkaAddr; !strings.Contains(out.String(), want) {
		t.Errorf("the banner does not say %q:\n%s", want, out.String())
	}
	if _, err := client.New(s.url).CreateTopic(t.Context(), "orders", 3, nil); err != nil {
		t.Fatal(err)
	}
	brokers, topics := kcatBrokers(t, kafkaAddr)
	if len(brokers) != 1 || brokers[0] != "0="+kafkaAddr {
		t.Fatalf("kcat brokers %v, want 0=%s", brokers, kafkaAddr)
	}
	if strings.Join(topics, " ") != "orders=3" {
		t.Fatalf("kcat topics %v, want orders=3", topics)
	}
	if _, topics := kcatBrokers(t, kafkaAddr, "-t", "clicks"); strings.Join(topics, " ") != "clicks=1" {
		t.Fatalf("kcat -t clicks: topics %v, want clicks=1 (auto-created)", topics)
	}
	if _, err := client.New(s.url).Topic(t.Context(), "clicks"); err != nil {
		t.Fatalf("the auto-created topic is not served over HTTP: %v", err)
	}
	kcatRecords(t, s.url, kafkaAddr)
	s.stop(t)
}

// Two `strata serve` nodes on Postgres and MinIO: kcat bootstrapped at either lists
// both brokers alike, and its records go through with every codec; a franz-go producer
// bootstrapped at one spreads to both; after one is killed under that load, producers
// resume through the other within the node lease plus one metadata refresh, no
// acknowledged record is lost, and the dead node leaves the view within its lease.
func TestKafkaTwoServeNodes(t *testing.T) {
	dsn, endpoint := os.Getenv("STRATA_TEST_POSTGRES"), os.Getenv("STRATA_TEST_S3_ENDPOINT")
	if dsn == "" || endpoint == "" {
		testsvc.Unavailable(t, "set STRATA_TEST_POSTGRES and STRATA_TEST_S3_* (eval \"$(scripts/services.sh)\") to run against Postgres and MinIO")
	}
	testsvc.Kcat(t)
	catalogURL := testDatabase(t, dsn)
	bucket := fmt.Sprintf("strata-kafka-%d", time.Now().UnixNano())
	bucketURL := fmt.Sprintf("s3://%s/e2e?endpoint=%s&path_style=true&region=%s", bucket, endpoint, os.Getenv("STRATA_TEST_S3_REGION"))
	creds := []string{
		"AWS_ACCESS_KEY_ID=" + os.Getenv("STRATA_TEST_S3_ACCESS_KEY"),
		"AWS_SECRET_ACCESS_KEY=" + os.Getenv("STRATA_TEST_S3_SECRET_KEY"),
	}
	bin := buildStrata(t)
	const lease = 2 * time.Second
	serve := func() (*devServer, string) {
		addr, kafkaAddr := freeAddr(t), freeAddr(t)
		s, _ := startStrata(t, bin, creds, addr, "serve", "--catalog", catalogURL, "--bucket", bucketURL,
			"--create-bucket", "--listen", addr, "--log-level", "warn",
			"--kafka-listen", kafkaAddr, "--kafka-node-lease", lease.String())
		return s, kafkaAddr
	}
	a, ka := serve()
	b, kb := serve()
	if _, err := client.New(a.url).CreateTopic(t.Context(), "orders", 4, nil); err != nil {
		t.Fatal(err)
	}
	brokersA, topicsA := kcatBrokers(t, ka)
	brokersB, topicsB := kcatBrokers(t, kb)
	if len(brokersA) != 2 || fmt.Sprint(brokersA) != fmt.Sprint(brokersB) || fmt.Sprint(topicsA) != fmt.Sprint(topicsB) || fmt.Sprint(topicsA) != "[orders=4]" {
		t.Fatalf("the nodes disagree or miss something:\n%s: %v %v\n%s: %v %v", ka, brokersA, topicsA, kb, brokersB, topicsB)
	}

	kcatRecords(t, a.url, ka)

	// A franz-go producer bootstrapped at A alone reaches both nodes: each leads some of
	// the topic's partitions.
	if _, err := client.New(a.url).CreateTopic(t.Context(), "load", 8, nil); err != nil {
		t.Fatal(err)
	}
	beforeA, beforeB := kafkaRequests(t, a.url, "Produce"), kafkaRequests(t, b.url, "Produce")
	stop := make(chan struct{})
	lp := startLoad(t, ka, "load", stop)
	if !testwait.Within(30*time.Second, func() bool {
		return kafkaRequests(t, a.url, "Produce") > beforeA && kafkaRequests(t, b.url, "Produce") > beforeB
	}) {
		t.Fatalf("a producer bootstrapped at %s did not produce to both nodes", ka)
	}

	// SIGKILL of A under that load: every partition takes acknowledgements again
	// through B within the node lease plus one metadata refresh, and no acknowledged
	// record is lost.
	lp.mu.Lock()
	lp.resumeFrom = time.Now()
	lp.mu.Unlock()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	killed := time.Now()
	// The lease and one renewal period (A's registration lapses), the listener's
	// one-second view of the registry, the client's metadata refresh and retry backoff
	// (under a second as configured), and 2s for a loaded machine.
	resumeBound := lease + lease/3 + time.Second + time.Second + 2*time.Second
	for {
		lp.mu.Lock()
		n, last := len(lp.resumed), time.Time{}
		for _, at := range lp.resumed {
			if at.After(last) {
				last = at
			}
		}
		lp.mu.Unlock()
		if n == 8 {
			t.Logf("every partition acknowledged again %v after the kill (bound %v)", last.Sub(killed).Round(10*time.Millisecond), resumeBound)
			break
		}
		if time.Since(killed) > resumeBound {
			t.Fatalf("%v after the kill, %d of 8 partitions take records again; want all within %v", time.Since(killed), n, resumeBound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the load runs on through B a while before it stops
	close(stop)
	drained := make(chan struct{})
	go func() { lp.wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(60 * time.Second):
		t.Fatal("the producer's records were not all answered within 60s of stopping")
	}
	if lp.failed > 0 {
		t.Fatalf("%d records failed (retries are unlimited)", lp.failed)
	}
	checkAcked(t, kb, "load", 8, lp.acks)

	for {
		brokers, _ := kcatBrokers(t, kb)
		if len(brokers) == 1 && strings.HasSuffix(brokers[0], "="+kb) {
			break
		}
		// The lease, one renewal period, and the listener's one-second view.
		if bound := lease + lease/3 + 2*time.Second; time.Since(killed) > bound {
			t.Fatalf("%v after the kill, the live node still lists %v; want it gone within %v", time.Since(killed), brokers, bound)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the killed node left the view %v after the kill (lease %v)", time.Since(killed).Round(10*time.Millisecond), lease)
	b.signal(t, syscall.SIGTERM)
}
