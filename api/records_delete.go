package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/strata-io/strata/catalog"
)

// RecordDeleter advances a partition's log start offset: Kafka's DeleteRecords.
// catalog.Compaction has it; the API uses it when its Catalog does (both catalog
// backends), and answers role_unavailable otherwise.
type RecordDeleter interface {
	DeleteRecords(ctx context.Context, topicID int64, partition int32, offset int64) (catalog.PartitionInfo, error)
}

var _ RecordDeleter = catalog.Compaction(nil)

// deleteRecordsRequest is the body of POST .../partitions/{partition}/records:delete.
type deleteRecordsRequest struct {
	// BeforeOffset: every record below it is deleted; -1 means the high watermark
	// (everything written so far), as in Kafka.
	BeforeOffset *int64 `json:"before_offset"`
}

// deleteRecords serves POST /v1/topics/{topic}/partitions/{partition}/records:delete:
// the log start offset moves up to before_offset (never down), so fetches below it get
// offset_out_of_range at once; the compactor deletes the data behind it later, safely.
// Stream processing uses it to purge consumed repartition topics.
func (a *API) deleteRecords(w http.ResponseWriter, r *http.Request) {
	if !a.needCatalog(w, r) {
		return
	}
	rd, ok := a.cat.(RecordDeleter)
	if !ok {
		writeProblem(w, r, newProblem(CodeRoleUnavailable, "this node's catalog cannot delete records"))
		return
	}
	body, p := readBody(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	var req deleteRecordsRequest
	if p := decodeStrict(body, &req); p != nil {
		writeProblem(w, r, p)
		return
	}
	if req.BeforeOffset == nil || *req.BeforeOffset < -1 {
		writeProblem(w, r, newProblem(CodeInvalidOffset, "before_offset must be an offset (records below it are deleted) or -1 for the high watermark"))
		return
	}
	ti, part, p := a.topicPartition(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	offset := *req.BeforeOffset
	if offset == -1 {
		pi, p := a.partitionInfo(r, ti, part)
		if p != nil {
			writeProblem(w, r, p)
			return
		}
		offset = pi.HighWatermark
	}
	pi, err := rd.DeleteRecords(r.Context(), ti.topic.ID, part, offset)
	if err != nil {
		writeProblem(w, r, a.catalogProblem(r, "delete records", err))
		return
	}
	b, _ := json.Marshal(partitionJSON{pi.Partition, pi.LogStartOffset, pi.HighWatermark, pi.Bytes})
	writeJSONBytes(w, http.StatusOK, append(b, '\n'))
}
