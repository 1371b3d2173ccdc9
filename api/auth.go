package api

import (
	"fmt"
	"strings"
)

// MinAPIKeyLength is the shortest key accepted: 16 characters, e.g. 32 hex digits make
// 128 bits (openssl rand -hex 32 gives 256).
const MinAPIKeyLength = 16

// ValidateAPIKey says why key cannot be used as a bearer token, or returns nil. Keys are
// 16 to 512 visible ASCII characters without commas (commas and white space separate
// keys in --api-keys).
func ValidateAPIKey(key string) error {
	if len(key) < MinAPIKeyLength {
		return fmt.Errorf("API key of %d characters is too short: use at least %d (e.g. openssl rand -hex 32)", len(key), MinAPIKeyLength)
	}
	if len(key) > 512 {
		return fmt.Errorf("API key of %d characters is too long: use at most 512", len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e || c == ',' {
			return fmt.Errorf("API key has a character (byte %d) that is not visible ASCII or is a comma: use letters, digits and punctuation", i)
		}
	}
	return nil
}

// ParseAPIKeys splits a list of keys separated by commas, spaces or newlines (a flag,
// an environment variable, or a file or secret with one key per line; lines starting
// with # are comments) and validates each. Duplicates are dropped.
func ParseAPIKeys(s string) ([]string, error) {
	var keys []string
	seen := map[string]bool{}
	for line := range strings.SplitSeq(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, k := range strings.FieldsFunc(line, func(r rune) bool {
			return r == ',' || r == ' ' || r == '\t' || r == '\r'
		}) {
			if err := ValidateAPIKey(k); err != nil {
				return nil, fmt.Errorf("key %d: %w", len(keys)+1, err)
			}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys, nil
}
