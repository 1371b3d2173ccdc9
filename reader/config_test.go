package reader

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string // "" valid; else a fragment of the message
	}{
		{Config{}, ""},
		{Config{CacheBytes: 8 << 10, BlockSize: 4 << 10, PollInterval: time.Millisecond}, ""},
		{Config{BlockSize: 100}, "block size 100: must be at least 4096"},
		{Config{BlockSize: -1}, "block size -1"},
		{Config{CacheBytes: 1 << 20}, "cache bytes 1048576: must hold at least one block (block size 4194304)"},
		{Config{PollInterval: time.Microsecond}, "poll interval 1µs"},
		{Config{MaxRecords: -5}, "max records -5: must be positive"},
		{Config{MaxBytes: -1}, "max bytes -1: must be between 1 and 1073741824"},
		{Config{MaxBytes: 2 << 30}, "max bytes 2147483648: must be between 1 and 1073741824"},
		{Config{MaxRecords: 100}, "default max records 500: must be between 1 and max records 100"},
		{Config{DefaultMaxBytes: 32 << 20}, "default max bytes 33554432: must be between 1 and max bytes 16777216"},
		{Config{MaxWait: -time.Second}, "max wait -1s"},
	} {
		err := tc.cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tc.cfg, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidConfig)):
			t.Errorf("%+v: %v, want an ErrInvalidConfig saying %q", tc.cfg, err, tc.want)
		}
	}
	d := Config{}.withDefaults()
	if d.CacheBytes != 256<<20 || d.BlockSize != 4<<20 || d.PollInterval != 500*time.Millisecond ||
		d.DefaultMaxRecords != 500 || d.DefaultMaxBytes != 1<<20 || d.MaxRecords != 10000 ||
		d.MaxBytes != 16<<20 || d.MaxWait != 30*time.Second {
		t.Errorf("defaults %+v", d)
	}
}
