package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	v1 "github.com/strata-io/strata/api/v1"
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
		r.Get("/usage", a.serve(broker.CapTopics, rs.usage))
		r.Get("/table", a.serve(broker.CapTopics, rs.table))
		r.Mount("/partitions", (&partitionsResource{a}).Routes())
		r.Mount("/records", (&recordsResource{a}).Routes())
	})
	return r
}

// toTopic is a topic as the API shows it: Configs holds only the explicitly set keys
// (the rest take the documented defaults).
func toTopic(t catalog.Topic) v1.Topic {
	cfg := t.Configs
	if cfg == nil {
		cfg = map[string]string{}
	}
	return v1.Topic{Name: t.Name, ID: t.ID, Partitions: t.Partitions, Configs: cfg, CreatedAt: t.CreatedAt.UTC()}
}

// oneTopic is a topic with its effective configs.
func oneTopic(t catalog.Topic) v1.Topic {
	tj := toTopic(t)
	tj.EffectiveConfigs = map[string]string{}
	for _, c := range broker.EffectiveConfigs(t.Configs) {
		tj.EffectiveConfigs[c.Name] = c.Value
	}
	return tj
}

func (rs *topicsResource) create(w http.ResponseWriter, r *http.Request) *problem {
	a := rs.a
	req, p := decodeJSON[v1.CreateTopicRequest](r)
	if p != nil {
		return p
	}
	var partitions int32 // the core's default
	if req.Partitions != nil {
		if p := a.partitionCount(r, *req.Partitions); p != nil {
			return p
		}
		partitions = *req.Partitions
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
	writeJSON(w, http.StatusCreated, oneTopic(t))
	return nil
}

func (rs *topicsResource) list(w http.ResponseWriter, r *http.Request) *problem {
	ts, err := rs.a.core.Topics(r.Context(), principal(r))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := make([]v1.Topic, 0, len(ts))
	for _, t := range ts {
		out = append(out, toTopic(t))
	}
	writeJSON(w, http.StatusOK, v1.TopicList{Topics: out})
	return nil
}

func (rs *topicsResource) get(w http.ResponseWriter, r *http.Request) *problem {
	t, err := rs.a.core.Topic(r.Context(), principal(r), topicParam(r))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	writeJSON(w, http.StatusOK, oneTopic(t))
	return nil
}

func (rs *topicsResource) usage(w http.ResponseWriter, r *http.Request) *problem {
	u, err := rs.a.core.TopicUsage(r.Context(), principal(r), topicParam(r), r.URL.Query().Get("since"))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := v1.TopicUsage{
		Topic: u.Topic, Since: u.Since.UTC(), Until: u.Until.UTC(),
		BytesIn: u.BytesIn, BytesOut: u.BytesOut, RecordsIn: u.RecordsIn, RecordsOut: u.RecordsOut,
		PutRequests: u.PutRequests, GetRequests: u.GetRequests, CatalogCommits: u.Commits,
		StoredBytes: u.StoredBytes, EstimatedCostUSD: u.Cost.TotalUSD,
		Cost:       v1.UsageCost{PutUSD: u.Cost.PutUSD, GetUSD: u.Cost.GetUSD, CommitUSD: u.Cost.CommitUSD, StorageUSD: u.Cost.StorageUSD},
		Principals: make([]v1.PrincipalUsage, len(u.Principals)),
	}
	for i, p := range u.Principals {
		out.Principals[i] = v1.PrincipalUsage{Principal: p.Principal, BytesIn: p.BytesIn, BytesOut: p.BytesOut, RecordsIn: p.RecordsIn,
			RecordsOut: p.RecordsOut, PutRequests: p.PutRequests, GetRequests: p.GetRequests, CatalogCommits: p.Commits}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (rs *topicsResource) table(w http.ResponseWriter, r *http.Request) *problem {
	st, err := rs.a.core.TableStatus(r.Context(), principal(r), topicParam(r))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := v1.TableStatus{Topic: st.Topic, MetadataLocation: st.MetadataLocation, Lag: st.Lag(), Partitions: make([]v1.TablePartition, len(st.Partitions))}
	for i, p := range st.Partitions {
		out.Partitions[i] = v1.TablePartition{Partition: p.Partition, NextOffset: p.Next, LastStableOffset: p.Stable, Lag: p.Lag()}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (rs *topicsResource) delete(w http.ResponseWriter, r *http.Request) *problem {
	if err := rs.a.core.DeleteTopic(r.Context(), principal(r), topicParam(r)); err != nil {
		return rs.a.problemFor(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// patch grows the partition count and sets or (with null) removes configs; the core
// checks each config and the result.
func (rs *topicsResource) patch(w http.ResponseWriter, r *http.Request) *problem {
	name := topicParam(r)
	req, p := decodeJSON[v1.UpdateTopicRequest](r)
	if p != nil {
		return p
	}
	var u broker.TopicUpdate // Partitions 0: unchanged
	if req.Partitions != nil {
		if p := rs.a.partitionCount(r, *req.Partitions); p != nil {
			return p
		}
		u.Partitions = *req.Partitions
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
	writeJSON(w, http.StatusOK, oneTopic(t))
	return nil
}

// partitionCount checks a partition count the caller gave explicitly, by the core's
// rule: given, even 0 is refused (absent takes the default; see
// broker.CheckPartitionCount).
func (a *API) partitionCount(r *http.Request, n int32) *problem {
	if err := broker.CheckPartitionCount(n); err != nil {
		return a.problemFor(r, err)
	}
	return nil
}

// configValue reads one config value. Kafka configs are strings; numbers and booleans
// are taken as their JSON text for convenience ("retention.ms": 86400000).
func configValue(key string, v v1.ConfigValue) (text string, null bool, p *problem) {
	text, null, err := v.Text()
	switch {
	case err != nil:
		return "", false, newProblem(CodeInvalidConfig, "config %s: %v", key, err).with("config", key)
	case !null && text == "" && len(v) > 0 && v[0] == '"':
		return "", false, newProblem(CodeInvalidConfig, "config %s: empty value; use null to remove a config", key).with("config", key)
	}
	return text, null, nil
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

func toPartition(pi catalog.PartitionInfo) v1.Partition {
	return v1.Partition{Partition: pi.Partition, LogStartOffset: pi.LogStartOffset, HighWatermark: pi.HighWatermark,
		LastStableOffset: pi.LastStableOffset, Bytes: pi.Bytes}
}

func (rs *partitionsResource) list(w http.ResponseWriter, r *http.Request) *problem {
	ps, err := rs.a.core.Partitions(r.Context(), principal(r), topicParam(r))
	if err != nil {
		return rs.a.problemFor(r, err)
	}
	out := make([]v1.Partition, 0, len(ps))
	for _, pi := range ps {
		out = append(out, toPartition(pi))
	}
	writeJSON(w, http.StatusOK, v1.PartitionList{Partitions: out})
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
	name := topicParam(r)
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
