package catalog

import (
	"errors"
	"testing"
)

func TestNewLogStart(t *testing.T) {
	p := PartitionInfo{TopicID: 1, Partition: 0, LogStartOffset: 10, HighWatermark: 50}
	for _, tc := range []struct {
		offset, want int64
		err          error
	}{
		{20, 20, nil},
		{50, 50, nil}, // everything
		{10, 10, nil}, // no change
		{3, 10, nil},  // never backwards
		{0, 10, nil},
		{51, 10, ErrOffsetOutOfRange},
		{-1, 10, ErrOffsetOutOfRange},
	} {
		got, err := NewLogStart(p, tc.offset)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("NewLogStart(%d) = %d, %v; want %d, %v", tc.offset, got, err, tc.want, tc.err)
		}
	}
}

// Retention judges a row by its records' time clamped to their append time.
func TestRetentionTime(t *testing.T) {
	for _, tc := range []struct {
		maxTS, appended, want int64
	}{
		{1000, 2000, 1000},            // honest clocks: the records' time (old data goes early, as in Kafka)
		{3000, 2000, 2000},            // a clock ahead: no later than the append
		{253402300799000, 2000, 2000}, // year 9999
		{NoTimestamp, 2000, 2000},     // no timestamps: the append
		{2000, 2000, 2000},
	} {
		c := CompactionChunk{Chunk: Chunk{MaxTimestamp: tc.maxTS}, AppendTime: tc.appended}
		if got := c.RetentionTime(); got != tc.want {
			t.Errorf("max timestamp %d appended at %d: retention time %d, want %d", tc.maxTS, tc.appended, got, tc.want)
		}
	}
}

func TestCheckConfigLimits(t *testing.T) {
	const key = "message.timestamp.after.max.ms"
	for _, tc := range []struct {
		set   map[string]string
		limit int64
		ok    bool
	}{
		{nil, DefaultMaxTimestampAfterMs, true},
		{map[string]string{"retention.ms": "1"}, DefaultMaxTimestampAfterMs, true},
		{map[string]string{key: "86400000"}, DefaultMaxTimestampAfterMs, true},
		{map[string]string{key: "86400001"}, DefaultMaxTimestampAfterMs, false},
		{map[string]string{key: "9223372036854775807"}, DefaultMaxTimestampAfterMs, false},
		{map[string]string{key: "9223372036854775807"}, -1, true}, // the operator lifted the limit
		{map[string]string{key: "3600001"}, 3600000, false},
		{map[string]string{key: ""}, 1, true}, // removing it (back to the default)
	} {
		err := CheckConfigLimits(tc.set, tc.limit)
		var ce *ConfigError
		if tc.ok != (err == nil) || (err != nil && (!errors.As(err, &ce) || ce.Key != key || !errors.Is(err, ErrInvalidConfig))) {
			t.Errorf("%v with limit %d: %v", tc.set, tc.limit, err)
		}
	}
}
