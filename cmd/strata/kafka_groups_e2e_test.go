package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// Consumer groups through kcat's balanced consumer (librdkafka 2.0.2, `kcat -G`):
// JoinGroup/SyncGroup with librdkafka's range assignor, the state machine in the
// catalog, members on one node or on two.

// kcatMember is a running `kcat -G` consumer: the records it printed and the partitions
// its last rebalance assigned it (librdkafka reports them on stderr).
type kcatMember struct {
	cmd  *exec.Cmd
	done chan struct{}

	mu       sync.Mutex
	assigned []int32
	records  map[string]bool // "partition/offset/value"
	stderr   strings.Builder
}

func startKcatMember(t *testing.T, bootstrap, group, topic string) *kcatMember {
	t.Helper()
	m := &kcatMember{records: map[string]bool{}, done: make(chan struct{})}
	m.cmd = exec.Command(testsvc.Kcat(t), "-u", "-b", bootstrap, "-G", group, topic, "-f", "%p %o %s\n",
		"-X", "auto.offset.reset=earliest", "-X", "heartbeat.interval.ms=300", "-X", "session.timeout.ms=6000",
		"-X", "auto.commit.interval.ms=200", "-X", "topic.metadata.refresh.interval.ms=1000")
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := m.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { m.scan(stdout, m.record) })
	wg.Go(func() { m.scan(stderr, m.event) })
	go func() { wg.Wait(); _ = m.cmd.Wait(); close(m.done) }()
	t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		<-m.done
		if t.Failed() {
			m.mu.Lock()
			t.Logf("kcat -G %s (%s) stderr:\n%s", group, bootstrap, m.stderr.String())
			m.mu.Unlock()
		}
	})
	return m
}

func (m *kcatMember) scan(r io.Reader, fn func(string)) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fn(sc.Text())
	}
}

func (m *kcatMember) record(line string) {
	f := strings.SplitN(line, " ", 3)
	if len(f) != 3 {
		return
	}
	m.mu.Lock()
	m.records[f[0]+"/"+f[1]+"/"+f[2]] = true
	m.mu.Unlock()
}

// event follows "% Group g rebalanced (memberid …): assigned: t [0], t [1]" and
// "…: revoked: …".
func (m *kcatMember) event(line string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stderr.WriteString(line + "\n")
	_, list, ok := strings.Cut(line, "): assigned: ")
	if !ok {
		if strings.Contains(line, "): revoked: ") {
			m.assigned = nil
		}
		return
	}
	m.assigned = nil
	for item := range strings.SplitSeq(list, ", ") {
		_, p, _ := strings.Cut(item, "[")
		if n, err := strconv.Atoi(strings.TrimSuffix(p, "]")); err == nil {
			m.assigned = append(m.assigned, int32(n))
		}
	}
	slices.Sort(m.assigned)
}

func (m *kcatMember) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.assigned)
}

func (m *kcatMember) values() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]bool{}
	for k := range m.records {
		out[k[strings.LastIndex(k, "/")+1:]] = true
	}
	return out
}

// leave stops the consumer as Ctrl-C would: librdkafka commits and leaves the group.
func (m *kcatMember) leave(t *testing.T) {
	t.Helper()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatal("kcat did not exit within 30s of SIGTERM")
	}
}

func splitsAll(a, b []int32, n int) bool {
	all := append(slices.Clone(a), b...)
	slices.Sort(all)
	return len(a) > 0 && len(b) > 0 && len(all) == n && len(slices.Compact(all)) == n
}

// kcatProduce produces "v<from>".."v<to-1>" round-robin over partitions (-p).
func kcatProduce(t *testing.T, bootstrap, topic string, partitions, from, to int) {
	t.Helper()
	for p := range partitions {
		var lines []string
		for i := from; i < to; i++ {
			if i%partitions == p {
				lines = append(lines, fmt.Sprintf("v%d", i))
			}
		}
		kcat(t, strings.Join(lines, "\n")+"\n", "-b", bootstrap, "-P", "-t", topic, "-p", strconv.Itoa(p))
	}
}

func hasValues(got map[string]bool, from, to int) bool {
	for i := from; i < to; i++ {
		if !got[fmt.Sprintf("v%d", i)] {
			return false
		}
	}
	return true
}

// kcatGroupScenario: a and b split the partitions and consume everything between them;
// b leaves and a gets them all; a leaves (committing), and a consumer started later
// reads only what came after the committed offsets.
func kcatGroupScenario(t *testing.T, httpURL, bootstrapA, bootstrapB, topic string) {
	const parts = 4
	if _, err := client.New(httpURL).CreateTopic(t.Context(), topic, parts, nil); err != nil {
		t.Fatal(err)
	}
	kcatProduce(t, bootstrapA, topic, parts, 0, 40)
	group := topic + "-group"
	a := startKcatMember(t, bootstrapA, group, topic)
	testwait.Until(t, 30*time.Second, "a assigned all 4", func() bool { return len(a.partitions()) == parts })
	b := startKcatMember(t, bootstrapB, group, topic)
	testwait.Until(t, 60*time.Second, "a and b split the partitions", func() bool { return splitsAll(a.partitions(), b.partitions(), parts) })
	kcatProduce(t, bootstrapA, topic, parts, 40, 80)
	testwait.Until(t, 30*time.Second, "a and b consumed everything", func() bool {
		got := a.values()
		for v := range b.values() {
			got[v] = true
		}
		return hasValues(got, 0, 80)
	})
	b.leave(t)
	testwait.Until(t, 60*time.Second, "a assigned all 4 after b left", func() bool { return len(a.partitions()) == parts })
	kcatProduce(t, bootstrapA, topic, parts, 80, 100)
	testwait.Until(t, 30*time.Second, "a consumed what came after", func() bool { return hasValues(a.values(), 80, 100) })
	a.leave(t)
	var offs struct {
		Offsets []struct {
			Offset int64 `json:"offset"`
		} `json:"offsets"`
	}
	resp, err := http.Get(httpURL + "/v1/groups/" + group + "/offsets")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&offs)
	resp.Body.Close()
	var total int64
	for _, o := range offs.Offsets {
		total += o.Offset
	}
	if err != nil || total != 100 {
		t.Fatalf("committed offsets %+v (%v): want every one at the end (100 records)", offs, err)
	}
	kcatProduce(t, bootstrapA, topic, parts, 100, 110)
	out := kcat(t, "", "-b", bootstrapB, "-G", group, topic, "-f", "%s\n", "-X", "auto.offset.reset=earliest", "-e", "-q")
	got := strings.Fields(out)
	slices.Sort(got)
	var want []string
	for i := 100; i < 110; i++ {
		want = append(want, fmt.Sprintf("v%d", i))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("a restarted consumer read %v, want only what came after the committed offsets %v", got, want)
	}
}

// `strata dev`: kcat consumers in one group.
func TestKafkaGroupsDevWithKcat(t *testing.T) {
	testsvc.Kcat(t)
	bin := buildStrata(t)
	addr, kafkaAddr := freeAddr(t), freeAddr(t)
	s, _ := startStrata(t, bin, nil, addr, "dev", "--data", t.TempDir(), "--listen", addr, "--kafka-listen", kafkaAddr, "--log-level", "warn")
	kcatGroupScenario(t, s.url, kafkaAddr, kafkaAddr, "kgroups")
	s.stop(t)
}

// Two `strata serve` nodes on Postgres and MinIO, each advertising only itself (as
// behind a load balancer): kcat members connected to different nodes are one group —
// the state machine is the catalog's, and a held JoinGroup on one node is answered by a
// join on the other.
func TestKafkaGroupsTwoServeNodes(t *testing.T) {
	dsn, endpoint := os.Getenv("STRATA_TEST_POSTGRES"), os.Getenv("STRATA_TEST_S3_ENDPOINT")
	if dsn == "" || endpoint == "" {
		testsvc.Unavailable(t, "set STRATA_TEST_POSTGRES and STRATA_TEST_S3_* (eval \"$(scripts/services.sh)\") to run against Postgres and MinIO")
	}
	testsvc.Kcat(t)
	catalogURL := testDatabase(t, dsn)
	bucketURL := fmt.Sprintf("s3://strata-kgroups-%d/e2e?endpoint=%s&path_style=true&region=%s", time.Now().UnixNano(), endpoint, os.Getenv("STRATA_TEST_S3_REGION"))
	creds := []string{
		"AWS_ACCESS_KEY_ID=" + os.Getenv("STRATA_TEST_S3_ACCESS_KEY"),
		"AWS_SECRET_ACCESS_KEY=" + os.Getenv("STRATA_TEST_S3_SECRET_KEY"),
	}
	bin := buildStrata(t)
	serve := func() (*devServer, string) {
		addr, kafkaAddr := freeAddr(t), freeAddr(t)
		s, _ := startStrata(t, bin, creds, addr, "serve", "--catalog", catalogURL, "--bucket", bucketURL,
			"--create-bucket", "--listen", addr, "--log-level", "warn",
			"--kafka-listen", kafkaAddr, "--kafka-shared-address", kafkaAddr)
		return s, kafkaAddr
	}
	a, ka := serve()
	b, kb := serve()
	kcatGroupScenario(t, a.url, ka, kb, "kgroups2")
	for _, s := range []*devServer{a, b} {
		if n := kafkaRequests(t, s.url, "JoinGroup"); n == 0 {
			t.Fatalf("node %s served no JoinGroup: the members were not on both nodes", s.url)
		}
	}
	a.stop(t)
	b.stop(t)
}
