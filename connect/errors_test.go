package connect_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

func headerMap(rs []broker.FetchResult) []map[string]string {
	var out []map[string]string
	for _, r := range rs {
		for _, x := range r.Records {
			m := map[string]string{}
			for _, h := range x.Headers {
				m[h.Key] = string(h.Value)
			}
			out = append(out, m)
		}
	}
	return out
}

// TestSourceErrorTolerance: with errors.tolerance=all a line that is not JSON goes to
// the dead-letter topic with its context headers, in the same commit as the good lines
// around it, and the source carries on; with none the task fails with a trace naming
// the stage, and commits nothing of the batch.
func TestSourceErrorTolerance(t *testing.T) {
	tn := startNode(t, connect.WorkerConfig{})
	tn.createTopic(t, "lines", 1)
	in := filepath.Join(tn.dir, "in.jsonl")
	writeLines(t, in, `{"n":1}`, `{"n": oops}`, `{"n":3}`)
	tn.want(t, "POST", "/connectors", fmt.Sprintf(`{"name":"tolerant","config":{"connector.class":"FileSource","file":%s,"topic":"lines",`+
		`"errors.tolerance":"all","errors.deadletterqueue.topic.name":"dlq","errors.log.enable":"true"}}`, quote(in)), 201, "")
	testwait.NoError(t, 10*time.Second, "the good lines and the dead letter", func() error {
		if got := values(tn.readAll(t, "lines", 0)); !slices.Equal(got, []string{`{"n":1}`, `{"n":3}`}) {
			return fmt.Errorf("lines %v", got)
		}
		if got := values(tn.readAll(t, "dlq", 0)); !slices.Equal(got, []string{`{"n": oops}`}) {
			return fmt.Errorf("dead letters %v", got)
		}
		return nil
	})
	h := headerMap(tn.readAll(t, "dlq", 0))[0]
	for k, v := range map[string]string{
		"__connect.errors.topic":          "lines",
		"__connect.errors.partition":      "-1",
		"__connect.errors.connector.name": "tolerant",
		"__connect.errors.task.id":        "0",
		"__connect.errors.stage":          "TASK_POLL",
		"__connect.errors.class.name":     "FileSource",
	} {
		if h[k] != v {
			t.Errorf("header %s = %q, want %q", k, h[k], v)
		}
	}
	if !strings.Contains(h["__connect.errors.exception.message"], "the line is not JSON") || h["__connect.errors.exception.stacktrace"] == "" {
		t.Errorf("exception headers %q / %q", h["__connect.errors.exception.message"], h["__connect.errors.exception.stacktrace"])
	}
	// It carries on.
	writeLines(t, in, `{"n":4}`)
	testwait.NoError(t, 10*time.Second, "the line after the poison", func() error {
		if got := values(tn.readAll(t, "lines", 0)); len(got) != 3 {
			return fmt.Errorf("lines %v", got)
		}
		return nil
	})
	tn.waitState(t, "tolerant", "RUNNING", 1)

	// errors.tolerance=none: FAILED, with a trace, and nothing of the batch written.
	in2 := filepath.Join(tn.dir, "in2.jsonl")
	writeLines(t, in2, `{"n":1}`, `not json`)
	tn.createTopic(t, "strict", 1)
	tn.want(t, "POST", "/connectors", fmt.Sprintf(`{"name":"strict","config":{"connector.class":"FileSource","file":%s,"topic":"strict"}}`, quote(in2)), 201, "")
	st := tn.waitState(t, "strict", "FAILED", 1)
	trace := st["tasks"].([]any)[0].(map[string]any)["trace"].(string)
	if !strings.Contains(trace, "Tolerance exceeded in error handler") || !strings.Contains(trace, "stage TASK_POLL") || !strings.Contains(trace, "the line is not JSON") {
		t.Fatalf("trace %q", trace)
	}
	if got := values(tn.readAll(t, "strict", 0)); len(got) != 0 {
		t.Fatalf("a failed batch's records were written: %v", got)
	}
	// A restart of the failed task runs it again, at a new generation (and it fails
	// again on the same line).
	gen := st["tasks"].([]any)[0].(map[string]any)["generation"]
	tn.want(t, "POST", "/connectors/strict/restart?includeTasks=true&onlyFailed=true", "", 202, "")
	testwait.NoError(t, 10*time.Second, "the restarted task to fail again", func() error {
		task := tn.status(t, "strict")["tasks"].([]any)[0].(map[string]any)
		if task["state"] != "FAILED" || task["generation"] == gen {
			return fmt.Errorf("task %v (generation before the restart %v)", task, gen)
		}
		return nil
	})
}

// TestSinkErrorTolerance: a record the sink's converter cannot read goes to the
// dead-letter topic with the record's own bytes, topic, partition and offset; the
// records around it reach the files.
func TestSinkErrorTolerance(t *testing.T) {
	tn := startNode(t, connect.WorkerConfig{})
	tn.createTopic(t, "in", 1)
	for _, v := range []string{`{"a":1}`, `{"a":`, `{"a":3}`} {
		if _, err := tn.n.Broker.Produce(t.Context(), broker.Anonymous, broker.ProduceRequest{Records: []broker.Record{{Topic: "in", Partition: 0, Value: []byte(v), Timestamp: -1}}}); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(tn.dir, "out")
	tn.want(t, "POST", "/connectors", fmt.Sprintf(`{"name":"sink","config":{"connector.class":"FileSink","directory":%s,"topics":"in",`+
		`"errors.tolerance":"all","errors.deadletterqueue.topic.name":"sink-dlq","offset.flush.interval.ms":"100"}}`, quote(out)), 201, "")
	testwait.NoError(t, 15*time.Second, "the sink's files and its dead letter", func() error {
		b, _ := os.ReadFile(filepath.Join(out, "in-0-00000000000000000000.jsonl"))
		if string(b) != "{\"a\":1}\n{\"a\":3}\n" {
			return fmt.Errorf("file %q", b)
		}
		if got := values(tn.readAll(t, "sink-dlq", 0)); !slices.Equal(got, []string{`{"a":`}) {
			return fmt.Errorf("dead letters %v", got)
		}
		return nil
	})
	h := headerMap(tn.readAll(t, "sink-dlq", 0))[0]
	if h["__connect.errors.stage"] != "VALUE_CONVERTER" || h["__connect.errors.offset"] != "1" || h["__connect.errors.topic"] != "in" ||
		h["__connect.errors.class.name"] != "org.apache.kafka.connect.json.JsonConverter" {
		t.Fatalf("headers %v", h)
	}
	// The offsets commit follows the files (offset.flush.interval.ms).
	tn.eventuallyWant(t, "GET", "/connectors/sink/offsets", "", 200, `{"offsets":[{"partition":{"kafka_topic":"in","kafka_partition":0},"offset":{"kafka_offset":3}}]}`)
}
