package kafka

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/security"
)

// The SASL mechanisms beyond PLAIN, spoken frame by frame: SCRAM-SHA-256/512 against
// credentials in a real (SQLite) catalog, OAUTHBEARER against a JWKS file. Every
// refusal is SASL_AUTHENTICATION_FAILED followed by the connection's close, and leaves
// the connection unauthenticated.

// scramCatalog is a SQLite catalog holding SCRAM credentials made from passwords by
// xdg-go/scram's client (the stored keys as any SCRAM server would keep them).
func scramCatalog(t *testing.T, creds ...struct {
	user, pass string
	mech       catalog.ScramMechanism
}) *sqlite.Catalog {
	t.Helper()
	cat, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	for _, c := range creds {
		salt := []byte("a-salt-of-24-bytes-long!")
		h := scram.SHA256
		if c.mech == catalog.ScramSHA512 {
			h = scram.SHA512
		}
		cl, err := h.NewClient(c.user, c.pass, "")
		if err != nil {
			t.Fatal(err)
		}
		sc := cl.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: 4096})
		if err := cat.UpsertScramCredential(t.Context(), catalog.ScramCredential{User: c.user, Mechanism: c.mech, Salt: salt,
			Iterations: 4096, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}); err != nil {
			t.Fatal(err)
		}
	}
	return cat
}

type scramUser = struct {
	user, pass string
	mech       catalog.ScramMechanism
}

func guardOver(t *testing.T, cat security.Catalog, cfg security.Config) *security.Guard {
	t.Helper()
	g := security.New(cfg, cat)
	if err := g.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	return g
}

// scramLogin runs an exchange with xdg-go/scram's client; final, when set, rewrites the
// client's final message before it is sent.
func scramLogin(t *testing.T, c *client, mech, user, pass string, final func(string) string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	if r := handshake(t, c, 1, mech); r.ErrorCode != 0 {
		t.Fatalf("handshake %s: error %d", mech, r.ErrorCode)
	}
	h := scram.SHA256
	if mech == "SCRAM-SHA-512" {
		h = scram.SHA512
	}
	cl, err := h.NewClient(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.NewConversation()
	first, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	r := authenticate(t, c, []byte(first))
	if r.ErrorCode != 0 {
		return r
	}
	msg, err := conv.Step(string(r.SASLAuthBytes))
	if err != nil {
		t.Fatalf("client: server-first %q: %v", r.SASLAuthBytes, err)
	}
	if final != nil {
		msg = final(msg)
	}
	r = authenticate(t, c, []byte(msg))
	if r.ErrorCode == 0 {
		if _, err := conv.Step(string(r.SASLAuthBytes)); err != nil || !conv.Valid() {
			t.Fatalf("client: the server's signature %q does not verify: %v", r.SASLAuthBytes, err)
		}
	}
	return r
}

func TestSCRAMExchange(t *testing.T) {
	cat := scramCatalog(t, scramUser{"alice", "alice-password", catalog.ScramSHA512}, scramUser{"bob", "bob-password", catalog.ScramSHA256})
	fc := newFakeCluster()
	fc.add("orders", 1)
	ts := startServer(t, Config{Auth: guardOver(t, cat, security.Config{Required: true})}, fc)

	t.Run("SCRAM-SHA-512", func(t *testing.T) {
		c := dial(t, ts.addr)
		if r := scramLogin(t, c, "SCRAM-SHA-512", "alice", "alice-password", nil); r.ErrorCode != 0 {
			t.Fatalf("login: error %d %v", r.ErrorCode, deref(r.ErrorMessage))
		}
		if resp := c.roundTrip(metadataFor("orders"), 12).(*kmsg.MetadataResponse); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("metadata after login: %+v", resp.Topics)
		}
	})
	t.Run("SCRAM-SHA-256", func(t *testing.T) {
		c := dial(t, ts.addr)
		if r := scramLogin(t, c, "SCRAM-SHA-256", "bob", "bob-password", nil); r.ErrorCode != 0 {
			t.Fatalf("login: error %d %v", r.ErrorCode, deref(r.ErrorMessage))
		}
	})
	for _, tc := range []struct {
		name, mech, user, pass string
		final                  func(string) string
	}{
		{"wrong proof", "SCRAM-SHA-512", "alice", "not-her-password", nil},
		{"unknown user", "SCRAM-SHA-256", "mallory", "whatever", nil},
		{"a mechanism the user has no credential for", "SCRAM-SHA-256", "alice", "alice-password", nil},
		// The client's final message carries the nonce the server made; one from another
		// exchange (a replay) is refused before the proof is looked at.
		{"replayed nonce", "SCRAM-SHA-512", "alice", "alice-password", func(m string) string {
			parts := strings.Split(m, ",")
			for i, p := range parts {
				if strings.HasPrefix(p, "r=") {
					parts[i] = "r=" + strings.Repeat("A", len(p)-2)
				}
			}
			return strings.Join(parts, ",")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, ts.addr)
			r := scramLogin(t, c, tc.mech, tc.user, tc.pass, tc.final)
			if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || !strings.Contains(deref(r.ErrorMessage), tc.mech) {
				t.Fatalf("error %d %q, want SASL_AUTHENTICATION_FAILED naming %s", r.ErrorCode, deref(r.ErrorMessage), tc.mech)
			}
			c.expectClosed()
		})
	}
}

// A node that requires no authentication still serves SASL; a failed login closes the
// connection all the same, and one that never logs in is served as anonymous.
func TestSASLOptional(t *testing.T) {
	cat := scramCatalog(t, scramUser{"alice", "alice-password", catalog.ScramSHA256})
	fc := newFakeCluster()
	fc.add("orders", 1)
	ts := startServer(t, Config{Auth: guardOver(t, cat, security.Config{}), AuthOptional: true}, fc)

	anon := dial(t, ts.addr)
	if resp := anon.roundTrip(metadataFor("orders"), 12).(*kmsg.MetadataResponse); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("anonymous metadata: %+v", resp.Topics)
	}
	good := dial(t, ts.addr)
	if r := scramLogin(t, good, "SCRAM-SHA-256", "alice", "alice-password", nil); r.ErrorCode != 0 {
		t.Fatalf("login: %d", r.ErrorCode)
	}
	bad := dial(t, ts.addr)
	if r := scramLogin(t, bad, "SCRAM-SHA-256", "alice", "wrong", nil); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("wrong password: error %d, want SASL_AUTHENTICATION_FAILED", r.ErrorCode)
	}
	bad.expectClosed()
	if r := handshake(t, dial(t, ts.addr), 1, "OAUTHBEARER"); r.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
		t.Fatalf("OAUTHBEARER without a key set: error %d, want UNSUPPORTED_SASL_MECHANISM", r.ErrorCode)
	}
}

// issuer signs RS256 tokens and publishes its keys in a JWKS file.
type issuer struct {
	t    *testing.T
	path string
	keys map[string]*rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	return &issuer{t: t, path: filepath.Join(t.TempDir(), "jwks.json"), keys: map[string]*rsa.PrivateKey{}}
}

// publish writes the public halves of the keys named (the others leave the set: a
// rotation).
func (is *issuer) publish(kids ...string) {
	var set jose.JSONWebKeySet
	for _, kid := range kids {
		if is.keys[kid] == nil {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				is.t.Fatal(err)
			}
			is.keys[kid] = k
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &is.keys[kid].PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		is.t.Fatal(err)
	}
	if err := os.WriteFile(is.path, b, 0o600); err != nil {
		is.t.Fatal(err)
	}
}

// token signs claims with key kid (made, unpublished, if it is new: a bad signature).
func (is *issuer) token(kid string, claims map[string]any) string {
	k := is.keys[kid]
	if k == nil {
		var err error
		if k, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			is.t.Fatal(err)
		}
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		is.t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		is.t.Fatal(err)
	}
	return tok
}

func claims(sub string, exp time.Time, more ...any) map[string]any {
	c := map[string]any{"sub": sub, "iss": "https://issuer.example", "aud": "strata", "exp": exp.Unix(), "iat": time.Now().Unix()}
	for i := 0; i+1 < len(more); i += 2 {
		c[more[i].(string)] = more[i+1]
	}
	return c
}

func oauthMessage(tok string) []byte { return []byte("n,,\x01auth=Bearer " + tok + "\x01\x01") }

// oauthLogin runs an OAUTHBEARER exchange; a refusal comes as the error challenge,
// answered \x01, then SASL_AUTHENTICATION_FAILED.
func oauthLogin(t *testing.T, c *client, tok string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	if r := handshake(t, c, 1, "OAUTHBEARER"); r.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", r.ErrorCode)
	}
	r := authenticate(t, c, oauthMessage(tok))
	if r.ErrorCode == 0 && len(r.SASLAuthBytes) > 0 {
		if string(r.SASLAuthBytes) != `{"status":"invalid_token"}` {
			t.Fatalf("error challenge %q", r.SASLAuthBytes)
		}
		r = authenticate(t, c, []byte{1})
	}
	return r
}

func TestOAuthBearerJWKS(t *testing.T) {
	is := newIssuer(t)
	is.publish("k1")
	g := guardOver(t, nil, security.Config{Required: true, OAuth: security.OAuthConfig{JWKSFile: is.path,
		Issuer: "https://issuer.example", Audience: "strata", ClockSkew: time.Second, JWKSMissInterval: time.Nanosecond}})
	fc := newFakeCluster()
	fc.add("orders", 1)
	ts := startServer(t, Config{Auth: g}, fc)
	hour := time.Now().Add(time.Hour)

	login := func(t *testing.T, tok string) (*client, *kmsg.SASLAuthenticateResponse) {
		c := dial(t, ts.addr)
		return c, oauthLogin(t, c, tok)
	}
	ok := func(t *testing.T, tok string) *client {
		t.Helper()
		c, r := login(t, tok)
		if r.ErrorCode != 0 {
			t.Fatalf("login: error %d %q", r.ErrorCode, deref(r.ErrorMessage))
		}
		if r.SessionLifetimeMillis <= 0 || r.SessionLifetimeMillis > time.Hour.Milliseconds() {
			t.Fatalf("session lifetime %d ms, want the token's (up to an hour)", r.SessionLifetimeMillis)
		}
		return c
	}
	refused := func(t *testing.T, tok string) {
		t.Helper()
		c, r := login(t, tok)
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || !strings.Contains(deref(r.ErrorMessage), "invalid_token") {
			t.Fatalf("error %d %q, want SASL_AUTHENTICATION_FAILED with invalid_token", r.ErrorCode, deref(r.ErrorMessage))
		}
		c.expectClosed()
	}

	c := ok(t, is.token("k1", claims("alice", hour)))
	if resp := c.roundTrip(metadataFor("orders"), 12).(*kmsg.MetadataResponse); len(resp.Topics) != 1 {
		t.Fatalf("metadata after login: %+v", resp.Topics)
	}
	t.Run("bad tokens", func(t *testing.T) {
		for name, tok := range map[string]string{
			"expired":          is.token("k1", claims("alice", time.Now().Add(-time.Minute))),
			"not yet valid":    is.token("k1", claims("alice", hour, "nbf", time.Now().Add(time.Minute).Unix())),
			"other audience":   is.token("k1", claims("alice", hour, "aud", "someone-else")),
			"other issuer":     is.token("k1", claims("alice", hour, "iss", "https://evil.example")),
			"bad signature":    is.token("k1", claims("alice", hour))[:10] + is.token("unpublished", claims("alice", hour))[10:],
			"unknown key":      is.token("unpublished", claims("alice", hour)),
			"no expiry":        is.token("k1", map[string]any{"sub": "alice", "iss": "https://issuer.example", "aud": "strata"}),
			"alg none":         unsecured(`{"sub":"alice","exp":` + fmt.Sprint(hour.Unix()) + `,"aud":"strata","iss":"https://issuer.example"}`),
			"no subject":       is.token("k1", claims("", hour)),
			"not a JWT at all": "definitely-not-a-token",
		} {
			t.Run(name, func(t *testing.T) { refused(t, tok) })
		}
	})
	t.Run("rotated key", func(t *testing.T) {
		is.publish("k2") // k1 leaves the set
		ok(t, is.token("k2", claims("alice", hour)))
		refused(t, is.token("k1", claims("alice", hour)))
	})
	t.Run("room before authentication", func(t *testing.T) {
		// A token with many claims (groups, roles) of ~40 KiB fits the frames allowed
		// before authentication.
		ok(t, is.token("k2", claims("alice", hour, "groups", strings.Repeat("g", 40<<10))))
	})
	t.Run("closed at expiry", func(t *testing.T) {
		c := ok(t, is.token("k2", claims("alice", time.Now().Add(1500*time.Millisecond))))
		c.expectClosed() // within the read deadline (5s): the token expired, nothing re-authenticated
	})
	t.Run("re-authentication", func(t *testing.T) {
		c := ok(t, is.token("k2", claims("alice", time.Now().Add(time.Minute))))
		if r := oauthLogin(t, c, is.token("k2", claims("alice", hour))); r.ErrorCode != 0 || r.SessionLifetimeMillis < time.Minute.Milliseconds() {
			t.Fatalf("re-authentication: error %d, lifetime %d", r.ErrorCode, r.SessionLifetimeMillis)
		}
		if r := oauthLogin(t, c, is.token("k2", claims("bob", hour))); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("re-authentication as another principal: error %d, want SASL_AUTHENTICATION_FAILED", r.ErrorCode)
		}
		c.expectClosed()
	})
}

func unsecured(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + "."
}
