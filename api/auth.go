package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// AuthConfig turns on bearer API keys. With no keys every route is open, as before.
//
// With keys, a request reaches a route only with "Authorization: Bearer KEY" for one of
// them; anything else gets 401 unauthorized with a WWW-Authenticate challenge, before
// its body is read, so it changes nothing. The health probes (/healthz, /readyz) stay
// open because load balancers and orchestrators call them without credentials; /metrics
// stays private unless PublicMetrics, since it names topics and request rates.
type AuthConfig struct {
	// Keys are the accepted keys. Several keys let operators rotate: add the new key,
	// move clients, remove the old one. Check them with ValidateAPIKey.
	Keys []string
	// PublicMetrics serves /metrics without a key (a scraper inside the network).
	PublicMetrics bool
}

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

// keyring holds digests of the accepted keys. Comparing fixed-size digests in constant
// time, against every key without stopping at a match, leaks neither a key's length
// nor how much of a guess was right, nor which key matched.
type keyring struct {
	digests [][sha256.Size]byte
}

func newKeyring(keys []string) *keyring {
	kr := &keyring{digests: make([][sha256.Size]byte, len(keys))}
	for i, k := range keys {
		kr.digests[i] = sha256.Sum256([]byte(k))
	}
	return kr
}

func (kr *keyring) match(token string) bool {
	d := sha256.Sum256([]byte(token))
	ok := 0
	for i := range kr.digests {
		ok |= subtle.ConstantTimeCompare(d[:], kr.digests[i][:])
	}
	return ok == 1
}

// bearerToken returns the token of an "Authorization: Bearer TOKEN" header (the scheme
// is case-insensitive, RFC 9110), and whether the header was there at all.
func bearerToken(r *http.Request) (token string, present bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(tok), true
}

// authMiddleware enforces cfg. Without keys it passes every request through.
func authMiddleware(cfg AuthConfig) func(http.Handler) http.Handler {
	if len(cfg.Keys) == 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	kr := newKeyring(cfg.Keys)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/healthz", "/readyz":
				next.ServeHTTP(w, r)
				return
			case "/metrics":
				if cfg.PublicMetrics {
					next.ServeHTTP(w, r)
					return
				}
			}
			token, present := bearerToken(r)
			if token != "" && kr.match(token) {
				next.ServeHTTP(w, r)
				return
			}
			// RFC 6750: a request without credentials gets the bare challenge; one with
			// wrong credentials is told the token is invalid.
			challenge := `Bearer realm="strata"`
			detail := "this server requires an API key: send Authorization: Bearer KEY"
			if present {
				challenge += `, error="invalid_token"`
				detail = "the API key is not valid: send Authorization: Bearer KEY with a key this server accepts"
			}
			w.Header().Set("WWW-Authenticate", challenge)
			writeProblem(w, r, newProblem(CodeUnauthorized, "%s", detail))
		})
	}
}
