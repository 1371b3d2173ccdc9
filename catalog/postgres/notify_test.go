package postgres

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
)

func TestWatermarkPayloads(t *testing.T) {
	for _, tc := range []struct {
		hw   map[catalog.TopicPartition]int64
		want []string
	}{
		{nil, nil},
		{map[catalog.TopicPartition]int64{{TopicID: 2, Partition: 1}: 7, {TopicID: 1, Partition: 10}: 0, {TopicID: 1, Partition: 2}: 42}, []string{"1:2:42,1:10:0,2:1:7"}},
	} {
		got := encodeWatermarks(tc.hw)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("encode %v: %q, want %q", tc.hw, got, tc.want)
		}
	}
	// Many partitions split into payloads under the NOTIFY limit, losing nothing.
	hw := map[catalog.TopicPartition]int64{}
	for p := range 3000 {
		hw[catalog.TopicPartition{TopicID: 1234567, Partition: int32(p)}] = 1 << 40
	}
	payloads := encodeWatermarks(hw)
	if len(payloads) < 2 {
		t.Errorf("3000 watermarks in %d payloads", len(payloads))
	}
	n := 0
	for _, p := range payloads {
		if len(p) > maxPayload {
			t.Errorf("payload of %d bytes", len(p))
		}
		ws, err := decodeWatermarks(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if hw[catalog.TopicPartition{TopicID: w.TopicID, Partition: w.Partition}] != w.HighWatermark {
				t.Errorf("decoded %+v", w)
			}
			n++
		}
	}
	if n != len(hw) {
		t.Errorf("decoded %d watermarks, want %d", n, len(hw))
	}
	for _, bad := range []string{"", "1:2", "1:2:x", "a:1:1", "1:99999999999:1", "1:2:3,", ":::"} {
		if ws, err := decodeWatermarks(bad); err == nil {
			t.Errorf("decode %q: %v, want an error", bad, ws)
		}
	}
}

func FuzzDecodeWatermarks(f *testing.F) {
	f.Add("1:2:42,1:10:0")
	f.Add("")
	f.Add("9223372036854775807:-2147483648:-1")
	f.Fuzz(func(t *testing.T, payload string) {
		ws, err := decodeWatermarks(payload)
		if err != nil {
			return
		}
		// What decodes re-encodes to something that decodes to the same watermarks
		// (duplicates coalesce to the highest).
		hw := map[catalog.TopicPartition]int64{}
		for _, w := range ws {
			tp := catalog.TopicPartition{TopicID: w.TopicID, Partition: w.Partition}
			if h, ok := hw[tp]; !ok || w.HighWatermark > h {
				hw[tp] = w.HighWatermark
			}
		}
		for _, p := range encodeWatermarks(hw) {
			again, err := decodeWatermarks(p)
			if err != nil {
				t.Fatalf("re-encoded %q does not decode: %v", p, err)
			}
			for _, w := range again {
				if hw[catalog.TopicPartition{TopicID: w.TopicID, Partition: w.Partition}] != w.HighWatermark {
					t.Fatalf("round trip of %q changed %+v", payload, w)
				}
			}
		}
	})
}

// TestListen: a commit wakes a listener with the new watermarks; after the listener's
// connection is killed, Listen reconnects and later commits wake it again; it returns
// nil when its context ends.
func TestListen(t *testing.T) {
	t.Parallel()
	c := openTest(t, catalog.Options{})
	ctx := context.Background()
	tp := mustTopic(t, c, "t", 2, nil)

	got := make(chan catalog.Watermark, 100)
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var listenErr error
	wg.Go(func() { listenErr = c.Listen(lctx, func(w catalog.Watermark) { got <- w }) })
	defer func() {
		stop()
		wg.Wait()
		if listenErr != nil {
			t.Errorf("listen returned %v after its context ended, want nil", listenErr)
		}
	}()
	waitListening(t, c, 1)

	if _, err := c.Commit(ctx, makeSegment(testKey(time.Now()), 10, []flushBatch{{tp.ID, 0, 3, 1}, {tp.ID, 1, 2, 1}})); err != nil {
		t.Fatal(err)
	}
	seen := map[int32]int64{}
	deadline := time.After(10 * time.Second)
	for seen[0] != 3 || seen[1] != 2 {
		select {
		case w := <-got:
			if w.TopicID == tp.ID {
				seen[w.Partition] = w.HighWatermark
			}
		case <-deadline:
			t.Fatalf("notifications %v, want partition 0 at 3 and 1 at 2", seen)
		}
	}

	// Kill the listening session; Listen must come back on a new one.
	old := listeningPIDs(t, c)
	if len(old) != 1 {
		t.Fatalf("listening sessions %v, want one", old)
	}
	if _, err := c.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, old[0]); err != nil {
		t.Fatal(err)
	}
	reconnectBy := time.Now().Add(20 * time.Second)
	for {
		pids := listeningPIDs(t, c)
		if len(pids) == 1 && pids[0] != old[0] {
			break
		}
		if time.Now().After(reconnectBy) {
			t.Fatalf("listening sessions %v after killing %d: no reconnect", pids, old[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.Commit(ctx, makeSegment(testKey(time.Now()), 10, []flushBatch{{tp.ID, 0, 1, 1}})); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-got:
		if w != (catalog.Watermark{TopicID: tp.ID, Partition: 0, HighWatermark: 4}) {
			t.Errorf("after reconnecting: %+v, want partition 0 at 4", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification after the listener reconnected")
	}
}

func listeningPIDs(t *testing.T, c *Catalog) []int32 {
	t.Helper()
	rows, err := c.pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database() AND query LIKE 'LISTEN%' ORDER BY pid`, listenApplicationName)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// waitListening waits until n sessions of this database listen for commits.
func waitListening(t *testing.T, c *Catalog, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(listeningPIDs(t, c)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d listening sessions", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
