package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
)

// The producer: linger batching across calls, a bounded window of requests in flight,
// and retries that are safe because requests are idempotent (docs/design.md "Write
// path"; the exactly-once issue).
//
// Every request the producer sends is sealed once — its records, their partitions (chosen
// here), the producer id and epoch and a base sequence per partition — and retried byte
// for byte, so the server recognises a retry of a committed request and answers its
// original offsets. Requests are sequenced in the order they are sealed, and at most
// MaxInFlight of them, counted from the oldest unresolved one, are sent at once: the
// server remembers a producer's last 5 batches per partition, so a retry is always
// recognised.
//
// A request the server refuses for good (a bad record, a deleted topic) leaves a gap in
// its partitions' sequences, which later requests cannot cross. The producer then lets
// everything in flight settle, takes a new identity (POST /v1/producers: a new id, or
// for a transactional id the next epoch, bumped only from its own), and sends the
// requests that did not commit again under it, in order. Nothing it resends can have
// committed: each was refused as out of order while at most four later requests could
// commit beside it.

// ProducerConfig configures a Producer. Zero values take the documented defaults.
type ProducerConfig struct {
	// TransactionalID is a stable id of this application instance (a service name and
	// shard). A producer with one fences every older producer of the same id: their
	// requests are refused (producer_fenced) from the moment this one starts. Default:
	// none, a new producer id per Producer.
	TransactionalID string
	// NotIdempotent sends requests without a producer id: no sequences, and a request
	// whose outcome is unknown (a broken connection, commit_outcome_unknown) fails
	// instead of being retried, since a retry could write it twice. Default: idempotent.
	NotIdempotent bool
	// Linger is how long a record may wait for others to share its request. Default
	// 5ms.
	Linger time.Duration
	// BatchRecords and BatchBytes seal a request early: at this many records, or at
	// about this many bytes of keys, values and headers. Defaults 5,000 and 4 MiB (the
	// server takes 10,000 records and 16 MiB bodies by default).
	BatchRecords int
	BatchBytes   int
	// MaxInFlight bounds the requests sent and not yet answered, counted from the
	// oldest unanswered one. Default 5, which is also the most an idempotent producer
	// may use: the server recognises a retry among a producer's last 5 requests.
	MaxInFlight int
	// BufferRecords bounds the records waiting (buffered or in flight); Send blocks
	// beyond it. Default 100,000.
	BufferRecords int
	// DeliveryTimeout bounds how long a request is retried. Default 2 minutes.
	DeliveryTimeout time.Duration
	// RequestTimeout bounds one attempt. Default 30s.
	RequestTimeout time.Duration
	// RetryBackoff is the first wait between attempts, doubled up to 2s, or the
	// server's Retry-After. Default 100ms.
	RetryBackoff time.Duration
	// MetadataMaxAge is how long a topic's partition count and key.format are trusted
	// before they are read again. Default 30s.
	MetadataMaxAge time.Duration
	// Logger receives the producer's own log lines; default: discarded.
	Logger *slog.Logger
}

// Producer error codes the server answers with (HTTP 409); branch with HasCode.
const (
	CodeProducerFenced     = v1.CodeProducerFenced
	CodeOutOfOrderSequence = v1.CodeOutOfOrderSequence
	CodeUnknownProducer    = v1.CodeUnknownProducer
)

var (
	// ErrProducerClosed: Send or Produce after Close, or a request still waiting when
	// Close's context ended.
	ErrProducerClosed = errors.New("client: producer closed")
	// ErrProducerFenced accompanies the server's producer_fenced answer on every
	// request of a fenced producer: a newer instance with its transactional id has
	// started. The producer is finished.
	ErrProducerFenced = errors.New("client: producer fenced")
)

// ProducerIdentity is a producer id and epoch as POST /v1/producers hands them out.
type ProducerIdentity = v1.InitProducerResponse

// InitProducer asks for a producer identity: a new id, or for a transactional id its id
// at the next epoch (fencing older holders). current, with a transactional id, is the
// identity held now: the epoch is bumped only if it still is the id's (else
// producer_fenced).
func (c *Client) InitProducer(ctx context.Context, transactionalID string, current *ProducerIdentity) (ProducerIdentity, error) {
	var in v1.InitProducerRequest
	if transactionalID != "" {
		in.TransactionalID = &transactionalID
	}
	if current != nil {
		epoch := int64(current.Epoch)
		in.ProducerID, in.Epoch = &current.ID, &epoch
	}
	var out ProducerIdentity
	err := c.do(ctx, "init producer", http.MethodPost, nil, in, &out, "v1", "producers")
	return out, err
}

// TopicRecord is a record for a topic, for requests that write several topics.
type TopicRecord struct {
	Topic string
	Record
}

// TopicOffset is where a record of a multi-topic request landed.
type TopicOffset = v1.TopicOffset

// Delivery is the outcome of one record given to Send, known once Done is closed.
type Delivery struct {
	Topic  string
	done   chan struct{}
	offset Offset
	dup    bool
	err    error
}

// Done is closed when the record has committed or failed for good.
func (d *Delivery) Done() <-chan struct{} { return d.done }

// Result is where the record landed, or why it did not; call it after Done.
func (d *Delivery) Result() (Offset, error) { return d.offset, d.err }

// Duplicate reports whether the record's request was answered as a retry of one that
// had committed before (the offset is the original one).
func (d *Delivery) Duplicate() bool { return d.dup }

// Wait waits for the outcome, or for ctx (the record is still sent).
func (d *Delivery) Wait(ctx context.Context) (Offset, error) {
	select {
	case <-d.done:
		return d.offset, d.err
	case <-ctx.Done():
		return Offset{}, ctx.Err()
	}
}

type tpKey struct {
	topic     string
	partition int32
}

// batchRec is one record of a request.
type batchRec struct {
	topic     string
	partition int32
	wire      v1.ProduceRecord // Partition set
	d         *Delivery        // nil in atomic requests
}

// txnGroup is a request's group offsets; refresh reads the member's current epoch, to
// send again a request refused for a stale one.
type txnGroup struct {
	Group       string
	MemberID    string
	MemberEpoch int32
	Offsets     []GroupOffset
	refresh     func() int32
}

// wire is g as a request carries it.
func (g *txnGroup) wire() *v1.TransactGroupOffsets {
	if g == nil {
		return nil
	}
	w := &v1.TransactGroupOffsets{Group: g.Group, MemberID: g.MemberID, Offsets: commitOffsets(g.Offsets)}
	if g.MemberEpoch != 0 {
		epoch := g.MemberEpoch
		w.MemberEpoch = &epoch
	}
	return w
}

// sendReq is one request, from sealing to its outcome.
type sendReq struct {
	idx    uint64 // sealing order
	recs   []batchRec
	counts map[tpKey]int32 // records per partition
	group  *txnGroup
	sealed time.Time

	// Guarded by Producer.mu.
	ident   ProducerIdentity
	seqs    map[tpKey]int32
	body    []byte
	started bool // an attempt loop runs
	stopped bool // refused as out of order: to be sent again under a new identity

	done    chan struct{}
	offsets []TopicOffset
	dup     bool
	err     error
}

type topicMeta struct {
	partitions int32
	keyFormat  string
	read       time.Time
}

// Producer sends records through the HTTP API with linger batching, a bounded window of
// requests in flight, and safe retries (idempotent by default). Create it with
// NewProducer; it is safe for concurrent use; Close it when done.
type Producer struct {
	c      *Client
	cfg    ProducerConfig
	log    *slog.Logger
	ctx    context.Context // attempts; cancelled when Close gives up
	cancel context.CancelFunc

	metaMu sync.Mutex
	meta   map[string]*topicMeta

	mu        sync.Mutex
	ident     ProducerIdentity
	next      map[tpKey]int32 // next base sequence per partition, under ident
	open      []batchRec      // the request being filled
	openBytes int
	openedAt  time.Time        // when the open request got its first record
	sticky    map[string]int32 // per topic: the open request's partition for unkeyed records
	rotate    map[string]int32
	queue     []*sendReq // sealed and unresolved, in sealing order
	sealedN   uint64     // requests sealed so far
	running   int        // attempt loops
	draining  bool       // a gap: let the running settle, then take a new identity
	resetting bool
	fatal     error
	closed    bool
	buffered  int
	changed   chan struct{} // closed and replaced whenever a request resolves or stops
	space     chan struct{} // likewise, when buffer room frees

	kick chan struct{} // a request was opened: arm the linger timer
	wg   sync.WaitGroup
}

// NewProducer returns a producer, initialised with the server when idempotent.
func (c *Client) NewProducer(ctx context.Context, cfg ProducerConfig) (*Producer, error) {
	if cfg.Linger <= 0 {
		cfg.Linger = 5 * time.Millisecond
	}
	if cfg.BatchRecords <= 0 {
		cfg.BatchRecords = 5000
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = 4 << 20
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 5
	}
	if !cfg.NotIdempotent && cfg.MaxInFlight > 5 {
		return nil, fmt.Errorf("producer: MaxInFlight %d: an idempotent producer keeps at most 5 requests in flight", cfg.MaxInFlight)
	}
	if cfg.NotIdempotent && cfg.TransactionalID != "" {
		return nil, errors.New("producer: a TransactionalID needs idempotence")
	}
	if cfg.BufferRecords <= 0 {
		cfg.BufferRecords = 100_000
	}
	if cfg.DeliveryTimeout <= 0 {
		cfg.DeliveryTimeout = 2 * time.Minute
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	if cfg.MetadataMaxAge <= 0 {
		cfg.MetadataMaxAge = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Producer{
		c: c, cfg: cfg, log: log.With("component", "producer"),
		meta:    map[string]*topicMeta{},
		next:    map[tpKey]int32{},
		sticky:  map[string]int32{},
		rotate:  map[string]int32{},
		changed: make(chan struct{}),
		space:   make(chan struct{}),
		kick:    make(chan struct{}, 1),
	}
	if !cfg.NotIdempotent {
		id, err := c.InitProducer(ctx, cfg.TransactionalID, nil)
		if err != nil {
			return nil, fmt.Errorf("producer: %w", err)
		}
		p.ident = id
		p.log = p.log.With("producer_id", id.ID, "epoch", id.Epoch)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.linger()
	return p, nil
}

// Identity is the producer id and epoch requests are sealed under now.
func (p *Producer) Identity() ProducerIdentity {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ident
}

// topicMeta returns a topic's partition count and key.format, cached for
// MetadataMaxAge (refresh forces a read).
func (p *Producer) topicMeta(ctx context.Context, topic string, refresh bool) (*topicMeta, error) {
	p.metaMu.Lock()
	m, ok := p.meta[topic]
	p.metaMu.Unlock()
	if ok && !refresh && time.Since(m.read) < p.cfg.MetadataMaxAge {
		return m, nil
	}
	t, err := p.c.Topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	m = &topicMeta{partitions: t.Partitions, keyFormat: t.Configs["key.format"], read: time.Now()}
	if m.keyFormat == "" {
		m.keyFormat = "string"
	}
	p.metaMu.Lock()
	p.meta[topic] = m
	p.metaMu.Unlock()
	return m, nil
}

// wireOf checks a record and turns it into its wire form, without its partition
// (withPartition sets it); partition is -1 for sticky.
func (p *Producer) wireOf(ctx context.Context, topic string, r Record) (v1.ProduceRecord, int32, error) {
	part := r.Partition
	r.Partition = nil
	w, err := produceRecord(r)
	if err != nil {
		return v1.ProduceRecord{}, 0, err
	}
	m, err := p.topicMeta(ctx, topic, false)
	if err != nil {
		return v1.ProduceRecord{}, 0, err
	}
	switch {
	case part != nil:
		part := *part
		if part < 0 || part >= m.partitions {
			// The topic may have grown since it was read.
			if m, err = p.topicMeta(ctx, topic, true); err != nil {
				return v1.ProduceRecord{}, 0, err
			}
			if part < 0 || part >= m.partitions {
				return v1.ProduceRecord{}, 0, fmt.Errorf("partition %d: topic %s has %d partitions", part, topic, m.partitions)
			}
		}
		return w, part, nil
	case r.Key != nil:
		kb, err := storedKey(r.Key, m.keyFormat)
		if err != nil {
			return v1.ProduceRecord{}, 0, err
		}
		return w, KeyPartition(kb, m.partitions), nil
	}
	return w, -1, nil
}

// withPartition is w sent to partition.
func withPartition(w v1.ProduceRecord, partition int32) v1.ProduceRecord {
	w.Partition = strconv.AppendInt(nil, int64(partition), 10)
	return w
}

// stickyPartition is the open request's partition for unkeyed records of topic (mu
// held): one per request, rotating, as Kafka's sticky partitioner does per batch.
func (p *Producer) stickyPartition(topic string, partitions int32) int32 {
	if part, ok := p.sticky[topic]; ok && part < partitions {
		return part
	}
	part := p.rotate[topic] % partitions
	p.rotate[topic] = part + 1
	p.sticky[topic] = part
	return part
}

// recordBytes is about a record's size in a request body.
func recordBytes(w *v1.ProduceRecord) int {
	return len(w.Key) + len(w.Value) + len(w.Headers) + 64
}

// Send queues a record for topic and returns its Delivery. It blocks while BufferRecords
// records are waiting, until ctx ends. The record's partition is its own, its key's, or
// one chosen per request for unkeyed records.
func (p *Producer) Send(ctx context.Context, topic string, r Record) (*Delivery, error) {
	w, part, err := p.wireOf(ctx, topic, r)
	if err != nil {
		return nil, fmt.Errorf("producer: send to %s: %w", topic, err)
	}
	var partitions int32
	if part < 0 {
		m, err := p.topicMeta(ctx, topic, false)
		if err != nil {
			return nil, fmt.Errorf("producer: send to %s: %w", topic, err)
		}
		partitions = m.partitions
	}
	d := &Delivery{Topic: topic, done: make(chan struct{})}
	p.mu.Lock()
	for {
		if err := p.usableLocked(); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		if p.buffered < p.cfg.BufferRecords {
			break
		}
		space := p.space
		p.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.mu.Lock()
	}
	if part < 0 {
		part = p.stickyPartition(topic, partitions)
	}
	w = withPartition(w, part)
	if len(p.open) == 0 {
		p.openedAt = time.Now()
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	p.open = append(p.open, batchRec{topic: topic, partition: part, wire: w, d: d})
	p.openBytes += recordBytes(&w)
	p.buffered++
	if len(p.open) >= p.cfg.BatchRecords || p.openBytes >= p.cfg.BatchBytes {
		p.sealOpenLocked()
	}
	p.mu.Unlock()
	return d, nil
}

// Produce sends records to topic and waits for all of them. Records of one call may
// travel in several requests (and with other calls' records): each commits exactly
// once, in order per partition; use ProduceAtomic for all-or-nothing.
func (p *Producer) Produce(ctx context.Context, topic string, records ...Record) ([]Offset, error) {
	ds := make([]*Delivery, len(records))
	for i, r := range records {
		d, err := p.Send(ctx, topic, r)
		if err != nil {
			return nil, err
		}
		ds[i] = d
	}
	out := make([]Offset, len(ds))
	var first error
	for i, d := range ds {
		off, err := d.Wait(ctx)
		if err != nil && first == nil {
			first = err
		}
		out[i] = off
	}
	return out, first
}

// AtomicResult answers ProduceAtomic.
type AtomicResult struct {
	Offsets []TopicOffset // Offsets[i] answers records[i]
	// Duplicate: the request had committed before (an earlier attempt whose answer was
	// lost); Offsets are the original ones.
	Duplicate bool
}

// ProduceAtomic sends records, of any topics, as one request: all of them commit or
// none. It returns once the request has committed or failed for good; ctx bounds only
// the wait for buffer room, since a request once sent may still commit.
func (p *Producer) ProduceAtomic(ctx context.Context, records []TopicRecord) (AtomicResult, error) {
	return p.produceAtomic(ctx, records, nil)
}

func (p *Producer) produceAtomic(ctx context.Context, records []TopicRecord, group *txnGroup) (AtomicResult, error) {
	if len(records) == 0 {
		return AtomicResult{}, errors.New("producer: an atomic request needs at least one record")
	}
	recs := make([]batchRec, len(records))
	sticky := map[string]int32{}
	for i, r := range records {
		w, part, err := p.wireOf(ctx, r.Topic, r.Record)
		if err != nil {
			return AtomicResult{}, fmt.Errorf("producer: records[%d] to %s: %w", i, r.Topic, err)
		}
		if part < 0 {
			var ok bool
			if part, ok = sticky[r.Topic]; !ok {
				m, err := p.topicMeta(ctx, r.Topic, false)
				if err != nil {
					return AtomicResult{}, fmt.Errorf("producer: records[%d] to %s: %w", i, r.Topic, err)
				}
				p.mu.Lock()
				part = p.rotate[r.Topic] % m.partitions
				p.rotate[r.Topic] = part + 1
				p.mu.Unlock()
				sticky[r.Topic] = part
			}
		}
		recs[i] = batchRec{topic: r.Topic, partition: part, wire: withPartition(w, part)}
	}
	p.mu.Lock()
	for {
		if err := p.usableLocked(); err != nil {
			p.mu.Unlock()
			return AtomicResult{}, err
		}
		if p.buffered < p.cfg.BufferRecords {
			break
		}
		space := p.space
		p.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return AtomicResult{}, ctx.Err()
		}
		p.mu.Lock()
	}
	p.buffered += len(recs)
	r := p.sealLocked(recs, group)
	p.mu.Unlock()
	<-r.done
	return AtomicResult{Offsets: r.offsets, Duplicate: r.dup}, r.err
}

func (p *Producer) usableLocked() error {
	switch {
	case p.fatal != nil:
		return p.fatal
	case p.closed:
		return ErrProducerClosed
	}
	return nil
}

// Flush sends what is buffered now and waits until it, and everything sent before, has
// committed or failed, or until ctx ends.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.sealOpenLocked()
	waits := make([]chan struct{}, len(p.queue))
	for i, r := range p.queue {
		waits[i] = r.done
	}
	p.mu.Unlock()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close sends what is buffered, waits for every request to finish, and stops the
// producer. If ctx ends first, what is still waiting fails with ErrProducerClosed (a
// request being sent may still commit).
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.Flush(ctx)
	if err != nil {
		p.setFatal(ErrProducerClosed)
	}
	p.cancel()
	p.wg.Wait()
	return err
}
