package catalog

import (
	"errors"
	"testing"
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
