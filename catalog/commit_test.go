package catalog

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestOptionsWithDefaults(t *testing.T) {
	o := Options{}.WithDefaults()
	if o.CommitTimeout != 30*time.Second || o.Logger == nil {
		t.Fatalf("defaults = %+v", o)
	}
	if o := (Options{CommitTimeout: time.Minute}).WithDefaults(); o.CommitTimeout != time.Minute {
		t.Fatalf("CommitTimeout overridden: %s", o.CommitTimeout)
	}
}

func TestUpdateConfigs(t *testing.T) {
	cur := map[string]string{"retention.ms": "1000", "key.format": "json"}
	for _, tc := range []struct {
		name   string
		update map[string]string
		want   map[string]string // nil: error
	}{
		{"nothing", nil, map[string]string{"retention.ms": "1000", "key.format": "json"}},
		{"set and remove", map[string]string{"retention.ms": "", "cleanup.policy": "compact"},
			map[string]string{"key.format": "json", "cleanup.policy": "compact"}},
		{"remove an unset key", map[string]string{"retention.bytes": ""}, map[string]string{"retention.ms": "1000", "key.format": "json"}},
		{"remove an unknown key", map[string]string{"bogus": ""}, nil},
		{"set an unknown key", map[string]string{"bogus": "1"}, nil},
		{"bad value", map[string]string{"retention.ms": "soon"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := UpdateConfigs(cur, tc.update)
			if tc.want == nil {
				var ce *ConfigError
				if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("UpdateConfigs = %v, %v; want a *ConfigError", got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("UpdateConfigs = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if len(cur) != 2 || cur["retention.ms"] != "1000" {
		t.Fatalf("current configs modified: %v", cur)
	}
}
