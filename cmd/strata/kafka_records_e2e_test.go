package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testsvc"
)

// Records through kcat (librdkafka 2.0.2), the built binary serving them: produced with
// keys under each codec and with idempotence, read back byte for byte, and offsets
// found by time.

// kcatCodecs are the codecs kcat -z takes.
var kcatCodecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

func kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testsvc.Kcat(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("kcat %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// kcatLines are n keyed "key:value" lines (the value has spaces, tabs, UTF-8 and the
// key delimiter in it), in the order produced.
func kcatLines(tag string, n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("key-%d:%s %05d\tvalue ✓ a:b %s", i%13, tag, i, strings.Repeat("x", i%40))
	}
	return lines
}

// kcatRoundTrip produces lines to topic with kcat (-K: keys, -z codec, idempotent), then
// reads every partition from the beginning to its end (-C -p N -o beginning -e) and
// checks that each line came back byte for byte, once, each partition in the order
// produced.
func kcatRoundTrip(t *testing.T, bootstrap, topic string, partitions int, codec string) {
	t.Helper()
	lines := kcatLines(codec, 300)
	kcat(t, strings.Join(lines, "\n")+"\n", "-b", bootstrap, "-P", "-t", topic, "-K", ":", "-z", codec,
		"-X", "enable.idempotence=true", "-X", "linger.ms=5")
	index := map[string]int{}
	for i, l := range lines {
		index[l] = i
	}
	seen := 0
	for p := range partitions {
		out := kcat(t, "", "-b", bootstrap, "-C", "-t", topic, "-p", strconv.Itoa(p), "-o", "beginning", "-e", "-q",
			"-f", "%o|%k:%s\n")
		last, wantOffset := -1, int64(0)
		for _, row := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if row == "" {
				continue
			}
			off, line, _ := strings.Cut(row, "|")
			i, ok := index[line]
			if !ok {
				t.Fatalf("%s partition %d: %q was never produced", codec, p, row)
			}
			if i <= last {
				t.Fatalf("%s partition %d: line %d after line %d", codec, p, i, last)
			}
			if o, _ := strconv.ParseInt(off, 10, 64); o != wantOffset {
				t.Fatalf("%s partition %d: offset %s, want %d (dense from 0)", codec, p, off, wantOffset)
			}
			last, wantOffset = i, wantOffset+1
			seen++
		}
	}
	if seen != len(lines) {
		t.Fatalf("%s: read back %d lines of %d", codec, seen, len(lines))
	}
}

// kcatOffsetsForTimes checks kcat -Q: the first offset at or after a time between two
// produces, and none after the last.
func kcatOffsetsForTimes(t *testing.T, bootstrap, topic string) {
	t.Helper()
	produce := func(tag string) {
		kcat(t, strings.Join(kcatLines(tag, 10), "\n")+"\n", "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-K", ":")
	}
	// Record timestamps are milliseconds of the producer's clock: the pauses put
	// between a millisecond apart from both produces, whatever the clock's granularity.
	produce("before")
	time.Sleep(50 * time.Millisecond)
	between := time.Now().UnixMilli()
	time.Sleep(50 * time.Millisecond)
	produce("after")
	query := func(ts int64) string {
		out := kcat(t, "", "-b", bootstrap, "-Q", "-t", fmt.Sprintf("%s:0:%d", topic, ts))
		return strings.TrimSpace(out)
	}
	if got, want := query(between), fmt.Sprintf("%s [0] offset 10", topic); got != want {
		t.Fatalf("kcat -Q at a time between the produces: %q, want %q", got, want)
	}
	if got, want := query(time.Now().Add(time.Hour).UnixMilli()), fmt.Sprintf("%s [0] offset -1", topic); got != want {
		t.Fatalf("kcat -Q after the last record: %q, want %q", got, want)
	}
}

// kcatRecords runs the kcat checks against a node's Kafka address; topics are made over
// HTTP at its base URL.
func kcatRecords(t *testing.T, httpURL, bootstrap string) {
	t.Helper()
	cl := client.New(httpURL)
	for _, codec := range kcatCodecs {
		topic := "kcat-" + codec
		if _, err := cl.CreateTopic(t.Context(), topic, 4, nil); err != nil {
			t.Fatal(err)
		}
		kcatRoundTrip(t, bootstrap, topic, 4, codec)
	}
	if _, err := cl.CreateTopic(t.Context(), "kcat-times", 1, nil); err != nil {
		t.Fatal(err)
	}
	kcatOffsetsForTimes(t, bootstrap, "kcat-times")
}

// kafkaRequests sums a node's strata_kafka_requests_total for one API, from /metrics.
func kafkaRequests(t *testing.T, httpURL, api string) float64 {
	t.Helper()
	resp, err := http.Get(httpURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, `strata_kafka_requests_total{api="`+api+`"`) {
			continue
		}
		if f := strings.Fields(line); len(f) == 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			sum += v
		}
	}
	return sum
}

// acked is what a producer was answered for one record.
type acked struct {
	partition int32
	offset    int64
}

// loadProducer produces to topic from one franz-go client (idempotent, bootstrapped
// at one node) until stop, a record a millisecond, and records what was acknowledged,
// and, per partition, when the first record sent after resumeFrom was acknowledged.
type loadProducer struct {
	cl *kgo.Client

	mu         sync.Mutex
	acks       map[string]acked // by value
	failed     int
	resumeFrom time.Time
	resumed    map[int32]time.Time
	wg         sync.WaitGroup
}

func startLoad(t *testing.T, bootstrap, topic string, stop <-chan struct{}) *loadProducer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic(topic),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	lp := &loadProducer{cl: cl, acks: map[string]acked{}, resumed: map[int32]time.Time{}}
	lp.wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			sent := time.Now()
			v := fmt.Sprintf("load-%07d", i)
			lp.wg.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Key: []byte(strconv.Itoa(i % 97)), Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer lp.wg.Done()
				lp.mu.Lock()
				defer lp.mu.Unlock()
				if err != nil {
					lp.failed++
					return
				}
				lp.acks[v] = acked{r.Partition, r.Offset}
				if !lp.resumeFrom.IsZero() && sent.After(lp.resumeFrom) {
					if _, ok := lp.resumed[r.Partition]; !ok {
						lp.resumed[r.Partition] = time.Now()
					}
				}
			})
		}
	})
	return lp
}

// checkAcked reads topic from bootstrap to its end and checks that every acknowledged
// record is there, once, at the partition and offset it was acknowledged with.
func checkAcked(t *testing.T, bootstrap, topic string, partitions int32, acks map[string]acked) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(kgoClient(t, kgo.SeedBrokers(bootstrap)))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[int32]kgo.Offset{}
	left := 0
	for p := range partitions {
		end, ok := ends.Lookup(topic, p)
		if !ok || end.Err != nil {
			t.Fatalf("end offset of %s/%d: %+v", topic, p, end)
		}
		offsets[p] = kgo.NewOffset().AtStart()
		left += int(end.Offset)
	}
	cl := kgoClient(t, kgo.SeedBrokers(bootstrap), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	seen := map[string]acked{}
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d records left to read: %v", left, ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			left--
			if prev, dup := seen[string(r.Value)]; dup {
				t.Fatalf("%s at %d/%d and at %d/%d: written twice", r.Value, prev.partition, prev.offset, r.Partition, r.Offset)
			}
			seen[string(r.Value)] = acked{r.Partition, r.Offset}
		})
	}
	for v, a := range acks {
		if got, ok := seen[v]; !ok || got != a {
			t.Fatalf("acknowledged %s at %d/%d; read %+v (found %v)", v, a.partition, a.offset, got, ok)
		}
	}
	t.Logf("%d acknowledged records all read back (%d records in all)", len(acks), len(seen))
}

func kgoClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
