// Package terraform holds the tests of the terraform modules and examples: there is no
// terraform binary or provider registry here, so they check what can be checked
// without one — every file parses and is canonically formatted, every variable is
// documented and typed, module calls match the modules' variables and outputs,
// references to variables resolve, the IAM split is least privilege, and the README's
// price table covers every resource type.
package terraform

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

var rewrite = flag.Bool("fmt", false, "rewrite the .tf files in canonical format (like terraform fmt)")

// tfDir is one directory of .tf files: a module or a root module.
type tfDir struct {
	path    string
	files   map[string]*hcl.File
	vars    map[string]*hclsyntax.Block
	outputs map[string]*hclsyntax.Block
	modules []*hclsyntax.Block
	res     []*hclsyntax.Block // resource blocks
	datas   []*hclsyntax.Block // data blocks
}

func loadDirs(t *testing.T) map[string]*tfDir {
	t.Helper()
	dirs := map[string]*tfDir{}
	p := hclparse.NewParser()
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".tf" {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if formatted := hclwrite.Format(src); string(formatted) != string(src) {
			if *rewrite {
				if err := os.WriteFile(path, formatted, 0o644); err != nil {
					return err
				}
				src = formatted
			} else {
				t.Errorf("%s is not in canonical format (go test ./terraform -run TestTerraform -args -fmt, or terraform fmt -recursive)", path)
			}
		}
		f, diags := p.ParseHCL(src, path)
		if diags.HasErrors() {
			t.Errorf("%s: %s", path, diags.Error())
			return nil
		}
		dir := filepath.Dir(path)
		td := dirs[dir]
		if td == nil {
			td = &tfDir{path: dir, files: map[string]*hcl.File{}, vars: map[string]*hclsyntax.Block{}, outputs: map[string]*hclsyntax.Block{}}
			dirs[dir] = td
		}
		td.files[path] = f
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			switch b.Type {
			case "variable":
				if td.vars[b.Labels[0]] != nil {
					t.Errorf("%s: variable %s declared twice", path, b.Labels[0])
				}
				td.vars[b.Labels[0]] = b
			case "output":
				td.outputs[b.Labels[0]] = b
			case "module":
				td.modules = append(td.modules, b)
			case "resource":
				td.res = append(td.res, b)
			case "data":
				td.datas = append(td.datas, b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"modules/bucket", "modules/catalog", "modules/iam", "modules/lambda", "modules/ecs", "examples/lambda", "examples/ecs"} {
		if dirs[want] == nil {
			t.Errorf("no .tf files in %s", want)
		}
	}
	return dirs
}

// literal evaluates an expression that needs no variables.
func literal(t *testing.T, e hclsyntax.Expression) cty.Value {
	t.Helper()
	v, diags := e.Value(nil)
	if diags.HasErrors() {
		t.Fatalf("%s: not a literal: %s", e.Range(), diags.Error())
	}
	return v
}

func TestTerraformVariablesDocumented(t *testing.T) {
	for _, d := range loadDirs(t) {
		for name, b := range d.vars {
			desc, ok := b.Body.Attributes["description"]
			if !ok {
				t.Errorf("%s: variable %s has no description", b.Range(), name)
			} else if v := literal(t, desc.Expr); v.Type() != cty.String || len(strings.TrimSpace(v.AsString())) < 10 {
				t.Errorf("%s: variable %s: the description says too little", b.Range(), name)
			}
			if _, ok := b.Body.Attributes["type"]; !ok {
				t.Errorf("%s: variable %s has no type", b.Range(), name)
			}
		}
		for name, b := range d.outputs {
			if _, ok := b.Body.Attributes["description"]; !ok {
				t.Errorf("%s: output %s has no description", b.Range(), name)
			}
		}
	}
}

// metaArgs are module block arguments that are not the module's variables.
var metaArgs = map[string]bool{"source": true, "version": true, "count": true, "for_each": true, "providers": true, "depends_on": true}

// TestTerraformModuleCalls: every module call points at a module directory, passes
// only variables that module declares and every one it requires, and reads only
// outputs it declares; every var.X in a directory is declared there.
func TestTerraformModuleCalls(t *testing.T) {
	dirs := loadDirs(t)
	for _, d := range dirs {
		called := map[string]*tfDir{}
		for _, m := range d.modules {
			src := literal(t, m.Body.Attributes["source"].Expr).AsString()
			target := dirs[filepath.Clean(filepath.Join(d.path, src))]
			if target == nil {
				t.Errorf("%s: module %s: source %s is not a module here", m.Range(), m.Labels[0], src)
				continue
			}
			called[m.Labels[0]] = target
			for name := range m.Body.Attributes {
				if !metaArgs[name] && target.vars[name] == nil {
					t.Errorf("%s: module %s passes %s, which %s does not declare", m.Range(), m.Labels[0], name, target.path)
				}
			}
			for name, v := range target.vars {
				if _, hasDefault := v.Body.Attributes["default"]; !hasDefault && m.Body.Attributes[name] == nil {
					t.Errorf("%s: module %s does not pass %s, which %s requires", m.Range(), m.Labels[0], name, target.path)
				}
			}
		}
		for path, f := range d.files {
			walkTraversals(f.Body.(*hclsyntax.Body), func(tr hcl.Traversal) {
				root := tr.RootName()
				switch root {
				case "var":
					if name := attrName(tr, 1); d.vars[name] == nil {
						t.Errorf("%s: var.%s is not declared in %s", tr.SourceRange(), name, d.path)
					}
				case "module":
					mod, out := attrName(tr, 1), attrName(tr, 2)
					target := called[mod]
					if target == nil {
						t.Errorf("%s: module.%s is not called in %s", tr.SourceRange(), mod, path)
					} else if out != "" && target.outputs[out] == nil {
						t.Errorf("%s: module.%s.%s: %s has no such output", tr.SourceRange(), mod, out, target.path)
					}
				}
			})
		}
	}
}

func attrName(tr hcl.Traversal, i int) string {
	if i >= len(tr) {
		return ""
	}
	if a, ok := tr[i].(hcl.TraverseAttr); ok {
		return a.Name
	}
	return ""
}

// walkTraversals calls fn for every variable reference in body, nested blocks included.
func walkTraversals(body *hclsyntax.Body, fn func(hcl.Traversal)) {
	for _, a := range body.Attributes {
		for _, tr := range a.Expr.Variables() {
			fn(tr)
		}
	}
	for _, b := range body.Blocks {
		walkTraversals(b.Body, fn)
	}
}

// TestTerraformLeastPrivilege: nodes may put and get segment objects only; only the
// compactor lists (limited to the segments prefix) and deletes; nothing gets s3:*.
func TestTerraformLeastPrivilege(t *testing.T) {
	iam := loadDirs(t)["modules/iam"]
	actions := map[string][]string{}
	for _, b := range iam.datas {
		if b.Labels[0] != "aws_iam_policy_document" {
			continue
		}
		for _, st := range b.Body.Blocks {
			var acts *hclsyntax.Attribute
			switch st.Type {
			case "statement":
				acts = st.Body.Attributes["actions"]
			case "dynamic":
				if c := st.Body.Blocks; len(c) == 1 {
					acts = c[0].Body.Attributes["actions"]
				}
			}
			if acts == nil {
				continue
			}
			for _, v := range literal(t, acts.Expr).AsValueSlice() {
				actions[b.Labels[1]] = append(actions[b.Labels[1]], v.AsString())
			}
		}
	}
	sort.Strings(actions["node"])
	sort.Strings(actions["compactor"])
	if want := []string{"kms:Decrypt", "kms:GenerateDataKey", "s3:GetObject", "s3:PutObject"}; !slices.Equal(actions["node"], want) {
		t.Errorf("node actions %v, want %v", actions["node"], want)
	}
	// The compactor's document adds to the node's (source_policy_documents).
	if want := []string{"s3:DeleteObject", "s3:ListBucket"}; !slices.Equal(actions["compactor"], want) {
		t.Errorf("compactor's own actions %v, want %v", actions["compactor"], want)
	}
	src, err := os.ReadFile("modules/iam/main.tf")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `variable = "s3:prefix"`) {
		t.Error("the compactor's s3:ListBucket is not limited by s3:prefix")
	}
	// Node roles get the node policy, compactor roles the compactor policy.
	for _, mod := range []string{"modules/lambda/main.tf", "modules/ecs/main.tf"} {
		b, err := os.ReadFile(mod)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if strings.Contains(s, `"s3:`) {
			t.Errorf("%s grants S3 actions itself: use modules/iam", mod)
		}
		if !strings.Contains(s, "var.node_policy_arn") || !strings.Contains(s, "var.compactor_policy_arn") {
			t.Errorf("%s does not attach both policies", mod)
		}
	}
	for _, d := range loadDirs(t) {
		for path := range d.files {
			b, _ := os.ReadFile(path)
			if strings.Contains(string(b), `"s3:*"`) && !strings.Contains(path, "modules/bucket") {
				t.Errorf("%s grants s3:*", path)
			}
		}
	}
}

// TestTerraformSecureDefaults: API keys on in every example, the bucket private and
// encrypted with aborted uploads cleaned up, the catalog synchronously replicated.
func TestTerraformSecureDefaults(t *testing.T) {
	dirs := loadDirs(t)
	for _, ex := range []string{"examples/lambda", "examples/ecs"} {
		found := false
		for _, m := range dirs[ex].modules {
			if a := m.Body.Attributes["api_key_count"]; a != nil {
				found = true
				if v := literal(t, a.Expr); !v.Equals(cty.NumberIntVal(0)).False() {
					t.Errorf("%s: API keys are off", ex)
				}
			}
		}
		if !found {
			t.Errorf("%s does not set api_key_count", ex)
		}
	}
	types := map[string]bool{}
	for _, b := range dirs["modules/bucket"].res {
		types[b.Labels[0]] = true
	}
	for _, want := range []string{"aws_s3_bucket_public_access_block", "aws_s3_bucket_server_side_encryption_configuration", "aws_s3_bucket_lifecycle_configuration", "aws_s3_object"} {
		if !types[want] {
			t.Errorf("modules/bucket has no %s", want)
		}
	}
	for _, b := range dirs["modules/catalog"].res {
		if b.Labels[0] == "aws_db_instance" {
			if v := literal(t, b.Body.Attributes["multi_az"].Expr); !v.True() {
				t.Error("the RDS instance is not Multi-AZ")
			}
		}
		if b.Labels[0] == "aws_rds_cluster_instance" {
			if _, ok := b.Body.Attributes["count"]; !ok {
				t.Error("Aurora needs two instances (writer and reader in two AZs)")
			}
		}
	}
}

// TestTerraformPriceTable: terraform/README.md's table names every resource type the
// modules create.
func TestTerraformPriceTable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range loadDirs(t) {
		for _, b := range d.res {
			if !strings.Contains(string(readme), "`"+b.Labels[0]+"`") {
				t.Errorf("README.md's resource table does not list %s (%s)", b.Labels[0], d.path)
			}
		}
	}
}
