package deploy

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command         []string                  `yaml:"command"`
	Environment     map[string]string         `yaml:"environment"`
	DependsOn       map[string]map[string]any `yaml:"depends_on"`
	Ports           []string                  `yaml:"ports"`
	Volumes         []string                  `yaml:"volumes"`
	Restart         string                    `yaml:"restart"`
	StopGracePeriod string                    `yaml:"stop_grace_period"`
	Healthcheck     *struct {
		Test     []string `yaml:"test"`
		Interval string   `yaml:"interval"`
		Timeout  string   `yaml:"timeout"`
		Retries  int      `yaml:"retries"`
	} `yaml:"healthcheck"`
}

var composeFiles = []string{"compose.yaml", "../localstack/compose.yaml"}

// serveEnvVars lists the environment variables `strata serve` reads, from its own help.
func serveEnvVars(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "run", "../cmd/strata", "serve", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("strata serve -h: %v\n%s", err, out)
	}
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile(`env (STRATA_[A-Z_]+)`).FindAllStringSubmatch(string(out), -1) {
		vars[m[1]] = true
	}
	if !vars["STRATA_CATALOG"] || !vars["STRATA_API_KEYS"] {
		t.Fatalf("serve -h lists no STRATA_CATALOG or STRATA_API_KEYS:\n%s", out)
	}
	return vars
}

// TestComposeFiles: each compose file parses, references only services and volumes it
// defines, pins its images, builds Strata from the repository's Dockerfile, and
// configures it with variables `strata serve` reads, pointing at its own services.
func TestComposeFiles(t *testing.T) {
	known := serveEnvVars(t)
	for _, name := range composeFiles {
		t.Run(filepath.Base(filepath.Dir(name))+"/"+filepath.Base(name), func(t *testing.T) {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			var cf composeFile
			dec := yaml.NewDecoder(strings.NewReader(string(b)))
			dec.KnownFields(true)
			if err := dec.Decode(&cf); err != nil {
				t.Fatalf("parse: %v", err)
			}
			if cf.Name == "" || len(cf.Services) < 3 {
				t.Fatalf("name %q, %d services", cf.Name, len(cf.Services))
			}
			for sname, s := range cf.Services {
				for dep := range s.DependsOn {
					if _, ok := cf.Services[dep]; !ok {
						t.Errorf("%s depends on unknown service %s", sname, dep)
					}
				}
				if s.Image != "" {
					_, tag, ok := strings.Cut(s.Image[strings.LastIndex(s.Image, "/")+1:], ":")
					if !ok || tag == "" || tag == "latest" {
						t.Errorf("%s: image %s is not pinned to a version", sname, s.Image)
					}
				}
				for _, v := range s.Volumes {
					src, _, _ := strings.Cut(v, ":")
					if strings.HasPrefix(src, ".") {
						if _, err := os.Stat(filepath.Join(filepath.Dir(name), src)); err != nil {
							t.Errorf("%s mounts %s: %v", sname, src, err)
						}
					} else if _, ok := cf.Volumes[src]; !ok {
						t.Errorf("%s uses undeclared volume %s", sname, src)
					}
				}
			}
			st, ok := cf.Services["strata"]
			if !ok || st.Build == nil {
				t.Fatal("no strata service built from the repository")
			}
			// Compose's stop grace period must outlast --shutdown-timeout (30s), or the
			// writer is killed mid-drain.
			if st.StopGracePeriod != "40s" {
				t.Errorf("strata stop_grace_period %q: want 40s (above the 30s shutdown timeout)", st.StopGracePeriod)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(name), st.Build.Context, st.Build.Dockerfile)); err != nil {
				t.Errorf("strata's build does not find the Dockerfile: %v", err)
			}
			for k := range st.Environment {
				if strings.HasPrefix(k, "STRATA_") && !known[k] {
					t.Errorf("strata environment sets %s, which strata serve does not read", k)
				}
			}
			cat, err := url.Parse(st.Environment["STRATA_CATALOG"])
			if err != nil || cf.Services[cat.Hostname()].Image == "" {
				t.Errorf("STRATA_CATALOG %q does not point at a service of this file", st.Environment["STRATA_CATALOG"])
			} else if _, ok := st.DependsOn[cat.Hostname()]; !ok {
				t.Errorf("strata does not wait for %s", cat.Hostname())
			}
			bucket, err := url.Parse(st.Environment["STRATA_BUCKET"])
			if err != nil || bucket.Scheme != "s3" {
				t.Fatalf("STRATA_BUCKET %q is not an s3:// URL", st.Environment["STRATA_BUCKET"])
			}
			ep, err := url.Parse(bucket.Query().Get("endpoint"))
			if err != nil || cf.Services[ep.Hostname()].Image == "" {
				t.Errorf("the bucket's endpoint %q is not a service of this file", bucket.Query().Get("endpoint"))
			} else if _, ok := st.DependsOn[ep.Hostname()]; !ok {
				t.Errorf("strata does not wait for %s", ep.Hostname())
			}
			if !strings.HasPrefix(st.Environment["STRATA_API_KEYS"], "${STRATA_API_KEYS") {
				t.Errorf("STRATA_API_KEYS is not taken from the environment: %q", st.Environment["STRATA_API_KEYS"])
			}
			if len(st.Ports) == 0 || !strings.HasSuffix(st.Ports[0], ":8080") {
				t.Errorf("strata ports %v: want 8080 published", st.Ports)
			}
			// Credentials match the store they talk to.
			if minio, ok := cf.Services["minio"]; ok {
				if st.Environment["AWS_ACCESS_KEY_ID"] != minio.Environment["MINIO_ROOT_USER"] ||
					st.Environment["AWS_SECRET_ACCESS_KEY"] != minio.Environment["MINIO_ROOT_PASSWORD"] {
					t.Error("strata's AWS credentials are not MinIO's root credentials")
				}
				if st.Environment["STRATA_CREATE_BUCKET"] != "true" {
					t.Error("nothing creates the bucket in MinIO: set STRATA_CREATE_BUCKET")
				}
			}
			if ls, ok := cf.Services["localstack"]; ok {
				if !strings.Contains(ls.Environment["LOCALSTACK_AUTH_TOKEN"], "${LOCALSTACK_AUTH_TOKEN:?") {
					t.Error("LOCALSTACK_AUTH_TOKEN should be required from the environment, with a message")
				}
				script, err := os.ReadFile(filepath.Join(filepath.Dir(name), "init/ready.d/10-bucket.sh"))
				if err != nil {
					t.Fatal(err)
				}
				if ls.Environment["STRATA_TEST_BUCKET"] != bucket.Host || !strings.Contains(string(script), "create-bucket") {
					t.Errorf("the init script does not create bucket %s", bucket.Host)
				}
				if out, err := exec.Command("bash", "-n", filepath.Join(filepath.Dir(name), "init/ready.d/10-bucket.sh")).CombinedOutput(); err != nil {
					t.Errorf("init script: %v\n%s", err, out)
				}
			}
		})
	}
}

// TestSmokeScriptUsage: the script refuses to run without a URL, and fails (rather
// than passes) against a server that is not there.
func TestSmokeScriptUsage(t *testing.T) {
	cmd := exec.Command("bash", "smoke.sh")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if out, err := cmd.CombinedOutput(); err == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "usage") {
		t.Errorf("smoke.sh without a URL: %v\n%s", err, out)
	}
	cmd = exec.Command("bash", "smoke.sh", "http://"+freeAddr(t))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SMOKE_TIMEOUT=2"}
	if out, err := cmd.CombinedOutput(); err == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "FAIL") {
		t.Errorf("smoke.sh against nothing: %v\n%s", err, out)
	}
}
