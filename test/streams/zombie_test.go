package streams

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/examples/retail/retail"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestZombie: an instance SIGSTOPped past its session loses its tasks to the other;
// after SIGCONT its next commit — holding a wall-clock punctuator's ticks, which need
// no new input — is refused, and nothing a task incarnation of it buffered before
// the pause ever becomes readable. The outputs still equal the oracle.
func TestZombie(t *testing.T) {
	nd, c := setup(t, 150_000, retail.Ticks)
	args := append([]string{"--tick", "100ms"}, slow...)
	args[len(args)-1] = "2s" // session timeout
	a := newInstance(t, nd.url, "zombie-a", args...)
	b := newInstance(t, nd.url, "zombie-b", args...)
	a.waitTasks(1, time.Minute)
	b.waitTasks(1, time.Minute)
	// Both instances at work (each has committed) before the pause, and a tick of
	// zombie-a readable: a commit alone may carry none yet (CI once paused it after
	// commits that held only offsets, and the check below had nothing to prove).
	testwait.Until(t, time.Minute, "both instances to commit, zombie-a's ticks among them", func() bool {
		ma, _, errA := a.snapshot()
		mb, _, errB := b.snapshot()
		return errA == nil && errB == nil && ma.Commits > 0 && mb.Commits > 0 && ticked(t, c, "zombie-a")
	})
	if lag := lagOf(t, c, "retail"); lag == 0 {
		t.Fatal("drained before the pause: the test proves little")
	}
	stopped := time.Now()
	a.p.signal(syscall.SIGSTOP)
	b.waitTasks(partitions, time.Minute) // a's session lapsed; b took everything
	resumed := time.Now()
	a.p.signal(syscall.SIGCONT)
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, _, err := a.snapshot()
		if err == nil && m.CommitsRefused > 0 {
			t.Logf("after SIGCONT the zombie's commits were refused %d times; tasks dropped %d", m.CommitsRefused, m.TasksDropped)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the zombie had no commit refused within 30s of SIGCONT (metrics %+v, err %v)", m, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitDrained(t, c, "retail", 5*time.Minute, a.p, b.p)
	a.p.stop(30 * time.Second)
	b.p.stop(30 * time.Second)
	refusals, withRecords := 0, 0
	for _, line := range strings.Split(a.p.out.String(), "\n") {
		if strings.Contains(line, "commit refused") {
			refusals++
			if strings.Contains(line, "err=\"produce ") {
				withRecords++ // a records request: its ticks, at least
			}
			if i := strings.Index(line, "code="); i >= 0 && refusals <= 3 {
				t.Logf("zombie-a: commit refused, %s", strings.Fields(line[i:])[0])
			}
		}
	}
	if refusals == 0 || withRecords == 0 {
		t.Errorf("the zombie's log shows %d refused commits, %d of them carrying records; want a refused commit with records", refusals, withRecords)
	}

	// Ticks of zombie-a's incarnations from before the pause: none stamped after it.
	before := map[string]bool{}
	var ticks []retail.Tick
	for _, r := range readAll(t, c, retail.Ticks) {
		v, _ := r.ValueBytes()
		var tk retail.Tick
		if err := json.Unmarshal(v, &tk); err != nil {
			t.Fatal(err)
		}
		ticks = append(ticks, tk)
		if tk.Instance == "zombie-a" && tk.At < stopped.UnixMilli() {
			before[tk.Incarnation] = true
		}
	}
	if len(before) == 0 {
		t.Fatal("no tick of zombie-a from before the pause: the test proves little")
	}
	late := 0
	for _, tk := range ticks {
		if before[tk.Incarnation] && tk.At >= stopped.UnixMilli() {
			late++
			if late < 5 {
				t.Errorf("zombie-a's task %s (incarnation %s) has a readable tick stamped %s after the pause (resumed %s)",
					tk.Task, tk.Incarnation, time.UnixMilli(tk.At).Sub(stopped), resumed.Sub(stopped))
			}
		}
	}
	checkAgainstOracle(t, c, "retail")
}

// ticked reports whether a tick of instance is readable.
func ticked(t *testing.T, c *client.Client, instance string) bool {
	for _, r := range readAll(t, c, retail.Ticks) {
		v, _ := r.ValueBytes()
		var tk retail.Tick
		if json.Unmarshal(v, &tk) == nil && tk.Instance == instance {
			return true
		}
	}
	return false
}
