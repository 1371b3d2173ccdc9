package security

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// OAUTHBEARER (KIP-255, KIP-768) and HTTP bearer tokens: JWT access tokens signed by an
// issuer whose keys are published as a JWKS. Signatures, key selection and the
// registered claims' checks are github.com/go-jose/go-jose/v4's (a maintained JOSE
// implementation; it refuses alg "none" and algorithms not listed); this file fetches
// the key set, picks the principal's claim and, in the development mode only, reads
// Kafka's unsecured tokens.

// OAuthConfig configures token logins. Zero: no OAUTHBEARER.
type OAuthConfig struct {
	// JWKSURL is where the issuer publishes its keys (fetched at start, every
	// JWKSRefresh, and when a token names a key not known yet); JWKSFile, a file
	// holding the same document (tests, air-gapped setups), read the same way.
	JWKSURL, JWKSFile string
	// Issuer, when set, must be the token's "iss"; Audience, when set, one of its
	// "aud".
	Issuer, Audience string
	// ClockSkew is the leeway on "exp", "nbf" and "iat". Default DefaultClockSkew.
	ClockSkew time.Duration
	// PrincipalClaim names the claim whose string value is the user of the principal
	// ("User:" and it). Default "sub".
	PrincipalClaim string
	// Unsecured accepts Kafka's unsecured tokens (alg "none", no signature): anyone can
	// write one naming any principal, so it is for development only, and refused
	// together with authentication (ValidateOAuth).
	Unsecured bool
	// JWKSRefresh is how often the key set is fetched again. Default 5 minutes.
	JWKSRefresh time.Duration
	// JWKSMissInterval spaces the fetches that tokens naming unknown keys trigger, so a
	// stream of made-up key ids costs the issuer one fetch per interval. Default 10s.
	JWKSMissInterval time.Duration
	// HTTPClient fetches JWKSURL. Default: one with a 10 s timeout.
	HTTPClient *http.Client
}

// DefaultClockSkew is OAuthConfig.ClockSkew when it is zero (Kafka's
// sasl.oauthbearer.clock.skew.seconds is 30).
const DefaultClockSkew = 30 * time.Second

// Enabled says whether OAUTHBEARER is served.
func (c OAuthConfig) Enabled() bool { return c.JWKSURL != "" || c.JWKSFile != "" || c.Unsecured }

// ValidateOAuth says what is wrong with c on a node whose authentication is authOn.
func (c OAuthConfig) ValidateOAuth(authOn bool) error {
	switch {
	case c.Unsecured && authOn:
		return errors.New("--oauth-unsecured accepts unsigned tokens that can name any principal: it cannot be used with authentication (--api-keys, --api-keys-file, STRATA_API_KEYS, --auth-required, --tls-client-ca)")
	case c.Unsecured && (c.JWKSURL != "" || c.JWKSFile != ""):
		return errors.New("--oauth-unsecured and a JWKS (--oauth-jwks-url, --oauth-jwks-file) exclude each other: choose one")
	case c.JWKSURL != "" && c.JWKSFile != "":
		return errors.New("give --oauth-jwks-url or --oauth-jwks-file, not both")
	case c.ClockSkew < 0 || c.ClockSkew > time.Hour:
		return fmt.Errorf("--oauth-clock-skew %s: give 0 to 1h", c.ClockSkew)
	case !c.Enabled() && (c.Issuer != "" || c.Audience != ""):
		return errors.New("--oauth-issuer and --oauth-audience need a key set: give --oauth-jwks-url or --oauth-jwks-file")
	}
	return nil
}

// ErrInvalidToken wraps every refusal of a token (and ErrAuthFailed): Kafka answers it
// with the status invalid_token (RFC 6750).
var ErrInvalidToken = fmt.Errorf("%w: invalid_token", ErrAuthFailed)

// signedAlgs are the signature algorithms accepted: asymmetric only (a symmetric
// key in a published JWKS would let its readers sign).
var signedAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// oauth validates tokens. Safe for concurrent use.
type oauth struct {
	cfg OAuthConfig
	log *slog.Logger

	mu      sync.Mutex // one fetch at a time; guards keys and fetched
	keys    *jose.JSONWebKeySet
	fetched time.Time
}

func newOAuth(cfg OAuthConfig, log *slog.Logger) *oauth {
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = DefaultClockSkew
	}
	if cfg.PrincipalClaim == "" {
		cfg.PrincipalClaim = "sub"
	}
	if cfg.JWKSMissInterval <= 0 {
		cfg.JWKSMissInterval = 10 * time.Second
	}
	if cfg.JWKSRefresh <= 0 {
		cfg.JWKSRefresh = 5 * time.Minute
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &oauth{cfg: cfg, log: log}
}

// loadKeys reads the key set (the caller holds o.mu).
func (o *oauth) loadKeys(ctx context.Context) error {
	var body []byte
	var err error
	if o.cfg.JWKSFile != "" {
		body, err = os.ReadFile(o.cfg.JWKSFile)
	} else {
		body, err = o.fetch(ctx)
	}
	o.fetched = time.Now() // a failure waits as long as a success before the next try
	if err != nil {
		return fmt.Errorf("oauth: read JWKS: %w", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("oauth: read JWKS: %w", err)
	}
	o.keys = &set
	return nil
}

func (o *oauth) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.cfg.JWKSURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := o.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", o.cfg.JWKSURL, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}

// prime loads the key set if it has not been read yet (at start: a wrong URL or file
// is reported then).
func (o *oauth) prime(ctx context.Context) error {
	if o.cfg.Unsecured {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keys != nil {
		return nil
	}
	return o.loadKeys(ctx)
}

// key finds the verification key kid names: from the key set, read again when it is
// older than JWKSRefresh or — at most every refetchAfterMiss — when kid is not in it
// (the issuer rotated its keys): JWKSMissInterval.
func (o *oauth) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	since := time.Since(o.fetched)
	if o.keys == nil || since > o.cfg.JWKSRefresh {
		if err := o.loadKeys(ctx); err != nil {
			o.log.Warn("OAUTHBEARER key set", "err", err)
		}
	}
	find := func() *jose.JSONWebKey {
		if o.keys == nil {
			return nil
		}
		var ks []jose.JSONWebKey
		if kid != "" {
			ks = o.keys.Key(kid)
		} else if len(o.keys.Keys) == 1 {
			ks = o.keys.Keys
		}
		if len(ks) == 0 {
			return nil
		}
		return &ks[0]
	}
	if k := find(); k != nil {
		return k, nil
	}
	if time.Since(o.fetched) > o.cfg.JWKSMissInterval {
		if err := o.loadKeys(ctx); err != nil {
			o.log.Warn("OAUTHBEARER key set", "err", err)
		}
		if k := find(); k != nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w: no key %q in the issuer's key set", ErrInvalidToken, kid)
}

// validate checks token at now and answers who it names and when it expires.
func (o *oauth) validate(ctx context.Context, token string, now time.Time) (Identity, error) {
	var (
		claims jwt.Claims
		all    map[string]any
	)
	if o.cfg.Unsecured {
		if err := unsecuredClaims(token, &claims, &all); err != nil {
			return Identity{}, err
		}
	} else {
		tok, err := jwt.ParseSigned(token, signedAlgs)
		if err != nil {
			return Identity{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
		}
		kid := ""
		if len(tok.Headers) == 1 {
			kid = tok.Headers[0].KeyID
		}
		k, err := o.key(ctx, kid)
		if err != nil {
			return Identity{}, err
		}
		if err := tok.Claims(k.Key, &claims, &all); err != nil {
			return Identity{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
		}
	}
	if claims.Expiry == nil {
		return Identity{}, fmt.Errorf("%w: the token has no expiry (exp)", ErrInvalidToken)
	}
	want := jwt.Expected{Issuer: o.cfg.Issuer, Time: now}
	if o.cfg.Audience != "" {
		want.AnyAudience = jwt.Audience{o.cfg.Audience}
	}
	if err := claims.ValidateWithLeeway(want, o.cfg.ClockSkew); err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	name, _ := all[o.cfg.PrincipalClaim].(string)
	if name == "" {
		return Identity{}, fmt.Errorf("%w: no string claim %q to name the principal", ErrInvalidToken, o.cfg.PrincipalClaim)
	}
	return Identity{Principal: "User:" + name, Expires: claims.Expiry.Time()}, nil
}

// unsecuredClaims reads Kafka's unsecured token: a header {"alg":"none"}, the claims,
// and an empty signature.
func unsecuredClaims(token string, claims *jwt.Claims, all *map[string]any) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[2] != "" {
		return fmt.Errorf("%w: not an unsecured JWS (header.claims. with no signature)", ErrInvalidToken)
	}
	dec := func(s string, out any) error {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			return err
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		return d.Decode(out)
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := dec(parts[0], &h); err != nil || h.Alg != "none" {
		return fmt.Errorf("%w: the header of an unsecured token must be {\"alg\":\"none\"}", ErrInvalidToken)
	}
	if err := dec(parts[1], all); err != nil {
		return fmt.Errorf("%w: the claims do not parse: %v", ErrInvalidToken, err)
	}
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(b, claims); err != nil {
		return fmt.Errorf("%w: the claims do not parse: %v", ErrInvalidToken, err)
	}
	return nil
}

// looksLikeJWT says whether an HTTP bearer secret is a JWT (three dot-separated
// parts), not an API key (keys have no dots: hex digits).
func looksLikeJWT(s string) bool { return strings.Count(s, ".") == 2 }

// OAuthEnabled says whether OAUTHBEARER tokens are accepted.
func (g *Guard) OAuthEnabled() bool { return g.oauth != nil }

// AuthenticateToken validates an OAUTHBEARER (or HTTP bearer) JWT: the identity it
// names, with its expiry. A refusal wraps ErrInvalidToken.
func (g *Guard) AuthenticateToken(ctx context.Context, token string) (Identity, error) {
	if g.oauth == nil {
		return Identity{}, fmt.Errorf("%w: this node accepts no OAuth tokens (see --oauth-jwks-url)", ErrInvalidToken)
	}
	return g.oauth.validate(ctx, token, time.Now())
}
