package api

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/internal/membudget"
)

// tail streams a partition as Server-Sent Events: one event per record, its id the
// record's offset and its data the record's JSON (as in a fetch). Last-Event-ID, which
// browsers' EventSource resends on reconnect, resumes after that offset and overrides
// ?offset (default: latest, so a bare tail shows what is produced from now on). Idle
// periods send a comment line every HeartbeatInterval. The stream ends when the client
// goes away, or after an "error" event carrying a problem body (e.g. retention moved
// the log start past the stream's position).
func (a *API) tail(w http.ResponseWriter, r *http.Request, topic string, part int32, fp fetchParams) *problem {
	var offset int64
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, ok := parseDigits(id, 1<<63-2)
		if !ok {
			return newProblem(CodeInvalidOffset, "Last-Event-ID %q must be the offset of the last event received", truncate(id, 32))
		}
		offset = n + 1
	} else {
		var p *problem
		if offset, p = a.startOffset(r, topic, part, r.URL.Query().Get("offset"), "latest", fp.isolation); p != nil {
			return p
		}
	}

	rc := http.NewResponseController(w)
	// The stream outlives any server WriteTimeout meant for ordinary requests.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)

	buf := make([]byte, 0, 4096)
	buf = append(buf, ": tailing "...)
	buf = append(buf, topic...)
	buf = append(buf, '/')
	buf = strconv.AppendInt(buf, int64(part), 10)
	buf = append(buf, " from offset "...)
	buf = strconv.AppendInt(buf, offset, 10)
	buf = append(buf, "\n\n"...)
	if !sendEvents(w, rc, buf) {
		return nil
	}

	ctx := r.Context()
	wait := a.cfg.HeartbeatInterval
	var scratch bytes.Buffer
	// Each batch of events is reserved in the stream's hold — the records as the
	// reader takes them, then the events rendered — and released once it is sent: an
	// idle stream holds nothing, and a stream whose client does not read holds one
	// batch until its write stalls out. The render buffer is not kept beyond a small
	// one between batches, so a thousand idle streams hold no large buffers.
	mem := hold(r)
	for {
		mem.Release()
		if cap(buf) > maxIdleTailBuffer {
			buf = make([]byte, 0, 4096)
		}
		if scratch.Cap() > maxIdleTailBuffer {
			scratch = bytes.Buffer{}
		}
		started := time.Now()
		req := fp.request(r, topic, part, offset)
		req.Wait = wait
		res, err := a.core.Fetch(ctx, principal(r), req)
		if ctx.Err() != nil {
			return nil // the client went away
		}
		if err == nil && fp.decodeSchemas {
			_, err = a.core.DecodeValues(ctx, principal(r), res.Records)
		}
		if err == nil && mem.Reserve(ctx, int64(tailEventsSize(&res)), a.cfg.MemoryWait, membudget.UseFetch) != nil {
			err = &broker.Error{Code: broker.CodeMemoryExhausted}
		}
		if err != nil && broker.AsError("tail", err).Code == broker.CodeMemoryExhausted {
			// No room for the batch now: wait as an idle stream does, then try again.
			a.metrics.memoryRefused.Inc()
			mem.Release()
			if ctxwait.Sleep(ctx, wait-time.Since(started)) != nil || !sendEvents(w, rc, []byte(": heartbeat\n\n")) {
				return nil
			}
			continue
		}
		if err != nil {
			p := a.problemFor(r, err)
			buf = append(buf[:0], "event: error\ndata: "...)
			buf = append(buf, problemBody(r, p)...)
			buf = append(buf, "\n\n"...)
			sendEvents(w, rc, buf)
			return nil
		}
		if len(res.Records) == 0 {
			if res.NextOffset > offset {
				// Past a transaction marker, an aborted batch or a gap compacted away: no
				// record, but progress, so look again at once — a record committed after
				// a marker must not wait out the heartbeat interval.
				offset = res.NextOffset
				continue
			}
			// A reader that answers before the wait is up must not make this loop spin:
			// idle time is paced here, whatever the reader does.
			if ctxwait.Sleep(ctx, wait-time.Since(started)) != nil {
				return nil
			}
			if !sendEvents(w, rc, []byte(": heartbeat\n\n")) {
				return nil
			}
			continue
		}
		buf = buf[:0]
		for i := range res.Records {
			rec := &res.Records[i]
			buf = append(buf, "id: "...)
			buf = strconv.AppendInt(buf, rec.Offset, 10)
			buf = append(buf, "\ndata: "...)
			buf = appendRecord(buf, rec, fp.render, &scratch)
			buf = append(buf, "\n\n"...)
		}
		if !sendEvents(w, rc, buf) {
			return nil
		}
		next := res.Records[len(res.Records)-1].Offset + 1
		offset = max(next, res.NextOffset)
	}
}

// maxIdleTailBuffer is the largest render buffer a tail keeps between batches.
const maxIdleTailBuffer = 64 << 10

// tailEventsSize is about the size of res's records rendered as events.
func tailEventsSize(res *broker.FetchResult) int {
	size := 0
	for i := range res.Records {
		size += 32 + recordJSONSize(&res.Records[i])
	}
	return size
}

// sendEvents writes and flushes; false when the client is gone.
func sendEvents(w http.ResponseWriter, rc *http.ResponseController, b []byte) bool {
	if _, err := w.Write(b); err != nil {
		return false
	}
	return rc.Flush() == nil
}
