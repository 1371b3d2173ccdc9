package deploy

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testsvc"
)

// repoRoot is the module root, the Docker build context.
const repoRoot = ".."

func readDockerfile(t *testing.T) *dockerfile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df, err := parseDockerfile(string(b))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return df
}

// buildStep is the Dockerfile's go build: the RUN that holds it, its stage, and the
// ARG values in scope.
type buildStep struct {
	stage   *stage
	run     instruction
	args    map[string]string // ARG defaults in scope
	output  string            // the -o path
	workdir string
}

func findBuild(t *testing.T, df *dockerfile) buildStep {
	t.Helper()
	var found []buildStep
	for i := range df.stages {
		st := &df.stages[i]
		args := map[string]string{}
		for _, a := range df.globalArgs {
			k, v, _ := strings.Cut(a.args, "=")
			args[k] = v
		}
		workdir := "/"
		for _, ins := range st.body {
			switch ins.cmd {
			case "ARG":
				k, v, _ := strings.Cut(ins.args, "=")
				args[k] = v
			case "WORKDIR":
				workdir = ins.args
			case "RUN":
				if strings.Contains(ins.args, "go build") {
					f := strings.Fields(ins.args)
					i := slices.Index(f, "-o")
					if i < 0 || i+1 >= len(f) {
						t.Fatalf("line %d: the go build has no -o OUTPUT", ins.line)
					}
					found = append(found, buildStep{stage: st, run: ins, args: maps(args), output: f[i+1], workdir: workdir})
				}
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one RUN with go build, found %d", len(found))
	}
	return found[0]
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestDockerfileShape: multi-stage, a static CGO_ENABLED=0 build, a small final image
// that copies only the binary, runs as a numeric non-root user, in exec form.
func TestDockerfileShape(t *testing.T) {
	df := readDockerfile(t)
	if len(df.stages) < 2 {
		t.Fatalf("%d stages: want a build stage and a final stage", len(df.stages))
	}
	b := findBuild(t, df)
	if b.stage == &df.stages[len(df.stages)-1] {
		t.Error("the go build runs in the final stage: build in a stage of its own")
	}
	if !regexp.MustCompile(`(^|\s)CGO_ENABLED=0\s`).MatchString(b.run.args) {
		t.Errorf("line %d: the go build does not set CGO_ENABLED=0: %s", b.run.line, b.run.args)
	}
	if !strings.Contains(b.run.args, "./cmd/strata") {
		t.Errorf("line %d: the go build does not build ./cmd/strata", b.run.line)
	}

	final := df.stages[len(df.stages)-1]
	if strings.Contains(final.image, "golang") || !(strings.Contains(final.image, "distroless/static") || final.image == "scratch") {
		t.Errorf("final image %s: want distroless/static or scratch (a static binary needs nothing else)", final.image)
	}
	var user, entry, cmd *instruction
	copied := false
	for i, ins := range final.body {
		switch ins.cmd {
		case "USER":
			user = &final.body[i]
		case "ENTRYPOINT":
			entry = &final.body[i]
		case "CMD":
			cmd = &final.body[i]
		case "COPY":
			if ins.flags["from"] == b.stage.name && strings.HasPrefix(ins.args, b.output+" ") {
				copied = true
			}
		case "RUN", "ADD":
			t.Errorf("line %d: %s in the final stage: it has no shell, and should only copy the binary", ins.line, ins.cmd)
		}
	}
	if !copied {
		t.Errorf("the final stage does not COPY --from=%s %s", b.stage.name, b.output)
	}
	if user == nil {
		t.Fatal("the final stage has no USER: it would run as root")
	}
	uid, _, _ := strings.Cut(user.args, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("line %d: USER %s: want a numeric, non-zero uid (Kubernetes' runAsNonRoot checks it)", user.line, user.args)
	}
	if user.line < final.from.line {
		t.Error("USER before the final FROM does not apply to it")
	}
	if entry == nil || entry.exec == nil || cmd == nil || cmd.exec == nil {
		t.Fatal("ENTRYPOINT and CMD must be in exec (JSON) form, so SIGTERM reaches strata rather than a shell")
	}
	if !slices.Equal(cmd.exec, []string{"serve"}) {
		t.Errorf("CMD %v, want [serve]", cmd.exec)
	}

	ignore, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(ignore))
	for _, want := range []string{".git", "strata-data/"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
	for _, need := range []string{"go.mod", "go.sum", "cmd", "*.go", "**/*.go"} {
		if slices.Contains(lines, need) {
			t.Errorf(".dockerignore excludes %s, which the build needs", need)
		}
	}
}

// TestDockerImageServesByEnvironment runs the Dockerfile's own build command (there is
// no Docker engine here), checks the result is a static binary, starts it as the image
// would — ENTRYPOINT and CMD, the image's ENV plus environment variables only — against
// a fresh Postgres database and MinIO bucket, runs deploy/smoke.sh against it, and
// stops it with SIGTERM.
func TestDockerImageServesByEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dsn := testsvc.PostgresDSN(t)
	s3 := testsvc.MinIO(t)
	df := readDockerfile(t)
	b := findBuild(t, df)
	final := df.stages[len(df.stages)-1]

	// The build command, with the ARGs a `docker build` on this machine would pass.
	bin := filepath.Join(t.TempDir(), "strata")
	vars := b.args
	vars["TARGETOS"], vars["TARGETARCH"], vars["VERSION"] = runtime.GOOS, runtime.GOARCH, "docker-test"
	build, err := expand(b.run.args, vars)
	if err != nil {
		t.Fatalf("line %d: %v", b.run.line, err)
	}
	build = strings.Replace(build, "-o "+b.output, "-o "+bin, 1)
	cmd := exec.Command("sh", "-c", build)
	cmd.Dir = repoRoot // COPY . . into WORKDIR: the build context is the module root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build command failed: %s\n%v\n%s", build, err, out)
	}
	checkStatic(t, bin)

	// Start it as the image: ENTRYPOINT + CMD, the image's ENV, then the deployment's.
	var entry, argv []string
	env := map[string]string{}
	for _, ins := range final.body {
		switch ins.cmd {
		case "ENTRYPOINT":
			entry = ins.exec
		case "CMD":
			argv = ins.exec
		case "ENV":
			kv, err := envPairs(ins)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range kv {
				env[k] = v
			}
		}
	}
	if len(entry) != 1 {
		t.Fatalf("ENTRYPOINT %v: want the binary alone", entry)
	}
	addr := freeAddr(t)
	const key = "docker-test-key-0123456789abcdef"
	bucket := testsvc.BucketName()
	env["STRATA_CATALOG"] = dsn
	env["STRATA_BUCKET"] = fmt.Sprintf("s3://%s/img?endpoint=%s&path_style=true&region=%s", bucket, url.QueryEscape(s3.Endpoint), s3.Region)
	env["STRATA_CREATE_BUCKET"] = "true"
	env["STRATA_LISTEN"] = addr
	env["STRATA_API_KEYS"] = key
	env["STRATA_LOG_LEVEL"] = "warn"
	env["AWS_ACCESS_KEY_ID"] = s3.AccessKey
	env["AWS_SECRET_ACCESS_KEY"] = s3.SecretKey
	srv := startServer(t, bin, argv, env)

	base := "http://" + addr
	smoke := exec.Command("bash", "smoke.sh", base)
	smoke.Env = append(os.Environ(), "STRATA_API_KEY="+key, "SMOKE_TIMEOUT=20")
	out, err := smoke.CombinedOutput()
	t.Logf("smoke.sh:\n%s", out)
	if err != nil {
		t.Fatalf("smoke.sh failed: %v", err)
	}
	for _, want := range []string{"ok    401 unauthorized", "ok    produce 3 records", "ok    fetch", "ok    SSE tail", " passed, 0 failed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("smoke.sh output lacks %q", want)
		}
	}

	// The smoke script's wrong key must fail it: it checks what it claims to.
	bad := exec.Command("bash", "smoke.sh", base)
	bad.Env = append(os.Environ(), "STRATA_API_KEY=not-the-right-key-000000000", "SMOKE_TIMEOUT=5")
	if out, err := bad.CombinedOutput(); err == nil {
		t.Errorf("smoke.sh passed with a wrong key:\n%s", out)
	}

	srv.stop(t, syscall.SIGTERM)
}

// checkStatic fails unless bin is an ELF executable with no interpreter and no shared
// libraries.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("%s is not an ELF binary: %v", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a dynamic loader (PT_INTERP): not a static build", bin)
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		t.Errorf("%s links shared libraries %v: not a static build", bin, libs)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(testsvc.FreePort(t))
}

type server struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServer runs bin with args and exactly env (plus PATH and HOME), and waits until
// /readyz answers 200 on STRATA_LISTEN.
func startServer(t *testing.T, bin string, args []string, env map[string]string) *server {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	s := &server{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("server output:\n%s", s.out.String())
		}
	})
	ready := "http://" + env["STRATA_LISTEN"] + "/readyz"
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", ready, nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case err := <-s.done:
			t.Fatalf("the server exited before it was ready: %v\n%s", err, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 60s\n%s", s.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends sig and expects a clean exit: the writer drained, exit status 0.
func (s *server) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit after %v: %v\n%s", sig, err, s.out.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("no exit 40s after %v", sig)
	}
}
