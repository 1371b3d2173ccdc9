package api

import (
	"encoding/base64"
	"net/http"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/membudget"
)

// search serves a fetch with a filter (GET .../records?key=K or ?contains=T, with
// end_offset): the core scans the range and answers only the records that match
// (broker.Search); next_offset is where its scan stopped.
func (a *API) search(w http.ResponseWriter, r *http.Request, ti broker.TopicInfo, part int32, fp fetchParams) *problem {
	q := r.URL.Query()
	offset, p := a.startOffset(r, ti.Name, part, q.Get("offset"), "earliest", fp.isolation)
	if p != nil {
		return p
	}
	req := broker.SearchRequest{FetchRequest: fp.request(r, ti.Name, part, offset)}
	if s := q.Get("end_offset"); s != "" {
		n, ok := parseDigits(s, 1<<63-1)
		if !ok || n == 0 {
			return newProblem(CodeInvalidParameter, "end_offset %q must be a positive integer", truncate(s, 32)).with("parameter", "end_offset")
		}
		req.End = n
	}
	if q.Has("key") {
		// The key as the topic's key.format shows it: text for string and json, base64
		// for binary.
		s := q.Get("key")
		req.Key = []byte(s)
		if fp.render.keyFormat == formatBinary {
			b, err := base64.StdEncoding.Strict().DecodeString(s)
			if err != nil {
				return newProblem(CodeInvalidParameter, "key: the topic's keys are binary: give the key as base64 (%v)", err).with("parameter", "key")
			}
			req.Key = b
		}
	}
	if s := q.Get("contains"); s != "" {
		req.Contains = []byte(s)
	} else if q.Has("contains") {
		return newProblem(CodeInvalidParameter, "contains is empty: give the text to look for").with("parameter", "contains")
	}
	res, err := a.core.Search(r.Context(), principal(r), req)
	if err != nil {
		return a.problemFor(r, err)
	}
	out := broker.FetchResult{Records: res.Records, NextOffset: res.NextOffset, HighWatermark: res.HighWatermark,
		LastStableOffset: res.LastStableOffset, LogStartOffset: res.LogStartOffset}
	size := fetchResultSize(&out)
	if err := hold(r).Reserve(r.Context(), int64(size), a.cfg.MemoryWait, membudget.UseFetch); err != nil {
		return a.memoryProblem(r, broker.CapFetch, err)
	}
	writeJSONBytes(w, http.StatusOK, appendFetchResult(make([]byte, 0, size), &out, fp.render))
	return nil
}
