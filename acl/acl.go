// Package acl is Strata's access-control model, Kafka's own (KIP-11, KIP-290): bindings
// that allow or deny a principal, from a host, an operation on a resource named
// literally or by prefix; deny wins; read, write, delete and alter imply describe, and
// alter-configs implies describe-configs. It owns the vocabulary (with Kafka's numeric
// codes, so the wire protocol's ACL requests map one to one), the validation of a
// binding, the filters DescribeAcls and DeleteAcls take, and the decision itself (Set).
// It knows nothing of keys, catalogs or front ends: the broker core asks it, once, for
// every front end.
package acl

import (
	"errors"
	"fmt"
	"strings"
)

// Operation is what a principal does to a resource. The values are Kafka's
// AclOperation codes.
type Operation int8

// The operations. OpAny appears only in filters; OpAll in a binding covers every
// operation.
const (
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
)

// ResourceType is the kind of resource. The values are Kafka's ResourceType codes, and
// for the resources Kafka has no type for, codes of Strata's own from FirstStrataType up
// (Kafka's run 0 to 7 today; the gap leaves it room to grow). The Kafka front end
// neither shows nor takes those (Kafka reports them).
type ResourceType int8

// The resource types. TypeAny appears only in filters.
const (
	TypeAny             ResourceType = 1
	TypeTopic           ResourceType = 2
	TypeGroup           ResourceType = 3
	TypeCluster         ResourceType = 4
	TypeTransactionalID ResourceType = 5
	// TypeConnector is a connector of the connect role (Kafka has none; Confluent's
	// RBAC names the same resource): create (on it, a prefix, or the cluster) to create
	// one; describe to see its config, status, tasks, topics and offsets; alter to
	// reconfigure, pause, resume, stop, restart and edit its offsets and topics; delete.
	TypeConnector ResourceType = 64
	// TypeSubject is a schema registry subject (Kafka has none; Confluent's RBAC names
	// the same resource): read to get its schemas and versions (and a schema by id,
	// through a subject that holds it); write to register; delete to delete versions;
	// alter-configs (describe-configs) to set (read) its compatibility level and mode.
	// The registry's own level and mode are the cluster's configs.
	TypeSubject ResourceType = 65
)

// FirstStrataType is the first code of Strata's own resource types.
const FirstStrataType ResourceType = 64

// Kafka reports whether t is one of Kafka's resource types (the any filter included),
// which the Kafka protocol's ACL requests carry.
func (t ResourceType) Kafka() bool { return t.valid() && t < FirstStrataType }

// PatternType says how a binding's resource name matches. The values are Kafka's.
type PatternType int8

// The pattern types. PatternAny and PatternMatch appear only in filters.
const (
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Permission allows or denies. The values are Kafka's AclPermissionType codes.
type Permission int8

// The permissions. PermissionAny appears only in filters.
const (
	PermissionAny   Permission = 1
	PermissionDeny  Permission = 2
	PermissionAllow Permission = 3
)

// ClusterName is the one cluster resource's name, as Kafka spells it.
const ClusterName = "kafka-cluster"

// Wildcard, as a literal resource name, a principal's name or a host, matches all.
const Wildcard = "*"

// UserPrefix starts every principal ("User:alice"), as in Kafka.
const UserPrefix = "User:"

// WildcardPrincipal matches every principal.
const WildcardPrincipal = UserPrefix + Wildcard

var opNames = map[Operation]string{
	OpAny: "any", OpAll: "all", OpRead: "read", OpWrite: "write", OpCreate: "create",
	OpDelete: "delete", OpAlter: "alter", OpDescribe: "describe",
	OpDescribeConfigs: "describe-configs", OpAlterConfigs: "alter-configs",
}

var typeNames = map[ResourceType]string{
	TypeAny: "any", TypeTopic: "topic", TypeGroup: "group", TypeCluster: "cluster",
	TypeTransactionalID: "transactional-id", TypeConnector: "connector", TypeSubject: "subject",
}

var patternNames = map[PatternType]string{
	PatternAny: "any", PatternMatch: "match", PatternLiteral: "literal", PatternPrefixed: "prefixed",
}

var permissionNames = map[Permission]string{
	PermissionAny: "any", PermissionDeny: "deny", PermissionAllow: "allow",
}

func (o Operation) String() string    { return nameOf(opNames, o) }
func (t ResourceType) String() string { return nameOf(typeNames, t) }
func (p PatternType) String() string  { return nameOf(patternNames, p) }
func (p Permission) String() string   { return nameOf(permissionNames, p) }
func (o Operation) valid() bool       { _, ok := opNames[o]; return ok }
func (t ResourceType) valid() bool    { _, ok := typeNames[t]; return ok }
func (p PatternType) valid() bool     { _, ok := patternNames[p]; return ok }
func (p Permission) valid() bool      { _, ok := permissionNames[p]; return ok }
func nameOf[K ~int8](m map[K]string, k K) string {
	if s, ok := m[k]; ok {
		return s
	}
	return fmt.Sprintf("unknown(%d)", int8(k))
}

// parse finds s among names, ignoring case and accepting Kafka's spellings
// (DESCRIBE_CONFIGS, DescribeConfigs, TransactionalId) beside the canonical ones.
func parse[K ~int8](m map[K]string, what, s string) (K, error) {
	norm := func(x string) string {
		return strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.ToLower(x))
	}
	want := norm(s)
	for k, name := range m {
		if norm(name) == want {
			return k, nil
		}
	}
	var zero K
	return zero, fmt.Errorf("%w: unknown %s %q", ErrInvalid, what, s)
}

// ParseOperation reads an operation's name (read, describe-configs, ...).
func ParseOperation(s string) (Operation, error) { return parse(opNames, "operation", s) }

// ParseResourceType reads a resource type's name (topic, group, cluster,
// transactional-id, connector, subject).
func ParseResourceType(s string) (ResourceType, error) {
	return parse(typeNames, "resource type", s)
}

// ParsePatternType reads a pattern type's name (literal, prefixed; any and match in
// filters).
func ParsePatternType(s string) (PatternType, error) { return parse(patternNames, "pattern type", s) }

// ParsePermission reads allow or deny.
func ParsePermission(s string) (Permission, error) { return parse(permissionNames, "permission", s) }

// Operations lists the operations a binding may name, for documentation and help.
func Operations() []Operation {
	return []Operation{OpAll, OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs}
}

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid ACL")

// Resource is one resource a call acts on.
type Resource struct {
	Type ResourceType
	Name string
}

// Topic, Group, TransactionalID, Connector, Subject and Cluster name the resources.
func Topic(name string) Resource         { return Resource{TypeTopic, name} }
func Group(name string) Resource         { return Resource{TypeGroup, name} }
func TransactionalID(id string) Resource { return Resource{TypeTransactionalID, id} }
func Connector(name string) Resource     { return Resource{TypeConnector, name} }
func Subject(name string) Resource       { return Resource{TypeSubject, name} }
func Cluster() Resource                  { return Resource{TypeCluster, ClusterName} }
func (r Resource) String() string {
	if r.Type == TypeCluster {
		return "the cluster"
	}
	return r.Type.String() + " " + r.Name
}

// Binding is one ACL: Permission for Principal, connecting from Host, to do Operation on
// the resources of type Resource whose name is Name (PatternLiteral; "*" is every name)
// or starts with it (PatternPrefixed).
type Binding struct {
	Principal  string
	Host       string
	Resource   ResourceType
	Name       string
	Pattern    PatternType
	Operation  Operation
	Permission Permission
}

func (b Binding) String() string {
	return fmt.Sprintf("%s %s from %s to %s %s %s named %s %q", b.Permission, b.Principal, b.Host,
		b.Operation, b.Resource, b.Pattern, b.Pattern, b.Name)
}

// ValidatePrincipal checks a principal's name: "User:" and a name (with wildcard, "User:*").
func ValidatePrincipal(p string, wildcard bool) error {
	name, ok := strings.CutPrefix(p, UserPrefix)
	switch {
	case !ok || name == "":
		return fmt.Errorf("%w: principal %q: write it as User:NAME", ErrInvalid, truncate(p))
	case name == Wildcard && !wildcard:
		return fmt.Errorf("%w: principal %q: a wildcard does not name one principal", ErrInvalid, p)
	case len(p) > 256:
		return fmt.Errorf("%w: principal of %d bytes: at most 256", ErrInvalid, len(p))
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: principal %q: control characters are not allowed", ErrInvalid, truncate(p))
		}
	}
	return nil
}

// Validate says what is wrong with b as a binding to store, or returns nil.
func (b Binding) Validate() error {
	if err := ValidatePrincipal(b.Principal, true); err != nil {
		return err
	}
	switch {
	case b.Host == "":
		return fmt.Errorf("%w: host is empty: use * for every host", ErrInvalid)
	case !b.Resource.valid() || b.Resource == TypeAny:
		return fmt.Errorf("%w: resource type %s: use topic, group, cluster, transactional-id, connector or subject", ErrInvalid, b.Resource)
	case b.Pattern != PatternLiteral && b.Pattern != PatternPrefixed:
		return fmt.Errorf("%w: pattern type %s: use literal or prefixed", ErrInvalid, b.Pattern)
	case !b.Operation.valid() || b.Operation == OpAny:
		return fmt.Errorf("%w: operation %s: use one of all, read, write, create, delete, alter, describe, describe-configs, alter-configs", ErrInvalid, b.Operation)
	case b.Permission != PermissionAllow && b.Permission != PermissionDeny:
		return fmt.Errorf("%w: permission %s: use allow or deny", ErrInvalid, b.Permission)
	case b.Name == "":
		return fmt.Errorf("%w: resource name is empty", ErrInvalid)
	case len(b.Name) > 1024 || len(b.Host) > 256:
		return fmt.Errorf("%w: resource name or host too long (1024, 256 bytes at most)", ErrInvalid)
	case b.Resource == TypeCluster && (b.Name != ClusterName || b.Pattern != PatternLiteral):
		return fmt.Errorf("%w: the cluster resource is named %s, literally", ErrInvalid, ClusterName)
	case b.Pattern == PatternPrefixed && b.Name == Wildcard:
		return fmt.Errorf("%w: a prefixed pattern of %q: use the literal wildcard for every name", ErrInvalid, Wildcard)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
