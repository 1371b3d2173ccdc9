package node

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// This package is the one place concrete types meet (docs/design.md "Layout and
// dependency direction"). These tests read the module's source to hold every other
// package to that: nothing else builds the Kafka listener or starts a node from a
// configuration written out by hand, and no code asks at run time what a value of one
// of the project's interfaces really is — the types say it.

const module = "github.com/strata-io/strata"

// goFile is a parsed Go file of the module, with its path from the module's root.
type goFile struct {
	rel  string
	file *ast.File
}

// moduleFiles parses every Go file of the module (tests too).
func moduleFiles(t *testing.T) []goFile {
	t.Helper()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var out []goFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		out = append(out, goFile{rel: filepath.ToSlash(rel), file: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 300 {
		t.Fatalf("read %d Go files from %s: is the path right?", len(out), root)
	}
	return out
}

// importName is the name f gives the import of path ("" when it has none).
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

// uses calls visit for every selector pkg.Name in f, with the function declaration it
// is in (nil at package level).
func uses(f *ast.File, pkg string, visit func(sel *ast.SelectorExpr, fn *ast.FuncDecl, parent ast.Node)) {
	if pkg == "" {
		return
	}
	for _, d := range f.Decls {
		fn, _ := d.(*ast.FuncDecl)
		var stack []ast.Node
		ast.Inspect(d, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg && len(stack) > 0 {
					visit(sel, fn, stack[len(stack)-1])
				}
			}
			stack = append(stack, n)
			return true
		})
	}
}

// TestKafkaListenerBuiltOnlyHere fails when anything but this package builds the Kafka
// listener or registers a node as a broker (kafka.New, kafka.NewRegistrar), other than
// package kafka's own tests: a node's front ends are wired here, once.
func TestKafkaListenerBuiltOnlyHere(t *testing.T) {
	found := 0
	for _, gf := range moduleFiles(t) {
		here := strings.HasPrefix(gf.rel, "internal/node/") && !strings.HasSuffix(gf.rel, "_test.go")
		ownTest := strings.HasPrefix(gf.rel, "kafka/") && strings.HasSuffix(gf.rel, "_test.go")
		uses(gf.file, importName(gf.file, module+"/kafka"), func(sel *ast.SelectorExpr, _ *ast.FuncDecl, parent ast.Node) {
			call, ok := parent.(*ast.CallExpr)
			if !ok || call.Fun != sel || (sel.Sel.Name != "New" && sel.Sel.Name != "NewRegistrar") {
				return
			}
			if here {
				found++
				return
			}
			if !ownTest {
				t.Errorf("%s calls kafka.%s: the Kafka listener is built by internal/node (node.Config.Kafka; tests: nodetest.Kafka)", gf.rel, sel.Sel.Name)
			}
		})
	}
	if found == 0 {
		t.Fatal("found no call of kafka.New in internal/node: is the check looking at the right names?")
	}
}

// TestNodeStartedFromOneConfig fails when a node is started, or its configuration
// written out, anywhere but here (inproc and nodetest included) and the one function
// of cmd/strata that maps its flags to a configuration: everything else starts its
// nodes through inproc or nodetest, and says only what differs.
func TestNodeStartedFromOneConfig(t *testing.T) {
	allowed := map[string][]string{ // file → the functions that may
		"cmd/strata/server.go": {"startNode", "nodeConfig"},
	}
	found := 0
	for _, gf := range moduleFiles(t) {
		if strings.HasPrefix(gf.rel, "internal/node/") {
			continue
		}
		uses(gf.file, importName(gf.file, module+"/internal/node"), func(sel *ast.SelectorExpr, fn *ast.FuncDecl, parent ast.Node) {
			var what string
			switch p := parent.(type) {
			case *ast.CallExpr:
				if p.Fun == sel && sel.Sel.Name == "Start" {
					what = "calls node.Start"
				}
			case *ast.CompositeLit:
				if p.Type == sel && sel.Sel.Name == "Config" {
					what = "writes a node.Config"
				}
			}
			if what == "" {
				return
			}
			if fn != nil && slices.Contains(allowed[gf.rel], fn.Name.Name) {
				found++
				return
			}
			t.Errorf("%s %s: start nodes through internal/node/nodetest (tests) or internal/node/inproc, with options for what differs", gf.rel, what)
		})
	}
	if found < 2 {
		t.Fatalf("found %d uses in cmd/strata's startNode and nodeConfig, want the call and the configuration: is the check looking at the right names?", found)
	}
}

// TestNoTypeAssertionOnOwnInterfaces fails when non-test code asserts, or switches on,
// the dynamic type of a value whose static type is one of the project's interfaces
// (x.(T), x.(type)): a type that must be asked what it is should say so — a method,
// or a registration that keeps the concrete type (connect.Source, open.Target).
// Interfaces of other modules (error, flag.Value, kmsg.Request) are theirs to design.
func TestNoTypeAssertionOnOwnInterfaces(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module")
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Dir:  filepath.Join("..", ".."),
	}
	pkgs, err := packages.Load(cfg, module+"/...")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 40 {
		t.Fatalf("loaded %d packages: is the pattern right?", len(pkgs))
	}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("load %s: %v", p.PkgPath, e)
		}
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				ta, ok := n.(*ast.TypeAssertExpr)
				if !ok {
					return true
				}
				named, ok := p.TypesInfo.TypeOf(ta.X).(*types.Named)
				if !ok || !types.IsInterface(named) || named.Obj().Pkg() == nil {
					return true
				}
				if path := named.Obj().Pkg().Path(); path == module || strings.HasPrefix(path, module+"/") {
					t.Errorf("%s: asserts the dynamic type of a %s: make the type say what it is", p.Fset.Position(ta.Pos()), named)
				}
				return true
			})
		}
	}
}
