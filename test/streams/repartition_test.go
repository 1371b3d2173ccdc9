package streams

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
)

// TestRepartitionExactlyOnce: a re-keyed aggregation (count of records per value, the
// inputs keyed by something else) through <app>-by-color-repartition with two
// instances: the counts are exact, and consumed repartition records are deleted below
// the committed offsets.
func TestRepartitionExactlyOnce(t *testing.T) {
	const n = 6000
	nd := startNode(t)
	c := client.New(nd.url)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	createTopics(t, c, 4, "things")
	if _, err := c.CreateTopic(ctx, "color-counts", 2, map[string]string{"value.format": "string"}); err != nil {
		t.Fatal(err)
	}
	colors := []string{"red", "green", "blue"}
	var recs []client.Record
	for i := range n {
		recs = append(recs, client.Record{Key: client.String(fmt.Sprintf("thing-%d", i)), Value: client.String(colors[i%3])})
	}
	p, err := c.NewProducer(ctx, client.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Produce(ctx, "things", recs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	build := func() *streams.Builder {
		b := streams.NewBuilder("colors")
		in := streams.From(b, "things", serde.String, serde.JSON[string]()) // value.format json
		cnt := streams.Count(streams.GroupBy(in, func(_, color string) string { return color }, streams.With(serde.String, serde.String)), "by-color")
		streams.MapValues(cnt.Changes(), func(ch streams.Change[int64]) string { return fmt.Sprint(*ch.New) }).To("color-counts", serde.String, serde.String)
		return b
	}
	var stops []func()
	var apps []*streams.App
	for i := range 2 {
		app, stop := runApp(t, build(), streams.Config{Client: c, InstanceID: fmt.Sprintf("colors-%d", i), StateDir: t.TempDir(), MaxCommitRecords: 200})
		apps, stops = append(apps, app), append(stops, stop)
	}
	final := map[string]string{}
	defer func() {
		if t.Failed() {
			t.Logf("final counts %v; metrics %+v %+v", final, apps[0].Metrics(), apps[1].Metrics())
		}
	}()
	testwait.Until(t, time.Minute, "the final counts of every color", func() bool {
		for _, r := range readAll(t, c, "color-counts") {
			k, _ := r.KeyBytes()
			v, _ := r.ValueBytes()
			final[string(k)] = string(v)
		}
		return final["red"] == fmt.Sprint(n/3) && final["green"] == fmt.Sprint(n/3) && final["blue"] == fmt.Sprint(n/3)
	})
	// A purge runs at most every 5s per task, and deletes below committed offsets.
	var purges int64
	deletedBelow := func() (deleted int64) {
		parts, err := c.Partitions(ctx, "colors-by-color-repartition")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			deleted += p.LogStartOffset
		}
		return deleted
	}
	testwait.Until(t, time.Minute, "a repartition purge that deleted records", func() bool {
		purges = 0
		for _, a := range apps {
			purges += a.Metrics().RepartitionPurges
		}
		return purges > 0 && deletedBelow() > 0
	})
	for _, stop := range stops {
		stop()
	}
	// Each count update appears once: 3 colors, n/3 updates each, no duplicates.
	outs := readAll(t, c, "color-counts")
	if len(outs) != n {
		t.Errorf("%d count updates, want %d (one per input, exactly once)", len(outs), n)
	}
	parts, err := c.Partitions(ctx, "colors-by-color-repartition")
	if err != nil {
		t.Fatal(err)
	}
	var deleted int64
	for _, p := range parts {
		deleted += p.LogStartOffset
	}
	t.Logf("repartition purges %d; records deleted below committed offsets: %d of %d", purges, deleted, n)
	if purges == 0 || deleted == 0 {
		t.Errorf("consumed repartition records were not deleted (purges %d, log starts %v)", purges, parts)
	}
	if topo := apps[0].Topology().Describe(); !strings.Contains(topo, "colors-by-color-repartition") {
		t.Errorf("topology %s", topo)
	}
}
