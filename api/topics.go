package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/catalog"
)

// topicsResource is /v1/topics: topic administration, with partitions and records
// mounted below a topic.
type topicsResource struct{ a *API }

// Routes returns the router mounted at /v1/topics.
func (rs *topicsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Post("/", rs.create)
	r.Get("/", rs.list)
	r.Route("/{topic}", func(r chi.Router) {
		r.Get("/", rs.get)
		r.Delete("/", rs.delete)
		r.Patch("/", rs.patch)
		r.Mount("/partitions", (&partitionsResource{rs.a}).Routes())
		r.Mount("/records", (&recordsResource{rs.a}).Routes())
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
	CreatedAt  time.Time         `json:"created_at"`
}

func toTopicJSON(t catalog.Topic) topicJSON {
	cfg := t.Configs
	if cfg == nil {
		cfg = map[string]string{}
	}
	return topicJSON{Name: t.Name, ID: t.ID, Partitions: t.Partitions, Configs: cfg, CreatedAt: t.CreatedAt.UTC()}
}

type createTopicRequest struct {
	Name       string                     `json:"name"`
	Partitions json.RawMessage            `json:"partitions"`
	Configs    map[string]json.RawMessage `json:"configs"`
}

// defaultPartitions is a new topic's partition count when the request names none, as
// Kafka's num.partitions.
const defaultPartitions = 1

func (rs *topicsResource) create(w http.ResponseWriter, r *http.Request) {
	a := rs.a
	if !a.needCatalog(w, r) {
		return
	}
	body, p := readBody(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	var req createTopicRequest
	if p := decodeStrict(body, &req); p != nil {
		writeProblem(w, r, p)
		return
	}
	if err := catalog.ValidateTopicName(req.Name); err != nil {
		writeProblem(w, r, newProblem(CodeInvalidTopicName, "%s", err.Error()))
		return
	}
	partitions := int32(defaultPartitions)
	if !isNull(req.Partitions) {
		n, p := partitionCount(req.Partitions)
		if p != nil {
			writeProblem(w, r, p)
			return
		}
		partitions = n
	}
	configs := make(map[string]string, len(req.Configs))
	for k, raw := range req.Configs {
		v, null, p := configValue(k, raw)
		if p != nil {
			writeProblem(w, r, p)
			return
		}
		if null {
			writeProblem(w, r, newProblem(CodeInvalidConfig, "config %s: null removes a config and only makes sense in PATCH", k).with("config", k))
			return
		}
		configs[k] = v
	}
	if _, err := catalog.ParseConfig(configs); err != nil {
		writeProblem(w, r, a.catalogProblem(r, "create topic", err))
		return
	}
	t, err := a.cat.CreateTopic(r.Context(), req.Name, partitions, configs)
	if err != nil {
		writeProblem(w, r, a.catalogProblem(r, "create topic", err))
		return
	}
	w.Header().Set("Location", "/v1/topics/"+url.PathEscape(t.Name))
	writeJSON(w, http.StatusCreated, toTopicJSON(t))
}

func (rs *topicsResource) list(w http.ResponseWriter, r *http.Request) {
	a := rs.a
	if !a.needCatalog(w, r) {
		return
	}
	ts, err := a.cat.Topics(r.Context())
	if err != nil {
		writeProblem(w, r, a.catalogProblem(r, "list topics", err))
		return
	}
	out := make([]topicJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, toTopicJSON(t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, map[string]any{"topics": out})
}

func (rs *topicsResource) get(w http.ResponseWriter, r *http.Request) {
	a := rs.a
	if !a.needCatalog(w, r) {
		return
	}
	name, p := topicParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	t, err := a.cat.Topic(r.Context(), name)
	if err != nil {
		writeProblem(w, r, a.catalogProblem(r, "get topic", err))
		return
	}
	writeJSON(w, http.StatusOK, toTopicJSON(t))
}

func (rs *topicsResource) delete(w http.ResponseWriter, r *http.Request) {
	a := rs.a
	if !a.needCatalog(w, r) {
		return
	}
	name, p := topicParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	err := a.cat.DeleteTopic(r.Context(), name)
	a.topics.invalidate(name)
	if err != nil {
		writeProblem(w, r, a.catalogProblem(r, "delete topic", err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type patchTopicRequest struct {
	Partitions json.RawMessage            `json:"partitions"`
	Configs    map[string]json.RawMessage `json:"configs"`
}

// patch grows the partition count and sets or (with null) removes configs. Each config
// is validated here so a bad one changes nothing; the catalog validates the result as a
// whole and refuses a shrinking partition count.
func (rs *topicsResource) patch(w http.ResponseWriter, r *http.Request) {
	a := rs.a
	if !a.needCatalog(w, r) {
		return
	}
	name, p := topicParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	body, p := readBody(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	var req patchTopicRequest
	if p := decodeStrict(body, &req); p != nil {
		writeProblem(w, r, p)
		return
	}
	var partitions int32 // 0: unchanged
	if !isNull(req.Partitions) {
		n, p := partitionCount(req.Partitions)
		if p != nil {
			writeProblem(w, r, p)
			return
		}
		partitions = n
	}
	known := catalog.ConfigKeys()
	configs := make(map[string]string, len(req.Configs))
	for k, raw := range req.Configs {
		v, null, p := configValue(k, raw)
		if p != nil {
			writeProblem(w, r, p)
			return
		}
		if null {
			if !slices.Contains(known, k) {
				writeProblem(w, r, newProblem(CodeInvalidConfig, "config %s: unknown config", k).with("config", k))
				return
			}
			configs[k] = "" // the catalog's spelling of "remove"
			continue
		}
		if _, err := catalog.ParseConfig(map[string]string{k: v}); err != nil {
			writeProblem(w, r, a.catalogProblem(r, "update topic", err))
			return
		}
		configs[k] = v
	}
	var t catalog.Topic
	var err error
	if partitions == 0 && len(configs) == 0 {
		t, err = a.cat.Topic(r.Context(), name) // nothing to change
	} else {
		t, err = a.cat.UpdateTopic(r.Context(), name, partitions, configs)
		a.topics.invalidate(name)
	}
	if err != nil {
		writeProblem(w, r, a.catalogProblem(r, "update topic", err))
		return
	}
	writeJSON(w, http.StatusOK, toTopicJSON(t))
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
	r := chi.NewRouter()
	r.Get("/", rs.list)
	r.Get("/{partition}/offsets", rs.offsetForTime)
	r.Get("/{partition}/records", rs.a.fetchOrTail)
	return r
}

type partitionJSON struct {
	Partition      int32 `json:"partition"`
	LogStartOffset int64 `json:"log_start_offset"`
	HighWatermark  int64 `json:"high_watermark"`
	Bytes          int64 `json:"bytes"`
}

func (rs *partitionsResource) list(w http.ResponseWriter, r *http.Request) {
	a := rs.a
	if !a.needCatalog(w, r) {
		return
	}
	name, p := topicParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	t, err := a.cat.Topic(r.Context(), name)
	if err != nil {
		writeProblem(w, r, a.catalogProblem(r, "list partitions", err))
		return
	}
	ps, err := a.cat.Partitions(r.Context(), t.ID)
	if err != nil {
		writeProblem(w, r, a.catalogProblem(r, "list partitions", err))
		return
	}
	out := make([]partitionJSON, 0, len(ps))
	for _, pi := range ps {
		out = append(out, partitionJSON{pi.Partition, pi.LogStartOffset, pi.HighWatermark, pi.Bytes})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	writeJSON(w, http.StatusOK, map[string]any{"partitions": out})
}

// offsetForTime answers the earliest offset whose timestamp is at or after ?timestamp=
// (unix ms or RFC 3339; "earliest" and "latest" name the log start and the high
// watermark), at the catalog's chunk granularity.
func (rs *partitionsResource) offsetForTime(w http.ResponseWriter, r *http.Request) {
	a := rs.a
	if !a.needCatalog(w, r) {
		return
	}
	ti, part, p := a.topicPartition(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	raw := r.URL.Query().Get("timestamp")
	var off int64
	switch raw {
	case "earliest", "latest":
		pi, p := a.partitionInfo(r, ti, part)
		if p != nil {
			writeProblem(w, r, p)
			return
		}
		off = pi.LogStartOffset
		if raw == "latest" {
			off = pi.HighWatermark
		}
	default:
		ts, ok := parseTime(raw)
		if !ok {
			writeProblem(w, r, newProblem(CodeInvalidTimestamp, "timestamp %q must be unix milliseconds, RFC 3339, earliest or latest", truncate(raw, 64)))
			return
		}
		var err error
		off, err = a.cat.OffsetForTime(r.Context(), ti.topic.ID, part, ts)
		if err != nil {
			writeProblem(w, r, a.catalogProblem(r, "offset for time", err))
			return
		}
	}
	writeJSONBytes(w, http.StatusOK, []byte(`{"offset":`+strconv.FormatInt(off, 10)+"}\n"))
}

// topicPartition resolves {topic} and {partition} through the topic cache. A partition
// beyond the cached count re-reads the topic first: it may have just grown.
func (a *API) topicPartition(r *http.Request) (topicInfo, int32, *problem) {
	name, p := topicParam(r)
	if p != nil {
		return topicInfo{}, 0, p
	}
	part, p := partitionParam(r)
	if p != nil {
		return topicInfo{}, 0, p
	}
	ti, err := a.topics.get(r.Context(), name)
	if err == nil && part >= ti.topic.Partitions {
		ti, err = a.topics.refresh(r.Context(), name)
	}
	if err != nil {
		return topicInfo{}, 0, a.catalogProblem(r, "get topic", err)
	}
	if part >= ti.topic.Partitions {
		return topicInfo{}, 0, partitionOutOfRange(name, part, ti.topic.Partitions)
	}
	return ti, part, nil
}

func partitionOutOfRange(topic string, part, count int32) *problem {
	return newProblem(CodePartitionOutOfRange, "topic %s has partitions 0 to %d; there is no partition %d", topic, count-1, part).
		with("partitions", count)
}

// partitionInfo reads one partition's state from the catalog.
func (a *API) partitionInfo(r *http.Request, ti topicInfo, part int32) (catalog.PartitionInfo, *problem) {
	ps, err := a.cat.Partitions(r.Context(), ti.topic.ID)
	if err != nil {
		return catalog.PartitionInfo{}, a.catalogProblem(r, "read partition", err)
	}
	for _, pi := range ps {
		if pi.Partition == part {
			return pi, nil
		}
	}
	return catalog.PartitionInfo{}, partitionOutOfRange(ti.topic.Name, part, ti.topic.Partitions)
}
