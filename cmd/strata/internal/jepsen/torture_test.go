package jepsen

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/gobin"
	"github.com/strata-io/strata/internal/testkit/testsvc"
)

// The short version runs each class for -jepsen.duration (CI); the long version is the
// same test with a longer duration, or `strata torture`:
//
//	go test ./internal/jepsen -run TestTorture -jepsen.duration 10m -timeout 3h
var (
	duration = flag.Duration("jepsen.duration", 12*time.Second, "how long each fault class runs")
	classes  = flag.String("jepsen.classes", "kill,pause,store,s3proxy,pg-restart,pg-cut,compaction", "comma-separated fault classes to run (all: every fault together)")
	quiet    = flag.Duration("jepsen.quiet", time.Second, "time without faults between fault windows")
	active   = flag.Duration("jepsen.active", 2*time.Second, "how long each fault window lasts")
	// The Kafka-client workload's classes: a bounded run in CI; the long runs are
	// `strata torture --kafka --classes kill,pause,pg-restart --duration 10m`.
	kafkaClasses = flag.String("jepsen.kafka-classes", "kill", "comma-separated fault classes to run with the Kafka-client workload (TestTortureKafka)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	gobin.Cleanup()
	os.Exit(code)
}

// testEnv fills an Env from internal/testsvc.
func testEnv(t *testing.T, binary bool) Env {
	t.Helper()
	m := testsvc.MinIO(t)
	testsvc.Require(t, "STRATA_TEST_POSTGRES")
	env := Env{
		S3:  S3Config{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey, Region: m.Region},
		Dir: t.TempDir(),
		NewDatabase: func(context.Context) (string, error) {
			return testsvc.PostgresDSN(t), nil
		},
		NewPrivatePostgres: func(context.Context) (*PrivatePostgres, error) {
			return testsvc.StartPrivatePostgres(t).Instance, nil
		},
		Log: slog.New(slog.NewTextHandler(&testWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelError})),
	}
	if binary {
		env.Binary = gobin.Build(t, "cmd/strata")
	}
	return env
}

// testWriter sends log lines to t.Log while the test runs.
type testWriter struct {
	t  *testing.T
	mu sync.Mutex
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// TestTorture runs every fault class once against the real binary (the in-process
// nodes for the fault decorator) and requires a clean history from each: no lost or
// unseen records, no inconsistent offsets, no duplicates, no bad reads, nothing
// refused yet visible, no group-offset anomaly, and a final read that completed.
func TestTorture(t *testing.T) {
	torture(t, *classes, false)
}

// TestTortureKafka is TestTorture with the Kafka-client workload beside the HTTP one:
// franz-go idempotent producers, group members (classic and KIP-848) and transactional
// consume-transform-produce sessions against nodes serving the Kafka protocol, in the
// same history, judged by the same checker.
func TestTortureKafka(t *testing.T) {
	torture(t, *kafkaClasses, true)
}

func torture(t *testing.T, classList string, kafka bool) {
	if testing.Short() {
		t.Skip("-short")
	}
	var results []*Result
	var mu sync.Mutex
	for _, class := range strings.Split(classList, ",") {
		t.Run(class, func(t *testing.T) {
			env := testEnv(t, class != ClassStore)
			// A class that cannot finish within this fails rather than eat the package's
			// whole test timeout.
			ctx, cancel := context.WithTimeout(context.Background(), *duration+150*time.Second)
			defer cancel()
			res := Run(ctx, env, class, RunConfig{Duration: *duration, Quiet: *quiet, Active: *active, Kafka: kafka,
				Workload: WorkloadConfig{FinalTimeout: time.Minute}})
			mu.Lock()
			results = append(results, res)
			mu.Unlock()
			var b bytes.Buffer
			WriteTable(&b, []*Result{res})
			t.Logf("%s\n%s", res.Class, b.String())
			for _, n := range res.Notes {
				t.Log(n)
			}
			if res.Check != nil {
				var c bytes.Buffer
				res.Check.WriteText(&c)
				t.Logf("strata check: %s", c.String())
			}
			t.Logf("fault windows: %s", events(res.History))
			if res.Err != nil {
				t.Errorf("harness: %v", res.Err)
			}
			if res.Report == nil {
				t.Fatal("no report")
			}
			if res.Check == nil || !res.Check.OK() {
				t.Errorf("strata check after the run: %+v", res.Check)
			}
			if !res.Report.Valid() {
				t.Errorf("anomalies: %s", res.Report.Summary())
			}
			if res.Report.OK == 0 || res.Report.RecordsRead == 0 {
				t.Errorf("the workload did nothing: %s", res.Report.Summary())
			}
			if res.Faults == 0 {
				t.Errorf("no fault window started")
			}
			if kafka {
				checkKafkaDidWork(t, res.History)
			}
		})
	}
	var b bytes.Buffer
	WriteTable(&b, results)
	t.Logf("summary per fault class:\n%s", b.String())
}

// events summarises the fault windows of a history.
func events(h *History) string {
	if h == nil {
		return ""
	}
	var parts []string
	for _, e := range h.Events {
		if strings.HasPrefix(e.What, "start") {
			parts = append(parts, e.Fault+": "+strings.TrimPrefix(e.What, "start: "))
		}
	}
	return strings.Join(parts, "; ")
}

// checkKafkaDidWork fails a Kafka run whose franz-go clients did nothing: no record
// acknowledged to a Kafka producer, or a Kafka group that was handed nothing.
func checkKafkaDidWork(t *testing.T, h *History) {
	t.Helper()
	acked, batches := 0, map[string]int{}
	for _, s := range h.Sends {
		if strings.HasPrefix(s.Producer, "k") && s.Outcome == OK {
			acked++
		}
	}
	for _, r := range h.Reads {
		if r.Mode == ReadGroup && r.Err == "" {
			batches[r.Group]++
		}
	}
	committed, outputs := 0, 0
	for _, tx := range h.Txns {
		if tx.Outcome == OK {
			committed++
		}
	}
	for _, rd := range h.TxnReads {
		if rd.Mode == ReadFinal {
			outputs += len(rd.Records)
		}
	}
	if acked == 0 || batches["jepsen-kafka-classic"] == 0 || batches["jepsen-kafka-848"] == 0 || committed == 0 || outputs == 0 {
		t.Errorf("the Kafka clients did not work: %d records acknowledged to franz-go producers, group batches %v, %d transactions committed, %d outputs read",
			acked, batches, committed, outputs)
		return
	}
	t.Logf("Kafka clients: %d records acknowledged to franz-go producers, group batches %v, %d transactions committed (%d in all), %d outputs in the final read",
		acked, batches, committed, len(h.Txns), outputs)
}
