package catalog

import (
	"errors"
	"testing"
)

func TestIcebergConfigs(t *testing.T) {
	c := DefaultConfig()
	if c.IcebergEnabled || c.IcebergCommitIntervalMs != 60000 {
		t.Fatalf("defaults: enabled %v interval %d, want false and 60000", c.IcebergEnabled, c.IcebergCommitIntervalMs)
	}
	c, err := ParseConfig(map[string]string{"iceberg.enabled": "true", "iceberg.commit.interval.ms": "5000"})
	if err != nil || !c.IcebergEnabled || c.IcebergCommitIntervalMs != 5000 {
		t.Fatalf("set: %+v %v", c, err)
	}
	for _, bad := range []map[string]string{
		{"iceberg.enabled": "yes"},
		{"iceberg.enabled": "TRUE"},
		{"iceberg.commit.interval.ms": "0"},
		{"iceberg.commit.interval.ms": "soon"},
	} {
		var ce *ConfigError
		if _, err := ParseConfig(bad); !errors.As(err, &ce) {
			t.Errorf("ParseConfig(%v) = %v, want a *ConfigError", bad, err)
		}
	}
}
