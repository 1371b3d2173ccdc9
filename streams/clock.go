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

// expire deletes, within the task's budget, the entries of s older than before:
// windows and buffered records nothing can read again.
func expire(t *task, s store.Timed, before int64) {
	refs, err := s.Before(before, t.budget())
	if err != nil {
		t.failf("expire old entries: %w", err)
		return
	}
	for _, r := range refs {
		if err := s.Delete(r.Key, r.Time, r.N); err != nil {
			t.failf("expire old entries: %w", err)
			return
		}
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
