package segment

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Object keys look like segments/20261202T110533.123Z-0123456789abcdef: a fixed-width
// UTC creation time with millisecond precision, so keys sort by time, then 64 random
// bits, so keys made in the same millisecond by any number of writers never collide.
// Keys are relative to the object store's own prefix.
const (
	keyPrefix     = "segments/"
	keyTimeLayout = "20060102T150405.000Z"
	keyRandomHex  = 16
	keyLen        = len(keyPrefix) + len(keyTimeLayout) + 1 + keyRandomHex
)

// NewKey returns a new unique, time-ordered object key for a segment created at t
// (truncated to the millisecond, in UTC). t must lie in the years 0 to 9999.
func NewKey(t time.Time) string {
	var rnd [keyRandomHex / 2]byte
	_, _ = rand.Read(rnd[:]) // never fails: crypto/rand aborts the program instead
	b := make([]byte, 0, keyLen)
	b = append(b, keyPrefix...)
	b = t.UTC().AppendFormat(b, keyTimeLayout)
	b = append(b, '-')
	b = hex.AppendEncode(b, rnd[:])
	return string(b)
}

// KeyTime returns the creation time encoded in a key made by NewKey. Anything else —
// another prefix, a malformed or non-canonical time, a bad random suffix — is an error
// wrapping ErrInvalid.
func KeyTime(key string) (time.Time, error) {
	if len(key) != keyLen || !strings.HasPrefix(key, keyPrefix) {
		return time.Time{}, fmt.Errorf("segment: key %q: not %s<time>-<%d hex digits>: %w", key, keyPrefix, keyRandomHex, ErrInvalid)
	}
	ts := key[len(keyPrefix) : len(keyPrefix)+len(keyTimeLayout)]
	t, err := time.Parse(keyTimeLayout, ts)
	if err != nil {
		return time.Time{}, fmt.Errorf("segment: key %q: time: %w: %w", key, err, ErrInvalid)
	}
	// Parse is lenient in places (e.g. it reads "24" in an hour field anywhere it
	// can); only the one canonical spelling is a key NewKey could have made.
	if t.Format(keyTimeLayout) != ts {
		return time.Time{}, fmt.Errorf("segment: key %q: time %q is not canonical: %w", key, ts, ErrInvalid)
	}
	rest := key[len(keyPrefix)+len(keyTimeLayout):]
	if rest[0] != '-' {
		return time.Time{}, fmt.Errorf("segment: key %q: no '-' after the time: %w", key, ErrInvalid)
	}
	for _, c := range []byte(rest[1:]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return time.Time{}, fmt.Errorf("segment: key %q: suffix is not %d lowercase hex digits: %w", key, keyRandomHex, ErrInvalid)
		}
	}
	return t, nil
}
