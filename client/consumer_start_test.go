package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// lookupFailer is a member's transport that refuses the connection for the first n
// lookups of the group's committed offsets (GET /v1/groups/{g}/offsets), lets
// everything else through, and keeps the offsets of every commit the member sends.
type lookupFailer struct {
	n       int32
	failed  atomic.Int32
	mu      sync.Mutex
	commits []int64 // partition 0's committed offsets, in the order sent and accepted
}

func (f *lookupFailer) RoundTrip(r *http.Request) (*http.Response, error) {
	isOffsets := strings.HasSuffix(r.URL.Path, "/offsets") && strings.HasPrefix(r.URL.Path, "/v1/groups/")
	if isOffsets && r.Method == http.MethodGet && f.failed.Load() < f.n {
		f.failed.Add(1)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	var body []byte
	if isOffsets && r.Method == http.MethodPost {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && body != nil && resp.StatusCode == http.StatusOK {
		var in struct {
			Offsets []client.GroupOffset `json:"offsets"`
		}
		if json.Unmarshal(body, &in) == nil {
			f.mu.Lock()
			for _, o := range in.Offsets {
				f.commits = append(f.commits, o.Offset)
			}
			f.mu.Unlock()
		}
	}
	return resp, err
}

// TestConsumerNeverGuessesItsStart is the committed-offset regression of issue 13: a
// group whose committed offset is 4,667 on a 5,000-record partition, and a member whose
// lookups of it are refused N times. The member must start at 4,667 (never at the log
// start, which the old code took a failed lookup to mean) and every committed offset
// seen until 5,000 must be at least 4,667 and never decrease.
func TestConsumerNeverGuessesItsStart(t *testing.T) {
	srv := startServer(t, "")
	c := client.New(srv.URL)
	if _, err := c.CreateTopic(t.Context(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	produce(t, c, "t", 1, 5000)
	for _, n := range []int32{2, 6} {
		t.Run(fmt.Sprintf("lookups_refused_%d", n), func(t *testing.T) {
			group := fmt.Sprintf("g%d", n)
			if err := c.CommitOffsets(t.Context(), group, "", 0, []client.GroupOffset{{Topic: "t", Partition: 0, Offset: 4667}}); err != nil {
				t.Fatal(err)
			}
			ft := &lookupFailer{n: n}
			var (
				mu       sync.Mutex
				first    int64 = -1
				reported []error
			)
			startMember(t, client.New(srv.URL, client.WithHTTPClient(&http.Client{Transport: ft})), client.ConsumerConfig{
				Group: group, Topics: []string{"t"}, SessionTimeout: 5 * time.Second,
				AutoCommitInterval: 20 * time.Millisecond, MaxRecords: 200,
				OnError: func(err error) {
					mu.Lock()
					defer mu.Unlock()
					reported = append(reported, err)
				},
			}, func(_ context.Context, b client.Batch) error {
				mu.Lock()
				defer mu.Unlock()
				if first < 0 {
					first = b.Records[0].Offset
				}
				return nil
			})
			var observed []int64
			testwait.Until(t, 20*time.Second, "the group to commit 5,000", func() bool {
				offs, err := c.GroupOffsets(t.Context(), group)
				if err != nil || len(offs) != 1 {
					return false
				}
				observed = append(observed, offs[0].Offset)
				return offs[0].Offset == 5000
			})
			// The server may show the commit before its answer has come back through
			// the transport that records it.
			testwait.Until(t, 10*time.Second, "the member's commit of 5,000 to be answered", func() bool {
				ft.mu.Lock()
				defer ft.mu.Unlock()
				return len(ft.commits) > 0 && ft.commits[len(ft.commits)-1] == 5000
			})
			mu.Lock()
			defer mu.Unlock()
			if first != 4667 {
				t.Fatalf("the first record handed to the handler is offset %d, want 4667 (the committed offset)", first)
			}
			if got := ft.failed.Load(); got != n {
				t.Fatalf("%d lookups were refused, want %d: the test did not test", got, n)
			}
			ft.mu.Lock()
			commits := append([]int64(nil), ft.commits...)
			ft.mu.Unlock()
			for _, seq := range [][]int64{commits, observed} {
				for i, off := range seq {
					if off < 4667 || (i > 0 && off < seq[i-1]) {
						t.Fatalf("committed offsets went %v: below 4667 or backwards", seq)
					}
				}
			}
			if len(commits) == 0 {
				t.Fatal("the member committed nothing")
			}
			// The assignment's lookup failing is logged; each of the worker's own failed
			// lookups is reported, as the transport error it was.
			if len(reported) < int(n)-1 {
				t.Fatalf("OnError got %d errors for %d refused lookups: %v", len(reported), n, reported)
			}
			for _, err := range reported {
				if !errors.Is(err, syscall.ECONNREFUSED) {
					t.Fatalf("OnError got %v, want the refused connection", err)
				}
			}
			t.Logf("%d lookups refused: started at %d; commits sent %v", n, first, commits)
		})
	}
}

// TestConsumerSaysWhyItMakesNoProgress: a consumer of a topic that does not exist, and
// one whose server is down, keep retrying, tell OnError why they make no progress, and
// Run, stopped by its deadline, returns that reason instead of nil. A topic created
// later is consumed by the same consumer.
func TestConsumerSaysWhyItMakesNoProgress(t *testing.T) {
	srv := startServer(t, "")
	c := client.New(srv.URL)
	dead := httptestDeadURL(t)
	for _, tc := range []struct {
		name  string
		url   string
		check func(err error) bool
	}{
		{"unknown_topic", srv.URL, func(err error) bool { return client.HasCode(err, "topic_not_found") }},
		{"server_down", dead, func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu  sync.Mutex
				got []error
			)
			gc, err := client.NewConsumer(client.New(tc.url), client.ConsumerConfig{
				Group: "g-" + tc.name, Topics: []string{"nope"}, SessionTimeout: time.Second,
				OnError: func(err error) { mu.Lock(); got = append(got, err); mu.Unlock() },
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
			defer cancel()
			runErr := gc.Run(ctx, func(context.Context, client.Batch) error { return nil })
			mu.Lock()
			defer mu.Unlock()
			if len(got) < 2 || !tc.check(got[0]) {
				t.Fatalf("OnError got %v: want the reason, reported again as the consumer retries", got)
			}
			if runErr == nil || !tc.check(runErr) {
				t.Fatalf("Run at its deadline returned %v, want the reason it made no progress", runErr)
			}
			t.Logf("Run: %v", runErr)
		})
	}

	// Created after the consumer started, the topic is consumed: nothing was given up.
	rec := newRecorder()
	var reported atomic.Int32
	m := startMember(t, c, client.ConsumerConfig{Group: "g-late", Topics: []string{"late"}, SessionTimeout: time.Second,
		OnError: func(error) { reported.Add(1) }}, rec.handler("m", 0))
	testwait.Until(t, 5*time.Second, "the missing topic to be reported", func() bool { return reported.Load() > 0 })
	if _, err := c.CreateTopic(t.Context(), "late", 1, nil); err != nil {
		t.Fatal(err)
	}
	produce(t, c, "late", 1, 3)
	testwait.Until(t, 10*time.Second, "the late topic's records", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.seen[0]) == 3
	})
	m.stop(t) // Run returns nil: nothing is failing any more
}

// httptestDeadURL is the URL of a port nothing listens on.
func httptestDeadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}
