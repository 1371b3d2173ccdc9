package api

import (
	"net/http"
	"sync"
)

// admission bounds the bytes of produce request bodies a node holds at once: being
// read, decoded, or waiting in the writer for their flush. The writer's own buffer cap
// (429 buffer_full) is checked only once a body has been read and decoded; under
// overload, hundreds of producers' bodies would be in memory by then, to be refused
// after costing their memory and CPU. Admission refuses first, by the declared
// Content-Length, before a byte of the body is read: back-pressure rather than growth.
type admission struct {
	max int64

	mu   sync.Mutex
	held int64
}

// acquire reserves n bytes. It always admits a request when nothing is held, so a
// body larger than the limit (but within MaxBodyBytes) is slowed, never starved.
func (ad *admission) acquire(n int64) bool {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if ad.held > 0 && ad.held+n > ad.max {
		return false
	}
	ad.held += n
	return true
}

func (ad *admission) release(n int64) {
	ad.mu.Lock()
	ad.held -= n
	ad.mu.Unlock()
}

// admitProduce wraps a produce handler with admission. A body of unknown length
// (chunked) is counted at the largest size allowed.
func (a *API) admitProduce(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if n < 0 || n > a.cfg.MaxBodyBytes {
			n = a.cfg.MaxBodyBytes
		}
		if !a.admission.acquire(n) {
			writeProblem(w, r, newProblem(CodeBufferFull, "this node holds its limit of produce bytes in flight; retry after a short wait").
				with("max_inflight_produce_bytes", a.cfg.MaxInflightProduceBytes))
			return
		}
		defer a.admission.release(n)
		next.ServeHTTP(w, r)
	})
}
