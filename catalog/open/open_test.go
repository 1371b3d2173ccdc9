package open

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/tlsreload/tlstest"
)

const secret = "hunter2-sekrit"

func TestParse(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "catalog.db")
	if err := os.WriteFile(existing, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "no", "such.db")
	for _, tc := range []struct {
		name    string
		in      string
		create  bool
		kind    Kind
		shown   string // Target.String
		wantErr string // substring; "" wants success
	}{
		{name: "url", in: "postgres://u:" + secret + "@db:5432/strata?sslmode=verify-full", kind: Postgres, shown: "postgres://u:xxxxx@db:5432/strata?sslmode=verify-full"},
		{name: "postgresql url", in: "postgresql://db/strata", kind: Postgres, shown: "postgresql://db/strata"},
		{name: "password in query", in: "postgres://u@db/strata?password=" + secret, kind: Postgres, shown: "postgres://u@db/strata?password=xxxxx"},
		{name: "keyword dsn", in: "host=db user=u password=" + secret + " dbname=strata", kind: Postgres, shown: "host=db user=u password=xxxxx dbname=strata"},
		{name: "keyword dsn quoted", in: "host=db password='" + secret + " x' dbname=strata", kind: Postgres, shown: "host=db password=xxxxx dbname=strata"},
		{name: "sqlite existing", in: "sqlite:" + existing, kind: SQLite, shown: existing},
		{name: "sqlite triple slash", in: "sqlite://" + existing, kind: SQLite, shown: existing},
		{name: "plain existing path", in: existing, kind: SQLite, shown: existing},
		{name: "sqlite new with create", in: "sqlite:" + missing, create: true, kind: SQLite, shown: missing},
		{name: "plain new with create", in: missing, create: true, kind: SQLite, shown: missing},

		{name: "empty", in: "", wantErr: "catalog is empty"},
		{name: "a file name with '='", in: "x=1.db", wantErr: "no such file, and not a Postgres connection string"},
		{name: "plain missing path", in: "/no/such/file", wantErr: `catalog "/no/such/file": no such file, and not a Postgres connection string`},
		{name: "sqlite missing path", in: "sqlite:" + missing, wantErr: "no such file (add --create"},
		{name: "empty sqlite", in: "sqlite:", wantErr: "names no file"},
		{name: "directory", in: dir, create: true, wantErr: "is a directory"},
		{name: "query on a path", in: "sqlite:x.db?mode=rwc", create: true, wantErr: "takes no query"},
		{name: "other scheme", in: "mysql://u:" + secret + "@db/x", wantErr: `unsupported scheme "mysql"`},
		{name: "typo scheme", in: "postgress://db/x", create: true, wantErr: `unsupported scheme "postgress"`},
		{name: "bad url", in: "postgres://u:" + secret + "@db:notaport/x", wantErr: "not a valid Postgres connection string"},
		{name: "bad keyword dsn", in: "host=db password='" + secret, wantErr: "not a valid Postgres connection string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in, Options{Create: tc.create})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
				}
				// Every refusal shows both forms.
				for _, form := range []string{"postgres://USER:PASSWORD@HOST", "host=HOST user=USER", "sqlite:PATH", "--create"} {
					if !strings.Contains(err.Error(), form) {
						t.Errorf("refusal %q does not show %q", err, form)
					}
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("refusal shows the password: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if got.Kind() != tc.kind || got.String() != tc.shown {
				t.Errorf("Parse(%q) = %s %q, want %s %q", tc.in, got.Kind(), got.String(), tc.kind, tc.shown)
			}
			var logged bytes.Buffer
			slog.New(slog.NewJSONHandler(&logged, nil)).Info("open", "catalog", got)
			for _, printed := range []string{fmt.Sprint(got), fmt.Sprintf("%v %+v %#v %s", got, got, got, got), logged.String()} {
				if strings.Contains(printed, secret) {
					t.Errorf("printing the target shows the password: %s", printed)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Dir(missing)); err == nil {
		t.Error("Parse created the directory of a new SQLite path")
	}
}

func TestWithParams(t *testing.T) {
	defaults := map[string]string{"default_query_exec_mode": "exec", "pool_max_conns": "2"}
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:" + secret + "@db/x", "postgres://u:xxxxx@db/x?default_query_exec_mode=exec&pool_max_conns=2"},
		{"postgres://db/x?pool_max_conns=9", "postgres://db/x?default_query_exec_mode=exec&pool_max_conns=9"},
		{"host=db password=" + secret, "host=db password=xxxxx default_query_exec_mode='exec' pool_max_conns='2'"},
		{"host=db pool_max_conns = '9' default_query_exec_mode=simple_protocol", "host=db pool_max_conns = '9' default_query_exec_mode=simple_protocol"},
	} {
		tg, err := Parse(tc.in, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := tg.WithParams(defaults)
		if err != nil || got.String() != tc.want {
			t.Errorf("WithParams(%q) = %q, %v; want %q", tc.in, got.String(), err, tc.want)
		}
	}
	sq, _ := Parse("sqlite:x.db", Options{Create: true})
	if got, err := sq.WithParams(defaults); err != nil || got != sq {
		t.Errorf("WithParams changed a SQLite target: %v, %v", got, err)
	}
}

func TestWarnings(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, tlstest.New(t, "test CA").CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		warn bool
	}{
		{"postgres://u@db.example.com/x", true}, // pgx's default, prefer
		{"postgres://u@db.example.com/x?sslmode=require", true},
		{"postgres://u@db.example.com/x?sslmode=verify-ca&sslrootcert=" + ca, true},
		{"postgres://u@db.example.com/x?sslmode=verify-full&sslrootcert=" + ca, false},
		{"postgres://u@db.example.com/x?sslmode=verify-full&sslrootcert=system", false},
		{"host=db.example.com sslmode=verify-full sslrootcert=system", false},
		{"postgres://u@127.0.0.1/x?sslmode=disable", false},
		{"host=/var/run/postgresql dbname=x", false},
	} {
		tg, err := Parse(tc.in, Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if w := tg.Warnings(); (len(w) > 0) != tc.warn {
			t.Errorf("%s: warnings %q, want a warning: %v", tc.in, w, tc.warn)
		}
	}
}

func TestOpenSQLite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "catalog.db")
	c, err := Open(t.Context(), "sqlite:"+p, Options{Create: true}, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(t.Context(), "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// Now it exists: a plain path opens it without Create, and sees the topic.
	c, err = Open(t.Context(), p, Options{}, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Topic(t.Context(), "orders"); err != nil {
		t.Errorf("reopened catalog: %v", err)
	}

	// A target parsed while the file existed does not recreate it once it is gone.
	q := filepath.Join(dir, "gone.db")
	if err := os.WriteFile(q, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tg, err := Parse(q, Options{})
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(q)
	if _, err := tg.Open(t.Context(), catalog.Options{}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Open of a vanished file: %v", err)
	}
	if _, err := os.Stat(q); err == nil {
		t.Error("Open created the vanished file")
	}
}

// TestOpenPostgres opens the test server's database with each form of connection
// string, and checks that a wrong password or an unverifiable certificate fails
// without printing the password.
func TestOpenPostgres(t *testing.T) {
	dsn := testsvc.PostgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pass, _ := u.User.Password()
	keyword := testsvc.KeywordDSN(t, dsn)
	for _, dsn := range []string{u.String(), keyword} {
		c, err := Open(t.Context(), dsn, Options{}, catalog.Options{CommitTimeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("Open(%s): %v", redactForTest(dsn), err)
		}
		if _, err := c.Now(t.Context()); err != nil {
			t.Errorf("Now: %v", err)
		}
		c.Close()
	}

	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	wrong := *u
	wrong.User = url.UserPassword(u.User.Username(), secret)
	wrongKeyword := strings.Replace(keyword, "password='"+pass+"'", "password='"+secret+"'", 1)
	// sslmode is honoured: verify-full refuses the test server (no TLS, or a
	// self-signed certificate) instead of falling back to an unverified connection.
	verify := *u
	q := verify.Query()
	q.Set("sslmode", "verify-full")
	q.Set("password", secret)
	verify.RawQuery = q.Encode()
	verify.User = url.User(u.User.Username())
	for _, dsn := range []string{wrong.String(), wrongKeyword, verify.String()} {
		_, err := Open(t.Context(), dsn, Options{}, catalog.Options{Logger: log})
		if err == nil {
			t.Errorf("Open(%s) succeeded", redactForTest(dsn))
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v", err), secret) {
			t.Errorf("the error shows the password: %v", err)
		}
		t.Logf("%s: %v", redactForTest(dsn), err)
	}
	if strings.Contains(logged.String(), secret) {
		t.Errorf("the log shows the password:\n%s", logged.String())
	}
}

func redactForTest(dsn string) string { return strings.ReplaceAll(dsn, secret, "…") }
