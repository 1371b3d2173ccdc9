package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/strata-io/strata/api"
	catopen "github.com/strata-io/strata/catalog/open"
	"github.com/strata-io/strata/internal/tlsreload"
	"github.com/strata-io/strata/security"
)

// catalogFlag applies catalog/open's rule to a --catalog value (with params added to a
// Postgres DSN unless it sets them), phrased for the command line.
func catalogFlag(value string, o catopen.Options, params map[string]string) (catopen.Target, error) {
	if value == "" {
		return catopen.Target{}, errors.New("--catalog is required: e.g. --catalog 'postgres://strata:PASSWORD@db:5432/strata?sslmode=verify-full', or a SQLite file for a single node (--catalog sqlite:./catalog.db --create); or set STRATA_CATALOG")
	}
	t, err := catopen.Parse(value, o)
	if err == nil {
		t, err = t.WithParams(params)
	}
	if err != nil {
		return catopen.Target{}, fmt.Errorf("--%w", err) // "--catalog "x": why: usage"
	}
	return t, nil
}

// authFlags are the authentication and access-log flags of every command that serves
// the HTTP API (serve, dev, lambda).
type authFlags struct {
	keys, keysFile *string
	publicMetrics  *bool
	required       *bool
	superusers     *string
	principalRules *string
	accessSample   *float64
	oauth          oauthFlags
}

// oauthFlags configure OAuth bearer tokens (OAUTHBEARER on the Kafka listener,
// Authorization: Bearer over HTTP).
type oauthFlags struct {
	jwksURL, jwksFile, issuer, audience, claim *string
	skew                                       *time.Duration
	unsecured                                  *bool
}

func addAuthFlags(c *command, accessSample float64) *authFlags {
	defer c.shared()()
	return &authFlags{
		keys:           c.fs.String("api-keys", "", "bootstrap bearer API `keys`, comma-separated: with any, requests without a key get 401 (the /healthz and /readyz probes stay open) and ACLs are enforced; these keys act as User:bootstrap, a superuser, to create catalog keys and ACLs with; prefer the environment or --api-keys-file to the command line"),
		keysFile:       c.fs.String("api-keys-file", "", "`file` of bootstrap API keys, one a line (# comments), e.g. a mounted secret; adds to --api-keys"),
		publicMetrics:  c.fs.Bool("public-metrics", false, "serve /metrics without an API key (when authentication is on)"),
		required:       c.fs.Bool("auth-required", false, "require authentication even without --api-keys: keys made in the catalog (strata keys create) and TLS client certificates only"),
		superusers:     c.fs.String("superusers", "", "comma-separated `principals` (User:NAME) that may do everything whatever the ACLs say (User:bootstrap, the --api-keys keys' principal, always may)"),
		principalRules: c.fs.String("tls-principal-rules", "", "how a verified TLS client certificate's subject becomes a principal, as Kafka's ssl.principal.mapping.rules: `RULE:pattern/replacement/[L|U],...,DEFAULT` (default DEFAULT: User: and the whole subject, e.g. User:CN=alice,O=Acme)"),
		accessSample:   c.fs.Float64("access-log-sample", accessSample, "share of requests written to the access log (a line with principal, operation, resource and status), 0 to 1; refusals (401, 403, Kafka authorization errors) are always logged"),
		oauth: oauthFlags{
			jwksURL:   c.fs.String("oauth-jwks-url", "", "`URL` of the OAuth issuer's JSON Web Key Set: JWT access tokens it signs log in over Kafka (SASL OAUTHBEARER) and, with authentication on, over HTTP (Authorization: Bearer); the principal is User: and --oauth-principal-claim"),
			jwksFile:  c.fs.String("oauth-jwks-file", "", "`file` holding the issuer's JSON Web Key Set, read again when a token names a key it lacks (instead of --oauth-jwks-url)"),
			issuer:    c.fs.String("oauth-issuer", "", "the `iss` a token must carry (default: any)"),
			audience:  c.fs.String("oauth-audience", "", "an `aud` a token must carry (default: any)"),
			claim:     c.fs.String("oauth-principal-claim", "sub", "the token `claim` whose value names the principal (User:VALUE)"),
			skew:      c.fs.Duration("oauth-clock-skew", security.DefaultClockSkew, "leeway on a token's exp, nbf and iat for clocks that disagree, 0 to 1h"),
			unsecured: c.fs.Bool("oauth-unsecured", false, "development only: accept Kafka's unsecured OAUTHBEARER tokens (alg none, unsigned, naming any principal); refused together with authentication (--api-keys, --api-keys-file, STRATA_API_KEYS, --auth-required, --tls-client-ca)"),
		},
	}
}

// authConfig is what the auth flags configure.
type authConfig struct {
	security      security.Config
	publicMetrics bool
	accessSample  float64
}

// config reads the flags, or says what is wrong (never quoting a key). clientCA says
// whether TLS client certificates authenticate (--tls-client-ca), which turns
// authentication on.
func (f *authFlags) config(clientCA bool) (authConfig, []string) {
	var bad []string
	keys, err := api.ParseAPIKeys(*f.keys)
	if err != nil {
		bad = append(bad, fmt.Sprintf("--api-keys: %v", err))
	}
	if *f.keysFile != "" {
		b, err := os.ReadFile(*f.keysFile)
		if err != nil {
			bad = append(bad, fmt.Sprintf("--api-keys-file: %v", err))
		} else if more, err := api.ParseAPIKeys(string(b)); err != nil {
			bad = append(bad, fmt.Sprintf("--api-keys-file %s: %v", *f.keysFile, err))
		} else if len(more) == 0 {
			bad = append(bad, fmt.Sprintf("--api-keys-file %s holds no key: write one key a line", *f.keysFile))
		} else {
			keys = append(keys, more...)
		}
	}
	sc := security.Config{StaticKeys: keys, Required: *f.required || clientCA}
	for _, su := range strings.Split(*f.superusers, ",") {
		if su = strings.TrimSpace(su); su != "" {
			sc.Superusers = append(sc.Superusers, su)
		}
	}
	o := f.oauth
	sc.OAuth = security.OAuthConfig{JWKSURL: *o.jwksURL, JWKSFile: *o.jwksFile, Issuer: *o.issuer, Audience: *o.audience,
		PrincipalClaim: *o.claim, ClockSkew: *o.skew, Unsecured: *o.unsecured}
	if sc.OAuth.ClockSkew == 0 {
		sc.OAuth.ClockSkew = time.Nanosecond // 0 means none, not the default
	}
	if err := sc.OAuth.ValidateOAuth(sc.Enabled()); err != nil {
		bad = append(bad, err.Error())
	} else if err := sc.Validate(); err != nil {
		bad = append(bad, fmt.Sprintf("--superusers: %v", err))
	}
	if *o.claim == "" {
		bad = append(bad, "--oauth-principal-claim is empty: name a claim (sub by default)")
	}
	if *f.principalRules != "" {
		if sc.CertRules, err = security.ParseCertRules(*f.principalRules); err != nil {
			bad = append(bad, fmt.Sprintf("--tls-principal-rules: %v", err))
		}
	}
	if s := *f.accessSample; s < 0 || s > 1 || s != s {
		bad = append(bad, fmt.Sprintf("--access-log-sample %v: want a share between 0 (refusals only) and 1 (every request)", s))
	}
	return authConfig{security: sc, publicMetrics: *f.publicMetrics, accessSample: *f.accessSample}, bad
}

// keylessWarning is what a node says at start-up when it serves without authentication
// on an address other machines can reach ("" when it need not warn).
func keylessWarning(auth authConfig, addr net.Addr) string {
	if auth.security.Enabled() {
		return ""
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		return ""
	}
	return fmt.Sprintf("serving without API keys on %s, which other machines can reach: anyone who can connect can read, write and delete every topic; set --api-keys or STRATA_API_KEYS (or --api-keys-file), or listen on 127.0.0.1", addr)
}

// tlsFlags are the HTTP listener's TLS flags (serve and dev).
type tlsFlags struct {
	cert, key *string
	required  *bool
	clientCA  *string
}

func addTLSFlags(c *command) *tlsFlags {
	defer c.shared()()
	return &tlsFlags{
		cert:     c.fs.String("tls-cert", "", "PEM certificate `file` (with its chain): the HTTP listener speaks TLS only, and picks up a replaced file without a restart (checked at most every second)"),
		key:      c.fs.String("tls-key", "", "PEM private key `file` of --tls-cert (reloaded with it)"),
		required: c.fs.Bool("tls-required", false, "refuse to start without --tls-cert and --tls-key, so a node can never serve plain HTTP (with a certificate, a plain HTTP request is always refused)"),
		clientCA: c.fs.String("tls-client-ca", "", "PEM `file` of the CAs whose client certificates authenticate on the TLS listeners (HTTP, and Kafka with --kafka-tls-cert): a verified certificate's subject becomes the principal (--tls-principal-rules); a client without one still needs a key. Turns authentication on"),
	}
}

// clientCAs loads --tls-client-ca (nil without it).
func (f *tlsFlags) clientCAs() (*x509.CertPool, error) {
	if *f.clientCA == "" {
		return nil, nil
	}
	b, err := os.ReadFile(*f.clientCA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", *f.clientCA)
	}
	return pool, nil
}

// withClientCAs asks clients for a certificate signed by pool and verifies one if given.
func withClientCAs(cfg *tls.Config, pool *x509.CertPool) *tls.Config {
	if cfg != nil && pool != nil {
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg
}

func (f *tlsFlags) enabled() bool { return *f.cert != "" || *f.key != "" }

// validate loads the pair once, so a bad file is reported with the other flags.
func (f *tlsFlags) validate() []string {
	switch {
	case *f.cert == "" && *f.key == "" && *f.required:
		return []string{"--tls-required: give --tls-cert and --tls-key (PEM files), or terminate TLS in front of the node and leave --tls-required off"}
	case *f.cert == "" && *f.key == "" && *f.clientCA != "":
		return []string{"--tls-client-ca needs --tls-cert and --tls-key: client certificates are asked for on TLS listeners only"}
	case *f.cert == "" && *f.key == "":
		return nil
	case *f.cert == "" || *f.key == "":
		return []string{"--tls-cert and --tls-key go together: give both PEM files"}
	}
	if _, err := tlsreload.New(*f.cert, *f.key, tlsreload.Options{}); err != nil {
		return []string{fmt.Sprintf("--tls-cert, --tls-key: %v", err)}
	}
	if _, err := f.clientCAs(); err != nil {
		return []string{fmt.Sprintf("--tls-client-ca: %v", err)}
	}
	return nil
}

// serverConfig is the listener's TLS configuration, nil for plain HTTP.
func (f *tlsFlags) serverConfig(log *slog.Logger) (*tls.Config, error) {
	if !f.enabled() {
		return nil, nil
	}
	r, err := tlsreload.New(*f.cert, *f.key, tlsreload.Options{Log: log})
	if err != nil {
		return nil, err
	}
	pool, err := f.clientCAs()
	if err != nil {
		return nil, err
	}
	return withClientCAs(r.ServerConfig(), pool), nil
}
