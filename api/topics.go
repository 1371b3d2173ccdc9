package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// topicsResource is /v1/topics: topic administration, with partitions and records
// mounted below a topic.
type topicsResource struct{ a *API }

// Routes returns the router mounted at /v1/topics.
func (rs *topicsResource) Routes() chi.Router {
	a := rs.a
	r := chi.NewRouter()
	r.Post("/", a.serve(broker.CapTopics, rs.create))
	r.Get("/", a.serve(broker.CapTopics, rs.list))
	r.Route("/{topic}", func(r chi.Router) {
		r.Get("/", a.serve(broker.CapTopics, rs.get))
		r.Delete("/", a.serve(broker.CapTopics, rs.delete))
		r.Patch("/", a.serve(broker.CapTopics, rs.patch))
		r.Mount("/partitions", (&partitionsResource{a}).Routes())
		r.Mount("/records", (&recordsResource{a}).Routes())
	})
	return r
}

// topicJSON is a topic as the API shows it. Configs holds only explicitly set keys;
// the rest take the documented defaults.
type topicJSON struct {
	Name       string            `json:"name"`
	ID         int64             `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs"`
	// EffectiveConfigs is every config with the value in force, defaults included: in
	// the answers about one topic (get, create, alter), not in the list.
	EffectiveConfigs map[string]string `json:"effective_configs,omitempty"`
	CreatedAt        time.Time         `json:"created_at"`
}

func toTopicJSON(t catalog.Topic) topicJSON {
	cfg := t.Configs
	if cfg == nil {
		cfg = map[string]string{}
	}
	return topicJSON{Name: t.Name, ID: t.ID, Partitions: t.Partitions, Configs: cfg, CreatedAt: t.CreatedAt.UTC()}
}

// oneTopicJSON is a topic with its effective configs.
func oneTopicJSON(t catalog.Topic) topicJSON {
	tj := toTopicJSON(t)
	tj.EffectiveConfigs = map[string]string{}
	for _, c := range broker.EffectiveConfigs(t.Configs) {
		tj.EffectiveConfigs[c.Name] = c.Value
	}
	return tj
}

type createTopicRequest struct {
	Name       string                     `json:"name"`
	Partitions json.RawMessage            `json:"partitions"`
	Configs    map[string]json.RawMessage `json:"configs"`
}

func (rs *topicsResource) create(w http.ResponseWriter, r *http.Request) *problem {
	a := rs.a
	req, p := decodeJSON[createTopicRequest](r)
	if p != nil {
		return p
	}
	if err := broker.ValidateTopicName(req.Name); err != nil {
		return a.problemFor(r, err)
	}
	var partitions int32 // the core's default
	if !isNull(req.Partitions) {
		if partitions, p = partitionCount(req.Partitions); p != nil {
			return p
		}
	}
	configs := make(map[string]string, len(req.Configs))
	for k, raw := range req.Configs {
		v, null, p := configValue(k, raw)
		if p != nil {
			return p
		}
		if null {
			return newProblem(CodeInvalidConfig, "config %s: null removes a config and only makes sense in PATCH", k).with("config", k)
		}
		configs[k] = v
	}
	t, err := a.core.CreateTopic(r.Context(), principal(r), broker.CreateTopicRequest{Name: req.Name, Partitions: partitions, Configs: configs})
	if err != nil {
		return a.problemFor(r, err)
	}
	w.Header().Set("Location", "/v1/topics/"+url.PathEscape(t.Name))
	writeJSON(w, http.StatusCreated, oneTopicJSON(t))
	return nil
}

func (rs *topicsResource) list(w http.ResponseWriter, r *http.Request) *problem {
	ts, err := rs.a.core.Topics(r.Context(), principal(r))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := make([]topicJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, toTopicJSON(t))
	}
	writeJSON(w, http.StatusOK, map[string]any{"topics": out})
	return nil
}

func (rs *topicsResource) get(w http.ResponseWriter, r *http.Request) *problem {
	name, p := topicParam(r)
	if p != nil {
		return p
	}
	t, err := rs.a.core.Topic(r.Context(), principal(r), name)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, oneTopicJSON(t))
	return nil
}

func (rs *topicsResource) delete(w http.ResponseWriter, r *http.Request) *problem {
	name, p := topicParam(r)
	if p != nil {
		return p
	}
	if err := rs.a.core.DeleteTopic(r.Context(), principal(r), name); err != nil {
		return rs.a.problemFor(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type patchTopicRequest struct {
	Partitions json.RawMessage            `json:"partitions"`
	Configs    map[string]json.RawMessage `json:"configs"`
}

// patch grows the partition count and sets or (with null) removes configs; the core
// checks each config and the result.
func (rs *topicsResource) patch(w http.ResponseWriter, r *http.Request) *problem {
	name, p := topicParam(r)
	if p != nil {
		return p
	}
	req, p := decodeJSON[patchTopicRequest](r)
	if p != nil {
		return p
	}
	var u broker.TopicUpdate // Partitions 0: unchanged
	if !isNull(req.Partitions) {
		if u.Partitions, p = partitionCount(req.Partitions); p != nil {
			return p
		}
	}
	u.Configs = make(map[string]string, len(req.Configs))
	for k, raw := range req.Configs {
		v, _, p := configValue(k, raw)
		if p != nil {
			return p
		}
		u.Configs[k] = v // null: "", the core's spelling of "remove"
	}
	t, err := rs.a.core.UpdateTopic(r.Context(), principal(r), name, u)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, oneTopicJSON(t))
	return nil
}

// partitionCount parses a partition count: an integer in [1, catalog.MaxPartitions].
func partitionCount(raw json.RawMessage) (int32, *problem) {
	n, ok := parseDigits(string(raw), catalog.MaxPartitions)
	if !ok || n < 1 {
		return 0, newProblem(CodeInvalidPartitionCount, "partitions must be an integer between 1 and %d, not %s", catalog.MaxPartitions, truncate(string(raw), 32))
	}
	return int32(n), nil
}

// configValue reads one config value. Kafka configs are strings; numbers and booleans
// are taken as their JSON text for convenience ("retention.ms": 86400000).
func configValue(key string, raw json.RawMessage) (v string, null bool, p *problem) {
	switch {
	case isNull(raw):
		return "", true, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, newProblem(CodeInvalidConfig, "config %s: %v", key, err).with("config", key)
		}
		if s == "" {
			return "", false, newProblem(CodeInvalidConfig, "config %s: empty value; use null to remove a config", key).with("config", key)
		}
		return s, false, nil
	case raw[0] == 't' || raw[0] == 'f' || raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
		return string(raw), false, nil
	}
	return "", false, newProblem(CodeInvalidConfig, "config %s: value must be a string, number or boolean", key).with("config", key)
}

// isNull reports an absent or JSON-null raw value.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, nullJSON)
}

var nullJSON = []byte("null")

// partitionsResource is /v1/topics/{topic}/partitions.
type partitionsResource struct{ a *API }

// Routes returns the router mounted at /v1/topics/{topic}/partitions.
func (rs *partitionsResource) Routes() chi.Router {
	a := rs.a
	r := chi.NewRouter()
	r.Get("/", a.serve(broker.CapTopics, rs.list))
	r.Get("/{partition}/offsets", a.serve(broker.CapTopics, rs.offsetForTime))
	r.Get("/{partition}/records", a.serve(broker.CapFetch, a.fetchOrTail))
	return r
}

type partitionJSON struct {
	Partition      int32 `json:"partition"`
	LogStartOffset int64 `json:"log_start_offset"`
	HighWatermark  int64 `json:"high_watermark"`
	// LastStableOffset is where read_committed readers stop: the first offset of the
	// partition's earliest open transaction, or the high watermark.
	LastStableOffset int64 `json:"last_stable_offset"`
	Bytes            int64 `json:"bytes"`
}

func (rs *partitionsResource) list(w http.ResponseWriter, r *http.Request) *problem {
	name, p := topicParam(r)
	if p != nil {
		return p
	}
	ps, err := rs.a.core.Partitions(r.Context(), principal(r), name)
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := make([]partitionJSON, 0, len(ps))
	for _, pi := range ps {
		out = append(out, partitionJSON{pi.Partition, pi.LogStartOffset, pi.HighWatermark, pi.LastStableOffset, pi.Bytes})
	}
	writeJSON(w, http.StatusOK, map[string]any{"partitions": out})
	return nil
}

// offsetForTime answers the earliest offset whose timestamp is at or after ?timestamp=
// (unix ms or RFC 3339; "earliest" and "latest" name the log start and the high
// watermark), at the catalog's chunk granularity.
func (rs *partitionsResource) offsetForTime(w http.ResponseWriter, r *http.Request) *problem {
	a := rs.a
	name, part, p := a.topicPartition(r)
	if p != nil {
		return p
	}
	raw := r.URL.Query().Get("timestamp")
	var at int64
	switch raw {
	case "earliest":
		at = broker.Earliest
	case "latest":
		at = broker.Latest
	default:
		ts, ok := parseTime(raw)
		if !ok {
			return newProblem(CodeInvalidTimestamp, "timestamp %q must be unix milliseconds, RFC 3339, earliest or latest", truncate(raw, 64))
		}
		at = ts
	}
	off, err := a.core.ListOffset(r.Context(), principal(r), name, part, at)
	if err != nil {
		return a.problemFor(r, err)
	}
	writeJSONBytes(w, http.StatusOK, []byte(`{"offset":`+strconv.FormatInt(off, 10)+"}\n"))
	return nil
}

// topicPartition reads {topic} and {partition} and resolves them through the core's
// topic cache: the topic exists and has the partition.
func (a *API) topicPartition(r *http.Request) (string, int32, *problem) {
	ti, part, p := a.lookupPartition(r)
	return ti.Name, part, p
}

// lookupPartition is topicPartition with the topic's metadata.
func (a *API) lookupPartition(r *http.Request) (broker.TopicInfo, int32, *problem) {
	name, p := topicParam(r)
	if p != nil {
		return broker.TopicInfo{}, 0, p
	}
	part, p := partitionParam(r)
	if p != nil {
		return broker.TopicInfo{}, 0, p
	}
	ti, err := a.core.LookupPartition(r.Context(), principal(r), name, part)
	if err != nil {
		return broker.TopicInfo{}, 0, a.problemFor(r, err)
	}
	return ti, part, nil
}
