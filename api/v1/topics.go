package v1

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
)

// Topic is a topic as the server answers it (POST, GET and PATCH /v1/topics/{topic},
// and in TopicList).
type Topic struct {
	Name string `json:"name"`
	// ID is immutable: a topic recreated under the same name gets a new one.
	ID         int64 `json:"id"`
	Partitions int32 `json:"partitions"`
	// Configs holds the explicitly set configs only; the rest take their defaults.
	Configs map[string]string `json:"configs"`
	// EffectiveConfigs is every config with the value in force, defaults included: in
	// the answers about one topic, not in the list.
	EffectiveConfigs map[string]string `json:"effective_configs,omitempty"`
	CreatedAt        time.Time         `json:"created_at"`
}

// TopicList answers GET /v1/topics.
type TopicList struct {
	Topics []Topic `json:"topics"`
}

// CreateTopicRequest is POST /v1/topics.
type CreateTopicRequest struct {
	Name string `json:"name"`
	// Partitions is the partition count; absent: the server's default (1).
	Partitions *int32 `json:"partitions,omitempty"`
	// Configs are the explicit configs; the rest take their defaults.
	Configs map[string]ConfigValue `json:"configs,omitempty"`
}

// UpdateTopicRequest is PATCH /v1/topics/{topic}, a JSON merge patch (RFC 7396).
type UpdateTopicRequest struct {
	// Partitions is the new partition count: it may only grow. Absent: unchanged.
	Partitions *int32 `json:"partitions,omitempty"`
	// Configs are set; a null value (NullConfig) removes one, back to its default.
	Configs map[string]ConfigValue `json:"configs,omitempty"`
}

// ConfigValue is one config's value in a request, as it was sent: a JSON string, or a
// number or boolean standing for its text ("retention.ms": 86400000); in an
// UpdateTopicRequest, null (NullConfig) removes the config. ConfigString makes one;
// Text reads one.
type ConfigValue []byte

// NullConfig removes a config in an UpdateTopicRequest.
var NullConfig = ConfigValue("null")

// ConfigString is the config value s, as a JSON string.
func ConfigString(s string) ConfigValue {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// MarshalJSON writes the value as it is; an empty one is null.
func (v ConfigValue) MarshalJSON() ([]byte, error) {
	if len(v) == 0 {
		return []byte("null"), nil
	}
	return v, nil
}

// UnmarshalJSON keeps the value as it came (Text reads it).
func (v *ConfigValue) UnmarshalJSON(b []byte) error {
	*v = append((*v)[:0], b...)
	return nil
}

// ErrConfigValue is Text's answer for a value that is not a string, number or boolean.
var ErrConfigValue = errors.New("a config value must be a string, number or boolean")

// Text is the config text v stands for: a string's contents, a number's or boolean's
// JSON text. null reports null (removal) with no text.
func (v ConfigValue) Text() (text string, null bool, err error) {
	b := bytes.TrimSpace(v)
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		return "", true, nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return "", false, err
		}
		return s, false, nil
	case b[0] == 't' || b[0] == 'f' || b[0] == '-' || b[0] >= '0' && b[0] <= '9':
		return string(b), false, nil
	}
	return "", false, ErrConfigValue
}

// Partition is one partition's state (in PartitionList, and the answer of a records
// delete).
type Partition struct {
	Partition      int32 `json:"partition"`
	LogStartOffset int64 `json:"log_start_offset"`
	// HighWatermark is the next offset to be assigned.
	HighWatermark int64 `json:"high_watermark"`
	// LastStableOffset is where read_committed readers stop: the first offset of the
	// partition's earliest open Kafka transaction, or the high watermark.
	LastStableOffset int64 `json:"last_stable_offset"`
	Bytes            int64 `json:"bytes"`
}

// PartitionList answers GET /v1/topics/{topic}/partitions.
type PartitionList struct {
	Partitions []Partition `json:"partitions"`
}

// OffsetAnswer answers GET /v1/topics/{topic}/partitions/{partition}/offsets: the
// earliest offset at or after the timestamp asked for. It is always present; nil only
// in an answer that is not the server's.
type OffsetAnswer struct {
	Offset *int64 `json:"offset"`
}

// DeleteRecordsRequest is POST .../partitions/{partition}/records:delete; the answer
// is the Partition after it.
type DeleteRecordsRequest struct {
	// BeforeOffset: every record below it is deleted; -1 is the high watermark.
	BeforeOffset *int64 `json:"before_offset"`
}

// TopicUsage answers GET /v1/topics/{topic}/usage: what the topic used from Since (the
// start of the minute bucket ?since= falls in; default an hour ago) to Until, every
// node's written counts plus the answering node's unwritten ones, and what that costs a
// month at the node's list prices (the README's cost model). PutRequests and
// GetRequests are fractional: a segment PUT holding several topics is attributed by
// each one's byte share.
type TopicUsage struct {
	Topic          string    `json:"topic"`
	Since          time.Time `json:"since"`
	Until          time.Time `json:"until"`
	BytesIn        int64     `json:"bytes_in"`
	BytesOut       int64     `json:"bytes_out"`
	RecordsIn      int64     `json:"records_in"`
	RecordsOut     int64     `json:"records_out"`
	PutRequests    float64   `json:"put_requests"`
	GetRequests    float64   `json:"get_requests"`
	CatalogCommits float64   `json:"catalog_commits"`
	// StoredBytes is what the topic keeps now (its chunks at or above the log start).
	StoredBytes int64 `json:"stored_bytes"`
	// EstimatedCostUSD is Cost's total: a month at the window's request rates, plus a
	// month of the stored bytes.
	EstimatedCostUSD float64   `json:"estimated_cost_usd"`
	Cost             UsageCost `json:"cost"`
	// Principals splits the counts by who caused them; "" holds anonymous requests and
	// the GETs, which are made for whoever reads first (a GET is split among the topics
	// whose batches it read, by bytes).
	Principals []PrincipalUsage `json:"principals"`
}

// UsageCost is TopicUsage's monthly estimate by item, in USD.
type UsageCost struct {
	PutUSD     float64 `json:"put_usd"`
	GetUSD     float64 `json:"get_usd"`
	CommitUSD  float64 `json:"commit_usd"`
	StorageUSD float64 `json:"storage_usd"`
}

// PrincipalUsage is one principal's part of a TopicUsage.
type PrincipalUsage struct {
	Principal      string  `json:"principal"`
	BytesIn        int64   `json:"bytes_in"`
	BytesOut       int64   `json:"bytes_out"`
	RecordsIn      int64   `json:"records_in"`
	RecordsOut     int64   `json:"records_out"`
	PutRequests    float64 `json:"put_requests"`
	GetRequests    float64 `json:"get_requests"`
	CatalogCommits float64 `json:"catalog_commits"`
}

// TableStatus answers GET /v1/topics/{topic}/table: how far a table topic's Iceberg
// table has come (README.md "Table topics"). Its snapshots, files and bytes are the
// table's own, in its metadata (the Iceberg REST catalog at /iceberg).
type TableStatus struct {
	Topic string `json:"topic"`
	// MetadataLocation is the current metadata file, "" before the first commit.
	MetadataLocation string `json:"metadata_location"`
	// Lag is the offsets committed to the topic and not yet in the table, summed over
	// the partitions.
	Lag        int64            `json:"lag"`
	Partitions []TablePartition `json:"partitions"`
}

// TablePartition is one partition of a TableStatus: the table holds its offsets below
// NextOffset; the tables role converts up to LastStableOffset (committed records).
type TablePartition struct {
	Partition        int32 `json:"partition"`
	NextOffset       int64 `json:"next_offset"`
	LastStableOffset int64 `json:"last_stable_offset"`
	Lag              int64 `json:"lag"`
}
