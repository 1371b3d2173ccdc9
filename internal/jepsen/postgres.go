package jepsen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/internal/redact"
)

// PrivatePostgres controls a Postgres instance of its own (a data directory and a
// port), which the pg-restart fault stops with -m immediate and starts again. Tests
// start one with testsvc.StartPrivatePostgres and wrap it with ControlPostgres; the
// torture command starts one with StartPrivatePostgres.
type PrivatePostgres struct {
	Dir  string // holds data/ and log
	Port int
	DSN  string
	bin  string
}

// ControlPostgres returns a controller for an instance whose data directory is
// dir/data, listening on port, started the way testsvc starts it.
func ControlPostgres(dir string, port int, dsn string) (*PrivatePostgres, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	return &PrivatePostgres{Dir: dir, Port: port, DSN: dsn, bin: bin}, nil
}

// StartPrivatePostgres initialises an instance in a new directory under parent and
// starts it, with a database "strata" for the catalog. Stop it with Stop(ctx, "fast")
// and remove Dir when done.
func StartPrivatePostgres(ctx context.Context, parent string) (*PrivatePostgres, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "strata-pg-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &PrivatePostgres{Dir: dir, Port: port, bin: bin,
		DSN: fmt.Sprintf("postgres://strata:strata@127.0.0.1:%d/strata?sslmode=disable", port)}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "postgres", dir).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("jepsen: chown %s: %v: %s", dir, err, out)
		}
	}
	pw := filepath.Join(dir, "pw")
	if err := p.run(ctx, "sh", "-c", "echo strata > "+pw); err != nil {
		return nil, err
	}
	if err := p.run(ctx, filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "strata", "--pwfile", pw, "-A", "md5"); err != nil {
		return nil, err
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	c, err := pgx.Connect(ctx, strings.Replace(p.DSN, "/strata?", "/postgres?", 1))
	if err != nil {
		return nil, fmt.Errorf("jepsen: connect private postgres: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE strata"); err != nil {
		return nil, fmt.Errorf("jepsen: create database: %w", err)
	}
	return p, nil
}

// Start starts the instance and waits until it accepts connections.
func (p *PrivatePostgres) Start(ctx context.Context) error {
	return p.run(ctx, filepath.Join(p.bin, "pg_ctl"), "-D", filepath.Join(p.Dir, "data"), "-l", filepath.Join(p.Dir, "log"),
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", p.Port, p.Dir), "-w", "start")
}

// Running reports whether the instance runs (pg_ctl status).
func (p *PrivatePostgres) Running(ctx context.Context) bool {
	return p.run(ctx, filepath.Join(p.bin, "pg_ctl"), "-D", filepath.Join(p.Dir, "data"), "status") == nil
}

// Stop stops the instance: "immediate" is a crash, "fast" a clean shutdown.
func (p *PrivatePostgres) Stop(ctx context.Context, mode string) error {
	return p.run(ctx, filepath.Join(p.bin, "pg_ctl"), "-D", filepath.Join(p.Dir, "data"), "-m", mode, "-w", "stop")
}

func (p *PrivatePostgres) run(ctx context.Context, name string, args ...string) error {
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		q := make([]string, 0, len(args)+1)
		for _, a := range append([]string{name}, args...) {
			q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
		}
		cmd = exec.CommandContext(ctx, "su", "postgres", "-c", strings.Join(q, " "))
	} else {
		cmd = exec.CommandContext(ctx, name, args...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("jepsen: %s %v: %w: %s", filepath.Base(name), args, err, out)
	}
	return nil
}

func postgresBin() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", fmt.Errorf("jepsen: no initdb under /usr/lib/postgresql: install postgresql")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

// CreateDatabase creates a fresh database on the server base points at (a role that
// may CREATE DATABASE) and returns its DSN.
func CreateDatabase(ctx context.Context, base string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("jepsen: connect to %s: %w", redact.String(base), err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "strata_torture_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("jepsen: create database: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}
