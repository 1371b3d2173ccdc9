package streams

import (
	"math/rand/v2"
	"testing"
	"time"
)

// slow makes each instance commit often and small, so that processing is still going
// on while the test kills, pauses and adds instances.
var slow = []string{"--max-commit-records", "400", "--fetch-max-records", "50", "--session-timeout", "3s"}

// TestCrashExactlyOnce: three instances; one, chosen at random, is SIGKILLed and
// restarted 10 times at random intervals, half the time with its state directory
// deleted. After draining: outputs equal the oracle exactly (0 duplicates, 0
// missing), every output's input-position header is unique, the stock changelog's
// table equals the oracle's, committed offsets are the inputs' ends.
func TestCrashExactlyOnce(t *testing.T) {
	n, kills := 150_000, 10
	if long() {
		n = 1_000_000
	}
	nd, c := setup(t, n)
	var ins []*instance
	for _, name := range []string{"crash-a", "crash-b", "crash-c"} {
		ins = append(ins, newInstance(t, nd.url, name, slow...))
	}
	for _, in := range ins {
		in.waitTasks(1, time.Minute)
	}
	// The kills are paced by progress, not by the clock: kill k falls when the lag
	// has come down to about (kills-k)/(kills+1) of what it was, give or take a third
	// of a step, so that all of them fall while there is work left however fast the
	// machine is (a clock pacing drained 150,000 inputs before the tenth kill on a
	// quiet CI machine).
	rng := rand.New(rand.NewPCG(7, 7))
	lag0 := lagOf(t, c, "retail")
	step := lag0 / int64(kills+1)
	start := time.Now()
	wiped := 0
	for k := range kills {
		target := lag0 - int64(k+1)*step + rng.Int64N(2*step/3+1) - step/3
		deadline := time.Now().Add(2 * time.Minute)
		lag := lagOf(t, c, "retail")
		for ; lag > target; lag = lagOf(t, c, "retail") {
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: the lag stayed at %d, above %d, for 2 minutes", k+1, lag, target)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if k == kills-1 {
			if lag == 0 {
				t.Errorf("drained before the last kill: the test proves little")
			} else {
				t.Logf("lag before the last kill: %d of %d", lag, lag0)
			}
		}
		victim := ins[rng.IntN(len(ins))]
		wipe := k%2 == 0
		if wipe {
			wiped++
		}
		victim.restart(wipe)
	}
	t.Logf("%d kills (%d with the state directory deleted) in %s", kills, wiped, time.Since(start).Round(time.Millisecond))
	var alive []*proc
	for _, in := range ins {
		alive = append(alive, in.p)
	}
	waitDrained(t, c, "retail", 10*time.Minute, alive...)
	for _, in := range ins {
		in.p.stop(30 * time.Second)
	}
	checkAgainstOracle(t, c, "retail")
}
