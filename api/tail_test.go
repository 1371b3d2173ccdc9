package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

type sseEvent struct {
	id, event, data string
	comments        []string
}

// readEvent reads one SSE block (up to a blank line).
func readEvent(br *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return ev, nil
		case strings.HasPrefix(line, ":"):
			ev.comments = append(ev.comments, strings.TrimSpace(line[1:]))
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			if ev.data != "" {
				return ev, fmt.Errorf("multi-line data %q: records must fit one line", line)
			}
			ev.data = line[6:]
		default:
			return ev, fmt.Errorf("unexpected line %q", line)
		}
	}
}

// nextRecordEvent skips comment blocks.
func nextRecordEvent(t *testing.T, br *bufio.Reader) sseEvent {
	t.Helper()
	for {
		ev, err := readEvent(br)
		if err != nil {
			t.Fatalf("read event: %v", err)
		}
		if ev.id != "" || ev.event != "" || ev.data != "" {
			return ev
		}
	}
}

// tailServer serves e over a real connection and tracks handlers still running, so a
// test can prove a tail ends when its client goes away.
type tailServer struct {
	*httptest.Server
	active sync.WaitGroup
}

func newTailServer(t *testing.T, e *testEnv) *tailServer {
	ts := &tailServer{}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.active.Add(1)
		defer ts.active.Done()
		e.h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tailServer) open(t *testing.T, ctx context.Context, path string, headers ...header) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for _, h := range headers {
		req.Header.Set(h.k, h.v)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

// waitHandlersDone fails the test if the handlers do not return once the client left.
func (ts *tailServer) waitHandlersDone(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { ts.active.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the tail handler did not end after its client went away")
	}
}

func produceN(t *testing.T, e *testEnv, topic string, from, n int) {
	t.Helper()
	var recs []string
	for i := from; i < from+n; i++ {
		recs = append(recs, fmt.Sprintf(`{"key":"k%d","value":{"n":%d}}`, i, i))
	}
	rec := e.do("POST", "/v1/topics/"+topic+"/records", `{"records":[`+strings.Join(recs, ",")+`]}`)
	if rec.Code != 200 {
		t.Fatalf("produce: %d %s", rec.Code, rec.Body)
	}
}

func wantRecordEvent(t *testing.T, ev sseEvent, offset int) {
	t.Helper()
	want := fmt.Sprintf(`{"offset":%d,"timestamp":1700000000000,"key":"k%d","value":{"n":%d},"headers":[]}`, offset, offset, offset)
	if ev.id != fmt.Sprint(offset) || ev.event != "" || ev.data != want {
		t.Fatalf("event id %q event %q data %s, want id %d data %s", ev.id, ev.event, ev.data, offset, want)
	}
}

func TestTailEventsInOrder(t *testing.T) {
	e := newEnv(t, Config{HeartbeatInterval: time.Minute})
	e.createTopic("t", 1, nil)
	produceN(t, e, "t", 0, 3)
	ts := newTailServer(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, br := ts.open(t, ctx, "/v1/topics/t/partitions/0/records?offset=0&max_records=2")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	for i := 0; i < 3; i++ {
		wantRecordEvent(t, nextRecordEvent(t, br), i)
	}
	// Records produced while the tail waits arrive as they commit.
	produceN(t, e, "t", 3, 2)
	wantRecordEvent(t, nextRecordEvent(t, br), 3)
	wantRecordEvent(t, nextRecordEvent(t, br), 4)

	cancel()
	ts.waitHandlersDone(t)
}

func TestTailHeartbeat(t *testing.T) {
	e := newEnv(t, Config{HeartbeatInterval: 5 * time.Millisecond})
	e.createTopic("t", 1, nil)
	ts := newTailServer(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, br := ts.open(t, ctx, "/v1/topics/t/partitions/0/records")
	heartbeats := 0
	for heartbeats < 3 {
		ev, err := readEvent(br)
		if err != nil {
			t.Fatal(err)
		}
		if ev.id != "" || ev.data != "" {
			t.Fatalf("unexpected event %+v on an empty partition", ev)
		}
		for _, c := range ev.comments {
			if c == "heartbeat" {
				heartbeats++
			}
		}
	}
	// A record still arrives between heartbeats.
	produceN(t, e, "t", 0, 1)
	wantRecordEvent(t, nextRecordEvent(t, br), 0)
	cancel()
	ts.waitHandlersDone(t)
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	for _, w := range e.c.fetchWaits {
		if w != 5*time.Millisecond {
			t.Fatalf("tail fetched with wait %v, want the heartbeat interval", w)
		}
	}
}

func TestTailResume(t *testing.T) {
	e := newEnv(t, Config{HeartbeatInterval: time.Minute})
	e.createTopic("t", 1, nil)
	produceN(t, e, "t", 0, 5)
	ts := newTailServer(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Last-Event-ID overrides ?offset and resumes after the id.
	_, br := ts.open(t, ctx, "/v1/topics/t/partitions/0/records?offset=0", header{"Last-Event-ID", "2"})
	wantRecordEvent(t, nextRecordEvent(t, br), 3)
	wantRecordEvent(t, nextRecordEvent(t, br), 4)

	// Without an offset a tail starts at the end: only new records.
	_, br2 := ts.open(t, ctx, "/v1/topics/t/partitions/0/records", header{"Accept", "text/html, text/event-stream;q=0.9"})
	produceN(t, e, "t", 5, 1)
	wantRecordEvent(t, nextRecordEvent(t, br2), 5)
	wantRecordEvent(t, nextRecordEvent(t, br), 5)
	cancel()
	ts.waitHandlersDone(t)
}

func TestTailErrors(t *testing.T) {
	e := newEnv(t, Config{HeartbeatInterval: time.Minute})
	e.createTopic("t", 1, nil)
	produceN(t, e, "t", 0, 2)

	wantProblem(t, e.do("GET", "/v1/topics/t/partitions/0/records", "", header{"Accept", "text/event-stream"}, header{"Last-Event-ID", "abc"}), 400, CodeInvalidOffset)
	wantProblem(t, e.do("GET", "/v1/topics/t/partitions/0/records?offset=x", "", header{"Accept", "text/event-stream"}), 400, CodeInvalidOffset)
	wantProblem(t, e.do("GET", "/v1/topics/t/partitions/7/records", "", header{"Accept", "text/event-stream"}), 404, CodePartitionOutOfRange)

	// Once streaming, a refusal is an error event that ends the stream.
	ts := newTailServer(t, e)
	_, br := ts.open(t, context.Background(), "/v1/topics/t/partitions/0/records", header{"Last-Event-ID", "9"})
	ev := nextRecordEvent(t, br)
	if ev.event != "error" {
		t.Fatalf("event %+v, want an error event", ev)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(ev.data), &p); err != nil {
		t.Fatal(err)
	}
	if p["code"] != string(CodeOffsetOutOfRange) || p["high_watermark"] != float64(2) || p["log_start_offset"] != float64(0) {
		t.Errorf("error event %s", ev.data)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after the error event: %q %v", rest, err)
	}
}

// A stream past the cap is refused before its topic is looked up in the catalog: behind
// a busy catalog (every loop of hundreds of admitted streams reads it) a refusal that
// first waited for a catalog connection took longer than clients wait.
func TestStreamCapBeforeCatalog(t *testing.T) {
	e := newEnv(t, Config{MaxStreams: 1, HeartbeatInterval: time.Minute}, func(d *testDeps) { d.TopicTTL = -1 })
	e.createTopic("t", 1, nil)
	ts := newTailServer(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if resp, _ := ts.open(t, ctx, "/v1/topics/t/partitions/0/records"); resp.StatusCode != 200 {
		t.Fatalf("first stream: %d", resp.StatusCode)
	}
	topicReads := func() int { e.c.mu.Lock(); defer e.c.mu.Unlock(); return e.c.topicReads }
	before := topicReads()
	rec := e.do("GET", "/v1/topics/t/partitions/0/records", "", header{"Accept", "text/event-stream"})
	if rec.Code != 429 || !strings.Contains(rec.Body.String(), `"concurrency_limit"`) {
		t.Fatalf("second stream: %d %s, want 429 concurrency_limit", rec.Code, rec.Body)
	}
	if n := topicReads() - before; n != 0 {
		t.Fatalf("the refusal read the topic %d times, want none", n)
	}
	// A malformed wait_ms is still refused as such.
	if rec := e.do("GET", "/v1/topics/t/partitions/0/records?wait_ms=x", ""); rec.Code != 400 || !strings.Contains(rec.Body.String(), "wait_ms") {
		t.Fatalf("wait_ms=x: %d %s", rec.Code, rec.Body)
	}
	cancel()
	ts.waitHandlersDone(t)
}

// A fetch that answers with no record but moves past a transaction marker (or a
// compacted gap) is followed at once by the next: the tail does not sit out its
// heartbeat interval before showing the record committed after the marker.
func TestTailPastMarkerAtOnce(t *testing.T) {
	e := newEnv(t, Config{HeartbeatInterval: time.Hour})
	e.createTopic("t", 1, nil)
	produceN(t, e, "t", 0, 1)
	e.c.appendMarker("t", 0)
	produceN(t, e, "t", 2, 1)
	ts := newTailServer(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, br := ts.open(t, ctx, "/v1/topics/t/partitions/0/records?offset=0")
	wantRecordEvent(t, nextRecordEvent(t, br), 0)
	// Without the fix the tail slept the hour's heartbeat interval here and the read
	// failed when ctx ended.
	wantRecordEvent(t, nextRecordEvent(t, br), 2)
	cancel()
	ts.waitHandlersDone(t)
}
