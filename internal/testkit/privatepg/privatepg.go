// Package privatepg runs a Postgres instance of a caller's own — a data directory and a
// port — which it may crash (pg_ctl stop -m immediate) and start again: the pg-restart
// fault of the reliability harness and the tests that restart the database. It is the
// one starter both use (testsvc wraps it for tests, internal/jepsen and `strata
// torture` call it directly).
//
// Postgres refuses to run as root, so as root every command runs as the postgres user,
// and the instance's directory is made where that user can reach it: a run directory
// under /root (mode 0700) cannot be traversed by postgres, which is how `strata torture
// --classes pg-restart` failed with "Permission denied" when run as root.
package privatepg

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Instance is one private Postgres.
type Instance struct {
	Dir      string // holds data/, log and the socket
	Port     int
	DSN      string // the database "strata", as user strata
	bin      string
	settings []string
}

// Start initialises an instance in a new directory under parent (the system's temporary
// directory when parent is empty, or when running as root and the postgres user could
// not reach parent) and starts it, with a database "strata" for the catalog. settings
// are server settings (name=value, e.g. wal_level=logical), kept for every restart.
// Stop it with Stop(ctx, "fast") and Remove it when done.
func Start(ctx context.Context, parent string, settings ...string) (*Instance, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	if asRoot() && parent != "" && !reachable(ctx, parent) {
		parent = ""
	}
	dir, err := os.MkdirTemp(parent, "strata-pg-")
	if err != nil {
		return nil, fmt.Errorf("privatepg: make the instance's directory: %w", err)
	}
	p, err := start(ctx, dir, bin, settings)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return p, nil
}

func start(ctx context.Context, dir, bin string, settings []string) (*Instance, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &Instance{Dir: dir, Port: port, bin: bin, settings: settings,
		DSN: fmt.Sprintf("postgres://strata:strata@127.0.0.1:%d/strata?sslmode=disable", port)}
	if asRoot() {
		if out, err := exec.CommandContext(ctx, "chown", "postgres", dir).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("privatepg: chown %s: %w: %s", dir, err, out)
		}
	}
	pw := filepath.Join(dir, "pw")
	if err := p.run(ctx, "sh", "-c", "echo strata > '"+pw+"'"); err != nil {
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
		_ = p.Stop(context.WithoutCancel(ctx), "immediate")
		return nil, fmt.Errorf("privatepg: connect: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := c.Exec(ctx, "CREATE DATABASE strata"); err != nil {
		_ = p.Stop(context.WithoutCancel(ctx), "immediate")
		return nil, fmt.Errorf("privatepg: create database: %w", err)
	}
	return p, nil
}

// Start starts (or restarts after Stop) the instance and waits until it accepts.
func (p *Instance) Start(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", p.Port, p.Dir)
	for _, s := range p.settings {
		opts += " -c " + s
	}
	return p.run(ctx, filepath.Join(p.bin, "pg_ctl"), "-D", filepath.Join(p.Dir, "data"), "-l", filepath.Join(p.Dir, "log"),
		"-o", opts, "-w", "start")
}

// Running reports whether the instance runs (pg_ctl status).
func (p *Instance) Running(ctx context.Context) bool {
	return p.run(ctx, filepath.Join(p.bin, "pg_ctl"), "-D", filepath.Join(p.Dir, "data"), "status") == nil
}

// Stop stops the instance: "immediate" is a crash, "fast" a clean shutdown.
func (p *Instance) Stop(ctx context.Context, mode string) error {
	return p.run(ctx, filepath.Join(p.bin, "pg_ctl"), "-D", filepath.Join(p.Dir, "data"), "-m", mode, "-w", "stop")
}

// Remove deletes the instance's directory (stop it first).
func (p *Instance) Remove() error { return os.RemoveAll(p.Dir) }

func (p *Instance) run(ctx context.Context, name string, args ...string) error {
	if out, err := command(ctx, name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("privatepg: %s %v: %w: %s", filepath.Base(name), args, err, out)
	}
	return nil
}

// command runs name as the postgres user when the process is root.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if !asRoot() {
		return exec.CommandContext(ctx, name, args...)
	}
	q := make([]string, 0, len(args)+1)
	for _, a := range append([]string{name}, args...) {
		q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	return exec.CommandContext(ctx, "su", "postgres", "-c", strings.Join(q, " "))
}

func asRoot() bool { return os.Geteuid() == 0 }

// reachable says whether the postgres user can enter dir (every directory above it
// searchable).
func reachable(ctx context.Context, dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	return command(ctx, "test", "-x", abs).Run() == nil
}

func binDir() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", errors.New("privatepg: no initdb under /usr/lib/postgresql: install postgresql (scripts/services.sh does)")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("privatepg: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
