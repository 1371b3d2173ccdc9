// Package broker is Strata's front-end-neutral core (docs/design.md "Front ends and the
// broker core"): every front end — the HTTP API today, the Kafka wire protocol next —
// decodes its requests, calls a Broker, and encodes what it answers. The core owns what
// must be the same whichever front end a client speaks: the topic cache, every
// topic-config rule (rules.go, once), the pipeline from records or raw Kafka batches to
// one writer request (produce.go, batches.go), fetches and offset lookups, topic
// administration, producer ids, record deletion and the group calls. Its errors carry a
// stable code and whether a retry helps (errors.go); each front end maps them to its own
// vocabulary. It knows no HTTP and no Kafka framing.
//
// Every call takes the calling Principal, so that authorization (decided here, once, for
// every front end) needs no second pass over the signatures.
package broker

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/push/egress"
	"github.com/strata-io/strata/quota"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// Principal is who calls: the identity a front end authenticated (an API key, a SASL
// user, a client certificate), as Kafka writes it ("User:alice"). Anonymous on a node
// without authentication.
type Principal struct {
	// Name identifies the principal; empty is Anonymous.
	Name string
	// Host is the address the caller connects from (ACLs may name hosts); empty when
	// unknown.
	Host string
	// ClientID is the client id the caller gave (Kafka's request header; the HTTP
	// API's Strata-Client-Id header), which quotas may name; empty when none.
	ClientID string
}

// Anonymous is the principal of a caller that presented no identity: every caller of a
// node without authentication.
var Anonymous = Principal{}

// Catalog is the part of the catalog the core reads and administers topics through.
// Produce and fetch read it only through the topic cache.
type Catalog interface {
	CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error)
	Topic(ctx context.Context, name string) (catalog.Topic, error)
	Topics(ctx context.Context) ([]catalog.Topic, error)
	DeleteTopic(ctx context.Context, name string) error
	UpdateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error)
	Partitions(ctx context.Context, topicID int64) ([]catalog.PartitionInfo, error)
	OffsetForTime(ctx context.Context, topicID int64, partition int32, ts int64) (int64, error)
}

// Writer accepts produce requests (the writer role).
type Writer interface {
	Produce(ctx context.Context, req writer.Request) (writer.Response, error)
}

// Reader serves fetches of records (the reader role).
type Reader interface {
	Fetch(ctx context.Context, f reader.Fetch) (reader.Result, error)
}

// BatchReader serves fetches of stored record batches, shared with the reader's cache
// (read-only): the Kafka front end and the HTTP API's binary fetch.
type BatchReader interface {
	FetchRawShared(ctx context.Context, f reader.Fetch) (reader.SharedRawResult, error)
}

// Submitter buffers a produce request without waiting for its flush (the writer
// role), for the pipelined produce: PrepareBatches, then Submit in the client's order,
// then Wait.
type Submitter interface {
	Submit(req writer.Request) (*writer.Submitted, error)
	SubmitWait(ctx context.Context, req writer.Request) (*writer.Submitted, error)
}

// Watcher wakes a long-poll over several partitions on their commits (the reader
// role), for FetchPartitions.
type Watcher interface {
	Watch(ps []reader.WatchPartition) *reader.Watch
}

// Producers hands out producer identities (both catalog backends).
type Producers interface {
	InitProducer(ctx context.Context, transactionalID string, current *catalog.Producer, owner string) (catalog.Producer, error)
}

// RecordDeleter advances a partition's log start offset: Kafka's DeleteRecords (both
// catalog backends).
type RecordDeleter interface {
	DeleteRecords(ctx context.Context, topicID int64, partition int32, offset int64) (catalog.PartitionInfo, error)
}

// Groups is the consumer-group part of the catalog (both backends).
type Groups = catalog.Groups

// ClassicGroups is the classic-group part of the catalog (both backends): Kafka's
// JoinGroup/SyncGroup protocol (classic.go).
type ClassicGroups = catalog.ClassicGroups

var (
	_ Catalog        = catalog.Catalog(nil)
	_ Writer         = (*writer.Writer)(nil)
	_ Reader         = (*reader.Reader)(nil)
	_ BatchReader    = (*reader.Reader)(nil)
	_ Submitter      = (*writer.Writer)(nil)
	_ Watcher        = (*reader.Reader)(nil)
	_ Producers      = catalog.Producers(nil)
	_ RecordDeleter  = catalog.Compaction(nil)
	_ Security       = catalog.Security(nil)
	_ SchemaRegistry = catalog.Registry(nil)
)

// Deps are what the core serves from. Each is nil on a node without it (leave the field
// nil, not a typed nil pointer): the calls that need it answer CodeRoleUnavailable. A
// node assembled from a catalog.Backend (internal/node) has Catalog, Producers, Records,
// Groups and Connect always; Writer and Submitter with its writer role, Reader, Batches
// and Watcher with its reader role.
type Deps struct {
	Catalog Catalog
	Writer  Writer
	// Submitter is the writer's buffering without waiting, for PreparedBatches.Submit
	// (the Kafka listener's pipelined produce). Nil with a Writer (a test double):
	// Submit produces through Writer and waits for the flush, so a pipelined
	// connection's requests keep their order but do not overlap.
	Submitter Submitter
	Reader    Reader
	Batches   BatchReader
	// Watcher wakes a waiting FetchPartitions on commits. Nil (a test double): it looks
	// again every 50 ms.
	Watcher   Watcher
	Producers Producers
	Records   RecordDeleter
	Groups    Groups
	// Connect keeps connectors: their administration (connectors.go), and source
	// offsets committed without records (CommitSource).
	Connect ConnectorStore
	// Security keeps keys, ACLs and the audit log (both catalog backends); the calls
	// that manage them need it.
	Security Security
	// Scram keeps SCRAM credentials (both catalog backends); the calls that manage
	// them need it.
	Scram Scram
	// Authorizer decides what a principal may do (package security); nil: everything
	// is allowed, the node has no authentication.
	Authorizer Authorizer
	Classic    ClassicGroups
	// Transactions is the Kafka transaction coordinator's state (both backends).
	Transactions Transactions
	// Registry keeps the schema registry (both catalog backends): its calls
	// (registry.go) and the validation of topics that ask for it (schemas.go) need it.
	Registry SchemaRegistry
	// Nodes is the registry of live nodes (both catalog backends), listed by Nodes.
	Nodes NodeRegistry
	// Share keeps share groups (both catalog backends): the share-group calls
	// (share.go) need it.
	Share ShareStore
	// Quotas enforces the client quotas (package quota); nil enforces none.
	Quotas *quota.Enforcer
	// QuotaStore keeps the quotas (both catalog backends); their administration needs
	// it.
	QuotaStore QuotaStore
	// Usage counts per-topic usage on this node and answers it (package usage); nil
	// counts nothing, and TopicUsage answers CodeRoleUnavailable.
	Usage UsageRecorder
	// Push keeps push subscriptions (both catalog backends); their administration
	// needs it. PushEgress is the node's outbound policy for their targets (nil
	// allows none).
	Push       PushStore
	PushEgress *egress.Policy
	// Tables reads the table topics' state (both catalog backends), for TableStatus.
	Tables TableStates
	// Now is the node clock that stamps and bounds CreateTime timestamps; nil: time.Now.
	Now func() time.Time
}

// Config tunes the core. Zero values take the documented defaults.
type Config struct {
	// TopicCacheTTL is how long produce and fetch trust a topic's metadata (id,
	// partition count, configs) without asking the catalog, so a produce does no catalog
	// read. A deleted topic is still refused by the writer's commit, and a partition
	// beyond the cached count re-reads the topic before refusing. Default 2s; negative
	// disables the cache.
	TopicCacheTTL time.Duration
	// MaxTimestampAfterMs is the largest message.timestamp.after.max.ms a topic may set
	// without the alter-configs permission on the cluster (and, on a node without
	// authentication, at all): 0 means catalog.DefaultMaxTimestampAfterMs (one day), -1
	// no limit.
	MaxTimestampAfterMs int64
	// TxnMaxTimeout is the longest transaction timeout a producer may ask for (Kafka's
	// transaction.max.timeout.ms); default DefaultTxnMaxTimeout.
	TxnMaxTimeout time.Duration
	// Registerer takes the core's metrics (the transaction coordinator's and the
	// dead-letter mover's); nil keeps them unregistered.
	Registerer prometheus.Registerer
	// MaxWait caps how long a fetch long-polls (FetchRequest.Wait, PartitionsFetch.Wait),
	// whichever front end asked: an HTTP fetch's wait_ms, a Kafka Fetch's MaxWaitMillis.
	// Longer asks are capped, not refused: a client asking for a long poll gets the
	// longest this node allows. Default DefaultMaxWait.
	MaxWait time.Duration
	// ShareDLQPrefix is the prefix a share group's dead-letter topic's name must start
	// with (Kafka's errors.deadletterqueue.topic.name.prefix); default
	// catalog.DefaultShareDLQPrefix, "dlq.".
	ShareDLQPrefix string
	// Prices are the list prices of TopicUsage's cost estimate; zero: DefaultPrices.
	Prices Prices
}

// Defaults of Config.
const (
	DefaultTopicCacheTTL = 2 * time.Second
	DefaultMaxWait       = reader.DefaultMaxWait
)

// DefaultProduceBuffer is the writer's default buffer: the bytes of produce requests a
// node holds for their flush unless configured otherwise. A front end that admits
// produce bodies before reading them (the HTTP API) bounds them by the node's buffer,
// this one by default.
const DefaultProduceBuffer = writer.DefaultBufferBytes

// Broker is the core. Its methods are safe for concurrent use.
type Broker struct {
	d      Deps
	now    func() time.Time
	topics *topicCache // nil without a catalog
	// maxAfterMs is Config.MaxTimestampAfterMs.
	maxAfterMs int64
	maxWait    time.Duration // Config.MaxWait, default applied
	// producerTxns remembers the owner of producer ids seen (authorize.go).
	producerTxns producerTxnCache
	waits        *groupWaits  // held JoinGroup and SyncGroup requests (groupwait.go)
	schemas      *schemaCache // parsed schemas and subjects' ids (schemas.go)
	// txnMaxTimeout is Config.TxnMaxTimeout; txnMetrics the coordinator's metrics.
	txnMaxTimeout time.Duration
	txnMetrics    *txnMetrics
	dlqPrefix     string // Config.ShareDLQPrefix, default applied
	dlqMetrics    *shareDLQMetrics
	prices        Prices // Config.Prices, default applied
}

// New builds the core over d.
func New(cfg Config, d Deps) *Broker {
	if cfg.TopicCacheTTL == 0 {
		cfg.TopicCacheTTL = DefaultTopicCacheTTL
	}
	if cfg.MaxTimestampAfterMs == 0 {
		cfg.MaxTimestampAfterMs = catalog.DefaultMaxTimestampAfterMs
	}
	if cfg.TxnMaxTimeout <= 0 {
		cfg.TxnMaxTimeout = DefaultTxnMaxTimeout
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.ShareDLQPrefix == "" {
		cfg.ShareDLQPrefix = catalog.DefaultShareDLQPrefix
	}
	if cfg.Prices == (Prices{}) {
		cfg.Prices = DefaultPrices
	}
	b := &Broker{d: d, now: d.Now, maxAfterMs: cfg.MaxTimestampAfterMs, maxWait: cfg.MaxWait, prices: cfg.Prices, waits: newGroupWaits(), schemas: newSchemaCache(),
		txnMaxTimeout: cfg.TxnMaxTimeout, txnMetrics: newTxnMetrics(cfg.Registerer), dlqPrefix: cfg.ShareDLQPrefix,
		dlqMetrics: newShareDLQMetrics(cfg.Registerer)}
	if b.now == nil {
		b.now = time.Now
	}
	if d.Catalog != nil {
		b.topics = newTopicCache(d.Catalog, cfg.TopicCacheTTL, time.Now)
	}
	return b
}

// Capability is what a call needs of the node beyond the core itself.
type Capability int

// The capabilities, by the calls that need them.
const (
	// CapTopics: topic administration, partitions, offsets (the catalog).
	CapTopics Capability = iota
	// CapProduce: Produce and ProduceBatches (the writer role and the catalog).
	CapProduce
	// CapFetch: Fetch (the reader role and the catalog).
	CapFetch
	// CapFetchBatches: FetchBatches (a reader that serves stored batches).
	CapFetchBatches
	// CapProducers: InitProducer.
	CapProducers
	// CapDeleteRecords: DeleteRecords.
	CapDeleteRecords
	// CapGroups: the group calls.
	CapGroups
	// CapSecurity: keys, ACLs and the audit log.
	CapSecurity
	// CapClassicGroups: the classic group calls (JoinGroup, SyncGroup, ...).
	CapClassicGroups
	// CapConnectors: connector administration.
	CapConnectors
	// CapTransactions: the transaction coordinator's calls.
	CapTransactions
	// CapRegistry: the schema registry.
	CapRegistry
	// CapNodes: the registry of live nodes.
	CapNodes
	// CapShareGroups: the share-group calls.
	CapShareGroups
)

// Check answers nil when this node can serve calls that need c, else an *Error with
// CodeRoleUnavailable saying what is missing. Every call checks its own; a front end
// checks first only to refuse before it reads a request body.
func (b *Broker) Check(c Capability) error {
	if e := b.check(c); e != nil {
		return e
	}
	return nil
}

func (b *Broker) check(c Capability) *Error {
	noCatalog := func() *Error { return newError(CodeRoleUnavailable, "this node has no catalog") }
	switch c {
	case CapTopics:
		if b.d.Catalog == nil {
			return noCatalog()
		}
	case CapProduce:
		if b.d.Writer == nil {
			return newError(CodeRoleUnavailable, "this node does not run the writer role; send produce requests to a writer node")
		}
		if b.d.Catalog == nil {
			return noCatalog()
		}
	case CapFetch:
		if b.d.Reader == nil {
			return newError(CodeRoleUnavailable, "this node does not run the reader role; send fetches to a reader node")
		}
		if b.d.Catalog == nil {
			return noCatalog()
		}
	case CapFetchBatches:
		if e := b.check(CapFetch); e != nil {
			return e
		}
		if b.d.Batches == nil {
			return newError(CodeRoleUnavailable, "this node's reader does not serve record batches; ask for application/json")
		}
	case CapProducers:
		if b.d.Catalog == nil {
			return noCatalog()
		}
		if b.d.Producers == nil {
			return newError(CodeRoleUnavailable, "this node's catalog hands out no producer ids")
		}
	case CapDeleteRecords:
		if b.d.Catalog == nil {
			return noCatalog()
		}
		if b.d.Records == nil {
			return newError(CodeRoleUnavailable, "this node's catalog cannot delete records")
		}
	case CapGroups:
		if b.d.Groups == nil || b.d.Catalog == nil {
			return newError(CodeRoleUnavailable, "this node serves no consumer groups")
		}
	case CapSecurity:
		if b.d.Security == nil {
			return newError(CodeRoleUnavailable, "this node's catalog keeps no keys, ACLs or audit log")
		}
	case CapConnectors:
		if b.d.Connect == nil {
			return newError(CodeRoleUnavailable, "this node's catalog keeps no connectors")
		}
	case CapRegistry:
		if b.d.Registry == nil {
			return newError(CodeRoleUnavailable, "this node's catalog keeps no schema registry")
		}
	case CapShareGroups:
		if b.d.Share == nil || b.d.Catalog == nil {
			return newError(CodeRoleUnavailable, "this node serves no share groups")
		}
	case CapNodes:
		if b.d.Nodes == nil {
			return newError(CodeRoleUnavailable, "this node's catalog keeps no registry of nodes")
		}
	case CapClassicGroups:
		if b.d.Classic == nil || b.d.Groups == nil || b.d.Catalog == nil {
			return newError(CodeRoleUnavailable, "this node serves no classic consumer groups")
		}
	case CapTransactions:
		if b.d.Transactions == nil || b.d.Catalog == nil {
			return newError(CodeRoleUnavailable, "this node coordinates no transactions")
		}
	}
	return nil
}
