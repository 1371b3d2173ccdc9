package kafka_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/kafka"
)

// kcatValues consumes a partition from its start to its end with kcat (librdkafka
// 2.0.2) and answers the values, one a line; extra are more kcat arguments.
func kcatValues(t *testing.T, addr, topic string, extra ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	args := append([]string{"-b", addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n"}, extra...)
	out, err := exec.CommandContext(ctx, testsvc.Kcat(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out))
}

// TestKcatReadsCommitted: kcat, read_committed by default as librdkafka is, reads
// exactly the committed records of a log with committed and aborted transactions among
// plain records (franz-go's producer wrote them); read_uncommitted reads them all.
func TestKcatReadsCommitted(t *testing.T) {
	testsvc.Kcat(t)
	cat := openSQLite(t)
	if _, err := cat.CreateTopic(t.Context(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cat, kafka.Config{})
	ctx := ctxFor(t, 60*time.Second)
	txn := client(t, kgo.SeedBrokers(n.addr), kgo.TransactionalID("kcat"), kgo.DefaultProduceTopic("t"))
	plain := client(t, kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("t"))
	inTxn := func(commit bool, values ...string) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := txn.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end: %v", err)
		}
	}
	inTxn(true, "c1", "c2")
	inTxn(false, "x1", "x2")
	if err := plain.ProduceSync(ctx, kgo.StringRecord("p1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	inTxn(false, "x3")
	inTxn(true, "c3")
	if got, want := kcatValues(t, n.addr, "t"), []string{"c1", "c2", "p1", "c3"}; !slices.Equal(got, want) {
		t.Fatalf("kcat (read_committed by default): %v, want %v", got, want)
	}
	if got, want := kcatValues(t, n.addr, "t", "-X", "isolation.level=read_uncommitted"), []string{"c1", "c2", "x1", "x2", "p1", "x3", "c3"}; !slices.Equal(got, want) {
		t.Fatalf("kcat read_uncommitted: %v, want %v", got, want)
	}
}

// txnKillEnv makes the test binary the producer TestSIGKILLedProducerAborted kills:
// it begins a transaction at the address it names and produces, then waits to die.
const txnKillEnv = "STRATA_TEST_TXN_KILL_ADDR"

// txnKillTimeout is the killed producer's transaction.timeout.ms.
const txnKillTimeout = 2 * time.Second

// TestTxnKilledProducerHelper is the producer process of TestSIGKILLedProducerAborted;
// it does nothing in a normal run.
func TestTxnKilledProducerHelper(t *testing.T) {
	addr := os.Getenv(txnKillEnv)
	if addr == "" {
		t.Skip("the producer process of TestSIGKILLedProducerAborted")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("killed"),
		kgo.TransactionTimeout(txnKillTimeout), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"open-1", "open-2"} {
		if err := cl.ProduceSync(context.Background(), kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("produced")
	time.Sleep(time.Hour) // until SIGKILL
}

// TestSIGKILLedProducerAborted: a producer process killed mid-transaction leaves it
// open, holding the last stable offset; the node's reaper aborts it once its
// transaction.timeout.ms has passed (not before: the abort marker is at least the
// timeout after the transaction's records), read_committed readers never see its
// records, and the last stable offset moves past it.
func TestSIGKILLedProducerAborted(t *testing.T) {
	cat := openSQLite(t)
	if _, err := cat.CreateTopic(t.Context(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cat, kafka.Config{})
	rctx, stop := context.WithCancel(context.Background())
	reaped := make(chan error, 1)
	go func() { reaped <- n.core.RunTxnReaper(rctx, 100*time.Millisecond, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() { stop(); <-reaped })

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestTxnKilledProducerHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), txnKillEnv+"="+n.addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	ready := false
	for lines.Scan() {
		if lines.Text() == "produced" {
			ready = true
			break
		}
	}
	if !ready {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the producer process ended before producing")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, out)
	cmd.Wait()

	r := rawTo(t, n)
	testwait.Until(t, 30*time.Second, "the killed producer's transaction aborted", func() bool {
		hw, lso := stableOffsets(t, r, "t", 0)
		if hw != 2 && hw != 3 || lso != 0 && lso != hw {
			t.Fatalf("high watermark %d, stable %d: want 2 and 0 while open, 3 and 3 once aborted", hw, lso)
		}
		return hw == 3 && lso == 3 // the records and the abort marker
	})
	// The abort came after the timeout: its marker's timestamp (the database clock at
	// the decision) against the records' (the producer's clock, the same machine's).
	cl := client(t, kgo.SeedBrokers(n.addr), kgo.ConsumeTopics("t"), kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	ctx := ctxFor(t, 20*time.Second)
	var recs []*kgo.Record
	for len(recs) < 3 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the 3 records and marker", len(recs))
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	marker := recs[2]
	if !marker.Attrs.IsControl() || recs[0].Attrs.IsControl() {
		t.Fatalf("records %+v: want two records then the marker", recs)
	}
	if lag := marker.Timestamp.Sub(recs[0].Timestamp); lag < txnKillTimeout-10*time.Millisecond {
		t.Fatalf("aborted %s after the transaction's first record: before its timeout of %s", lag, txnKillTimeout)
	}
	if got := consumeValues(t, n.addr, "t", kgo.ReadCommitted(), 1, time.Second); len(got) != 0 {
		t.Fatalf("read_committed after the abort: %v, want nothing", got)
	}
}
