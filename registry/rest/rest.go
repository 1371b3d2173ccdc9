// Package rest serves Confluent Schema Registry's REST API over the broker core, at the
// root paths registry clients expect (/subjects, /schemas, /config, /mode,
// /compatibility), so serializers and tools written for Confluent's registry work
// unchanged against any node. It decodes, calls the core, and encodes in Confluent's
// shapes: application/vnd.schemaregistry.v1+json, errors as {"error_code","message"}.
// It takes the query parameters and body fields Confluent documents and ignores the
// ones it does not know (registry clients send more than this registry uses).
package rest

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/registry"
)

// ContentType is what the registry answers in.
const ContentType = "application/vnd.schemaregistry.v1+json"

// Config configures the handler.
type Config struct {
	// Principal is who a request calls as (api.Principal under the API's middleware).
	Principal func(*http.Request) broker.Principal
	Log       *slog.Logger
}

// Handler serves the registry.
type Handler struct {
	core *broker.Broker
	cfg  Config
}

// New builds the handler over core.
func New(core *broker.Broker, cfg Config) *Handler {
	if cfg.Principal == nil {
		cfg.Principal = func(*http.Request) broker.Principal { return broker.Anonymous }
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Log = cfg.Log.With("component", "registry")
	return &Handler{core: core, cfg: cfg}
}

// Prefixes are the paths the registry is mounted at.
var Prefixes = []string{"/subjects", "/schemas", "/config", "/mode", "/compatibility"}

// Routes returns the router for one prefix of Prefixes (its routes relative to it).
func (h *Handler) Routes(prefix string) http.Handler {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeErr(w, http.StatusNotFound, 404, "HTTP 404 Not Found")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeErr(w, http.StatusMethodNotAllowed, 405, "HTTP 405 Method Not Allowed")
	})
	switch prefix {
	case "/subjects":
		r.Get("/", h.serve(h.subjects))
		r.Post("/{subject}", h.serve(h.lookup))
		r.Delete("/{subject}", h.serve(h.deleteSubject))
		r.Get("/{subject}/versions", h.serve(h.versions))
		r.Post("/{subject}/versions", h.serve(h.register))
		r.Get("/{subject}/versions/{version}", h.serve(h.version))
		r.Get("/{subject}/versions/{version}/schema", h.serve(h.versionSchema))
		r.Delete("/{subject}/versions/{version}", h.serve(h.deleteVersion))
		r.Get("/{subject}/versions/{version}/referencedby", h.serve(h.referencedBy))
	case "/schemas":
		r.Get("/", h.serve(h.allSchemas))
		r.Get("/types", h.serve(func(*http.Request) (any, error) { return registry.Types(), nil }))
		r.Get("/ids/{id}", h.serve(h.schemaByID))
		r.Get("/ids/{id}/schema", h.serve(h.schemaTextByID))
		r.Get("/ids/{id}/subjects", h.serve(h.idSubjects))
		r.Get("/ids/{id}/versions", h.serve(h.idVersions))
	case "/config":
		r.Get("/", h.serve(h.getConfig))
		r.Put("/", h.serve(h.putConfig))
		r.Delete("/", h.serve(h.deleteConfig))
		r.Get("/{subject}", h.serve(h.getConfig))
		r.Put("/{subject}", h.serve(h.putConfig))
		r.Delete("/{subject}", h.serve(h.deleteConfig))
	case "/mode":
		r.Get("/", h.serve(h.getMode))
		r.Put("/", h.serve(h.putMode))
		r.Delete("/", h.serve(h.deleteMode))
		r.Get("/{subject}", h.serve(h.getMode))
		r.Put("/{subject}", h.serve(h.putMode))
		r.Delete("/{subject}", h.serve(h.deleteMode))
	case "/compatibility":
		r.Post("/subjects/{subject}/versions/{version}", h.serve(h.compatibility))
		r.Post("/subjects/{subject}/versions", h.serve(h.compatibility))
	}
	return r
}

// httpError is a refusal made here (the body, a parameter), in Confluent's shape.
type httpError struct {
	status, code int
	msg          string
}

func (e *httpError) Error() string { return e.msg }

func (h *Handler) serve(fn func(r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out, err := fn(r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		if raw, ok := out.(rawSchema); ok {
			w.Header().Set("Content-Type", ContentType)
			io.WriteString(w, string(raw))
			return
		}
		w.Header().Set("Content-Type", ContentType)
		json.NewEncoder(w).Encode(out)
	}
}

// rawSchema is a schema's text, answered as it is (the /schema routes).
type rawSchema string

func writeErr(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		ErrorCode int    `json:"error_code"`
		Message   string `json:"message"`
	}{code, msg})
}

// writeError answers err: a registry refusal with its Confluent code (status: the code's
// first three digits), the core's other refusals with the HTTP status the API gives
// them and a five-digit code in Confluent's style.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if errors.As(err, &he) {
		writeErr(w, he.status, he.code, he.msg)
		return
	}
	e := broker.AsError("schema registry", err)
	if c := broker.RegistryCode(e); c != 0 {
		status := c
		if c > 999 {
			status = c / 100
		}
		writeErr(w, status, c, e.Message)
		return
	}
	switch e.Code {
	case broker.CodeForbidden:
		writeErr(w, http.StatusForbidden, 40301, e.Message)
	case broker.CodeInternal, broker.CodeCatalogUnavailable, broker.CodeRoleUnavailable:
		if e.Unexpected {
			h.cfg.Log.Error("schema registry", "method", r.Method, "path", r.URL.Path, "op", e.Op, "err", e.Err)
		}
		writeErr(w, http.StatusInternalServerError, 50001, e.Message)
	default:
		writeErr(w, http.StatusUnprocessableEntity, 42200, e.Message)
	}
}

func param(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

func boolQuery(r *http.Request, name string) bool {
	v, _ := strconv.ParseBool(r.URL.Query().Get(name))
	return v
}

func version(r *http.Request) (int32, error) {
	return broker.ParseSchemaVersion(param(r, "version"))
}

// schemaBody is a registration, look-up or check body. Other fields Confluent's
// clients send (metadata, ruleSet) are ignored.
type schemaBody struct {
	Schema     string                    `json:"schema"`
	SchemaType string                    `json:"schemaType"`
	References []catalog.SchemaReference `json:"references"`
	ID         int64                     `json:"id"`
	Version    int32                     `json:"version"`
}

// decode reads a JSON body of one of the content types registry clients send.
func decode(r *http.Request, into any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return &httpError{http.StatusUnsupportedMediaType, 415, "HTTP 415 Unsupported Media Type: " + ct}
		case mt == "application/vnd.schemaregistry.v1+json", mt == "application/vnd.schemaregistry+json",
			mt == "application/json", mt == "application/octet-stream":
		default:
			return &httpError{http.StatusUnsupportedMediaType, 415, "HTTP 415 Unsupported Media Type: use application/vnd.schemaregistry.v1+json"}
		}
	}
	if err := json.NewDecoder(r.Body).Decode(into); err != nil {
		return &httpError{http.StatusBadRequest, 400, "the request body is not the JSON this route takes: " + err.Error()}
	}
	return nil
}

func (b schemaBody) request() (broker.SchemaRequest, error) {
	if strings.TrimSpace(b.Schema) == "" {
		return broker.SchemaRequest{}, &httpError{http.StatusUnprocessableEntity, broker.RegInvalidSchema, "Empty schema"}
	}
	return broker.SchemaRequest{Type: b.SchemaType, Schema: b.Schema, References: b.References, ID: b.ID, Version: b.Version}, nil
}

// subjectSchema is a version as Confluent answers it; schemaType is left out for Avro.
type subjectSchema struct {
	Subject    string                    `json:"subject"`
	Version    int32                     `json:"version"`
	ID         int64                     `json:"id"`
	SchemaType string                    `json:"schemaType,omitempty"`
	References []catalog.SchemaReference `json:"references,omitempty"`
	Schema     string                    `json:"schema"`
}

func toJSON(v catalog.SubjectSchema) subjectSchema {
	out := subjectSchema{Subject: v.Subject, Version: v.Version, ID: v.ID, References: v.References, Schema: v.Text}
	if v.Type != registry.TypeAvro {
		out.SchemaType = v.Type
	}
	return out
}

func (h *Handler) register(r *http.Request) (any, error) {
	var b schemaBody
	if err := decode(r, &b); err != nil {
		return nil, err
	}
	req, err := b.request()
	if err != nil {
		return nil, err
	}
	v, err := h.core.RegisterSchema(r.Context(), h.cfg.Principal(r), param(r, "subject"), req)
	if err != nil {
		return nil, err
	}
	return map[string]int64{"id": v.ID}, nil
}

func (h *Handler) lookup(r *http.Request) (any, error) {
	var b schemaBody
	if err := decode(r, &b); err != nil {
		return nil, err
	}
	req, err := b.request()
	if err != nil {
		return nil, err
	}
	v, err := h.core.LookupSchema(r.Context(), h.cfg.Principal(r), param(r, "subject"), req, boolQuery(r, "deleted"))
	if err != nil {
		return nil, err
	}
	return toJSON(v), nil
}

func (h *Handler) subjects(r *http.Request) (any, error) {
	return h.core.Subjects(r.Context(), h.cfg.Principal(r), r.URL.Query().Get("subjectPrefix"), boolQuery(r, "deleted"))
}

func (h *Handler) versions(r *http.Request) (any, error) {
	vs, err := h.core.SubjectVersions(r.Context(), h.cfg.Principal(r), param(r, "subject"), boolQuery(r, "deleted"))
	if err != nil {
		return nil, err
	}
	out := make([]int32, len(vs))
	for i, v := range vs {
		out[i] = v.Version
	}
	return out, nil
}

func (h *Handler) subjectVersion(r *http.Request) (catalog.SubjectSchema, error) {
	v, err := version(r)
	if err != nil {
		return catalog.SubjectSchema{}, err
	}
	return h.core.SubjectVersion(r.Context(), h.cfg.Principal(r), param(r, "subject"), v, boolQuery(r, "deleted"))
}

func (h *Handler) version(r *http.Request) (any, error) {
	v, err := h.subjectVersion(r)
	if err != nil {
		return nil, err
	}
	return toJSON(v), nil
}

func (h *Handler) versionSchema(r *http.Request) (any, error) {
	v, err := h.subjectVersion(r)
	if err != nil {
		return nil, err
	}
	return rawSchema(v.Text), nil
}

func (h *Handler) deleteSubject(r *http.Request) (any, error) {
	return h.core.DeleteSubject(r.Context(), h.cfg.Principal(r), param(r, "subject"), boolQuery(r, "permanent"))
}

func (h *Handler) deleteVersion(r *http.Request) (any, error) {
	v, err := version(r)
	if err != nil {
		return nil, err
	}
	return h.core.DeleteSchemaVersion(r.Context(), h.cfg.Principal(r), param(r, "subject"), v, boolQuery(r, "permanent"))
}

func (h *Handler) referencedBy(r *http.Request) (any, error) {
	v, err := version(r)
	if err != nil {
		return nil, err
	}
	return h.core.ReferencedBy(r.Context(), h.cfg.Principal(r), param(r, "subject"), v)
}

func schemaID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(param(r, "id"), 10, 64)
	if err != nil || id <= 0 || id > 1<<31-1 {
		return 0, &httpError{http.StatusNotFound, broker.RegSchemaNotFound, "Schema " + param(r, "id") + " not found"}
	}
	return id, nil
}

func (h *Handler) schema(r *http.Request) (catalog.Schema, error) {
	id, err := schemaID(r)
	if err != nil {
		return catalog.Schema{}, err
	}
	return h.core.SchemaByID(r.Context(), h.cfg.Principal(r), id)
}

func (h *Handler) schemaByID(r *http.Request) (any, error) {
	s, err := h.schema(r)
	if err != nil {
		return nil, err
	}
	out := struct {
		SchemaType string                    `json:"schemaType,omitempty"`
		References []catalog.SchemaReference `json:"references,omitempty"`
		Schema     string                    `json:"schema"`
	}{References: s.References, Schema: s.Text}
	if s.Type != registry.TypeAvro {
		out.SchemaType = s.Type
	}
	return out, nil
}

func (h *Handler) schemaTextByID(r *http.Request) (any, error) {
	s, err := h.schema(r)
	if err != nil {
		return nil, err
	}
	return rawSchema(s.Text), nil
}

func (h *Handler) usages(r *http.Request) ([]catalog.SubjectSchema, error) {
	id, err := schemaID(r)
	if err != nil {
		return nil, err
	}
	return h.core.SchemaUsages(r.Context(), h.cfg.Principal(r), id, boolQuery(r, "deleted"))
}

func (h *Handler) idSubjects(r *http.Request) (any, error) {
	us, err := h.usages(r)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, u := range us {
		if len(out) == 0 || out[len(out)-1] != u.Subject {
			out = append(out, u.Subject)
		}
	}
	return out, nil
}

func (h *Handler) idVersions(r *http.Request) (any, error) {
	us, err := h.usages(r)
	if err != nil {
		return nil, err
	}
	type sv struct {
		Subject string `json:"subject"`
		Version int32  `json:"version"`
	}
	out := make([]sv, len(us))
	for i, u := range us {
		out[i] = sv{u.Subject, u.Version}
	}
	return out, nil
}

func (h *Handler) allSchemas(r *http.Request) (any, error) {
	ctx, who := r.Context(), h.cfg.Principal(r)
	deleted, latest := boolQuery(r, "deleted"), boolQuery(r, "latestOnly")
	subs, err := h.core.Subjects(ctx, who, r.URL.Query().Get("subjectPrefix"), deleted)
	if err != nil {
		return nil, err
	}
	out := []subjectSchema{}
	for _, s := range subs {
		vs, err := h.core.SubjectVersions(ctx, who, s, deleted)
		if err != nil {
			continue // deleted or forbidden meanwhile
		}
		if latest {
			vs = vs[len(vs)-1:]
		}
		for _, v := range vs {
			out = append(out, toJSON(v))
		}
	}
	return out, nil
}

func (h *Handler) compatibility(r *http.Request) (any, error) {
	var b schemaBody
	if err := decode(r, &b); err != nil {
		return nil, err
	}
	req, err := b.request()
	if err != nil {
		return nil, err
	}
	v, all := broker.LatestVersion, chi.URLParam(r, "version") == ""
	if !all {
		if v, err = version(r); err != nil {
			return nil, err
		}
	}
	msgs, err := h.core.CheckCompatibility(r.Context(), h.cfg.Principal(r), param(r, "subject"), v, all, req)
	if err != nil {
		return nil, err
	}
	out := struct {
		Compatible bool     `json:"is_compatible"`
		Messages   []string `json:"messages,omitempty"`
	}{Compatible: len(msgs) == 0}
	if boolQuery(r, "verbose") {
		out.Messages = msgs
	}
	return out, nil
}

func (h *Handler) getConfig(r *http.Request) (any, error) {
	l, err := h.core.CompatibilityLevel(r.Context(), h.cfg.Principal(r), param(r, "subject"), boolQuery(r, "defaultToGlobal"))
	if err != nil {
		return nil, err
	}
	return map[string]string{"compatibilityLevel": string(l)}, nil
}

func (h *Handler) putConfig(r *http.Request) (any, error) {
	var b struct {
		Compatibility string `json:"compatibility"`
	}
	if err := decode(r, &b); err != nil {
		return nil, err
	}
	l, err := h.core.SetCompatibilityLevel(r.Context(), h.cfg.Principal(r), param(r, "subject"), b.Compatibility)
	if err != nil {
		return nil, err
	}
	return map[string]string{"compatibility": string(l)}, nil
}

func (h *Handler) deleteConfig(r *http.Request) (any, error) {
	l, err := h.core.DeleteCompatibilityLevel(r.Context(), h.cfg.Principal(r), param(r, "subject"))
	if err != nil {
		return nil, err
	}
	// Confluent's clients read either spelling here.
	return map[string]string{"compatibility": string(l), "compatibilityLevel": string(l)}, nil
}

func (h *Handler) getMode(r *http.Request) (any, error) {
	m, err := h.core.RegistryMode(r.Context(), h.cfg.Principal(r), param(r, "subject"), boolQuery(r, "defaultToGlobal"))
	if err != nil {
		return nil, err
	}
	return map[string]string{"mode": string(m)}, nil
}

func (h *Handler) putMode(r *http.Request) (any, error) {
	var b struct {
		Mode string `json:"mode"`
	}
	if err := decode(r, &b); err != nil {
		return nil, err
	}
	m, err := h.core.SetRegistryMode(r.Context(), h.cfg.Principal(r), param(r, "subject"), b.Mode, boolQuery(r, "force"))
	if err != nil {
		return nil, err
	}
	return map[string]string{"mode": string(m)}, nil
}

func (h *Handler) deleteMode(r *http.Request) (any, error) {
	m, err := h.core.DeleteRegistryMode(r.Context(), h.cfg.Principal(r), param(r, "subject"))
	if err != nil {
		return nil, err
	}
	return map[string]string{"mode": string(m)}, nil
}
