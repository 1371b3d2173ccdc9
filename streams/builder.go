package streams

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"

	"github.com/strata-io/strata/streams/serde"
)

// Builder collects a topology. Its DSL calls record mistakes (a missing name, a window
// without grace, a re-keyed stream joined without a repartition) and New reports them
// all at once.
type Builder struct {
	app     string
	nextID  int
	parent  []int // union-find over node ids: a connected component is a subtopology
	sources []*sourceDef
	sinks   map[string]bool // user topics written
	stores  map[string]*storeDef
	parts   map[string]*repartitionDef // by topic
	names   map[string]string          // stateful names taken, and by what
	globals []*globalDef               // global tables, in declaration order
	errs    []error
}

// NewBuilder starts a topology for the application app: app names the consumer group,
// the transactional ids <app>/<task> and the internal topics <app>-<name>-….
func NewBuilder(app string) *Builder {
	b := &Builder{app: app, sinks: map[string]bool{}, stores: map[string]*storeDef{}, parts: map[string]*repartitionDef{}, names: map[string]string{}}
	if !validName.MatchString(app) {
		b.errorf("app id %q: use 1 to 100 letters, digits, '.', '_' or '-'", app)
	}
	return b
}

var validName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

func (b *Builder) errorf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("streams: "+format, args...))
}

func (b *Builder) newID() int {
	id := b.nextID
	b.nextID++
	b.parent = append(b.parent, id)
	return id
}

func (b *Builder) find(id int) int {
	for b.parent[id] != id {
		b.parent[id] = b.parent[b.parent[id]]
		id = b.parent[id]
	}
	return id
}

// link puts two nodes in one subtopology.
func (b *Builder) link(a, c int) { b.parent[b.find(a)] = b.find(c) }

// claim takes a stateful name for what, once.
func (b *Builder) claim(name, what string) bool {
	if !validName.MatchString(name) {
		b.errorf("%s: name %q: every stateful operation needs a name of 1 to 100 letters, digits, '.', '_' or '-' (it names its store and topics)", what, name)
		return false
	}
	if prev, ok := b.names[name]; ok {
		b.errorf("%s: name %q is already used by %s", what, name, prev)
		return false
	}
	b.names[name] = what
	return true
}

// port is a typed edge source: the records a node emits, and the nodes that take them.
type port[K, V any] struct {
	b         *Builder
	id        int
	consumers []func(t *task) func(Record[K, V])
	ks        serde.Serde[K] // known serdes, nil when not
	vs        serde.Serde[V]
	rekeyed   bool // the key changed since the records were read from a topic
}

func newPort[K, V any](b *Builder) *port[K, V] { return &port[K, V]{b: b, id: b.newID()} }

// derive makes a port downstream of p in p's subtopology.
func derive[K, V, K2, V2 any](p *port[K, V]) *port[K2, V2] {
	q := newPort[K2, V2](p.b)
	p.b.link(p.id, q.id)
	q.rekeyed = p.rekeyed
	return q
}

// to adds a consumer of p's records.
func (p *port[K, V]) to(c func(t *task) func(Record[K, V])) { p.consumers = append(p.consumers, c) }

// emitter returns the function that hands a record to every consumer of p in task t,
// built once per task.
func (p *port[K, V]) emitter(t *task) func(Record[K, V]) {
	if f, ok := t.emit[p.id]; ok {
		return f.(func(Record[K, V]))
	}
	fs := make([]func(Record[K, V]), len(p.consumers))
	for i, c := range p.consumers {
		fs[i] = c(t)
	}
	var f func(Record[K, V])
	switch len(fs) {
	case 0:
		f = func(Record[K, V]) {}
	case 1:
		f = fs[0]
	default:
		f = func(r Record[K, V]) {
			for _, g := range fs {
				g(r)
			}
		}
	}
	t.emit[p.id] = f
	return f
}

// sourceDef is a topic read by the topology: a user input or an internal topic
// (repartition, or a foreign-key join's subscriptions and responses).
type sourceDef struct {
	topic    string
	node     int
	internal bool                              // written by the topology
	follows  bool                              // internal, with the partition count of its reader's other sources
	entry    func(t *task) func(raw rawRecord) // decodes and forwards
}

type storeKind int

const (
	kvStore     storeKind = iota
	windowStore           // tumbling and hopping windows: (start, key) keys, changelog compact,delete
	timedStore            // a store.Timed layout (sliding, session, join, Processor API window stores)
)

// storeDef is a state store and its changelog.
type storeDef struct {
	name        string
	kind        storeKind
	node        int
	retentionMs int64 // window stores: how long the changelog keeps records; Processor API window and session stores: how long entries are kept
	sessions    bool  // a Processor API session store
	stamped     bool  // a table's store: each value after its 8-byte timestamp
}

// repartitionDef is an internal topic: written by the upstream subtopology (node),
// read by another, with the writer's partition count — or, when reader is set (a
// node), with the reader's: a foreign-key join's subscriptions go to the partitions
// of the right table, its responses to those of the left.
type repartitionDef struct {
	topic    string
	upstream int
	reader   int // -1: sized by the writer
}

func (b *Builder) changelogTopic(store string) string  { return b.app + "-" + store + "-changelog" }
func (b *Builder) repartitionTopic(name string) string { return b.app + "-" + name + "-repartition" }

// Topology is a checked, immutable topology: what New runs and streamstest drives.
type Topology struct {
	b     *Builder
	subs  []*subtopology
	byTop map[string]*subtopology // source topic → its subtopology
	sizer map[string]*subtopology // internal topic → the subtopology whose task count it has
}

// subtopology is a connected part of the topology between repartition topics: its
// tasks are its partitions.
type subtopology struct {
	index   int
	sources []*sourceDef
	stores  []*storeDef
	// upstreamOf: repartition topics this subtopology writes.
	writes []string
}

// Build checks the topology and returns it, or every mistake found.
func (b *Builder) Build() (*Topology, error) {
	if len(b.sources) == 0 {
		b.errorf("the topology reads no topic: start it with streams.From")
	}
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	comps := map[int]*subtopology{}
	var roots []int
	for _, s := range b.sources {
		r := b.find(s.node)
		if comps[r] == nil {
			comps[r] = &subtopology{}
			roots = append(roots, r)
		}
		comps[r].sources = append(comps[r].sources, s)
	}
	// Number subtopologies by their first source, in the order sources were declared.
	t := &Topology{b: b, byTop: map[string]*subtopology{}, sizer: map[string]*subtopology{}}
	for i, r := range roots {
		s := comps[r]
		s.index = i
		t.subs = append(t.subs, s)
		for _, src := range s.sources {
			if prev, ok := t.byTop[src.topic]; ok {
				return nil, fmt.Errorf("streams: topic %s is read twice (subtopologies %d and %d): read it once and reuse the stream (or Merge)", src.topic, prev.index, i)
			}
			t.byTop[src.topic] = s
		}
	}
	names := make([]string, 0, len(b.stores))
	for n := range b.stores {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		sd := b.stores[n]
		s, ok := comps[b.find(sd.node)]
		if !ok {
			return nil, fmt.Errorf("streams: store %s is fed by no source", n)
		}
		s.stores = append(s.stores, sd)
	}
	for topic, rp := range b.parts {
		s, ok := comps[b.find(rp.upstream)]
		if !ok {
			return nil, fmt.Errorf("streams: internal topic %s is fed by no source", topic)
		}
		s.writes = append(s.writes, topic)
		t.sizer[topic] = s
		if rp.reader >= 0 {
			if t.sizer[topic], ok = comps[b.find(rp.reader)]; !ok {
				return nil, fmt.Errorf("streams: internal topic %s is read by no subtopology with a source", topic)
			}
		}
	}
	for _, s := range t.subs {
		slices.Sort(s.writes)
	}
	return t, nil
}

// App is the application id.
func (t *Topology) App() string { return t.b.app }

// SourceTopics lists the topics the topology reads, user and repartition topics.
func (t *Topology) SourceTopics() []string {
	var out []string
	for _, s := range t.subs {
		for _, src := range s.sources {
			out = append(out, src.topic)
		}
	}
	sort.Strings(out)
	return out
}

// ChangelogTopics lists the changelog topics of every store.
func (t *Topology) ChangelogTopics() []string {
	var out []string
	for n := range t.b.stores {
		out = append(out, t.b.changelogTopic(n))
	}
	sort.Strings(out)
	return out
}

// Describe renders the topology: subtopologies, their sources, stores and the
// repartition topics they write.
func (t *Topology) Describe() string {
	var out []byte
	for _, s := range t.subs {
		out = fmt.Appendf(out, "subtopology %d\n", s.index)
		for _, src := range s.sources {
			out = fmt.Appendf(out, "  source %s\n", src.topic)
		}
		for _, st := range s.stores {
			out = fmt.Appendf(out, "  store %s (changelog %s)\n", st.name, t.b.changelogTopic(st.name))
		}
		for _, w := range s.writes {
			out = fmt.Appendf(out, "  writes %s\n", w)
		}
	}
	return string(out)
}
