package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/segment"
)

// strata check on an embedded catalog and bucket: clean, then with an object deleted
// and a stray one planted, each named in the output with exit code 1.
func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	db, objects := filepath.Join(dir, "catalog.db"), filepath.Join(dir, "objects")
	ctx := context.Background()
	cat, err := sqlite.Open(ctx, db, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := fs.New(objects)
	if err != nil {
		t.Fatal(err)
	}
	n := nodetest.Start(t, nodetest.On(cat, st))
	c := client.New(n.URL)
	if _, err := c.CreateTopic(ctx, "t", 2, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.Produce(ctx, "t", []client.Record{{Value: client.String("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	cat.Close()

	args := []string{"check", "--catalog", db, "--bucket", "file://" + objects, "--verify"}
	code, out, errOut := runCLI(t, nil, "", args...)
	if code != 0 || !strings.Contains(out, "OK: the catalog and the bucket agree") {
		t.Fatalf("clean: exit %d\n%s%s", code, out, errOut)
	}

	var keys []string
	if err := st.List(ctx, "segments/", func(i objstore.Info) error { keys = append(keys, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	stray := segment.NewKey(time.Now().Add(-time.Hour))
	if err := st.Put(ctx, stray, []byte("left behind")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, nil, "", args...)
	t.Logf("exit %d\n%s%s", code, out, errOut)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{"missing_object " + keys[0], "stray_object " + stray, "2 differences"} {
		if !strings.Contains(out+errOut, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if code, _, errOut := runCLI(t, nil, "", "check"); code != 2 || !strings.Contains(errOut, "--catalog is required") {
		t.Errorf("no flags: exit %d: %s", code, errOut)
	}
}

// torture's flags are validated before anything starts.
func TestTortureFlags(t *testing.T) {
	code, _, errOut := runCLI(t, map[string]string{"STRATA_TEST_POSTGRES": "postgres://x@127.0.0.1/db", "STRATA_TEST_S3_ENDPOINT": "http://127.0.0.1:1"}, "",
		"torture", "--classes", "kill,bogus", "--duration", "0s")
	if code != 2 || !strings.Contains(errOut, `unknown class "bogus"`) || !strings.Contains(errOut, "--duration 0s") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI(t, nil, "", "torture")
	if code != 2 || !strings.Contains(errOut, "--postgres is required") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	for _, pg := range []string{"./catalog.db", "host=db password=hunter2-sekrit dbname=x"} {
		code, _, errOut = runCLI(t, nil, "", "torture", "--postgres", pg, "--s3-endpoint", "http://127.0.0.1:1")
		if code != 2 || !strings.Contains(errOut, "want a Postgres URL") || strings.Contains(errOut, "hunter2") {
			t.Errorf("--postgres %s: exit %d: %s", pg, code, errOut)
		}
	}
}
