package kafka

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/membudget"
)

// A frame is reserved in the node's memory budget before its body is read: with the
// budget spent the connection is not read further (its request waits, unanswered);
// once there is room it is answered, and its reservation goes with the answer.
func TestFrameMemory(t *testing.T) {
	fc := newFakeCluster(catalog.Node{ID: 0, Addr: "127.0.0.1:9092"})
	mem := membudget.New(64<<10, nil)
	s, err := New(Config{}, Deps{Core: fc.core(), Membership: fc, Self: fixedSelf(fc.nodes[0]), Memory: mem}, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()

	if !mem.TryReserve(mem.Limit(), membudget.UseProduce) { // someone else holds it all
		t.Fatal("could not take the budget")
	}
	c := dial(t, ln.Addr().String())
	req := kmsg.NewPtrApiVersionsRequest()
	corr := c.send(req, 3)
	answered := make(chan kmsg.Response, 1)
	go func() { answered <- c.recv(req, corr) }()
	select {
	case <-answered:
		t.Fatal("a frame was read and answered with no room in the budget")
	case <-time.After(1500 * time.Millisecond):
	}
	mem.Release(mem.Limit())
	select {
	case resp := <-answered:
		if resp.(*kmsg.ApiVersionsResponse).ErrorCode != 0 {
			t.Fatalf("answer: %+v", resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer once there was room")
	}
	deadline := time.Now().Add(5 * time.Second)
	for mem.Used() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still reserved after the answer", mem.Used())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if mem.Peak() > mem.Limit() || mem.Overreleased() != 0 {
		t.Fatalf("peak %d, overreleased %d", mem.Peak(), mem.Overreleased())
	}
}
