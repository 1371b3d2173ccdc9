package streams

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
)

// counting is a topology whose one store, "keys", counts records per key of
// restore-in: its changelog is restore-keys-changelog.
func counting() *streams.Builder {
	b := streams.NewBuilder("restore")
	in := streams.From(b, "restore-in", serde.String, serde.String)
	cnt := streams.Count(streams.GroupByKey(in), "keys")
	streams.MapValues(cnt.Changes(), func(c streams.Change[int64]) string {
		old := int64(-1)
		if c.Old != nil {
			old = *c.Old
		}
		return fmt.Sprintf("%d->%d", old, *c.New)
	}).To("restore-out", serde.String, serde.String)
	return b
}

// seedChangelog writes n keys "k0000000"… with count 1000+i straight into the store's
// changelog, as an earlier run of the application would have.
func seedChangelog(t testing.TB, c *client.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	createTopics(t, c, 1, "restore-in")
	if _, err := c.CreateTopic(ctx, "restore-out", 1, map[string]string{"value.format": "string"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "restore-keys-changelog", 1, map[string]string{"key.format": "binary", "value.format": "binary", "cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, client.ProducerConfig{Linger: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		v := binary.BigEndian.AppendUint64(nil, uint64(1000+i))
		if _, err := p.Send(ctx, "restore-keys-changelog", client.Record{Key: client.Binary(fmt.Appendf(nil, "k%07d", i)), Value: client.Binary(v), Partition: client.Int32(0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// runCounting runs the counting app with stateDir until its task runs, and returns
// how long that took and the app's counters; stop ends it.
func runCounting(t testing.TB, server, stateDir string) (took time.Duration, m streams.MetricsSnapshot, stop func()) {
	t.Helper()
	app, err := streams.New(counting(), streams.Config{Client: client.New(server), StateDir: stateDir, InstanceID: "restore-1", SessionTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- app.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Minute)
	for app.TaskStates()[streams.TaskID{}] != streams.TaskRunning {
		select {
		case err := <-done:
			t.Fatalf("app stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not run within 5 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	took = time.Since(start)
	return took, app.Metrics(), func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("app: %v", err)
		}
	}
}

// TestRestore: a wiped state directory is rebuilt from the changelog (every record
// replayed, values right); an intact one replays nothing already applied.
func TestRestore(t *testing.T) {
	const n = 20_000
	nd := startNode(t)
	c := client.New(nd.url)
	seedChangelog(t, c, n)
	dir := t.TempDir()

	_, m, stop := runCounting(t, nd.url, dir)
	if m.RestoredRecords != n {
		t.Errorf("wiped directory: restored %d records, want %d", m.RestoredRecords, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Produce(ctx, "restore-in", []client.Record{{Key: client.String("k0000007"), Value: client.String("x")}}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, time.Minute, "the count of the record produced after the restore", func() bool { return len(readAll(t, c, "restore-out")) == 1 })
	if v, _ := readAll(t, c, "restore-out")[0].ValueBytes(); string(v) != "1007->1008" {
		t.Errorf("count of k0000007 went %s, want 1007->1008 (the restored value plus one)", v)
	}
	stop()

	_, m, stop = runCounting(t, nd.url, dir)
	stop()
	if m.RestoredRecords != 0 {
		t.Errorf("intact directory: restored %d records, want 0 (everything was checkpointed)", m.RestoredRecords)
	}

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	_, m, stop = runCounting(t, nd.url, dir)
	stop()
	if m.RestoredRecords != n+1 {
		t.Errorf("wiped again: restored %d records, want %d", m.RestoredRecords, n+1)
	}
}
