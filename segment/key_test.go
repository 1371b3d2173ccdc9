package segment

import (
	"errors"
	"regexp"
	"slices"
	"testing"
	"time"
)

func TestNewKey(t *testing.T) {
	at := time.Date(2026, 12, 2, 11, 5, 33, 123_987_654, time.UTC)
	k := NewKey(at)
	if !regexp.MustCompile(`^segments/20261202T110533\.123Z-[0-9a-f]{16}$`).MatchString(k) {
		t.Fatalf("key %q", k)
	}
	got, err := KeyTime(k)
	if err != nil || !got.Equal(at.Truncate(time.Millisecond)) || got.Location() != time.UTC {
		t.Fatalf("KeyTime(%q) = %v, %v", k, got, err)
	}
	// Another zone names the same instant.
	paris := time.FixedZone("CET", 3600)
	if k2 := NewKey(at.In(paris)); k2[:len(k2)-16] != k[:len(k)-16] {
		t.Fatalf("zone changed the key: %q vs %q", k2, k)
	}
	// Unique within one millisecond, and ordered by time across milliseconds.
	seen := map[string]bool{}
	var keys []string
	for i := range 2000 {
		k := NewKey(at.Add(time.Duration(i/4) * time.Millisecond))
		if seen[k] {
			t.Fatalf("duplicate key %q", k)
		}
		seen[k] = true
		keys = append(keys, k)
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	for i := range sorted {
		ti, _ := KeyTime(sorted[i])
		if i > 0 {
			tp, _ := KeyTime(sorted[i-1])
			if ti.Before(tp) {
				t.Fatalf("sorted keys out of time order: %q before %q", sorted[i-1], sorted[i])
			}
		}
	}
	// Known times across the range keys cover sort as their times do.
	times := []time.Time{
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999e6, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 2, 3, 4, 5, 6, 7e6, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC),
	}
	for i := 1; i < len(times); i++ {
		if a, b := NewKey(times[i-1]), NewKey(times[i]); a >= b {
			t.Fatalf("%q >= %q", a, b)
		}
	}
}

func TestKeyTimeRefuses(t *testing.T) {
	for _, k := range []string{
		"",
		"segments/",
		"segments/20261202T110533.123Z-0123456789abcde",   // short suffix
		"segments/20261202T110533.123Z-0123456789abcdef0", // long suffix
		"segments/20261202T110533.123Z-0123456789ABCDEF",  // uppercase
		"segments/20261202T110533.123Z-0123456789abcdeg",
		"segments/20261202T110533.123Z_0123456789abcdef",
		"Segments/20261202T110533.123Z-0123456789abcdef",
		"prefix/segments/20261202T110533.123Z-0123456789abcdef",
		"segments/20261302T110533.123Z-0123456789abcdef", // month 13
		"segments/20260230T110533.123Z-0123456789abcdef", // 30 February
		"segments/20261202T250533.123Z-0123456789abcdef", // hour 25
		"segments/20261202T110560.123Z-0123456789abcdef", // second 60
		"segments/20261202T110533,123Z-0123456789abcdef",
		"segments/20261202T110533.12Z-00123456789abcdef",
		"segments/20261202 110533.123Z-0123456789abcdef",
		"segments/+0261202T110533.123Z-0123456789abcdef",
		"segments/20261202T110533.123+-0123456789abcdef",
	} {
		if got, err := KeyTime(k); !errors.Is(err, ErrInvalid) {
			t.Errorf("KeyTime(%q) = %v, %v; want ErrInvalid", k, got, err)
		}
	}
	if _, err := KeyTime("segments/20261202T110533.123Z-0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
}
