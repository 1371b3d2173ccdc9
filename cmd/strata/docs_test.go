package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/cli from the command tree")

const cliDocsDir = "../../docs/cli"

// TestCLIDocsCurrent: docs/cli holds a page for every command, each what the tree
// says (its --help), and nothing else.
func TestCLIDocsCurrent(t *testing.T) {
	if *updateDocs {
		if err := os.MkdirAll(cliDocsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeCLIDocs(cliDocsDir); err != nil {
			t.Fatal(err)
		}
	}
	pages := cliDocs()
	for _, name := range []string{"strata.md", "strata_topics_create.md", "strata_completion_bash.md", "strata_groups_reset.md"} {
		if _, ok := pages[name]; !ok {
			t.Errorf("no page %s among %d", name, len(pages))
		}
	}
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(cliDocsDir, name))
		if err != nil {
			t.Errorf("%v (go test ./cmd/strata -run TestCLIDocsCurrent -update-docs writes it)", err)
			continue
		}
		if string(got) != want {
			t.Errorf("docs/cli/%s is not current (go test ./cmd/strata -run TestCLIDocsCurrent -update-docs rewrites it)", name)
		}
	}
	files, _ := filepath.Glob(filepath.Join(cliDocsDir, "*.md"))
	for _, f := range files {
		if _, ok := pages[filepath.Base(f)]; !ok && !strings.EqualFold(filepath.Base(f), "README.md") {
			t.Errorf("docs/cli/%s documents no command", filepath.Base(f))
		}
	}
}
