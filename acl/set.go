package acl

import (
	"fmt"
	"strings"
)

// Set is an immutable, indexed set of bindings that decides requests. Build one with
// NewSet whenever the bindings change; it is safe for concurrent use.
type Set struct {
	// byType indexes the bindings of each resource type: literal ones by name (the
	// wildcard "*" under its own name), prefixed ones in a list.
	byType map[ResourceType]*typeIndex
	len    int
}

type typeIndex struct {
	literal  map[string][]Binding
	prefixed []Binding
}

// NewSet indexes bs. Bindings that do not validate are left out (the catalog stores
// only valid ones).
func NewSet(bs []Binding) *Set {
	s := &Set{byType: map[ResourceType]*typeIndex{}}
	for _, b := range bs {
		if b.Validate() != nil {
			continue
		}
		ix := s.byType[b.Resource]
		if ix == nil {
			ix = &typeIndex{literal: map[string][]Binding{}}
			s.byType[b.Resource] = ix
		}
		if b.Pattern == PatternLiteral {
			ix.literal[b.Name] = append(ix.literal[b.Name], b)
		} else {
			ix.prefixed = append(ix.prefixed, b)
		}
		s.len++
	}
	return s
}

// Len is the number of bindings in s.
func (s *Set) Len() int { return s.len }

// impliedBy lists, for the operations others imply, the operations whose allowance
// allows them too: Kafka's rule (read, write, delete, alter imply describe;
// alter-configs implies describe-configs). A deny is never implied: denying read does
// not deny describe.
var impliedBy = map[Operation][]Operation{
	OpDescribe:        {OpDescribe, OpRead, OpWrite, OpDelete, OpAlter},
	OpDescribeConfigs: {OpDescribeConfigs, OpAlterConfigs},
}

// Allowed decides whether principal, connecting from host, may do op on r: some allow
// binding matches (op itself, an operation implying it, or all) and no deny binding
// matches (op itself or all). Without any matching binding the answer is no. Superusers
// are the caller's business (they skip the question).
func (s *Set) Allowed(principal, host string, op Operation, r Resource) bool {
	if s == nil {
		return false
	}
	allowed := false
	denied := false
	s.each(r, func(b Binding) bool {
		if !principalMatches(b.Principal, principal) || !hostMatches(b.Host, host) {
			return true
		}
		switch b.Permission {
		case PermissionDeny:
			if b.Operation == op || b.Operation == OpAll {
				denied = true
				return false // deny wins: nothing more to learn
			}
		case PermissionAllow:
			if !allowed && opAllows(b.Operation, op) {
				allowed = true
			}
		}
		return true
	})
	return allowed && !denied
}

// opAllows says whether an allow binding for have allows want.
func opAllows(have, want Operation) bool {
	if have == OpAll || have == want {
		return true
	}
	for _, o := range impliedBy[want] {
		if o == have {
			return true
		}
	}
	return false
}

func principalMatches(pattern, principal string) bool {
	return pattern == principal || pattern == WildcardPrincipal
}

func hostMatches(pattern, host string) bool {
	return pattern == Wildcard || pattern == host
}

// each calls fn for every binding whose resource pattern covers r, until fn returns
// false.
func (s *Set) each(r Resource, fn func(Binding) bool) {
	ix := s.byType[r.Type]
	if ix == nil {
		return
	}
	for _, name := range [2]string{r.Name, Wildcard} {
		for _, b := range ix.literal[name] {
			if !fn(b) {
				return
			}
		}
		if r.Name == Wildcard {
			break // the wildcard's bindings were the name's
		}
	}
	for _, b := range ix.prefixed {
		if strings.HasPrefix(r.Name, b.Name) && !fn(b) {
			return
		}
	}
}

// Filter selects bindings, as Kafka's DescribeAcls and DeleteAcls take them: nil
// strings and the Any values match everything. With PatternMatch and a Name, it selects
// the bindings that apply to the resource of that name (literal equal or wildcard,
// prefixes of it); with PatternAny and a Name, the bindings of exactly that name
// (whatever their pattern); with PatternLiteral or PatternPrefixed, that pattern type.
type Filter struct {
	Principal  *string
	Host       *string
	Resource   ResourceType
	Name       *string
	Pattern    PatternType
	Operation  Operation
	Permission Permission
	// KafkaOnly selects only bindings of Kafka's resource types, and refuses a filter
	// naming another: the Kafka protocol's filters (a Kafka client can neither show nor
	// name a connector binding, so its "any" must not delete one it cannot report).
	KafkaOnly bool
}

// MatchAll is the filter that selects every binding.
func MatchAll() Filter {
	return Filter{Resource: TypeAny, Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}
}

// Validate says what is wrong with f, or returns nil.
func (f Filter) Validate() error {
	switch {
	case !f.Resource.valid():
		return fmt.Errorf("%w: filter resource type %d", ErrInvalid, f.Resource)
	case f.KafkaOnly && !f.Resource.Kafka():
		return fmt.Errorf("%w: resource type %s is Strata's own, not Kafka's: manage its ACLs over the HTTP API (strata acls)", ErrInvalid, f.Resource)
	case !f.Pattern.valid():
		return fmt.Errorf("%w: filter pattern type %d", ErrInvalid, f.Pattern)
	case !f.Operation.valid():
		return fmt.Errorf("%w: filter operation %d", ErrInvalid, f.Operation)
	case !f.Permission.valid():
		return fmt.Errorf("%w: filter permission %d", ErrInvalid, f.Permission)
	}
	return nil
}

// Matches says whether f selects b.
func (f Filter) Matches(b Binding) bool {
	switch {
	case f.KafkaOnly && !b.Resource.Kafka(),
		f.Resource != TypeAny && f.Resource != b.Resource,
		f.Principal != nil && *f.Principal != b.Principal,
		f.Host != nil && *f.Host != b.Host,
		f.Operation != OpAny && f.Operation != b.Operation,
		f.Permission != PermissionAny && f.Permission != b.Permission:
		return false
	}
	switch f.Pattern {
	case PatternAny:
		return f.Name == nil || *f.Name == b.Name
	case PatternMatch:
		if f.Name == nil {
			return true
		}
		if b.Pattern == PatternLiteral {
			return b.Name == *f.Name || b.Name == Wildcard
		}
		return strings.HasPrefix(*f.Name, b.Name)
	default:
		return f.Pattern == b.Pattern && (f.Name == nil || *f.Name == b.Name)
	}
}
