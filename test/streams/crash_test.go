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
	n, kills, minGap, maxGap := 150_000, 10, 300*time.Millisecond, 1000*time.Millisecond
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
	// Pace the kills by the measured processing rate, so that all ten fall while there
	// is work left whatever the machine's speed: within about 60% of the time the
	// inputs would take.
	l1 := lagOf(t, c, "retail")
	time.Sleep(time.Second)
	l2 := lagOf(t, c, "retail")
	if rate := l1 - l2; rate > 0 {
		left := time.Duration(float64(l2) / float64(rate) * float64(time.Second))
		maxGap = max(2*left*6/10/time.Duration(kills), 150*time.Millisecond)
		minGap = maxGap / 3
		t.Logf("processing about %d inputs/s: kills every %s–%s", rate, minGap.Round(time.Millisecond), maxGap.Round(time.Millisecond))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	start := time.Now()
	wiped := 0
	for k := range kills {
		time.Sleep(minGap + time.Duration(rng.Int64N(int64(maxGap-minGap))))
		if k == kills-1 {
			if lag := lagOf(t, c, "retail"); lag == 0 {
				t.Errorf("drained before the last kill: the test proves little")
			} else {
				t.Logf("lag before the last kill: %d", lag)
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
