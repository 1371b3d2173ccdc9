package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/writer"
)

// blockingWriter holds every produce until release is closed.
type blockingWriter struct {
	Writer
	entered chan struct{}
	release chan struct{}
}

func (w *blockingWriter) Produce(ctx context.Context, req writer.Request) (writer.Response, error) {
	w.entered <- struct{}{}
	<-w.release
	return w.Writer.Produce(ctx, req)
}

// watchedBody reports whether anything read it.
type watchedBody struct {
	io.Reader
	read atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.Reader.Read(p)
}

func TestAdmissionRefusesBeforeReading(t *testing.T) {
	bw := &blockingWriter{entered: make(chan struct{}, 4), release: make(chan struct{})}
	e := newEnv(t, Config{MaxInflightProduceBytes: 1000}, func(d *testDeps) {
		bw.Writer = d.Writer
		d.Writer = bw
	})
	e.createTopic("t", 1, nil)
	body := `{"records":[{"value":"` + strings.Repeat("x", 600) + `"}]}`
	send := func(b io.Reader, n int64) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/topics/t/records", b)
		req.ContentLength = n
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		return rec
	}
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- send(strings.NewReader(body), int64(len(body))) }()
	select {
	case <-bw.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the first produce never reached the writer")
	}
	// The first holds ~630 bytes of 1000: a second of the same size must wait, and is
	// refused without its body being read.
	wb := &watchedBody{Reader: strings.NewReader(body)}
	rec := send(wb, int64(len(body)))
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "buffer_full") || rec.Header().Get("Retry-After") == "" {
		t.Errorf("second produce: HTTP %d %s", rec.Code, rec.Body)
	}
	if wb.read.Load() {
		t.Error("a refused body was read")
	}
	// A body of unknown length counts as the largest allowed.
	if rec := send(strings.NewReader(body), -1); rec.Code != http.StatusTooManyRequests {
		t.Errorf("chunked produce while full: HTTP %d", rec.Code)
	}
	close(bw.release)
	if rec := <-first; rec.Code != 200 {
		t.Fatalf("first produce: HTTP %d %s", rec.Code, rec.Body)
	}
	// Released: the same request is admitted now, and one larger than the whole limit
	// too when nothing else is held.
	if rec := send(strings.NewReader(body), int64(len(body))); rec.Code != 200 {
		t.Errorf("retry: HTTP %d %s", rec.Code, rec.Body)
	}
	big := `{"records":[{"value":"` + strings.Repeat("y", 3000) + `"}]}`
	if rec := send(strings.NewReader(big), int64(len(big))); rec.Code != 200 {
		t.Errorf("a body over the limit, alone: HTTP %d %s", rec.Code, rec.Body)
	}
	if held := e.api.admission.held; held != 0 {
		t.Errorf("%d bytes still held after every request ended", held)
	}
}
