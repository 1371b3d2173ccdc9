package api

import (
	"bytes"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/acl"
	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/segment"
)

// fetchParams are the query parameters shared by fetch and tail.
type fetchParams struct {
	maxRecords int
	maxBytes   int64
	wait       time.Duration
	render     renderOpts
	// isolation is read_committed unless the client asks for read_uncommitted: an HTTP
	// reader sees no record of an open or aborted transaction by default.
	isolation broker.Isolation
	// decodeSchemas (?format=json): values framed for the schema registry are decoded
	// to JSON by the core (broker.DecodeValues), the rest shown as the json format
	// shows bytes.
	decodeSchemas bool
}

// fetchOrTail serves GET /v1/topics/{topic}/partitions/{partition}/records: a fetch
// (optionally long-polling with wait_ms), or, with Accept: text/event-stream, a tail.
func (a *API) fetchOrTail(w http.ResponseWriter, r *http.Request) *problem {
	name := topicParam(r)
	if p := a.authorize(r, acl.OpRead, acl.Topic(name)); p != nil {
		return p
	}
	// The cap is checked before any catalog read: past it, the request is refused at
	// once rather than after waiting for a catalog connection behind the streams and
	// polls the cap admitted (each of their loops reads the catalog), which under load
	// took longer than clients wait.
	kind := fetchKind(r)
	release, p := a.slots.acquire(kind)
	if p != nil {
		return p
	}
	defer release()
	ti, part, p := a.lookupPartition(r)
	if p != nil {
		return p
	}
	fp, p := a.parseFetchParams(r, ti)
	if p != nil {
		return p
	}
	if q := r.URL.Query(); q.Has("key") || q.Has("contains") || q.Has("end_offset") {
		if kind == kindStream || wantsRecordBatches(r) {
			return newProblem(CodeInvalidParameter, "key, contains and end_offset search a range: they apply to a JSON fetch, not a tail or record batches").
				with("parameter", "key")
		}
		return a.search(w, r, ti, part, fp)
	}
	if kind == kindStream {
		return a.tail(w, r, ti.Name, part, fp)
	}
	if wantsRecordBatches(r) { // Kafka v2 record batches instead of JSON (binary.go)
		return a.fetchBinary(w, r, ti.Name, part, fp)
	}
	if p := a.admitQuota(r, true); p != nil {
		return p
	}
	offset, p := a.startOffset(r, ti.Name, part, r.URL.Query().Get("offset"), "earliest", fp.isolation)
	if p != nil {
		return p
	}
	res, err := a.core.Fetch(r.Context(), principal(r), fp.request(r, ti.Name, part, offset))
	if err != nil {
		return a.problemFor(r, err)
	}
	if fp.decodeSchemas {
		if _, err := a.core.DecodeValues(r.Context(), principal(r), res.Records); err != nil {
			return a.problemFor(r, err)
		}
	}
	// The rendered answer is reserved before it is made, beside the records the
	// reader reserved; all of it until the answer is written (serve releases the hold).
	size := fetchResultSize(&res)
	if err := hold(r).Reserve(r.Context(), int64(size), a.cfg.MemoryWait, membudget.UseFetch); err != nil {
		return a.memoryProblem(r, broker.CapFetch, err)
	}
	a.holdForQuota(r, true, size)
	writeJSONBytes(w, http.StatusOK, appendFetchResult(make([]byte, 0, size), &res, fp.render))
	return nil
}

// request is the core's fetch of fp's limits from offset, its bytes reserved in the
// request's hold.
func (fp *fetchParams) request(r *http.Request, topic string, part int32, offset int64) broker.FetchRequest {
	return broker.FetchRequest{Topic: topic, Partition: part, Offset: offset, MaxRecords: fp.maxRecords, MaxBytes: fp.maxBytes, Wait: fp.wait,
		Memory: hold(r), Isolation: fp.isolation}
}

func (a *API) parseFetchParams(r *http.Request, ti broker.TopicInfo) (fetchParams, *problem) {
	q := r.URL.Query()
	var fp fetchParams
	if s := q.Get("max_records"); s != "" {
		n, ok := parseDigits(s, 1<<31-1)
		if !ok {
			return fp, newProblem(CodeInvalidParameter, "max_records %q must be a non-negative integer", truncate(s, 32)).with("parameter", "max_records")
		}
		fp.maxRecords = int(n)
	}
	if s := q.Get("max_bytes"); s != "" {
		n, ok := parseDigits(s, 1<<63-1)
		if !ok {
			return fp, newProblem(CodeInvalidParameter, "max_bytes %q must be a non-negative integer", truncate(s, 32)).with("parameter", "max_bytes")
		}
		fp.maxBytes = n
	}
	if s := q.Get("wait_ms"); s != "" {
		n, ok := parseDigits(s, 1<<63-1)
		if !ok {
			return fp, newProblem(CodeInvalidParameter, "wait_ms %q must be a non-negative integer", truncate(s, 32)).with("parameter", "wait_ms")
		}
		// The core caps it (broker.Config.MaxWait), whichever front end asked.
		fp.wait = millis(n)
	}
	switch s := q.Get("isolation"); s {
	case "", "read_committed":
		fp.isolation = broker.ReadCommitted
	case "read_uncommitted":
		fp.isolation = broker.ReadUncommitted
	default:
		return fp, newProblem(CodeInvalidParameter, "isolation %q: use read_committed (the default) or read_uncommitted", truncate(s, 32)).with("parameter", "isolation")
	}
	var b64 bool
	switch s := q.Get(v1.ParamFormat); s {
	case "":
	case v1.FormatBase64:
		b64 = true
	case v1.FormatJSON:
		fp.decodeSchemas = true
	default:
		return fp, newProblem(CodeInvalidParameter, "format %q: use base64, or json to decode values framed for the schema registry", truncate(s, 32)).with("parameter", "format")
	}
	fp.render = newRenderOpts(ti.Config, b64)
	if fp.decodeSchemas {
		fp.render.valueFormat = formatJSON
	}
	return fp, nil
}

// startOffset resolves an offset parameter: digits, "earliest" (the log start) or
// "latest" (the high watermark: only records produced from now on; for a read_committed
// reader the last stable offset, so that an open transaction's records are not skipped
// once committed). def is used when the parameter is absent.
func (a *API) startOffset(r *http.Request, topic string, part int32, s, def string, iso broker.Isolation) (int64, *problem) {
	if s == "" {
		s = def
	}
	if s == "earliest" || s == "latest" {
		at := broker.Earliest
		if s == "latest" {
			at = broker.Latest
		}
		off, err := a.core.ListOffsetAt(r.Context(), principal(r), topic, part, at, iso)
		if err != nil {
			return 0, a.problemFor(r, err)
		}
		return off, nil
	}
	n, ok := parseDigits(s, 1<<63-1)
	if !ok {
		return 0, newProblem(CodeInvalidOffset, "offset %q must be a non-negative integer, earliest or latest", truncate(s, 32))
	}
	return n, nil
}

// millis is n milliseconds, saturating where a Duration would overflow.
func millis(n int64) time.Duration {
	if n > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	if n < math.MinInt64/int64(time.Millisecond) {
		return math.MinInt64
	}
	return time.Duration(n) * time.Millisecond
}

// fetchKind is what a GET of records is, from its Accept header and wait_ms alone (a
// malformed wait_ms counts as a plain fetch; parseFetchParams refuses it).
func fetchKind(r *http.Request) streamKind {
	if wantsEventStream(r) {
		return kindStream
	}
	if n, ok := parseDigits(r.URL.Query().Get("wait_ms"), 1<<63-1); ok && n > 0 {
		return kindLongPoll
	}
	return kindFetch
}

// wantsEventStream reports whether the client accepts text/event-stream.
func wantsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// fetchResultSize is about the size of res's response body: the buffer it is rendered
// into, and what is reserved for it.
func fetchResultSize(res *broker.FetchResult) int {
	size := 96
	for i := range res.Records {
		size += recordJSONSize(&res.Records[i])
	}
	return size
}

// recordJSONSize is about the size of one record rendered as JSON: base64 grows by a
// third; 64 covers the fixed members.
func recordJSONSize(rec *segment.DecodedRecord) int {
	size := 64 + (len(rec.Key)+len(rec.Value))*4/3
	for _, h := range rec.Headers {
		size += 24 + len(h.Key) + len(h.Value)*4/3
	}
	return size
}

// appendFetchResult appends the fetch response body.
func appendFetchResult(dst []byte, res *broker.FetchResult, o renderOpts) []byte {
	if dst == nil {
		dst = make([]byte, 0, fetchResultSize(res))
	}
	var scratch bytes.Buffer
	dst = append(dst, `{"records":[`...)
	for i := range res.Records {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendRecord(dst, &res.Records[i], o, &scratch)
	}
	dst = append(dst, `],"next_offset":`...)
	dst = strconv.AppendInt(dst, res.NextOffset, 10)
	dst = append(dst, `,"high_watermark":`...)
	dst = strconv.AppendInt(dst, res.HighWatermark, 10)
	dst = append(dst, `,"last_stable_offset":`...)
	dst = strconv.AppendInt(dst, res.LastStableOffset, 10)
	dst = append(dst, `,"log_start_offset":`...)
	dst = strconv.AppendInt(dst, res.LogStartOffset, 10)
	return append(dst, "}\n"...)
}
