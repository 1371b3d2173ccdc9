package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// The reference of every command, docs/cli/*.md, is generated from the tree: each
// page is the command's --help and links to the commands below and above it.
// TestCLIDocsCurrent fails when a page differs from what the tree says; rewrite them
// with: go test ./cmd/strata -run TestCLIDocsCurrent -update-docs

// cliDocs returns the pages by file name.
func cliDocs() map[string]string {
	t := newTree(context.Background(), discard)
	pages := map[string]string{}
	walk(t.root, func(c *cobra.Command) {
		if !documented(c) {
			return
		}
		var help bytes.Buffer
		c.SetOut(&help)
		c.HelpFunc()(c, nil)
		var b strings.Builder
		fmt.Fprintf(&b, "# %s\n\n", c.CommandPath())
		if c.Short != "" && c.HasParent() {
			fmt.Fprintf(&b, "%s%s.\n\n", strings.ToUpper(c.Short[:1]), strings.TrimSuffix(c.Short[1:], "."))
		}
		fmt.Fprintf(&b, "```text\n%s```\n", strings.TrimRight(help.String(), "\n")+"\n")
		var subs []string
		for _, sub := range c.Commands() {
			if documented(sub) {
				subs = append(subs, fmt.Sprintf("- [%s](%s) — %s", sub.CommandPath(), docFile(sub), sub.Short))
			}
		}
		if len(subs) > 0 {
			fmt.Fprintf(&b, "\n## Commands\n\n%s\n", strings.Join(subs, "\n"))
		}
		if c.HasParent() {
			fmt.Fprintf(&b, "\nSee also [%s](%s).\n", c.Parent().CommandPath(), docFile(c.Parent()))
		}
		pages[docFile(c)] = b.String()
	})
	return pages
}

// documented leaves out cobra's help command and its hidden completion helpers.
func documented(c *cobra.Command) bool {
	return !c.Hidden && c.Name() != "help" && !strings.HasPrefix(c.Name(), "__")
}

// docFile is a command's page: strata_topics_create.md.
func docFile(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
}

// writeCLIDocs writes the pages to dir, removing pages of commands that are gone.
func writeCLIDocs(dir string) error {
	pages := cliDocs()
	old, _ := filepath.Glob(filepath.Join(dir, "strata*.md"))
	for _, f := range old {
		if _, ok := pages[filepath.Base(f)]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	names := make([]string, 0, len(pages))
	for n := range pages {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(pages[n]), 0o644); err != nil {
			return err
		}
	}
	return nil
}
