package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// ruleSteps parses the non-test Go files of a backend and answers, for each exported
// method of *Catalog, the engine rules it applies: the engine.X calls in its body and
// in the package's functions and methods it calls (followed by name, each once), in
// source order.
func ruleSteps(t *testing.T, dir string) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		funcs   = map[string][]*ast.FuncDecl{} // package functions and methods, by name
		methods []*ast.FuncDecl                // exported methods of *Catalog
	)
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			funcs[fn.Name.Name] = append(funcs[fn.Name.Name], fn)
			if fn.Recv != nil && fn.Name.IsExported() {
				if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok && id.Name == "Catalog" {
						methods = append(methods, fn)
					}
				}
			}
		}
	}
	out := map[string][]string{}
	for _, m := range methods {
		var steps []string
		seen := map[*ast.FuncDecl]bool{}
		var walk func(fn *ast.FuncDecl)
		walk = func(fn *ast.FuncDecl) {
			if seen[fn] {
				return
			}
			seen[fn] = true
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				var name string
				switch f := call.Fun.(type) {
				case *ast.Ident:
					name = f.Name
				case *ast.SelectorExpr:
					if pkg, ok := f.X.(*ast.Ident); ok && pkg.Name == "engine" {
						steps = append(steps, "engine."+f.Sel.Name)
						return true
					}
					name = f.Sel.Name
				}
				for _, callee := range funcs[name] {
					if !callee.Name.IsExported() { // exported methods are steps of their own
						walk(callee)
					}
				}
				return true
			})
		}
		walk(m)
		out[m.Name.Name] = steps
	}
	return out
}

// stillInBoth lists the methods whose script both backends still hold, each with why
// or what is left to move. TestNoScriptInBothBackends fails when another appears and
// when one listed here no longer is (take it off: the list only shrinks).
var stillInBoth = map[string]string{
	// The flush commit: Postgres runs it as plpgsql (functions/strata_commit*.sql) in
	// one round trip, SQLite as the engine's Go; the twins are by design, and the
	// shared rules are the plan and the key's time checked before either.
	"Commit": "twin by design",
	"Settle": "twin by design",
}

// TestNoScriptInBothBackends fails when a transaction script exists in both backends:
// when an exported method of postgres.Catalog and the same-named method of
// sqlite.Catalog apply two or more of the same engine rules (engine.X calls, followed
// through the package's own helpers). Such a pair is one algorithm written twice; it
// belongs here, in one function over a small statement interface each backend
// implements (as engine.SwapChunks over SwapStmts, engine.EndTxn over TxnBackend), so
// that the backend holds no method for it (engine.Methods, embedded) or a single call:
// one rule, which cannot match two.
func TestNoScriptInBothBackends(t *testing.T) {
	pg := ruleSteps(t, "../../postgres")
	sq := ruleSteps(t, "../../sqlite")
	var names []string
	for n := range pg {
		if _, ok := sq[n]; ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	inBoth := map[string]bool{}
	for _, n := range names {
		a, b := uniq(pg[n]), uniq(sq[n])
		var common []string
		for _, x := range a {
			if slices.Contains(b, x) {
				common = append(common, x)
			}
		}
		if len(common) < 2 {
			continue
		}
		inBoth[n] = true
		if _, ok := stillInBoth[n]; !ok {
			t.Errorf("%s applies %v in both backends: move its script into the engine, over a statement interface each backend implements", n, common)
		}
	}
	for n, why := range stillInBoth {
		if !inBoth[n] {
			t.Errorf("%s (%s) is no longer in both backends: take it off stillInBoth", n, why)
		}
	}
}

func uniq(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
