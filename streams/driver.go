package streams

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/streams/store"
)

// The in-process driver behind package streamstest: every task of a topology in one
// goroutine, fed records by hand, committing after every input, without a server.

// DriverConfig configures a Driver. Zero values take the defaults.
type DriverConfig struct {
	// Partitions per topic, inputs and outputs; a topic not listed has 1.
	Partitions map[string]int32
	// InputPositionHeader, DeadLetterTopic and LateRecordTopic as in Config.
	InputPositionHeader string
	DeadLetterTopic     string
	LateRecordTopic     string
	// MaxCommitRecords and MaxCommitBytes as in Config.
	MaxCommitRecords int
	MaxCommitBytes   int64
	// Start is the wall clock's starting time. Default: the Unix epoch.
	Start time.Time
	// Registerer as in Config (the driver has no commits to time, restores or lag).
	Registerer prometheus.Registerer
}

// OutputRecord is a record the topology produced, as a consumer would read it.
type OutputRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte // nil: a tombstone
	Timestamp time.Time
	Headers   []client.Header
}

// Driver runs a topology in-process. Use it through package streamstest.
type Driver struct {
	topo    *Topology
	cfg     DriverConfig
	counts  map[int]int32
	tasks   []*task // in TaskID order
	inputs  map[*task][]*inputPart
	ends    map[client.TopicPartition]int64
	outputs map[string][]OutputRecord // user topics
	logs    map[string][]OutputRecord // changelog topics
	wall    time.Time
	metrics Metrics
	globals *globalSet
	err     error
}

// NewDriver checks the topology against the partition counts and starts every task.
func NewDriver(topo *Topology, cfg DriverConfig) (*Driver, error) {
	if cfg.MaxCommitRecords <= 0 {
		cfg.MaxCommitRecords = DefaultMaxCommitRecords
	}
	if cfg.MaxCommitBytes <= 0 {
		cfg.MaxCommitBytes = DefaultMaxCommitBytes
	}
	d := &Driver{topo: topo, cfg: cfg, inputs: map[*task][]*inputPart{}, ends: map[client.TopicPartition]int64{},
		outputs: map[string][]OutputRecord{}, logs: map[string][]OutputRecord{}, wall: cfg.Start,
		globals: newGlobalSet(store.NewMemory(), topo.b.globals)}
	counts, err := topo.taskCounts(d.partitions)
	if err != nil {
		return nil, err
	}
	d.counts = counts
	env := &taskEnv{partitions: d.partitions, inputHeader: cfg.InputPositionHeader, deadLetters: cfg.DeadLetterTopic,
		lateTopic: cfg.LateRecordTopic, maxRecords: cfg.MaxCommitRecords, maxBytes: cfg.MaxCommitBytes,
		metrics: &d.metrics, log: slog.New(slog.DiscardHandler), app: topo.App(), prom: newPromMetrics(cfg.Registerer),
		globals: d.globals}
	for _, s := range topo.subs {
		for p := int32(0); p < counts[s.index]; p++ {
			t := newTask(topo, s, p, store.NewMemory(), env)
			var parts []*inputPart
			pos := map[client.TopicPartition]int64{}
			for _, src := range s.sources {
				tp := client.TopicPartition{Topic: src.topic, Partition: p}
				parts = append(parts, &inputPart{tp: tp, atEnd: true})
				pos[tp] = 0
			}
			if err := t.init(pos); err != nil {
				return nil, err
			}
			t.punctuateWall(d.wall) // aligns wall-clock punctuators
			d.tasks = append(d.tasks, t)
			d.inputs[t] = parts
		}
	}
	return d, nil
}

func (d *Driver) partitions(topic string) (int32, error) {
	if s, ok := d.topo.sizer[topic]; ok {
		if n, ok := d.counts[s.index]; ok {
			return n, nil
		}
	}
	if n, ok := d.cfg.Partitions[topic]; ok {
		if n <= 0 {
			return 0, fmt.Errorf("topic %s: %d partitions", topic, n)
		}
		return n, nil
	}
	return 1, nil
}

// Err is the error that stopped the driver, if any.
func (d *Driver) Err() error { return d.err }

// Pipe feeds one record to topic (partition -1: by the key's bytes) and runs the
// topology until nothing is left to process, committing every task.
func (d *Driver) Pipe(topic string, partition int32, key, value []byte, ts time.Time, headers []client.Header) error {
	if d.err != nil {
		return d.err
	}
	n, err := d.partitions(topic)
	if err != nil {
		return err
	}
	if partition < 0 {
		partition = 0
		if key != nil {
			partition = client.KeyPartition(key, n)
		}
	}
	if partition >= n {
		return fmt.Errorf("streamstest: %s has %d partitions, not %d", topic, n, partition)
	}
	for _, g := range d.globals.defs {
		if g.topic == topic { // a global table's update: every task sees it at once
			tp := client.TopicPartition{Topic: topic, Partition: partition}
			off := d.ends[tp]
			d.ends[tp]++
			skipped, err := d.globals.apply(g, partition, []rawRecord{{Topic: topic, Partition: partition, Offset: off, Key: key, Value: value, TS: ms(ts)}}, off+1)
			if err != nil {
				return err
			}
			if len(skipped) > 0 {
				d.metrics.PoisonRecords.Add(1)
			}
			return nil
		}
	}
	if !d.enqueue(rawRecord{Topic: topic, Partition: partition, Key: key, Value: value, TS: ms(ts), Headers: headers}) {
		return fmt.Errorf("streamstest: the topology does not read %s", topic)
	}
	return d.run()
}

// enqueue appends r to the input partition of the task that reads it.
func (d *Driver) enqueue(r rawRecord) bool {
	tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
	for _, t := range d.tasks {
		for _, p := range d.inputs[t] {
			if p.tp == tp {
				r.Offset = d.ends[tp]
				d.ends[tp]++
				p.queue = append(p.queue, r)
				return true
			}
		}
	}
	return false
}

// AdvanceWallClock moves the wall clock on, fires the wall-clock punctuators due and
// commits.
func (d *Driver) AdvanceWallClock(by time.Duration) error {
	if d.err != nil {
		return d.err
	}
	d.wall = d.wall.Add(by)
	for _, t := range d.tasks {
		t.punctuateWall(d.wall)
	}
	return d.run()
}

// run processes everything processable, commits every task, and repeats while
// commits feed repartition topics.
func (d *Driver) run() error {
	for progress := true; progress; {
		progress = false
		for _, t := range d.tasks {
			for {
				p, ok := pick(d.inputs[t])
				if !ok {
					break
				}
				r := p.queue[0]
				p.queue = p.queue[1:]
				t.processBounded(r)
				if t.err != nil {
					d.err = t.err
					return d.err
				}
			}
			n, err := d.commit(t)
			if err != nil {
				d.err = err
				return err
			}
			progress = progress || n > 0
		}
	}
	return nil
}

// commit confirms every commit unit of t and delivers its records; n counts the
// repartition records delivered.
func (d *Driver) commit(t *task) (n int, err error) {
	for u := t.nextUnit(); u != nil; u = t.nextUnit() {
		for _, o := range u.outs {
			rec := OutputRecord{Topic: o.topic, Partition: o.partition, Key: o.key, Value: o.value, Timestamp: fromMs(o.ts), Headers: o.headers}
			if d.enqueue(rawRecord{Topic: o.topic, Partition: o.partition, Key: o.key, Value: o.value, TS: o.ts, Headers: o.headers}) {
				n++
				continue
			}
			tp := client.TopicPartition{Topic: o.topic, Partition: o.partition}
			rec.Offset = d.ends[tp]
			d.ends[tp]++
			d.outputs[o.topic] = append(d.outputs[o.topic], rec)
		}
		checkpoints := map[string]int64{}
		for _, w := range u.changelog {
			topic := d.topo.b.changelogTopic(w.store)
			tp := client.TopicPartition{Topic: topic, Partition: t.id.Partition}
			rec := OutputRecord{Topic: topic, Partition: t.id.Partition, Offset: d.ends[tp], Key: w.key, Timestamp: fromMs(w.ts)}
			if !w.del {
				rec.Value = w.value
			}
			checkpoints[w.store] = d.ends[tp]
			d.ends[tp]++
			d.logs[topic] = append(d.logs[topic], rec)
		}
		if err := t.confirmed(u, checkpoints); err != nil {
			return n, err
		}
		d.metrics.Commits.Add(1)
	}
	return n, nil
}

// Output returns every record produced to a user topic so far, in production order.
func (d *Driver) Output(topic string) []OutputRecord { return slices.Clone(d.outputs[topic]) }

// Changelog returns every record written to a store's changelog so far.
func (d *Driver) Changelog(storeName string) []OutputRecord {
	return slices.Clone(d.logs[d.topo.b.changelogTopic(storeName)])
}

// Entries returns a store's committed entries across all tasks, by encoded key (window
// stores: 8 bytes of window start, then the key).
func (d *Driver) Entries(storeName string) (map[string][]byte, error) {
	out := map[string][]byte{}
	found := false
	for _, t := range d.tasks {
		for _, sd := range t.sub.stores {
			if sd.name != storeName {
				continue
			}
			found = true
			if err := t.db.Range(storeName, nil, nil, func(k, v []byte) bool {
				out[string(k)] = slices.Clone(v)
				return true
			}); err != nil {
				return nil, err
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %s", ErrNoStore, storeName)
	}
	return out, nil
}

// Metrics returns the driver's counters.
func (d *Driver) Metrics() MetricsSnapshot { return d.metrics.Snapshot() }

// StreamTime returns a task's stream time.
func (d *Driver) StreamTime(id TaskID) (time.Time, bool) {
	for _, t := range d.tasks {
		if t.id == id {
			return fromMs(t.streamTime), t.hasTime
		}
	}
	return time.Time{}, false
}

// Close closes every task's processors.
func (d *Driver) Close() error {
	var errs []error
	for _, t := range d.tasks {
		errs = append(errs, t.close(), t.db.Close())
	}
	errs = append(errs, d.globals.db.Close())
	return errors.Join(errs...)
}

// WindowKey encodes a window store's key: window start, then the key's bytes.
func WindowKey(start time.Time, key []byte) []byte { return windowKey(ms(start), key) }
