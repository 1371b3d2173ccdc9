package main

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/strata-io/strata/api"
	catopen "github.com/strata-io/strata/catalog/open"
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
