package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// A frame is reserved in the node's memory budget before its body is read: with the
// budget spent the connection is not read further (its request waits, unanswered);
// once there is room it is answered, and its reservation goes with the answer.
func TestFrameMemory(t *testing.T) {
	mem := membudget.New(64<<10, nil)
	s := startServer(t, Config{}, newFakeCluster(), func(d *Deps) { d.Memory = mem })

	if !mem.TryReserve(mem.Limit(), membudget.UseProduce) { // someone else holds it all
		t.Fatal("could not take the budget")
	}
	c := dial(t, s.addr)
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
	testwait.Until(t, 5*time.Second, "the answer's reservations released", func() bool { return mem.Used() == 0 })
	if mem.Peak() > mem.Limit() || mem.Overreleased() != 0 {
		t.Fatalf("peak %d, overreleased %d", mem.Peak(), mem.Overreleased())
	}
}
