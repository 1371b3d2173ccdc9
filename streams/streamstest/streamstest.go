// Package streamstest drives a streams topology in-process, deterministically and
// without a server: pipe records in, advance the wall clock, read what it produced,
// inspect its stores. Every task of the topology runs in the test's goroutine and
// commits after each input, as the runtime does after a confirmed commit.
package streamstest

import (
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/store"
	"github.com/strata-io/strata/streams/window"
)

// Config is streams.DriverConfig.
type Config = streams.DriverConfig

// Driver wraps streams.Driver for a test.
type Driver struct {
	*streams.Driver
	t testing.TB
}

// New builds b's topology and starts a driver for it; the test fails on error.
func New(t testing.TB, b *streams.Builder, cfg Config) *Driver {
	t.Helper()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := streams.NewDriver(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return &Driver{Driver: d, t: t}
}

// Input pipes typed records into one topic.
type Input[K, V any] struct {
	d     *Driver
	topic string
	ks    serde.Serde[K]
	vs    serde.Serde[V]
}

// NewInput returns a typed input for topic.
func NewInput[K, V any](d *Driver, topic string, ks serde.Serde[K], vs serde.Serde[V]) *Input[K, V] {
	return &Input[K, V]{d, topic, ks, vs}
}

// Pipe sends one record (partitioned by its key) at ts and processes it; the test
// fails if the topology stops.
func (in *Input[K, V]) Pipe(k K, v V, ts time.Time, headers ...client.Header) {
	in.d.t.Helper()
	if err := in.TryPipe(k, v, ts, headers...); err != nil {
		in.d.t.Fatal(err)
	}
}

// TryPipe is Pipe returning the error instead.
func (in *Input[K, V]) TryPipe(k K, v V, ts time.Time, headers ...client.Header) error {
	kb, err := in.ks.Encode(k)
	if err != nil {
		return err
	}
	vb, err := in.vs.Encode(v)
	if err != nil {
		return err
	}
	return in.d.Driver.Pipe(in.topic, -1, kb, vb, ts, headers)
}

// PipeRaw sends stored bytes as they are (a poison record, a null value).
func (in *Input[K, V]) PipeRaw(key, value []byte, ts time.Time) error {
	return in.d.Driver.Pipe(in.topic, -1, key, value, ts, nil)
}

// Output reads typed records a topology produced to one topic.
type Output[K, V any] struct {
	d     *Driver
	topic string
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	read  int
}

// NewOutput returns a typed reader of topic.
func NewOutput[K, V any](d *Driver, topic string, ks serde.Serde[K], vs serde.Serde[V]) *Output[K, V] {
	return &Output[K, V]{d: d, topic: topic, ks: ks, vs: vs}
}

// Read returns the records produced since the last Read, decoded.
func (o *Output[K, V]) Read() []streams.Record[K, V] {
	o.d.t.Helper()
	all := o.d.Output(o.topic)
	var out []streams.Record[K, V]
	for _, r := range all[o.read:] {
		var rec streams.Record[K, V]
		var err error
		if r.Key != nil {
			if rec.Key, err = o.ks.Decode(r.Key); err != nil {
				o.d.t.Fatalf("output %s: key: %v", o.topic, err)
			}
		}
		if r.Value != nil {
			if rec.Value, err = o.vs.Decode(r.Value); err != nil {
				o.d.t.Fatalf("output %s: value: %v", o.topic, err)
			}
		}
		rec.Timestamp, rec.Headers = r.Timestamp, r.Headers
		out = append(out, rec)
	}
	o.read = len(all)
	return out
}

// Get reads a key-value store's committed value for k.
func Get[K, V any](d *Driver, storeName string, ks serde.Serde[K], vs serde.Serde[V], k K) (V, bool) {
	d.t.Helper()
	kb, err := ks.Encode(k)
	if err != nil {
		d.t.Fatal(err)
	}
	return lookup(d, storeName, kb, vs)
}

// GetWindow reads a window store's committed value for k in the window starting at
// start.
func GetWindow[K, V any](d *Driver, storeName string, ks serde.Serde[K], vs serde.Serde[V], k K, start time.Time) (V, bool) {
	d.t.Helper()
	kb, err := ks.Encode(k)
	if err != nil {
		d.t.Fatal(err)
	}
	return lookup(d, storeName, streams.WindowKey(start, kb), vs)
}

// GetTable reads the committed value of k in a table read from a topic, made from a
// stream or by a join (their stores keep each value's timestamp).
func GetTable[K, V any](d *Driver, storeName string, ks serde.Serde[K], vs serde.Serde[V], k K) (V, bool) {
	d.t.Helper()
	kb, err := ks.Encode(k)
	if err != nil {
		d.t.Fatal(err)
	}
	return lookupStamped(d, storeName, kb, vs)
}

// GetSliding reads a sliding windowed aggregation's committed value for k in the
// window starting at start.
func GetSliding[K, V any](d *Driver, storeName string, ks serde.Serde[K], vs serde.Serde[V], k K, start time.Time) (V, bool) {
	d.t.Helper()
	kb, err := ks.Encode(k)
	if err != nil {
		d.t.Fatal(err)
	}
	return lookupStamped(d, storeName, store.EntryKey(kb, start.UnixMilli(), 0), vs)
}

// GetSession reads a session aggregation's committed value for k's session from
// first to last (its first and last records' times).
func GetSession[K, V any](d *Driver, storeName string, ks serde.Serde[K], vs serde.Serde[V], k K, first, last time.Time) (V, bool) {
	d.t.Helper()
	kb, err := ks.Encode(k)
	if err != nil {
		d.t.Fatal(err)
	}
	return lookup(d, storeName, store.EntryKey(kb, last.UnixMilli(), first.UnixMilli()), vs)
}

// lookupStamped is lookup of a value stored after its 8-byte timestamp.
func lookupStamped[V any](d *Driver, storeName string, key []byte, vs serde.Serde[V]) (V, bool) {
	d.t.Helper()
	return lookupWith(d, storeName, key, vs, 8)
}

func lookup[V any](d *Driver, storeName string, key []byte, vs serde.Serde[V]) (V, bool) {
	d.t.Helper()
	return lookupWith(d, storeName, key, vs, 0)
}

func lookupWith[V any](d *Driver, storeName string, key []byte, vs serde.Serde[V], skip int) (V, bool) {
	d.t.Helper()
	var zero V
	entries, err := d.Entries(storeName)
	if err != nil {
		d.t.Fatal(err)
	}
	raw, ok := entries[string(key)]
	if !ok {
		return zero, false
	}
	if len(raw) < skip {
		d.t.Fatalf("store %s: value %x has no timestamp", storeName, raw)
	}
	v, err := vs.Decode(raw[skip:])
	if err != nil {
		d.t.Fatal(err)
	}
	return v, true
}

// Results is a shorthand type for windowed output records.
type Results[K, V any] = []streams.Record[K, window.Result[V]]
