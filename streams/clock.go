package streams

import (
	"encoding/binary"

	"github.com/strata-io/strata/streams/store"
)

// opClock is an operator's observed stream time, as Kafka Streams keeps it per
// processor: the largest timestamp among the records that reached the operator — not
// the task's, which its other inputs move too (a join in a task that also reads a
// table would otherwise close its windows on the table's timestamps). It lives in the
// operator's store under the metadata name "time": it commits with the state it
// governs and a restored task resumes with it.
type opClock struct {
	s      store.Timed
	ms     int64
	has    bool
	loaded bool
}

// now returns the clock (ok false before the operator's first record).
func (c *opClock) now(t *task) (int64, bool) {
	if !c.loaded {
		v, ok, err := c.s.Meta("time")
		if err != nil {
			t.failf("read an operator's stream time: %w", err)
			return 0, false
		}
		if ok && len(v) == 8 {
			c.ms, c.has = int64(binary.BigEndian.Uint64(v)), true
		}
		c.loaded = true
	}
	return c.ms, c.has
}

// observe advances the clock to ts if it is later and returns it.
func (c *opClock) observe(t *task, ts int64) int64 {
	if now, ok := c.now(t); ok && ts <= now {
		return now
	}
	c.ms, c.has = ts, true
	if err := c.s.SetMeta("time", binary.BigEndian.AppendUint64(nil, uint64(ts))); err != nil {
		t.failf("save an operator's stream time: %w", err)
	}
	return ts
}

// metaInt reads an int64 kept in a store's metadata (def when absent).
func metaInt(t *task, s store.Timed, name string, def int64) int64 {
	v, ok, err := s.Meta(name)
	if err != nil {
		t.failf("read operator metadata %s: %w", name, err)
		return def
	}
	if !ok || len(v) != 8 {
		return def
	}
	return int64(binary.BigEndian.Uint64(v))
}

func setMetaInt(t *task, s store.Timed, name string, v int64) {
	if err := s.SetMeta(name, binary.BigEndian.AppendUint64(nil, uint64(v))); err != nil {
		t.failf("save operator metadata %s: %w", name, err)
	}
}

// expirer deletes the entries of a store.Timed older than a horizon that only moves
// forward, and that no new entry is ever put below. It scans the index from where
// it stopped (from), not from the start: deleted entries linger in Pebble as
// tombstones until compaction, and a scan from the start would step over every
// entry ever expired, on every record.
type expirer struct {
	s    store.Timed
	from int64
	step int64
}

// newExpirer expires entries of s in steps of step (ms) of the horizon: a scan per
// record would cost more than the entries it finds, and an entry expired a little
// late is harmless — nothing reads it.
func newExpirer(s store.Timed, step int64) *expirer {
	return &expirer{s: s, from: minStart, step: max(step, 1)}
}

// expire deletes, within the task's budget, the entries older than before: windows
// and buffered records nothing can read again.
func (e *expirer) expire(t *task, before int64) {
	if before <= e.from || e.from != minStart && before-e.from < e.step || t.err != nil {
		return
	}
	budget := t.budget()
	var refs []store.Ref
	if err := e.s.Indexed(e.from, before, func(key []byte, tm, n int64) bool {
		refs = append(refs, store.Ref{Key: append([]byte(nil), key...), Time: tm, N: n})
		return len(refs) < budget
	}); err != nil {
		t.failf("expire old entries: %w", err)
		return
	}
	for _, r := range refs {
		if err := e.s.Delete(r.Key, r.Time, r.N); err != nil {
			t.failf("expire old entries: %w", err)
			return
		}
	}
	if len(refs) < budget {
		e.from = before
	} else {
		e.from = refs[len(refs)-1].Time // entries of that time may remain
	}
}

// stamp prefixes a value with its timestamp (ms), as timed stores keep them.
func stamp(ts int64, v []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(v)), uint64(ts)), v...)
}

// unstamp splits a stamped value; ok is false if it is too short to be one.
func unstamp(b []byte) (int64, []byte, bool) {
	if len(b) < 8 {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(b)), b[8:], true
}
