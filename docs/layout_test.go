// Package docs holds the repository's documents; its test keeps the layout section of
// design.md true to the tree, so it cannot go stale unseen.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// layout reads design.md's "Layout and dependency direction" block: each entry's path
// tokens (the words ending in / at a line's start, before its description) and the text
// of its description.
func layout(t *testing.T) (entries map[string]string, order []string) {
	t.Helper()
	b, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Layout and dependency direction")
	if i < 0 {
		t.Fatal(`design.md has no "## Layout and dependency direction" section`)
	}
	s = s[i:]
	start := strings.Index(s, "```\n")
	end := strings.Index(s[start+4:], "```")
	if start < 0 || end < 0 {
		t.Fatal("the layout section has no code block")
	}
	entries = map[string]string{}
	var current []string
	for _, line := range strings.Split(s[start+4:start+4+end], "\n") {
		if line == "" {
			continue
		}
		if line[0] != ' ' {
			current = nil
			rest := line
			for {
				f, after, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
				if !strings.HasSuffix(f, "/") {
					break
				}
				current = append(current, strings.TrimSuffix(f, "/"))
				rest = after
			}
			for _, p := range current {
				if _, dup := entries[p]; dup {
					t.Errorf("design.md's layout lists %s/ twice", p)
				}
				entries[p] = ""
				order = append(order, p)
			}
			line = rest
		}
		for _, p := range current {
			entries[p] += " " + line
		}
	}
	return entries, order
}

// units are the tree's Go packages as the layout names them: cmd/strata and each
// top-level directory, and the packages under internal/ and test/ one by one (those
// entries list their packages in their description).
func units(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != ".." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, _ := filepath.Rel("..", filepath.Dir(path))
		parts := strings.Split(filepath.ToSlash(rel), "/")
		switch {
		case rel == ".":
		case parts[0] == "cmd" && len(parts) > 1:
			out["cmd/"+parts[1]] = true
		case (parts[0] == "internal" || parts[0] == "test") && len(parts) > 1:
			out[parts[0]+"/"+parts[1]] = true
		default:
			out[parts[0]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLayoutIsTheTree: every package of the tree has its place in design.md's layout,
// and every directory the layout names exists.
func TestLayoutIsTheTree(t *testing.T) {
	entries, order := layout(t)
	for _, p := range order {
		if p == "(planned)" {
			continue
		}
		if st, err := os.Stat(filepath.Join("..", p)); err != nil || !st.IsDir() {
			t.Errorf("design.md's layout names %s/, which is not a directory of the tree", p)
		}
	}
	var missing []string
	for u := range units(t) {
		if _, ok := entries[u]; ok {
			continue
		}
		parent, name, nested := strings.Cut(u, "/")
		word := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
		if nested && (parent == "internal" || parent == "test") && word.MatchString(entries[parent]) {
			continue
		}
		missing = append(missing, u)
	}
	slices.Sort(missing)
	for _, u := range missing {
		t.Errorf("package %s/ is not in design.md's layout: add it (or its name to its parent's entry)", u)
	}
}
