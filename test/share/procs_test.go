package share_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// Members in processes of their own, killed (SIGKILL) or stalled (SIGSTOP) while they
// hold records: the test binary runs itself as the member (TestHelperMember, selected
// by memberEnv), which acquires from the node in the test's process, says on stdout
// what it holds and then waits — forever, or for as long as its handler takes before
// it acknowledges. Records held by a member over Kafka are a franz-go share
// consumer's; over HTTP, the client's acquire and acknowledge calls.

// The member process's environment.
const (
	memberEnv      = "STRATA_SHARE_TEST_MEMBER" // kafka or http
	memberAddr     = "STRATA_SHARE_TEST_ADDR"   // the Kafka listener's address, or the node's URL
	memberHandle   = "STRATA_SHARE_TEST_HANDLE" // a duration: handle, then accept what is held; unset: hold forever
	memberLine     = "member: "                 // the prefix of the member's answers on stdout
	memberGroup    = "g"
	memberTopic    = "jobs"
	memberLockMs   = 2500 // share.record.lock.duration.ms of the tests' group
	memberLockTime = memberLockMs * time.Millisecond
)

// held is what a member process says it holds once it acquired.
type held struct {
	// Started is when the member began (unix ms): its records were acquired after it.
	Started int64 `json:"started"`
	// Deadline is the lock deadline its acquisition answered (unix ms; HTTP only).
	Deadline int64 `json:"deadline,omitempty"`
	// Answered is when it said so (unix ms): its handler's time runs from then.
	Answered int64   `json:"answered"`
	Offsets  []int64 `json:"offsets"`
	Counts   []int   `json:"counts"`
}

// acked is what a member process says after it acknowledged: "" or the refusal's code
// (HTTP) or error (Kafka).
type acked struct {
	Code   string `json:"code"`
	Status int    `json:"status,omitempty"`
	Err    string `json:"err,omitempty"`
}

// TestHelperMember is the member process; it skips unless a test started it.
func TestHelperMember(t *testing.T) {
	mode := os.Getenv(memberEnv)
	if mode == "" {
		t.Skip("the member process of the process tests, started by them")
	}
	var handle time.Duration
	if h := os.Getenv(memberHandle); h != "" {
		var err error
		if handle, err = time.ParseDuration(h); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	say := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Printf("%s%s\n", memberLine, b)
	}
	var err error
	switch mode {
	case "kafka":
		err = kafkaMemberProcess(os.Getenv(memberAddr), handle, say)
	case "http":
		err = httpMemberProcess(os.Getenv(memberAddr), handle, say)
	default:
		err = fmt.Errorf("unknown member mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "member:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// kafkaMemberProcess polls once with a franz-go share consumer until it gets records,
// says which, and holds them (the next poll would accept them) — forever, or handle
// long and then accepts them, saying how the broker answered.
func kafkaMemberProcess(seed string, handle time.Duration, say func(any)) error {
	ctx := context.Background()
	started := time.Now()
	ackErr := make(chan error, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ShareGroup(memberGroup), kgo.ConsumeTopics(memberTopic),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			select {
			case ackErr <- rs.Error():
			default:
			}
		}))
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for len(recs) == 0 {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			fmt.Fprintf(os.Stderr, "poll %s/%d: %v\n", topic, p, err) // franz-go retries
		})
		recs = fs.Records()
	}
	h := held{Started: started.UnixMilli()}
	for _, r := range recs {
		h.Offsets, h.Counts = append(h.Offsets, r.Offset), append(h.Counts, int(r.DeliveryCount()))
	}
	h.Answered = time.Now().UnixMilli()
	say(h)
	if handle == 0 {
		time.Sleep(time.Hour) // until killed
	}
	time.Sleep(handle)
	for _, r := range recs {
		r.Ack(kgo.AckAccept)
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cl.FlushAcks(fctx); err != nil {
		return fmt.Errorf("flush acks: %w", err)
	}
	var a acked
	select {
	case err := <-ackErr:
		if err != nil {
			a.Code, a.Err = kafkaErrName(err), err.Error()
		}
	case <-fctx.Done():
		return errors.New("no acknowledgement answer")
	}
	say(a)
	return nil
}

// kafkaErrName is the Kafka error's name (INVALID_RECORD_STATE), or its text.
func kafkaErrName(err error) string {
	var e *kerr.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// httpMemberProcess is kafkaMemberProcess over HTTP: it acquires until it gets records
// and acknowledges them with the acquisition ids its acquire answered.
func httpMemberProcess(url string, handle time.Duration, say func(any)) error {
	ctx := context.Background()
	c := client.New(url)
	started := time.Now()
	member := ""
	var res client.ShareAcquireResult
	for len(res.Partitions) == 0 {
		var err error
		res, err = c.AcquireShareRecords(ctx, memberGroup, client.ShareAcquireRequest{MemberID: member, Topics: []string{memberTopic}, Wait: 200 * time.Millisecond})
		if err != nil {
			return fmt.Errorf("acquire: %w", err)
		}
		member = res.MemberID
	}
	h := held{Started: started.UnixMilli(), Deadline: time.Time(res.Partitions[0].LockDeadline).UnixMilli()}
	var acks []client.ShareAck
	for _, p := range res.Partitions {
		rs := p.Records
		for _, r := range rs {
			h.Offsets, h.Counts = append(h.Offsets, r.Offset), append(h.Counts, r.DeliveryCount)
		}
		acks = append(acks, client.ShareAck{AcquisitionID: p.AcquisitionID,
			Ranges: []client.ShareAckRange{{First: rs[0].Offset, Last: rs[len(rs)-1].Offset, Type: client.AckAccept}}})
	}
	h.Answered = time.Now().UnixMilli()
	say(h)
	if handle == 0 {
		time.Sleep(time.Hour) // until killed
	}
	time.Sleep(handle)
	var a acked
	if err := c.AcknowledgeShareRecords(ctx, memberGroup, member, acks); err != nil {
		var e *client.Error
		if !errors.As(err, &e) {
			return fmt.Errorf("acknowledge: %w", err)
		}
		a = acked{Code: e.Code, Status: e.Status, Err: err.Error()}
	}
	say(a)
	return nil
}

// memberProc is a running member process.
type memberProc struct {
	cmd    *exec.Cmd
	lines  chan string // its answers
	stderr syncBuffer
}

// syncBuffer is a strings.Builder written by the process's stderr copier and read by
// the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// startMember starts a member process of kind (kafka, http) on n; handle as
// memberHandle (0: hold forever). It is killed when the test ends.
func startMember(t *testing.T, n *nodetest.Node, kind string, handle time.Duration) *memberProc {
	t.Helper()
	addr := n.URL
	if kind == "kafka" {
		addr = n.KafkaAddr
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMember$", "-test.count=1")
	cmd.Env = append(os.Environ(), memberEnv+"="+kind, memberAddr+"="+addr)
	if handle > 0 {
		cmd.Env = append(cmd.Env, memberHandle+"="+handle.String())
	}
	m := &memberProc{cmd: cmd, lines: make(chan string, 16)}
	cmd.Stderr = &m.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), memberLine); ok {
				m.lines <- s
			}
		}
		close(m.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("member process stderr:\n%s", m.errText())
		}
	})
	return m
}

func (m *memberProc) errText() string { return m.stderr.String() }

// next decodes the member's next answer into v.
func (m *memberProc) next(t *testing.T, v any) {
	t.Helper()
	select {
	case s, ok := <-m.lines:
		if !ok {
			t.Fatalf("the member process ended without answering: %v\n%s", m.cmd.Wait(), m.errText())
		}
		if err := json.Unmarshal([]byte(s), v); err != nil {
			t.Fatalf("member answer %q: %v", s, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("no answer from the member process in a minute\n%s", m.errText())
	}
}

// processGroup starts a node (with opts) with its Kafka listener and a one-partition
// topic with records records, and configures the group with the tests' short lock.
func processGroup(t *testing.T, records int, opts ...nodetest.Option) (*nodetest.Node, *client.Client) {
	t.Helper()
	n := nodetest.Start(t, append(opts, nodetest.Kafka())...)
	c := client.New(n.URL)
	if _, err := c.CreateTopic(t.Context(), memberTopic, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConfigureShareGroup(t.Context(), memberGroup, map[string]string{
		"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": strconv.Itoa(memberLockMs)}); err != nil {
		t.Fatal(err)
	}
	produce(t, c, memberTopic, 1, records)
	return n, c
}

// TestKilledMemberProcessKafka and TestKilledMemberProcessHTTP: a member process
// SIGKILLed while it holds records. Another member, acquiring all along from the
// kill, gets none of them before their lock deadline, and gets every one of them after
// it, at delivery count 2. The Services variant judges the lock on Postgres's clock.
func TestKilledMemberProcessKafka(t *testing.T) { killedMember(t, "kafka") }
func TestKilledMemberProcessHTTP(t *testing.T)  { killedMember(t, "http") }
func TestKilledMemberProcessKafkaServices(t *testing.T) {
	killedMember(t, "kafka", nodetest.OnServices())
}

func killedMember(t *testing.T, kind string, opts ...nodetest.Option) {
	n, c := processGroup(t, 20, opts...)
	ctx := t.Context()
	m := startMember(t, n, kind, 0)
	var h held
	m.next(t, &h)
	if len(h.Offsets) == 0 || slices.ContainsFunc(h.Counts, func(k int) bool { return k != 1 }) {
		t.Fatalf("the member holds %v at delivery counts %v, want records at 1", h.Offsets, h.Counts)
	}
	// The deadline: the one the acquisition answered (HTTP), else no earlier than the
	// member's start plus the lock (franz-go's own deadline is the answer's arrival
	// plus the lock, later than the broker's).
	notBefore := time.UnixMilli(h.Started).Add(memberLockTime)
	if h.Deadline != 0 {
		notBefore = time.UnixMilli(h.Deadline)
	}
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = m.cmd.Wait()
	killed := time.Now()
	if !killed.Before(notBefore) {
		t.Fatalf("the member was killed %s after its records' lock deadline: the test proves nothing", killed.Sub(notBefore))
	}
	want := map[int64]bool{}
	for _, o := range h.Offsets {
		want[o] = true
	}
	other := ""
	var got time.Time
	for len(want) > 0 {
		res, err := c.AcquireShareRecords(ctx, memberGroup, client.ShareAcquireRequest{MemberID: other, Topics: []string{memberTopic}, Wait: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		other, got = res.MemberID, time.Now()
		for _, p := range res.Partitions {
			for _, r := range p.Records {
				if !want[r.Offset] {
					continue // a record the member never held
				}
				if got.Before(notBefore) {
					t.Fatalf("offset %d redelivered at %s, before the lock deadline %s (killed at %s)", r.Offset,
						got.Format(time.StampMilli), notBefore.Format(time.StampMilli), killed.Format(time.StampMilli))
				}
				if r.DeliveryCount != 2 {
					t.Fatalf("offset %d redelivered at delivery count %d, want 2", r.Offset, r.DeliveryCount)
				}
				delete(want, r.Offset)
			}
		}
		if len(want) > 0 && time.Now().After(notBefore.Add(time.Minute)) {
			t.Fatalf("offsets %v never came back after the kill", slices.Sorted(func(yield func(int64) bool) {
				for o := range want {
					if !yield(o) {
						return
					}
				}
			}))
		}
	}
	t.Logf("%s member held %d records; killed %s before the lock deadline; all redelivered at count 2 by %s after it",
		kind, len(h.Offsets), notBefore.Sub(killed).Round(time.Millisecond), got.Sub(notBefore).Round(time.Millisecond))
}

// TestStoppedMemberProcessKafka and TestStoppedMemberProcessHTTP: a member process
// whose handler takes well under the lock is SIGSTOPped while it handles; the lock
// passes and another member acquires the records again; the stalled member, continued,
// accepts its old delivery: refused (HTTP: acquisition_not_held, 409; Kafka:
// INVALID_RECORD_STATE), and the other member's delivery is untouched — it releases
// them and they come back at delivery count 3, then it accepts them and the group is
// done. The Services variant runs on Postgres and MinIO.
func TestStoppedMemberProcessKafka(t *testing.T) {
	stoppedMember(t, "kafka", "INVALID_RECORD_STATE", 0)
}
func TestStoppedMemberProcessHTTP(t *testing.T) {
	stoppedMember(t, "http", client.CodeAcquisitionNotHeld, 409)
}
func TestStoppedMemberProcessHTTPServices(t *testing.T) {
	stoppedMember(t, "http", client.CodeAcquisitionNotHeld, 409, nodetest.OnServices())
}

func stoppedMember(t *testing.T, kind, wantCode string, wantStatus int, opts ...nodetest.Option) {
	const records = 10
	n, c := processGroup(t, records, opts...)
	ctx := t.Context()
	handle := memberLockTime / 2
	m := startMember(t, n, kind, handle)
	var h held
	m.next(t, &h)
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Its handler began when it answered: stopped well within the handler's time, it
	// cannot have acknowledged.
	if d := time.Since(time.UnixMilli(h.Answered)); d > handle/2 {
		t.Fatalf("the member was stopped %s after it answered, too late to be sure it had not acknowledged", d)
	}
	other, again, _ := acquireAll(t, c, memberGroup, "", memberTopic)
	if len(again) != 1 || len(again[0].Records) != len(h.Offsets) {
		t.Fatalf("re-acquired %+v, want the stalled member's offsets %v", again, h.Offsets)
	}
	for i, r := range again[0].Records {
		if r.Offset != h.Offsets[i] || r.DeliveryCount != 2 {
			t.Fatalf("re-acquired offset %d at count %d, want the stalled member's %v at 2", r.Offset, r.DeliveryCount, h.Offsets)
		}
	}
	if err := m.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var a acked
	m.next(t, &a)
	if a.Code != wantCode || a.Status != wantStatus {
		t.Fatalf("the stalled member's late acceptance answered %+v, want code %s status %d", a, wantCode, wantStatus)
	}
	if err := m.cmd.Wait(); err != nil {
		t.Fatalf("member process: %v\n%s", err, m.errText())
	}
	g, err := c.DescribeShareGroup(ctx, memberGroup)
	if err != nil || len(g.Partitions) != 1 || g.Partitions[0].Acknowledged != 0 || g.Partitions[0].StartOffset != 0 ||
		g.Partitions[0].Acquired != records {
		t.Fatalf("after the refused acceptance: %+v, %v; want the other member's %d records still acquired, none done", g, err, records)
	}
	ack := func(a client.ShareAcquisition, typ string) {
		t.Helper()
		rs := a.Records
		if err := c.AcknowledgeShareRecords(ctx, memberGroup, other, []client.ShareAck{{AcquisitionID: a.AcquisitionID,
			Ranges: []client.ShareAckRange{{First: rs[0].Offset, Last: rs[len(rs)-1].Offset, Type: typ}}}}); err != nil {
			t.Fatalf("the holder's %s: %v", typ, err)
		}
	}
	ack(again[0], client.AckRelease)
	var third []client.ShareAcquisition
	other, third, _ = acquireAll(t, c, memberGroup, other, memberTopic)
	if len(third) != 1 || len(third[0].Records) != records || third[0].Records[0].DeliveryCount != 3 {
		t.Fatalf("after the holder's release: %+v, want the %d records at delivery count 3", third, records)
	}
	ack(third[0], client.AckAccept)
	testwait.Until(t, 10*time.Second, "the group done", func() bool {
		g, err := c.DescribeShareGroup(ctx, memberGroup)
		return err == nil && len(g.Partitions) == 1 && g.Partitions[0].Lag == 0 && g.Partitions[0].StartOffset == records
	})
	t.Logf("%s member stopped for the lock; its late acceptance answered %s %s", kind, a.Code, a.Err)
}
