package streams

import (
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/streams/serde"
)

// Stream is a typed stream of records in a topology.
type Stream[K, V any] struct{ p *port[K, V] }

// Serdes names a key and a value serde, for operations that must write records of a
// stream whose serdes are not known (after a Map, say).
type Serdes[K, V any] struct {
	Key   serde.Serde[K]
	Value serde.Serde[V]
}

// With is Serdes{ks, vs}.
func With[K, V any](ks serde.Serde[K], vs serde.Serde[V]) Serdes[K, V] { return Serdes[K, V]{ks, vs} }

// From reads topic as a stream: keys and values decoded with ks and vs, timestamps
// from the records. A record that fails to decode is a poison record: it goes to the
// dead-letter topic or stops the task, as the App's Config says.
func From[K, V any](b *Builder, topic string, ks serde.Serde[K], vs serde.Serde[V]) Stream[K, V] {
	p := newPort[K, V](b)
	p.ks, p.vs = ks, vs
	if ks == nil || vs == nil {
		b.errorf("From %s: key and value serdes are required", topic)
	}
	b.sources = append(b.sources, &sourceDef{topic: topic, node: p.id, entry: decodeEntry(p, ks, vs)})
	return Stream[K, V]{p}
}

// decodeEntry decodes raw records of a source and forwards them to p.
func decodeEntry[K, V any](p *port[K, V], ks serde.Serde[K], vs serde.Serde[V]) func(t *task) func(rawRecord) {
	return func(t *task) func(rawRecord) {
		out := p.emitter(t)
		return func(r rawRecord) {
			var rec Record[K, V]
			var err error
			if r.Key != nil {
				rec.Key, err = ks.Decode(r.Key)
			}
			if err == nil && r.Value != nil {
				rec.Value, err = vs.Decode(r.Value)
			}
			if err != nil {
				t.poison(r, err)
				return
			}
			rec.Timestamp, rec.Headers = fromMs(r.TS), r.Headers
			out(rec)
		}
	}
}

// poison handles a record its serdes refused: to the dead-letter topic, or the task
// stops. Never a silent skip.
func (t *task) poison(r rawRecord, err error) {
	t.env.metrics.PoisonRecords.Add(1)
	pos := Position{r.Topic, r.Partition, r.Offset}
	if t.env.deadLetters == "" {
		t.failf("poison record at %s: %w (set Config.DeadLetterTopic to send such records there instead of stopping)", pos, err)
		return
	}
	t.env.log.Warn("poison record sent to the dead-letter topic", "position", pos.String(), "topic", t.env.deadLetters, "err", err)
	h := append(append([]client.Header(nil), r.Headers...), client.Header{Key: "strata-error", Value: []byte(err.Error())},
		client.Header{Key: "strata-source", Value: []byte(pos.String())})
	t.send(t.env.deadLetters, r.Key, r.Value, r.TS, h)
}

// Filter keeps the records pred accepts.
func (s Stream[K, V]) Filter(pred func(K, V) bool) Stream[K, V] {
	q := derive[K, V, K, V](s.p)
	q.ks, q.vs = s.p.ks, s.p.vs
	s.p.to(func(t *task) func(Record[K, V]) {
		out := q.emitter(t)
		return func(r Record[K, V]) {
			if pred(r.Key, r.Value) {
				out(r)
			}
		}
	})
	return Stream[K, V]{q}
}

// Branch splits the stream: a record goes to the first branch whose predicate accepts
// it, or nowhere.
func (s Stream[K, V]) Branch(preds ...func(K, V) bool) []Stream[K, V] {
	outs := make([]*port[K, V], len(preds))
	res := make([]Stream[K, V], len(preds))
	for i := range preds {
		outs[i] = derive[K, V, K, V](s.p)
		outs[i].ks, outs[i].vs = s.p.ks, s.p.vs
		res[i] = Stream[K, V]{outs[i]}
	}
	s.p.to(func(t *task) func(Record[K, V]) {
		fs := make([]func(Record[K, V]), len(outs))
		for i, o := range outs {
			fs[i] = o.emitter(t)
		}
		return func(r Record[K, V]) {
			for i, pred := range preds {
				if pred(r.Key, r.Value) {
					fs[i](r)
					return
				}
			}
		}
	})
	return res
}

// Peek calls f for every record and passes it on unchanged. f runs again for records
// reprocessed after a failure: keep it free of effects that matter.
func (s Stream[K, V]) Peek(f func(K, V)) Stream[K, V] {
	q := derive[K, V, K, V](s.p)
	q.ks, q.vs = s.p.ks, s.p.vs
	s.p.to(func(t *task) func(Record[K, V]) {
		out := q.emitter(t)
		return func(r Record[K, V]) { f(r.Key, r.Value); out(r) }
	})
	return Stream[K, V]{q}
}

// To writes the stream to topic, partitioned by the key's bytes as a Kafka client
// would. The topic must exist when the App starts.
func (s Stream[K, V]) To(topic string, ks serde.Serde[K], vs serde.Serde[V]) {
	s.p.b.sinks[topic] = true
	if ks == nil || vs == nil {
		s.p.b.errorf("To %s: key and value serdes are required", topic)
	}
	s.p.to(sinkTo(topic, ks, vs))
}

func sinkTo[K, V any](topic string, ks serde.Serde[K], vs serde.Serde[V]) func(t *task) func(Record[K, V]) {
	return func(t *task) func(Record[K, V]) {
		return func(r Record[K, V]) {
			k, err := ks.Encode(r.Key)
			if err != nil {
				t.failf("encode a key for %s: %w", topic, err)
				return
			}
			v, err := vs.Encode(r.Value)
			if err != nil {
				t.failf("encode a value for %s: %w", topic, err)
				return
			}
			t.send(topic, k, v, ms(r.Timestamp), r.Headers)
		}
	}
}

// Map turns each record into another, key and value; the result is marked re-keyed,
// so a later grouping or join repartitions it.
func Map[K, V, K2, V2 any](s Stream[K, V], f func(K, V) (K2, V2)) Stream[K2, V2] {
	q := derive[K, V, K2, V2](s.p)
	q.rekeyed = true
	s.p.to(func(t *task) func(Record[K, V]) {
		out := q.emitter(t)
		return func(r Record[K, V]) {
			k, v := f(r.Key, r.Value)
			out(Record[K2, V2]{Key: k, Value: v, Timestamp: r.Timestamp, Headers: r.Headers})
		}
	})
	return Stream[K2, V2]{q}
}

// MapValues turns each value into another, keeping the key (no repartition needed).
func MapValues[K, V, V2 any](s Stream[K, V], f func(V) V2) Stream[K, V2] {
	return MapValuesWithKey(s, func(_ K, v V) V2 { return f(v) })
}

// MapValuesWithKey is MapValues with the key at hand.
func MapValuesWithKey[K, V, V2 any](s Stream[K, V], f func(K, V) V2) Stream[K, V2] {
	q := derive[K, V, K, V2](s.p)
	q.ks = s.p.ks
	s.p.to(func(t *task) func(Record[K, V]) {
		out := q.emitter(t)
		return func(r Record[K, V]) {
			out(Record[K, V2]{Key: r.Key, Value: f(r.Key, r.Value), Timestamp: r.Timestamp, Headers: r.Headers})
		}
	})
	return Stream[K, V2]{q}
}

// FlatMap turns each record into any number of records (re-keyed).
func FlatMap[K, V, K2, V2 any](s Stream[K, V], f func(K, V) []KeyValue[K2, V2]) Stream[K2, V2] {
	q := derive[K, V, K2, V2](s.p)
	q.rekeyed = true
	s.p.to(func(t *task) func(Record[K, V]) {
		out := q.emitter(t)
		return func(r Record[K, V]) {
			for _, kv := range f(r.Key, r.Value) {
				out(Record[K2, V2]{Key: kv.Key, Value: kv.Value, Timestamp: r.Timestamp, Headers: r.Headers})
			}
		}
	})
	return Stream[K2, V2]{q}
}

// FlatMapValues turns each value into any number of values, keeping the key.
func FlatMapValues[K, V, V2 any](s Stream[K, V], f func(K, V) []V2) Stream[K, V2] {
	q := derive[K, V, K, V2](s.p)
	q.ks = s.p.ks
	s.p.to(func(t *task) func(Record[K, V]) {
		out := q.emitter(t)
		return func(r Record[K, V]) {
			for _, v := range f(r.Key, r.Value) {
				out(Record[K, V2]{Key: r.Key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers})
			}
		}
	})
	return Stream[K, V2]{q}
}

// Merge interleaves streams, in the order their records are processed. Merged streams
// must be in one subtopology (read from co-partitioned topics), which Merge makes so.
func Merge[K, V any](ss ...Stream[K, V]) Stream[K, V] {
	if len(ss) == 0 {
		panic("streams: Merge of no streams")
	}
	q := newPort[K, V](ss[0].p.b)
	q.ks, q.vs = ss[0].p.ks, ss[0].p.vs
	for _, s := range ss {
		s.p.b.link(s.p.id, q.id)
		q.rekeyed = q.rekeyed || s.p.rekeyed
		if s.p.ks == nil {
			q.ks = nil
		}
		if s.p.vs == nil {
			q.vs = nil
		}
		s.p.to(func(t *task) func(Record[K, V]) { return q.emitter(t) })
	}
	return Stream[K, V]{q}
}

// Repartition writes the stream to the topic <app>-<name>-repartition, partitioned by
// key, and reads it back in a new subtopology: after it, records of one key are in one
// task. Serdes: the stream's own, or the ones given.
func Repartition[K, V any](s Stream[K, V], name string, with ...Serdes[K, V]) Stream[K, V] {
	if !s.p.b.claim(name, "repartition") {
		return Stream[K, V]{newPort[K, V](s.p.b)}
	}
	return repartition(s, name, with)
}

// repartition is Repartition under a name already claimed (by an aggregation, whose
// changelog and repartition topics then share it).
func repartition[K, V any](s Stream[K, V], name string, with []Serdes[K, V]) Stream[K, V] {
	b := s.p.b
	ks, vs := s.p.ks, s.p.vs
	if len(with) > 0 {
		ks, vs = with[0].Key, with[0].Value
	}
	q := newPort[K, V](b)
	q.ks, q.vs = ks, vs
	if ks == nil || vs == nil {
		b.errorf("repartition %s: the stream's serdes are not known (it was mapped): pass streams.With(keySerde, valueSerde)", name)
		return Stream[K, V]{q}
	}
	topic := b.repartitionTopic(name)
	b.parts[topic] = &repartitionDef{topic: topic, upstream: s.p.id, reader: -1}
	s.p.to(sinkTo(topic, ks, vs))
	b.sources = append(b.sources, &sourceDef{topic: topic, node: q.id, internal: true, entry: decodeEntry(q, ks, vs)})
	return Stream[K, V]{q}
}

// Grouped is a stream grouped by key, ready for aggregation.
type Grouped[K, V any] struct {
	s    Stream[K, V]
	with []Serdes[K, V]
}

// GroupByKey groups the stream by its key. If the key was changed upstream, the
// aggregation repartitions by it first (through <app>-<name>-repartition, named by the
// aggregation), with the stream's serdes or the ones given.
func GroupByKey[K, V any](s Stream[K, V], with ...Serdes[K, V]) Grouped[K, V] {
	return Grouped[K, V]{s: s, with: with}
}

// GroupBy re-keys the stream with key and groups it: the aggregation repartitions.
func GroupBy[K, V, K2 any](s Stream[K, V], key func(K, V) K2, with ...Serdes[K2, V]) Grouped[K2, V] {
	return Grouped[K2, V]{s: Map(s, func(k K, v V) (K2, V) { return key(k, v), v }), with: with}
}

// input returns the stream an aggregation named name reads: repartitioned if re-keyed.
func (g Grouped[K, V]) input(name string) Stream[K, V] {
	if !g.s.p.rekeyed {
		return g.s
	}
	return repartition(g.s, name, g.with)
}
