package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
)

// Topic is a topic as the server describes it: Configs holds the explicitly set
// configs; EffectiveConfigs, when the server sends them, every config with defaults
// filled in.
type Topic = v1.Topic

// Partition is one partition's state.
type Partition = v1.Partition

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
	in := v1.CreateTopicRequest{Name: name}
	if partitions > 0 {
		in.Partitions = &partitions
	}
	if len(configs) > 0 {
		in.Configs = make(map[string]v1.ConfigValue, len(configs))
		for k, v := range configs {
			in.Configs[k] = v1.ConfigString(v)
		}
	}
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

// TopicUsage is what a topic used over a window and its estimated monthly cost.
type TopicUsage = v1.TopicUsage

// TopicUsage answers a topic's usage since since: a duration back from now ("15m",
// "24h") or an RFC 3339 time; "" is the server's default, the last hour. It needs
// describe on the topic.
func (c *Client) TopicUsage(ctx context.Context, topic, since string) (TopicUsage, error) {
	var q url.Values
	if since != "" {
		q = url.Values{"since": {since}}
	}
	var u TopicUsage
	err := c.do(ctx, "usage of topic "+topic, http.MethodGet, q, nil, &u, "v1", "topics", topic, "usage")
	return u, err
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
	var in v1.UpdateTopicRequest
	if a.Partitions > 0 {
		in.Partitions = &a.Partitions
	}
	if n := len(a.Configs) + len(a.DeleteConfigs); n > 0 {
		in.Configs = make(map[string]v1.ConfigValue, n)
		for k, v := range a.Configs {
			in.Configs[k] = v1.ConfigString(v)
		}
		for _, k := range a.DeleteConfigs {
			in.Configs[k] = v1.NullConfig
		}
	}
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
	var out v1.OffsetAnswer
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
