package api

import (
	"encoding/json"
	"net/http"

	v1 "github.com/strata-io/strata/api/v1"
)

// deleteRecords serves POST /v1/topics/{topic}/partitions/{partition}/records:delete
// (broker.DeleteRecords): the log start offset moves up to before_offset (never down),
// so fetches below it get offset_out_of_range at once; the compactor deletes the data
// behind it later, safely.
func (a *API) deleteRecords(w http.ResponseWriter, r *http.Request) *problem {
	req, p := decodeJSON[v1.DeleteRecordsRequest](r)
	if p != nil {
		return p
	}
	if req.BeforeOffset == nil {
		return newProblem(CodeInvalidOffset, "before_offset must be an offset (records below it are deleted) or -1 for the high watermark")
	}
	name := topicParam(r)
	part, p := partitionParam(r)
	if p != nil {
		return p
	}
	pi, err := a.core.DeleteRecords(r.Context(), principal(r), name, part, *req.BeforeOffset)
	if err != nil {
		return a.problemFor(r, err)
	}
	b, _ := json.Marshal(toPartition(pi)) // plain data
	writeJSONBytes(w, http.StatusOK, append(b, '\n'))
	return nil
}
