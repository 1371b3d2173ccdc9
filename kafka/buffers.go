package kafka

import "sync"

// Large response buffers (Fetch answers of megabytes: the batches copied out of the
// cache, then the framed response) are reused rather than allocated per request: a
// fresh large allocation is zeroed first, which cost a cached fetch a third of its CPU.
var bigBufs sync.Pool // *[]byte

const (
	bigBufMin = 64 << 10  // smaller buffers are allocated as usual
	bigBufMax = 128 << 20 // larger ones are not kept
)

// getBuf returns an empty buffer of capacity at least n.
func getBuf(n int) []byte {
	if n >= bigBufMin {
		if p, _ := bigBufs.Get().(*[]byte); p != nil {
			if cap(*p) >= n {
				return (*p)[:0]
			}
			// Too small for this one: keep it for a smaller answer.
			bigBufs.Put(p)
		}
	}
	return make([]byte, 0, n)
}

// putBuf gives b back for reuse; nothing may use it afterwards.
func putBuf(b []byte) {
	if c := cap(b); c >= bigBufMin && c <= bigBufMax {
		bigBufs.Put(&b)
	}
}
