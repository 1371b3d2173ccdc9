package connect_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestRESTFlow walks Kafka Connect's REST API through a connector's life — create,
// status, pause and resume, stop, offsets get/patch/delete, restart, reconfigure,
// delete — and checks every answer's status and JSON shape, error bodies included.
func TestRESTFlow(t *testing.T) {
	tn := startNode(t, connect.WorkerConfig{})
	tn.createTopic(t, "lines", 1)
	in := filepath.Join(tn.dir, "in.jsonl")
	writeLines(t, in, `{"n":1}`, `{"n":2}`, `{"n":3}`)
	cfg := fmt.Sprintf(`{"connector.class":"FileSource","file":%s,"topic":"lines","db.password":"s3cret","tasks.max":1}`, quote(in))
	masked := fmt.Sprintf(`{"connector.class":"FileSource","file":%s,"topic":"lines","db.password":"[hidden]","tasks.max":"1","name":"src"}`, quote(in))

	tn.want(t, "GET", "/connectors", "", 200, `[]`)
	tn.want(t, "POST", "/connectors", `{"name":"src","config":`+cfg+`}`, 201,
		`{"name":"src","config":`+masked+`,"tasks":[{"connector":"src","task":0}],"type":"source"}`)
	tn.want(t, "POST", "/connectors", `{"name":"src","config":`+cfg+`}`, 409, `{"error_code":409,"message":"Connector src already exists"}`)
	tn.want(t, "POST", "/connectors", `{"name":"x","config":{"connector.class":"FileSource","topic":"lines","file":"/a"},"initial_state":"SLEEPING"}`, 400, `{"error_code":400,"message":"*"}`)
	tn.want(t, "POST", "/connectors", `not json`, 400, `{"error_code":400,"message":"*"}`)

	st := tn.waitState(t, "src", "RUNNING", 1)
	worker := st["connector"].(map[string]any)["worker_id"].(string)
	if !strings.HasPrefix(worker, "") || worker == "" {
		t.Fatalf("worker_id %q", worker)
	}
	tn.want(t, "GET", "/connectors/src/status", "", 200,
		`{"name":"src","connector":{"state":"RUNNING","worker_id":"`+worker+`"},"tasks":[{"id":0,"state":"RUNNING","worker_id":"`+worker+`","generation":"*"}],"type":"source"}`)
	tn.want(t, "GET", "/connectors/src", "", 200, `{"name":"src","config":`+masked+`,"tasks":[{"connector":"src","task":0}],"type":"source"}`)
	tn.want(t, "GET", "/v1/connectors/src/config", "", 200, masked)
	tn.want(t, "GET", "/connectors/src/tasks", "", 200, `[{"id":{"connector":"src","task":0},"config":`+strings.TrimSuffix(masked, "}")+`,"task.files":`+quote(in)+`}}]`)
	tn.want(t, "GET", "/connectors/src/tasks/0/status", "", 200, `{"id":0,"state":"RUNNING","worker_id":"`+worker+`","generation":"*"}`)
	tn.want(t, "GET", "/connectors/src/tasks/7/status", "", 404, `{"error_code":404,"message":"No status found for task src-7"}`)

	// The three lines arrive, and the offset with them.
	testwait.NoError(t, 10*time.Second, "the lines", func() error {
		if got := values(tn.readAll(t, "lines", 0)); len(got) != 3 {
			return fmt.Errorf("%d records", len(got))
		}
		return nil
	})
	end := `{"offsets":[{"partition":{"filename":` + quote(in) + `},"offset":{"position":24}}]}`
	tn.want(t, "GET", "/connectors/src/offsets", "", 200, end)
	tn.eventuallyWant(t, "GET", "/connectors/src/topics", "", 200, `{"src":{"topics":["lines"]}}`)

	tn.want(t, "PUT", "/connectors/src/pause", "", 202, "")
	tn.waitState(t, "src", "PAUSED", 1)
	writeLines(t, in, `{"n":4}`)
	// An absence: nothing may come. A second is ten of the source's polls (100 ms), so
	// a paused source that still polled would have produced the line by then.
	time.Sleep(time.Second)
	if got := values(tn.readAll(t, "lines", 0)); len(got) != 3 {
		t.Fatalf("a paused source produced: %v", got)
	}
	tn.want(t, "PUT", "/connectors/src/resume", "", 202, "")
	tn.waitState(t, "src", "RUNNING", 1)
	testwait.NoError(t, 10*time.Second, "the line written while paused", func() error {
		if got := values(tn.readAll(t, "lines", 0)); len(got) != 4 {
			return fmt.Errorf("%d records", len(got))
		}
		return nil
	})

	// Offsets are edited only while STOPPED.
	patch := `{"offsets":[{"partition":{"filename":` + quote(in) + `},"offset":{"position":8}}]}`
	notStopped := `{"error_code":400,"message":"Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/src/stop' endpoint"}`
	tn.want(t, "PATCH", "/connectors/src/offsets", patch, 400, notStopped)
	tn.want(t, "DELETE", "/connectors/src/offsets", "", 400, notStopped)
	tn.want(t, "PUT", "/connectors/src/stop", "", 204, "")
	tn.want(t, "GET", "/connectors/src/status", "", 200, `{"name":"src","connector":{"state":"STOPPED","worker_id":"`+worker+`"},"tasks":[],"type":"source"}`)
	tn.want(t, "GET", "/connectors/src", "", 200, `{"name":"src","config":`+masked+`,"tasks":[],"type":"source"}`)
	tn.want(t, "PATCH", "/connectors/src/offsets", patch, 200,
		`{"message":"The Connect framework-managed offsets for this connector have been altered successfully. However, if this connector manages offsets externally, they will need to be manually altered in the system that the connector uses."}`)
	tn.want(t, "GET", "/connectors/src/offsets", "", 200, patch)
	tn.want(t, "PATCH", "/connectors/src/offsets", `{"offsets":[]}`, 400, `{"error_code":400,"message":"The offsets to be altered may not be null or empty"}`)
	tn.want(t, "DELETE", "/connectors/src/offsets", "", 200,
		`{"message":"The Connect framework-managed offsets for this connector have been reset successfully. However, if this connector manages offsets externally, they will need to be manually reset in the system that the connector uses."}`)
	tn.want(t, "GET", "/connectors/src/offsets", "", 200, `{"offsets":[]}`)

	// Resumed after the reset, the source reads its file again from the start.
	tn.want(t, "PUT", "/connectors/src/resume", "", 202, "")
	tn.waitState(t, "src", "RUNNING", 1)
	testwait.NoError(t, 10*time.Second, "the file read again", func() error {
		if got := values(tn.readAll(t, "lines", 0)); len(got) != 8 {
			return fmt.Errorf("%d records", len(got))
		}
		return nil
	})
	st = tn.want(t, "POST", "/connectors/src/restart?includeTasks=true", "", 202,
		`{"name":"src","connector":{"state":"RUNNING","worker_id":"*"},"tasks":[{"id":0,"state":"RESTARTING","worker_id":"*","generation":"*"}],"type":"source"}`).(map[string]any)
	tn.waitState(t, "src", "RUNNING", 1)
	tn.want(t, "POST", "/connectors/src/restart?includeTasks=true&onlyFailed=true", "", 202,
		`{"name":"src","connector":{"state":"RUNNING","worker_id":"*"},"tasks":[{"id":0,"state":"RUNNING","worker_id":"*","generation":"*"}],"type":"source"}`)
	tn.want(t, "POST", "/connectors/src/restart", "", 204, "")
	tn.want(t, "POST", "/connectors/src/tasks/0/restart", "", 204, "")
	tn.want(t, "POST", "/connectors/src/tasks/5/restart", "", 404, `{"error_code":404,"message":"Task not found: src-5"}`)
	tn.want(t, "POST", "/connectors/src/restart?includeTasks=maybe", "", 400, `{"error_code":400,"message":"*"}`)

	// Reconfigure (200), create by config (201), the expanded list.
	tn.want(t, "PUT", "/connectors/src/config", cfg[:len(cfg)-1]+`,"batch.size":"1"}`, 200, `{"name":"src","config":"*","tasks":[{"connector":"src","task":0}],"type":"source"}`)
	tn.want(t, "PUT", "/connectors/other/config", `{"connector.class":"FileSource","file":"/nowhere","topic":"lines","name":"wrong"}`, 400,
		`{"error_code":400,"message":"Connector name configuration (wrong) doesn't match connector name in the URL (other)"}`)
	nowhere := quote(filepath.Join(tn.dir, "nowhere"))
	tn.want(t, "PUT", "/connectors/other/config", `{"connector.class":"FileSource","file":`+nowhere+`,"topic":"lines"}`, 201,
		`{"name":"other","config":{"connector.class":"FileSource","file":`+nowhere+`,"topic":"lines","name":"other"},"tasks":[{"connector":"other","task":0}],"type":"source"}`)
	tn.want(t, "GET", "/connectors", "", 200, `["other","src"]`)
	tn.want(t, "GET", "/connectors?expand=info", "", 200,
		`{"other":{"info":{"name":"other","config":"*","tasks":[{"connector":"other","task":0}],"type":"source"}},"src":{"info":{"name":"src","config":"*","tasks":[{"connector":"src","task":0}],"type":"source"}}}`)
	tn.want(t, "GET", "/connectors?expand=status&expand=info", "", 200, `{"other":{"info":"*","status":"*"},"src":{"info":"*","status":"*"}}`)
	tn.want(t, "PUT", "/connectors/src/topics/reset", "", 202, "")
	tn.want(t, "GET", "/connectors/src/topics", "", 200, `{"src":{"topics":[]}}`)

	// Errors in Kafka Connect's shape, for routes and methods too.
	tn.want(t, "DELETE", "/connectors/other", "", 204, "")
	tn.want(t, "GET", "/connectors/other", "", 404, `{"error_code":404,"message":"Connector other not found"}`)
	tn.want(t, "PUT", "/connectors/other/pause", "", 404, `{"error_code":404,"message":"Connector other not found"}`)
	tn.want(t, "GET", "/connectors/src/bogus", "", 404, `{"error_code":404,"message":"HTTP 404 Not Found"}`)
	tn.want(t, "POST", "/connectors/src/status", "", 405, `{"error_code":405,"message":"HTTP 405 Method Not Allowed"}`)
}

// TestRESTPlugins: the plugin listing (with transforms, predicates and converters on
// request) and a plugin's config keys, in Kafka Connect's shapes.
func TestRESTPlugins(t *testing.T) {
	tn := startNode(t, connect.WorkerConfig{})
	tn.want(t, "GET", "/connector-plugins", "", 200,
		`[{"class":"io.strata.connect.file.FileSinkConnector","type":"sink","version":"1.0"},{"class":"io.strata.connect.file.FileSourceConnector","type":"source","version":"1.0"}]`)
	code, body := tn.do(t, "GET", "/connector-plugins?connectorsOnly=false", "")
	if code != 200 || !strings.Contains(body, `"org.apache.kafka.connect.transforms.InsertField$Value","type":"transformation"`) ||
		!strings.Contains(body, `"org.apache.kafka.connect.transforms.predicates.TopicNameMatches","type":"predicate"`) {
		t.Fatalf("plugins with transforms: %d %s", code, body)
	}
	tn.want(t, "GET", "/connector-plugins/FileSink/config", "", 200, `[`+
		`{"name":"directory","type":"STRING","required":true,"default_value":null,"importance":"HIGH","documentation":"*","group":"File","width":"NONE","display_name":"Directory","dependents":[],"order":1},`+
		`{"name":"flush.size","type":"INT","required":false,"default_value":"10000","importance":"LOW","documentation":"*","group":"File","width":"NONE","display_name":"Flush size","dependents":[],"order":2}]`)
	tn.want(t, "GET", "/connector-plugins/Nope/config", "", 404, `{"error_code":404,"message":"Unknown plugin Nope."}`)

}

// TestValidate: a bad config is refused with an error on each field at fault — by the
// validate endpoint (200, error_count) and by create (400, listing them).
func TestValidate(t *testing.T) {
	tn := startNode(t, connect.WorkerConfig{})
	bad := `{"connector.class":"FileSource","tasks.max":"two","errors.tolerance":"some","transforms":"a,b",` +
		`"transforms.a.type":"NoSuchTransform","transforms.b.type":"Cast$Value","transforms.b.spec":"n:decimal","file":"relative.txt"}`
	code, body := tn.do(t, "PUT", "/connector-plugins/FileSource/config/validate", bad)
	if code != 200 {
		t.Fatalf("validate: %d %s", code, body)
	}
	g := tn.want(t, "PUT", "/connector-plugins/FileSource/config/validate", bad, 200,
		`{"name":"io.strata.connect.file.FileSourceConnector","error_count":7,"groups":"*","configs":"*"}`).(map[string]any)
	errs := map[string][]any{}
	for _, c := range g["configs"].([]any) {
		v := c.(map[string]any)["value"].(map[string]any)
		if e := v["errors"].([]any); len(e) > 0 {
			errs[v["name"].(string)] = e
		}
	}
	want := map[string]string{
		"name":              `Missing required configuration "name" which has no default value.`,
		"tasks.max":         "Invalid value two for configuration tasks.max: Not a number of type INT",
		"errors.tolerance":  "Invalid value some for configuration errors.tolerance: must be one of none, all",
		"topic":             `Missing required configuration "topic" which has no default value.`,
		"transforms.a.type": "Class NoSuchTransform could not be found",
		"transforms.b.type": `spec: unknown type "decimal"`,
		"files":             "Invalid value relative.txt for configuration files: give absolute paths",
	}
	for k, msg := range want {
		if len(errs[k]) != 1 || !strings.Contains(errs[k][0].(string), msg) {
			t.Errorf("errors of %s: %v, want %q", k, errs[k], msg)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("errors on %d fields, want %d: %v", len(errs), len(want), errs)
	}
	// Create refuses it, listing the errors.
	code, body = tn.do(t, "POST", "/connectors", `{"name":"bad","config":`+bad+`}`)
	if code != 400 || !strings.Contains(body, `"error_code":400`) || !strings.Contains(body, "Connector configuration is invalid and contains the following 6 error(s)") ||
		!strings.Contains(body, "tasks.max: Invalid value two") {
		t.Fatalf("create with a bad config: %d %s", code, body)
	}
	// Validate needs a plugin it knows, and the body's class must match the path's.
	tn.want(t, "PUT", "/connector-plugins/Nope/config/validate", `{}`, 400, `{"error_code":400,"message":"*"}`)
	tn.want(t, "PUT", "/connector-plugins/FileSource/config/validate", `{"connector.class":"FileSink"}`, 400,
		`{"error_code":400,"message":"Included connector type FileSink does not match request type FileSource"}`)
	// A sink without topics.
	code, body = tn.do(t, "PUT", "/connector-plugins/FileSink/config/validate", `{"connector.class":"FileSink","name":"s","directory":`+quote(filepath.Join(tn.dir, "out"))+`}`)
	if code != 200 || !strings.Contains(body, `"error_count":1`) || !strings.Contains(body, "Must configure one of topics or topics.regex") {
		t.Fatalf("a sink without topics: %d %s", code, body)
	}
}

// TestConfigProviders: references resolve only inside the operator's allow-lists; a
// file outside them is refused (validate and create), and responses show the reference,
// never the secret.
func TestConfigProviders(t *testing.T) {
	allowed := t.TempDir()
	outside := t.TempDir()
	secrets := filepath.Join(allowed, "secrets.properties")
	if err := os.WriteFile(secrets, []byte("# creds\ntopic = lines\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	leak := filepath.Join(outside, "leak.txt")
	if err := os.WriteFile(leak, []byte("lines\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A link inside the allowed directory to a file outside it is outside too.
	if err := os.Symlink(leak, filepath.Join(allowed, "link.txt")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRATA_T_TOPIC", "lines")
	t.Setenv("OTHER_TOPIC", "lines")
	prov, err := connect.NewProviders([]string{"STRATA_T_"}, []string{allowed})
	if err != nil {
		t.Fatal(err)
	}
	tn := startNode(t, connect.WorkerConfig{Providers: prov})
	tn.createTopic(t, "lines", 1)
	in := filepath.Join(tn.dir, "in.jsonl")
	writeLines(t, in, `{"a":1}`)

	for _, tc := range []struct{ ref, msg string }{
		{"${file:" + leak + "}", "is outside the directories config providers may read"},
		{"${file:" + filepath.Join(allowed, "link.txt") + "}", "is outside the directories config providers may read"},
		{"${file:" + filepath.Join(allowed, "..", filepath.Base(outside), "leak.txt") + "}", "is outside the directories config providers may read"},
		{"${env:OTHER_TOPIC}", "does not start with an allowed prefix"},
		{"${vault:secret/x}", "unknown config provider"},
	} {
		cfg := fmt.Sprintf(`{"connector.class":"FileSource","name":"p","file":%s,"topic":%s}`, quote(in), quote(tc.ref))
		code, body := tn.do(t, "PUT", "/connector-plugins/FileSource/config/validate", cfg)
		if code != 200 || !strings.Contains(body, `"error_count":1`) || !strings.Contains(body, tc.msg) {
			t.Fatalf("validate with %s: %d %s", tc.ref, code, body)
		}
		code, body = tn.do(t, "POST", "/connectors", `{"name":"p","config":`+cfg+`}`)
		if code != 400 || !strings.Contains(body, tc.msg) {
			t.Fatalf("create with %s: %d %s", tc.ref, code, body)
		}
	}
	// Inside the lists: accepted, resolved when the task starts, shown as written.
	cfg := fmt.Sprintf(`{"connector.class":"FileSource","file":%s,"topic":"${file:%s:topic}","api.token":"${env:STRATA_T_TOPIC}","password":"plain"}`, quote(in), secrets)
	tn.want(t, "POST", "/connectors", `{"name":"ok","config":`+cfg+`}`, 201,
		fmt.Sprintf(`{"name":"ok","config":{"connector.class":"FileSource","file":%s,"topic":"${file:%s:topic}","api.token":"${env:STRATA_T_TOPIC}","password":"[hidden]","name":"ok"},"tasks":[{"connector":"ok","task":0}],"type":"source"}`, quote(in), secrets))
	testwait.NoError(t, 10*time.Second, "the record, to the topic the provider named", func() error {
		if got := values(tn.readAll(t, "lines", 0)); len(got) != 1 || got[0] != `{"a":1}` {
			return fmt.Errorf("records %v", got)
		}
		return nil
	})
	if code, body := tn.do(t, "GET", "/connectors/ok/config", ""); code != 200 || strings.Contains(body, "plain") || strings.Contains(body, `"lines"`) {
		t.Fatalf("config shows a secret: %d %s", code, body)
	}
	_ = http.StatusOK
}
