package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The HTTP front end decodes, calls the core and encodes (docs/design.md "Front ends
// and the broker core"): it holds no rule, so it needs nothing of the catalog but the
// types the core's calls take and answer, and nothing of the roles or the storage.
// These tests read the package's source (its non-test files) to hold it to that.

const module = "github.com/strata-io/strata/"

// parseDir parses dir's non-test Go files.
func parseDir(t *testing.T, dir string) map[string]*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]*ast.File{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = f
	}
	if len(out) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return out
}

// declKinds maps each exported name declared in dir to its kind: "type", "func",
// "const" or "var".
func declKinds(t *testing.T, dir string) map[string]string {
	t.Helper()
	kinds := map[string]string{}
	for _, f := range parseDir(t, dir) {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					kinds[d.Name.Name] = "func"
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						kinds[sp.Name.Name] = "type"
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							kinds[n.Name] = strings.ToLower(d.Tok.String())
						}
					}
				}
			}
		}
	}
	return kinds
}

// importName is the name file f gives the import of path ("" when it has none).
func importName(f *ast.File, path string) string {
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == path {
			if im.Name != nil {
				return im.Name.Name
			}
			return path[strings.LastIndex(path, "/")+1:]
		}
	}
	return ""
}

// TestCatalogTypesOnly fails when the API uses anything of package catalog but a
// type: a function, a constant or a variable of the catalog is a rule (a validator, a
// bound, a default) that belongs to the core, which the API calls instead.
func TestCatalogTypesOnly(t *testing.T) {
	kinds := declKinds(t, filepath.Join("..", "catalog"))
	uses := map[string][]string{}
	for path, f := range parseDir(t, ".") {
		name := importName(f, module+"catalog")
		if name == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
				if k := kinds[sel.Sel.Name]; k != "type" {
					uses[sel.Sel.Name] = append(uses[sel.Sel.Name], filepath.Base(path)+" ("+or(k, "unknown")+")")
				}
			}
			return true
		})
	}
	names := make([]string, 0, len(uses))
	for n := range uses {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Errorf("api uses catalog.%s in %s: only the catalog's types belong here; ask the core (package broker) for the rule", n, strings.Join(uses[n], ", "))
	}
	if len(kinds) < 50 || kinds["Topic"] != "type" || kinds["ValidateTopicName"] != "func" {
		t.Fatalf("read %d names from ../catalog: is the path right?", len(kinds))
	}
}

// TestImportsOnlyTheCore fails when the API imports a role or the storage: it reaches
// the writer, the reader, the compactor, the catalog's backends and the object store
// only through the core.
func TestImportsOnlyTheCore(t *testing.T) {
	forbidden := []string{"writer", "reader", "compactor", "objstore", "catalog/postgres", "catalog/sqlite", "catalog/open", "catalog/internal", "kafka", "connect"}
	for path, f := range parseDir(t, ".") {
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			rest, ok := strings.CutPrefix(p, module)
			if !ok {
				continue
			}
			for _, bad := range forbidden {
				if rest == bad || strings.HasPrefix(rest, bad+"/") {
					t.Errorf("%s imports %s: the API reaches it only through the core (package broker)", filepath.Base(path), p)
				}
			}
		}
	}
}
