package jepsen

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ClusterConfig describes a cluster of real `strata serve` processes sharing one
// catalog and one bucket.
type ClusterConfig struct {
	// Binary is the strata binary.
	Binary string
	// Roles are the API nodes' --roles, one node each. Default: a writer, a reader,
	// and a node running both.
	Roles []string
	// Compactor adds a node running only the compactor role, with settings that make
	// it merge, and delete merged objects, within seconds.
	Compactor bool
	// Catalog is the --catalog DSN; Bucket the --bucket URL.
	Catalog, Bucket string
	// Env is the processes' environment (credentials).
	Env []string
	// CommitTimeout is every node's --commit-timeout. Default 3s (the least allowed),
	// so unknown commits settle and orphans age quickly.
	CommitTimeout time.Duration
	// Dir receives each process's log (NAME.log).
	Dir string
	// Kafka: every node running both the writer and the reader role also serves the
	// Kafka protocol (KafkaAddrs), with a short node lease so that a dead node leaves
	// clients' view quickly. The default roles then have two such nodes.
	Kafka bool
}

// Proc is one `strata serve` process, which faults may kill, restart, pause and
// resume.
type Proc struct {
	Name string
	URL  string
	// Kafka is the node's Kafka listener, "" when it has none.
	Kafka string
	bin   string
	args  []string
	env   []string
	log   string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
}

// Cluster is a running set of processes.
type Cluster struct {
	cfg   ClusterConfig
	Procs []*Proc // the API nodes in the order of Roles, then the compactor
}

// StartCluster starts the processes and waits until the writer+reader nodes are ready.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if len(cfg.Roles) == 0 {
		cfg.Roles = []string{"writer", "reader", "writer,reader"}
		if cfg.Kafka {
			cfg.Roles = append(cfg.Roles, "writer,reader")
		}
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 3 * time.Second
	}
	c := &Cluster{cfg: cfg}
	common := []string{"serve", "--catalog", cfg.Catalog, "--bucket", cfg.Bucket, "--log-level", "warn",
		"--commit-timeout", cfg.CommitTimeout.String(), "--shutdown-timeout", "5s", "--linger", "20ms"}
	for i, roles := range cfg.Roles {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p := &Proc{Name: fmt.Sprintf("node%d-%s", i, strings.ReplaceAll(roles, ",", "+")), URL: "http://" + addr,
			args: append(append([]string(nil), common...), "--roles", roles, "--listen", addr)}
		if rs := strings.Split(roles, ","); cfg.Kafka && slices.Contains(rs, "writer") && slices.Contains(rs, "reader") {
			kport, err := freePort()
			if err != nil {
				return nil, err
			}
			p.Kafka = "127.0.0.1:" + strconv.Itoa(kport)
			p.args = append(p.args, "--kafka-listen", p.Kafka, "--kafka-node-lease", "3s")
		}
		c.Procs = append(c.Procs, p)
	}
	if cfg.Compactor {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		c.Procs = append(c.Procs, &Proc{Name: "compactor", URL: "http://" + addr,
			args: append(append([]string(nil), common...), "--roles", "compactor", "--listen", addr,
				"--compact-interval", "300ms", "--grace-period", "1s", "--sweep-interval", "2s")})
	}
	for _, p := range c.Procs {
		p.bin, p.env = cfg.Binary, cfg.Env
		p.log = filepath.Join(cfg.Dir, p.Name+".log")
		if err := p.start(); err != nil {
			c.Close()
			return nil, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := WaitReady(rctx, c.NodeURLs()); err != nil {
		c.Close()
		return nil, fmt.Errorf("jepsen: cluster not ready: %w\n%s", err, c.Logs())
	}
	return c, nil
}

// NodeURLs are the API nodes' URLs.
func (c *Cluster) NodeURLs() []string {
	var out []string
	for _, p := range c.Procs[:len(c.cfg.Roles)] {
		out = append(out, p.URL)
	}
	return out
}

// KafkaAddrs are the nodes' Kafka listeners.
func (c *Cluster) KafkaAddrs() []string {
	var out []string
	for _, p := range c.Procs {
		if p.Kafka != "" {
			out = append(out, p.Kafka)
		}
	}
	return out
}

// RoleURLs are the URLs of the nodes running role.
func (c *Cluster) RoleURLs(role string) []string {
	var out []string
	for i, p := range c.Procs[:len(c.cfg.Roles)] {
		if slices.Contains(strings.Split(c.cfg.Roles[i], ","), role) {
			out = append(out, p.URL)
		}
	}
	return out
}

// Logs returns the tail of every process's log.
func (c *Cluster) Logs() string {
	var b bytes.Buffer
	for _, p := range c.Procs {
		data, _ := os.ReadFile(p.log)
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.Name, p.log, data)
	}
	return b.String()
}

// Heal resumes paused processes and restarts dead ones, then waits until the nodes
// are ready.
func (c *Cluster) Heal(ctx context.Context) error {
	for _, p := range c.Procs {
		p.Resume()
		if !p.Running() {
			if err := p.start(); err != nil {
				return err
			}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return WaitReady(rctx, c.NodeURLs())
}

// Close stops every process: SIGTERM, then SIGKILL after 10s.
func (c *Cluster) Close() {
	for _, p := range c.Procs {
		p.Resume()
		p.signal(syscall.SIGTERM)
	}
	for _, p := range c.Procs {
		p.wait(10 * time.Second)
	}
}

func (p *Proc) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("jepsen: %s log: %w", p.Name, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("jepsen: start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done, p.paused = cmd, done, false
	p.mu.Unlock()
	return nil
}

// Running reports whether the process is alive (paused counts as alive).
func (p *Proc) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func (p *Proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil && p.Running() {
		_ = cmd.Process.Signal(sig)
	}
}

func (p *Proc) wait(d time.Duration) {
	p.mu.Lock()
	done, cmd := p.done, p.cmd
	p.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Kill sends SIGKILL and waits for the process to die.
func (p *Proc) Kill() {
	p.Resume()
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)
}

// Restart starts a killed process again on its address.
func (p *Proc) Restart() error {
	if p.Running() {
		return nil
	}
	return p.start()
}

// Pause sends SIGSTOP.
func (p *Proc) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !p.paused {
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
		p.paused = true
	}
}

// Resume sends SIGCONT to a paused process.
func (p *Proc) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.paused {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.paused = false
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("jepsen: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
