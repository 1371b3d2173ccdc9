package sqlite

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
	"github.com/strata-io/strata/segment"
)

// The crash test re-executes this test binary (TestMain) as a child that commits in a loop and
// kills it with SIGKILL wherever it happens to be — almost always inside a commit,
// which is where it spends its time.
const (
	crashEnvPath  = "STRATA_SQLITE_CRASH_PATH"
	crashEnvTopic = "STRATA_SQLITE_CRASH_TOPIC"
)

// crashFlush is the child's flush under key: two requests over four partitions, partition
// i taking i+1 records, so after n whole flushes partition i's high watermark is n(i+1).
func crashFlush(key string, topicID int64) catalog.Segment {
	return catalogtest.Flush(key,
		catalogtest.Req(catalogtest.B{TopicID: topicID, Partition: 0, Records: 1}, catalogtest.B{TopicID: topicID, Partition: 1, Records: 2}),
		catalogtest.Req(catalogtest.B{TopicID: topicID, Partition: 2, Records: 3}, catalogtest.B{TopicID: topicID, Partition: 3, Records: 4}),
	)
}

func TestMain(m *testing.M) {
	if path := os.Getenv(crashEnvPath); path != "" {
		crashChild(path)
		return
	}
	os.Exit(m.Run())
}

// crashChild is the child's body: commit and acknowledge until killed.
func crashChild(path string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	topicID, err := strconv.ParseInt(os.Getenv(crashEnvTopic), 10, 64)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	c, err := Open(ctx, path, catalog.Options{})
	if err != nil {
		fail(err)
	}
	// Bounded in case the parent dies without killing us.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		seg := crashFlush(segment.NewKey(time.Now()), topicID)
		res, err := c.Commit(ctx, seg)
		if err != nil {
			fail(err)
		}
		// The acknowledgement goes out only after Commit returned: from here on the
		// flush must survive the kill.
		fmt.Printf("ack %s %d %d %d %d\n", seg.Key, res[0].BaseOffsets[0], res[0].BaseOffsets[1], res[1].BaseOffsets[0], res[1].BaseOffsets[1])
	}
	fail(fmt.Errorf("not killed within a minute"))
}

func TestKillMidCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tp := catalogtest.SeedTopic(t, c, "crash", 4, nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	acked := map[string][]int64{}
	for round := range 4 {
		kills := 30 + rand.IntN(150) // acknowledgements to wait for before the kill
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), crashEnvPath+"="+path, crashEnvTopic+"="+strconv.FormatInt(tp.ID, 10))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		n := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 6 || f[0] != "ack" {
				continue
			}
			offs := make([]int64, 4)
			for i := range offs {
				offs[i], _ = strconv.ParseInt(f[2+i], 10, 64)
			}
			acked[f[1]] = offs
			if n++; n == kills {
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child ended with %v after %d acknowledgements, not by our SIGKILL", round, err, n)
		}
		checkAfterCrash(t, path, tp.ID, acked)
	}
}

// checkAfterCrash reopens the catalog and checks that every flush is wholly present or
// absent, offsets are dense, and every acknowledged flush is there with the offsets
// it was answered.
func checkAfterCrash(t *testing.T, path string, topicID int64, acked map[string][]int64) {
	t.Helper()
	ctx := t.Context()
	c, err := Open(ctx, path, catalog.Options{})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer c.Close()

	var live, partial int64
	if err := c.r.QueryRowContext(ctx, `SELECT count(*) FROM segments WHERE state = 'live'`).Scan(&live); err != nil {
		t.Fatal(err)
	}
	if err := c.r.QueryRowContext(ctx, `SELECT count(*) FROM segments s
		WHERE (SELECT count(*) FROM chunks c WHERE c.segment_id = s.id) != 4`).Scan(&partial); err != nil {
		t.Fatal(err)
	}
	if partial != 0 {
		t.Fatalf("%d flushes are partly committed", partial)
	}
	if live < int64(len(acked)) {
		t.Fatalf("%d flushes committed, but %d were acknowledged", live, len(acked))
	}
	for p := range int32(4) {
		chunks := catalogtest.CheckDense(t, c, topicID, p)
		if want := live * int64(p+1); catalogtest.Partition(t, c, topicID, p).HighWatermark != want || int64(len(chunks)) != live {
			t.Fatalf("partition %d: %d chunks, want %d, high watermark %d", p, len(chunks), live, want)
		}
	}
	for key, offs := range acked {
		res, err := c.Settle(ctx, crashFlush(key, topicID))
		if err != nil {
			t.Fatalf("acknowledged flush %s is lost: %v", key, err)
		}
		got := []int64{res[0].BaseOffsets[0], res[0].BaseOffsets[1], res[1].BaseOffsets[0], res[1].BaseOffsets[1]}
		if !slices.Equal(got, offs) {
			t.Fatalf("acknowledged flush %s reads back at %v, was answered %v", key, got, offs)
		}
	}
	t.Logf("after the kill: %d flushes committed, %d acknowledged", live, len(acked))
}
