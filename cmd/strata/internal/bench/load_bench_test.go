package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// BenchmarkCommitToSSE measures how long after its commit (the produce's answer) a
// record reaches a Server-Sent Events tail of its partition, and the same for a
// long-poll fetch waiting at the high watermark. One record per operation; ns/op is
// the whole round (produce, commit, delivery), commit-to-delivery is reported as its
// own metrics (p50-ms, p99-ms). The tail regression of issue 32 — a reader that saw a
// record long after its commit — shows here as a p99 of hundreds of milliseconds
// against one of a few.
func BenchmarkCommitToSSE(b *testing.B) {
	for _, backend := range []struct {
		name string
		opts []nodetest.Option
	}{
		{"sqlite", nil},
		{"postgres", []nodetest.Option{nodetest.OnServices()}},
	} {
		b.Run(backend.name, func(b *testing.B) {
			n := nodetest.Start(b, append(backend.opts, nodetest.Mutate(func(c *node.Config) {
				c.WriterConfig = writer.Config{Linger: 5 * time.Millisecond}
				c.ReaderConfig = reader.Config{CacheBytes: 64 << 20}
			}))...)
			topic := createTopic(b, n.URL)
			b.Run("sse", func(b *testing.B) { benchDelivery(b, n.URL, topic, sseDelivery) })
			b.Run("long-poll", func(b *testing.B) { benchDelivery(b, n.URL, topic, longPollDelivery) })
		})
	}
}

// BenchmarkCommitToSSELoaded is BenchmarkCommitToSSE on Postgres and MinIO with the
// bench's half-load producer running beside it (binary, 10,000 records/s of 1 KiB over
// 8 partitions of another topic, 50 ms linger): each probe record shares its flush, so
// its tail reads it out of an object of megabytes, as the bench's tails do.
// Commit-to-delivery is measured per record from its own answer, free of the ack's
// noise that the bench's e2e-minus-ack figure carries.
func BenchmarkCommitToSSELoaded(b *testing.B) {
	n := loadNode(b)
	r := loadRunner(b, n, Config{Tails: 1, RecordSize: 1024, BatchRecords: 100, Duration: 10 * time.Minute})
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := r.produceHalf(ctx, 10_000)
		done <- err
	}()
	defer func() {
		cancel()
		<-done
	}()
	topic := createTopic(b, n.URL)
	b.Run("sse", func(b *testing.B) { benchDelivery(b, n.URL, topic, sseDelivery) })
	b.Run("long-poll", func(b *testing.B) { benchDelivery(b, n.URL, topic, longPollDelivery) })
}

// delivery follows partition 0 of topic from offset and sends the arrival time of each
// record on got, in order, until ctx ends.
type delivery func(ctx context.Context, url, topic string, offset int64, got chan<- time.Time) error

func benchDelivery(b *testing.B, url, topic string, follow delivery) {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	// The first record positions the follower: delivery is measured from the next.
	start, _ := produceOne(b, url, topic)
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() { errc <- follow(ctx, url, topic, start, got) }()
	wait := func() time.Time {
		select {
		case t := <-got:
			return t
		case err := <-errc:
			b.Fatalf("follower: %v", err)
		case <-time.After(30 * time.Second):
			b.Fatal("no delivery within 30s")
		}
		return time.Time{}
	}
	wait()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		_, acked := produceOne(b, url, topic)
		lat = append(lat, max(0, wait().Sub(acked)))
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

func createTopic(b testing.TB, url string) string {
	topic := "tail-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	resp, err := http.Post(url+"/v1/topics", "application/json", bytes.NewReader([]byte(`{"name":"`+topic+`","partitions":1}`)))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		b.Fatalf("create topic: HTTP %d: %s", resp.StatusCode, body)
	}
	return topic
}

// produceOne produces one record to partition 0 and returns its offset and the time its
// answer (the commit) arrived.
func produceOne(b testing.TB, url, topic string) (int64, time.Time) {
	resp, err := http.Post(url+"/v1/topics/"+topic+"/records", "application/json",
		bytes.NewReader([]byte(`{"records":[{"partition":0,"value":"v"}]}`)))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	acked := time.Now()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("produce: HTTP %d: %s", resp.StatusCode, body)
	}
	var pr struct {
		Offsets []struct{ Offset int64 } `json:"offsets"`
	}
	if err := json.Unmarshal(body, &pr); err != nil || len(pr.Offsets) != 1 {
		b.Fatalf("produce answer %s: %v", body, err)
	}
	return pr.Offsets[0].Offset, acked
}

func sseDelivery(ctx context.Context, url, topic string, offset int64, got chan<- time.Time) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/topics/"+topic+"/partitions/0/records?offset="+strconv.FormatInt(offset, 10), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("tail: HTTP %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if bytes.HasPrefix(line, []byte("id: ")) {
			select {
			case got <- time.Now():
			case <-ctx.Done():
				return nil
			}
		}
	}
}

func longPollDelivery(ctx context.Context, url, topic string, offset int64, got chan<- time.Time) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/topics/"+topic+"/partitions/0/records?wait_ms=10000&offset="+strconv.FormatInt(offset, 10), nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		now := time.Now()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("long-poll: HTTP %d: %s", resp.StatusCode, body)
		}
		var fr struct {
			NextOffset int64 `json:"next_offset"`
			Records    []struct{ Offset int64 }
		}
		if err := json.Unmarshal(body, &fr); err != nil {
			return fmt.Errorf("long-poll answer %s: %w", body, err)
		}
		for range fr.Records {
			select {
			case got <- now:
			case <-ctx.Done():
				return nil
			}
		}
		offset = max(offset, fr.NextOffset)
	}
}

// loadNode is a node on Postgres and MinIO with the bench's writer settings.
func loadNode(b *testing.B) *nodetest.Node {
	return nodetest.Start(b, nodetest.OnServices(), nodetest.Mutate(func(c *node.Config) {
		c.WriterConfig = writer.Config{Linger: 50 * time.Millisecond, MaxFlushBytes: 8 << 20, BufferBytes: 64 << 20}
		c.ReaderConfig = reader.Config{CacheBytes: 64 << 20}
	}))
}

// loadRunner is the bench's runner over n with a fresh topic of 8 partitions.
func loadRunner(b *testing.B, n *nodetest.Node, cfg Config) *runner {
	cfg.Nodes, cfg.Partitions, cfg.Linger = []string{n.URL}, 8, 50*time.Millisecond
	cfg.Topic = "load-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cfg.defaults()
	r := &runner{cfg: cfg, log: cfg.Log, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	b.Cleanup(r.hc.CloseIdleConnections)
	formats := map[string]string{"key.format": "string", "value.format": "string"}
	if _, err := client.New(n.URL).CreateTopic(b.Context(), cfg.Topic, int32(cfg.Partitions), formats); err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkTailUnderLoad is the bench's half-load phase in miniature, on Postgres and
// MinIO: an open-loop binary producer at a fixed rate over 8 partitions, two of them
// tailed over Server-Sent Events. It reports the tails' end-to-end p99 (send to
// event), the acks' p99, and the first beyond the second (e2e-ack-ms): the bench's
// target wants it within 20 ms, so a reader that sees records long after their commit
// shows as tens to hundreds of milliseconds.
func BenchmarkTailUnderLoad(b *testing.B) {
	n := loadNode(b)
	for b.Loop() {
		r := loadRunner(b, n, Config{Tails: 2, RecordSize: 1024, BatchRecords: 100, Duration: 5 * time.Second})
		p, e2e, err := r.produceHalf(b.Context(), 10_000)
		if err != nil {
			b.Fatal(err)
		}
		if e2e.N == 0 || p.Ack.P99 == 0 {
			b.Fatalf("nothing measured: %+v %+v %v", p, e2e, r.rep.Notes)
		}
		b.ReportMetric(p.Ack.P99, "ack-p99-ms")
		b.ReportMetric(e2e.P99, "e2e-p99-ms")
		b.ReportMetric(e2e.P99-p.Ack.P99, "e2e-ack-ms")
		b.ReportMetric(e2e.P99/p.Ack.P99, "e2e/ack")
	}
}

// BenchmarkFlushFill is the bench's maximum-load binary phase in miniature: 32
// closed-loop producers of 500-record requests on Postgres and MinIO with 8 MiB
// flushes and a 50 ms linger. It reports the mean flush size (MiB) and PUTs per GiB
// produced: flushes cut before they are full or have lingered show as a mean well
// below 8 MiB.
func BenchmarkFlushFill(b *testing.B) {
	n := loadNode(b)
	for b.Loop() {
		r := loadRunner(b, n, Config{Producers: 32, RecordSize: 1024, BatchRecords: 500, Duration: 5 * time.Second})
		p, err := r.produceMax(b.Context(), "binary")
		if err != nil {
			b.Fatal(err)
		}
		if p.Flushes == 0 {
			b.Fatalf("nothing measured: %+v", p)
		}
		b.ReportMetric(p.MeanFlushBytes/(1<<20), "flush-MiB")
		b.ReportMetric(p.PutsPerGiB, "PUTs/GiB")
		b.ReportMetric(p.MiBps, "MiB/s")
		b.ReportMetric(p.Ack.P99, "ack-p99-ms")
	}
}
