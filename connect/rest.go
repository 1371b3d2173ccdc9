package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// REST serves Kafka Connect's REST API — paths, JSON shapes and error bodies
// ({"error_code": STATUS, "message": ...}) — over the broker core, which authorizes,
// audits and keeps every connector in the catalog: any node with the connect role
// answers for every connector, as any Kafka Connect worker does (forwarding is not
// needed, the catalog is shared). A handler decodes, calls the core (handing it the
// runtime's planner, which validates a config against the plugins once the caller is
// authorized), and encodes; it keeps no rule of its own. The node mounts Connectors and
// Plugins under /connectors and /connector-plugins, and again under /v1.
type REST struct {
	core      AdminCore
	plugins   *Plugins
	providers Providers
	worker    string
	principal func(*http.Request) broker.Principal
	log       *slog.Logger
}

// RESTConfig configures the REST API.
type RESTConfig struct {
	Plugins   *Plugins
	Providers Providers
	// Worker names the node's worker in what it stores (a connector's worker_id).
	Worker string
	// Principal is who a request comes from, as the API's middleware authenticated it
	// (the core authorizes it; a connector it stores runs as it); nil: anonymous.
	Principal func(*http.Request) broker.Principal
	Log       *slog.Logger
}

// AdminCore is the core's connector administration (*broker.Broker has it).
type AdminCore interface {
	Connectors(ctx context.Context, who broker.Principal) ([]catalog.Connector, error)
	Connector(ctx context.Context, who broker.Principal, name string) (catalog.Connector, error)
	PutConnector(ctx context.Context, who broker.Principal, req broker.PutConnectorRequest) (catalog.Connector, bool, error)
	RestartConnector(ctx context.Context, who broker.Principal, name, worker string, plan broker.ConnectorPlanner) error
	DeleteConnector(ctx context.Context, who broker.Principal, name string) error
	SetConnectorState(ctx context.Context, who broker.Principal, name, state string) error
	RestartConnectorTasks(ctx context.Context, who broker.Principal, name string, task int32, onlyFailed bool) (catalog.Connector, error)
	ConnectorTopics(ctx context.Context, who broker.Principal, name string) ([]string, error)
	ResetConnectorTopics(ctx context.Context, who broker.Principal, name string) error
	ConnectorOffsets(ctx context.Context, who broker.Principal, name string) (broker.ConnectorOffsets, error)
	AlterConnectorOffsets(ctx context.Context, who broker.Principal, name string, decode broker.OffsetsDecoder) error
	ResetConnectorOffsets(ctx context.Context, who broker.Principal, name string) error
	AuthorizeConnectorCreate(ctx context.Context, who broker.Principal, name string) error
}

var _ AdminCore = (*broker.Broker)(nil)

// NewREST builds the REST API.
func NewREST(core AdminCore, cfg RESTConfig) *REST {
	if cfg.Plugins == nil {
		cfg.Plugins = DefaultPlugins()
	}
	if cfg.Principal == nil {
		cfg.Principal = func(*http.Request) broker.Principal { return broker.Anonymous }
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &REST{core: core, plugins: cfg.Plugins, providers: cfg.Providers, worker: cfg.Worker,
		principal: cfg.Principal, log: cfg.Log.With("component", "connect-rest")}
}

// restError is an answer in Kafka Connect's error shape.
type restError struct {
	status int
	msg    string
}

func (e *restError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) *restError {
	return &restError{status: status, msg: fmt.Sprintf(format, args...)}
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// serve writes a handler's error in Kafka Connect's shape: the core's refusals by their
// code (restStatus), in the core's words; anything unexpected logged and answered 500.
func (h *REST) serve(fn handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := fn(w, r)
		if err == nil {
			return
		}
		var re *restError
		var be *broker.Error
		body := map[string]any{}
		switch {
		case errors.As(err, &re):
		case errors.As(err, &be):
			re = errorf(restStatus(be.Code), "%s", be.Message)
			switch be.Code {
			case broker.CodeConnectorNotStopped:
				re.msg = fmt.Sprintf("Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/%s/stop' endpoint", chi.URLParam(r, "name"))
			case broker.CodeForbidden:
				for _, k := range []string{"operation", "resource_type", "resource"} {
					body[k] = be.Details[k]
				}
			}
			if be.Unexpected || re.status == http.StatusInternalServerError {
				h.log.Error("connect REST request failed", "method", r.Method, "path", r.URL.Path, "code", be.Code, "op", be.Op, "err", be.Err)
			}
		default:
			h.log.Error("connect REST request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			re = errorf(http.StatusInternalServerError, "%s", err.Error())
		}
		body["error_code"], body["message"] = re.status, re.msg
		writeJSON(w, re.status, body)
	}
}

// restStatus is the status Kafka Connect answers a refusal with.
func restStatus(c broker.Code) int {
	switch c {
	case broker.CodeForbidden:
		return http.StatusForbidden
	case broker.CodeConnectorNotFound, broker.CodeTaskNotFound:
		return http.StatusNotFound
	case broker.CodeConnectorExists, broker.CodeGroupNotEmpty:
		return http.StatusConflict
	case broker.CodeInternal:
		return http.StatusInternalServerError
	}
	if c.Retriable() {
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, map[string]any{"error_code": http.StatusNotFound, "message": "HTTP 404 Not Found"})
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error_code": http.StatusMethodNotAllowed, "message": "HTTP 405 Method Not Allowed"})
}

// Connectors is the /connectors resource.
func (h *REST) Connectors() http.Handler {
	r := chi.NewRouter()
	r.NotFound(notFound)
	r.MethodNotAllowed(methodNotAllowed)
	r.Get("/", h.serve(h.list))
	r.Post("/", h.serve(h.create))
	r.Route("/{name}", func(r chi.Router) {
		r.Get("/", h.serve(h.info))
		r.Delete("/", h.serve(h.delete))
		r.Get("/config", h.serve(h.getConfig))
		r.Put("/config", h.serve(h.putConfig))
		r.Get("/status", h.serve(h.status))
		r.Put("/pause", h.serve(h.setState(catalog.StatePaused, http.StatusAccepted)))
		r.Put("/resume", h.serve(h.setState(catalog.StateRunning, http.StatusAccepted)))
		r.Put("/stop", h.serve(h.setState(catalog.StateStopped, http.StatusNoContent)))
		r.Post("/restart", h.serve(h.restart))
		r.Get("/tasks", h.serve(h.tasks))
		r.Get("/tasks/{task}/status", h.serve(h.taskStatus))
		r.Post("/tasks/{task}/restart", h.serve(h.restartTask))
		r.Get("/topics", h.serve(h.topics))
		r.Put("/topics/reset", h.serve(h.resetTopics))
		r.Get("/offsets", h.serve(h.getOffsets))
		r.Patch("/offsets", h.serve(h.alterOffsets))
		r.Delete("/offsets", h.serve(h.resetOffsets))
	})
	return r
}

// Plugins is the /connector-plugins resource.
func (h *REST) Plugins() http.Handler {
	r := chi.NewRouter()
	r.NotFound(notFound)
	r.MethodNotAllowed(methodNotAllowed)
	r.Get("/", h.serve(h.listPlugins))
	r.Get("/{plugin}/config", h.serve(h.pluginConfig))
	r.Put("/{plugin}/config/validate", h.serve(h.validate))
	return r
}

// readBody decodes a JSON body into v.
func readBody(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return errorf(http.StatusBadRequest, "Could not read the request body: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errorf(http.StatusBadRequest, "Request body is not valid JSON: %v", err)
	}
	return nil
}

// configMap is a connector config as a body gives it: JSON strings, and numbers and
// booleans taken as their text (as Kafka Connect's Jackson does).
type configMap map[string]string

func (c *configMap) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(configMap, len(raw))
	for k, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			out[k] = s
			continue
		}
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return err
		}
		switch x.(type) {
		case float64, bool:
			out[k] = strings.TrimSpace(string(v))
		case nil:
			// a null removes nothing and sets nothing
		default:
			return fmt.Errorf("config %s: a value must be a string, a number or a boolean", k)
		}
	}
	*c = out
	return nil
}

type taskRef struct {
	Connector string `json:"connector"`
	Task      int32  `json:"task"`
}

type connectorInfo struct {
	Name   string            `json:"name"`
	Config map[string]string `json:"config"`
	Tasks  []taskRef         `json:"tasks"`
	Type   string            `json:"type"`
}

func (h *REST) keysOf(c catalog.Connector) []ConfigKey {
	keys := commonKeys(c.Type)
	if p, ok := h.plugins.Lookup(c.Config[cfgClass]); ok {
		keys = append(keys, p.Config()...)
	}
	return keys
}

func (h *REST) infoOf(c catalog.Connector) connectorInfo {
	info := connectorInfo{Name: c.Name, Config: maskConfig(c.Config, h.keysOf(c)), Tasks: []taskRef{}, Type: c.Type}
	if c.TargetState != catalog.StateStopped {
		for _, t := range c.Tasks {
			info.Tasks = append(info.Tasks, taskRef{c.Name, t.Task})
		}
	}
	return info
}

type stateInfo struct {
	State    string `json:"state"`
	WorkerID string `json:"worker_id"`
	Trace    string `json:"trace,omitempty"`
}

type taskState struct {
	ID int32 `json:"id"`
	stateInfo
	Generation int64 `json:"generation"`
	// Metrics is what the task measures of the system it reads or writes (a CDC
	// source: its slot's lag, wal_status and safe WAL size).
	Metrics json.RawMessage `json:"source_metrics,omitempty"`
}

type connectorStatus struct {
	Name      string      `json:"name"`
	Connector stateInfo   `json:"connector"`
	Tasks     []taskState `json:"tasks"`
	Type      string      `json:"type"`
}

// statusOf derives a connector's status: its own from its target state, each task's
// from its lease and what its instance last reported (UNASSIGNED while no live worker
// holds it). A STOPPED connector shows no tasks, as Kafka Connect's.
func statusOf(c catalog.Connector) connectorStatus {
	st := connectorStatus{Name: c.Name, Connector: stateInfo{State: c.TargetState, WorkerID: c.Worker}, Tasks: []taskState{}, Type: c.Type}
	if c.TargetState == catalog.StateStopped {
		return st
	}
	for _, t := range c.Tasks {
		ts := taskState{ID: t.Task, stateInfo: stateInfo{State: t.State, WorkerID: t.Worker}, Generation: t.Generation}
		switch {
		case !t.Held(c.Now):
			ts.State, ts.WorkerID = catalog.TaskUnassigned, ""
		case t.State == catalog.TaskUnassigned || t.State == "":
			ts.WorkerID = t.Owner // claimed, not started yet
		}
		if ts.State == catalog.TaskFailed {
			ts.Trace = t.Trace
		}
		if t.Metrics != "" {
			ts.Metrics = json.RawMessage(t.Metrics)
		}
		st.Tasks = append(st.Tasks, ts)
	}
	return st
}

func (h *REST) list(w http.ResponseWriter, r *http.Request) error {
	cs, err := h.core.Connectors(r.Context(), h.principal(r))
	if err != nil {
		return err
	}
	expand := r.URL.Query()["expand"]
	if len(expand) == 0 {
		names := make([]string, len(cs))
		for i, c := range cs {
			names[i] = c.Name
		}
		writeJSON(w, http.StatusOK, names)
		return nil
	}
	out := map[string]map[string]any{}
	for _, c := range cs {
		m := map[string]any{}
		for _, e := range expand {
			switch e {
			case "status":
				m["status"] = statusOf(c)
			case "info":
				m["info"] = h.infoOf(c)
			}
		}
		out[c.Name] = m
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type createRequest struct {
	Name         string    `json:"name"`
	Config       configMap `json:"config"`
	InitialState string    `json:"initial_state"`
}

func (h *REST) create(w http.ResponseWriter, r *http.Request) error {
	var req createRequest
	if err := readBody(r, &req); err != nil {
		return err
	}
	name := strings.TrimSpace(req.Name)
	if req.Config == nil {
		return errorf(http.StatusBadRequest, "Connector config is missing: send {\"name\": ..., \"config\": {...}}")
	}
	c, _, err := h.put(r, name, req.Config, strings.ToUpper(req.InitialState), false)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/connectors/"+name)
	writeJSON(w, http.StatusCreated, h.infoOf(c))
	return nil
}

// put stores a config through the core, which authorizes it and then calls plan.
func (h *REST) put(r *http.Request, name string, cfg map[string]string, state string, upsert bool) (catalog.Connector, bool, error) {
	if inc, ok := cfg[cfgName]; ok && inc != name {
		return catalog.Connector{}, false, errorf(http.StatusBadRequest, "Connector name configuration (%s) doesn't match connector name in the URL (%s)", inc, name)
	}
	cfg = maps.Clone(cfg)
	cfg[cfgName] = name
	return h.core.PutConnector(r.Context(), h.principal(r), broker.PutConnectorRequest{Name: name, Config: cfg, Upsert: upsert,
		TargetState: state, Worker: h.worker, Plan: h.plan})
}

// plan validates a config against the plugins (provider references resolved, their
// values in no answer) and splits it into tasks: the core calls it once the caller may
// store the config.
func (h *REST) plan(_ context.Context, name string, cfg map[string]string) (broker.ConnectorPlan, error) {
	invalid := func(format string, args ...any) (broker.ConnectorPlan, error) {
		return broker.ConnectorPlan{}, &broker.Error{Code: broker.CodeInvalidConfig, Message: fmt.Sprintf(format, args...)}
	}
	v, err := validate(h.plugins, h.providers, cfg, "")
	if err != nil {
		return invalid("%s", err.Error())
	}
	if v.errors > 0 {
		return invalid("Connector configuration is invalid and contains the following %d error(s):\n%s\nYou can also find the above list of errors at the endpoint `/connector-plugins/{connectorType}/config/validate`",
			v.errors, strings.Join(v.messages(), "\n"))
	}
	tasks, err := v.plugin.TaskConfigs(cfg, int(newGetter(cfg, commonKeys(v.plugin.Type())).int64(cfgTasksMax)))
	if err != nil {
		return invalid("Connector %s could not split its config into tasks: %s", name, v.resolved.redact(err.Error()))
	}
	return broker.ConnectorPlan{Type: v.plugin.Type(), Tasks: tasks, Needs: needsOf(v.plugin, name, cfg)}, nil
}

func (h *REST) connector(r *http.Request) (catalog.Connector, error) {
	return h.core.Connector(r.Context(), h.principal(r), chi.URLParam(r, "name"))
}

func (h *REST) info(w http.ResponseWriter, r *http.Request) error {
	c, err := h.connector(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.infoOf(c))
	return nil
}

func (h *REST) delete(w http.ResponseWriter, r *http.Request) error {
	if err := h.core.DeleteConnector(r.Context(), h.principal(r), chi.URLParam(r, "name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *REST) getConfig(w http.ResponseWriter, r *http.Request) error {
	c, err := h.connector(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, maskConfig(c.Config, h.keysOf(c)))
	return nil
}

func (h *REST) putConfig(w http.ResponseWriter, r *http.Request) error {
	var cfg configMap
	if err := readBody(r, &cfg); err != nil {
		return err
	}
	c, created, err := h.put(r, chi.URLParam(r, "name"), cfg, "", true)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/connectors/"+c.Name)
	}
	writeJSON(w, status, h.infoOf(c))
	return nil
}

func (h *REST) status(w http.ResponseWriter, r *http.Request) error {
	c, err := h.connector(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, statusOf(c))
	return nil
}

func (h *REST) setState(state string, status int) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := h.core.SetConnectorState(r.Context(), h.principal(r), chi.URLParam(r, "name"), state); err != nil {
			return err
		}
		w.WriteHeader(status)
		return nil
	}
}

func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errorf(http.StatusBadRequest, "Invalid value %q for query parameter %s: use true or false", v, name)
	}
	return b, nil
}

// restart: without includeTasks or onlyFailed, the connector alone — its task configs
// are computed again (204); with includeTasks, its tasks too (onlyFailed: the FAILED
// ones), answered 202 with the status. onlyFailed alone restarts nothing (a connector
// here never fails, only its tasks do) and answers the status.
func (h *REST) restart(w http.ResponseWriter, r *http.Request) error {
	includeTasks, err := boolParam(r, "includeTasks")
	if err != nil {
		return err
	}
	onlyFailed, err := boolParam(r, "onlyFailed")
	if err != nil {
		return err
	}
	name, who := chi.URLParam(r, "name"), h.principal(r)
	var c catalog.Connector
	switch {
	case !includeTasks && !onlyFailed:
		if err := h.core.RestartConnector(r.Context(), who, name, h.worker, h.plan); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	case includeTasks:
		c, err = h.core.RestartConnectorTasks(r.Context(), who, name, -1, onlyFailed)
	default:
		c, err = h.core.Connector(r.Context(), who, name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, statusOf(c))
	return nil
}

func taskParam(r *http.Request) (int32, error) {
	n, err := strconv.ParseInt(chi.URLParam(r, "task"), 10, 32)
	if err != nil || n < 0 {
		return 0, errorf(http.StatusNotFound, "Task not found: %s-%s", chi.URLParam(r, "name"), chi.URLParam(r, "task"))
	}
	return int32(n), nil
}

func (h *REST) tasks(w http.ResponseWriter, r *http.Request) error {
	c, err := h.connector(r)
	if err != nil {
		return err
	}
	type taskInfo struct {
		ID     taskRef           `json:"id"`
		Config map[string]string `json:"config"`
	}
	out := []taskInfo{}
	if c.TargetState != catalog.StateStopped {
		keys := h.keysOf(c)
		for _, t := range c.Tasks {
			cfg := maps.Clone(c.Config)
			maps.Copy(cfg, t.Config)
			out = append(out, taskInfo{ID: taskRef{c.Name, t.Task}, Config: maskConfig(cfg, keys)})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *REST) taskStatus(w http.ResponseWriter, r *http.Request) error {
	id, err := taskParam(r)
	if err != nil {
		return err
	}
	c, err := h.connector(r)
	if err != nil {
		return err
	}
	for _, t := range statusOf(c).Tasks {
		if t.ID == id {
			writeJSON(w, http.StatusOK, t)
			return nil
		}
	}
	return errorf(http.StatusNotFound, "No status found for task %s-%d", c.Name, id)
}

func (h *REST) restartTask(w http.ResponseWriter, r *http.Request) error {
	id, err := taskParam(r)
	if err != nil {
		return err
	}
	if _, err := h.core.RestartConnectorTasks(r.Context(), h.principal(r), chi.URLParam(r, "name"), id, false); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *REST) topics(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "name")
	topics, err := h.core.ConnectorTopics(r.Context(), h.principal(r), name)
	if err != nil {
		return err
	}
	if topics == nil {
		topics = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{name: map[string]any{"topics": topics}})
	return nil
}

func (h *REST) resetTopics(w http.ResponseWriter, r *http.Request) error {
	if err := h.core.ResetConnectorTopics(r.Context(), h.principal(r), chi.URLParam(r, "name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

func (h *REST) listPlugins(w http.ResponseWriter, r *http.Request) error {
	only := true
	if v := r.URL.Query().Get("connectorsOnly"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errorf(http.StatusBadRequest, "Invalid value %q for query parameter connectorsOnly", v)
		}
		only = b
	}
	type plugin struct {
		Class   string `json:"class"`
		Type    string `json:"type"`
		Version string `json:"version,omitempty"`
	}
	out := []plugin{}
	for _, c := range h.plugins.All() {
		out = append(out, plugin{c.Class(), c.Type(), c.Version()})
	}
	if !only {
		for _, n := range sortedNames(transformDefs) {
			if transformDefs[n].sides {
				out = append(out, plugin{transformsPackage + n + "$Key", "transformation", ""}, plugin{transformsPackage + n + "$Value", "transformation", ""})
			} else {
				out = append(out, plugin{transformsPackage + n, "transformation", ""})
			}
		}
		for _, n := range sortedNames(predicateDefs) {
			out = append(out, plugin{transformsPackage + "predicates." + n, "predicate", ""})
		}
		for _, n := range converterNames() {
			out = append(out, plugin{n, "converter", ""})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func sortedNames[V any](m map[string]V) []string {
	out := slices.Collect(maps.Keys(m))
	slices.Sort(out)
	return out
}

// definition is a config key as the validate and plugin-config endpoints show it.
type definition struct {
	Name          string   `json:"name"`
	Type          string   `json:"type"`
	Required      bool     `json:"required"`
	DefaultValue  *string  `json:"default_value"`
	Importance    string   `json:"importance"`
	Documentation string   `json:"documentation"`
	Group         string   `json:"group"`
	Width         string   `json:"width"`
	DisplayName   string   `json:"display_name"`
	Dependents    []string `json:"dependents"`
	Order         int      `json:"order"`
}

func definitionOf(k ConfigKey, order int) definition {
	d := definition{Name: k.Name, Type: k.Type, Required: k.NoDefault, Importance: k.Importance, Documentation: k.Doc,
		Group: k.Group, Width: "NONE", DisplayName: k.DisplayName, Dependents: []string{}, Order: order}
	if d.DisplayName == "" {
		d.DisplayName = k.Name
	}
	if d.Importance == "" {
		d.Importance = "MEDIUM"
	}
	if !k.NoDefault {
		def := k.Default
		d.DefaultValue = &def
	}
	return d
}

func (h *REST) pluginConfig(w http.ResponseWriter, r *http.Request) error {
	p, ok := h.plugins.Lookup(chi.URLParam(r, "plugin"))
	if !ok {
		return errorf(http.StatusNotFound, "Unknown plugin %s.", chi.URLParam(r, "plugin"))
	}
	out := []definition{}
	for i, k := range p.Config() {
		out = append(out, definitionOf(k, i+1))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *REST) validate(w http.ResponseWriter, r *http.Request) error {
	var cfg configMap
	if err := readBody(r, &cfg); err != nil {
		return err
	}
	// It reads the node's config providers: as creating the connector would.
	if err := h.core.AuthorizeConnectorCreate(r.Context(), h.principal(r), strings.TrimSpace(cfg[cfgName])); err != nil {
		return err
	}
	class := chi.URLParam(r, "plugin")
	p, ok := h.plugins.Lookup(class)
	if !ok {
		return errorf(http.StatusBadRequest, "Failed to find any class that implements Connector and which name matches %s, available connectors are: %s",
			class, strings.Join(pluginClasses(h.plugins), ", "))
	}
	if inc, ok := cfg[cfgClass]; ok {
		if q, found := h.plugins.Lookup(inc); !found || q.Class() != p.Class() {
			return errorf(http.StatusBadRequest, "Included connector type %s does not match request type %s", inc, class)
		}
	}
	v, err := validate(h.plugins, h.providers, cfg, class)
	if err != nil {
		return errorf(http.StatusBadRequest, "%s", err.Error())
	}
	writeJSON(w, http.StatusOK, validateBody(v, cfg, p))
	return nil
}

// validateInfo is Kafka Connect's ConfigInfos.
type validateInfo struct {
	Name       string   `json:"name"`
	ErrorCount int      `json:"error_count"`
	Groups     []string `json:"groups"`
	Configs    any      `json:"configs"`
}

// validateBody is the validate endpoint's answer.
func validateBody(v validation, raw map[string]string, p Plugin) validateInfo {
	type value struct {
		Name        string   `json:"name"`
		Value       *string  `json:"value"`
		Recommended []string `json:"recommended_values"`
		Errors      []string `json:"errors"`
		Visible     bool     `json:"visible"`
	}
	type config struct {
		Definition definition `json:"definition"`
		Value      value      `json:"value"`
	}
	keys := append(commonKeys(p.Type()), p.Config()...)
	masked := maskConfig(raw, keys)
	configs := []config{}
	for _, fr := range v.results {
		val := fr.value
		if s, ok := masked[fr.key.Name]; ok {
			val = &s
		} else if fr.key.Type == TypePassword && val != nil && *val != "" {
			h := hidden
			val = &h
		}
		rec := fr.key.Recommended
		if rec == nil {
			rec = []string{}
		}
		errs := fr.errors
		if errs == nil {
			errs = []string{}
		}
		configs = append(configs, config{Definition: definitionOf(fr.key, fr.order),
			Value: value{Name: fr.key.Name, Value: val, Recommended: rec, Errors: errs, Visible: fr.visible}})
	}
	return validateInfo{Name: p.Class(), ErrorCount: v.errors, Groups: v.groups, Configs: configs}
}
