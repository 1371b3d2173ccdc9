package catalog

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Config is a topic's effective configuration: its explicit configs over the defaults.
type Config struct {
	CleanupPolicy        string // "delete", "compact" or "compact,delete"
	RetentionMs          int64  // -1: infinite
	RetentionBytes       int64  // per partition; -1: infinite
	DeleteRetentionMs    int64  // how long tombstones survive key compaction
	TimestampType        string // "CreateTime" or "LogAppendTime"
	TimestampBeforeMaxMs int64  // how far in the past a CreateTime may be
	TimestampAfterMaxMs  int64  // how far in the future a CreateTime may be
	KeyFormat            string // "string", "json" or "binary"
	ValueFormat          string // "json", "string" or "binary"
	SegmentBytes         int64  // compactor's target object size per partition
	MaxMessageBytes      int64  // largest record (key + value + headers) accepted
	// Schema validation (Confluent's names): records must carry the framing of a
	// schema registered under the subject the strategy names, and decode against it.
	KeySchemaValidation, ValueSchemaValidation bool
	// KeySubjectStrategy and ValueSubjectStrategy: "topic", "record" or "topic-record"
	// (Confluent's class names are accepted and stored as given).
	KeySubjectStrategy, ValueSubjectStrategy string
	// IcebergEnabled makes the topic also an Iceberg table in its bucket, kept by the
	// tables role (package tables); IcebergCommitIntervalMs is how often it commits a
	// snapshot, so how far the table lags the topic under load.
	IcebergEnabled bool
	// DLQGroupEnable (errors.deadletterqueue.group.enable, KIP-1191) lets share groups
	// name the topic as their dead-letter topic: without it no reader may route
	// records into it.
	DLQGroupEnable          bool
	IcebergCommitIntervalMs int64
	// IcebergRetention says whether the table follows the topic's retention: "keep"
	// (the table keeps every row it was given) or "follow" (table maintenance deletes
	// the rows below each partition's log start offset).
	IcebergRetention string
}

type configKey struct {
	def   string
	parse func(c *Config, v string) error
}

func intIn(min, max int64, set func(*Config, int64)) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		if n < min || n > max {
			if min == -1 {
				return fmt.Errorf("must be -1 (infinite) or between 0 and %d", max)
			}
			return fmt.Errorf("must be between %d and %d", min, max)
		}
		set(c, n)
		return nil
	}
}

func oneOf(choices []string, set func(*Config, string)) func(*Config, string) error {
	return func(c *Config, v string) error {
		for _, ch := range choices {
			if v == ch {
				set(c, v)
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(choices, ", "))
	}
}

var formats = []string{"json", "string", "binary"}

// subjectStrategies maps the subject name strategies, by their short names and
// Confluent's class names, to the short names.
var subjectStrategies = map[string]string{
	"topic": "topic", "record": "record", "topic-record": "topic-record",
	"io.confluent.kafka.serializers.subject.TopicNameStrategy":       "topic",
	"io.confluent.kafka.serializers.subject.RecordNameStrategy":      "record",
	"io.confluent.kafka.serializers.subject.TopicRecordNameStrategy": "topic-record",
}

func strategy(set func(*Config, string)) func(*Config, string) error {
	return func(c *Config, v string) error {
		s, ok := subjectStrategies[v]
		if !ok {
			return fmt.Errorf("must be topic, record or topic-record (or Confluent's TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy class name)")
		}
		set(c, s)
		return nil
	}
}

func boolean(set func(*Config, bool)) func(*Config, string) error {
	return func(c *Config, v string) error {
		switch v {
		case "true":
			set(c, true)
		case "false":
			set(c, false)
		default:
			return fmt.Errorf("must be true or false")
		}
		return nil
	}
}

// configKeys are the supported topic configs with their defaults. The timestamp bounds
// default to one day into the future and unbounded into the past: a producer clock far
// ahead must not pin data against time retention forever.
var configKeys = map[string]configKey{
	"cleanup.policy":                        {"delete", oneOf([]string{"delete", "compact", "compact,delete"}, func(c *Config, v string) { c.CleanupPolicy = v })},
	"retention.ms":                          {"604800000", intIn(-1, math.MaxInt64, func(c *Config, n int64) { c.RetentionMs = n })},
	"retention.bytes":                       {"-1", intIn(-1, math.MaxInt64, func(c *Config, n int64) { c.RetentionBytes = n })},
	"delete.retention.ms":                   {"86400000", intIn(0, math.MaxInt64, func(c *Config, n int64) { c.DeleteRetentionMs = n })},
	"message.timestamp.type":                {"CreateTime", oneOf([]string{"CreateTime", "LogAppendTime"}, func(c *Config, v string) { c.TimestampType = v })},
	"message.timestamp.before.max.ms":       {strconv.FormatInt(math.MaxInt64, 10), intIn(0, math.MaxInt64, func(c *Config, n int64) { c.TimestampBeforeMaxMs = n })},
	"message.timestamp.after.max.ms":        {"86400000", intIn(0, math.MaxInt64, func(c *Config, n int64) { c.TimestampAfterMaxMs = n })},
	"key.format":                            {"string", oneOf(formats, func(c *Config, v string) { c.KeyFormat = v })},
	"value.format":                          {"json", oneOf(formats, func(c *Config, v string) { c.ValueFormat = v })},
	"segment.bytes":                         {"67108864", intIn(1<<20, 1<<30, func(c *Config, n int64) { c.SegmentBytes = n })},
	"max.message.bytes":                     {"1048576", intIn(1, 64<<20, func(c *Config, n int64) { c.MaxMessageBytes = n })},
	"confluent.key.schema.validation":       {"false", boolean(func(c *Config, v bool) { c.KeySchemaValidation = v })},
	"confluent.value.schema.validation":     {"false", boolean(func(c *Config, v bool) { c.ValueSchemaValidation = v })},
	"confluent.key.subject.name.strategy":   {"topic", strategy(func(c *Config, v string) { c.KeySubjectStrategy = v })},
	"confluent.value.subject.name.strategy": {"topic", strategy(func(c *Config, v string) { c.ValueSubjectStrategy = v })},
	"iceberg.enabled":                       {"false", boolean(func(c *Config, v bool) { c.IcebergEnabled = v })},
	"errors.deadletterqueue.group.enable":   {"false", boolean(func(c *Config, v bool) { c.DLQGroupEnable = v })},
	"iceberg.commit.interval.ms":            {"60000", intIn(100, 24*60*60*1000, func(c *Config, n int64) { c.IcebergCommitIntervalMs = n })},
	"iceberg.retention":                     {"keep", oneOf([]string{"keep", "follow"}, func(c *Config, v string) { c.IcebergRetention = v })},
}

// ConfigKeys lists the supported config names, sorted.
func ConfigKeys() []string {
	keys := make([]string, 0, len(configKeys))
	for k := range configKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ConfigDefault returns a supported config's default value; ok is false for an unknown
// name.
func ConfigDefault(name string) (v string, ok bool) {
	ck, ok := configKeys[name]
	return ck.def, ok
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	c, _ := ParseConfig(nil)
	return c
}

// ParseConfig validates explicit configs and returns the effective configuration. An
// unknown key or a bad value is a *ConfigError.
func ParseConfig(explicit map[string]string) (Config, error) {
	var c Config
	for k, ck := range configKeys {
		if err := ck.parse(&c, ck.def); err != nil {
			panic(fmt.Sprintf("catalog: default for %s: %v", k, err))
		}
	}
	// Sorted so the first error reported is stable.
	keys := make([]string, 0, len(explicit))
	for k := range explicit {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ck, ok := configKeys[k]
		if !ok {
			return Config{}, &ConfigError{Key: k, Value: explicit[k], Reason: "unknown config (supported: " + strings.Join(ConfigKeys(), ", ") + ")"}
		}
		if err := ck.parse(&c, explicit[k]); err != nil {
			return Config{}, &ConfigError{Key: k, Value: explicit[k], Reason: err.Error()}
		}
	}
	return c, nil
}

// DefaultMaxTimestampAfterMs is the largest message.timestamp.after.max.ms a topic may
// set unless the operator allows more (Options.MaxTimestampAfterMs): one day. Time
// retention no longer trusts record times (CompactionChunk.RetentionTime), but
// tombstone expiry and time lookups still do, so a far-future allowance is the
// operator's decision — Kafka's alter-configs permission, until ACLs exist.
const DefaultMaxTimestampAfterMs = 24 * 60 * 60 * 1000

// CheckConfigLimits refuses explicit settings beyond what the operator allows (a
// *ConfigError): message.timestamp.after.max.ms above limitMs (negative: no limit).
// set holds the configs being set, so a value allowed when it was set stays valid if
// the limit drops.
func CheckConfigLimits(set map[string]string, limitMs int64) error {
	const key = "message.timestamp.after.max.ms"
	v, ok := set[key]
	if !ok || v == "" || limitMs < 0 {
		return nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > limitMs {
		return &ConfigError{Key: key, Value: v, Reason: fmt.Sprintf(
			"above %d needs the operator's permission: the server's --max-timestamp-after-ms (default one day)", limitMs)}
	}
	return nil
}

// MaxPartitions bounds a topic's partition count.
const MaxPartitions = 10000

// maxName bounds a topic's or a group's name, as Kafka bounds a topic's.
const maxName = 249

// validName is the one rule for the names of topics and consumer groups (which travel
// in URL paths and command lines unescaped): Kafka's topic rule, 1 to 249 characters
// of [a-zA-Z0-9._-], not "." or "..". ValidateTopicName and ValidateGroupName apply it,
// each with its own sentinel error.
func validName(name string) bool {
	if name == "" || len(name) > maxName || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// ValidateTopicName applies the name rule (validName) to a topic's name.
func ValidateTopicName(name string) error {
	if !validName(name) {
		return fmt.Errorf("%w: %q: use 1-%d characters from a-z, A-Z, 0-9, '.', '_', '-' (not \".\" or \"..\")", ErrInvalidTopicName, truncate(name, 64), maxName)
	}
	return nil
}

// ValidatePartitions checks a partition count.
func ValidatePartitions(n int32) error {
	if n < 1 || n > MaxPartitions {
		return fmt.Errorf("%w: %d: a topic has 1 to %d partitions", ErrInvalidPartitions, n, MaxPartitions)
	}
	return nil
}

// PartitionsOnlyGrow is the refusal of a partition count below a topic's current one,
// worded the same by every backend.
func PartitionsOnlyGrow(name string, have, asked int32) error {
	return fmt.Errorf("%w: topic %q has %d partitions, not %d: partitions only grow, so ask for more than %d",
		ErrInvalidPartitions, name, have, asked, have)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// UpdateConfigs applies an update to a topic's explicit configs — a non-empty value sets
// a key, an empty one removes it — and validates the result as a whole. The current map
// is not modified. Removing an unknown key is a *ConfigError like setting one.
func UpdateConfigs(current, update map[string]string) (map[string]string, Config, error) {
	merged := make(map[string]string, len(current)+len(update))
	for k, v := range current {
		merged[k] = v
	}
	for k, v := range update {
		if v != "" {
			merged[k] = v
			continue
		}
		if _, ok := configKeys[k]; !ok {
			return nil, Config{}, &ConfigError{Key: k, Value: v, Reason: "unknown config (supported: " + strings.Join(ConfigKeys(), ", ") + ")"}
		}
		delete(merged, k)
	}
	c, err := ParseConfig(merged)
	if err != nil {
		return nil, Config{}, err
	}
	return merged, c, nil
}
