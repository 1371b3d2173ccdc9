package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// deletingCluster is the fake catalog with DeleteRecords, following the shared rule
// (catalog.NewLogStart).
type deletingCluster struct{ *fakeCluster }

func (c deletingCluster) DeleteRecords(ctx context.Context, topicID int64, partition int32, offset int64) (catalog.PartitionInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topicByID(topicID)
	if !ok {
		return catalog.PartitionInfo{}, fmt.Errorf("topic id %d: %w", topicID, catalog.ErrTopicNotFound)
	}
	if partition >= t.Partitions {
		return catalog.PartitionInfo{}, fmt.Errorf("partition %d: %w", partition, catalog.ErrPartitionOutOfRange)
	}
	k := tp{topicID, partition}
	info := catalog.PartitionInfo{TopicID: topicID, Partition: partition, LogStartOffset: c.logStart[k],
		HighWatermark: c.logStart[k] + int64(len(c.logs[k]))}
	start, err := catalog.NewLogStart(info, offset)
	if err != nil {
		return info, err
	}
	c.logs[k] = c.logs[k][start-info.LogStartOffset:]
	c.logStart[k] = start
	info.LogStartOffset = start
	return info, nil
}

func TestDeleteRecords(t *testing.T) {
	e := newEnv(t, Config{}, func(d *testDeps) { d.Catalog = deletingCluster{d.Catalog.(*fakeCluster)} })
	e.createTopic("t", 2, nil)
	for i := range 5 {
		e.c.appendRaw("t", 1, segment.DecodedRecord{Timestamp: int64(i), Value: []byte(`1`)})
	}
	const path = "/v1/topics/t/partitions/1/records:delete"

	rec := e.do("POST", path, `{"before_offset":3}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("delete records: %d %s", rec.Code, rec.Body)
	}
	var got partitionJSON
	decodeBody(t, rec, &got)
	if want := (partitionJSON{Partition: 1, LogStartOffset: 3, HighWatermark: 5}); got != want {
		t.Fatalf("answer %+v, want %+v", got, want)
	}
	// A fetch below the new log start is out of range; from it, the rest is there.
	wantProblem(t, e.do("GET", "/v1/topics/t/partitions/1/records?offset=2", ""), 416, CodeOffsetOutOfRange)
	if rec := e.do("GET", "/v1/topics/t/partitions/1/records?offset=3", ""); rec.Code != 200 {
		t.Fatalf("fetch at the log start: %d %s", rec.Code, rec.Body)
	}
	// Never backwards.
	decodeBody(t, e.do("POST", path, `{"before_offset":1}`), &got)
	if got.LogStartOffset != 3 {
		t.Fatalf("log start %d after deleting below it, want 3 unchanged", got.LogStartOffset)
	}
	// -1 is the high watermark.
	decodeBody(t, e.do("POST", path, `{"before_offset":-1}`), &got)
	if got.LogStartOffset != 5 || got.HighWatermark != 5 {
		t.Fatalf("delete all: %+v", got)
	}

	wantProblem(t, e.do("POST", path, `{"before_offset":6}`), 416, CodeOffsetOutOfRange)
	wantProblem(t, e.do("POST", path, `{}`), 400, CodeInvalidOffset)
	wantProblem(t, e.do("POST", path, `{"before_offset":-2}`), 400, CodeInvalidOffset)
	wantProblem(t, e.do("POST", path, `{"before_offset":"3"}`), 400, CodeInvalidRequest)
	wantProblem(t, e.do("POST", path, `{"before_offset":1,"x":1}`), 400, CodeInvalidRequest)
	wantProblem(t, e.do("POST", path, `{"before_offset":1`), 400, CodeInvalidJSON)
	wantProblem(t, e.do("POST", path, `{"before_offset":1}`, header{"Content-Type", "text/plain"}), 415, CodeUnsupportedMediaType)
	wantProblem(t, e.do("POST", "/v1/topics/t/partitions/2/records:delete", `{"before_offset":0}`), 404, CodePartitionOutOfRange)
	wantProblem(t, e.do("POST", "/v1/topics/nope/partitions/0/records:delete", `{"before_offset":0}`), 404, CodeTopicNotFound)
	wantProblem(t, e.do("POST", "/v1/topics/t/partitions/x/records:delete", `{"before_offset":0}`), 400, CodeInvalidPartition)

	// A catalog without DeleteRecords: the route says so.
	plain := newEnv(t, Config{})
	plain.createTopic("t", 1, nil)
	wantProblem(t, plain.do("POST", "/v1/topics/t/partitions/0/records:delete", `{"before_offset":0}`), 503, CodeRoleUnavailable)
}
