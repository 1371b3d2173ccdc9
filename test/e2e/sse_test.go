package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sseEvent is one Server-Sent Event as the wire carries it.
type sseEvent struct {
	id, name, data string
}

// sseStream is one tail connection, read on its own goroutine.
type sseStream struct {
	events chan sseEvent
	errc   chan error
	cancel context.CancelFunc
}

// openTail opens a tail of topic/partition with Accept: text/event-stream, sending
// Last-Event-ID when lastID is not empty, and returns once the server has sent its
// first line, so the tail's start position is fixed before the caller goes on.
func openTail(t *testing.T, base, topic string, partition int, query, lastID string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	u := fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records%s", base, topic, partition, query)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("open tail: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		cancel()
		t.Fatalf("open tail: HTTP %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sseStream{events: make(chan sseEvent, 1024), errc: make(chan error, 1), cancel: cancel}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), ":") {
		resp.Body.Close()
		cancel()
		t.Fatalf("open tail: the stream does not start with a comment line: %q %v", sc.Text(), sc.Err())
	}
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		var ev sseEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if len(data) > 0 {
					ev.data = strings.Join(data, "\n")
					select {
					case s.events <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev, data = sseEvent{}, nil
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				ev.id = line[len("id: "):]
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[len("data: "):])
			}
		}
		s.errc <- sc.Err()
	}()
	return s
}

// next returns the next record event, failing the test on an error event, a closed
// stream or a timeout.
func (s *sseStream) next(t *testing.T, timeout time.Duration) (int64, fetchedRecord) {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			t.Fatalf("tail closed: %v", <-s.errc)
		}
		if ev.name != "" {
			t.Fatalf("tail sent a %q event: %s", ev.name, ev.data)
		}
		id, err := strconv.ParseInt(ev.id, 10, 64)
		if err != nil {
			t.Fatalf("event id %q is not an offset", ev.id)
		}
		var r fetchedRecord
		if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
			t.Fatalf("event data %q: %v", ev.data, err)
		}
		return id, r
	case <-time.After(timeout):
		t.Fatalf("no event within %s", timeout)
	}
	panic("unreachable")
}

// TestTailResume: a tail opened before anything is produced sees every record once and
// in order; a tail dropped mid-stream and reopened with Last-Event-ID (and, to show
// that the header wins, ?offset=0) resumes right after the last event it received.
func TestTailResume(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			s := newStack(t, stackOptions{backend: backend})
			const topic, batches, perBatch = "tailed", 12, 40
			const total = batches * perBatch
			const dropAfter = total / 3
			createTopic(t, s.url, topic, 2, nil)

			full := openTail(t, s.url, topic, 0, "", "") // default: from the end, which is 0
			defer full.cancel()
			dropped := openTail(t, s.url, topic, 0, "", "")

			// Records to both partitions, so the tail must also skip what is not its own.
			produced := make(chan error, 1)
			go func() {
				defer close(produced)
				for b := range batches {
					recs := make([]map[string]any, 0, 2*perBatch)
					for i := range perBatch {
						n := b*perBatch + i
						recs = append(recs, map[string]any{"partition": 0, "value": map[string]any{"n": n}})
						recs = append(recs, map[string]any{"partition": 1, "value": map[string]any{"other": n}})
					}
					out, _, res, err := produceOnce(context.Background(), s.url, topic, produceBody(recs))
					if err != nil || out != acked {
						produced <- fmt.Errorf("batch %d: HTTP %d %s %v", b, res.status, res.body, err)
						return
					}
					time.Sleep(20 * time.Millisecond) // several flushes, so events arrive in several fetches
				}
			}()

			check := func(who string, got []int64, values []int) {
				t.Helper()
				for i := range got {
					if got[i] != int64(i) || values[i] != i {
						t.Fatalf("%s: event %d has id %d and value n=%d, want %d and %d (ids so far: %v)", who, i, got[i], values[i], i, i, tailOf(got, 5))
					}
				}
			}
			decodeN := func(r fetchedRecord) int {
				var v struct {
					N *int `json:"n"`
				}
				if json.Unmarshal(r.Value, &v) != nil || v.N == nil {
					t.Fatalf("record %d: value %s is not from partition 0", r.Offset, r.Value)
				}
				return *v.N
			}

			// The dropped tail: read a third, hang up while records are still coming,
			// reconnect with Last-Event-ID.
			var ids []int64
			var ns []int
			for len(ids) < dropAfter {
				id, r := dropped.next(t, 30*time.Second)
				if r.Offset != id {
					t.Fatalf("event id %d carries the record at offset %d", id, r.Offset)
				}
				ids, ns = append(ids, id), append(ns, decodeN(r))
			}
			dropped.cancel()
			lastID := strconv.FormatInt(ids[len(ids)-1], 10)
			resumed := openTail(t, s.url, topic, 0, "?offset=0", lastID)
			defer resumed.cancel()
			for len(ids) < total {
				id, r := resumed.next(t, 30*time.Second)
				ids, ns = append(ids, id), append(ns, decodeN(r))
			}
			check("resumed tail", ids, ns)

			// The tail that never broke.
			ids, ns = nil, nil
			for len(ids) < total {
				id, r := full.next(t, 30*time.Second)
				ids, ns = append(ids, id), append(ns, decodeN(r))
			}
			check("full tail", ids, ns)

			if err := <-produced; err != nil {
				t.Fatal(err)
			}
			// Nothing more may follow: a duplicate would arrive here.
			for _, st := range []*sseStream{full, resumed} {
				select {
				case ev, ok := <-st.events:
					if ok {
						t.Errorf("an event after the last record: id %s %s", ev.id, ev.data)
					}
				case <-time.After(300 * time.Millisecond):
				}
			}
		})
	}
}

func tailOf(s []int64, n int) []int64 {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
