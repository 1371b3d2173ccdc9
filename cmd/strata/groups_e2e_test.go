package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// Consumer groups end to end: real server processes, and group members in processes of
// their own (this test binary run again as TestGroupChild), so that a member can be
// killed (SIGKILL) or paused (SIGSTOP) as a real one would be. Members log every
// handler call with CLOCK_MONOTONIC times, which compare across processes.

// monoNow is CLOCK_MONOTONIC in nanoseconds: the same clock in every process.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// childEvent is one line a member process writes.
type childEvent struct {
	Ev     string   `json:"ev"` // assigned, revoked, lost, batch, late_commit, exit
	M      string   `json:"m"`
	P      int32    `json:"p,omitempty"`
	First  int64    `json:"first,omitempty"`
	Last   int64    `json:"last,omitempty"`
	Start  int64    `json:"start,omitempty"`
	End    int64    `json:"end,omitempty"`
	Epoch  int32    `json:"epoch,omitempty"`
	Status int      `json:"status,omitempty"`
	Code   string   `json:"code,omitempty"`
	TPs    []string `json:"tps,omitempty"`
}

// roundRobin sends each request to the next of several servers: heartbeats and commits
// of one member spread over every node.
type roundRobin struct {
	hosts []string
	n     atomic.Uint64
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host = rr.hosts[rr.n.Add(1)%uint64(len(rr.hosts))]
	r.Host = r.URL.Host
	return http.DefaultTransport.RoundTrip(r)
}

// TestGroupChild is a group member process for TestGroupsEndToEnd; it does nothing
// when run on its own.
func TestGroupChild(t *testing.T) {
	urls := os.Getenv("GROUP_CHILD_URLS")
	if urls == "" {
		t.Skip("helper process of the consumer-group end-to-end tests")
	}
	group, topic, id := os.Getenv("GROUP_CHILD_GROUP"), os.Getenv("GROUP_CHILD_TOPIC"), os.Getenv("GROUP_CHILD_ID")
	session, err := time.ParseDuration(os.Getenv("GROUP_CHILD_SESSION"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var hosts []string
	for _, u := range strings.Split(urls, ",") {
		hosts = append(hosts, strings.TrimPrefix(u, "http://"))
	}
	cl := client.New("http://"+hosts[0], client.WithHTTPClient(&http.Client{Transport: &roundRobin{hosts: hosts}}))
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(e childEvent) {
		e.M = id
		mu.Lock()
		defer mu.Unlock()
		enc.Encode(e) // unbuffered: a killed member's lines up to its death are kept
	}
	names := func(tps []client.TopicPartition) []string {
		var out []string
		for _, tp := range tps {
			out = append(out, tp.String())
		}
		return out
	}
	var gc *client.Consumer
	gc, err = client.NewConsumer(cl, client.ConsumerConfig{
		Group: group, Topics: []string{topic}, MemberID: id, SessionTimeout: session,
		AutoCommitInterval: 100 * time.Millisecond, MaxRecords: 20,
		OnAssigned: func(_ context.Context, tps []client.TopicPartition) {
			emit(childEvent{Ev: "assigned", TPs: names(tps)})
		},
		OnRevoked: func(_ context.Context, tps []client.TopicPartition) { emit(childEvent{Ev: "revoked", TPs: names(tps)}) },
		OnLost: func(tps []client.TopicPartition) {
			epoch := gc.Epoch()
			emit(childEvent{Ev: "lost", TPs: names(tps), Epoch: epoch})
			// A zombie's commit, at the epoch it had: the server must refuse it.
			err := cl.CommitOffsets(context.Background(), group, id, epoch, []client.GroupOffset{{Topic: tps[0].Topic, Partition: tps[0].Partition, Offset: 0}})
			e := childEvent{Ev: "late_commit", Epoch: epoch, Status: client.StatusOf(err)}
			var ce *client.Error
			if errors.As(err, &ce) {
				e.Code = ce.Code
			} else if err == nil {
				e.Status = 200
			}
			emit(e)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = gc.Run(ctx, func(ctx context.Context, b client.Batch) error {
		start := monoNow()
		time.Sleep(time.Millisecond) // the "work"
		end := monoNow()
		emit(childEvent{Ev: "batch", P: b.Partition, First: b.Records[0].Offset, Last: b.Records[len(b.Records)-1].Offset, Start: start, End: end})
		return nil
	})
	emit(childEvent{Ev: "exit"})
	if err != nil {
		t.Fatal(err)
	}
}

// eventLog collects every member's lines.
type eventLog struct {
	mu  sync.Mutex
	evs []childEvent
}

func (l *eventLog) add(e childEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, e)
}

func (l *eventLog) all() []childEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.evs)
}

type memberProc struct {
	id   string
	cmd  *exec.Cmd
	done chan error
}

func startMemberProc(t *testing.T, urls []string, group, topic, id string, session time.Duration, log *eventLog) *memberProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestGroupChild$", "-test.count=1")
	cmd.Env = append(cleanEnv(),
		"GROUP_CHILD_URLS="+strings.Join(urls, ","), "GROUP_CHILD_GROUP="+group, "GROUP_CHILD_TOPIC="+topic,
		"GROUP_CHILD_ID="+id, "GROUP_CHILD_SESSION="+session.String())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &memberProc{id: id, cmd: cmd, done: make(chan error, 1)}
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e childEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Ev != "" {
				log.add(e)
			}
		}
	}()
	go func() {
		<-lines
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("member %s stderr:\n%s", id, stderr.String())
		}
	})
	return p
}

// groupOwners returns partition → member when the group is stable with members live
// members covering every partition.
func groupOwners(t *testing.T, c *client.Client, group string, members int, partitions int32) (map[int32]string, bool) {
	g, err := c.DescribeGroup(t.Context(), group)
	if err != nil || g.State != "stable" || len(g.Members) != members {
		return nil, false
	}
	owners := map[int32]string{}
	for _, m := range g.Members {
		for _, a := range m.Assignment {
			for _, p := range a.Partitions {
				owners[p] = m.MemberID
			}
		}
	}
	return owners, len(owners) == int(partitions)
}

func waitStable(t *testing.T, c *client.Client, group string, members int, partitions int32, within time.Duration) map[int32]string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if owners, ok := groupOwners(t, c, group, members, partitions); ok {
			return owners
		}
		if time.Now().After(deadline) {
			g, err := c.DescribeGroup(t.Context(), group)
			t.Fatalf("group %s not stable with %d members after %v: %+v %v", group, members, within, g, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lostAfter says whether the member that logged batch b later reported partition p lost
// (a member's own lines arrive in the order it wrote them).
func lostAfter(evs []childEvent, b childEvent, p int32) bool {
	after := false
	for _, e := range evs {
		switch {
		case e.M != b.M:
		case e.Ev == "batch" && e.P == b.P && e.First == b.First && e.Start == b.Start:
			after = true
		case after && e.Ev == "lost" && slices.ContainsFunc(e.TPs, func(tp string) bool { return strings.HasSuffix(tp, fmt.Sprintf("/%d", p)) }):
			return true
		}
	}
	return false
}

// runGroupScenario is the whole consumer-group story against the servers at urls.
func runGroupScenario(t *testing.T, urls []string) {
	const (
		topic      = "events"
		group      = "billing"
		partitions = 6
		session    = 2 * time.Second
	)
	c := client.New(urls[0])
	if _, err := c.CreateTopic(t.Context(), topic, partitions, nil); err != nil {
		t.Fatal(err)
	}
	// Records flow all along, so every partition has work whoever owns it.
	stopProducing := make(chan struct{})
	var produced sync.WaitGroup
	produced.Add(1)
	go func() {
		defer produced.Done()
		for i := 0; ; i++ {
			select {
			case <-stopProducing:
				return
			case <-time.After(15 * time.Millisecond):
			}
			pc := client.New(urls[i%len(urls)])
			var recs []client.Record
			for p := range int32(partitions) {
				recs = append(recs, client.Record{Value: client.String(fmt.Sprintf("r%d", i)), Partition: client.Int32(p)})
			}
			if _, err := pc.Produce(context.Background(), topic, recs); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
		}
	}()
	defer func() {
		select {
		case <-stopProducing:
		default:
			close(stopProducing)
		}
		produced.Wait()
	}()

	log := &eventLog{}
	procs := map[string]*memberProc{}
	for _, id := range []string{"m1", "m2", "m3"} {
		procs[id] = startMemberProc(t, urls, group, topic, id, session, log)
	}
	before := waitStable(t, c, group, 3, partitions, 60*time.Second)
	count := map[string]int{}
	for _, m := range before {
		count[m]++
	}
	for _, id := range []string{"m1", "m2", "m3"} {
		if count[id] != 2 {
			t.Fatalf("3 members on 6 partitions: %v, want 2 each", before)
		}
	}

	procs["m4"] = startMemberProc(t, urls, group, topic, "m4", session, log)
	after := waitStable(t, c, group, 4, partitions, 30*time.Second)
	moved := 0
	for p, m := range before {
		if after[p] != m {
			moved++
		}
	}
	// 6 over 4 balances as 2, 2, 1, 1: exactly one partition must move.
	if moved != 1 {
		t.Fatalf("the 4th member moved %d partitions (%v → %v), want 1", moved, before, after)
	}

	// Kill a member that owns partitions, without leaving.
	victim := after[0]
	if victim == "m4" { // m4 owns one; a member with two makes the move bigger
		victim = after[1]
	}
	killed := time.Now()
	if err := procs[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	three := waitStable(t, c, group, 3, partitions, session+10*time.Second)
	t.Logf("SIGKILL of %s → all partitions reassigned to the survivors in %v (session timeout %v)", victim, time.Since(killed), session)
	<-procs[victim].done
	delete(procs, victim)

	// Pause another past its session: when it resumes it must stop, report its
	// partitions lost, have its commits refused, and join again.
	var paused string
	for id := range procs {
		paused = id
		break
	}
	if err := procs[paused].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStable(t, c, group, 2, partitions, session+10*time.Second)
	// The survivors process its partitions meanwhile: a batch of one of them, logged by
	// another member since the group settled without it.
	mark := len(log.all())
	testwait.Until(t, 30*time.Second, "the survivors to process "+paused+"'s partitions", func() bool {
		for _, e := range log.all()[mark:] {
			if e.Ev == "batch" && e.M != paused && three[e.P] == paused {
				return true
			}
		}
		return !slices.Contains(slices.Collect(maps.Values(three)), paused) // it had none
	})
	if err := procs[paused].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	var late *childEvent
	for late == nil && time.Now().Before(deadline) {
		for _, e := range log.all() {
			if e.M == paused && e.Ev == "late_commit" {
				late = &e
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if late == nil {
		t.Fatalf("paused member %s never reported its partitions lost after resuming", paused)
	}
	if late.Status != http.StatusConflict || (late.Code != client.CodeUnknownMember && late.Code != client.CodeStaleMemberEpoch) {
		t.Fatalf("the paused member's commit answered %d %s, want 409 unknown_member or stale_member_epoch", late.Status, late.Code)
	}
	waitStable(t, c, group, 3, partitions, 30*time.Second)

	close(stopProducing)
	produced.Wait()
	hw := map[int32]int64{}
	ps, err := c.Partitions(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		hw[p.Partition] = p.HighWatermark
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		l, err := c.GroupLag(t.Context(), group)
		if err == nil && l.TotalLag == 0 && len(l.Partitions) == partitions {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group never caught up: %+v %v", l, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for id, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-p.done:
			if err != nil {
				t.Errorf("member %s exited with %v", id, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("member %s did not stop", id)
		}
	}

	// Every record processed; no two members ever processed one partition at once.
	seen := map[int32]map[int64]bool{}
	by := map[int32][]childEvent{}
	batches := 0
	for _, e := range log.all() {
		if e.Ev != "batch" {
			continue
		}
		batches++
		by[e.P] = append(by[e.P], e)
		if seen[e.P] == nil {
			seen[e.P] = map[int64]bool{}
		}
		for off := e.First; off <= e.Last; off++ {
			seen[e.P][off] = true
		}
	}
	for p, n := range hw {
		for off := range n {
			if !seen[p][off] {
				t.Fatalf("partition %d offset %d (high watermark %d) was never processed", p, off, n)
			}
		}
	}
	// Two members processing one partition at once is allowed only as Kafka's zombie
	// case, which leases cannot prevent: a member still inside its handler when its
	// session lapsed (a paused or CPU-starved process) overlaps the next owner. The
	// design promises that such a member then finds the partition lost and that its
	// commits are refused (checked above for the paused member); a member that never
	// lost the partition must never overlap another.
	for p, evs := range by {
		slices.SortFunc(evs, func(a, b childEvent) int { return int(a.Start - b.Start) })
		for i := 1; i < len(evs); i++ {
			prev, next := evs[i-1], evs[i]
			if prev.M != next.M && next.Start < prev.End && !lostAfter(log.all(), prev, p) {
				t.Fatalf("partition %d: %s processed [%d, %d] until %d, %s started at %d, and %s never lost the partition", p, prev.M, prev.First, prev.Last, prev.End, next.M, next.Start, prev.M)
			}
		}
	}
	offs, err := c.GroupOffsets(t.Context(), group)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs {
		if o.Offset != hw[o.Partition] {
			t.Fatalf("committed %d for partition %d, high watermark %d", o.Offset, o.Partition, hw[o.Partition])
		}
	}
	var total int64
	for _, n := range hw {
		total += n
	}
	if total == 0 || batches == 0 {
		t.Fatalf("nothing was produced (%d records) or processed (%d handler calls)", total, batches)
	}
	t.Logf("%d records over %d partitions, %d handler calls, all processed and committed", total, partitions, batches)
}

func TestGroupsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and member processes")
	}
	bin := buildStrata(t)
	srv := startDev(t, bin, t.TempDir())
	runGroupScenario(t, []string{srv.url})

	// The CLI verbs against what the scenario left.
	code, out, errOut := runCLI(t, map[string]string{"STRATA_SERVER": srv.url}, "", "groups", "list")
	if code != 0 || !strings.Contains(out, "billing") || !strings.Contains(out, "empty") {
		t.Fatalf("groups list: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, map[string]string{"STRATA_SERVER": srv.url}, "", "groups", "describe", "billing")
	if code != 0 || !strings.Contains(out, "Total lag: 0") || !strings.Contains(out, "(no live members)") {
		t.Fatalf("groups describe: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, map[string]string{"STRATA_SERVER": srv.url}, "", "groups", "reset", "billing", "--topic", "events", "--to", "earliest", "--partition", "2")
	if code != 0 || !strings.Contains(out, "events  2          0") {
		t.Fatalf("groups reset: %d %q %q", code, out, errOut)
	}
	// consume --group reads partition 2 again from 0, as a member, and commits.
	code, out, errOut = runCLI(t, map[string]string{"STRATA_SERVER": srv.url}, "", "consume", "events", "--group", "billing", "--max", "5")
	if code != 0 || strings.Count(out, "\n") != 5 || !strings.Contains(errOut, "assigned") {
		t.Fatalf("consume --group: %d %q %q", code, out, errOut)
	}
	code, _, errOut = runCLI(t, map[string]string{"STRATA_SERVER": srv.url}, "", "groups", "delete", "billing")
	if code != 0 {
		t.Fatalf("groups delete: %d %q", code, errOut)
	}
	code, _, errOut = runCLI(t, map[string]string{"STRATA_SERVER": srv.url}, "", "groups", "describe", "billing")
	if code != 1 || !strings.Contains(errOut, `Group not found: group "billing" does not exist`) {
		t.Fatalf("describe after delete: %d %q", code, errOut)
	}
	srv.stop(t)
}

// TestGroupsTwoServersEndToEnd runs the scenario with every member's heartbeats, commits
// and fetches spread over two `strata serve` processes on one Postgres.
func TestGroupsTwoServersEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and member processes")
	}
	dsn := os.Getenv("STRATA_TEST_POSTGRES")
	endpoint := os.Getenv("STRATA_TEST_S3_ENDPOINT")
	if dsn == "" || endpoint == "" {
		testsvc.Unavailable(t, "set STRATA_TEST_POSTGRES and STRATA_TEST_S3_* (eval \"$(scripts/services.sh)\") to run against Postgres and MinIO")
	}
	catalogURL := testDatabase(t, dsn)
	bucket := fmt.Sprintf("strata-groups-%d", time.Now().UnixNano())
	bucketURL := fmt.Sprintf("s3://%s/e2e?endpoint=%s&path_style=true&region=%s", bucket, endpoint, os.Getenv("STRATA_TEST_S3_REGION"))
	creds := []string{
		"AWS_ACCESS_KEY_ID=" + os.Getenv("STRATA_TEST_S3_ACCESS_KEY"),
		"AWS_SECRET_ACCESS_KEY=" + os.Getenv("STRATA_TEST_S3_SECRET_KEY"),
	}
	bin := buildStrata(t)
	var urls []string
	var srvs []*devServer
	for range 2 {
		addr := freeAddr(t)
		s, _ := startStrata(t, bin, creds, addr, "serve", "--catalog", catalogURL, "--bucket", bucketURL,
			"--create-bucket", "--listen", addr, "--log-level", "warn")
		urls = append(urls, s.url)
		srvs = append(srvs, s)
	}
	runGroupScenario(t, urls)
	for _, s := range srvs {
		s.signal(t, syscall.SIGTERM)
	}
}
