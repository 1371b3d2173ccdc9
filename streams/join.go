package streams

import (
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/store"
	"github.com/strata-io/strata/streams/window"
)

// Joined names the serdes a stream-stream join buffers its inputs with, for streams
// whose serdes are not known (after a Map, say).
type Joined[K, L, R any] struct {
	Key   serde.Serde[K]
	Left  serde.Serde[L]
	Right serde.Serde[R]
}

// JoinedWith is Joined{ks, ls, rs}.
func JoinedWith[K, L, R any](ks serde.Serde[K], ls serde.Serde[L], rs serde.Serde[R]) Joined[K, L, R] {
	return Joined[K, L, R]{ks, ls, rs}
}

type joinKind int

const (
	innerJoin joinKind = iota
	leftJoin
	outerJoin
)

func (k joinKind) String() string { return [...]string{"Join", "LeftJoin", "OuterJoin"}[k] }

// Join joins two streams on their keys within join windows (Kafka Streams'
// KStream-KStream join): a left record at t meets every right record of its key from
// t-before to t+after, and each pair is forwarded once — by whichever of the two
// arrives second — as f(key, left, right), timestamped with the later of the two.
// Both streams are buffered in window stores (<name>-left, <name>-right, each with its
// changelog) for as long as a partner may still arrive: before + after + grace of the
// operator's stream time. A record whose own window has closed — stream time past
// t+after+grace on the left, t+before+grace on the right — is late: dropped and
// counted. A re-keyed input is repartitioned first, through
// <app>-<name>-left-repartition or -right-repartition; the two inputs must be
// co-partitioned (checked at start-up).
func Join[K, L, R, O any](left Stream[K, L], right Stream[K, R], name string, w window.JoinSpec, f func(K, L, R) O, with ...Joined[K, L, R]) Stream[K, O] {
	return streamJoin(left, right, name, w, innerJoin, func(k K, l *L, r *R) O { return f(k, *l, *r) }, with)
}

// LeftJoin is Join that also forwards every left record that found no partner, as
// f(key, left, nil) — but only once its window has closed, so that a partner arriving
// late (within grace) replaces it instead of following it (Kafka's fix of spurious
// left-join results): those records wait in <name>-outer, timestamped by their own.
func LeftJoin[K, L, R, O any](left Stream[K, L], right Stream[K, R], name string, w window.JoinSpec, f func(K, L, *R) O, with ...Joined[K, L, R]) Stream[K, O] {
	return streamJoin(left, right, name, w, leftJoin, func(k K, l *L, r *R) O { return f(k, *l, r) }, with)
}

// OuterJoin is LeftJoin on both sides: a right record that found no partner is
// forwarded too, as f(key, nil, right), once its window has closed. Records whose
// windows close together go out in timestamp order, left before right.
func OuterJoin[K, L, R, O any](left Stream[K, L], right Stream[K, R], name string, w window.JoinSpec, f func(K, *L, *R) O, with ...Joined[K, L, R]) Stream[K, O] {
	return streamJoin(left, right, name, w, outerJoin, f, with)
}

func streamJoin[K, L, R, O any](left Stream[K, L], right Stream[K, R], name string, w window.JoinSpec, kind joinKind, f func(K, *L, *R) O, with []Joined[K, L, R]) Stream[K, O] {
	b := left.p.b
	out := newPort[K, O](b)
	what := "stream-stream " + kind.String()
	ks, ls, rs := left.p.ks, left.p.vs, right.p.vs
	if ks == nil {
		ks = right.p.ks
	}
	if len(with) > 0 {
		ks, ls, rs = with[0].Key, with[0].Left, with[0].Right
	}
	out.ks = ks
	if !b.claim(name, what) {
		return Stream[K, O]{out}
	}
	stores := []string{name + "-left", name + "-right"}
	if kind != innerJoin {
		stores = append(stores, name+"-outer")
	}
	for _, st := range stores {
		if !b.claim(st, "store of "+what+" "+name) {
			return Stream[K, O]{out}
		}
	}
	if err := w.Validate(); err != nil {
		b.errorf("%s %s: %w", what, name, err)
		return Stream[K, O]{out}
	}
	if ks == nil || ls == nil || rs == nil {
		b.errorf("%s %s: a serde of the inputs is not known (a stream was mapped): pass streams.JoinedWith(keySerde, leftSerde, rightSerde)", what, name)
		return Stream[K, O]{out}
	}
	// Re-keyed inputs are repartitioned (named after the join, claimed with it).
	if left.p.rekeyed {
		left = repartition(left, name+"-left", []Serdes[K, L]{{ks, ls}})
	}
	if right.p.rekeyed {
		right = repartition(right, name+"-right", []Serdes[K, R]{{ks, rs}})
	}
	b.link(left.p.id, out.id)
	b.link(right.p.id, out.id)
	for _, st := range stores {
		b.stores[st] = &storeDef{name: st, kind: timedStore, node: out.id}
	}
	state := func(t *task) *joinState[K, L, R, O] {
		return shared(t, out.id, func() *joinState[K, L, R, O] {
			js := &joinState[K, L, R, O]{t: t, name: name, w: w, kind: kind, ks: ks, ls: ls, rs: rs, f: f, out: out.emitter(t),
				left: t.timed(stores[0]), right: t.timed(stores[1])}
			js.clock = &opClock{s: js.left}
			step := (w.Before() + w.After() + w.Grace()) / 16
			js.expLeft, js.expRight, js.outerFrom = newExpirer(js.left, step), newExpirer(js.right, step), minStart
			if kind != innerJoin {
				js.outer = t.timed(stores[2])
			}
			return js
		})
	}
	left.p.to(func(t *task) func(Record[K, L]) {
		js := state(t)
		return func(r Record[K, L]) { js.process(r.Key, &r.Value, nil, r) }
	})
	right.p.to(func(t *task) func(Record[K, R]) {
		js := state(t)
		return func(r Record[K, R]) {
			js.process(r.Key, nil, &r.Value, Record[K, L]{Key: r.Key, Timestamp: r.Timestamp, Headers: r.Headers})
		}
	})
	return Stream[K, O]{out}
}

// Sides in the outer buffer's keys: left records sort before right ones of the same
// time, as in Kafka.
const (
	sideLeft  = 0
	sideRight = 1
)

// joinState is one task's join: the two window stores (a side's records by key, time
// and arrival), the buffer of records still without a partner (outer), and the
// operator's clock, kept in the left store.
type joinState[K, L, R, O any] struct {
	t           *task
	name        string
	w           window.JoinSpec
	kind        joinKind
	ks          serde.Serde[K]
	ls          serde.Serde[L]
	rs          serde.Serde[R]
	f           func(K, *L, *R) O
	out         func(Record[K, O])
	left, right store.Timed
	outer       store.Timed
	clock       *opClock
	expLeft     *expirer
	expRight    *expirer
	outerFrom   int64 // no buffered unmatched record is older (a lower bound)
}

func (j *joinState[K, L, R, O]) failf(format string, args ...any) {
	j.t.failf("stream-stream %s %s: "+format, append([]any{j.kind, j.name}, args...)...)
}

// process handles a record of one side: l set for the left, r for the right; meta
// carries its timestamp and headers.
func (j *joinState[K, L, R, O]) process(k K, l *L, r *R, meta Record[K, L]) {
	t := j.t
	ts := ms(meta.Timestamp)
	st := j.clock.observe(t, ts)
	isLeft := l != nil
	// This record looks for partners from ts-back to ts+ahead, and so its window
	// closes at ts+ahead+grace.
	back, ahead, this, other, side := j.w.Before(), j.w.After(), j.left, j.right, byte(sideLeft)
	if !isLeft {
		back, ahead, this, other, side = j.w.After(), j.w.Before(), j.right, j.left, sideRight
	}
	if ts+ahead+j.w.Grace() < st {
		t.late()
		return
	}
	if ts == st && j.kind != innerJoin {
		j.emitClosed(st) // stream time moved: records still without a partner may be due
	}
	kb, err := j.ks.Encode(k)
	if err != nil {
		j.failf("encode key: %w", err)
		return
	}
	var vb []byte
	if isLeft {
		vb, err = j.ls.Encode(*l)
	} else {
		vb, err = j.rs.Encode(*r)
	}
	if err != nil {
		j.failf("encode value: %w", err)
		return
	}
	seq, err := this.Append(kb, ts, vb)
	if err != nil {
		j.failf("buffer a record: %w", err)
		return
	}
	type partner struct {
		ts, n int64
		v     []byte
	}
	var ps []partner
	if err := other.Fetch(kb, ts-back, ts+ahead, func(pts, n int64, v []byte) bool {
		ps = append(ps, partner{pts, n, append([]byte(nil), v...)})
		return true
	}); err != nil {
		j.failf("look up partners: %w", err)
		return
	}
	for _, p := range ps {
		if j.kind != innerJoin {
			// The partner found one: it will never be forwarded without.
			if err := j.outer.Delete(append([]byte{1 - side}, kb...), p.ts, p.n); err != nil {
				j.failf("unbuffer a matched record: %w", err)
				return
			}
		}
		res, err := j.joinWith(k, l, r, p.v)
		if err != nil {
			j.failf("decode a buffered record: %w", err)
			return
		}
		j.out(Record[K, O]{Key: k, Value: res, Timestamp: fromMs(max(ts, p.ts)), Headers: meta.Headers})
	}
	if len(ps) == 0 && (j.kind == outerJoin || j.kind == leftJoin && isLeft) {
		// Under the record's own sequence number, the one a partner finds it by.
		if err := j.outer.Put(append([]byte{side}, kb...), ts, seq, vb); err != nil {
			j.failf("buffer an unmatched record: %w", err)
			return
		}
		j.outerFrom = min(j.outerFrom, ts)
	}
	// Buffered records no partner can reach any more: a record not late looks back at
	// most before (or after) from at least stream time - after (or before) - grace.
	horizon := st - j.w.Before() - j.w.After() - j.w.Grace()
	j.expLeft.expire(t, horizon)
	j.expRight.expire(t, horizon)
}

// joinWith joins this side's value with a buffered value of the other side.
func (j *joinState[K, L, R, O]) joinWith(k K, l *L, r *R, other []byte) (O, error) {
	if l != nil {
		rv, err := j.rs.Decode(other)
		if err != nil {
			var z O
			return z, err
		}
		return j.f(k, l, &rv), nil
	}
	lv, err := j.ls.Decode(other)
	if err != nil {
		var z O
		return z, err
	}
	return j.f(k, &lv, r), nil
}

// emitClosed forwards, within the task's budget, the buffered records without a
// partner whose windows stream time st has closed, oldest first, each with its own
// timestamp, and forgets them.
func (j *joinState[K, L, R, O]) emitClosed(st int64) {
	g := j.w.Grace()
	// Left records close at ts+after+grace < st, right ones at ts+before+grace < st.
	horizon := st - g - min(j.w.After(), j.w.Before())
	if horizon <= j.outerFrom {
		return
	}
	var due []store.Ref
	budget := j.t.budget()
	waiting := horizon // the oldest record seen still open, if any
	// The scan starts at a lower bound of what is buffered rather than at the start:
	// emitted records linger in Pebble as tombstones until compaction.
	if err := j.outer.Indexed(j.outerFrom, horizon, func(sk []byte, ts, n int64) bool {
		ahead := j.w.After()
		if sk[0] == sideRight {
			ahead = j.w.Before()
		}
		if ts+ahead+g < st {
			due = append(due, store.Ref{Key: append([]byte(nil), sk...), Time: ts, N: n})
		} else {
			waiting = min(waiting, ts)
		}
		return len(due) < budget
	}); err != nil {
		j.failf("find closed unmatched records: %w", err)
		return
	}
	if len(due) == budget {
		waiting = min(waiting, due[len(due)-1].Time) // more may be due at that time
	}
	j.outerFrom = waiting
	for _, ref := range due {
		v, ok, err := j.outer.Get(ref.Key, ref.Time, ref.N)
		if err != nil || !ok {
			j.failf("read an unmatched record: %v", err)
			return
		}
		k, err := j.ks.Decode(ref.Key[1:])
		if err != nil {
			j.failf("decode a buffered key: %w", err)
			return
		}
		var res O
		if ref.Key[0] == sideLeft {
			lv, err := j.ls.Decode(v)
			if err != nil {
				j.failf("decode a buffered record: %w", err)
				return
			}
			res = j.f(k, &lv, nil)
		} else {
			rv, err := j.rs.Decode(v)
			if err != nil {
				j.failf("decode a buffered record: %w", err)
				return
			}
			res = j.f(k, nil, &rv)
		}
		if err := j.outer.Delete(ref.Key, ref.Time, ref.N); err != nil {
			j.failf("unbuffer a record: %w", err)
			return
		}
		j.out(Record[K, O]{Key: k, Value: res, Timestamp: fromMs(ref.Time)})
	}
}
