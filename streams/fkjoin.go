package streams

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"

	"github.com/strata-io/strata/streams/serde"
)

// Foreign-key table-table joins (Kafka Streams' KIP-213): a left table whose values
// name a key of the right table, partitioned differently. The left side registers
// each of its keys with the right table's partition that holds its foreign key,
// through the subscription topic <app>-<name>-subscription (the right table's
// partition count), where the subscriptions are kept in the store
// <name>-subscriptions, by foreign key then left key. Each registration, and each
// update of a right value, sends the right value back to every subscribed left key
// through <app>-<name>-response (the left table's partition count), with the hash of
// the left value the subscription was made for: the left side joins a response only
// if its current value still has that hash, so an answer overtaken by a newer left
// value is dropped, and the result — the table name — follows both tables.

// Subscription instructions (the first byte of a subscription's value).
const (
	fkSubscribe   = 1 // remember, and answer with the right value
	fkUnsubscribe = 2 // forget; no answer
)

func fkHash(v []byte) []byte { h := sha256.Sum256(v); return h[:16] }

// fkCombined is a subscription's key: the foreign key, then the left key.
func fkCombined(fk, pk []byte) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(fk)+len(pk)), uint32(len(fk)))
	return append(append(b, fk...), pk...)
}

func fkSplit(k []byte) (fk, pk []byte, ok bool) {
	if len(k) < 4 {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint32(k))
	if len(k) < 4+n {
		return nil, nil, false
	}
	return k[4 : 4+n], k[4+n:], true
}

// JoinForeignKey joins each left value with the right table's value for the key
// fk(value) names (an inner join: a left key whose foreign key has no right value has
// no result). The result table, kept in the store name, has the left table's keys
// and follows updates of both tables, eventually consistent: results are timestamped
// with the later of the two values' times.
func JoinForeignKey[K, V, KO, VO, R any](l Table[K, V], r Table[KO, VO], name string, fk func(V) KO, f func(V, VO) R, rs serde.Serde[R]) Table[K, R] {
	return fkJoin(l, r, name, fk, false, func(v V, o *VO) (R, bool) {
		if o == nil {
			var z R
			return z, false
		}
		return f(v, *o), true
	}, rs)
}

// LeftJoinForeignKey is JoinForeignKey keeping every left key: f gets nil when the
// foreign key has no right value.
func LeftJoinForeignKey[K, V, KO, VO, R any](l Table[K, V], r Table[KO, VO], name string, fk func(V) KO, f func(V, *VO) R, rs serde.Serde[R]) Table[K, R] {
	return fkJoin(l, r, name, fk, true, func(v V, o *VO) (R, bool) { return f(v, o), true }, rs)
}

func fkJoin[K, V, KO, VO, R any](l Table[K, V], r Table[KO, VO], name string, fk func(V) KO, left bool, f func(V, *VO) (R, bool), rs serde.Serde[R]) Table[K, R] {
	what := "foreign-key join"
	if left {
		what = "foreign-key left join"
	}
	if l.changes == nil || r.changes == nil {
		panic("streams: " + what + " of a zero Table")
	}
	b := l.changes.b
	tb := newTable(b, name, l.ks, rs)
	subs := name + "-subscriptions"
	if !b.claim(name, what) || !b.claim(subs, "store of "+what+" "+name) {
		return tb
	}
	if l.ks == nil || l.vs == nil || r.ks == nil || r.vs == nil || rs == nil {
		b.errorf("%s %s: a table is not usable (its operation failed to build) or the result serde is missing", what, name)
		return tb
	}
	subTopic, respTopic := b.app+"-"+name+"-subscription", b.app+"-"+name+"-response"
	// The left side: the left table, the responses, the result.
	respNode := newPort[K, V](b) // the response source's node
	b.link(respNode.id, l.changes.id)
	b.link(tb.changes.id, l.changes.id)
	b.stores[name] = &storeDef{name: name, kind: kvStore, node: tb.changes.id, stamped: true}
	// The right side: the right table, the subscriptions.
	subNode := newPort[KO, VO](b)
	b.link(subNode.id, r.changes.id)
	b.stores[subs] = &storeDef{name: subs, kind: kvStore, node: subNode.id}
	b.parts[subTopic] = &repartitionDef{topic: subTopic, upstream: l.changes.id, reader: subNode.id}
	b.parts[respTopic] = &repartitionDef{topic: respTopic, upstream: r.changes.id, reader: respNode.id}
	fail := func(t *task, format string, args ...any) {
		t.failf("%s %s: "+format, append([]any{what, name}, args...)...)
	}

	// Left updates register (and unregister) their keys with the foreign keys.
	l.changes.to(func(t *task) func(Record[K, Change[V]]) {
		m := materialized[K, R]{tb, tb.changes.emitter(t)}
		return func(c Record[K, Change[V]]) {
			pk, err := l.ks.Encode(c.Key)
			if err != nil {
				fail(t, "encode key: %w", err)
				return
			}
			var oldFK, newFK []byte
			for _, x := range []struct {
				v   *V
				out *[]byte
			}{{c.Value.Old, &oldFK}, {c.Value.New, &newFK}} {
				if x.v != nil {
					if *x.out, err = r.ks.Encode(fk(*x.v)); err != nil {
						fail(t, "encode foreign key: %w", err)
						return
					}
				}
			}
			ts := ms(c.Timestamp)
			if oldFK != nil && !bytes.Equal(oldFK, newFK) {
				t.sendBy(subTopic, oldFK, fkCombined(oldFK, pk), []byte{fkUnsubscribe}, ts, c.Headers)
			}
			if c.Value.New == nil {
				// Deleted: its result goes at once; answers still on the way find no
				// value to join.
				if err := m.upsert(t, c.Key, pk, nil, ts, Record[K, R]{Headers: c.Headers}); err != nil {
					fail(t, "%w", err)
				}
				return
			}
			vb, err := l.vs.Encode(*c.Value.New)
			if err != nil {
				fail(t, "encode value: %w", err)
				return
			}
			t.sendBy(subTopic, newFK, fkCombined(newFK, pk), append([]byte{fkSubscribe}, fkHash(vb)...), ts, c.Headers)
		}
	})

	// A response: the subscription's hash, then 0 (no right value) or 1, the right
	// value's timestamp and the value.
	respond := func(t *task, pk, hash []byte, fkb []byte, ts int64) {
		v, ok := t.get(r.store, fkb)
		if t.err != nil {
			return
		}
		val := append(bytes.Clone(hash), 0)
		if ok {
			vts, raw := ts, v
			if r.stamped {
				vts, raw, _ = unstamp(v)
			}
			val[len(val)-1] = 1
			val = append(binary.BigEndian.AppendUint64(val, uint64(vts)), raw...)
		}
		t.send(respTopic, pk, val, ts, nil)
	}
	b.sources = append(b.sources, &sourceDef{topic: subTopic, node: subNode.id, internal: true, follows: true, entry: func(t *task) func(rawRecord) {
		return func(raw rawRecord) {
			fkb, pk, ok := fkSplit(raw.Key)
			if !ok || len(raw.Value) < 1 {
				fail(t, "a malformed subscription at %s", Position{raw.Topic, raw.Partition, raw.Offset})
				return
			}
			switch raw.Value[0] {
			case fkUnsubscribe:
				t.del(subs, raw.Key)
			case fkSubscribe:
				if len(raw.Value) != 1+16 {
					fail(t, "a malformed subscription at %s", Position{raw.Topic, raw.Partition, raw.Offset})
					return
				}
				t.put(subs, raw.Key, raw.Value[1:])
				respond(t, pk, raw.Value[1:], fkb, raw.TS)
			}
		}
	}})
	r.changes.to(func(t *task) func(Record[KO, Change[VO]]) {
		return func(c Record[KO, Change[VO]]) {
			fkb, err := r.ks.Encode(c.Key)
			if err != nil {
				fail(t, "encode foreign key: %w", err)
				return
			}
			type sub struct{ pk, hash []byte }
			var found []sub
			pre := fkCombined(fkb, nil)
			t.rangeStore(subs, pre, prefixEnd(pre), func(k, v []byte) bool {
				found = append(found, sub{bytes.Clone(k[len(pre):]), bytes.Clone(v)})
				return true
			})
			for _, s := range found {
				respond(t, s.pk, s.hash, fkb, ms(c.Timestamp))
			}
		}
	})

	// The left side joins the answers that are still current.
	b.sources = append(b.sources, &sourceDef{topic: respTopic, node: respNode.id, internal: true, follows: true, entry: func(t *task) func(rawRecord) {
		m := materialized[K, R]{tb, tb.changes.emitter(t)}
		return func(raw rawRecord) {
			if len(raw.Value) < 17 || raw.Value[16] == 1 && len(raw.Value) < 25 {
				fail(t, "a malformed response at %s", Position{raw.Topic, raw.Partition, raw.Offset})
				return
			}
			cur, ok := t.get(l.store, raw.Key)
			if t.err != nil || !ok {
				return // deleted since: its result is gone already
			}
			lts, vb := raw.TS, cur
			if l.stamped {
				lts, vb, _ = unstamp(cur)
			}
			if !bytes.Equal(fkHash(vb), raw.Value[:16]) {
				return // an answer for an older left value
			}
			lv, err := l.vs.Decode(vb)
			if err != nil {
				fail(t, "decode left value: %w", err)
				return
			}
			k, err := l.ks.Decode(raw.Key)
			if err != nil {
				fail(t, "decode left key: %w", err)
				return
			}
			// Without a right value, the time of the update that answered (a deletion's).
			var rv *VO
			rts := raw.TS
			if raw.Value[16] == 1 {
				rts = int64(binary.BigEndian.Uint64(raw.Value[17:25]))
				o, err := r.vs.Decode(raw.Value[25:])
				if err != nil {
					fail(t, "decode right value: %w", err)
					return
				}
				rv = &o
			}
			res, has := f(lv, rv)
			var resp *R
			if has {
				resp = &res
			}
			if err := m.upsert(t, k, raw.Key, resp, max(lts, rts), Record[K, R]{Headers: raw.Headers}); err != nil {
				fail(t, "%w", err)
			}
		}
	}})
	return tb
}

// prefixEnd is the smallest key after every key starting with p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
