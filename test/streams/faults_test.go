package streams

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/examples/retail/retail"
)

// carriesOutput says whether a records request writes the retail outputs.
func carriesOutput(body []byte) bool {
	return bytes.Contains(body, []byte(`"topic":"`+retail.Reorders+`"`)) || bytes.Contains(body, []byte(`"topic":"`+retail.PriceAdjustments+`"`))
}

// TestAtLeastOnceDuplicates is the comparison: at least once, an instance killed
// between producing its outputs and committing its offsets processes those inputs
// again, and its outputs are duplicated. The failpoint is a proxy that SIGKILLs the
// instance when it sends the offset commit that follows a produce carrying outputs.
func TestAtLeastOnceDuplicates(t *testing.T) {
	const kills = 3
	nd, c := setup(t, 20_000)
	var (
		mu     sync.Mutex
		armed  bool
		killed int
		in     *instance
	)
	died := make(chan struct{}, kills)
	px := newProxy(t, nd.url, func(method, path string, body []byte) verdict {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case method == "POST" && path == "/v1/records" && carriesOutput(body):
			armed = true
		case method == "POST" && path == "/v1/groups/retail/offsets" && armed && killed < kills:
			armed = false
			killed++
			in.p.kill()
			died <- struct{}{}
			return cut
		}
		return pass
	})
	mu.Lock()
	in = newInstance(t, px.url, "alos", append([]string{"--guarantee", "at-least-once"}, slow...)...)
	mu.Unlock()
	for range kills {
		select {
		case <-died:
		case <-time.After(2 * time.Minute):
			t.Fatal("the failpoint never fired")
		}
		mu.Lock()
		in.start() // same id and state directory
		mu.Unlock()
	}
	waitDrained(t, c, "retail", 5*time.Minute, in.p)
	in.p.stop(30 * time.Second)
	want := retail.Oracle(inputsBack(t, c), partitions)
	got, dupHeaders := outputsCounting(t, c)
	_, extra := compare(t, "reorders", got.Reorders, want.Reorders)
	_, extra2 := compare(t, "price adjustments", got.Adjustments, want.Adjustments)
	t.Logf("at least once, %d kills at the failpoint: %d duplicated outputs, %d repeated input positions", kills, extra+extra2, dupHeaders)
	if extra+extra2 == 0 || dupHeaders == 0 {
		t.Errorf("no duplicates after %d kills between produce and offset commit: the failpoint did not bite", kills)
	}
}

// TestAmbiguousCommit: a proxy loses the answer to a commit the server made. The
// runtime sends the same request again, the server answers it as a duplicate, the
// local store applies the batch once, and the outputs still equal the oracle.
func TestAmbiguousCommit(t *testing.T) {
	nd, c := setup(t, 20_000)
	var (
		mu     sync.Mutex
		seen   int
		lost   int
		bodies = map[string]bool{} // a resend carries the same body: never lose its answer too
	)
	px := newProxy(t, nd.url, func(method, path string, body []byte) verdict {
		mu.Lock()
		defer mu.Unlock()
		if method == "POST" && path == "/v1/records" && bytes.Contains(body, []byte(`"group_offsets"`)) && carriesOutput(body) && !bodies[string(body)] {
			bodies[string(body)] = true
			seen++
			if seen%5 == 0 && lost < 3 {
				lost++
				return loseResponse
			}
		}
		return pass
	})
	in := newInstance(t, px.url, "ambiguous", slow...)
	waitDrained(t, c, "retail", 5*time.Minute, in.p)
	m, _, err := in.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	in.p.stop(30 * time.Second)
	mu.Lock()
	t.Logf("lost %d answers; the runtime resent %d commits, %d answered as duplicates", lost, m.CommitResends, m.CommitDuplicates)
	if lost == 0 || m.CommitDuplicates < int64(lost) {
		t.Errorf("lost %d answers, %d duplicates answered: each lost answer should be resent and answered as a duplicate", lost, m.CommitDuplicates)
	}
	mu.Unlock()
	checkAgainstOracle(t, c, "retail")
}
