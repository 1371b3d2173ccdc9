// Package open owns the one rule that turns a --catalog value into a catalog, for every
// command that opens one (serve, dev, lambda, check, bench):
//
//	postgres://USER:PASSWORD@HOST:5432/DB?sslmode=verify-full   Postgres, a URL
//	postgresql://...                                            the same
//	host=HOST user=USER dbname=DB sslmode=verify-full           Postgres, a libpq keyword/value string
//	sqlite:PATH  (also sqlite:///abs/path)                       SQLite, the file PATH
//	PATH                                                        SQLite, when PATH is an existing file
//
// A SQLite file that does not exist yet is created only when the caller says so
// (Options.Create: strata dev, or --create): a mistyped path must not become an empty
// catalog. Anything else is refused with a message that shows both forms.
//
// Postgres connection strings take every libpq and pgx parameter; sslmode is honoured
// as written (pgx's default is prefer: TLS when offered, unverified). Production uses
// sslmode=verify-full with sslrootcert naming the provider's CA bundle.
//
// A Target never prints its password: String, GoString, LogValue and every error it
// returns are redacted (internal/redact), so a Target can go to a log, a %v or a panic.
package open

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/internal/redact"
)

// Usage says what a catalog value may be; every refusal ends with it.
const Usage = `use Postgres, postgres://USER:PASSWORD@HOST:5432/DB?sslmode=verify-full or a libpq string "host=HOST user=USER dbname=DB sslmode=verify-full", ` +
	`or SQLite, sqlite:PATH or the path of an existing catalog file (a new SQLite catalog is created only by strata dev or with --create)`

// Kind is a catalog backend.
type Kind string

const (
	Postgres Kind = "postgres"
	SQLite   Kind = "sqlite"
)

// Options are the caller's choices about a catalog value.
type Options struct {
	// Create allows a SQLite file that does not exist yet; it is created with its
	// directory. Postgres databases are never created.
	Create bool
}

// Target is a parsed catalog value. Its fields are unexported so that no printing of
// it can show the password.
type Target struct {
	kind Kind
	// dsn is the Postgres connection string as given (with its password).
	dsn string
	// password is the Postgres password the DSN or PGPASSWORD gives, masked in every
	// error (a driver's message may quote it).
	password string
	// verified: the Postgres server certificate is checked against a CA and the host
	// name (sslmode=verify-full); remote: the host is not loopback or a socket.
	verified, remote bool
	// path is the SQLite file.
	path   string
	create bool
}

// keywordDSN matches the start of a libpq keyword/value string: "host=", "user = ".
var keywordDSN = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*=`)

// libpqKeywords are the connection keywords of which a keyword/value string names at
// least one: "x=1.db" is a file name, "host=db" a connection string.
var libpqKeywords = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "password": true,
	"passfile": true, "service": true, "sslmode": true, "sslrootcert": true, "sslcert": true, "sslkey": true,
	"connect_timeout": true, "application_name": true, "options": true, "target_session_attrs": true,
}

func isKeywordDSN(raw string) bool {
	if !keywordDSN.MatchString(raw) {
		return false
	}
	ps, err := params(raw)
	if err != nil {
		return true // malformed, but plainly meant as one: pgx says what is wrong
	}
	for k := range ps {
		if libpqKeywords[k] {
			return true
		}
	}
	return false
}

// uriScheme matches a value that starts like a URL or a typed scheme ("mysql:",
// "postgres:/x"): such a value is never taken as a file name.
var uriScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// Parse applies the rule to raw. It touches nothing: it only checks whether a SQLite
// path exists.
func Parse(raw string, o Options) (Target, error) {
	shown := redact.String(raw)
	refuse := func(format string, a ...any) (Target, error) {
		return Target{}, fmt.Errorf("catalog %q: %s: %s", shown, fmt.Sprintf(format, a...), Usage)
	}
	lower := strings.ToLower(strings.TrimSpace(raw))
	switch {
	case lower == "":
		return Target{}, fmt.Errorf("catalog is empty: %s", Usage)
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"), isKeywordDSN(raw):
		return parsePostgres(raw, shown)
	case strings.HasPrefix(lower, "sqlite:"):
		p := strings.TrimPrefix(raw[len("sqlite:"):], "//") // sqlite:///abs/path, sqlite://rel/path
		if p == "" {
			return refuse("sqlite: names no file")
		}
		return parseSQLite(p, true, o, refuse)
	case uriScheme.MatchString(raw) && !isFile(raw):
		scheme, _, _ := strings.Cut(raw, ":")
		return refuse("unsupported scheme %q", scheme)
	}
	return parseSQLite(raw, false, o, refuse)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func parseSQLite(p string, explicit bool, o Options, refuse func(string, ...any) (Target, error)) (Target, error) {
	if strings.Contains(p, "?") {
		return refuse("a SQLite path takes no query")
	}
	st, err := os.Stat(p)
	switch {
	case err == nil && st.IsDir():
		return refuse("is a directory: name the catalog file in it, e.g. %s", filepath.Join(p, "catalog.db"))
	case err == nil && !st.Mode().IsRegular():
		return refuse("is not a regular file")
	case err == nil:
		return Target{kind: SQLite, path: p}, nil
	case !errors.Is(err, fs.ErrNotExist):
		return refuse("%v", errors.Unwrap(err))
	case !o.Create:
		if explicit {
			return refuse("no such file (add --create to start a new SQLite catalog there)")
		}
		return refuse("no such file, and not a Postgres connection string")
	}
	return Target{kind: SQLite, path: p, create: true}, nil
}

func parsePostgres(raw, shown string) (Target, error) {
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		// pgx redacts the string it quotes; the password is masked again in case a
		// later version does not.
		return Target{}, fmt.Errorf("catalog %q: not a valid Postgres connection string: %v: %s", shown, redact.Error(errors.Unwrap(err), secretsOf(raw)...), Usage)
	}
	cc := cfg.ConnConfig
	t := Target{kind: Postgres, dsn: raw, password: cc.Password}
	t.verified = cc.TLSConfig != nil && !cc.TLSConfig.InsecureSkipVerify
	t.remote = !strings.HasPrefix(cc.Host, "/") && !isLoopback(cc.Host)
	return t, nil
}

// secretsOf finds the password in a connection string pgx could not parse, for
// masking pgx's message about it.
func secretsOf(raw string) []string {
	if u, err := url.Parse(raw); err == nil {
		p, _ := u.User.Password()
		return []string{p, u.Query().Get("password")}
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Kind is the backend the target names.
func (t Target) Kind() Kind { return t.kind }

// Path is the SQLite file ("" for Postgres).
func (t Target) Path() string { return t.path }

// ConnString is the Postgres connection string as given, password included: for
// opening other connections to the same database (bench's floor). Never print it.
func (t Target) ConnString() string { return t.dsn }

// Redact masks the target's password in err's message, for errors of other
// connections opened with ConnString (nil stays nil).
func (t Target) Redact(err error) error { return redact.Error(err, t.password) }

// String names the catalog for logs and messages, password masked.
func (t Target) String() string {
	if t.kind == SQLite {
		return t.path
	}
	return redact.String(t.dsn)
}

// GoString keeps %#v (a panic's or a test's dump) from printing the password.
func (t Target) GoString() string { return fmt.Sprintf("open.Target{%s %q}", t.kind, t.String()) }

// LogValue keeps slog from printing the password.
func (t Target) LogValue() slog.Value { return slog.StringValue(t.String()) }

// Warnings are what an operator should hear at start-up about a target that works but
// is not safe: a Postgres server across the network whose certificate is not verified.
func (t Target) Warnings() []string {
	if t.kind == Postgres && t.remote && !t.verified {
		return []string{"the catalog's Postgres connection does not verify the server's certificate and host name " +
			"(sslmode is disable, allow, prefer, require or verify-ca): anyone on the path can read or change the catalog; " +
			"add sslmode=verify-full and sslrootcert=/path/to/ca.pem (on RDS, the region's CA bundle)"}
	}
	return nil
}

// WithParams returns the target with each Postgres parameter of defaults added where
// the connection string does not set it (Lambda's pool size and query mode); a SQLite
// target comes back unchanged.
func (t Target) WithParams(defaults map[string]string) (Target, error) {
	if t.kind != Postgres || len(defaults) == 0 {
		return t, nil
	}
	set, err := params(t.dsn)
	if err != nil {
		return Target{}, fmt.Errorf("catalog %q: %w", t.String(), err)
	}
	dsn := t.dsn
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		for k, v := range defaults {
			if _, ok := set[k]; !ok {
				q.Set(k, v)
			}
		}
		u.RawQuery = q.Encode()
		dsn = u.String()
	} else {
		for _, k := range sortedKeys(defaults) {
			if _, ok := set[k]; !ok {
				dsn += " " + k + "='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(defaults[k]) + "'"
			}
		}
	}
	return parsePostgres(dsn, redact.String(dsn))
}

// Open opens the catalog: Postgres (applying migrations), or the SQLite file (created,
// with its directory, only when the target allows it).
func (t Target) Open(ctx context.Context, opts catalog.Options) (catalog.Backend, error) {
	switch t.kind {
	case Postgres:
		c, err := postgres.Open(ctx, t.dsn, opts)
		if err != nil {
			return nil, t.Redact(err)
		}
		return c, nil
	case SQLite:
		if t.create {
			if err := os.MkdirAll(filepath.Dir(t.path), 0o755); err != nil {
				return nil, fmt.Errorf("catalog: create directory for %s: %w", t.path, err)
			}
		} else if !isFile(t.path) {
			// Checked again: the file may have gone since Parse, and sqlite.Open would
			// quietly create an empty catalog in its place.
			return nil, fmt.Errorf("catalog %q: no such file: %s", t.path, Usage)
		}
		c, err := sqlite.Open(ctx, t.path, opts)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return nil, errors.New("catalog: open: empty target (use Parse)")
}

// Open parses raw and opens it.
func Open(ctx context.Context, raw string, o Options, opts catalog.Options) (catalog.Backend, error) {
	t, err := Parse(raw, o)
	if err != nil {
		return nil, err
	}
	return t.Open(ctx, opts)
}
