package catalogtest

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// notFoundID is a topic id no test creates.
const notFoundID = int64(1) << 62

func testCreateAndDescribe(t *testing.T, c catalog.Catalog) {
	ctx := t.Context()
	name := Name(t, "orders")
	before := time.Now().Add(-time.Minute)
	created, err := c.CreateTopic(ctx, name, 3, map[string]string{"retention.ms": "3600000", "value.format": "string"})
	if err != nil {
		t.Fatal(err)
	}
	wantConfigs := map[string]string{"retention.ms": "3600000", "value.format": "string"}
	if created.ID <= 0 || created.Name != name || created.Partitions != 3 || !maps.Equal(created.Configs, wantConfigs) {
		t.Fatalf("created %+v", created)
	}
	if created.CreatedAt.Before(before) || created.CreatedAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("CreatedAt %s is not about now", created.CreatedAt)
	}
	for what, get := range map[string]func() (catalog.Topic, error){
		"Topic":     func() (catalog.Topic, error) { return c.Topic(ctx, name) },
		"TopicByID": func() (catalog.Topic, error) { return c.TopicByID(ctx, created.ID) },
	} {
		got, err := get()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.ID != created.ID || got.Name != name || got.Partitions != 3 || !maps.Equal(got.Configs, wantConfigs) ||
			!got.CreatedAt.Equal(created.CreatedAt) {
			t.Fatalf("%s = %+v, want %+v", what, got, created)
		}
	}
	all, err := c.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tp := range all {
		found = found || tp.ID == created.ID
	}
	if !found {
		t.Fatalf("Topics does not list %s", name)
	}
	ps, err := c.Partitions(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 {
		t.Fatalf("%d partitions, want 3", len(ps))
	}
	for i, p := range ps {
		if p != (catalog.PartitionInfo{TopicID: created.ID, Partition: int32(i)}) {
			t.Fatalf("partition %d = %+v, want empty at offset 0", i, p)
		}
	}

	// No configs: an empty set, and the defaults apply.
	plain, err := c.CreateTopic(ctx, Name(t, "plain"), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Configs) != 0 || plain.ID == created.ID {
		t.Fatalf("created %+v", plain)
	}
}

func testTopicExists(t *testing.T, c catalog.Catalog) {
	tp := SeedTopic(t, c, "dup", 1, nil)
	_, err := c.CreateTopic(t.Context(), tp.Name, 2, nil)
	wantErr(t, "create again", err, catalog.ErrTopicExists)
	got, err := c.Topic(t.Context(), tp.Name)
	if err != nil || got.ID != tp.ID || got.Partitions != 1 {
		t.Fatalf("after a refused create: %+v, %v", got, err)
	}
}

func testInvalidNames(t *testing.T, c catalog.Catalog) {
	for _, name := range []string{
		"", ".", "..", "a/b", "a b", "tópico", "a\x00b", "orders?x=1", strings.Repeat("a", 250), strings.Repeat("x", 5000),
	} {
		_, err := c.CreateTopic(t.Context(), name, 1, nil)
		wantErr(t, "create "+truncate(name), err, catalog.ErrInvalidTopicName)
		_, err = c.Topic(t.Context(), name)
		wantErr(t, "look up "+truncate(name), err, catalog.ErrTopicNotFound)
	}
	// The longest valid name, and the odd but valid characters.
	for _, name := range []string{Name(t, strings.Repeat("l", 236)), Name(t, "a.b_c-D")} {
		if _, err := c.CreateTopic(t.Context(), name, 1, nil); err != nil {
			t.Fatalf("create %d-character name: %v", len(name), err)
		}
	}
}

func truncate(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}

func testInvalidPartitions(t *testing.T, c catalog.Catalog) {
	for _, n := range []int32{0, -1, catalog.MaxPartitions + 1} {
		name := Name(t, "parts")
		_, err := c.CreateTopic(t.Context(), name, n, nil)
		wantErr(t, "create with partitions", err, catalog.ErrInvalidPartitions)
		_, err = c.Topic(t.Context(), name)
		wantErr(t, "look up refused topic", err, catalog.ErrTopicNotFound)
	}
}

func testInvalidConfigs(t *testing.T, c catalog.Catalog) {
	for _, tc := range []struct {
		configs map[string]string
		key     string
	}{
		{map[string]string{"retention.mss": "1"}, "retention.mss"},
		{map[string]string{"retention.ms": "soon"}, "retention.ms"},
		{map[string]string{"retention.ms": "-2"}, "retention.ms"},
		{map[string]string{"cleanup.policy": "shred"}, "cleanup.policy"},
		{map[string]string{"message.timestamp.type": "WallClock"}, "message.timestamp.type"},
		{map[string]string{"max.message.bytes": "0", "value.format": "json"}, "max.message.bytes"},
		// Beyond one day needs the operator's permission (catalog.Options.MaxTimestampAfterMs).
		{map[string]string{"message.timestamp.after.max.ms": "86400001"}, "message.timestamp.after.max.ms"},
	} {
		name := Name(t, "cfg")
		_, err := c.CreateTopic(t.Context(), name, 1, tc.configs)
		var ce *catalog.ConfigError
		if !errors.Is(err, catalog.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Key != tc.key {
			t.Fatalf("create with %v: %v, want a ConfigError for %s", tc.configs, err, tc.key)
		}
		_, err = c.Topic(t.Context(), name)
		wantErr(t, "look up refused topic", err, catalog.ErrTopicNotFound)
	}
}

func testUnknownTopic(t *testing.T, c catalog.Catalog) {
	ctx := t.Context()
	name := Name(t, "ghost")
	_, err := c.Topic(ctx, name)
	wantErr(t, "Topic", err, catalog.ErrTopicNotFound)
	_, err = c.TopicByID(ctx, notFoundID)
	wantErr(t, "TopicByID", err, catalog.ErrTopicNotFound)
	wantErr(t, "DeleteTopic", c.DeleteTopic(ctx, name), catalog.ErrTopicNotFound)
	_, err = c.UpdateTopic(ctx, name, 5, nil)
	wantErr(t, "UpdateTopic", err, catalog.ErrTopicNotFound)
	_, err = c.Partitions(ctx, notFoundID)
	wantErr(t, "Partitions", err, catalog.ErrTopicNotFound)
	_, err = c.Chunks(ctx, notFoundID, 0, 0, 1)
	wantErr(t, "Chunks", err, catalog.ErrTopicNotFound)
	_, err = c.OffsetForTime(ctx, notFoundID, 0, 0)
	wantErr(t, "OffsetForTime", err, catalog.ErrTopicNotFound)
}

func testTopicsOrdered(t *testing.T, c catalog.Catalog) {
	prefix := Name(t, "ord")
	for _, s := range []string{"c", "a", "b"} {
		if _, err := c.CreateTopic(t.Context(), prefix+"-"+s, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.Topics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for i, tp := range all {
		if i > 0 && all[i-1].Name >= tp.Name {
			t.Fatalf("Topics not ordered by name: %q before %q", all[i-1].Name, tp.Name)
		}
		if strings.HasPrefix(tp.Name, prefix) {
			ours = append(ours, tp.Name[len(prefix)+1:])
		}
	}
	if strings.Join(ours, ",") != "a,b,c" {
		t.Fatalf("Topics lists ours as %v, want a,b,c", ours)
	}
}

func testDeleteAndRecreate(t *testing.T, c catalog.Catalog) {
	ctx := t.Context()
	old := SeedTopic(t, c, "phoenix", 2, map[string]string{"retention.ms": "1000"})
	SeedRecords(t, c, old.ID, 0, 2, 5)
	if err := c.DeleteTopic(ctx, old.Name); err != nil {
		t.Fatal(err)
	}

	_, err := c.Topic(ctx, old.Name)
	wantErr(t, "Topic after delete", err, catalog.ErrTopicNotFound)
	_, err = c.TopicByID(ctx, old.ID)
	wantErr(t, "TopicByID after delete", err, catalog.ErrTopicNotFound)
	_, err = c.Partitions(ctx, old.ID)
	wantErr(t, "Partitions after delete", err, catalog.ErrTopicNotFound)
	_, err = c.Chunks(ctx, old.ID, 0, 0, 1<<20)
	wantErr(t, "Chunks after delete", err, catalog.ErrTopicNotFound)
	_, err = c.OffsetForTime(ctx, old.ID, 0, 0)
	wantErr(t, "OffsetForTime after delete", err, catalog.ErrTopicNotFound)
	wantErr(t, "DeleteTopic twice", c.DeleteTopic(ctx, old.Name), catalog.ErrTopicNotFound)
	all, err := c.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range all {
		if tp.ID == old.ID || tp.Name == old.Name {
			t.Fatalf("Topics lists the deleted topic: %+v", tp)
		}
	}
	res, err := c.Commit(ctx, Flush(NewKey(t), Req(B{TopicID: old.ID, Partition: 0, Records: 1})))
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "commit to the deleted topic", res[0].Err, catalog.ErrTopicNotFound)

	// Same name, new topic: a new id and none of the old data or configs.
	fresh, err := c.CreateTopic(ctx, old.Name, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.ID == old.ID || len(fresh.Configs) != 0 || fresh.Partitions != 1 {
		t.Fatalf("recreated %+v (old id %d)", fresh, old.ID)
	}
	if p := Partition(t, c, fresh.ID, 0); p.HighWatermark != 0 || p.Bytes != 0 {
		t.Fatalf("recreated topic's partition %+v", p)
	}
	l, err := c.Chunks(ctx, fresh.ID, 0, 0, 1<<20)
	if err != nil || len(l.Chunks) != 0 {
		t.Fatalf("recreated topic's chunks: %+v, %v", l, err)
	}
	got := MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: fresh.ID, Partition: 0, Records: 3})))
	if got[0].BaseOffsets[0] != 0 {
		t.Fatalf("first offset of the recreated topic = %d, want 0", got[0].BaseOffsets[0])
	}
	_, err = c.TopicByID(ctx, old.ID)
	wantErr(t, "old id after recreate", err, catalog.ErrTopicNotFound)
}

func testGrowAndConfigure(t *testing.T, c catalog.Catalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "grow", 2, map[string]string{"retention.ms": "1000"})
	SeedRecords(t, c, tp.ID, 1, 1, 4)

	got, err := c.UpdateTopic(ctx, tp.Name, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tp.ID || got.Partitions != 4 || !maps.Equal(got.Configs, map[string]string{"retention.ms": "1000"}) {
		t.Fatalf("grown %+v", got)
	}
	ps, err := c.Partitions(ctx, tp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 4 || ps[1].HighWatermark != 4 || ps[2].HighWatermark != 0 || ps[3].HighWatermark != 0 {
		t.Fatalf("partitions after growing: %+v", ps)
	}
	if res := MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 3, Records: 2}))); res[0].BaseOffsets[0] != 0 {
		t.Fatalf("new partition's first offset = %d", res[0].BaseOffsets[0])
	}

	for _, n := range []int32{3, 1, -1, catalog.MaxPartitions + 1} {
		_, err := c.UpdateTopic(ctx, tp.Name, n, nil)
		wantErr(t, "update partitions", err, catalog.ErrInvalidPartitions)
	}
	// Same count, and 0: unchanged.
	for _, n := range []int32{0, 4} {
		if got, err := c.UpdateTopic(ctx, tp.Name, n, nil); err != nil || got.Partitions != 4 {
			t.Fatalf("update to %d partitions: %+v, %v", n, got, err)
		}
	}

	got, err = c.UpdateTopic(ctx, tp.Name, 0, map[string]string{"retention.ms": "", "cleanup.policy": "compact"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cleanup.policy": "compact"}
	if got.Partitions != 4 || !maps.Equal(got.Configs, want) {
		t.Fatalf("configured %+v", got)
	}
	if again, err := c.Topic(ctx, tp.Name); err != nil || !maps.Equal(again.Configs, want) {
		t.Fatalf("Topic after configuring: %+v, %v", again, err)
	}

	// A bad update changes nothing, the partition count included.
	for _, bad := range []map[string]string{{"retention.ms": "x"}, {"bogus": "1"}, {"bogus": ""},
		{"message.timestamp.after.max.ms": "86400001"}} {
		_, err := c.UpdateTopic(ctx, tp.Name, 8, bad)
		wantErr(t, "bad config update", err, catalog.ErrInvalidConfig)
	}
	if again, err := c.Topic(ctx, tp.Name); err != nil || !maps.Equal(again.Configs, want) || again.Partitions != 4 {
		t.Fatalf("Topic after refused updates: %+v, %v", again, err)
	}
	if ps, err := c.Partitions(ctx, tp.ID); err != nil || len(ps) != 4 {
		t.Fatalf("partitions after refused updates: %d, %v", len(ps), err)
	}
}
