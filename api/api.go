// Package api is Strata's HTTP API v1 (DESIGN.md "HTTP API v1"): the chi router, one
// file per resource, the request and response types, the record encoding between JSON
// and stored bytes, problem+json errors with stable codes (errors.go) and the embedded
// OpenAPI document. It sees the catalog, the writer and the reader only through the
// small interfaces below; cmd wires the concrete types in.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// Catalog is the part of the catalog the API uses: topic administration and partition
// state. Produce and fetch read it only through a short-lived cache.
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

// Reader serves fetches (the reader role).
type Reader interface {
	Fetch(ctx context.Context, f reader.Fetch) (reader.Result, error)
}

var (
	_ Catalog = catalog.Catalog(nil)
	_ Writer  = (*writer.Writer)(nil)
	_ Reader  = (*reader.Reader)(nil)
)

// Config tunes the API. Zero values take the documented defaults.
type Config struct {
	// MaxBodyBytes bounds a request body; larger bodies get 413 body_too_large.
	// Default 16 MiB.
	MaxBodyBytes int64
	// MaxRecordsPerRequest bounds the records of one produce request; more get 400
	// too_many_records. Default 10,000.
	MaxRecordsPerRequest int
	// TopicCacheTTL is how long produce and fetch trust a topic's metadata (id,
	// partition count, configs) without asking the catalog, so a produce does no catalog
	// read. A deleted topic is still refused by the writer's commit, and a partition
	// beyond the cached count re-reads the topic before refusing. Default 2s; negative
	// disables the cache.
	TopicCacheTTL time.Duration
	// MaxWait caps a fetch's wait_ms long-poll. Default 30s.
	MaxWait time.Duration
	// HeartbeatInterval is how long a Server-Sent Events tail stays silent before it
	// sends a comment line, so proxies keep the connection and clients notice a dead
	// one. Default 15s.
	HeartbeatInterval time.Duration
	// Auth requires bearer API keys when it holds any (auth.go). Default: no keys.
	Auth AuthConfig
	// NoStreaming answers SSE tails with 406 streaming_unsupported, for front ends that
	// buffer whole responses (Lambda behind API Gateway's HTTP API).
	NoStreaming bool
	// BodyTimeout bounds the time a request body may take to arrive, from the handler's
	// start; beyond it the request answers 408 request_timeout. Default 30s; negative:
	// no bound.
	BodyTimeout time.Duration
	// MaxInflightProduceBytes bounds the produce request bodies held at once (being
	// read, decoded or waiting for their flush), counted by Content-Length before the
	// body is read; beyond it a produce answers 429 buffer_full at once (admission.go).
	// Set it to the writer's buffer size. Default 64 MiB, the writer's default buffer.
	MaxInflightProduceBytes int64
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes         = 16 << 20
	DefaultMaxRecordsPerRequest = 10000
	DefaultTopicCacheTTL        = 2 * time.Second
	DefaultMaxWait              = 30 * time.Second
	DefaultBodyTimeout          = 30 * time.Second
	DefaultHeartbeatInterval    = 15 * time.Second
)

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.MaxInflightProduceBytes <= 0 {
		c.MaxInflightProduceBytes = writer.DefaultBufferBytes
	}
	if c.MaxRecordsPerRequest <= 0 {
		c.MaxRecordsPerRequest = DefaultMaxRecordsPerRequest
	}
	if c.TopicCacheTTL == 0 {
		c.TopicCacheTTL = DefaultTopicCacheTTL
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	return c
}

// Deps are what the API serves from. Writer and Reader are nil on a node that does not
// run that role (leave the field nil, not a typed nil pointer): their routes answer 503
// role_unavailable. Catalog is needed by every /v1 route; nil answers the same way.
type Deps struct {
	Catalog Catalog
	Writer  Writer
	Reader  Reader
	// Groups serves /v1/groups; nil answers role_unavailable there.
	Groups Groups
	// Ready reports whether the node can serve (/readyz); nil: always ready.
	Ready func(ctx context.Context) error
	// Gatherer is served on /metrics; Registerer receives the API's own metrics. Either
	// may be nil: a Registerer that is also a Gatherer serves both, and with neither the
	// API keeps a private registry.
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer
	Log        *slog.Logger
	// Now is the node clock that bounds CreateTime timestamps; nil: time.Now.
	Now func() time.Time
}

// API serves HTTP API v1.
type API struct {
	cfg      Config
	cat      Catalog
	wr       Writer
	rd       Reader
	groups   Groups
	ready    func(ctx context.Context) error
	gatherer prometheus.Gatherer
	log      *slog.Logger
	now      func() time.Time
	topics   *topicCache
	metrics  *httpMetrics
	handler  http.Handler
	// admission bounds produce bodies in flight (admission.go).
	admission *admission
}

// New builds the API and its router. It registers the API's metrics on d.Registerer
// (reusing them if an earlier API registered them there).
func New(cfg Config, d Deps) *API {
	cfg = cfg.withDefaults()
	a := &API{
		cfg:    cfg,
		cat:    d.Catalog,
		wr:     d.Writer,
		rd:     d.Reader,
		groups: d.Groups,
		ready:  d.Ready,
		log:    d.Log,
		now:    d.Now,
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.log = a.log.With("component", "api")
	if a.now == nil {
		a.now = time.Now
	}
	reg, gat := d.Registerer, d.Gatherer
	if reg == nil && gat == nil {
		r := prometheus.NewRegistry()
		reg, gat = r, r
	}
	if gat == nil {
		if g, ok := reg.(prometheus.Gatherer); ok {
			gat = g
		} else {
			gat = prometheus.NewRegistry()
		}
	}
	if reg == nil {
		reg = prometheus.NewRegistry() // metrics kept but not exposed
	}
	a.gatherer = gat
	a.metrics = newHTTPMetrics(reg)
	a.admission = &admission{max: cfg.MaxInflightProduceBytes}
	if a.cat != nil {
		a.topics = newTopicCache(a.cat, cfg.TopicCacheTTL, time.Now)
	}
	a.handler = a.routes()
	return a
}

// Handler returns the API's http.Handler.
func (a *API) Handler() http.Handler { return a.handler }

// routes builds the router. Resources to come (groups, producers, multi-topic records)
// mount beside topics under /v1.
func (a *API) routes() http.Handler {
	r := chi.NewRouter()
	// Set before any Mount: chi copies them into sub-routers at mount time.
	r.NotFound(a.notFound)
	r.MethodNotAllowed(a.methodNotAllowed(r))
	r.Use(
		requestIDMiddleware,
		a.metrics.middleware,
		a.recoverMiddleware,
		authMiddleware(a.cfg.Auth),
		queryMiddleware,
		bodyLimitMiddleware(a.cfg.MaxBodyBytes, a.cfg.BodyTimeout),
	)
	if a.cfg.NoStreaming {
		r.Use(noStreamingMiddleware)
	}

	r.Get("/healthz", a.healthz)
	r.Get("/readyz", a.readyz)
	r.Method(http.MethodGet, "/metrics", a.metricsHandler())

	r.Route("/v1", func(v1 chi.Router) {
		v1.Get("/openapi.json", serveOpenAPI)
		v1.Mount("/topics", (&topicsResource{a}).Routes())
		// Beside the topics mount: chi matches this longer path first (records_delete.go).
		v1.Post("/topics/{topic}/partitions/{partition}/records:delete", a.deleteRecords)
		v1.Mount("/groups", (&groupsResource{a, a.groups}).Routes())
		v1.Mount("/producers", (&producersResource{a}).Routes())
		v1.Mount("/records", (&transactResource{a}).Routes())
	})
	return r
}

func (a *API) notFound(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, r, newProblem(CodeNotFound, "no route for %s", r.URL.Path))
}

// methodNotAllowed answers 405 with the Allow header, which chi computes only for its
// own default handler. The routes are walked on first use (the router is complete by
// then) and matched segment by segment; chi's Find does not recurse reliably through
// mounted routers.
func (a *API) methodNotAllowed(root chi.Router) http.HandlerFunc {
	var once sync.Once
	var routes []routeMethod
	return func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { routes = walkRoutes(root) })
		path := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		for _, rm := range routes {
			if matchSegments(rm.segments, path) {
				w.Header().Add("Allow", rm.method)
			}
		}
		writeProblem(w, r, newProblem(CodeMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
	}
}

type routeMethod struct {
	method   string
	pattern  string // e.g. /v1/topics/{topic}
	segments []string
}

// walkRoutes lists the router's routes, patterns without trailing slashes, in a stable
// order.
func walkRoutes(root chi.Routes) []routeMethod {
	var out []routeMethod
	_ = chi.Walk(root, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if len(route) > 1 {
			route = strings.TrimSuffix(route, "/")
		}
		out = append(out, routeMethod{method, route, strings.Split(strings.Trim(route, "/"), "/")})
		return nil
	})
	order := map[string]int{"GET": 0, "HEAD": 1, "POST": 2, "PUT": 3, "PATCH": 4, "DELETE": 5}
	sort.Slice(out, func(i, j int) bool {
		if out[i].pattern != out[j].pattern {
			return out[i].pattern < out[j].pattern
		}
		return order[out[i].method] < order[out[j].method]
	})
	return out
}

func matchSegments(pattern, path []string) bool {
	if len(pattern) != len(path) {
		return false
	}
	for i, p := range pattern {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if path[i] == "" {
				return false
			}
			continue
		}
		if p != path[i] {
			return false
		}
	}
	return true
}

// needCatalog answers role_unavailable when the node has no catalog.
func (a *API) needCatalog(w http.ResponseWriter, r *http.Request) bool {
	if a.cat == nil {
		writeProblem(w, r, newProblem(CodeRoleUnavailable, "this node has no catalog"))
		return false
	}
	return true
}
