package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// server is a whole node in the test process: SQLite catalog, filesystem store, writer,
// reader and API, served over loopback HTTP.
type server struct {
	URL string
	cat catalog.Backend
}

// startServer starts a node on dir (a fresh one when ""), stopped at cleanup.
func startServer(t testing.TB, dir string) *server {
	t.Helper()
	opts := []nodetest.Option{nodetest.Mutate(func(c *node.Config) {
		c.WriterConfig = writer.Config{Linger: 5 * time.Millisecond}
		c.ReaderConfig = reader.Config{PollInterval: 50 * time.Millisecond}
	})}
	if dir != "" {
		opts = append(opts, nodetest.InDir(dir))
	}
	n := nodetest.Start(t, opts...)
	return &server{URL: n.URL, cat: n.Catalog}
}

// produce writes n records to each partition, values "p-offset-ish" strings.
func produce(t testing.TB, c *client.Client, topic string, partitions int32, n int) {
	t.Helper()
	var recs []client.Record
	for p := range partitions {
		for i := range n {
			recs = append(recs, client.Record{Value: client.String(fmt.Sprintf("%d-%d", p, i)), Partition: client.Int32(p)})
		}
	}
	for len(recs) > 0 {
		k := min(len(recs), 500)
		if _, err := c.Produce(t.Context(), topic, recs[:k]); err != nil {
			t.Fatalf("produce: %v", err)
		}
		recs = recs[k:]
	}
}

// interval is one handler call of one member on one partition, on this process's
// monotonic clock.
type interval struct {
	member     string
	partition  int32
	start, end time.Duration
	first      int64
	last       int64
}

// recorder keeps what the members of a group processed.
type recorder struct {
	base time.Time
	mu   sync.Mutex
	ivs  []interval
	seen map[int32]map[int64]int // partition → offset → times processed
}

func newRecorder() *recorder {
	return &recorder{base: time.Now(), seen: map[int32]map[int64]int{}}
}

func (r *recorder) handler(member string, slow time.Duration) client.Handler {
	return func(ctx context.Context, b client.Batch) error {
		start := time.Since(r.base)
		if slow > 0 {
			time.Sleep(slow) // the work of a slow member
		}
		end := time.Since(r.base)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ivs = append(r.ivs, interval{member, b.Partition, start, end, b.Records[0].Offset, b.Records[len(b.Records)-1].Offset})
		if r.seen[b.Partition] == nil {
			r.seen[b.Partition] = map[int64]int{}
		}
		for _, rec := range b.Records {
			r.seen[b.Partition][rec.Offset]++
		}
		return nil
	}
}

// checkNoOverlap fails when two members' handler calls for one partition overlap.
func (r *recorder) checkNoOverlap(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	by := map[int32][]interval{}
	for _, iv := range r.ivs {
		by[iv.partition] = append(by[iv.partition], iv)
	}
	for p, ivs := range by {
		slices.SortFunc(ivs, func(a, b interval) int { return int(a.start - b.start) })
		for i := 1; i < len(ivs); i++ {
			if ivs[i].member != ivs[i-1].member && ivs[i].start < ivs[i-1].end {
				t.Errorf("partition %d: %s processed it during [%v, %v] and %s from %v", p, ivs[i-1].member, ivs[i-1].start, ivs[i-1].end, ivs[i].member, ivs[i].start)
			}
		}
	}
}

// checkAll fails unless every offset below each partition's high watermark was
// processed.
func (r *recorder) checkAll(t testing.TB, hw map[int32]int64) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, n := range hw {
		for off := int64(0); off < n; off++ {
			if r.seen[p][off] == 0 {
				t.Fatalf("partition %d offset %d was never processed (high watermark %d)", p, off, n)
			}
		}
	}
}

func highWatermarks(t testing.TB, c *client.Client, topic string) map[int32]int64 {
	t.Helper()
	ps, err := c.Partitions(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, p := range ps {
		out[p.Partition] = p.HighWatermark
	}
	return out
}

// stableWith waits until the group is stable with exactly members live members whose
// assignments cover every partition, and returns partition → member.
func stableWith(t testing.TB, c *client.Client, group string, members int, partitions int32, d time.Duration) map[int32]string {
	t.Helper()
	var owners map[int32]string
	testwait.Until(t, d, fmt.Sprintf("group %s stable with %d members", group, members), func() bool {
		g, err := c.DescribeGroup(t.Context(), group)
		if err != nil || g.State != "stable" || len(g.Members) != members {
			return false
		}
		owners = map[int32]string{}
		for _, m := range g.Members {
			for _, a := range m.Assignment {
				for _, p := range a.Partitions {
					owners[p] = m.MemberID
				}
			}
		}
		return len(owners) == int(partitions)
	})
	return owners
}

type member struct {
	gc     *client.Consumer
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func startMember(t testing.TB, c *client.Client, cfg client.ConsumerConfig, h client.Handler) *member {
	t.Helper()
	gc, err := client.NewConsumer(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{gc: gc, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- gc.Run(ctx, h) }()
	t.Cleanup(func() { m.stop(t) })
	return m
}

func (m *member) stop(t testing.TB) {
	m.once.Do(func() {
		m.cancel()
		select {
		case err := <-m.done:
			if err != nil {
				t.Errorf("consumer %s: %v", m.gc.MemberID(), err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("consumer %s did not stop", m.gc.MemberID())
		}
	})
}

// TestConsumerGroup: three members of a group split six partitions two each; a fourth
// joining moves only what balance needs; a member leaving hands its partitions on; a
// second group gets every record too; no record is skipped, and no two members process
// one partition at once.
func TestConsumerGroup(t *testing.T) {
	srv := startServer(t, "")
	c := client.New(srv.URL)
	const parts = 6
	if _, err := c.CreateTopic(t.Context(), "orders", parts, nil); err != nil {
		t.Fatal(err)
	}
	produce(t, c, "orders", parts, 50)

	cfg := func(group, id string) client.ConsumerConfig {
		return client.ConsumerConfig{Group: group, Topics: []string{"orders"}, MemberID: id,
			SessionTimeout: 2 * time.Second, AutoCommitInterval: 100 * time.Millisecond, MaxRecords: 7}
	}
	ra, rb := newRecorder(), newRecorder()
	var ms []*member
	for _, id := range []string{"a", "b", "c"} {
		ms = append(ms, startMember(t, c, cfg("ga", id), ra.handler(id, time.Millisecond)))
	}
	// A second group on the same topic: broadcast.
	startMember(t, c, cfg("gb", "x"), rb.handler("x", 0))
	startMember(t, c, cfg("gb", "y"), rb.handler("y", 0))

	before := stableWith(t, c, "ga", 3, parts, 10*time.Second)
	count := map[string]int{}
	for _, m := range before {
		count[m]++
	}
	for _, id := range []string{"a", "b", "c"} {
		if count[id] != 2 {
			t.Fatalf("owners with 3 members %v: %s owns %d, want 2", before, id, count[id])
		}
	}
	produce(t, c, "orders", parts, 20)
	ms = append(ms, startMember(t, c, cfg("ga", "d"), ra.handler("d", time.Millisecond)))
	after := stableWith(t, c, "ga", 4, parts, 10*time.Second)
	moved := 0
	for p, m := range before {
		if after[p] != m {
			moved++
		}
	}
	// Balanced for 6 over 4 is 2, 2, 1, 1: one partition has to move, and only one does.
	if moved != 1 {
		t.Fatalf("the 4th member moved %d partitions (%v → %v), want 1", moved, before, after)
	}
	produce(t, c, "orders", parts, 20)
	ms[1].stop(t) // b leaves
	stableWith(t, c, "ga", 3, parts, 10*time.Second)
	produce(t, c, "orders", parts, 20)

	hw := highWatermarks(t, c, "orders")
	for _, g := range []string{"ga", "gb"} {
		testwait.Until(t, 15*time.Second, "group "+g+" to commit everything", func() bool {
			l, err := c.GroupLag(t.Context(), g)
			return err == nil && l.TotalLag == 0 && len(l.Partitions) == parts
		})
	}
	ra.checkAll(t, hw)
	rb.checkAll(t, hw)
	ra.checkNoOverlap(t)
	rb.checkNoOverlap(t)
	offs, err := c.GroupOffsets(t.Context(), "ga")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs {
		if o.Offset != hw[o.Partition] {
			t.Fatalf("committed %d for partition %d, high watermark %d", o.Offset, o.Partition, hw[o.Partition])
		}
	}
}

// flakyTransport fails every request while dead is set, as a network partition would.
type flakyTransport struct {
	dead atomic.Bool
}

func (f *flakyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.dead.Load() {
		return nil, errors.New("network unreachable (test)")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestConsumerSelfFences: a member cut off from the server stops processing on its own
// within its session, before the server hands its partitions to the survivor; the
// survivor gets them within the session timeout; the cut-off member's commits are
// refused when it can talk again, and it rejoins.
func TestConsumerSelfFences(t *testing.T) {
	srv := startServer(t, "")
	c := client.New(srv.URL)
	const parts = 4
	if _, err := c.CreateTopic(t.Context(), "t", parts, nil); err != nil {
		t.Fatal(err)
	}
	produce(t, c, "t", parts, 10)
	rec := newRecorder()
	session := time.Second
	cfg := func(id string) client.ConsumerConfig {
		return client.ConsumerConfig{Group: "g", Topics: []string{"t"}, MemberID: id, SessionTimeout: session, AutoCommitInterval: 50 * time.Millisecond}
	}
	ft := &flakyTransport{}
	var lost atomic.Int32
	var lostEpoch atomic.Int32
	cutCfg := cfg("cut")
	var cut *member
	cutCfg.OnLost = func(tps []client.TopicPartition) {
		lost.Add(int32(len(tps)))
		lostEpoch.Store(cut.gc.Epoch())
	}
	cut = startMember(t, client.New(srv.URL, client.WithHTTPClient(&http.Client{Transport: ft})), cutCfg, rec.handler("cut", 0))
	startMember(t, c, cfg("live"), rec.handler("live", 0))
	stableWith(t, c, "g", 2, parts, 10*time.Second)

	ft.dead.Store(true)
	died := time.Now()
	// Keep records flowing, so the survivor processes the moved partitions at once.
	stop := make(chan struct{})
	var pw sync.WaitGroup
	pw.Add(1)
	go func() {
		defer pw.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				produce(t, c, "t", parts, 1)
			}
		}
	}()
	owners := stableWith(t, c, "g", 1, parts, 10*time.Second)
	took := time.Since(died)
	for p, m := range owners {
		if m != "live" {
			t.Fatalf("partition %d owned by %s", p, m)
		}
	}
	if took > session+time.Second {
		t.Fatalf("reassignment took %v with a %v session", took, session)
	}
	t.Logf("member cut off → all partitions reassigned in %v (session %v)", took, session)
	testwait.Until(t, 5*time.Second, "the cut-off member to report its partitions lost", func() bool { return lost.Load() > 0 })
	close(stop)
	pw.Wait()

	// Its commits are refused: the server no longer knows it at that epoch.
	err := c.CommitOffsets(t.Context(), "g", "cut", lostEpoch.Load(), []client.GroupOffset{{Topic: "t", Partition: 0, Offset: 1}})
	if client.StatusOf(err) != 409 {
		t.Fatalf("commit of the fenced member: %v, want 409", err)
	}
	ft.dead.Store(false)
	stableWith(t, c, "g", 2, parts, 10*time.Second)
	_ = cut
	rec.checkNoOverlap(t)
}

func TestNewConsumerValidates(t *testing.T) {
	c := client.New("http://127.0.0.1:1")
	for _, cfg := range []client.ConsumerConfig{
		{Topics: []string{"t"}},
		{Group: "g"},
		{Group: "g", Topics: []string{"t"}, StartAt: "middle"},
	} {
		if _, err := client.NewConsumer(c, cfg); err == nil {
			t.Errorf("NewConsumer(%+v) accepted", cfg)
		}
	}
}
