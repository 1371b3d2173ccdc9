package terraform

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// block finds the resource (or data) block typ.name, failing the test without it.
func block(t *testing.T, blocks []*hclsyntax.Block, typ, name string) *hclsyntax.Block {
	t.Helper()
	for _, b := range blocks {
		if b.Labels[0] == typ && b.Labels[1] == name {
			return b
		}
	}
	t.Fatalf("no %s.%s", typ, name)
	return nil
}

// child is the first nested block of a type.
func child(t *testing.T, b *hclsyntax.Block, typ string) *hclsyntax.Block {
	t.Helper()
	for _, c := range b.Body.Blocks {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("%s: no %s block", b.Range(), typ)
	return nil
}

// eval evaluates e with the given var.* values (and concat, setproduct).
func eval(t *testing.T, e hclsyntax.Expression, vars map[string]cty.Value) cty.Value {
	t.Helper()
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.ObjectVal(vars)},
		Functions: map[string]function.Function{"concat": stdlib.ConcatFunc, "setproduct": stdlib.SetProductFunc},
	}
	v, diags := e.Value(ctx)
	if diags.HasErrors() {
		t.Fatalf("%s: %s", e.Range(), diags.Error())
	}
	return v
}

// defaultOf is a variable's default value.
func defaultOf(t *testing.T, d *tfDir, name string) cty.Value {
	t.Helper()
	v := d.vars[name]
	if v == nil {
		t.Fatalf("%s has no variable %s", d.path, name)
	}
	a := v.Body.Attributes["default"]
	if a == nil {
		t.Fatalf("%s: variable %s has no default", d.path, name)
	}
	return literal(t, a.Expr)
}

// refersTo says whether e refers to a name starting with prefix ("var.x", "aws_iam_role.compactor").
func refersTo(e hclsyntax.Expression, prefix string) bool {
	for _, tr := range e.Variables() {
		name := tr.RootName()
		for _, s := range tr[1:] {
			if a, ok := s.(hcl.TraverseAttr); ok {
				name += "." + a.Name
			}
		}
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

var nullString = cty.NullVal(cty.String)

// TestTerraformHTTPSByDefault: the ECS load balancer serves HTTPS on 443, and plain
// HTTP only when allow_plain_http (default false) says so; without a certificate and
// without that variable, the plan fails.
func TestTerraformHTTPSByDefault(t *testing.T) {
	ecs := loadDirs(t)["modules/ecs"]
	if v := defaultOf(t, ecs, "allow_plain_http"); !v.False() {
		t.Error("allow_plain_http does not default to false")
	}
	https := block(t, ecs.res, "aws_lb_listener", "https")
	if p := literal(t, https.Body.Attributes["protocol"].Expr); p.AsString() != "HTTPS" || literal(t, https.Body.Attributes["port"].Expr).AsBigFloat().String() != "443" {
		t.Error("the https listener is not HTTPS on 443")
	}
	http := block(t, ecs.res, "aws_lb_listener", "http")
	precond := child(t, child(t, block(t, ecs.res, "aws_lb", "this"), "lifecycle"), "precondition").Body.Attributes["condition"].Expr
	var ports hclsyntax.Expression
	for _, f := range ecs.files {
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			if b.Type == "locals" && b.Body.Attributes["client_ports"] != nil {
				ports = b.Body.Attributes["client_ports"].Expr
			}
		}
	}
	if ports == nil {
		t.Fatal("modules/ecs has no local client_ports")
	}
	if !refersTo(block(t, ecs.res, "aws_vpc_security_group_ingress_rule", "alb").Body.Attributes["for_each"].Expr, "local.client_rules") {
		t.Error("the load balancer's ingress rules do not follow local.client_ports")
	}
	for _, tc := range []struct {
		cert      cty.Value
		plain     bool
		ok        bool
		httpCount int64
		ports     string
	}{
		{cty.StringVal("arn:aws:acm:eu-west-1:1:certificate/x"), false, true, 0, "443"},
		{cty.StringVal("arn:aws:acm:eu-west-1:1:certificate/x"), true, true, 1, "443,80"},
		{nullString, false, false, 0, ""},
		{nullString, true, true, 1, "80"},
	} {
		vars := map[string]cty.Value{"certificate_arn": tc.cert, "allow_plain_http": cty.BoolVal(tc.plain), "allowed_cidrs": cty.ListVal([]cty.Value{cty.StringVal("0.0.0.0/0")})}
		if got := eval(t, precond, vars); got.True() != tc.ok {
			t.Errorf("cert %#v, allow_plain_http %v: the plan is accepted: %v, want %v", tc.cert, tc.plain, got.True(), tc.ok)
		}
		if n, _ := eval(t, http.Body.Attributes["count"].Expr, vars).AsBigFloat().Int64(); n != tc.httpCount {
			t.Errorf("cert %#v, allow_plain_http %v: %d plain HTTP listeners, want %d", tc.cert, tc.plain, n, tc.httpCount)
		}
		var got []string
		for _, p := range eval(t, ports, vars).AsValueSlice() {
			got = append(got, p.AsBigFloat().String())
		}
		if strings.Join(got, ",") != tc.ports {
			t.Errorf("cert %#v, allow_plain_http %v: clients reach ports %v, want %s", tc.cert, tc.plain, got, tc.ports)
		}
	}
}

// TestTerraformCreateOnlyPuts: every s3:PutObject the IAM module grants carries the
// s3:if-none-match = "*" condition and covers the segments prefix only; s3:DeleteObject
// is only in the compactor's policy, which is attached only to compactor roles.
func TestTerraformCreateOnlyPuts(t *testing.T) {
	dirs := loadDirs(t)
	iam := dirs["modules/iam"]
	puts := 0
	for _, b := range iam.datas {
		for _, st := range b.Body.Blocks {
			if st.Type != "statement" {
				continue
			}
			acts := literal(t, st.Body.Attributes["actions"].Expr).AsValueSlice()
			for _, a := range acts {
				switch a.AsString() {
				case "s3:PutObject":
					puts++
					if !refersTo(st.Body.Attributes["resources"].Expr, "local.segments") || len(st.Body.Attributes["resources"].Expr.Variables()) != 1 {
						t.Errorf("%s: s3:PutObject on more than the segments prefix", st.Range())
					}
					cond := child(t, st, "condition").Body.Attributes
					if literal(t, cond["test"].Expr).AsString() != "StringEquals" || literal(t, cond["variable"].Expr).AsString() != "s3:if-none-match" ||
						!literal(t, cond["values"].Expr).Equals(cty.TupleVal([]cty.Value{cty.StringVal("*")})).True() {
						t.Errorf("%s: s3:PutObject is not conditioned on s3:if-none-match = \"*\"", st.Range())
					}
				case "s3:DeleteObject":
					if b.Labels[1] != "compactor" {
						t.Errorf("%s: s3:DeleteObject outside the compactor's policy", st.Range())
					}
				}
			}
		}
	}
	if puts != 1 {
		t.Errorf("%d statements grant s3:PutObject, want the node's one (the compactor's document sources it)", puts)
	}
	src, _ := os.ReadFile("modules/iam/main.tf")
	if !regexp.MustCompile(`segments\s*=\s*"\$\{var\.bucket_arn\}/\$\{var\.prefix\}/segments/\*"`).Match(src) {
		t.Error("local.segments is not PREFIX/segments/*")
	}
	for _, mod := range []string{"modules/ecs", "modules/lambda"} {
		compactorAttached := false
		for _, b := range dirs[mod].res {
			if b.Labels[0] != "aws_iam_role_policy_attachment" {
				continue
			}
			arn, role := b.Body.Attributes["policy_arn"].Expr, b.Body.Attributes["role"].Expr
			toCompactor := refersTo(role, "aws_iam_role.compactor")
			if refersTo(arn, "var.compactor_policy_arn") && !toCompactor {
				t.Errorf("%s: the compactor policy (with s3:DeleteObject) on a role other than the compactor's", b.Range())
			}
			if refersTo(arn, "var.node_policy_arn") && toCompactor {
				t.Errorf("%s: the node policy on the compactor's role", b.Range())
			}
			compactorAttached = compactorAttached || refersTo(arn, "var.compactor_policy_arn")
		}
		if !compactorAttached {
			t.Errorf("%s attaches no compactor policy", mod)
		}
	}
}

// TestTerraformBucketVersioning: versioning is an option (off by default), and with it
// a lifecycle rule expires noncurrent versions and the delete markers left behind.
func TestTerraformBucketVersioning(t *testing.T) {
	bucket := loadDirs(t)["modules/bucket"]
	if v := defaultOf(t, bucket, "versioning"); !v.False() {
		t.Error("versioning does not default to false")
	}
	if v := defaultOf(t, bucket, "noncurrent_version_days"); v.LessThan(cty.NumberIntVal(1)).True() {
		t.Error("noncurrent_version_days defaults below 1")
	}
	ver := block(t, bucket.res, "aws_s3_bucket_versioning", "this")
	for _, on := range []bool{false, true} {
		n, _ := eval(t, ver.Body.Attributes["count"].Expr, map[string]cty.Value{"versioning": cty.BoolVal(on)}).AsBigFloat().Int64()
		if (n == 1) != on {
			t.Errorf("versioning = %v: %d versioning configurations", on, n)
		}
	}
	var dyn *hclsyntax.Block
	for _, b := range block(t, bucket.res, "aws_s3_bucket_lifecycle_configuration", "this").Body.Blocks {
		if b.Type == "dynamic" && b.Labels[0] == "rule" {
			dyn = b
		}
	}
	if dyn == nil {
		t.Fatal("no lifecycle rule for noncurrent versions")
	}
	if !refersTo(dyn.Body.Attributes["for_each"].Expr, "var.versioning") {
		t.Error("the noncurrent-version rule does not follow var.versioning")
	}
	content := child(t, dyn, "content")
	if !refersTo(child(t, content, "noncurrent_version_expiration").Body.Attributes["noncurrent_days"].Expr, "rule.value") {
		t.Error("noncurrent versions do not expire after noncurrent_version_days")
	}
	if v := literal(t, child(t, content, "expiration").Body.Attributes["expired_object_delete_marker"].Expr); !v.True() {
		t.Error("expired delete markers are not removed")
	}
}

// TestTerraformCatalogTLS: RDS and Aurora force TLS (rds.force_ssl in a parameter group
// each uses), and the catalog URL verifies the server (sslmode=verify-full); nothing in
// the terraform uses a weaker sslmode.
func TestTerraformCatalogTLS(t *testing.T) {
	dirs := loadDirs(t)
	cat := dirs["modules/catalog"]
	for _, pg := range []struct{ typ, user, attr string }{
		{"aws_db_parameter_group", "aws_db_instance", "parameter_group_name"},
		{"aws_rds_cluster_parameter_group", "aws_rds_cluster", "db_cluster_parameter_group_name"},
	} {
		b := block(t, cat.res, pg.typ, "this")
		forced := false
		for _, p := range b.Body.Blocks {
			if p.Type == "parameter" && literal(t, p.Body.Attributes["name"].Expr).AsString() == "rds.force_ssl" {
				forced = literal(t, p.Body.Attributes["value"].Expr).AsString() == "1"
			}
		}
		if !forced {
			t.Errorf("%s does not set rds.force_ssl = 1", pg.typ)
		}
		if a := block(t, cat.res, pg.user, "this").Body.Attributes[pg.attr]; a == nil || !refersTo(a.Expr, pg.typ+".this") {
			t.Errorf("%s does not use %s", pg.user, pg.typ)
		}
	}
	url := cat.outputs["catalog_url"].Body.Attributes["value"].Expr
	src, _ := os.ReadFile(url.Range().Filename)
	if text := string(url.Range().SliceBytes(src)); !strings.Contains(text, "sslmode=verify-full&sslrootcert=") {
		t.Errorf("catalog_url does not verify the server: %s", text)
	}
	weak := regexp.MustCompile(`sslmode=(disable|allow|prefer|require|verify-ca)\b`)
	for _, d := range dirs {
		for path := range d.files {
			b, _ := os.ReadFile(path)
			if m := weak.Find(b); m != nil {
				t.Errorf("%s uses %s", path, m)
			}
		}
	}
}

// secretName is an environment variable name that would carry a secret.
var secretName = regexp.MustCompile(`(?i)PASSWORD|API_KEYS?$|SECRET_KEY|TOKEN|PGPASS`)

// TestTerraformLambdaSecrets: no password or key in the functions' plain environment —
// only STRATA_SECRETS naming Secrets Manager secrets, which each function's role may
// read — and concurrency and API Gateway throttling bounded by default.
func TestTerraformLambdaSecrets(t *testing.T) {
	lam := loadDirs(t)["modules/lambda"]
	for name := range lam.vars {
		if strings.Contains(name, "password") || strings.Contains(name, "api_key") && name != "api_key_count" {
			t.Errorf("variable %s takes a secret: pass its Secrets Manager ARN instead", name)
		}
	}
	// Every expression that feeds a function's environment: the variables blocks and
	// the locals they use.
	var envExprs []hclsyntax.Expression
	for _, f := range lam.files {
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			if b.Type == "locals" {
				for _, a := range b.Body.Attributes {
					envExprs = append(envExprs, a.Expr)
				}
			}
		}
	}
	for _, fn := range []string{"api", "compactor"} {
		env := child(t, block(t, lam.res, "aws_lambda_function", fn), "environment").Body.Attributes["variables"].Expr
		envExprs = append(envExprs, env)
		keys := map[string]bool{}
		hclsyntax.VisitAll(env, func(n hclsyntax.Node) hcl.Diagnostics {
			if o, ok := n.(*hclsyntax.ObjectConsExpr); ok {
				for _, it := range o.Items {
					if k, diags := it.KeyExpr.Value(nil); !diags.HasErrors() && k.Type() == cty.String {
						keys[k.AsString()] = true
					}
				}
			}
			return nil
		})
		if !keys["STRATA_SECRETS"] {
			t.Errorf("the %s function has no STRATA_SECRETS", fn)
		}
		for k := range keys {
			if secretName.MatchString(k) {
				t.Errorf("the %s function's environment has %s", fn, k)
			}
		}
		if !refersTo(env, "local.common_env") {
			t.Errorf("the %s function does not use local.common_env", fn)
		}
	}
	for _, e := range envExprs {
		for _, bad := range []string{"random_password", "var.catalog_password", "aws_secretsmanager_secret_version"} {
			if refersTo(e, bad) {
				t.Errorf("%s: a secret's value (%s) goes into the environment", e.Range(), bad)
			}
		}
	}
	for _, role := range []string{"api", "compactor"} {
		p := block(t, lam.res, "aws_iam_role_policy", role+"_secrets")
		if !refersTo(p.Body.Attributes["role"].Expr, "aws_iam_role."+role) {
			t.Errorf("the %s role cannot read its secrets", role)
		}
	}

	if v := defaultOf(t, lam, "reserved_concurrency"); v.LessThan(cty.NumberIntVal(1)).True() {
		t.Errorf("reserved_concurrency defaults to %s: unbounded", v.AsBigFloat().String())
	}
	if a := block(t, lam.res, "aws_lambda_function", "api").Body.Attributes["reserved_concurrent_executions"]; a == nil || !refersTo(a.Expr, "var.reserved_concurrency") {
		t.Error("the API function does not use reserved_concurrency")
	}
	settings := child(t, block(t, lam.res, "aws_apigatewayv2_stage", "this"), "default_route_settings").Body.Attributes
	for attr, v := range map[string]string{"throttling_rate_limit": "api_throttle_rate_limit", "throttling_burst_limit": "api_throttle_burst_limit"} {
		if d := defaultOf(t, lam, v); !d.GreaterThan(cty.NumberIntVal(0)).True() {
			t.Errorf("%s defaults to %s", v, d.AsBigFloat().String())
		}
		if settings[attr] == nil || !refersTo(settings[attr].Expr, "var."+v) {
			t.Errorf("the stage's %s does not use var.%s", attr, v)
		}
	}
}
