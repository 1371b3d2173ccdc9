package broker

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{"", now.Add(-time.Hour), false},
		{"15m", now.Add(-15 * time.Minute), false},
		{"24h", now.Add(-24 * time.Hour), false},
		{"2026-06-01T10:30:00Z", time.Date(2026, 6, 1, 10, 30, 0, 0, time.UTC), false},
		{"2026-06-01T12:00:00Z", now, false},
		{"0s", time.Time{}, true},
		{"-1h", time.Time{}, true},
		{"yesterday", time.Time{}, true},
		{"1700000000000", time.Time{}, true},
		{"2026-06-01T12:00:01Z", time.Time{}, true}, // in the future
	} {
		got, err := ParseSince(tc.in, now)
		if tc.bad {
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Details["field"] != "since" {
				t.Errorf("ParseSince(%q) = %v, %v; want CodeInvalidRequest on since", tc.in, got, err)
			}
			continue
		}
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestUsageCost: the README's cost model at S3's list prices. 1,000 PUTs and 10,000
// GETs in an hour kept up for 30 days (720 hours), and 100 GB stored for a month.
func TestUsageCost(t *testing.T) {
	c := DefaultPrices.cost(catalog.UsageCounts{PutRequests: 1000, GetRequests: 10000, Commits: 1000}, 100e9, time.Hour)
	for _, x := range []struct {
		name      string
		got, want float64
	}{
		{"PUTs", c.PutUSD, 720 * 0.005},   // 720,000 PUTs at $0.005 per 1,000
		{"GETs", c.GetUSD, 7200 * 0.0004}, // 7,200,000 GETs at $0.0004 per 1,000
		{"commits", c.CommitUSD, 0},       // the catalog is a fixed cost by default
		{"storage", c.StorageUSD, 100 * 0.023},
		{"total", c.TotalUSD, 3.6 + 2.88 + 2.3},
	} {
		if math.Abs(x.got-x.want) > 1e-9 {
			t.Errorf("%s: $%v, want $%v", x.name, x.got, x.want)
		}
	}
	if c := DefaultPrices.cost(catalog.UsageCounts{PutRequests: 5}, 0, 0); c.TotalUSD != 0 {
		t.Errorf("an empty window: $%v, want 0", c.TotalUSD)
	}
}
