package streams

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/RaduBerinde/btreemap"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/streams/store"
)

// rawRecord is an input record as fetched: stored bytes (nil: null).
type rawRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	TS        int64 // ms
	Headers   []client.Header
}

// outRec is a record the task will produce: to a user topic or a repartition topic.
type outRec struct {
	topic     string
	partition int32
	key       []byte
	value     []byte
	ts        int64
	headers   []client.Header
}

// pwrite is a store write not yet committed.
type pwrite struct {
	store string
	key   []byte
	value []byte
	del   bool
	ts    int64
}

// boundary is a point in a task's uncommitted work where a commit may end: absolute
// indexes into its writes and outputs, the bytes written up to there, and the input
// positions (next offset per input partition) reached.
type boundary struct {
	w, o       int64
	bytes      int64
	positions  map[client.TopicPartition]int64
	streamTime int64 // saved with the offsets, so windows close alike after a restart
	hasTime    bool
}

// taskEnv is what a task needs from whoever runs it.
type taskEnv struct {
	partitions  func(topic string) (int32, error)
	inputHeader string
	deadLetters string // poison records go here; "" stops the task
	lateTopic   string // late records go here too; "" only counts them
	maxRecords  int    // per commit
	maxBytes    int64
	metrics     *Metrics
	prom        *promMetrics
	app         string
	log         *slog.Logger
	globals     *globalSet // the instance's global tables (nil: none)
}

type punctuator struct {
	kind     PunctuationType
	interval int64 // ms
	next     int64 // ms; 0: not yet aligned
	fn       func(time.Time) error
}

// task runs one partition of one subtopology: it processes records, keeps their
// effects pending until a commit is confirmed, and hands out commit units.
type task struct {
	id   TaskID
	sub  *subtopology
	topo *Topology
	env  *taskEnv
	db   store.DB
	pm   *taskProm

	emit    map[int]any
	shared  map[int]any // per-task state of operators with more than one input (joins)
	entries map[string]func(rawRecord)
	closers []func() error
	onTime  []func() // after each record: windows closing, stream-time punctuators
	punct   []*punctuator

	// Uncommitted work: writes[i] has absolute index wBase+i, outs likewise.
	wBase, oBase int64
	writes       []pwrite
	index        map[string]map[string]int64                     // store → key → absolute index of its latest write
	sorted       map[string]*btreemap.BTreeMap[string, struct{}] // store → the keys of index, in order (for ranges)
	outs         []outRec
	bytes        int64      // bytes written since the task started
	openKeys     int        // distinct keys written since the last boundary: its changelog records
	base         boundary   // what the last confirmed commit ended at
	cuts         []boundary // boundaries not yet confirmed, in order; cuts[0] may be in flight

	positions  map[client.TopicPartition]int64
	streamTime int64
	hasTime    bool
	cur        *rawRecord
	outSeq     int // outputs of the current input, for the position header
	punctTime  int64
	err        error
}

func newTask(topo *Topology, sub *subtopology, partition int32, db store.DB, env *taskEnv) *task {
	t := &task{
		id: TaskID{sub.index, partition}, sub: sub, topo: topo, env: env, db: db,
		emit: map[int]any{}, shared: map[int]any{}, entries: map[string]func(rawRecord){}, index: map[string]map[string]int64{},
		sorted: map[string]*btreemap.BTreeMap[string, struct{}]{}, positions: map[client.TopicPartition]int64{},
	}
	t.base = boundary{positions: map[client.TopicPartition]int64{}}
	if env.prom == nil {
		env.prom = newPromMetrics(nil)
	}
	t.pm = env.prom.forTask(env.app, t.id)
	return t
}

// init instantiates the subtopology's nodes for this task, once its stores are ready.
func (t *task) init(positions map[client.TopicPartition]int64) error {
	maps.Copy(t.positions, positions)
	t.base.positions = maps.Clone(positions)
	for _, src := range t.sub.sources {
		t.entries[src.topic] = src.entry(t)
	}
	return t.err
}

// shared returns the task's state for the operator id, made once by mk: what the
// inputs of a join share.
func shared[T any](t *task, id int, mk func() T) T {
	if v, ok := t.shared[id]; ok {
		return v.(T)
	}
	v := mk()
	t.shared[id] = v
	return v
}

// budget is how many entries an operator may expire, or closed join records emit, per
// input record beyond what the record itself does: the rest waits for the next
// record, so that a jump in stream time never makes one record's commit exceed the
// limits. (Expiring late is harmless: nothing reads expired entries.)
func (t *task) budget() int { return max(16, t.env.maxRecords/16) }

// fail records the first error that stops the task.
func (t *task) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

func (t *task) failf(format string, args ...any) {
	t.fail(fmt.Errorf("streams: task %s: "+format, append([]any{t.id}, args...)...))
}

// process runs one input record through the subtopology.
func (t *task) process(r rawRecord) {
	if !t.hasTime || r.TS > t.streamTime {
		t.streamTime, t.hasTime = r.TS, true
	}
	t.cur, t.outSeq = &r, 0
	entry := t.entries[r.Topic]
	if entry == nil {
		t.failf("record of %s, which it does not read", r.Topic)
		return
	}
	entry(r)
	t.positions[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
	for _, f := range t.onTime {
		f()
	}
	t.cur = nil
	t.punctuateStream()
	t.env.metrics.RecordsProcessed.Add(1)
	t.pm.processed.Inc()
}

// punctuateStream fires the stream-time punctuators due at the current stream time.
func (t *task) punctuateStream() {
	for _, p := range t.punct {
		if p.kind == StreamTime && t.hasTime {
			t.firePunct(p, t.streamTime)
		}
	}
}

// PunctuateWall fires the wall-clock punctuators due at now.
func (t *task) punctuateWall(now time.Time) {
	for _, p := range t.punct {
		if p.kind == WallClock {
			t.firePunct(p, now.UnixMilli())
		}
	}
}

func (t *task) firePunct(p *punctuator, now int64) {
	if p.next == 0 {
		p.next = (now/p.interval)*p.interval + p.interval
		return
	}
	if now < p.next || t.err != nil {
		return
	}
	prev := t.cur
	t.cur, t.outSeq, t.punctTime = nil, 0, now
	t.pm.punctuations.Inc()
	if err := p.fn(fromMs(now)); err != nil {
		t.failf("punctuator: %w", err)
	}
	t.cur = prev
	p.next = (now/p.interval)*p.interval + p.interval
}

// send queues a record for topic, partitioned by its key's bytes as a Kafka client
// would (a null key goes to the task's own partition, so reprocessing is stable).
func (t *task) send(topic string, key, value []byte, ts int64, headers []client.Header) {
	t.sendBy(topic, key, key, value, ts, headers)
}

// sendBy is send partitioned by partKey's bytes instead of the key's: a foreign-key
// join's subscription goes to the foreign key's partition, its key holding both keys.
func (t *task) sendBy(topic string, partKey, key, value []byte, ts int64, headers []client.Header) {
	n, err := t.env.partitions(topic)
	if err != nil {
		t.failf("send to %s: %w", topic, err)
		return
	}
	part := t.id.Partition % n
	if partKey != nil {
		part = client.KeyPartition(partKey, n)
	}
	if h := t.env.inputHeader; h != "" {
		var pos string
		if t.cur != nil {
			pos = Position{t.cur.Topic, t.cur.Partition, t.cur.Offset}.String()
		} else {
			pos = "punctuate/" + t.id.String() + "/" + strconv.FormatInt(t.punctTime, 10)
		}
		headers = append(slices.Clip(headers), client.Header{Key: h, Value: []byte(pos + "#" + strconv.Itoa(t.outSeq))})
		t.outSeq++
	}
	t.outs = append(t.outs, outRec{topic: topic, partition: part, key: key, value: value, ts: ts, headers: headers})
	t.bytes += recordSize(key, value, headers)
}

func recordSize(key, value []byte, headers []client.Header) int64 {
	n := int64(len(key) + len(value) + 64)
	for _, h := range headers {
		n += int64(len(h.Key) + len(h.Value) + 16)
	}
	return n
}

// currentTS is the timestamp of what is being processed: the input record's, or the
// punctuation time.
func (t *task) currentTS() int64 {
	if t.cur != nil {
		return t.cur.TS
	}
	return t.punctTime
}

// get reads a store: uncommitted writes first, then the local store.
func (t *task) get(st string, key []byte) ([]byte, bool) {
	if i, ok := t.index[st][string(key)]; ok && i >= t.wBase {
		w := t.writes[i-t.wBase]
		return w.value, !w.del
	}
	v, ok, err := t.db.Get(st, key)
	if err != nil {
		t.failf("read store %s: %w", st, err)
		return nil, false
	}
	return v, ok
}

func (t *task) put(st string, key, value []byte) { t.write(pwrite{store: st, key: key, value: value}) }
func (t *task) del(st string, key []byte)        { t.write(pwrite{store: st, key: key, del: true}) }

func (t *task) write(w pwrite) {
	w.ts = t.currentTS()
	m := t.index[w.store]
	if m == nil {
		m = map[string]int64{}
		t.index[w.store] = m
		t.sorted[w.store] = btreemap.New[string, struct{}](16, strings.Compare)
	}
	prev, ok := m[string(w.key)]
	if !ok {
		t.sorted[w.store].ReplaceOrInsert(string(w.key), struct{}{})
	}
	if !ok || prev < t.last().w {
		t.openKeys++
	}
	m[string(w.key)] = t.wBase + int64(len(t.writes))
	t.writes = append(t.writes, w)
	t.bytes += recordSize(w.key, w.value, nil)
}

// rangeStore calls fn for the store's live entries in [lo, hi) in key order, merging
// uncommitted writes over the local store. It stops as soon as fn returns false: a
// range costs what it reads, not the store's size.
func (t *task) rangeStore(st string, lo, hi []byte, fn func(k, v []byte) bool) {
	var mine []string // uncommitted keys in range, in order
	if s := t.sorted[st]; s != nil {
		upper := btreemap.Max[string]()
		if hi != nil {
			upper = btreemap.LT(string(hi))
		}
		s.AscendFunc(btreemap.GE(string(lo)), upper, func(k string, _ struct{}) bool {
			mine = append(mine, k)
			return true
		})
	}
	i, stopped := 0, false
	pending := func(k string) bool { // fn on an uncommitted write, unless a delete
		w := t.writes[t.index[st][k]-t.wBase]
		if w.del {
			return true
		}
		return fn(w.key, w.value)
	}
	err := t.db.Range(st, lo, hi, func(k, v []byte) bool {
		for ; i < len(mine) && mine[i] < string(k); i++ {
			if !pending(mine[i]) {
				stopped = true
				return false
			}
		}
		if i < len(mine) && mine[i] == string(k) {
			i++
			if !pending(mine[i-1]) {
				stopped = true
				return false
			}
			return true
		}
		if !fn(k, v) {
			stopped = true
			return false
		}
		return true
	})
	if err != nil {
		t.failf("range over store %s: %w", st, err)
		return
	}
	for ; !stopped && i < len(mine); i++ {
		if !pending(mine[i]) {
			return
		}
	}
}

// end is the boundary at the current end of uncommitted work.
func (t *task) end() boundary {
	return boundary{w: t.wBase + int64(len(t.writes)), o: t.oBase + int64(len(t.outs)), bytes: t.bytes, positions: maps.Clone(t.positions),
		streamTime: t.streamTime, hasTime: t.hasTime}
}

func (t *task) last() boundary {
	if len(t.cuts) > 0 {
		return t.cuts[len(t.cuts)-1]
	}
	return t.base
}

// openSize is what a commit from the last boundary to the current end would hold:
// its outputs and one changelog record per key written.
func (t *task) openSize() (records int, bytes int64) {
	b := t.last()
	return t.openKeys + int(t.oBase+int64(len(t.outs))-b.o), t.bytes - b.bytes
}

// cut ends a commit at b, a boundary at or after the last one, and counts the keys
// written since b for the next.
func (t *task) cut(b boundary) {
	t.cuts = append(t.cuts, b)
	seen := map[[2]string]bool{}
	for _, w := range t.writes[b.w-t.wBase:] {
		seen[[2]string{w.store, string(w.key)}] = true
	}
	t.openKeys = len(seen)
}

// processBounded processes r keeping every commit within the limits: if r's effects
// would push the open commit over them, the commit ends before r. A single record
// whose effects exceed the limits alone stops the task.
func (t *task) processBounded(r rawRecord) {
	// The boundary before r, without its positions: those are copied only if it is
	// used (a copy per record would cost more than the rest of this).
	mark := boundary{w: t.wBase + int64(len(t.writes)), o: t.oBase + int64(len(t.outs)), bytes: t.bytes, streamTime: t.streamTime, hasTime: t.hasTime}
	t.process(r)
	recs, size := t.openSize()
	if recs <= t.env.maxRecords && size <= t.env.maxBytes {
		return
	}
	if mark.w != t.last().w || mark.o != t.last().o {
		mark.positions = maps.Clone(t.positions)
		mark.positions[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset // r not processed
		t.cut(mark)
		recs, size = t.openSize()
	}
	if recs > t.env.maxRecords || size > t.env.maxBytes {
		t.failf("the record at %s produced %d records (%d bytes) of output and state changes; one commit holds at most %d records and %d bytes (raise the commit limits, and the server's, or make the processing produce less per record)",
			Position{r.Topic, r.Partition, r.Offset}, recs, size, t.env.maxRecords, t.env.maxBytes)
	}
}

// full says the open commit has reached half the limits: time to cut it.
func (t *task) full() bool {
	recs, size := t.openSize()
	return recs >= t.env.maxRecords/2 || size >= t.env.maxBytes/2
}

// unit is one commit: outputs, changelog writes (last write per key) and the input
// positions, from the last confirmed boundary to b.
type unit struct {
	b         boundary
	outs      []outRec
	changelog []pwrite
}

// nextUnit returns the next commit to send, cutting the open work if no cut is
// waiting; nil when there is nothing to commit.
func (t *task) nextUnit() *unit {
	if len(t.cuts) == 0 {
		e := t.end()
		if e.w == t.base.w && e.o == t.base.o && maps.Equal(e.positions, t.base.positions) {
			return nil
		}
		t.cut(e)
	}
	b := t.cuts[0]
	u := &unit{b: b, outs: t.outs[:b.o-t.oBase]}
	ws := t.writes[:b.w-t.wBase]
	last := map[[2]string]int{}
	for i, w := range ws {
		last[[2]string{w.store, string(w.key)}] = i
	}
	for i, w := range ws {
		if last[[2]string{w.store, string(w.key)}] == i {
			u.changelog = append(u.changelog, w)
		}
	}
	return u
}

// confirmed applies a confirmed unit to the local store with the stores' new
// checkpoints and forgets it.
func (t *task) confirmed(u *unit, checkpoints map[string]int64) error {
	writes := make([]store.Write, len(u.changelog))
	for i, w := range u.changelog {
		writes[i] = store.Write{Store: w.store, Key: w.key, Value: w.value, Delete: w.del}
	}
	if err := t.db.Apply(writes, checkpoints); err != nil {
		return fmt.Errorf("streams: task %s: apply a confirmed commit to the local store: %w", t.id, err)
	}
	nw := u.b.w - t.wBase
	for _, w := range t.writes[:nw] {
		if i, ok := t.index[w.store][string(w.key)]; ok && i < u.b.w {
			delete(t.index[w.store], string(w.key))
			t.sorted[w.store].Delete(string(w.key))
		}
	}
	t.writes = slices.Clone(t.writes[nw:])
	t.wBase = u.b.w
	t.outs = slices.Clone(t.outs[u.b.o-t.oBase:])
	t.oBase = u.b.o
	t.base = u.b
	t.cuts = t.cuts[1:]
	return nil
}

// waiting says processing should pause: a cut waits behind the one in flight.
func (t *task) waiting() bool { return len(t.cuts) > 1 }

func (t *task) close() error {
	t.pm.forget()
	var first error
	for _, c := range t.closers {
		if err := c(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// inputPart is one input partition's fetched, unprocessed records.
type inputPart struct {
	tp     client.TopicPartition
	queue  []rawRecord
	atEnd  bool  // nothing more to read now: fetched up to the high watermark
	hwm    int64 // the high watermark last fetched (-1: none yet)
	closed bool
}

// pick chooses the next record by the determinism rule: only when every input
// partition has a record or is at its end, the smallest (timestamp, topic,
// partition, offset). ok is false when a partition must be waited for or none has
// records.
func pick(parts []*inputPart) (*inputPart, bool) {
	var best *inputPart
	for _, p := range parts {
		if len(p.queue) == 0 {
			if !p.atEnd {
				return nil, false
			}
			continue
		}
		if best == nil || less(&p.queue[0], &best.queue[0]) {
			best = p
		}
	}
	return best, best != nil
}

func less(a, b *rawRecord) bool {
	if a.TS != b.TS {
		return a.TS < b.TS
	}
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	if a.Partition != b.Partition {
		return a.Partition < b.Partition
	}
	return a.Offset < b.Offset
}
