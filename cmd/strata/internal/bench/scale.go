package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/strata-io/strata/client"
)

// The scale phase: fetch latency from a partition seeded to Config.ScaleRecords.

// scale seeds one partition to 10 K records and one to cfg.ScaleRecords, both as chunk
// rows copied from a real chunk, and compares fetch latency at random offsets.
func (b *runner) scale(ctx context.Context, c *client.Client) (*Scale, error) {
	cfg := &b.cfg
	topic := cfg.Topic + "-scale"
	const small = 10_000
	per := cfg.ScaleChunkRecords
	sc := &Scale{SmallRecords: small, LargeRecords: cfg.ScaleRecords, ChunkRecords: per, CatalogKind: cfg.DB.Kind()}
	b.log.Info("phase: scale", "records", cfg.ScaleRecords, "per_chunk", per)
	formats := map[string]string{"key.format": "string", "value.format": "string"}
	if _, err := c.CreateTopic(ctx, topic, 2, formats); err != nil {
		return nil, fmt.Errorf("bench: create topic %s: %w", topic, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := cfg.DB.unseed(dctx, topic); err != nil {
			b.rep.Notes = append(b.rep.Notes, err.Error())
		}
		_ = c.DeleteTopic(dctx, topic)
	}()
	valueSize := min(cfg.RecordSize, 256)
	recs := make([]client.RawRecord, per)
	for i := range recs {
		recs[i] = client.RawRecord{Key: []byte("k"), Value: payload(i, valueSize)}
	}
	for p := range int32(2) {
		if _, err := c.ProduceBinary(ctx, topic, p, recs, client.BatchOptions{}); err != nil {
			return nil, fmt.Errorf("bench: scale: %w", err)
		}
	}
	start := time.Now()
	for p, n := range []int64{small, cfg.ScaleRecords} {
		rows, err := cfg.DB.seed(ctx, topic, int32(p), n)
		if err != nil {
			return nil, err
		}
		sc.RowsSeeded += rows
	}
	sc.SeedSeconds = time.Since(start).Seconds()

	fetchAt := func(p int32, off int64) (time.Duration, error) {
		node := cfg.Nodes[0] // one node: its cache holds the one block after the first fetch
		// A consumer's fetch of one chunk's worth: the lookup's byte budget is then the
		// same for both partitions, whatever lies beyond it.
		u := node + "/v1/topics/" + topic + "/partitions/" + strconv.Itoa(int(p)) + "/records?max_records=" + strconv.Itoa(per) +
			"&max_bytes=" + strconv.Itoa(per*valueSize) + "&offset=" + strconv.FormatInt(off, 10)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		req.Header.Set("Accept", client.RecordBatchContentType)
		t := time.Now()
		resp, err := b.hc.Do(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			return 0, fmt.Errorf("bench: scale fetch %s/%d at %d: HTTP %d", topic, p, off, resp.StatusCode)
		}
		return time.Since(t), nil
	}
	// Warm up both (connections, the block, the statement cache), then alternate.
	for range 20 {
		for p, n := range []int64{small, cfg.ScaleRecords} {
			if _, err := fetchAt(int32(p), rand.Int64N(n)); err != nil {
				return nil, err
			}
		}
	}
	const fetches = 300
	var ds [2][]time.Duration
	for range fetches {
		for p, n := range []int64{small, cfg.ScaleRecords} {
			d, err := fetchAt(int32(p), rand.Int64N(n))
			if err != nil {
				return nil, err
			}
			ds[p] = append(ds[p], d)
		}
	}
	sc.FetchesPerSet = fetches
	sc.Small, sc.Large = summarize(ds[0]), summarize(ds[1])
	if sc.Small.P50 > 0 {
		sc.P50Ratio = sc.Large.P50 / sc.Small.P50
	}
	b.log.Info("phase done", "phase", "scale", "small_p50_ms", sc.Small.P50, "large_p50_ms", sc.Large.P50, "seeded_rows", sc.RowsSeeded)
	return sc, nil
}
