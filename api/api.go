// Package api is Strata's HTTP API v1 (docs/design.md "HTTP API v1"), a front end of
// the broker core: each handler decodes its request, calls the core (package broker,
// where every rule about records, offsets, topics and groups lives) and encodes the
// answer. Here are the chi router, one file per resource, the record encoding between
// JSON and stored bytes (encoding.go), problem+json errors with stable codes
// (errors.go) and the embedded OpenAPI document. The request and response bodies are
// package v1's types, which the Go client shares; the document describes the same
// shapes, and TestOpenAPIMatchesWireTypes holds the two together.
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

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/membudget"
)

// Config tunes the API. Zero values take the documented defaults.
type Config struct {
	// MaxBodyBytes bounds a request body; larger bodies get 413 body_too_large.
	// Default 16 MiB.
	MaxBodyBytes int64
	// MaxRecordsPerRequest bounds the records of one produce request; more get 400
	// too_many_records. Default 10,000.
	MaxRecordsPerRequest int
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
	// Set it to the writer's buffer size. Default broker.DefaultProduceBuffer (64 MiB).
	MaxInflightProduceBytes int64
	// MemoryWait bounds how long a request waits for room in the node's memory budget
	// (Deps.Memory) for its body or its answer before it is refused: a produce with 429
	// buffer_full, anything else with 503 memory_exhausted. Default 500ms.
	MemoryWait time.Duration
	// MaxFetches, MaxLongPolls and MaxStreams cap the fetches (without wait_ms), the
	// long-polls (with it) and the Server-Sent Events tails served at once; beyond
	// them the request answers 429 concurrency_limit. Defaults 256, 1024, 1024.
	MaxFetches, MaxLongPolls, MaxStreams int
	// AccessLogSample is the share of requests logged in the access log (access.go), 0
	// to 1; refusals are always logged. Default 0: refusals only.
	AccessLogSample float64
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes         = 16 << 20
	DefaultMaxRecordsPerRequest = 10000
	DefaultBodyTimeout          = 30 * time.Second
	DefaultHeartbeatInterval    = 15 * time.Second
	DefaultMemoryWait           = 500 * time.Millisecond
	DefaultMaxFetches           = 256
	DefaultMaxLongPolls         = 1024
	DefaultMaxStreams           = 1024
)

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.MaxInflightProduceBytes <= 0 {
		c.MaxInflightProduceBytes = broker.DefaultProduceBuffer
	}
	if c.MaxRecordsPerRequest <= 0 {
		c.MaxRecordsPerRequest = DefaultMaxRecordsPerRequest
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.MemoryWait <= 0 {
		c.MemoryWait = DefaultMemoryWait
	}
	if c.MaxFetches <= 0 {
		c.MaxFetches = DefaultMaxFetches
	}
	if c.MaxLongPolls <= 0 {
		c.MaxLongPolls = DefaultMaxLongPolls
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	return c
}

// Deps are what the API serves from.
type Deps struct {
	// Core is the broker core every /v1 route calls; nil answers role_unavailable there.
	Core *broker.Broker
	// Ready reports whether the node can serve (/readyz); nil: always ready.
	Ready func(ctx context.Context) error
	// Gatherer is served on /metrics; Registerer receives the API's own metrics. Either
	// may be nil: a Registerer that is also a Gatherer serves both, and with neither the
	// API keeps a private registry.
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer
	Log        *slog.Logger
	// Memory is the node's memory budget: request bodies and answers are reserved
	// there (memory.go). Nil: not accounted.
	Memory *membudget.Budget
	// Mounts are other packages' handlers served beside the API's own routes and under
	// its middleware (request ids, metrics, panic recovery, API keys, body limits): the
	// connect role's REST API. They answer their own errors.
	Mounts []Mount
}

// Mount is a handler served under a path prefix (its routes are relative to it).
type Mount struct {
	Path    string
	Handler http.Handler
	// Public serves the mount without authentication even when keys are required:
	// static files that hold no data (the web console's), whose every data call is an
	// API call of its own, authenticated as any other. Only at the root, not under /v1.
	Public bool
}

// API serves HTTP API v1.
type API struct {
	cfg      Config
	core     *broker.Broker
	ready    func(ctx context.Context) error
	gatherer prometheus.Gatherer
	log      *slog.Logger
	metrics  *httpMetrics
	handler  http.Handler
	mounts   []Mount
	// admission bounds produce bodies in flight (admission.go).
	admission *admission
	mem       *membudget.Budget
	slots     *slots
	// auth authenticates (authn.go); nil without authentication.
	auth Authenticator
}

// New builds the API and its router. It registers the API's metrics on d.Registerer
// (reusing them if an earlier API registered them there).
func New(cfg Config, d Deps) *API {
	cfg = cfg.withDefaults()
	a := &API{cfg: cfg, core: d.Core, ready: d.Ready, log: d.Log, mounts: d.Mounts, mem: d.Memory}
	if a.core == nil {
		a.core = broker.New(broker.Config{}, broker.Deps{}) // every /v1 call: role_unavailable
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.log = a.log.With("component", "api")
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
	a.slots = newSlots(cfg, reg)
	a.admission = newAdmission(cfg.MaxInflightProduceBytes)
	if auth := cfg.Auth.authenticator(); auth != nil && auth.Enabled() {
		a.auth = auth
	}
	a.handler = a.routes()
	return a
}

// Config returns the API's configuration, defaults applied.
func (a *API) Config() Config { return a.cfg }

// Handler returns the API's http.Handler.
func (a *API) Handler() http.Handler { return a.handler }

// routes builds the router: the probes and metrics, then each /v1 resource mounted
// under its path (topics, groups, producers, multi-topic records).
func (a *API) routes() http.Handler {
	r := chi.NewRouter()
	// Set before any Mount: chi copies them into sub-routers at mount time.
	r.NotFound(a.notFound)
	r.MethodNotAllowed(a.methodNotAllowed(r))
	r.Use(
		requestIDMiddleware,
		a.metrics.middleware,
		a.accessLogMiddleware,
		a.recoverMiddleware,
		a.authMiddleware,
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
		v1.Get("/openapi.json", func(w http.ResponseWriter, r *http.Request) {
			if p := checkQuery(r); p != nil {
				writeProblem(w, r, p)
				return
			}
			serveOpenAPI(w, r)
		})
		v1.Mount("/topics", (&topicsResource{a}).Routes())
		// Beside the topics mount: chi matches this longer path first (records_delete.go).
		v1.Post("/topics/{topic}/partitions/{partition}/records:delete", a.serve(broker.CapDeleteRecords, a.deleteRecords))
		v1.Mount("/groups", (&groupsResource{a}).Routes())
		v1.Mount("/share-groups", (&shareGroupsResource{a}).Routes())
		v1.Mount("/producers", (&producersResource{a}).Routes())
		v1.Mount("/records", (&transactResource{a}).Routes())
		(&securityResource{a}).mount(v1)
		(&quotaResource{a}).mount(v1)
		v1.Get("/nodes", a.serve(broker.CapNodes, a.listNodes))
		for _, m := range a.mounts {
			if rest, ok := strings.CutPrefix(m.Path, "/v1/"); ok {
				v1.Mount("/"+rest, m.Handler)
			}
		}
	})
	for _, m := range a.mounts {
		if !strings.HasPrefix(m.Path, "/v1/") {
			r.Mount(m.Path, m.Handler)
		}
	}
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
