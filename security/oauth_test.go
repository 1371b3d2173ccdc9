package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

func TestValidateOAuth(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    OAuthConfig
		authOn bool
		want   string
	}{
		{"unsecured with authentication", OAuthConfig{Unsecured: true}, true, "cannot be used with authentication"},
		{"unsecured and a key set", OAuthConfig{Unsecured: true, JWKSFile: "x"}, false, "exclude each other"},
		{"URL and file", OAuthConfig{JWKSURL: "http://x", JWKSFile: "x"}, false, "not both"},
		{"audience without keys", OAuthConfig{Audience: "a"}, false, "need a key set"},
		{"negative skew", OAuthConfig{JWKSFile: "x", ClockSkew: -time.Second}, false, "0 to 1h"},
		{"unsecured alone", OAuthConfig{Unsecured: true}, false, ""},
		{"keys with authentication", OAuthConfig{JWKSURL: "http://x"}, true, ""},
	} {
		err := tc.cfg.ValidateOAuth(tc.authOn)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// The guard's own check refuses it too (embedders that skip the flags).
	if err := (Config{Required: true, OAuth: OAuthConfig{Unsecured: true}}).Validate(); err == nil {
		t.Error("Config.Validate accepted --oauth-unsecured with authentication")
	}
}

// The same tokens over HTTP: a bearer secret that is a JWT is validated against the
// issuer's JWKS (fetched from its URL), an API key is looked up as a key.
func TestBearerJWTOverHTTP(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "e1", Algorithm: "ES256", Use: "sig"}}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(jwks) }))
	defer srv.Close()
	g := New(Config{Required: true, OAuth: OAuthConfig{JWKSURL: srv.URL, Audience: "strata", PrincipalClaim: "email"}}, nil)
	if err := g.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	sign := func(claims map[string]any) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "e1"))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.Signed(s).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	exp := time.Now().Add(time.Hour)
	id, err := g.Authenticate(t.Context(), sign(map[string]any{"email": "ann@example.com", "aud": "strata", "exp": exp.Unix()}))
	if err != nil || id.Principal != "User:ann@example.com" || id.Expires.Unix() != exp.Unix() || id.KeyID != "" {
		t.Fatalf("bearer JWT: %+v, %v", id, err)
	}
	for name, tok := range map[string]string{
		"expired":        sign(map[string]any{"email": "ann@example.com", "aud": "strata", "exp": time.Now().Add(-time.Hour).Unix()}),
		"other audience": sign(map[string]any{"email": "ann@example.com", "aud": "other", "exp": exp.Unix()}),
		"no claim":       sign(map[string]any{"sub": "ann", "aud": "strata", "exp": exp.Unix()}),
		"unsecured":      base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"email":"x","aud":"strata","exp":9999999999}`)) + ".",
	} {
		if _, err := g.Authenticate(t.Context(), tok); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", name, err)
		}
	}
}
