package terraform

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// moduleEval evaluates a module's expressions the way a plan would, for given
// variables, with the attributes of the resources it reads stubbed: enough to check
// what ends up in a task's environment without a terraform binary.
type moduleEval struct {
	t   *testing.T
	ctx *hcl.EvalContext
}

// makeTo is Terraform's tostring, toset, ...: a conversion to ty.
func makeTo(ty cty.Type) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "v", Type: cty.DynamicPseudoType, AllowNull: true}},
		Type:   function.StaticReturnType(ty),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return convert.Convert(args[0], ty)
		},
	})
}

// newModuleEval takes every variable's default (converted to its type; a stub for a
// required one), overridden by set, and resolves the module's locals.
func newModuleEval(t *testing.T, d *tfDir, set map[string]cty.Value, resources map[string]cty.Value) *moduleEval {
	t.Helper()
	vars := map[string]cty.Value{}
	for name, b := range d.vars {
		ty, diags := typeexpr.TypeConstraint(b.Body.Attributes["type"].Expr)
		if diags.HasErrors() {
			t.Fatalf("variable %s: %s", name, diags.Error())
		}
		var v cty.Value
		if a := b.Body.Attributes["default"]; a != nil {
			v = literal(t, a.Expr)
		} else {
			switch {
			case ty == cty.String:
				v = cty.StringVal("stub-" + name)
			case ty == cty.Number:
				v = cty.NumberIntVal(1)
			case ty.IsListType():
				v = cty.ListVal([]cty.Value{cty.StringVal("stub-" + name)})
			default:
				t.Fatalf("variable %s: no stub for %s", name, ty.FriendlyName())
			}
		}
		if s, ok := set[name]; ok {
			v = s
		}
		cv, err := convert.Convert(v, ty)
		if err != nil {
			t.Fatalf("variable %s: %v", name, err)
		}
		vars[name] = cv
	}
	for name := range set {
		if _, ok := vars[name]; !ok {
			t.Fatalf("%s has no variable %s", d.path, name)
		}
	}
	ctxVars := map[string]cty.Value{"var": cty.ObjectVal(vars)}
	for k, v := range resources {
		ctxVars[k] = v
	}
	ctx := &hcl.EvalContext{
		Variables: ctxVars,
		Functions: map[string]function.Function{
			"concat": stdlib.ConcatFunc, "setproduct": stdlib.SetProductFunc, "merge": stdlib.MergeFunc,
			"coalesce": stdlib.CoalesceFunc, "jsonencode": stdlib.JSONEncodeFunc,
			"tostring": makeTo(cty.String), "toset": makeTo(cty.Set(cty.DynamicPseudoType)),
		},
	}
	// Locals may use each other: evaluate those whose references are resolved until
	// none is left.
	pending := map[string]hclsyntax.Expression{}
	for _, f := range d.files {
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			if b.Type == "locals" {
				for name, a := range b.Body.Attributes {
					pending[name] = a.Expr
				}
			}
		}
	}
	locals := map[string]cty.Value{}
	for len(pending) > 0 {
		progress := false
		for name, e := range pending {
			ready := true
			for _, tr := range e.Variables() {
				if tr.RootName() == "local" {
					if _, ok := locals[attrName(tr, 1)]; !ok {
						ready = false
					}
				}
			}
			if !ready {
				continue
			}
			ctx.Variables["local"] = cty.ObjectVal(locals)
			v, diags := e.Value(ctx)
			if diags.HasErrors() {
				t.Fatalf("local.%s: %s", name, diags.Error())
			}
			locals[name] = v
			delete(pending, name)
			progress = true
		}
		if !progress {
			t.Fatalf("locals refer to each other in a cycle, or to undeclared locals: %v", pending)
		}
	}
	ctx.Variables["local"] = cty.ObjectVal(locals)
	return &moduleEval{t: t, ctx: ctx}
}

func (m *moduleEval) value(e hclsyntax.Expression) cty.Value {
	m.t.Helper()
	v, diags := e.Value(m.ctx)
	if diags.HasErrors() {
		m.t.Fatalf("%s: %s", e.Range(), diags.Error())
	}
	return v
}

func (m *moduleEval) count(b *hclsyntax.Block) int64 {
	m.t.Helper()
	a := b.Body.Attributes["count"]
	if a == nil {
		return 1
	}
	n, _ := m.value(a.Expr).AsBigFloat().Int64()
	return n
}

func (m *moduleEval) str(e hclsyntax.Expression) string {
	m.t.Helper()
	v := m.value(e)
	if v.IsNull() {
		return ""
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil {
		m.t.Fatalf("%s: %v", e.Range(), err)
	}
	return s.AsString()
}

// container is what a task definition's container_definitions says of its one
// container.
type container struct {
	PortMappings []struct {
		ContainerPort int `json:"containerPort"`
	} `json:"portMappings"`
	Environment []struct{ Name, Value string } `json:"environment"`
}

func (m *moduleEval) container(b *hclsyntax.Block) container {
	m.t.Helper()
	var cs []container
	if err := json.Unmarshal([]byte(m.str(b.Body.Attributes["container_definitions"].Expr)), &cs); err != nil || len(cs) != 1 {
		m.t.Fatalf("%s: container definitions: %v (%d containers)", b.Range(), err, len(cs))
	}
	return cs[0]
}

func (c container) env() map[string]string {
	env := map[string]string{}
	for _, e := range c.Environment {
		env[e.Name] = e.Value
	}
	return env
}

func (c container) ports() []int {
	var ps []int
	for _, p := range c.PortMappings {
		ps = append(ps, p.ContainerPort)
	}
	return ps
}

const nlbDNS = "strata-kafka-0123456789.elb.eu-west-1.amazonaws.com"

// ecsResources stubs the attributes of the resources modules/ecs reads.
func ecsResources() map[string]cty.Value {
	obj := func(attrs map[string]string) cty.Value {
		m := map[string]cty.Value{}
		for k, v := range attrs {
			m[k] = cty.StringVal(v)
		}
		return cty.ObjectVal(m)
	}
	one := func(attrs map[string]string) cty.Value { return cty.TupleVal([]cty.Value{obj(attrs)}) }
	return map[string]cty.Value{
		"data":                     cty.ObjectVal(map[string]cty.Value{"aws_region": cty.ObjectVal(map[string]cty.Value{"current": obj(map[string]string{"name": "eu-west-1"})})}),
		"aws_cloudwatch_log_group": cty.ObjectVal(map[string]cty.Value{"this": obj(map[string]string{"name": "/ecs/strata"})}),
		"aws_secretsmanager_secret": cty.ObjectVal(map[string]cty.Value{
			"api_keys": one(map[string]string{"arn": "arn:aws:secretsmanager:eu-west-1:1:secret:keys"}),
		}),
		"aws_lb": cty.ObjectVal(map[string]cty.Value{
			"this":  obj(map[string]string{"dns_name": "strata-alb.elb.amazonaws.com", "arn": "arn:alb"}),
			"kafka": one(map[string]string{"dns_name": nlbDNS, "arn": "arn:nlb"}),
		}),
		"aws_lb_target_group": cty.ObjectVal(map[string]cty.Value{
			"this":  obj(map[string]string{"arn": "arn:tg"}),
			"kafka": one(map[string]string{"arn": "arn:tg-kafka"}),
		}),
		"aws_security_group": cty.ObjectVal(map[string]cty.Value{
			"alb":   obj(map[string]string{"id": "sg-alb"}),
			"kafka": one(map[string]string{"id": "sg-kafka"}),
		}),
	}
}

// TestTerraformKafkaSharedAddress: with kafka = true, modules/ecs puts a Network Load
// Balancer with a TCP (or TLS) listener on 9092 in front of the nodes' Kafka port,
// health-checked on /readyz, and the node tasks listen on that port and advertise the
// balancer's address as every broker's (--kafka-shared-address); without it none of
// this exists and no task listens for Kafka. The compactor never gets the listener
// (--kafka-listen needs the writer and reader roles).
func TestTerraformKafkaSharedAddress(t *testing.T) {
	dirs := loadDirs(t)
	ecs := dirs["modules/ecs"]
	if v := defaultOf(t, ecs, "kafka"); !v.False() {
		t.Error("kafka does not default to false")
	}
	nlb := block(t, ecs.res, "aws_lb", "kafka")
	listener := block(t, ecs.res, "aws_lb_listener", "kafka")
	tg := block(t, ecs.res, "aws_lb_target_group", "kafka")
	node := block(t, ecs.res, "aws_ecs_task_definition", "node")
	compactor := block(t, ecs.res, "aws_ecs_task_definition", "compactor")
	cert := cty.StringVal("arn:aws:acm:eu-west-1:1:certificate/x")

	for _, tc := range []struct {
		name     string
		set      map[string]cty.Value
		protocol string
		address  string
	}{
		{"off", map[string]cty.Value{"certificate_arn": cert}, "", ""},
		{"tls", map[string]cty.Value{"kafka": cty.True, "certificate_arn": cert}, "TLS", nlbDNS + ":9092"},
		{"plain trial", map[string]cty.Value{"kafka": cty.True, "allow_plain_http": cty.True}, "TCP", nlbDNS + ":9092"},
		{"own host", map[string]cty.Value{"kafka": cty.True, "certificate_arn": cert, "kafka_host": cty.StringVal("kafka.example.com")}, "TLS", "kafka.example.com:9092"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newModuleEval(t, ecs, tc.set, ecsResources())
			on := tc.protocol != ""
			for _, b := range []*hclsyntax.Block{nlb, listener, tg, block(t, ecs.res, "aws_security_group", "kafka")} {
				if n := m.count(b); n != map[bool]int64{false: 0, true: 1}[on] {
					t.Errorf("%s.%s: count %d with kafka %v", b.Labels[0], b.Labels[1], n, on)
				}
			}
			env := m.container(node).env()
			if !on {
				for k := range env {
					if strings.HasPrefix(k, "STRATA_KAFKA_") {
						t.Errorf("kafka off, yet the node task has %s", k)
					}
				}
				if ps := m.container(node).ports(); len(ps) != 1 {
					t.Errorf("kafka off, yet the node task maps ports %v", ps)
				}
				return
			}
			if got := m.str(nlb.Body.Attributes["load_balancer_type"].Expr); got != "network" {
				t.Errorf("the Kafka load balancer is %q, want network", got)
			}
			listenerPort := m.str(listener.Body.Attributes["port"].Expr)
			if listenerPort != "9092" {
				t.Errorf("the Kafka listener is on %s, want 9092", listenerPort)
			}
			if got := m.str(listener.Body.Attributes["protocol"].Expr); got != tc.protocol {
				t.Errorf("the Kafka listener speaks %s, want %s", got, tc.protocol)
			}
			if tc.protocol == "TLS" && m.str(listener.Body.Attributes["certificate_arn"].Expr) != cert.AsString() {
				t.Error("the TLS listener has no certificate")
			}
			action := child(t, listener, "default_action").Body.Attributes
			if m.str(action["type"].Expr) != "forward" || !refersTo(action["target_group_arn"].Expr, "aws_lb_target_group.kafka") {
				t.Error("the Kafka listener does not forward to the Kafka target group")
			}
			if got := m.str(tg.Body.Attributes["protocol"].Expr); got != "TCP" {
				t.Errorf("the Kafka target group speaks %s, want TCP (the nodes see the Kafka protocol itself)", got)
			}
			tgPort := m.str(tg.Body.Attributes["port"].Expr)
			hc := child(t, tg, "health_check").Body.Attributes
			if m.str(hc["path"].Expr) != "/readyz" || m.str(hc["protocol"].Expr) != "HTTP" || m.str(hc["port"].Expr) != m.str(ecs.localExpr(t, "port")) {
				t.Error("the Kafka target group's health check is not the node's /readyz on its HTTP port")
			}

			c := m.container(node)
			if want := ":" + tgPort; env["STRATA_KAFKA_LISTEN"] != want {
				t.Errorf("the node listens for Kafka on %q, the target group sends to port %s", env["STRATA_KAFKA_LISTEN"], tgPort)
			}
			if !slices.Contains(c.ports(), atoi(t, tgPort)) {
				t.Errorf("the node task maps ports %v, not the target group's %s", c.ports(), tgPort)
			}
			if env["STRATA_KAFKA_SHARED_ADDRESS"] != tc.address {
				t.Errorf("the node advertises %q as every broker, want %q", env["STRATA_KAFKA_SHARED_ADDRESS"], tc.address)
			}
			if _, port, _ := strings.Cut(env["STRATA_KAFKA_SHARED_ADDRESS"], ":"); port != listenerPort {
				t.Errorf("brokers are advertised on port %s, the balancer listens on %s", port, listenerPort)
			}
			if env["STRATA_KAFKA_IDLE_TIMEOUT"] == "" {
				t.Error("the node keeps idle Kafka connections past the balancer's 350s idle timeout")
			}
			if ce := m.container(compactor).env(); ce["STRATA_KAFKA_LISTEN"] != "" {
				t.Error("the compactor task listens for Kafka (it has no writer or reader role)")
			}
			// The balancer may reach the tasks on the Kafka and health-check ports only.
			var got []string
			for _, p := range m.value(block(t, ecs.res, "aws_vpc_security_group_ingress_rule", "tasks_from_kafka").Body.Attributes["for_each"].Expr).AsValueSlice() {
				got = append(got, p.AsBigFloat().String())
			}
			slices.Sort(got)
			if want := []string{"8080", tgPort}; !slices.Equal(got, want) {
				t.Errorf("tasks admit the Kafka balancer on %v, want %v", got, want)
			}
		})
	}

	// The service registers its tasks in the Kafka target group on the Kafka port.
	var dyn *hclsyntax.Block
	for _, b := range block(t, ecs.res, "aws_ecs_service", "node").Body.Blocks {
		if b.Type == "dynamic" && b.Labels[0] == "load_balancer" {
			dyn = b
		}
	}
	if dyn == nil || !refersTo(dyn.Body.Attributes["for_each"].Expr, "aws_lb_target_group.kafka") ||
		!refersTo(child(t, dyn, "content").Body.Attributes["container_port"].Expr, "local.kafka_port") {
		t.Error("the node service does not register its tasks in the Kafka target group on the Kafka port")
	}

	// The environment variables are serve's: a renamed flag fails here.
	doc, err := os.ReadFile("../docs/cli/strata_serve.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"STRATA_KAFKA_LISTEN", "STRATA_KAFKA_SHARED_ADDRESS", "STRATA_KAFKA_IDLE_TIMEOUT"} {
		if !strings.Contains(string(doc), "env "+name+"\n") {
			t.Errorf("strata serve reads no %s (docs/cli/strata_serve.md)", name)
		}
	}
	if dirs["examples/ecs"].outputs["kafka_bootstrap"] == nil {
		t.Error("examples/ecs does not output kafka_bootstrap")
	}
}

// localExpr is the expression of local.name.
func (d *tfDir) localExpr(t *testing.T, name string) hclsyntax.Expression {
	t.Helper()
	for _, f := range d.files {
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			if a := b.Body.Attributes[name]; b.Type == "locals" && a != nil {
				return a.Expr
			}
		}
	}
	t.Fatalf("%s has no local %s", d.path, name)
	return nil
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		t.Fatalf("%q is not a port: %v", s, err)
	}
	return n
}
