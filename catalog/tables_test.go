package catalog

import (
	"errors"
	"testing"
	"time"
)

func TestIcebergConfigs(t *testing.T) {
	c := DefaultConfig()
	if c.IcebergEnabled || c.IcebergCommitIntervalMs != 60000 || c.IcebergRetention != "keep" {
		t.Fatalf("defaults: enabled %v interval %d retention %q, want false, 60000, keep", c.IcebergEnabled, c.IcebergCommitIntervalMs, c.IcebergRetention)
	}
	c, err := ParseConfig(map[string]string{"iceberg.enabled": "true", "iceberg.commit.interval.ms": "5000", "iceberg.retention": "follow"})
	if err != nil || !c.IcebergEnabled || c.IcebergCommitIntervalMs != 5000 || c.IcebergRetention != "follow" {
		t.Fatalf("set: %+v %v", c, err)
	}
	for _, bad := range []map[string]string{
		{"iceberg.enabled": "yes"},
		{"iceberg.enabled": "TRUE"},
		{"iceberg.commit.interval.ms": "0"},
		{"iceberg.commit.interval.ms": "soon"},
		{"iceberg.retention": "forever"},
	} {
		var ce *ConfigError
		if _, err := ParseConfig(bad); !errors.As(err, &ce) {
			t.Errorf("ParseConfig(%v) = %v, want a *ConfigError", bad, err)
		}
	}
}

// TestParseISODuration: Java's Duration.parse forms Kafka's by_duration takes, and
// what it refuses.
func TestParseISODuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT1H": time.Hour, "P1D": 24 * time.Hour, "P1DT12H30M": 36*time.Hour + 30*time.Minute,
		"PT0.5S": 500 * time.Millisecond, "pt15m": 15 * time.Minute, "P2DT3S": 48*time.Hour + 3*time.Second,
	} {
		if got, err := ParseISODuration(in); err != nil || got != want {
			t.Errorf("ParseISODuration(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "P", "PT", "1H", "PT1D", "P1H", "P1.5D", "PT-1H", "PT0S", "P1DT", "PTH", "P1W", "PT1H1H2", "PT1H1H", "PT1M1H"} {
		if got, err := ParseISODuration(in); err == nil {
			t.Errorf("ParseISODuration(%q) = %s, want an error", in, got)
		}
	}
	if err := ValidateShareGroupConfigs(map[string]string{ShareAutoOffsetReset: "by_duration:soon"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("by_duration:soon: %v, want ErrInvalidConfig", err)
	}
	if s := ParseShareSettings(map[string]string{ShareAutoOffsetReset: "by_duration:PT2H"}); s.ResetBefore != 2*time.Hour || s.ResetEarliest {
		t.Errorf("by_duration:PT2H reads as %+v", s)
	}
}
