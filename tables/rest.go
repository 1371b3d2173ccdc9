package tables

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// Prefix is where the REST catalog is served: engines are given
// http://node/iceberg as their catalog URI.
const Prefix = "/iceberg"

// Core is the broker core's part the REST catalog asks: it decides who may read
// which table (reading the topic).
type Core interface {
	TableTopic(ctx context.Context, who broker.Principal, name string) (catalog.Topic, error)
	TableTopics(ctx context.Context, who broker.Principal) ([]catalog.Topic, error)
}

// StateReader reads a table's committed state.
type StateReader interface {
	TableState(ctx context.Context, topicID int64) (catalog.TableState, error)
}

// RESTConfig is what the REST catalog needs besides its dependencies.
type RESTConfig struct {
	// Principal is who calls (the API's authentication, api.Principal).
	Principal func(*http.Request) broker.Principal
	// Location is the bucket's URI (Config.Location).
	Location string
	Log      *slog.Logger
}

// REST serves the table topics as a read-only Iceberg REST catalog (the Apache
// Iceberg REST catalog API, its read calls): one namespace, strata, whose tables are
// the table topics the caller may read, at their metadata files in the bucket. Engines
// bring their own credentials for the bucket.
type REST struct {
	core  Core
	state StateReader
	store Store
	cfg   RESTConfig
}

// NewREST returns the REST catalog; Routes serves it.
func NewREST(core Core, state StateReader, store Store, cfg RESTConfig) *REST {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &REST{core: core, state: state, store: store, cfg: cfg}
}

// Routes is the catalog's router, to mount at Prefix.
func (c *REST) Routes() http.Handler {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NotFoundException", "no route for "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "ForbiddenException", "this catalog is read-only: the tables role writes its tables")
	})
	r.Get("/v1/config", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}})
	})
	r.Get("/v1/namespaces", func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Query().Get("parent"); p != "" {
			writeJSON(w, map[string]any{"namespaces": [][]string{}})
			return
		}
		writeJSON(w, map[string]any{"namespaces": [][]string{{Namespace}}})
	})
	r.Get("/v1/namespaces/{ns}", c.namespace)
	r.Head("/v1/namespaces/{ns}", c.namespace)
	r.Get("/v1/namespaces/{ns}/tables", c.listTables)
	r.Get("/v1/namespaces/{ns}/tables/{table}", c.loadTable)
	r.Head("/v1/namespaces/{ns}/tables/{table}", c.loadTable)
	return r
}

func (c *REST) checkNamespace(w http.ResponseWriter, r *http.Request) bool {
	if ns := chi.URLParam(r, "ns"); ns != Namespace {
		writeError(w, http.StatusNotFound, "NoSuchNamespaceException", "namespace "+ns+" does not exist: the table topics are in "+Namespace)
		return false
	}
	return true
}

func (c *REST) namespace(w http.ResponseWriter, r *http.Request) {
	if !c.checkNamespace(w, r) {
		return
	}
	writeJSON(w, map[string]any{"namespace": []string{Namespace}, "properties": map[string]string{}})
}

type identifier struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
}

func (c *REST) listTables(w http.ResponseWriter, r *http.Request) {
	if !c.checkNamespace(w, r) {
		return
	}
	ts, err := c.core.TableTopics(r.Context(), c.cfg.Principal(r))
	if err != nil {
		c.coreError(w, err)
		return
	}
	ids := make([]identifier, 0, len(ts))
	for _, t := range ts {
		ids = append(ids, identifier{Namespace: []string{Namespace}, Name: t.Name})
	}
	writeJSON(w, map[string]any{"identifiers": ids})
}

func (c *REST) loadTable(w http.ResponseWriter, r *http.Request) {
	if !c.checkNamespace(w, r) {
		return
	}
	name := chi.URLParam(r, "table")
	t, err := c.core.TableTopic(r.Context(), c.cfg.Principal(r), name)
	if err != nil {
		c.coreError(w, err)
		return
	}
	st, err := c.state.TableState(r.Context(), t.ID)
	if err != nil {
		c.cfg.Log.Error("iceberg catalog: read table state", "topic", name, "err", err)
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "the catalog did not answer; retry")
		return
	}
	if st.MetadataLocation == "" {
		writeError(w, http.StatusNotFound, "NoSuchTableException", "table "+Namespace+"."+name+" has no snapshot yet: the tables role has not committed it")
		return
	}
	fio := &fileIO{ctx: r.Context(), store: c.store, base: strings.TrimSuffix(c.cfg.Location, "/")}
	meta, err := fio.ReadFile(st.MetadataLocation)
	if err != nil {
		c.cfg.Log.Error("iceberg catalog: read metadata", "topic", name, "location", st.MetadataLocation, "err", err)
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "the table's metadata could not be read; retry")
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, map[string]any{"metadata-location": st.MetadataLocation, "metadata": json.RawMessage(meta), "config": map[string]string{}})
}

// coreError answers a refusal of the core in the REST catalog's error model.
func (c *REST) coreError(w http.ResponseWriter, err error) {
	var e *broker.Error
	if !errors.As(err, &e) {
		c.cfg.Log.Error("iceberg catalog", "err", err)
		writeError(w, http.StatusInternalServerError, "InternalServerError", "internal error")
		return
	}
	switch e.Code {
	case broker.CodeForbidden:
		writeError(w, http.StatusForbidden, "ForbiddenException", e.Message)
	case broker.CodeTopicNotFound, broker.CodeInvalidTopicName:
		writeError(w, http.StatusNotFound, "NoSuchTableException", e.Message)
	default:
		status := http.StatusBadRequest
		if e.Retriable() {
			status = http.StatusServiceUnavailable
		}
		writeError(w, status, string(e.Code), e.Message)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in the REST catalog's error model (ErrorModel).
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": status}})
}
