package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestReadEvents(t *testing.T) {
	in := ": keep-alive\n" +
		"id: 1\nevent: record\ndata: {\"a\":\ndata: 1}\n\n" +
		"data:x\r\n\r\n" +
		"retry: 250\n\n" +
		"event: ping\n\n" + // no data, no id: not dispatched
		"id: 2\ndata\n\n" +
		"data: tail without blank line"
	var got []event
	if err := readEvents(strings.NewReader(in), func(e event) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []event{
		{id: "1", name: "record", data: []byte("{\"a\":\n1}")},
		{data: []byte("x")},
		{retry: 250 * time.Millisecond, data: []byte{}},
		{id: "2", data: []byte{}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].id != want[i].id || got[i].name != want[i].name || string(got[i].data) != string(want[i].data) || got[i].retry != want[i].retry {
			t.Errorf("event %d = %+v (%q), want %+v (%q)", i, got[i], got[i].data, want[i], want[i].data)
		}
	}
	stop := errors.New("stop")
	if err := readEvents(strings.NewReader("data: 1\n\ndata: 2\n\n"), func(event) error { return stop }); err != stop {
		t.Errorf("fn error = %v, want it returned", err)
	}
}

func TestDecodeEventRecords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int64
	}{
		{`{"offset":3,"value":1}`, []int64{3}},
		{`[{"offset":3},{"offset":4}]`, []int64{3, 4}},
		{`{"records":[{"offset":5},{"offset":6}],"next_offset":7}`, []int64{5, 6}},
	} {
		rs, err := decodeEventRecords([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		var got []int64
		for _, r := range rs {
			got = append(got, r.Offset)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: offsets %v, want %v", tc.in, got, tc.want)
		}
	}
	if _, err := decodeEventRecords([]byte(`{"offset":"x"}`)); err == nil {
		t.Error("bad record decoded")
	}
}

// sseServer serves a partition's records 0..n-1 over SSE, one event per record. Each
// connection sends at most perConn events and then drops (a flaky network), and the
// first event of every resumed connection repeats the last one already sent, to prove
// the client delivers each offset once.
type sseServer struct {
	mu       sync.Mutex
	n        int64
	perConn  int
	lastIDs  []string // Last-Event-ID per connection
	offsets  []string // ?offset= per connection
	statuses []int    // canned statuses to answer first, one per connection
}

func (s *sseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.lastIDs = append(s.lastIDs, r.Header.Get("Last-Event-ID"))
	s.offsets = append(s.offsets, r.URL.Query().Get("offset"))
	var status int
	if len(s.statuses) > 0 {
		status, s.statuses = s.statuses[0], s.statuses[1:]
	}
	s.mu.Unlock()
	if status != 0 {
		problemAnswer(w, status, "canned", "canned answer", "0")
		return
	}
	if r.Header.Get("Accept") != "text/event-stream" {
		problemAnswer(w, 406, "not_acceptable", "want SSE", "")
		return
	}
	from, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		last, _ := strconv.ParseInt(id, 10, 64)
		from = last // replay the last one: the client must drop it
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	fmt.Fprint(w, ": hello\n\nevent: heartbeat\ndata: {}\n\n")
	sent := 0
	for o := from; o < s.n && sent < s.perConn; o++ {
		fmt.Fprintf(w, "id: %d\nevent: record\ndata: {\"offset\":%d,\"key\":\"k\",\"value\":%d}\n\n", o, o, o)
		sent++
	}
	fl.Flush()
	if from+int64(sent) >= s.n {
		<-r.Context().Done() // caught up: hold the stream open like a real tail
	}
}

func TestTailResumes(t *testing.T) {
	s := &sseServer{n: 10, perConn: 4, statuses: []int{503}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := New(srv.URL)
	var slept []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return ctx.Err() }

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got []int64
	var retries []error
	done := errors.New("done")
	onRetry := func(err error, wait time.Duration) { retries = append(retries, err) }
	err := c.TailWith(ctx, "t", 1, 2, TailOptions{OnRetry: onRetry}, func(r Record) error {
		if *r.Partition != 1 {
			t.Errorf("record partition %d, want 1", *r.Partition)
		}
		if string(r.Value) != strconv.FormatInt(r.Offset, 10) {
			t.Errorf("offset %d has value %s", r.Offset, r.Value)
		}
		got = append(got, r.Offset)
		if r.Offset == 9 {
			return done
		}
		return nil
	})
	if err != done {
		t.Fatalf("Tail = %v, want fn's error back unchanged", err)
	}
	if want := []int64{2, 3, 4, 5, 6, 7, 8, 9}; !reflect.DeepEqual(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// 1: the canned 503; 2: from 2, sends 2-5; 3: resumes after 5, replays 5, sends 5-8;
	// 4: resumes after 8.
	if want := []string{"", "", "5", "8"}; !reflect.DeepEqual(s.lastIDs, want) {
		t.Errorf("Last-Event-ID per connection = %q, want %q", s.lastIDs, want)
	}
	if want := []string{"2", "2", "6", "9"}; !reflect.DeepEqual(s.offsets, want) {
		t.Errorf("offset per connection = %q, want %q", s.offsets, want)
	}
	if len(slept) != 3 {
		t.Errorf("slept %v: want one wait per reconnect", slept)
	}
	if len(retries) != 3 || StatusOf(retries[0]) != 503 {
		t.Errorf("OnRetry saw %v: want the 503, then two broken streams", retries)
	}
}

func TestTailStops(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		s := &sseServer{n: 1, perConn: 1, statuses: []int{404}}
		srv := httptest.NewServer(s)
		defer srv.Close()
		err := New(srv.URL).Tail(t.Context(), "t", 0, 0, func(Record) error { return nil })
		if StatusOf(err) != 404 || !HasCode(err, "canned") {
			t.Errorf("Tail on 404 = %v, want the *Error", err)
		}
	})
	t.Run("error event", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: error\ndata: {\"status\":416,\"code\":\"offset_out_of_range\",\"detail\":\"gone\"}\n\n")
		}))
		defer srv.Close()
		err := New(srv.URL).Tail(t.Context(), "t", 0, 0, func(Record) error { return nil })
		if StatusOf(err) != 416 || !HasCode(err, "offset_out_of_range") {
			t.Errorf("Tail on error event = %v", err)
		}
	})
	t.Run("not SSE", func(t *testing.T) {
		srv := httptest.NewServer(jsonAnswer(`{"records":[]}`))
		defer srv.Close()
		err := New(srv.URL).Tail(t.Context(), "t", 0, 0, func(Record) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "not text/event-stream") {
			t.Errorf("Tail = %v, want a refusal naming the content type", err)
		}
	})
	t.Run("cancel while caught up", func(t *testing.T) {
		s := &sseServer{n: 2, perConn: 10}
		srv := httptest.NewServer(s)
		defer srv.Close()
		ctx, cancel := context.WithCancel(t.Context())
		n := 0
		err := New(srv.URL).Tail(ctx, "t", 0, 0, func(Record) error {
			if n++; n == 2 {
				cancel()
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) || n != 2 {
			t.Errorf("Tail = %v after %d records", err, n)
		}
	})
}

// A stream that goes silent without closing (a dropped connection) is abandoned after
// IdleTimeout and resumed where it was.
func TestTailIdleReconnect(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns++
		n := conns
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		fmt.Fprintf(w, "id: %d\ndata: {\"offset\":%d}\n\n", off, off)
		w.(http.Flusher).Flush()
		if n == 1 {
			<-r.Context().Done() // silent, never closing: only the idle timeout ends it
		}
	}))
	defer srv.Close()
	var got []int64
	done := errors.New("done")
	err := New(srv.URL).TailWith(t.Context(), "t", 0, 7, TailOptions{IdleTimeout: 200 * time.Millisecond, MinBackoff: time.Millisecond}, func(r Record) error {
		got = append(got, r.Offset)
		if len(got) == 2 {
			return done
		}
		return nil
	})
	if err != done || !reflect.DeepEqual(got, []int64{7, 8}) {
		t.Errorf("Tail = %v, delivered %v; want 7 then 8 after an idle reconnect", err, got)
	}
}

func FuzzReadEvents(f *testing.F) {
	f.Add([]byte("id: 1\nevent: record\ndata: {\"offset\":1}\n\n"))
	f.Add([]byte("data: [{\"offset\":1},{\"offset\":2}]\r\n\r\n: c\nretry: 9\n\n"))
	f.Add([]byte("data: {\"records\":[{\"offset\":1,\"timestamp\":\"2026-01-01T00:00:00Z\",\"headers\":{\"a\":null}}]}\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = readEvents(strings.NewReader(string(b)), func(e event) error {
			rs, err := decodeEventRecords(e.data)
			if err != nil {
				return nil
			}
			for _, w := range rs {
				r, err := fetchedRecord(w, 0, false)
				if err != nil {
					continue
				}
				_, _ = r.KeyBytes()
				_, _ = r.ValueBytes()
				if _, err := r.MarshalJSON(); err != nil && r.Key != nil {
					// Keys and values came from valid JSON, so they re-encode.
					t.Fatalf("re-encode %+v: %v", r, err)
				}
			}
			return nil
		})
	})
}
