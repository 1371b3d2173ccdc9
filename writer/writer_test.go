package writer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/segment"
)

// never is a linger long enough that only MaxFlushBytes, Flush or shutdown cut flushes.
const never = time.Hour

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // substring of the error; "" for valid
	}{
		{"zero value takes defaults", Config{}, ""},
		{"explicit values", Config{Linger: time.Millisecond, MaxFlushBytes: 1 << 20, BufferBytes: 2 << 20, MaxInflight: 1, Compression: segment.CompressionZstd}, ""},
		{"big flush raises the default buffer", Config{MaxFlushBytes: 128 << 20}, ""},
		{"negative linger", Config{Linger: -time.Second}, "Linger is -1s"},
		{"negative flush size", Config{MaxFlushBytes: -1}, "MaxFlushBytes is -1"},
		{"flush above one PUT", Config{MaxFlushBytes: 6 << 30, BufferBytes: 8 << 30}, "5 GiB"},
		{"buffer below flush", Config{MaxFlushBytes: 8 << 20, BufferBytes: 1 << 20}, "raise BufferBytes or lower MaxFlushBytes"},
		{"too many in flight", Config{MaxInflight: 1000}, "MaxInflight is 1000"},
		{"negative in flight", Config{MaxInflight: -1}, "MaxInflight is -1"},
		{"unknown compression", Config{Compression: 9}, "Compression is 9"},
		{"negative settle timeout", Config{SettleTimeout: -time.Second}, "SettleTimeout is -1s"},
		{"hedge quantile 1", Config{HedgeQuantile: 1}, "HedgeQuantile is 1"},
		{"hedge quantile too low", Config{HedgeQuantile: 0.2}, "below 0.5"},
		{"hedging off", Config{HedgeQuantile: -1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && err == nil:
				t.Fatalf("Validate() = nil, want an error containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("Validate() = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Error("New accepted an invalid config")
		}
	}()
	New(newMemStore(), newFakeCatalog(t, nil), Config{Linger: -1}, nil, nil)
}

// refusal is a request Produce must refuse with want, its message containing msg.
type refusal struct {
	name string
	req  Request
	want error
	msg  string
}

// expectRefused produces each case and requires its refusal, then that none of them
// reached the store or the catalog.
func (h *harness) expectRefused(t *testing.T, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.w.Produce(context.Background(), tc.req)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Produce = %v, want %v saying %q", err, tc.want, tc.msg)
			}
		})
	}
	if err := h.w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if puts, _, _ := h.store.counts(); puts != 0 || len(h.cat.commitCalls()) != 0 {
		t.Errorf("bad requests reached the store (%d puts) or the catalog (%d commits)", puts, len(h.cat.commitCalls()))
	}
}

func TestProduceRefusesBadRequests(t *testing.T) {
	h := start(t, Config{Linger: never, MaxFlushBytes: 4 << 10, BufferBytes: 1 << 20}, true)
	big := rec(1, 4, 0, "", strings.Repeat("x", 5<<10))
	prod := &catalog.Producer{ID: 7, Epoch: 1}
	mixed := rec(1, 4, 1, "", "b")
	mixed.LogAppendTime = true
	h.expectRefused(t, []refusal{
		{"empty", Request{}, ErrInvalid, "no records"},
		{"too large", req(big), ErrTooLarge, "split it"},
		{"bad partition", req(rec(1, 4, -2, "", "a")), ErrInvalid, "partition -2"},
		{"no partition count", req(rec(1, 0, -1, "", "a")), ErrInvalid, "set Partitions"},
		{"bad compression", Request{Records: []Record{rec(1, 4, 0, "", "a")}, Compression: 7}, ErrInvalid, "compression 7"},
		{"sequences without producer", Request{Records: []Record{rec(1, 4, 0, "", "a")}, Sequences: map[TopicPartition]int32{{1, 0}: 0}}, ErrInvalid, "without a producer"},
		{"idempotent unkeyed", Request{Records: []Record{rec(1, 4, -1, "", "a")}, Producer: prod}, ErrInvalid, "explicit partition or a key"},
		{"idempotent no sequence", Request{Records: []Record{rec(1, 4, 2, "", "a")}, Producer: prod, Sequences: map[TopicPartition]int32{{1, 0}: 0}}, ErrInvalid, "no base sequence for topic 1 partition 2"},
		{"mixed timestamp types", req(rec(1, 4, 0, "", "a"), mixed), ErrInvalid, "mixes LogAppendTime"},
	})
	if got := metricValue(t, h.w.m.rejected.WithLabelValues("invalid")); got != 8 {
		t.Errorf("rejected{invalid} = %v, want 8", got)
	}
	if got := metricValue(t, h.w.m.rejected.WithLabelValues("too_large")); got != 1 {
		t.Errorf("rejected{too_large} = %v, want 1", got)
	}
}

// A request waits in the buffer until Linger has passed: with a short linger it is
// answered without any Flush; with a long one nothing is flushed until Flush.
func TestFlushAtLinger(t *testing.T) {
	t.Run("short linger flushes on its own", func(t *testing.T) {
		h := start(t, Config{Linger: 5 * time.Millisecond}, true)
		resp, err := h.w.Produce(context.Background(), req(rec(1, 1, 0, "", "a"), rec(1, 1, 0, "", "b")))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Records[0] != (RecordResult{0, 0}) || resp.Records[1] != (RecordResult{0, 1}) {
			t.Errorf("records landed at %+v, want partition 0 offsets 0 and 1", resp.Records)
		}
		if puts, _, _ := h.store.counts(); puts != 1 {
			t.Errorf("%d puts, want 1", puts)
		}
	})
	t.Run("nothing flushes before linger", func(t *testing.T) {
		h := start(t, Config{Linger: never}, true)
		ch := h.enqueueInOrder(t, req(rec(1, 1, 0, "", "a")), req(rec(1, 1, 0, "", "b")))
		time.Sleep(20 * time.Millisecond) // a flush now would be a bug, whatever the timing
		if puts, _, _ := h.store.counts(); puts != 0 || h.w.bufferedRequests() != 2 {
			t.Fatalf("before linger: %d puts, %d buffered; want 0 and 2", puts, h.w.bufferedRequests())
		}
		if err := h.w.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i, c := range ch {
			if got := mustOK(t, await(t, c)).Records[0].Offset; got != int64(i) {
				t.Errorf("request %d at offset %d, want %d", i, got, i)
			}
		}
		if puts, _, _ := h.store.counts(); puts != 1 {
			t.Errorf("%d puts, want 1 for both requests", puts)
		}
	})
}

// The buffer is cut when the next request would push it past MaxFlushBytes, or when it
// reaches it, without waiting for the linger.
func TestFlushAtMaxBytes(t *testing.T) {
	one := req(rec(1, 1, 0, "", strings.Repeat("v", 100)))
	p, err := New(newMemStore(), newFakeCatalog(t, nil), Config{}, nil, nil).prepare(one)
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, Config{Linger: never, MaxFlushBytes: 3 * p.size}, true)
	var chs []chan outcome
	for range 7 {
		chs = append(chs, h.enqueueInOrder(t, one)...)
	}
	for i := range 6 { // two full flushes, cut on their own
		if got := mustOK(t, await(t, chs[i])).Records[0].Offset; got != int64(i) {
			t.Errorf("request %d at offset %d, want %d", i, got, i)
		}
	}
	if n := h.w.bufferedRequests(); n != 1 {
		t.Fatalf("%d requests buffered, want the 7th alone", n)
	}
	if err := h.w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustOK(t, await(t, chs[6]))
	var sizes []int
	for _, seg := range h.cat.commitCalls() {
		sizes = append(sizes, len(seg.Requests))
	}
	if fmt.Sprint(sizes) != "[3 3 1]" {
		t.Errorf("requests per commit = %v, want [3 3 1]", sizes)
	}
	if got := metricValue(t, h.w.m.flushes); got != 3 {
		t.Errorf("flushes_total = %v, want 3", got)
	}
}

// The writer reserves what it holds against the node's memory budget: with the budget
// spent elsewhere, Produce fails at once with ErrBufferFull, whatever BufferBytes
// allows; every reservation is released once its flush is answered.
func TestMemoryBudget(t *testing.T) {
	one := req(rec(1, 1, 0, "", strings.Repeat("v", 1000)))
	p, _ := New(newMemStore(), newFakeCatalog(t, nil), Config{}, nil, nil).prepare(one)
	mem := membudget.New(3*p.size, nil)
	h := start(t, Config{Linger: never, Memory: mem}, true)
	gate := make(chan struct{})
	h.store.block = func(int) { <-gate }
	chs := h.enqueueInOrder(t, one, one)
	if got := mem.Used(); got != 2*p.size {
		t.Fatalf("reserved %d for two requests of %d", got, p.size)
	}
	if !mem.TryReserve(p.size, membudget.UseFetch) { // someone else takes the rest
		t.Fatal("the budget's last third refused")
	}
	if _, err := h.w.Produce(context.Background(), one); !errors.Is(err, ErrBufferFull) {
		t.Fatalf("Produce with the budget spent = %v, want ErrBufferFull", err)
	}
	if got := metricValue(t, h.w.m.rejected.WithLabelValues("memory")); got != 1 {
		t.Errorf("rejected{memory} = %v, want 1", got)
	}
	mem.Release(p.size)
	go h.w.Flush(context.Background())
	close(gate)
	for _, c := range chs {
		mustOK(t, await(t, c))
	}
	testwait.Until(t, 20*time.Second, "the flush's bytes to be released", func() bool { return mem.Used() == 0 })
	if mem.Peak() > mem.Limit() || mem.Overreleased() != 0 {
		t.Fatalf("peak %d of %d, overreleased %d", mem.Peak(), mem.Limit(), mem.Overreleased())
	}
}

// Bytes buffered and in flight count against BufferBytes; beyond it Produce fails at
// once, and succeeds again once a flush has released its bytes.
func TestBackPressure(t *testing.T) {
	one := req(rec(1, 1, 0, "", strings.Repeat("v", 1000)))
	p, _ := New(newMemStore(), newFakeCatalog(t, nil), Config{}, nil, nil).prepare(one)
	h := start(t, Config{Linger: never, MaxFlushBytes: 2 * p.size, BufferBytes: 2 * p.size}, true)
	gate := make(chan struct{})
	h.store.block = func(int) { <-gate }

	chs := h.enqueueInOrder(t, one, one) // the second fills a flush: cut, stuck in Put
	testwait.Until(t, 20*time.Second, "the put to start", func() bool { puts, _, _ := h.store.counts(); return puts == 1 })
	start := time.Now()
	_, err := h.w.Produce(context.Background(), one)
	if !errors.Is(err, ErrBufferFull) {
		t.Fatalf("Produce with the buffer full = %v, want ErrBufferFull", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("ErrBufferFull took %s: it must come at once", d)
	}
	if got := metricValue(t, h.w.m.rejected.WithLabelValues("buffer_full")); got != 1 {
		t.Errorf("rejected{buffer_full} = %v, want 1", got)
	}
	if got := metricValue(t, h.w.m.buffered); got != float64(2*p.size) {
		t.Errorf("buffered_bytes = %v, want %d (the flush in flight)", got, 2*p.size)
	}

	close(gate)
	for _, c := range chs {
		mustOK(t, await(t, c))
	}
	// The bytes are released before the answers: room at once.
	c := h.produceAsync(one)
	testwait.Until(t, 20*time.Second, "the retry to be buffered", func() bool { return h.w.bufferedRequests() == 1 })
	if err := h.w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := mustOK(t, await(t, c)).Records[0].Offset; got != 2 {
		t.Errorf("retry at offset %d, want 2", got)
	}
	if got, held := metricValue(t, h.w.m.buffered), h.w.heldBytes(); got != 0 || held != 0 {
		t.Errorf("after everything answered: buffered_bytes = %v, held = %d; want 0", got, held)
	}
}

// When Run's context ends, everything buffered is flushed and every waiter answered
// with offsets, flushes in flight included; then new requests get ErrClosed.
func TestShutdownAnswersEveryWaiter(t *testing.T) {
	one := req(rec(1, 3, 0, "", strings.Repeat("v", 50)))
	p, _ := New(newMemStore(), newFakeCatalog(t, nil), Config{}, nil, nil).prepare(one)
	h := start(t, Config{Linger: never, MaxFlushBytes: 4 * p.size, MaxInflight: 2}, true)
	h.store.delay = func(int) time.Duration { return time.Duration(rand.IntN(5)) * time.Millisecond }
	const n = 50
	var ps []*pending
	for i := range n {
		ps = append(ps, h.enqueueRaw(t, req(rec(1, 3, int32(i%3), "", fmt.Sprint(i)))))
	}
	if err := h.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	seen := make(map[RecordResult]bool)
	for i, p := range ps {
		select {
		case <-p.done:
			if p.err != nil {
				t.Fatalf("request %d: %v", i, p.err)
			}
			rr := p.resp.Records[0]
			if rr.Partition != int32(i%3) || seen[rr] {
				t.Errorf("request %d at %+v: wrong partition or offset given twice", i, rr)
			}
			seen[rr] = true
		default:
			t.Fatalf("request %d not answered when Run returned", i)
		}
	}
	for part, want := range []int64{17, 17, 16} {
		if hw := h.cat.highWatermark(1, int32(part)); hw != want {
			t.Errorf("partition %d high watermark %d, want %d", part, hw, want)
		}
	}
	if _, err := h.w.Produce(context.Background(), one); !errors.Is(err, ErrClosed) {
		t.Errorf("Produce after shutdown = %v, want ErrClosed", err)
	}
}

// A failed PUT fails every request of its flush with ErrStore and commits nothing; the
// next flush goes through from the same offsets.
func TestStoreFailure(t *testing.T) {
	h := start(t, Config{Linger: never}, true)
	h.store.fail = func(n int) error {
		if n == 1 {
			return errBoom
		}
		return nil
	}
	reqs := []Request{req(rec(1, 2, 0, "", "a")), req(rec(1, 2, 1, "", "b")), req(rec(2, 1, 0, "", "c"))}
	chs := h.enqueueInOrder(t, reqs...)
	if err := h.w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, c := range chs {
		o := await(t, c)
		if !errors.Is(o.err, ErrStore) || !errors.Is(o.err, errBoom) {
			t.Errorf("request %d: %v, want ErrStore wrapping the cause", i, o.err)
		}
	}
	if n := len(h.cat.commitCalls()); n != 0 {
		t.Fatalf("%d commits after a failed put, want 0", n)
	}
	chs = h.enqueueInOrder(t, reqs...)
	if err := h.w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, c := range chs {
		if got := mustOK(t, await(t, c)).Records[0].Offset; got != 0 {
			t.Errorf("request %d at offset %d after the failed flush, want 0", i, got)
		}
	}
	if got := metricValue(t, h.w.m.puts.WithLabelValues("error")); got != 1 {
		t.Errorf("puts{error} = %v, want 1", got)
	}
}

// errLost is a commit whose answer was lost: the outcome is unknown.
var errLost = errors.New("connection reset by peer")

func TestCommitUnknownSettled(t *testing.T) {
	t.Run("found", func(t *testing.T) {
		h := start(t, Config{Linger: never}, true)
		h.cat.refuse[666] = catalog.ErrTopicNotFound
		h.cat.commitFault = func(n int) (bool, error) { return true, errLost } // lands, answer lost
		h.cat.settleFault = func(n int) error {
			if n == 1 {
				return errors.New("catalog unreachable") // not an answer: retry
			}
			return nil
		}
		chs := h.enqueueInOrder(t,
			req(rec(1, 1, 0, "", "a")),
			req(rec(666, 1, 0, "", "refused in the lost commit")),
			req(rec(1, 1, 0, "", "b"), rec(1, 1, 0, "", "c")))
		if err := h.w.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := mustOK(t, await(t, chs[0])).Records[0].Offset; got != 0 {
			t.Errorf("request 0 at offset %d, want 0", got)
		}
		if o := await(t, chs[1]); !errors.Is(o.err, ErrCommit) || !errors.Is(o.err, catalog.ErrCommitAborted) {
			t.Errorf("request without rows: %v, want ErrCommit (retryable)", o.err)
		}
		if got := mustOK(t, await(t, chs[2])).Records; got[0].Offset != 1 || got[1].Offset != 2 {
			t.Errorf("request 2 at %+v, want offsets 1 and 2", got)
		}
		if h.cat.settles != 2 {
			t.Errorf("%d Settle calls, want 2 (one failed, one answered)", h.cat.settles)
		}
		if got := metricValue(t, h.w.m.settles.WithLabelValues("committed")); got != 1 {
			t.Errorf("settles{committed} = %v, want 1", got)
		}
	})
	t.Run("not found", func(t *testing.T) {
		h := start(t, Config{Linger: never}, true)
		h.cat.commitFault = func(n int) (bool, error) {
			if n == 1 {
				return false, context.DeadlineExceeded // never landed
			}
			return true, nil
		}
		chs := h.enqueueInOrder(t, req(rec(1, 1, 0, "", "a")), req(rec(1, 1, 0, "", "b")))
		if err := h.w.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i, c := range chs {
			if o := await(t, c); !errors.Is(o.err, ErrCommit) || !errors.Is(o.err, catalog.ErrCommitAborted) || errors.Is(o.err, ErrOutcomeUnknown) {
				t.Errorf("request %d: %v, want ErrCommit after the fencing won", i, o.err)
			}
		}
		c := h.produceAsync(req(rec(1, 1, 0, "", "c")))
		testwait.Until(t, 20*time.Second, "buffered", func() bool { return h.w.bufferedRequests() == 1 })
		h.w.Flush(context.Background())
		if got := mustOK(t, await(t, c)).Records[0].Offset; got != 0 {
			t.Errorf("next request at offset %d, want 0: the aborted flush took none", got)
		}
	})
	t.Run("gives up", func(t *testing.T) {
		h := start(t, Config{Linger: never, SettleTimeout: 100 * time.Millisecond}, true)
		h.cat.commitFault = func(int) (bool, error) { return false, errLost }
		h.cat.settleFault = func(int) error { return errors.New("catalog unreachable") }
		chs := h.enqueueInOrder(t, req(rec(1, 1, 0, "", "a")))
		h.w.Flush(context.Background())
		if o := await(t, chs[0]); !errors.Is(o.err, ErrCommit) || !errors.Is(o.err, ErrOutcomeUnknown) {
			t.Errorf("unsettled request: %v, want ErrCommit and ErrOutcomeUnknown", o.err)
		}
		if h.cat.settles < 2 {
			t.Errorf("%d Settle calls, want retries", h.cat.settles)
		}
	})
}

// A commit refused as a whole is a definite answer: ErrCommit, nothing to settle.
func TestCommitRefusedWhole(t *testing.T) {
	for _, tc := range []struct {
		err    error
		result string
	}{
		{catalog.ErrCommitTooLate, "too_late"},
		{catalog.ErrCommitAborted, "aborted"},
		{catalog.ErrInvalidSegment, "invalid"},
	} {
		t.Run(tc.result, func(t *testing.T) {
			h := start(t, Config{Linger: never}, true)
			h.cat.commitFault = func(int) (bool, error) { return false, fmt.Errorf("commit: %w", tc.err) }
			chs := h.enqueueInOrder(t, req(rec(1, 1, 0, "", "a")))
			h.w.Flush(context.Background())
			if o := await(t, chs[0]); !errors.Is(o.err, ErrCommit) || !errors.Is(o.err, tc.err) {
				t.Errorf("refused commit: %v, want ErrCommit wrapping %v", o.err, tc.err)
			}
			if h.cat.settles != 0 {
				t.Errorf("%d Settle calls: a refusal is an answer, nothing to settle", h.cat.settles)
			}
			if got := metricValue(t, h.w.m.commits.WithLabelValues(tc.result)); got != 1 {
				t.Errorf("commits{%s} = %v, want 1", tc.result, got)
			}
		})
	}
}

// One request refused by the catalog gets its own error; the others in the flush
// commit, and the refused one takes no offsets.
func TestRequestRefusedByCatalog(t *testing.T) {
	h := start(t, Config{Linger: never}, true)
	h.cat.refuse[666] = catalog.ErrTopicNotFound
	chs := h.enqueueInOrder(t,
		req(rec(1, 1, 0, "", "a")),
		req(rec(1, 1, 0, "", "x"), rec(666, 1, 0, "", "y")), // atomic: all or none
		req(rec(1, 1, 0, "", "b")))
	h.w.Flush(context.Background())
	if got := mustOK(t, await(t, chs[0])).Records[0].Offset; got != 0 {
		t.Errorf("request 0 at %d, want 0", got)
	}
	if o := await(t, chs[1]); !errors.Is(o.err, catalog.ErrTopicNotFound) || errors.Is(o.err, ErrCommit) {
		t.Errorf("refused request: %v, want its own ErrTopicNotFound (not retryable)", o.err)
	}
	if got := mustOK(t, await(t, chs[2])).Records[0].Offset; got != 1 {
		t.Errorf("request 2 at %d, want 1", got)
	}
	if n := len(h.cat.commitCalls()); n != 1 {
		t.Errorf("%d commits, want 1", n)
	}
}

// A request the encoder refuses is answered with ErrInvalid; the rest of its flush
// commits.
func TestEncoderRefusesOneRequest(t *testing.T) {
	h := start(t, Config{Linger: never}, true)
	enc := h.w.encode
	h.w.encode = func(bs []segment.Batch, o segment.EncodeOptions) ([][]byte, int64, uint32, []segment.BatchInfo, error) {
		for _, b := range bs {
			if b.TopicID == 13 {
				return nil, 0, 0, nil, fmt.Errorf("unlucky: %w", segment.ErrInvalid)
			}
		}
		return enc(bs, o)
	}
	chs := h.enqueueInOrder(t, req(rec(1, 1, 0, "", "a")), req(rec(13, 1, 0, "", "b")), req(rec(1, 1, 0, "", "c")))
	h.w.Flush(context.Background())
	mustOK(t, await(t, chs[0]))
	if o := await(t, chs[1]); !errors.Is(o.err, ErrInvalid) || !errors.Is(o.err, segment.ErrInvalid) {
		t.Errorf("refused request: %v, want ErrInvalid", o.err)
	}
	if got := mustOK(t, await(t, chs[2])).Records[0].Offset; got != 1 {
		t.Errorf("request 2 at %d, want 1", got)
	}
}

// Unkeyed records of a topic all go to one partition per flush, another one the next
// flush; keyed ones go where Kafka would put them.
func TestStickyPartitioning(t *testing.T) {
	h := start(t, Config{Linger: never}, true)
	const parts = 8
	var last int32 = -1
	for flush := range 4 {
		var reqs []Request
		for r := range 3 {
			var recs []Record
			for i := range 5 {
				recs = append(recs, rec(1, parts, -1, "", fmt.Sprint(flush, r, i)))
			}
			recs = append(recs, rec(1, parts, -1, "foobar", "keyed"), rec(2, 3, -1, "", "other topic"))
			reqs = append(reqs, req(recs...))
		}
		chs := h.enqueueInOrder(t, reqs...)
		h.w.Flush(context.Background())
		sticky, other := int32(-1), int32(-1)
		for _, c := range chs {
			rs := mustOK(t, await(t, c)).Records
			for i, rr := range rs[:5] {
				if sticky == -1 {
					sticky = rr.Partition
				}
				if rr.Partition != sticky {
					t.Errorf("flush %d: unkeyed record %d in partition %d, others in %d", flush, i, rr.Partition, sticky)
				}
			}
			if rs[5].Partition != 6 { // (murmur2("foobar") & 0x7fffffff) % 8 = 1357151166 % 8
				t.Errorf("key foobar in partition %d, want 6", rs[5].Partition)
			}
			if other == -1 {
				other = rs[6].Partition
			}
			if rs[6].Partition != other || other < 0 || other >= 3 {
				t.Errorf("flush %d: other topic's unkeyed record in partition %d, want %d", flush, rs[6].Partition, other)
			}
		}
		if sticky == last {
			t.Errorf("flush %d: unkeyed records in partition %d again; sticky partitions rotate", flush, sticky)
		}
		last = sticky
	}
}

// Records of one request keep their order within each partition, one batch per
// (request, partition), and LogAppendTime records carry the writer's clock.
func TestOrderWithinRequest(t *testing.T) {
	now := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
	h := start(t, Config{Linger: never, Now: func() time.Time { return now }}, true)
	var recs []Record
	for i := range 10 {
		r := rec(1, 2, int32(i%2), "", fmt.Sprint("v", i))
		r.Timestamp = int64(1000 + i)
		recs = append(recs, r)
	}
	la := rec(2, 1, 0, "", "stamped")
	la.LogAppendTime = true
	la.Timestamp = 5
	recs = append(recs, la)
	other := h.enqueueInOrder(t, req(rec(1, 2, 1, "", "first")))
	chs := h.enqueueInOrder(t, req(recs...))
	h.w.Flush(context.Background())
	mustOK(t, await(t, other[0]))
	rs := mustOK(t, await(t, chs[0])).Records
	for i := range 10 {
		want := RecordResult{Partition: int32(i % 2), Offset: int64(i / 2)}
		if i%2 == 1 {
			want.Offset++ // after the other request's record
		}
		if rs[i] != want {
			t.Errorf("record %d at %+v, want %+v", i, rs[i], want)
		}
	}
	segs := h.cat.commitCalls()
	if len(segs) != 1 || len(segs[0].Requests) != 2 || len(segs[0].Requests[1].Batches) != 3 {
		t.Fatalf("commits %+v: want one, with the second request in 3 batches (one per partition)", segs)
	}
	if kt, err := segment.KeyTime(segs[0].Key); err != nil || !kt.Equal(now) {
		t.Errorf("key %s: time %v (%v), want the writer clock %v", segs[0].Key, kt, err, now)
	}
	for _, b := range segs[0].Requests[1].Batches {
		db := decodeAt(t, h.store, segs[0].Key, b.Pos, b.Len)
		if int32(len(db.Records)) != b.Records {
			t.Fatalf("batch holds %d records, commit says %d", len(db.Records), b.Records)
		}
		for j, r := range db.Records {
			var want string
			switch b.TopicID {
			case 1:
				want = fmt.Sprint("v", 2*j+int(b.Partition))
			case 2:
				want = "stamped"
				if r.Timestamp != now.UnixMilli() || !db.LogAppendTime || b.MaxTimestamp != now.UnixMilli() {
					t.Errorf("LogAppendTime record: timestamp %d (batch flag %v, max %d), want %d", r.Timestamp, db.LogAppendTime, b.MaxTimestamp, now.UnixMilli())
				}
			}
			if string(r.Value) != want || r.Offset != int64(j) {
				t.Errorf("topic %d partition %d: record %d is %q at delta %d, want %q", b.TopicID, b.Partition, j, r.Value, r.Offset, want)
			}
		}
	}
}

// Idempotent requests carry their producer and base sequences into the batches and the
// commit; a duplicate answer passes through.
func TestIdempotentRequest(t *testing.T) {
	h := start(t, Config{Linger: never}, true)
	prod := &catalog.Producer{ID: 42, Epoch: 3}
	r := Request{
		Records:   []Record{rec(1, 8, 2, "", "a"), rec(1, 8, -1, "foobar", "b")}, // foobar: 1357151166 % 8 = 6
		Producer:  prod,
		Sequences: map[TopicPartition]int32{{1, 2}: 10, {1, 6}: 20},
		GroupOffsets: &catalog.OffsetCommit{Group: "g", MemberID: "m", MemberEpoch: 4,
			Offsets: []catalog.CommitOffset{{Topic: "in", Partition: 1, Offset: 9}}},
	}
	chs := h.enqueueInOrder(t, r)
	h.w.Flush(context.Background())
	mustOK(t, await(t, chs[0]))
	seg := h.cat.commitCalls()[0]
	cr := seg.Requests[0]
	if cr.Producer != prod || len(cr.Batches) != 2 || cr.Batches[0].BaseSequence != 10 || cr.Batches[1].BaseSequence != 20 {
		t.Fatalf("commit request %+v: want producer 42/3 and sequences 10, 20", cr)
	}
	if cr.GroupOffsets != r.GroupOffsets {
		t.Fatalf("commit request group offsets %+v, want the request's, in the same commit", cr.GroupOffsets)
	}
	db := decodeAt(t, h.store, seg.Key, cr.Batches[1].Pos, cr.Batches[1].Len)
	if db.ProducerID != 42 || db.ProducerEpoch != 3 || db.BaseSequence != 20 {
		t.Errorf("batch producer %d/%d sequence %d, want 42/3 and 20", db.ProducerID, db.ProducerEpoch, db.BaseSequence)
	}
}

// A connector's source offsets ride with their records into the same commit.
func TestSourceOffsetsRequest(t *testing.T) {
	h := start(t, Config{Linger: never}, true)
	src := &catalog.SourceCommit{Fence: catalog.TaskFence{Connector: "c", Task: 1, Generation: 7},
		Offsets: []catalog.SourceOffset{{Partition: `{"file":"a"}`, Offset: `{"position":10}`}}}
	chs := h.enqueueInOrder(t, Request{Records: []Record{rec(1, 1, 0, "", "a")}, Source: src}, req(rec(1, 1, 0, "", "b")))
	h.w.Flush(context.Background())
	mustOK(t, await(t, chs[0]))
	mustOK(t, await(t, chs[1]))
	seg := h.cat.commitCalls()[0]
	if len(seg.Requests) != 2 || seg.Requests[0].Source != src || seg.Requests[1].Source != nil {
		t.Fatalf("commit requests %+v: want the first to carry its source offsets, the second none", seg.Requests)
	}
}

// A waiter whose context ends gets ctx.Err; its request still commits.
func TestWaiterContextEnds(t *testing.T) {
	h := start(t, Config{Linger: never}, true)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := h.w.Produce(ctx, req(rec(1, 1, 0, "", "a")))
		errc <- err
	}()
	testwait.Until(t, 20*time.Second, "buffered", func() bool { return h.w.bufferedRequests() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Produce = %v, want context.Canceled", err)
	}
	h.w.Flush(context.Background())
	if hw := h.cat.highWatermark(1, 0); hw != 1 {
		t.Errorf("high watermark %d, want 1: the abandoned request still commits", hw)
	}
}

// Uploads of consecutive flushes overlap, yet commits run one at a time in flush order:
// flush i's request gets offset i whatever order the uploads finish in.
func TestCommitsInFlushOrder(t *testing.T) {
	one := req(rec(1, 1, 0, "", "00"))
	p, _ := New(newMemStore(), newFakeCatalog(t, nil), Config{}, nil, nil).prepare(one)
	h := start(t, Config{Linger: never, MaxFlushBytes: p.size, MaxInflight: 4}, true)
	secondStarted := make(chan struct{})
	h.store.block = func(n int) {
		switch n {
		case 1: // the first upload finishes only once a later one has started
			select {
			case <-secondStarted:
			case <-time.After(10 * time.Second):
			}
		case 2:
			close(secondStarted)
		}
	}
	h.store.delay = func(n int) time.Duration { return time.Duration(rand.IntN(8)) * time.Millisecond }
	h.cat.commitDelay = func(int) time.Duration { return time.Duration(rand.IntN(2)) * time.Millisecond }
	const n = 30
	var chs []chan outcome
	for i := range n {
		chs = append(chs, h.enqueueInOrder(t, req(rec(1, 1, 0, "", fmt.Sprintf("%02d", i))))...)
	}
	for i, c := range chs {
		if got := mustOK(t, await(t, c)).Records[0].Offset; got != int64(i) {
			t.Errorf("flush %d committed at offset %d: commits out of flush order", i, got)
		}
	}
	if _, _, maxIn := h.store.counts(); maxIn < 2 {
		t.Errorf("at most %d uploads at once, want overlap", maxIn)
	}
	if h.cat.overlap {
		t.Error("two commits ran at once")
	}
	if len(h.cat.commitCalls()) != n {
		t.Errorf("%d commits, want %d", len(h.cat.commitCalls()), n)
	}
}

// However many requests and partitions a flush holds, it makes one PUT and one commit.
func TestOnePutOneCommitPerFlush(t *testing.T) {
	t.Run("one flush", func(t *testing.T) {
		h := start(t, Config{Linger: never}, true)
		const n = 200
		var chs []chan outcome
		for i := range n {
			chs = append(chs, h.produceAsync(req(
				rec(int64(1+i%3), 16, int32(i%16), "", "a"),
				rec(int64(1+i%3), 16, -1, fmt.Sprint("key", i), "b"))))
		}
		testwait.Until(t, 20*time.Second, "every request buffered", func() bool { return h.w.bufferedRequests() == n })
		h.w.Flush(context.Background())
		for _, c := range chs {
			mustOK(t, await(t, c))
		}
		puts, _, _ := h.store.counts()
		segs := h.cat.commitCalls()
		if puts != 1 || len(segs) != 1 || len(segs[0].Requests) != n {
			t.Fatalf("%d puts, %d commits; want 1 and 1 with %d requests", puts, len(segs), n)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		h := start(t, Config{Linger: time.Millisecond, MaxFlushBytes: 4 << 10, MaxInflight: 3}, true)
		h.store.delay = func(int) time.Duration { return time.Duration(rand.IntN(3)) * time.Millisecond }
		const producers, each, topics, parts = 16, 25, 3, 8
		got := make(map[RecordResult]int) // per topic below
		var mu sync.Mutex
		var wg sync.WaitGroup
		for g := range producers {
			wg.Go(func() {
				for i := range each {
					topic := int64(1 + (g+i)%topics)
					r := req(rec(topic, parts, int32(i%parts), "", "a"), rec(topic, parts, -1, "", "b"), rec(topic, parts, -1, fmt.Sprint(g, i), "c"))
					resp, err := h.w.Produce(context.Background(), r)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, rr := range resp.Records {
						got[RecordResult{Partition: int32(topic)*100 + rr.Partition, Offset: rr.Offset}]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		// Offsets are dense and given once: every partition holds 0..hw-1.
		total := 0
		for topic := int64(1); topic <= topics; topic++ {
			for part := range int32(parts) {
				hw := h.cat.highWatermark(topic, part)
				for off := range hw {
					if c := got[RecordResult{int32(topic)*100 + part, off}]; c != 1 {
						t.Errorf("topic %d partition %d offset %d answered %d times", topic, part, off, c)
					}
				}
				total += int(hw)
			}
		}
		if total != producers*each*3 || len(got) != total {
			t.Errorf("%d offsets assigned, %d answered; want %d", total, len(got), producers*each*3)
		}
		puts, _, _ := h.store.counts()
		commits := len(h.cat.commitCalls())
		flushes := int(metricValue(t, h.w.m.flushes))
		if flushes != puts || puts != commits || commits >= producers*each {
			t.Errorf("%d flushes, %d puts, %d commits for %d requests: want one put and one commit per flush, fewer flushes than requests", flushes, puts, commits, producers*each)
		}
		if got := metricValue(t, h.w.m.commits.WithLabelValues("ok")); int(got) != commits {
			t.Errorf("commits{ok} = %v, want %d", got, commits)
		}
	})
}

// Flush without Run: the mode of cloud functions, one request per invocation. Flush
// returns only once the request is answered.
func TestFlushWithoutRun(t *testing.T) {
	h := start(t, Config{}, false)
	p := h.enqueueRaw(t, req(rec(1, 1, 0, "", "a")))
	if err := h.w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil || p.resp.Records[0].Offset != 0 {
			t.Fatalf("answer %+v, %v; want offset 0", p.resp, p.err)
		}
	default:
		t.Fatal("Flush returned before the request was answered")
	}
	if err := h.w.Flush(context.Background()); err != nil {
		t.Errorf("Flush with nothing buffered = %v", err)
	}
}

func TestRunTwice(t *testing.T) {
	h := start(t, Config{}, true)
	testwait.Until(t, 20*time.Second, "Run to start", func() bool {
		h.w.mu.Lock()
		defer h.w.mu.Unlock()
		return h.w.running
	})
	if err := h.w.Run(context.Background()); err == nil {
		t.Error("a second Run was accepted")
	}
}
