package acl

import (
	"errors"
	"fmt"
	"testing"
)

func allow(p string, t ResourceType, name string, pat PatternType, op Operation) Binding {
	return Binding{Principal: p, Host: "*", Resource: t, Name: name, Pattern: pat, Operation: op, Permission: PermissionAllow}
}

func deny(p string, t ResourceType, name string, pat PatternType, op Operation) Binding {
	b := allow(p, t, name, pat, op)
	b.Permission = PermissionDeny
	return b
}

const alice, bob = "User:alice", "User:bob"

// TestAllowed is Kafka's decision table: literal and prefixed patterns, the wildcard
// name and principal, hosts, deny winning, and the implied operations (and that denies
// are not implied).
func TestAllowed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bindings []Binding
		who      string
		host     string
		op       Operation
		r        Resource
		want     bool
	}{
		{"no bindings: no", nil, alice, "h", OpRead, Topic("t"), false},
		{"literal allow", []Binding{allow(alice, TypeTopic, "orders", PatternLiteral, OpRead)}, alice, "h", OpRead, Topic("orders"), true},
		{"literal is not a prefix", []Binding{allow(alice, TypeTopic, "orders", PatternLiteral, OpRead)}, alice, "h", OpRead, Topic("orders-eu"), false},
		{"other principal", []Binding{allow(alice, TypeTopic, "orders", PatternLiteral, OpRead)}, bob, "h", OpRead, Topic("orders"), false},
		{"other operation", []Binding{allow(alice, TypeTopic, "orders", PatternLiteral, OpRead)}, alice, "h", OpWrite, Topic("orders"), false},
		{"other resource type", []Binding{allow(alice, TypeTopic, "orders", PatternLiteral, OpRead)}, alice, "h", OpRead, Group("orders"), false},
		{"prefixed allow", []Binding{allow(alice, TypeTopic, "orders-", PatternPrefixed, OpWrite)}, alice, "h", OpWrite, Topic("orders-eu"), true},
		{"prefixed equal name", []Binding{allow(alice, TypeTopic, "orders", PatternPrefixed, OpWrite)}, alice, "h", OpWrite, Topic("orders"), true},
		{"prefixed does not match shorter", []Binding{allow(alice, TypeTopic, "orders-", PatternPrefixed, OpWrite)}, alice, "h", OpWrite, Topic("orders"), false},
		{"wildcard name", []Binding{allow(alice, TypeTopic, "*", PatternLiteral, OpRead)}, alice, "h", OpRead, Topic("anything"), true},
		{"wildcard principal", []Binding{allow(WildcardPrincipal, TypeGroup, "g", PatternLiteral, OpRead)}, bob, "h", OpRead, Group("g"), true},
		{"all covers every operation", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpAll)}, alice, "h", OpAlterConfigs, Topic("t"), true},
		{"host literal", []Binding{{Principal: alice, Host: "10.0.0.1", Resource: TypeTopic, Name: "t", Pattern: PatternLiteral, Operation: OpRead, Permission: PermissionAllow}}, alice, "10.0.0.1", OpRead, Topic("t"), true},
		{"other host", []Binding{{Principal: alice, Host: "10.0.0.1", Resource: TypeTopic, Name: "t", Pattern: PatternLiteral, Operation: OpRead, Permission: PermissionAllow}}, alice, "10.0.0.2", OpRead, Topic("t"), false},
		{"read implies describe", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpRead)}, alice, "h", OpDescribe, Topic("t"), true},
		{"write implies describe", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpWrite)}, alice, "h", OpDescribe, Topic("t"), true},
		{"delete implies describe", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpDelete)}, alice, "h", OpDescribe, Topic("t"), true},
		{"alter implies describe", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpAlter)}, alice, "h", OpDescribe, Topic("t"), true},
		{"create does not imply describe", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpCreate)}, alice, "h", OpDescribe, Topic("t"), false},
		{"alter-configs implies describe-configs", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpAlterConfigs)}, alice, "h", OpDescribeConfigs, Topic("t"), true},
		{"describe implies nothing", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpDescribe)}, alice, "h", OpRead, Topic("t"), false},
		{"alter-configs does not imply describe", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpAlterConfigs)}, alice, "h", OpDescribe, Topic("t"), false},
		{"deny wins over literal allow", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpRead), deny(alice, TypeTopic, "t", PatternLiteral, OpRead)}, alice, "h", OpRead, Topic("t"), false},
		{"prefixed deny wins", []Binding{allow(alice, TypeTopic, "*", PatternLiteral, OpAll), deny(alice, TypeTopic, "secret-", PatternPrefixed, OpRead)}, alice, "h", OpRead, Topic("secret-x"), false},
		{"prefixed deny elsewhere", []Binding{allow(alice, TypeTopic, "*", PatternLiteral, OpAll), deny(alice, TypeTopic, "secret-", PatternPrefixed, OpRead)}, alice, "h", OpRead, Topic("public"), true},
		{"wildcard-principal deny wins", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpWrite), deny(WildcardPrincipal, TypeTopic, "t", PatternLiteral, OpWrite)}, alice, "h", OpWrite, Topic("t"), false},
		{"deny all wins", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpRead), deny(alice, TypeTopic, "t", PatternLiteral, OpAll)}, alice, "h", OpDescribe, Topic("t"), false},
		{"deny of read does not deny describe", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpDescribe), deny(alice, TypeTopic, "t", PatternLiteral, OpRead)}, alice, "h", OpDescribe, Topic("t"), true},
		{"deny of other principal", []Binding{allow(alice, TypeTopic, "t", PatternLiteral, OpRead), deny(bob, TypeTopic, "t", PatternLiteral, OpRead)}, alice, "h", OpRead, Topic("t"), true},
		{"cluster", []Binding{allow(alice, TypeCluster, ClusterName, PatternLiteral, OpAlter)}, alice, "h", OpAlter, Cluster(), true},
		{"transactional id", []Binding{allow(alice, TypeTransactionalID, "tx-", PatternPrefixed, OpWrite)}, alice, "h", OpWrite, TransactionalID("tx-1"), true},
		{"connector prefix", []Binding{allow(alice, TypeConnector, "etl-", PatternPrefixed, OpAlter)}, alice, "h", OpAlter, Connector("etl-orders"), true},
		{"connector alter implies describe", []Binding{allow(alice, TypeConnector, "c", PatternLiteral, OpAlter)}, alice, "h", OpDescribe, Connector("c"), true},
		{"a topic grant is not a connector's", []Binding{allow(alice, TypeTopic, "c", PatternLiteral, OpAll)}, alice, "h", OpDescribe, Connector("c"), false},
		{"invalid binding ignored", []Binding{{Principal: "alice", Host: "*", Resource: TypeTopic, Name: "t", Pattern: PatternLiteral, Operation: OpRead, Permission: PermissionAllow}}, "alice", "h", OpRead, Topic("t"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewSet(tc.bindings).Allowed(tc.who, tc.host, tc.op, tc.r); got != tc.want {
				t.Errorf("Allowed(%s, %s, %s, %s) = %v, want %v", tc.who, tc.host, tc.op, tc.r, got, tc.want)
			}
		})
	}
}

func TestNilSetDenies(t *testing.T) {
	var s *Set
	if s.Allowed(alice, "h", OpRead, Topic("t")) {
		t.Fatal("a nil set allowed")
	}
}

func TestValidate(t *testing.T) {
	good := allow(alice, TypeTopic, "t", PatternLiteral, OpRead)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Binding)
	}{
		{"principal without type", func(b *Binding) { b.Principal = "alice" }},
		{"empty principal name", func(b *Binding) { b.Principal = "User:" }},
		{"empty host", func(b *Binding) { b.Host = "" }},
		{"any resource type", func(b *Binding) { b.Resource = TypeAny }},
		{"unknown resource type", func(b *Binding) { b.Resource = 9 }},
		{"match pattern", func(b *Binding) { b.Pattern = PatternMatch }},
		{"any operation", func(b *Binding) { b.Operation = OpAny }},
		{"unknown operation", func(b *Binding) { b.Operation = 12 }},
		{"any permission", func(b *Binding) { b.Permission = PermissionAny }},
		{"empty name", func(b *Binding) { b.Name = "" }},
		{"cluster of another name", func(b *Binding) { b.Resource, b.Name = TypeCluster, "c" }},
		{"prefixed cluster", func(b *Binding) { b.Resource, b.Name, b.Pattern = TypeCluster, ClusterName, PatternPrefixed }},
		{"prefixed wildcard", func(b *Binding) { b.Name, b.Pattern = "*", PatternPrefixed }},
		{"control character", func(b *Binding) { b.Principal = "User:a\nb" }},
	} {
		b := good
		tc.mod(&b)
		if err := b.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", tc.name, err)
		}
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]Operation{
		"read": OpRead, "READ": OpRead, "describe-configs": OpDescribeConfigs, "DESCRIBE_CONFIGS": OpDescribeConfigs,
		"DescribeConfigs": OpDescribeConfigs, "alter_configs": OpAlterConfigs, "All": OpAll,
	} {
		if got, err := ParseOperation(in); err != nil || got != want {
			t.Errorf("ParseOperation(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if got, err := ParseResourceType("TransactionalId"); err != nil || got != TypeTransactionalID {
		t.Errorf("ParseResourceType(TransactionalId) = %v, %v", got, err)
	}
	if got, err := ParseResourceType("CONNECTOR"); err != nil || got != TypeConnector || got.String() != "connector" {
		t.Errorf("ParseResourceType(CONNECTOR) = %v, %v", got, err)
	}
	if _, err := ParseOperation("idempotent-write"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseOperation(idempotent-write) = %v, want ErrInvalid", err)
	}
	for _, o := range Operations() {
		if got, err := ParseOperation(o.String()); err != nil || got != o {
			t.Errorf("round trip of %s: %v, %v", o, got, err)
		}
	}
}

func TestFilter(t *testing.T) {
	lit := allow(alice, TypeTopic, "orders", PatternLiteral, OpRead)
	pre := allow(alice, TypeTopic, "ord", PatternPrefixed, OpWrite)
	wild := deny(bob, TypeTopic, "*", PatternLiteral, OpRead)
	grp := allow(alice, TypeGroup, "orders", PatternLiteral, OpRead)
	con := allow(alice, TypeConnector, "orders", PatternLiteral, OpAlter)
	all := []Binding{lit, pre, wild, grp, con}
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name string
		f    Filter
		want []Binding
	}{
		{"everything", MatchAll(), all},
		{"topics", Filter{Resource: TypeTopic, Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}, []Binding{lit, pre, wild}},
		{"any pattern, exact name", Filter{Resource: TypeAny, Name: s("orders"), Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}, []Binding{lit, grp, con}},
		{"Kafka's types only", Filter{Resource: TypeAny, Name: s("orders"), Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny, KafkaOnly: true}, []Binding{lit, grp}},
		{"connectors", Filter{Resource: TypeConnector, Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}, []Binding{con}},
		{"match a topic name", Filter{Resource: TypeTopic, Name: s("orders"), Pattern: PatternMatch, Operation: OpAny, Permission: PermissionAny}, []Binding{lit, pre, wild}},
		{"match another name", Filter{Resource: TypeTopic, Name: s("other"), Pattern: PatternMatch, Operation: OpAny, Permission: PermissionAny}, []Binding{wild}},
		{"prefixed only", Filter{Resource: TypeAny, Pattern: PatternPrefixed, Operation: OpAny, Permission: PermissionAny}, []Binding{pre}},
		{"principal", Filter{Resource: TypeAny, Principal: s(bob), Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}, []Binding{wild}},
		{"operation and permission", Filter{Resource: TypeAny, Pattern: PatternAny, Operation: OpRead, Permission: PermissionAllow}, []Binding{lit, grp}},
		{"host", Filter{Resource: TypeAny, Host: s("10.0.0.1"), Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}, nil},
	} {
		var got []Binding
		for _, b := range all {
			if tc.f.Matches(b) {
				got = append(got, b)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: matched %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: matched %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
	if err := (Filter{}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero filter validates: %v", err)
	}
	if err := MatchAll().Validate(); err != nil {
		t.Errorf("MatchAll: %v", err)
	}
	kafkaConnectors := Filter{Resource: TypeConnector, Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny, KafkaOnly: true}
	if err := kafkaConnectors.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a Kafka filter naming connectors validates: %v", err)
	}
	for _, typ := range []ResourceType{TypeAny, TypeTopic, TypeGroup, TypeCluster, TypeTransactionalID} {
		if !typ.Kafka() {
			t.Errorf("%s is not Kafka's", typ)
		}
	}
	if TypeConnector.Kafka() || ResourceType(9).Kafka() {
		t.Error("connector (or an unknown code) counted as Kafka's")
	}
}

// BenchmarkAllowed decides a request among 1,000 bindings of 100 principals, a tenth of
// them prefixed: a produce or fetch asks once per topic.
func BenchmarkAllowed(b *testing.B) {
	var bs []Binding
	for i := range 1000 {
		pat := PatternLiteral
		if i%10 == 0 {
			pat = PatternPrefixed
		}
		bs = append(bs, allow(fmt.Sprintf("User:u%d", i%100), TypeTopic, fmt.Sprintf("topic-%d", i), pat, OpRead))
	}
	bs = append(bs, deny("User:u7", TypeTopic, "topic-9", PatternPrefixed, OpRead))
	s := NewSet(bs)
	b.ReportAllocs()
	for b.Loop() {
		if !s.Allowed("User:u7", "10.0.0.1", OpRead, Topic("topic-507")) {
			b.Fatal("refused")
		}
	}
}
