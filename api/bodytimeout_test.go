package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/writer"
)

// TestBodyTimeout: a client that sends its headers and part of its body, then stalls,
// gets 408 request_timeout and writes nothing; a body that arrives in time is not
// cut short while its produce then waits for its flush longer than the timeout.
func TestBodyTimeout(t *testing.T) {
	bw := &ctxWriter{entered: make(chan struct{}, 4), release: make(chan struct{})}
	e := newEnv(t, Config{BodyTimeout: 300 * time.Millisecond}, func(d *testDeps) {
		bw.Writer = d.Writer
		d.Writer = bw
	})
	e.createTopic("t", 1, nil)
	srv := httptest.NewServer(e.h)
	defer srv.Close()

	t.Run("stalled body", func(t *testing.T) {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"records\":[")
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a stalled body: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), `"request_timeout"`) {
			t.Errorf("HTTP %d %s, want 408 request_timeout", resp.StatusCode, b)
		}
		select {
		case <-bw.entered:
			t.Error("a stalled body reached the writer")
		default:
		}
	})

	t.Run("slow flush after the body", func(t *testing.T) {
		done := make(chan *http.Response, 1)
		go func() {
			resp, err := http.Post(srv.URL+"/v1/topics/t/records", "application/json", strings.NewReader(`{"records":[{"value":1}]}`))
			if err != nil {
				t.Errorf("produce: %v", err)
			}
			done <- resp
		}()
		<-bw.entered
		time.Sleep(600 * time.Millisecond) // twice the body timeout, waiting for the "flush"
		close(bw.release)
		resp := <-done
		if resp == nil {
			return
		}
		defer resp.Body.Close()
		var out struct {
			Offsets []struct{ Offset int64 } `json:"offsets"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Offsets) != 1 {
			t.Errorf("produce that waited past the body timeout: HTTP %d, %+v, %v", resp.StatusCode, out, err)
		}
	})
}

// ctxWriter holds every produce until release is closed, and fails it if its request
// context ended meanwhile (as a writer waiting for its flush would).
type ctxWriter struct {
	Writer
	entered chan struct{}
	release chan struct{}
}

func (w *ctxWriter) Produce(ctx context.Context, req writer.Request) (writer.Response, error) {
	w.entered <- struct{}{}
	<-w.release
	if err := ctx.Err(); err != nil {
		return writer.Response{}, fmt.Errorf("the request context ended while waiting for the flush: %w", err)
	}
	return w.Writer.Produce(ctx, req)
}

// TestMalformedQuery: bad percent-encoding in the query is refused, not read as "no
// parameter" (which would fetch from the earliest offset).
func TestMalformedQuery(t *testing.T) {
	e := newEnv(t, Config{})
	e.createTopic("t", 1, nil)
	for _, path := range []string{
		"/v1/topics/t/partitions/0/records?offset=%zz",
		"/v1/topics/t/partitions/0/records?offset=0&max_records=%",
		"/v1/topics?x=%g0",
	} {
		rec := e.do("GET", path, "")
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"invalid_parameter"`) {
			t.Errorf("GET %s: HTTP %d %s, want 400 invalid_parameter", path, rec.Code, rec.Body)
		}
	}
	if rec := e.do("GET", "/v1/topics/t/partitions/0/records?offset=0", ""); rec.Code != 200 {
		t.Errorf("a well-formed query: HTTP %d %s", rec.Code, rec.Body)
	}
}
