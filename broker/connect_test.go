package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// CommitSource: records and source offsets land together under a current fence; a
// stale fence refuses both; offsets alone commit without records, still fenced.
func TestCommitSource(t *testing.T) {
	b, cat := newRealCore(t)
	ctx := t.Context()
	who := Anonymous
	if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: "lines", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cat.PutConnector(ctx, catalog.ConnectorSpec{Name: "src", Type: catalog.ConnectorSource,
		Tasks: []map[string]string{{"file": "/in"}}}, false); err != nil {
		t.Fatal(err)
	}
	a, err := cat.WorkerHeartbeat(ctx, catalog.WorkerBeat{Worker: "w1", Lease: time.Minute})
	if err != nil || len(a.Tasks) != 1 {
		t.Fatalf("claim: %v %+v", err, a)
	}
	fence := a.Tasks[0].TaskFence
	at := func(pos int) catalog.SourceCommit {
		return catalog.SourceCommit{Fence: fence, Offsets: []catalog.SourceOffset{{Partition: `{"file":"/in"}`, Offset: `{"position":` + strconv.Itoa(pos) + `}`}}}
	}
	recs := []Record{{Topic: "lines", Partition: -1, Value: []byte(`{"a":1}`), Timestamp: -1}, {Topic: "lines", Partition: -1, Value: []byte(`{"a":2}`), Timestamp: -1}}
	res, err := b.CommitSource(ctx, who, SourceRequest{Records: recs, Source: at(16)})
	if err != nil || len(res.Offsets) != 2 || res.Offsets[1].Offset != 1 {
		t.Fatalf("commit: %v %+v", err, res)
	}
	wantOffset := func(want string) {
		t.Helper()
		offs, err := cat.ConnectorOffsets(ctx, "src")
		if err != nil || len(offs) != 1 || offs[0].Offset != want {
			t.Fatalf("offsets %+v, %v; want %s", offs, err, want)
		}
	}
	wantOffset(`{"position":16}`)
	// A heartbeat: offsets alone.
	if _, err := b.CommitSource(ctx, who, SourceRequest{Source: at(20)}); err != nil {
		t.Fatal(err)
	}
	wantOffset(`{"position":20}`)
	// The task restarts: the old instance's records and offsets are refused together.
	if _, err := cat.RestartTasks(ctx, "src", 0, false); err != nil {
		t.Fatal(err)
	}
	wantCode(t, second(b.CommitSource(ctx, who, SourceRequest{Records: recs, Source: at(40)})), CodeStaleGeneration)
	wantCode(t, second(b.CommitSource(ctx, who, SourceRequest{Source: at(40)})), CodeStaleGeneration)
	wantOffset(`{"position":20}`)
	parts, err := cat.Partitions(ctx, mustTopic(t, b, "lines").ID)
	if err != nil || parts[0].HighWatermark != 2 {
		t.Fatalf("a refused commit's records are visible: %+v %v", parts, err)
	}
	// Shapes are refused before anything is written.
	bad := at(1)
	bad.Offsets[0].Partition = `{ "file": "/in" }`
	wantCode(t, second(b.CommitSource(ctx, who, SourceRequest{Records: recs, Source: bad})), CodeInvalidRequest)
	wantCode(t, second(b.CommitSource(ctx, who, SourceRequest{Records: []Record{{Topic: "nope", Partition: -1, Timestamp: -1}}, Source: at(1)})), CodeTopicNotFound)
}

func mustTopic(t *testing.T, b *Broker, name string) catalog.Topic {
	t.Helper()
	ti, err := b.Topic(t.Context(), Anonymous, name)
	if err != nil {
		t.Fatal(err)
	}
	return ti
}
