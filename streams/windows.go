package streams

import (
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/store"
	"github.com/strata-io/strata/streams/window"
)

// Sliding and session windowed aggregations. Both keep their windows in a store.Timed
// layout (a key's windows by time, and an index of every window by time) and run on
// the operator's own stream time (opClock), as Kafka Streams does.

// windowedInput is what both aggregations start with: the name claimed, the key serde
// known, the input repartitioned if re-keyed, and the output port linked.
func windowedInput[K, V, A any](g Grouped[K, V], name, what string, spec func() error, as serde.Serde[A]) (Stream[K, V], *port[K, window.Result[A]], serde.Serde[K], bool) {
	b := g.s.p.b
	out := newPort[K, window.Result[A]](b)
	ks := g.s.p.ks
	if len(g.with) > 0 {
		ks = g.with[0].Key
	}
	out.ks = ks
	if !b.claim(name, what) {
		return Stream[K, V]{}, out, nil, false
	}
	if err := spec(); err != nil {
		b.errorf("%s %s: %w", what, name, err)
		return Stream[K, V]{}, out, nil, false
	}
	if ks == nil || as == nil {
		b.errorf("%s %s: the key serde is not known (the stream was mapped): pass streams.With to GroupByKey/GroupBy; the aggregate's serde is required", what, name)
		return Stream[K, V]{}, out, nil, false
	}
	in := g.input(name)
	b.link(in.p.id, out.id)
	b.stores[name] = &storeDef{name: name, kind: timedStore, node: out.id}
	return in, out, ks, true
}

func slidingAggregate[K, V, A any](g Grouped[K, V], name string, w window.Spec, init func() A, add func(K, V, A) A, as serde.Serde[A], emit Emit) Stream[K, window.Result[A]] {
	in, out, ks, ok := windowedInput(g, name, "sliding windowed aggregation", w.Validate, as)
	if !ok {
		return Stream[K, window.Result[A]]{out}
	}
	in.p.to(func(t *task) func(Record[K, V]) {
		s := t.timed(name)
		sa := &slidingAgg[K, V, A]{t: t, name: name, d: w.TimeDifference(), grace: w.Grace(), ks: ks, as: as,
			init: init, add: add, emit: emit, out: out.emitter(t), s: s, clock: &opClock{s: s}, exp: newExpirer(s, w.TimeDifference()/4)}
		return sa.process
	})
	return Stream[K, window.Result[A]]{out}
}

// slidingAgg is Kafka Streams' sliding-window aggregation. Stored per window (key,
// start): the largest timestamp in it and the aggregate. A record at t updates every
// window that covers it and creates the windows it defines — its left window
// [t-d, t], its right window [t+1, t+1+d] if a later record is already in it, and
// the right window of the record just before it — each created window's aggregate
// derived from the stored ones (the windows around a record hold what a new window
// needs), never from the records themselves, which are not kept.
type slidingAgg[K, V, A any] struct {
	t        *task
	name     string
	d, grace int64
	ks       serde.Serde[K]
	as       serde.Serde[A]
	init     func() A
	add      func(K, V, A) A
	emit     Emit
	out      func(Record[K, window.Result[A]])
	s        store.Timed
	clock    *opClock
	exp      *expirer
	emitted  int64 // EmitOnWindowClose: windows ending before this were emitted
	loaded   bool
}

type slidingWin[A any] struct {
	start, maxTs int64
	agg          A
}

func (a *slidingAgg[K, V, A]) failf(format string, args ...any) {
	a.t.failf("sliding windowed aggregation %s: "+format, args...)
}

func (a *slidingAgg[K, V, A]) process(r Record[K, V]) {
	t := a.t
	kb, err := a.ks.Encode(r.Key)
	if err != nil {
		a.failf("encode key: %w", err)
		return
	}
	ts := ms(r.Timestamp)
	closeTime := a.clock.observe(t, ts) - a.grace
	defer a.closed(closeTime)
	if ts+1+a.d <= closeTime { // every window that could hold it has closed
		t.late()
		return
	}
	var (
		wins                    []slidingWin[A]
		starts                  = map[int64]bool{}
		leftAgg, rightAgg       *slidingWin[A]
		leftExists, rightExists bool
		prev                    int64
		hasPrev                 bool
		derr                    error
	)
	ferr := a.s.Fetch(kb, ts-2*a.d, ts+1, func(start, _ int64, v []byte) bool {
		maxTs, raw, ok := unstamp(v)
		if !ok {
			derr = store.ErrCorrupt
			return false
		}
		agg, err := a.as.Decode(raw)
		if err != nil {
			derr = err
			return false
		}
		wins = append(wins, slidingWin[A]{start, maxTs, agg})
		return true
	})
	if ferr != nil || derr != nil {
		a.failf("read windows: %v %w", ferr, derr)
		return
	}
	for i := range wins {
		w := &wins[i]
		starts[w.start] = true
		end := w.start + a.d
		switch {
		case end < ts: // before the record: the latest such is what its left window starts from
			leftAgg, prev, hasPrev = w, w.maxTs, true
		case end == ts:
			leftExists = true
			if w.maxTs < ts {
				prev, hasPrev = w.maxTs, true
			}
			a.update(r, kb, w.start, w.agg, w.maxTs, closeTime)
		case w.start <= ts: // covers the record: the latest such holds its right window's records
			old := *w
			rightAgg = &old
			a.update(r, kb, w.start, w.agg, w.maxTs, closeTime)
		case w.start == ts+1:
			rightExists = true
		}
	}
	if hasPrev && !starts[prev+1] && prev+1+a.d >= ts { // the right window of the record before
		a.update(r, kb, prev+1, a.init(), ts, closeTime)
	}
	if !leftExists {
		base := a.init()
		if hasPrev && ts-a.d <= prev {
			base = leftAgg.agg
		}
		a.update(r, kb, ts-a.d, base, ts, closeTime)
	}
	if !rightExists && rightAgg != nil && rightAgg.maxTs > ts { // its right window: the later records
		a.put(kb, ts+1, rightAgg.maxTs, rightAgg.agg)
		a.forward(r.Key, ts+1, rightAgg.agg, rightAgg.maxTs, r)
	}
}

// update adds r to the window starting at start (aggregate agg so far, largest
// timestamp maxTs) unless it has closed.
func (a *slidingAgg[K, V, A]) update(r Record[K, V], kb []byte, start int64, agg A, maxTs int64, closeTime int64) {
	if start+a.d < closeTime {
		return
	}
	agg = a.add(r.Key, r.Value, agg)
	maxTs = max(maxTs, ms(r.Timestamp))
	a.put(kb, start, maxTs, agg)
	a.forward(r.Key, start, agg, maxTs, r)
}

func (a *slidingAgg[K, V, A]) put(kb []byte, start, maxTs int64, agg A) {
	vb, err := a.as.Encode(agg)
	if err != nil {
		a.failf("encode value: %w", err)
		return
	}
	if err := a.s.Put(kb, start, 0, stamp(maxTs, vb)); err != nil {
		a.failf("write a window: %w", err)
	}
}

func (a *slidingAgg[K, V, A]) forward(k K, start int64, agg A, ts int64, r Record[K, V]) {
	if a.emit == EmitEveryUpdate {
		a.out(Record[K, window.Result[A]]{Key: k, Value: window.Result[A]{Window: window.Window{Start: start, End: start + a.d + 1}, Value: agg}, Timestamp: fromMs(ts), Headers: r.Headers})
	}
}

// closed emits (EmitOnWindowClose) the windows that closeTime has closed, and drops
// those no record can reach any more: a record not late looks back 2d for the windows
// its own derive from, so a window is kept until 2d after it closed.
func (a *slidingAgg[K, V, A]) closed(closeTime int64) {
	t := a.t
	if t.err != nil {
		return
	}
	if a.emit == EmitOnWindowClose {
		if !a.loaded {
			a.emitted, a.loaded = metaInt(t, a.s, "emitted", minStart), true
		}
		if closeTime > a.emitted {
			// Windows end at start+d: those ending in [emitted, closeTime).
			from := a.emitted - a.d
			if a.emitted == minStart {
				from = minStart
			}
			var refs []store.Ref
			if err := a.s.Indexed(from, closeTime-a.d, func(key []byte, start, n int64) bool {
				refs = append(refs, store.Ref{Key: append([]byte(nil), key...), Time: start, N: n})
				return true
			}); err != nil {
				a.failf("find closed windows: %w", err)
				return
			}
			for _, ref := range refs {
				a.emitFinal(ref)
			}
			a.emitted = closeTime
			setMetaInt(t, a.s, "emitted", closeTime)
		}
	}
	a.exp.expire(t, closeTime-3*a.d)
}

func (a *slidingAgg[K, V, A]) emitFinal(ref store.Ref) {
	v, ok, err := a.s.Get(ref.Key, ref.Time, ref.N)
	if err != nil || !ok {
		a.failf("read a closed window: %v", err)
		return
	}
	_, raw, _ := unstamp(v)
	k, err := a.ks.Decode(ref.Key)
	if err != nil {
		a.failf("decode stored key: %w", err)
		return
	}
	agg, err := a.as.Decode(raw)
	if err != nil {
		a.failf("decode stored value: %w", err)
		return
	}
	end := ref.Time + a.d
	a.out(Record[K, window.Result[A]]{Key: k, Value: window.Result[A]{Window: window.Window{Start: ref.Time, End: end + 1}, Value: agg}, Timestamp: fromMs(end)})
}

// SessionAggregate folds each key's records per session (Kafka Streams' session
// windows): records at most the inactivity gap apart share a session; a record that
// bridges sessions merges them, their aggregates combined with merge. On every update
// (EmitEveryUpdate) the merged-away sessions are forwarded with Removed set, then the
// new session; with EmitOnWindowClose each session is forwarded once, when stream
// time passes its end plus gap plus grace. Result windows run from the first record
// to the last plus 1ms; records are timestamped with the session's last record's
// time. A record that could only join closed sessions is late.
func SessionAggregate[K, V, A any](g Grouped[K, V], name string, w window.SessionSpec, init func() A, add func(K, V, A) A, merge func(K, A, A) A, as serde.Serde[A], emit Emit) Stream[K, window.Result[A]] {
	in, out, ks, ok := windowedInput(g, name, "session aggregation", w.Validate, as)
	if !ok {
		return Stream[K, window.Result[A]]{out}
	}
	if merge == nil {
		g.s.p.b.errorf("session aggregation %s: a merge function is required (sessions merge)", name)
		return Stream[K, window.Result[A]]{out}
	}
	in.p.to(func(t *task) func(Record[K, V]) {
		s := t.timed(name)
		sa := &sessionAgg[K, V, A]{t: t, name: name, w: w, ks: ks, as: as, init: init, add: add, merge: merge, emit: emit,
			out: out.emitter(t), s: s, clock: &opClock{s: s}, exp: newExpirer(s, (w.Gap()+w.Grace())/16)}
		return sa.process
	})
	return Stream[K, window.Result[A]]{out}
}

// SessionCount counts each key's records per session.
func SessionCount[K, V any](g Grouped[K, V], name string, w window.SessionSpec, emit Emit) Stream[K, window.Result[int64]] {
	return SessionAggregate(g, name, w, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 },
		func(_ K, a, b int64) int64 { return a + b }, serde.Int64, emit)
}

// sessionAgg keeps sessions by (key, end, start) in a store.Timed, so a key's sessions
// ending from some time on are one scan, and every session ending before a time (the
// closed ones) is one scan of the index.
type sessionAgg[K, V, A any] struct {
	t       *task
	name    string
	w       window.SessionSpec
	ks      serde.Serde[K]
	as      serde.Serde[A]
	init    func() A
	add     func(K, V, A) A
	merge   func(K, A, A) A
	emit    Emit
	out     func(Record[K, window.Result[A]])
	s       store.Timed
	clock   *opClock
	exp     *expirer
	emitted int64
	loaded  bool
}

type session[A any] struct {
	start, end int64
	agg        A
}

func (a *sessionAgg[K, V, A]) failf(format string, args ...any) {
	a.t.failf("session aggregation %s: "+format, args...)
}

func (a *sessionAgg[K, V, A]) process(r Record[K, V]) {
	t := a.t
	kb, err := a.ks.Encode(r.Key)
	if err != nil {
		a.failf("encode key: %w", err)
		return
	}
	ts := ms(r.Timestamp)
	closeTime := a.w.CloseTime(a.clock.observe(t, ts))
	defer a.closed(closeTime)
	gap := a.w.Gap()
	var found []session[A]
	var derr error
	if err := a.s.Fetch(kb, ts-gap, 1<<63-1, func(end, start int64, v []byte) bool {
		if start > ts+gap {
			return true
		}
		agg, err := a.as.Decode(v)
		if err != nil {
			derr = err
			return false
		}
		found = append(found, session[A]{start, end, agg})
		return true
	}); err != nil || derr != nil {
		a.failf("read sessions: %v %w", err, derr)
		return
	}
	merged := session[A]{ts, ts, a.init()}
	for _, s := range found {
		merged.agg = a.merge(r.Key, merged.agg, s.agg)
		merged.start, merged.end = min(merged.start, s.start), max(merged.end, s.end)
	}
	if merged.end < closeTime {
		t.late()
		return
	}
	for _, s := range found {
		if merged.start == ts && merged.end == ts {
			break // only sessions [ts, ts] found: the one session is overwritten below
		}
		// As Kafka Streams does, every session found is removed — the one the merged
		// session replaces in place too — and forwarded as removed.
		if err := a.s.Delete(kb, s.end, s.start); err != nil {
			a.failf("remove a merged session: %w", err)
			return
		}
		if a.emit == EmitEveryUpdate {
			a.out(Record[K, window.Result[A]]{Key: r.Key, Value: window.Result[A]{Window: window.Window{Start: s.start, End: s.end + 1}, Value: s.agg, Removed: true},
				Timestamp: fromMs(s.end), Headers: r.Headers})
		}
	}
	merged.agg = a.add(r.Key, r.Value, merged.agg)
	vb, err := a.as.Encode(merged.agg)
	if err != nil {
		a.failf("encode value: %w", err)
		return
	}
	if err := a.s.Put(kb, merged.end, merged.start, vb); err != nil {
		a.failf("write a session: %w", err)
		return
	}
	if a.emit == EmitEveryUpdate {
		a.out(Record[K, window.Result[A]]{Key: r.Key, Value: window.Result[A]{Window: window.Window{Start: merged.start, End: merged.end + 1}, Value: merged.agg},
			Timestamp: fromMs(merged.end), Headers: r.Headers})
	}
}

// closed emits (EmitOnWindowClose) and removes the sessions closeTime has closed:
// no record can reach them any more.
func (a *sessionAgg[K, V, A]) closed(closeTime int64) {
	t := a.t
	if t.err != nil {
		return
	}
	if a.emit != EmitOnWindowClose {
		a.exp.expire(t, closeTime)
		return
	}
	if !a.loaded {
		a.emitted, a.loaded = metaInt(t, a.s, "emitted", minStart), true
	}
	if closeTime <= a.emitted {
		return
	}
	// Sessions ending before emitted were emitted and removed; none is made there.
	var refs []store.Ref
	err := a.s.Indexed(a.emitted, closeTime, func(key []byte, end, start int64) bool {
		refs = append(refs, store.Ref{Key: append([]byte(nil), key...), Time: end, N: start})
		return true
	})
	if err != nil {
		a.failf("find closed sessions: %w", err)
		return
	}
	for _, ref := range refs {
		v, ok, err := a.s.Get(ref.Key, ref.Time, ref.N)
		if err != nil || !ok {
			a.failf("read a closed session: %v", err)
			return
		}
		k, err := a.ks.Decode(ref.Key)
		if err != nil {
			a.failf("decode stored key: %w", err)
			return
		}
		agg, err := a.as.Decode(v)
		if err != nil {
			a.failf("decode stored value: %w", err)
			return
		}
		if err := a.s.Delete(ref.Key, ref.Time, ref.N); err != nil {
			a.failf("remove a closed session: %w", err)
			return
		}
		a.out(Record[K, window.Result[A]]{Key: k, Value: window.Result[A]{Window: window.Window{Start: ref.N, End: ref.Time + 1}, Value: agg}, Timestamp: fromMs(ref.Time)})
	}
	a.emitted = closeTime
	setMetaInt(t, a.s, "emitted", closeTime)
}
