package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/objstore/fault"
)

func TestKeyPartitionMatchesKafka(t *testing.T) {
	// The partition Kafka's DefaultPartitioner computes from its murmur2 vector for
	// "foobar" (the vectors themselves: internal/murmur2).
	if got := KeyPartition([]byte("foobar"), 8); got != 1357151166%8 {
		t.Errorf("KeyPartition(foobar, 8) = %d, want %d", got, 1357151166%8)
	}
	for _, tc := range []struct {
		key, format, want string
	}{
		{`"user-1"`, "string", "user-1"},
		{`"a<b"`, "string", "a<b"},
		{`{"id": 1}`, "json", `{"id":1}`},
		{`"a<b"`, "json", `"a\u003cb"`}, // as encoding/json sends it, so as the server stores it
		{`"AAEC"`, "binary", "\x00\x01\x02"},
	} {
		got, err := storedKey(json.RawMessage(tc.key), tc.format)
		if err != nil || string(got) != tc.want {
			t.Errorf("storedKey(%s, %s) = %q, %v; want %q", tc.key, tc.format, got, err, tc.want)
		}
	}
}

// lossyProxy serves the API, but answers POST /v1/records only on the third attempt of
// each distinct body: the first two are executed (the records commit) and then the
// connection is dropped without an answer, as a load balancer that times out would.
type lossyProxy struct {
	next  http.Handler
	drops int

	mu       sync.Mutex
	attempts map[[32]byte]int
}

func (p *lossyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/records" {
		p.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	sum := sha256.Sum256(body)
	p.mu.Lock()
	p.attempts[sum]++
	n := p.attempts[sum]
	p.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	p.next.ServeHTTP(rec, r)
	if n <= p.drops {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// TestProducerRetriesThroughLossyProxy is the first bar: a producer retrying
// every request (up to 3 attempts) through a proxy that drops answers after the write
// succeeded ends with every record exactly once, in order, per partition.
func TestProducerRetriesThroughLossyProxy(t *testing.T) {
	proxy := &lossyProxy{drops: 2, attempts: map[[32]byte]int{}}
	s := newStack(t, stackOptions{wrap: func(h http.Handler) http.Handler { proxy.next = h; return proxy }})
	ctx := t.Context()
	c := New(s.url)
	if _, err := c.CreateTopic(ctx, "lossy", 4, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, ProducerConfig{Linger: 2 * time.Millisecond, BatchRecords: 40, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1200
	var ds []*Delivery
	for i := range n {
		r := Record{Value: String(fmt.Sprintf("v%d", i))}
		if i%3 == 0 {
			r.Partition = Int32(int32(i % 4)) // explicit
		} else {
			r.Key = String(fmt.Sprintf("k%d", i%17)) // keyed
		}
		d, err := p.Send(ctx, "lossy", r)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := make([][]string, 4) // per partition, in send order
	for i, d := range ds {
		off, err := d.Result()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		want[off.Partition] = append(want[off.Partition], fmt.Sprintf("v%d", i))
		if int64(len(want[off.Partition])-1) != off.Offset {
			var lines []string
			for j, d := range ds[:min(len(ds), 60)] {
				o, err := d.Result()
				lines = append(lines, fmt.Sprintf("%d:%d/%d dup=%v err=%v", j, o.Partition, o.Offset, d.Duplicate(), err))
			}
			t.Fatalf("record %d landed at %d/%d, want offset %d\n%s", i, off.Partition, off.Offset, len(want[off.Partition])-1, strings.Join(lines, "\n"))
		}
	}
	for part := range int32(4) {
		var got []string
		for _, r := range readAll(t, c, "lossy", part) {
			var v string
			json.Unmarshal(r.Value, &v)
			got = append(got, v)
		}
		if !slices.Equal(got, want[part]) {
			t.Fatalf("partition %d holds %d records, want %d exactly once in order\n got %v\nwant %v", part, len(got), len(want[part]), head(got), head(want[part]))
		}
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	if len(proxy.attempts) < n/40 {
		t.Fatalf("only %d distinct requests", len(proxy.attempts))
	}
	for _, k := range proxy.attempts {
		if k < 3 {
			t.Fatalf("a request was attempted %d times: each is answered only on its third attempt (byte for byte)", k)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func head(s []string) []string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

func values(t testing.TB, recs []Record) []string {
	var out []string
	for _, r := range recs {
		var v string
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("value %s: %v", r.Value, err)
		}
		out = append(out, v)
	}
	return out
}

// TestProducerFencedInstance: two instances with one transactional id; the older is
// fenced, and nothing it sends after fencing becomes visible.
func TestProducerFencedInstance(t *testing.T) {
	s := newStack(t, stackOptions{})
	ctx := t.Context()
	c := New(s.url)
	if _, err := c.CreateTopic(ctx, "fenced", 1, nil); err != nil {
		t.Fatal(err)
	}
	old, err := c.NewProducer(ctx, ProducerConfig{TransactionalID: "copier-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Produce(ctx, "fenced", Record{Value: String("old-1")}, Record{Value: String("old-2")}); err != nil {
		t.Fatal(err)
	}
	cur, err := c.NewProducer(ctx, ProducerConfig{TransactionalID: "copier-1"})
	if err != nil {
		t.Fatal(err)
	}
	if cur.Identity().ID != old.Identity().ID || cur.Identity().Epoch != old.Identity().Epoch+1 {
		t.Fatalf("second instance %+v, first %+v: want the same id at the next epoch", cur.Identity(), old.Identity())
	}
	_, err = old.Produce(ctx, "fenced", Record{Value: String("zombie-1")})
	if !errors.Is(err, ErrProducerFenced) || !HasCode(err, CodeProducerFenced) {
		t.Fatalf("old instance after fencing: %v, want ErrProducerFenced", err)
	}
	if _, err := old.Send(ctx, "fenced", Record{Value: String("zombie-2")}); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("old instance keeps sending: %v, want ErrProducerFenced at once", err)
	}
	if _, err := cur.Produce(ctx, "fenced", Record{Value: String("new-1")}); err != nil {
		t.Fatal(err)
	}
	got := values(t, readAll(t, c, "fenced", 0))
	if want := []string{"old-1", "old-2", "new-1"}; !slices.Equal(got, want) {
		t.Fatalf("partition holds %v, want %v", got, want)
	}
	cur.Close(ctx)
	old.Close(ctx)
}

// TestProducerSequenceGapRecovers: a request refused for good leaves a gap in its
// partition's sequence; the producer takes a new identity and sends the requests after
// it again, so everything else lands exactly once, in order.
func TestProducerSequenceGapRecovers(t *testing.T) {
	s := newStack(t, stackOptions{linger: 20 * time.Millisecond})
	ctx := t.Context()
	c := New(s.url)
	if _, err := c.CreateTopic(ctx, "gap", 2, map[string]string{"max.message.bytes": "1000"}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, ProducerConfig{Linger: time.Millisecond, BatchRecords: 5, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	first := p.Identity()
	var ds []*Delivery
	bad := 23
	for i := range 60 {
		v := fmt.Sprintf("v%d", i)
		if i == bad {
			v = strings.Repeat("x", 2000) // beyond max.message.bytes: its request is refused
		}
		d, err := p.Send(ctx, "gap", Record{Value: String(v), Partition: Int32(int32(i % 2))})
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	failed := 0
	want := [2][]string{}
	for i, d := range ds {
		_, err := d.Result()
		if err != nil {
			if !HasCode(err, "record_too_large") {
				t.Fatalf("record %d: %v", i, err)
			}
			failed++
			continue
		}
		want[i%2] = append(want[i%2], fmt.Sprintf("v%d", i))
	}
	// The refused record's request (up to 5 records) failed; nothing else.
	if failed == 0 || failed > 5 || ds[bad].err == nil {
		t.Fatalf("%d records failed, record %d: %v", failed, bad, ds[bad].err)
	}
	for part := range int32(2) {
		if got := values(t, readAll(t, c, "gap", part)); !slices.Equal(got, want[part]) {
			t.Fatalf("partition %d: %v, want %v", part, got, want[part])
		}
	}
	if p.Identity() == first {
		t.Fatalf("identity %+v unchanged after a gap", first)
	}
	p.Close(ctx)
}

// TestProduceAtomic: one request over two topics commits whole, or not at all.
func TestProduceAtomic(t *testing.T) {
	s := newStack(t, stackOptions{})
	ctx := t.Context()
	c := New(s.url)
	for _, name := range []string{"left", "right"} {
		if _, err := c.CreateTopic(ctx, name, 2, map[string]string{"max.message.bytes": "1000"}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.NewProducer(ctx, ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.ProduceAtomic(ctx, []TopicRecord{
		{"left", Record{Value: String("l0"), Partition: Int32(1)}},
		{"right", Record{Value: String("r0"), Partition: Int32(0)}},
		{"left", Record{Value: String("l1"), Partition: Int32(1)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []TopicOffset{{Topic: "left", Partition: 1, Offset: 0}, {Topic: "right", Partition: 0, Offset: 0}, {Topic: "left", Partition: 1, Offset: 1}}
	if !slices.Equal(res.Offsets, want) || res.Duplicate {
		t.Fatalf("offsets %+v dup %v, want %+v", res.Offsets, res.Duplicate, want)
	}
	_, err = p.ProduceAtomic(ctx, []TopicRecord{
		{"left", Record{Value: String("l2"), Partition: Int32(1)}},
		{"right", Record{Value: String(strings.Repeat("x", 2000)), Partition: Int32(0)}},
	})
	if !HasCode(err, "record_too_large") {
		t.Fatalf("atomic request with a bad record: %v, want record_too_large", err)
	}
	if got := values(t, readAll(t, c, "left", 1)); !slices.Equal(got, []string{"l0", "l1"}) {
		t.Fatalf("left/1 holds %v: the refused request wrote part of itself", got)
	}
	// The producer goes on (under a new identity: the refusal left a gap).
	if _, err := p.ProduceAtomic(ctx, []TopicRecord{{"left", Record{Value: String("l3"), Partition: Int32(1)}}}); err != nil {
		t.Fatal(err)
	}
	if got := values(t, readAll(t, c, "left", 1)); !slices.Equal(got, []string{"l0", "l1", "l3"}) {
		t.Fatalf("left/1 holds %v", got)
	}
	p.Close(ctx)
}

// TestProducerNotIdempotentDoesNotRetryUnknownOutcomes: without idempotence a dropped
// answer is an error, not a retry that could write twice.
func TestProducerNotIdempotentDoesNotRetryUnknownOutcomes(t *testing.T) {
	proxy := &lossyProxy{drops: 1, attempts: map[[32]byte]int{}}
	s := newStack(t, stackOptions{wrap: func(h http.Handler) http.Handler { proxy.next = h; return proxy }})
	ctx := t.Context()
	c := New(s.url)
	if _, err := c.CreateTopic(ctx, "plain", 1, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, ProducerConfig{NotIdempotent: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Produce(ctx, "plain", Record{Value: String("once")}); err == nil || IsRetryable(err) {
		t.Fatalf("dropped answer: %v, want a transport error", err)
	}
	if got := values(t, readAll(t, c, "plain", 0)); !slices.Equal(got, []string{"once"}) {
		t.Fatalf("partition holds %v, want the record once", got)
	}
	p.Close(ctx)
}

// post sends a raw body to path and returns the status and decoded answer.
func post(t *testing.T, url, path, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return resp.StatusCode, out
}

func initProducer(t *testing.T, url, tid string) (int64, int64) {
	t.Helper()
	body := `{}`
	if tid != "" {
		body = `{"transactional_id":"` + tid + `"}`
	}
	status, out := post(t, url, "/v1/producers", body)
	if status != 200 {
		t.Fatalf("init producer: %d %v", status, out)
	}
	return int64(out["producer_id"].(float64)), int64(out["epoch"].(float64))
}

// TestOneFlushDuplicateFencedValid is the issue's "one flush in which a duplicate, a
// fenced and a valid request hit the same partition": only the valid one is readable,
// at dense offsets, and the duplicate answers with its original offsets.
func TestOneFlushDuplicateFencedValid(t *testing.T) {
	s := newStack(t, stackOptions{linger: time.Hour}) // flushes only when told
	ctx := t.Context()
	c := New(s.url)
	if _, err := c.CreateTopic(ctx, "mixed", 1, nil); err != nil {
		t.Fatal(err)
	}
	a, ae := initProducer(t, s.url, "")
	z, ze := initProducer(t, s.url, "zombie-txn")
	body := func(id, epoch int64, seq int, values ...string) string {
		var recs []string
		for _, v := range values {
			recs = append(recs, fmt.Sprintf(`{"partition":0,"value":%q}`, v))
		}
		return fmt.Sprintf(`{"records":[%s],"producer":{"id":%d,"epoch":%d,"sequences":{"0":%d}}}`, strings.Join(recs, ","), id, epoch, seq)
	}
	type answer struct {
		status int
		out    map[string]any
	}
	sent := 0.0 // requests sent
	send := func(b string) chan answer {
		sent++
		ch := make(chan answer, 1)
		go func() {
			st, out := post(t, s.url, "/v1/topics/mixed/records", b)
			ch <- answer{st, out}
		}()
		return ch
	}
	// flush cuts a flush once the writer has taken every request sent so far into its
	// buffer. (The gap's request below, put back for later flushes, counts once more
	// each time: hence "at least".)
	flush := func() {
		testwait.Until(t, 30*time.Second, "the requests in the writer's buffer", func() bool {
			return s.counter(t, "strata_writer_requests_total") >= sent
		})
		if err := s.w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	firstBody := body(a, ae, 0, "a0", "a1", "a2")
	first := send(firstBody)
	flush()
	if ans := <-first; ans.status != 200 {
		t.Fatalf("first: %d %v", ans.status, ans.out)
	}
	zombieFirst := send(body(z, ze, 0, "z0"))
	flush()
	if ans := <-zombieFirst; ans.status != 200 {
		t.Fatalf("zombie before fencing: %d %v", ans.status, ans.out)
	}
	if _, e := initProducer(t, s.url, "zombie-txn"); e != ze+1 {
		t.Fatalf("fencing init: epoch %d", e)
	}

	putsBefore := s.store.Calls(fault.Put)
	dup := send(firstBody)
	fenced := send(body(z, ze, 1, "z1", "z2"))
	valid := send(body(a, ae, 3, "a3", "a4"))
	flush()
	if got := s.store.Calls(fault.Put) - putsBefore; got != 1 {
		t.Fatalf("%d objects written, want the three requests in one flush", got)
	}
	d, f, v := <-dup, <-fenced, <-valid
	if d.status != 200 || d.out["duplicate"] != true || fmt.Sprint(d.out["offsets"]) != "[map[offset:0 partition:0] map[offset:1 partition:0] map[offset:2 partition:0]]" {
		t.Fatalf("duplicate: %d %v, want its original offsets 0..2 and duplicate: true", d.status, d.out)
	}
	if f.status != 409 || f.out["code"] != "producer_fenced" {
		t.Fatalf("fenced: %d %v, want 409 producer_fenced", f.status, f.out)
	}
	if v.status != 200 || v.out["duplicate"] != nil || fmt.Sprint(v.out["offsets"]) != "[map[offset:4 partition:0] map[offset:5 partition:0]]" {
		t.Fatalf("valid: %d %v, want offsets 4 and 5", v.status, v.out)
	}
	recs := readAll(t, c, "mixed", 0)
	if got := values(t, recs); !slices.Equal(got, []string{"a0", "a1", "a2", "z0", "a3", "a4"}) {
		t.Fatalf("partition holds %v", got)
	}
	for i, r := range recs {
		if r.Offset != int64(i) {
			t.Fatalf("record %d at offset %d: offsets not dense", i, r.Offset)
		}
	}
	// A gap and a retry of the fenced request: refused, and still nothing more.
	// (A request ahead of its sequence waits a few flushes for the one before it.)
	gap := send(body(a, ae, 9, "a9"))
	for range 5 {
		flush()
	}
	if g := <-gap; g.status != 409 || g.out["code"] != "out_of_order_sequence" || g.out["expected_sequence"] != float64(5) {
		t.Fatalf("gap: %d %v, want 409 out_of_order_sequence expecting 5", g.status, g.out)
	}
}

// BenchmarkProducerIdempotence measures produce throughput through a whole node
// (SQLite catalog, filesystem store) with idempotence on and off, in one run: compare
// the two records/s figures. Records are 100-byte values with 16 keys over 8
// partitions.
func BenchmarkProducerIdempotence(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  ProducerConfig
	}{
		{"idempotent", ProducerConfig{}},
		{"plain", ProducerConfig{NotIdempotent: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := newStack(b, stackOptions{})
			ctx := b.Context()
			c := New(s.url)
			if _, err := c.CreateTopic(ctx, "bench", 8, nil); err != nil {
				b.Fatal(err)
			}
			p, err := c.NewProducer(ctx, tc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			value := String(strings.Repeat("x", 98))
			keys := make([]json.RawMessage, 16)
			for i := range keys {
				keys[i] = String(fmt.Sprintf("key-%d", i))
			}
			b.ResetTimer()
			start := time.Now()
			var last *Delivery
			for i := 0; i < b.N; i++ {
				d, err := p.Send(ctx, "bench", Record{Key: keys[i%len(keys)], Value: value})
				if err != nil {
					b.Fatal(err)
				}
				last = d
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := last.Result(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
			b.StopTimer()
			p.Close(ctx)
		})
	}
}
