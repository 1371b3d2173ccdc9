package api

import (
	"net/http"
	"sync"

	"github.com/strata-io/strata/internal/membudget"
)

// admission bounds the bytes of produce request bodies a node holds at once: being
// read, decoded, or waiting in the writer for their flush. The writer's own buffer cap
// (429 buffer_full) is checked only once a body has been read and decoded; under
// overload, hundreds of producers' bodies would be in memory by then, to be refused
// after costing their memory and CPU. Admission refuses first, by the declared
// Content-Length, before a byte of the body is read: back-pressure rather than growth.
//
// A body is admitted by its declared length before it arrives, so a client that
// declares large bodies and then stalls holds that much until the body timeout ends
// it; one principal may therefore hold at most membudget.OwnerShare of the limit in
// bodies still arriving (none held: always admitted), the rest staying for others.
type admission struct {
	max int64

	mu     sync.Mutex
	held   int64
	unread map[string]int64 // per principal: admitted bytes whose bodies have not arrived
}

func newAdmission(max int64) *admission {
	return &admission{max: max, unread: map[string]int64{}}
}

// acquire reserves n bytes for a body still to arrive from owner ("": no one to share
// between, without authentication). It always admits a request when nothing is held,
// so a body larger than the limit (but within MaxBodyBytes) is slowed, never starved.
func (ad *admission) acquire(owner string, n int64) bool {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if ad.held > 0 && ad.held+n > ad.max {
		return false
	}
	if owner != "" {
		u := ad.unread[owner]
		if u > 0 && u+n > int64(membudget.OwnerShare*float64(ad.max)) {
			return false
		}
		ad.unread[owner] = u + n
	}
	ad.held += n
	return true
}

// arrived says owner's n bytes have been read (or never will be).
func (ad *admission) arrived(owner string, n int64) {
	if owner == "" {
		return
	}
	ad.mu.Lock()
	if u := ad.unread[owner] - n; u > 0 {
		ad.unread[owner] = u
	} else {
		delete(ad.unread, owner)
	}
	ad.mu.Unlock()
}

func (ad *admission) release(n int64) {
	ad.mu.Lock()
	ad.held -= n
	ad.mu.Unlock()
}

// admitProduce admits a produce's body (serveProduce) into st, or answers 429
// buffer_full. A body of unknown length (chunked) is counted at the largest size
// allowed. st.done gives the bytes back; st.arrived ends their count as unread.
func (a *API) admitProduce(r *http.Request, st *reqState) *problem {
	n := r.ContentLength
	if n < 0 || n > a.cfg.MaxBodyBytes {
		n = a.cfg.MaxBodyBytes
	}
	if !a.admission.acquire(st.owner, n) {
		return newProblem(CodeBufferFull, "this node holds its limit of produce bytes in flight, or of bodies still arriving from this principal; retry after a short wait").
			with("max_inflight_produce_bytes", a.cfg.MaxInflightProduceBytes)
	}
	st.admitted, st.unread = n, true
	return nil
}

// owner is whom the request's bytes still arriving count against: its principal, with
// authentication on; without, every caller is the same anonymous one, and no one.
func (a *API) owner(r *http.Request) string {
	if a.auth == nil {
		return ""
	}
	return principal(r).Name
}
