package streams

import "github.com/strata-io/strata/streams/store"

// taskKV is one of a task's stores as a store.KV: reads see the task's uncommitted
// writes over its committed state; writes join its next commit (and, through it, the
// store's changelog). The window, session and join stores are store.Timed layouts
// over it.
type taskKV struct {
	t    *task
	name string
}

var _ store.KV = taskKV{}

func (k taskKV) Get(key []byte) ([]byte, bool, error) {
	v, ok := k.t.get(k.name, key)
	return v, ok, k.t.err
}

func (k taskKV) Put(key, value []byte) error {
	k.t.put(k.name, key, value)
	return k.t.err
}

func (k taskKV) Delete(key []byte) error {
	k.t.del(k.name, key)
	return k.t.err
}

func (k taskKV) Range(lo, hi []byte, fn func(key, value []byte) bool) error {
	k.t.rangeStore(k.name, lo, hi, fn)
	return k.t.err
}

// timed is the task's store name laid out as a store.Timed.
func (t *task) timed(name string) store.Timed { return store.NewTimed(taskKV{t, name}) }
