package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/objstore/fault"
)

// joinOwning joins member to group over topic and heartbeats until it owns every
// partition; it returns the member epoch.
func joinOwning(t *testing.T, c *Client, group, member, topic string, partitions int) int32 {
	t.Helper()
	req := HeartbeatRequest{MemberID: member, Topics: []string{topic}, SessionTimeout: time.Minute}
	for range 10 {
		res, err := c.Heartbeat(t.Context(), group, req)
		if err != nil {
			t.Fatal(err)
		}
		req.MemberEpoch, req.Owned, req.Topics = res.MemberEpoch, res.Assignment, nil
		n := 0
		for _, a := range res.Assignment {
			n += len(a.Partitions)
		}
		if n == partitions {
			return res.MemberEpoch
		}
	}
	t.Fatalf("member %s never owned the %d partitions of %s", member, partitions, topic)
	return 0
}

func committed(t *testing.T, c *Client, group string) map[int32]int64 {
	t.Helper()
	offs, err := c.GroupOffsets(t.Context(), group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, o := range offs {
		out[o.Partition] = o.Offset
	}
	return out
}

// TestTransactionFailuresWriteNothing: a transactional request (records and group
// offsets) that fails — bad partition, fenced epoch, object store failure, stale
// member epoch — leaves no records and moves no offsets; the same body, once the
// failure is gone, commits whole.
func TestTransactionFailuresWriteNothing(t *testing.T) {
	s := newStack(t, stackOptions{})
	ctx := t.Context()
	c := New(s.url)
	for _, name := range []string{"in", "out"} {
		if _, err := c.CreateTopic(ctx, name, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		if _, err := c.Produce(ctx, "in", []Record{{Value: String(fmt.Sprint(i)), Partition: Int32(int32(i % 2))}}); err != nil {
			t.Fatal(err)
		}
	}
	epoch := joinOwning(t, c, "g", "m", "in", 2)
	id, pe := initProducer(t, s.url, "txn-1")
	txn := func(id, pe int64, seq int, part int, memberEpoch int32, off int64) string {
		return fmt.Sprintf(`{"records":[{"topic":"out","partition":%d,"value":"x%d"}],`+
			`"producer":{"id":%d,"epoch":%d,"sequences":{"out":{"%d":%d}}},`+
			`"group_offsets":{"group":"g","member_id":"m","member_epoch":%d,"offsets":[{"topic":"in","partition":0,"offset":%d},{"topic":"in","partition":1,"offset":%d}]}}`,
			part, seq, id, pe, part, seq, memberEpoch, off, off)
	}
	if st, out := post(t, s.url, "/v1/records", txn(id, pe, 0, 0, epoch, 2)); st != 200 {
		t.Fatalf("first transaction: %d %v", st, out)
	}
	unchanged := func(what string) {
		t.Helper()
		if got := committed(t, c, "g"); got[0] != 2 || got[1] != 2 {
			t.Fatalf("%s: committed offsets moved to %v", what, got)
		}
		for part := range int32(2) {
			want := 0
			if part == 0 {
				want = 1
			}
			if recs := readAll(t, c, "out", part); len(recs) != want {
				t.Fatalf("%s: out/%d holds %d records, want %d", what, part, len(recs), want)
			}
		}
	}

	// A partition the topic does not have.
	if st, out := post(t, s.url, "/v1/records", txn(id, pe, 1, 7, epoch, 5)); st != 404 || out["code"] != "partition_out_of_range" {
		t.Fatalf("bad partition: %d %v", st, out)
	}
	unchanged("bad partition")
	// A stale member epoch.
	if st, out := post(t, s.url, "/v1/records", txn(id, pe, 1, 0, epoch-1, 5)); st != 409 || out["code"] != "stale_member_epoch" {
		t.Fatalf("stale member epoch: %d %v", st, out)
	}
	unchanged("stale member epoch")
	// The object store fails the flush's PUT.
	s.store.FailNext(fault.Put, 1, errors.New("disk on fire"))
	storeFail := txn(id, pe, 1, 0, epoch, 5)
	if st, out := post(t, s.url, "/v1/records", storeFail); st != 503 || out["code"] != "store_unavailable" {
		t.Fatalf("object store failure: %d %v", st, out)
	}
	unchanged("object store failure")
	// The same body once the store is back: it never committed, so it commits now.
	if st, out := post(t, s.url, "/v1/records", storeFail); st != 200 || out["duplicate"] != nil {
		t.Fatalf("retry after the store failure: %d %v, want a first commit", st, out)
	}
	if got := committed(t, c, "g"); got[0] != 5 || got[1] != 5 {
		t.Fatalf("offsets after the retry: %v, want 5 and 5", got)
	}
	// A new instance fences this one; its next transaction writes nothing.
	if _, e := initProducer(t, s.url, "txn-1"); e != pe+1 {
		t.Fatalf("fencing init: epoch %d", e)
	}
	if st, out := post(t, s.url, "/v1/records", txn(id, pe, 2, 1, epoch, 9)); st != 409 || out["code"] != "producer_fenced" {
		t.Fatalf("fenced epoch: %d %v", st, out)
	}
	if got := committed(t, c, "g"); got[0] != 5 || got[1] != 5 {
		t.Fatalf("fenced epoch: committed offsets moved to %v", got)
	}
	if recs := readAll(t, c, "out", 1); len(recs) != 0 {
		t.Fatalf("fenced epoch: out/1 holds %d records", len(recs))
	}
}

// The consume-transform-produce worker run as a separate process by the tests below,
// so that it can be SIGKILLed and SIGSTOPped. It copies txIn to txOut, partition to
// the same partition, with Transact.
const (
	txIn    = "ctp-in"
	txOut   = "ctp-out"
	txGroup = "copier"
	txParts = 6
)

func transformValue(v string) string { return "copied:" + v }

// TestTransactWorkerProcess is not a test: it is the worker, when the tests below run
// the test binary with STRATA_TX_WORKER=1.
func TestTransactWorkerProcess(t *testing.T) {
	if os.Getenv("STRATA_TX_WORKER") != "1" {
		t.Skip("the consume-transform-produce worker of the SIGKILL and SIGSTOP tests")
	}
	os.Exit(runTxWorker())
}

// postLogger prints one line per POST /v1/records: member, member epoch, send time
// and answer, so the parent test can tell what a paused worker sent after it resumed.
type postLogger struct {
	next http.RoundTripper
	mu   *sync.Mutex
}

func (l postLogger) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/records" {
		return l.next.RoundTrip(r)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var in struct {
		GroupOffsets struct {
			MemberID    string `json:"member_id"`
			MemberEpoch int32  `json:"member_epoch"`
		} `json:"group_offsets"`
	}
	json.Unmarshal(body, &in)
	sent := time.Now().UnixNano()
	resp, err := l.next.RoundTrip(r)
	status, code := 0, ""
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		status = resp.StatusCode
		var p struct {
			Code string `json:"code"`
		}
		json.Unmarshal(b, &p)
		code = p.Code
	}
	l.mu.Lock()
	fmt.Printf("POST member=%s epoch=%d sent=%d status=%d code=%s\n", in.GroupOffsets.MemberID, in.GroupOffsets.MemberEpoch, sent, status, code)
	l.mu.Unlock()
	return resp, err
}

func runTxWorker() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	session, _ := strconv.Atoi(os.Getenv("STRATA_TX_SESSION_MS"))
	slow, _ := strconv.Atoi(os.Getenv("STRATA_TX_SLOW_MS"))
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{os.Stdout, &mu}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c := New(os.Getenv("STRATA_TX_URL"), WithHTTPClient(&http.Client{Transport: postLogger{http.DefaultTransport, &mu}}))
	p, err := c.NewProducer(ctx, ProducerConfig{TransactionalID: os.Getenv("STRATA_TX_ID"), Logger: log, RetryBackoff: 20 * time.Millisecond})
	if err != nil {
		fmt.Println("EXIT producer:", err)
		return 3
	}
	gc, err := NewConsumer(c, ConsumerConfig{
		Group: txGroup, Topics: []string{txIn}, ManualCommit: true, MaxRecords: 40,
		SessionTimeout: time.Duration(session) * time.Millisecond, Logger: log,
	})
	if err != nil {
		fmt.Println("EXIT consumer:", err)
		return 3
	}
	mu.Lock()
	fmt.Printf("READY member=%s\n", gc.MemberID())
	mu.Unlock()
	err = p.Transact(ctx, gc, func(ctx context.Context, b Batch) ([]TopicRecord, error) {
		if slow > 0 {
			time.Sleep(time.Duration(slow) * time.Millisecond) // work that a pause can catch midway
		}
		out := make([]TopicRecord, len(b.Records))
		for i, r := range b.Records {
			var v string
			if err := json.Unmarshal(r.Value, &v); err != nil {
				return nil, err
			}
			out[i] = TopicRecord{Topic: txOut, Record: Record{
				Key: r.Key, Value: String(transformValue(v)), Partition: Int32(b.Partition),
				Headers: []Header{{Key: "src", Value: []byte(fmt.Sprintf("%d/%d", b.Partition, r.Offset))}},
			}}
		}
		return out, nil
	})
	p.Close(context.Background())
	if err != nil {
		mu.Lock()
		fmt.Println("EXIT transact:", err)
		mu.Unlock()
		return 4
	}
	return 0
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// txWorker is one worker process and the lines it printed.
type txWorker struct {
	slot int
	cmd  *exec.Cmd
	done chan struct{}

	mu    sync.Mutex
	lines []txLine
}

type txLine struct {
	at   time.Time // when the parent read it
	text string
}

func startTxWorker(t *testing.T, url string, slot int, session, slow time.Duration) *txWorker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTransactWorkerProcess$", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(),
		"STRATA_TX_WORKER=1",
		"STRATA_TX_URL="+url,
		fmt.Sprintf("STRATA_TX_ID=copier-%d", slot),
		fmt.Sprintf("STRATA_TX_SESSION_MS=%d", session.Milliseconds()),
		fmt.Sprintf("STRATA_TX_SLOW_MS=%d", slow.Milliseconds()),
	)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &txWorker{slot: slot, cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, txLine{time.Now(), sc.Text()})
			w.mu.Unlock()
		}
		cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-w.done
	})
	return w
}

func (w *txWorker) kill() {
	w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.done
}

func (w *txWorker) stop(t *testing.T) {
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Errorf("worker %d did not stop on SIGTERM", w.slot)
		w.kill()
	}
}

func (w *txWorker) output() []txLine {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.lines)
}

// txSetup creates the topics and starts producing input in the background: n records
// over about the given time, or, with n 0, 60 records every 100ms until stop is
// closed. The returned function waits for the input to be complete and returns it per
// partition.
func txSetup(t *testing.T, c *Client, n int, over time.Duration, stop <-chan struct{}) func() [txParts][]string {
	ctx := t.Context()
	for _, name := range []string{txIn, txOut} {
		if _, err := c.CreateTopic(ctx, name, txParts, nil); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.NewProducer(ctx, ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	chunk, tick := 60, 100*time.Millisecond
	if n > 0 {
		chunk, tick = max(n/50, 1), over/50
	}
	done := make(chan error, 1)
	sent := 0
	go func() {
		for i := 0; n == 0 || i < n; i += chunk {
			last := i + chunk
			if n > 0 {
				last = min(last, n)
			}
			for j := i; j < last; j++ {
				if _, err := p.Send(ctx, txIn, Record{Key: String(fmt.Sprintf("k%d", j%97)), Value: String(fmt.Sprintf("v%d", j))}); err != nil {
					done <- err
					return
				}
			}
			sent = last
			select {
			case <-stop:
				if n == 0 {
					done <- p.Close(ctx)
					return
				}
			case <-time.After(tick):
			}
		}
		done <- p.Close(ctx)
	}()
	return func() [txParts][]string {
		if err := <-done; err != nil {
			t.Fatalf("producing the input: %v", err)
		}
		var in [txParts][]string
		total := 0
		for part := range txParts {
			in[part] = values(t, readAll(t, c, txIn, int32(part)))
			total += len(in[part])
		}
		if total != sent {
			t.Fatalf("input holds %d records, want %d", total, sent)
		}
		return in
	}
}

// txVerify waits until the group has committed every input record, then checks that
// the output is exactly the transformed input — partition by partition, in order, no
// duplicates, no losses, each output record naming its source offset — and that the
// committed offsets are what was produced.
func txVerify(t *testing.T, c *Client, in [txParts][]string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got := committed(t, c, txGroup)
		done := true
		for part := range txParts {
			if got[int32(part)] != int64(len(in[part])) {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets %v never reached the input's ends", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	offs := committed(t, c, txGroup)
	for part := range txParts {
		recs := readAll(t, c, txOut, int32(part))
		got := values(t, recs)
		want := make([]string, len(in[part]))
		for i, v := range in[part] {
			want[i] = transformValue(v)
		}
		if !slices.Equal(got, want) {
			dups, lost := diff(got, want)
			t.Fatalf("output partition %d: %d records, want %d (%d duplicated, %d lost)", part, len(got), len(want), dups, lost)
		}
		for i, r := range recs {
			if len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprintf("%d/%d", part, i) {
				t.Fatalf("output %d/%d: source %v, want %d/%d", part, i, r.Headers, part, i)
			}
		}
		if offs[int32(part)] != int64(len(recs)) {
			t.Fatalf("partition %d: committed offset %d, but %d records were produced from it", part, offs[int32(part)], len(recs))
		}
	}
}

func diff(got, want []string) (dups, lost int) {
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for _, w := range want {
		if seen[w] == 0 {
			lost++
		}
	}
	for _, n := range seen {
		if n > 1 {
			dups += n - 1
		}
	}
	return dups, lost
}

// TestTransactExactlyOnceAcrossSIGKILL: a consume-transform-produce loop copying a
// 6-partition topic, whose workers are SIGKILLed and restarted several times while
// the input is still being written, ends with the output equal to the transformed
// input exactly and the committed offsets matching what was produced.
func TestTransactExactlyOnceAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills worker processes for tens of seconds")
	}
	s := newStack(t, stackOptions{linger: 10 * time.Millisecond})
	c := New(s.url)
	const session = 3 * time.Second
	input := txSetup(t, c, 3000, 6*time.Second, nil)
	workers := []*txWorker{startTxWorker(t, s.url, 0, session, 0), startTxWorker(t, s.url, 1, session, 0)}
	rng := rand.New(rand.NewPCG(1, 2))
	kills, midStream := 0, 0
	for range 6 {
		time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond) // a kill at a random moment
		// A kill counts as mid-stream when committed input lags what was written.
		lag, err := c.GroupLag(t.Context(), txGroup)
		if err == nil && lag.TotalLag > 0 {
			midStream++
		}
		slot := rng.IntN(len(workers))
		workers[slot].kill()
		kills++
		workers[slot] = startTxWorker(t, s.url, slot, session, 0)
	}
	if midStream < kills/2 {
		t.Fatalf("only %d of %d kills happened while input was waiting to be copied", midStream, kills)
	}
	in := input()
	txVerify(t, c, in)
	for _, w := range workers {
		w.stop(t)
	}
	t.Logf("%d records copied exactly once across %d SIGKILLs (%d mid-stream)", len(in[0])+len(in[1])+len(in[2])+len(in[3])+len(in[4])+len(in[5]), kills, midStream)
}

// postLine is a parsed POST line of a worker.
type postLine struct {
	member string
	epoch  int32
	sent   time.Time
	status int
	code   string
}

func parsePosts(lines []txLine) []postLine {
	var out []postLine
	for _, l := range lines {
		if !strings.HasPrefix(l.text, "POST ") {
			continue
		}
		var p postLine
		var sent int64
		f := strings.Fields(l.text)
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "member":
				p.member = v
			case "epoch":
				e, _ := strconv.Atoi(v)
				p.epoch = int32(e)
			case "sent":
				sent, _ = strconv.ParseInt(v, 10, 64)
			case "status":
				p.status, _ = strconv.Atoi(v)
			case "code":
				p.code = v
			}
		}
		p.sent = time.Unix(0, sent)
		out = append(out, p)
	}
	return out
}

// TestTransactSIGSTOPPastSession: a worker paused past its session and then resumed has
// everything it sends under its old membership refused, nothing of it becomes visible,
// and the output still equals the transformed input.
func TestTransactSIGSTOPPastSession(t *testing.T) {
	if testing.Short() {
		t.Skip("pauses worker processes for tens of seconds")
	}
	s := newStack(t, stackOptions{linger: 10 * time.Millisecond})
	c := New(s.url)
	const session = 2 * time.Second
	stopInput := make(chan struct{})
	input := txSetup(t, c, 0, 0, stopInput) // input keeps coming while the worker is paused
	// Slow batches, so that a pause most likely catches a batch between its fetch and
	// its transaction.
	paused := startTxWorker(t, s.url, 0, session, 150*time.Millisecond)
	other := startTxWorker(t, s.url, 1, session, 150*time.Millisecond)
	staleRefused := 0
	for cycle := 0; cycle < 5 && staleRefused == 0; cycle++ {
		time.Sleep(1500 * time.Millisecond) // the workers copy a while, so the pause catches work in flight
		before := parsePosts(paused.output())
		var epoch int32
		for _, p := range before {
			epoch = max(epoch, p.epoch)
		}
		paused.cmd.Process.Signal(syscall.SIGSTOP)
		stopped := time.Now()
		time.Sleep(2*session + time.Second) // its lease ends; the other worker takes over
		paused.cmd.Process.Signal(syscall.SIGCONT)
		resumed := time.Now()
		// A window, not a condition: whatever the resumed worker sends under its old
		// membership in it must be refused (none accepted); if it sent nothing, the
		// next cycle pauses it again.
		time.Sleep(2 * time.Second)
		for _, p := range parsePosts(paused.output()) {
			if p.sent.Before(stopped) || p.epoch > epoch {
				continue // before the pause, or under a membership renewed since
			}
			// Sent after the pause began under the old membership: refused whole.
			if p.status == 200 {
				t.Fatalf("paused worker's request sent %s after resuming at epoch %d was accepted", p.sent.Sub(resumed), p.epoch)
			}
			if p.status == 409 {
				staleRefused++
			}
		}
	}
	close(stopInput)
	if staleRefused == 0 {
		t.Fatal("no request of the paused worker under its old membership was seen refused in five pauses")
	}
	in := input()
	txVerify(t, c, in)
	paused.stop(t)
	other.stop(t)
	t.Logf("%d requests sent under a lapsed membership were refused", staleRefused)
}
