package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Topic is a topic as the server describes it.
type Topic struct {
	Name       string `json:"name"`
	ID         int64  `json:"id,omitempty"`
	Partitions int32  `json:"partitions"`
	// Configs holds the explicitly set configs.
	Configs map[string]string `json:"configs,omitempty"`
	// EffectiveConfigs, when the server sends them, holds every config with defaults
	// filled in.
	EffectiveConfigs map[string]string `json:"effective_configs,omitempty"`
	CreatedAt        time.Time         `json:"created_at,omitzero"`
}

// Partition is one partition's state.
type Partition struct {
	Partition      int32 `json:"partition"`
	LogStartOffset int64 `json:"log_start_offset"`
	HighWatermark  int64 `json:"high_watermark"`
	// LastStableOffset is where read_committed readers stop: the first offset of the
	// partition's earliest open Kafka transaction, or the high watermark.
	LastStableOffset int64 `json:"last_stable_offset"`
	Bytes            int64 `json:"bytes,omitempty"`
}

// TopicAlter changes a topic. Zero fields change nothing.
type TopicAlter struct {
	// Partitions grows the partition count; 0 leaves it. Partitions never shrink.
	Partitions int32
	// Configs sets these configs.
	Configs map[string]string
	// DeleteConfigs removes these explicit configs, back to their defaults.
	DeleteConfigs []string
}

// CreateTopic creates a topic with partitions partitions (0: the server's default) and
// explicit configs (nil: all defaults).
func (c *Client) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (Topic, error) {
	in := struct {
		Name       string            `json:"name"`
		Partitions int32             `json:"partitions,omitempty"`
		Configs    map[string]string `json:"configs,omitempty"`
	}{name, partitions, configs}
	var t Topic
	err := c.do(ctx, "create topic "+name, http.MethodPost, nil, in, &t, "v1", "topics")
	return t, err
}

// ListTopics lists every topic, sorted by name as the server returns them.
func (c *Client) ListTopics(ctx context.Context) ([]Topic, error) {
	var out listOf[Topic]
	out.field = "topics"
	err := c.do(ctx, "list topics", http.MethodGet, nil, nil, &out, "v1", "topics")
	return out.items, err
}

// Topic describes one topic.
func (c *Client) Topic(ctx context.Context, name string) (Topic, error) {
	var t Topic
	err := c.do(ctx, "describe topic "+name, http.MethodGet, nil, nil, &t, "v1", "topics", name)
	return t, err
}

// DeleteTopic deletes a topic and, eventually, its data. A topic created later under the
// same name never sees the old data.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.do(ctx, "delete topic "+name, http.MethodDelete, nil, nil, nil, "v1", "topics", name)
}

// AlterTopic grows the partition count and sets or removes configs, as one change that
// the server validates as a whole.
func (c *Client) AlterTopic(ctx context.Context, name string, a TopicAlter) (Topic, error) {
	// A JSON merge patch (RFC 7396): null removes a key.
	configs := make(map[string]*string, len(a.Configs)+len(a.DeleteConfigs))
	for k, v := range a.Configs {
		configs[k] = &v
	}
	for _, k := range a.DeleteConfigs {
		configs[k] = nil
	}
	in := struct {
		Partitions int32              `json:"partitions,omitempty"`
		Configs    map[string]*string `json:"configs,omitempty"`
	}{a.Partitions, configs}
	var t Topic
	err := c.do(ctx, "alter topic "+name, http.MethodPatch, nil, in, &t, "v1", "topics", name)
	return t, err
}

// Partitions returns every partition's log start offset and high watermark.
func (c *Client) Partitions(ctx context.Context, topic string) ([]Partition, error) {
	var out listOf[Partition]
	out.field = "partitions"
	err := c.do(ctx, "list partitions of "+topic, http.MethodGet, nil, nil, &out, "v1", "topics", topic, "partitions")
	return out.items, err
}

// OffsetForTime returns the earliest offset of a partition whose record timestamp is at or
// after ts (at the server's chunk granularity), or the high watermark when there is none.
func (c *Client) OffsetForTime(ctx context.Context, topic string, partition int32, ts time.Time) (int64, error) {
	q := url.Values{"timestamp": {strconv.FormatInt(ts.UnixMilli(), 10)}}
	var out struct {
		Offset *int64 `json:"offset"`
	}
	p := strconv.Itoa(int(partition))
	if err := c.do(ctx, "offset for time in "+topic+"/"+p, http.MethodGet, q, nil, &out, "v1", "topics", topic, "partitions", p, "offsets"); err != nil {
		return 0, err
	}
	if out.Offset == nil {
		return 0, &Error{Status: http.StatusOK, Detail: "offset for time in " + topic + "/" + p + ": answer has no offset"}
	}
	return *out.Offset, nil
}

// listOf decodes either a bare JSON array or an object holding the array under field,
// so the client reads both shapes a list endpoint may take.
type listOf[T any] struct {
	field string
	items []T
}

func (l *listOf[T]) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '[' {
		return json.Unmarshal(b, &l.items)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	raw, ok := m[l.field]
	if !ok {
		return nil
	}
	return json.Unmarshal(raw, &l.items)
}
