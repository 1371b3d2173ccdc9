package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/strata-io/strata/api"
	catopen "github.com/strata-io/strata/catalog/open"
	"github.com/strata-io/strata/internal/tlsreload"
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

// authFlags are the API-key flags of every command that serves the HTTP API (serve,
// dev, lambda).
type authFlags struct {
	keys, keysFile *string
	publicMetrics  *bool
}

func addAuthFlags(c *command) *authFlags {
	defer c.shared()()
	return &authFlags{
		keys:          c.fs.String("api-keys", "", "bearer API `keys`, comma-separated: with any, requests without one get 401 (the /healthz and /readyz probes stay open); prefer the environment or --api-keys-file to the command line"),
		keysFile:      c.fs.String("api-keys-file", "", "`file` of bearer API keys, one a line (# comments), e.g. a mounted secret; adds to --api-keys"),
		publicMetrics: c.fs.Bool("public-metrics", false, "serve /metrics without an API key (when keys are set)"),
	}
}

// config reads the keys, or says what is wrong (never quoting a key).
func (f *authFlags) config() (api.AuthConfig, []string) {
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
	return api.AuthConfig{Keys: keys, PublicMetrics: *f.publicMetrics}, bad
}

// keylessWarning is what a node says at start-up when it serves without API keys on an
// address other machines can reach ("" when it need not warn).
func keylessWarning(auth api.AuthConfig, addr net.Addr) string {
	if len(auth.Keys) > 0 {
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
}

func addTLSFlags(c *command) *tlsFlags {
	defer c.shared()()
	return &tlsFlags{
		cert:     c.fs.String("tls-cert", "", "PEM certificate `file` (with its chain): the HTTP listener speaks TLS only, and picks up a replaced file without a restart (checked at most every second)"),
		key:      c.fs.String("tls-key", "", "PEM private key `file` of --tls-cert (reloaded with it)"),
		required: c.fs.Bool("tls-required", false, "refuse to start without --tls-cert and --tls-key, so a node can never serve plain HTTP (with a certificate, a plain HTTP request is always refused)"),
	}
}

func (f *tlsFlags) enabled() bool { return *f.cert != "" || *f.key != "" }

// validate loads the pair once, so a bad file is reported with the other flags.
func (f *tlsFlags) validate() []string {
	switch {
	case *f.cert == "" && *f.key == "" && *f.required:
		return []string{"--tls-required: give --tls-cert and --tls-key (PEM files), or terminate TLS in front of the node and leave --tls-required off"}
	case *f.cert == "" && *f.key == "":
		return nil
	case *f.cert == "" || *f.key == "":
		return []string{"--tls-cert and --tls-key go together: give both PEM files"}
	}
	if _, err := tlsreload.New(*f.cert, *f.key, tlsreload.Options{}); err != nil {
		return []string{fmt.Sprintf("--tls-cert, --tls-key: %v", err)}
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
	return r.ServerConfig(), nil
}
