// Package testsvc finds the services integration tests run against: Postgres and MinIO
// started by scripts/services.sh (their addresses in STRATA_TEST_* variables), and
// private Postgres instances for tests that restart the database. Under CI a missing
// service fails the test instead of skipping it.
package testsvc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/internal/testkit/privatepg"
)

// Require returns the value of env var name, or skips (fails under CI) when unset.
func Require(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		Unavailable(t, "set %s (eval \"$(scripts/services.sh)\") to run against the real service", name)
	}
	return v
}

// Unavailable skips a test whose services are missing or not as scripts/services.sh
// makes them, saying why, or fails it under CI, which must run every test.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must run against the services scripts/services.sh starts: "+format, args...)
	}
	t.Skipf(format, args...)
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// PostgresDSN creates a fresh database on the test server and returns its DSN; the
// database is dropped when the test ends.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	base := Require(t, "STRATA_TEST_POSTGRES")
	return CreateDatabase(t, base)
}

// CreateDatabase creates a fresh database on the server base points at.
func CreateDatabase(t testing.TB, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("testsvc: connect to %s: %v", base, err)
	}
	defer conn.Close(ctx)
	name := "strata_t_" + randomSuffix()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testsvc: create database: %v", err)
	}
	created.Store(name, true)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("testsvc: parse dsn: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// S3 describes the test MinIO.
type S3 struct {
	Endpoint, AccessKey, SecretKey, Region string
}

// MinIO returns the test MinIO's coordinates.
func MinIO(t testing.TB) S3 {
	t.Helper()
	return S3{
		Endpoint:  Require(t, "STRATA_TEST_S3_ENDPOINT"),
		AccessKey: os.Getenv("STRATA_TEST_S3_ACCESS_KEY"),
		SecretKey: os.Getenv("STRATA_TEST_S3_SECRET_KEY"),
		Region:    os.Getenv("STRATA_TEST_S3_REGION"),
	}
}

// BucketName returns a fresh, valid bucket name for a test.
func BucketName() string { return "strata-t-" + randomSuffix() }

// Postgres is a private Postgres instance a test may stop and restart without
// disturbing other tests that share the main server.
type Postgres struct {
	*privatepg.Instance
}

// StartPrivatePostgres initialises and starts a private instance in a temporary
// directory (as the postgres user when the test runs as root), stopped and removed when
// the test ends; settings are server settings (name=value, e.g. wal_level=logical).
func StartPrivatePostgres(t testing.TB, settings ...string) *Postgres {
	t.Helper()
	Require(t, "STRATA_TEST_POSTGRES") // the same prerequisites as the shared server
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := privatepg.Start(ctx, "", settings...)
	if err != nil {
		t.Fatalf("testsvc: %v", err)
	}
	t.Cleanup(func() {
		_ = p.Stop(context.Background(), "fast")
		_ = p.Remove()
	})
	return &Postgres{p}
}

// Start starts (or restarts after Stop) the instance and waits until it accepts.
func (p *Postgres) Start(t testing.TB) {
	t.Helper()
	if err := p.Instance.Start(context.Background()); err != nil {
		t.Fatalf("testsvc: %v", err)
	}
}

// Stop stops the instance: mode "immediate" is a crash, "fast" a clean shutdown. An
// instance already stopped is not an error.
func (p *Postgres) Stop(t testing.TB, mode string) {
	t.Helper()
	_ = p.Instance.Stop(context.Background(), mode)
}

// FreePort returns a TCP port free on loopback right now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// KeywordDSN is the Postgres URL dsn as a libpq keyword/value string (host=... port=...
// user=... password='...' dbname=... sslmode=...), for tests of that form.
func KeywordDSN(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("testsvc: parse %s: %v", dsn, err)
	}
	pass, _ := u.User.Password()
	mode := u.Query().Get("sslmode")
	if mode == "" {
		mode = "prefer"
	}
	return fmt.Sprintf("host=%s port=%s user=%s password='%s' dbname=%s sslmode=%s",
		u.Hostname(), u.Port(), u.User.Username(), pass, strings.TrimPrefix(u.Path, "/"), mode)
}

// Kcat returns the path of kcat (Debian's 1.7.1, librdkafka 2.0.2), the Kafka
// listener's reference client, which scripts/services.sh installs; it skips the test
// without it, or fails it under CI.
func Kcat(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kcat is not installed: CI must run the Kafka client tests (scripts/services.sh installs it)")
		}
		t.Skip("kcat is not installed (apt-get install kcat, or run scripts/services.sh)")
	}
	return p
}

// CDCPostgresDSN creates a fresh database on the change-data-capture test server
// (STRATA_TEST_CDC_POSTGRES: wal_level=logical, separate from the catalog's) and
// returns its DSN; when the test ends, the database's replication slots are dropped
// (a slot pins WAL, and blocks dropping its database), then the database.
func CDCPostgresDSN(t testing.TB) string {
	t.Helper()
	base := Require(t, "STRATA_TEST_CDC_POSTGRES")
	dropStaleSlots(t, base)
	dsn := CreateDatabase(t, base)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = current_database() AND active_pid IS NOT NULL`)
		for range 50 {
			var n int
			_ = c.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = current_database() AND active_pid IS NOT NULL`).Scan(&n)
			if n == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = c.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database()`)
	})
	return dsn
}

// created holds the databases this process made: theirs are never stale.
var created sync.Map

// dropStaleSlots drops the replication slots a killed earlier test run left behind in
// the test databases (the cleanup that drops them never ran): slot names are
// cluster-wide, so a test's slot would collide with them. A logical slot is dropped
// from its own database, which is then dropped too. The databases of this process are
// left alone (their slots are idle between polls, not stale); one test process uses
// the CDC cluster at a time (scripts/test.sh's first lane).
func dropStaleSlots(t testing.TB, base string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("testsvc: connect to %s: %v", base, err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT DISTINCT database FROM pg_replication_slots WHERE NOT active AND database LIKE 'strata_t_%'`)
	if err != nil {
		t.Fatalf("testsvc: list replication slots: %v", err)
	}
	dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("testsvc: list replication slots: %v", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("testsvc: parse dsn: %v", err)
	}
	for _, db := range dbs {
		if _, ours := created.Load(db); ours {
			continue
		}
		u.Path = "/" + db
		c, err := pgx.Connect(ctx, u.String())
		if err != nil {
			continue // gone meanwhile
		}
		_, err = c.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database() AND NOT active`)
		c.Close(ctx)
		if err != nil {
			t.Logf("testsvc: drop stale replication slots of %s: %v", db, err)
			continue
		}
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
	}
}
