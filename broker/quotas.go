package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/quota"
)

// Client quotas (package quota enforces them; the catalog keeps them): their
// administration — Kafka's DescribeClientQuotas and AlterClientQuotas, which need
// describe-configs and alter-configs on the cluster as in Kafka — and the calls front
// ends make to enforce them, each one call per request with the request's aggregate.

// QuotaStore keeps the quotas (both catalog backends).
type QuotaStore = catalog.Quotas

var _ QuotaStore = catalog.Backend(nil)

// QuotaMatch is how a QuotaFilter component matches an entity's part.
type QuotaMatch int

// The matches of Kafka's DescribeClientQuotas.
const (
	MatchExact   QuotaMatch = iota // the part named Name
	MatchDefault                   // the part's default
	MatchAny                       // the part present, whatever it is
)

// QuotaComponent filters on one part of an entity.
type QuotaComponent struct {
	// Type is "user" or "client-id".
	Type  string
	Match QuotaMatch
	// Name is the user ("User:alice") or client id MatchExact looks for.
	Name string
}

// QuotaFilter selects entities: every component matches; Strict: the entity has no
// other part.
type QuotaFilter struct {
	Components []QuotaComponent
	Strict     bool
}

// The entity part types, as Kafka names them.
const (
	EntityUser     = "user"
	EntityClientID = "client-id"
)

func (f QuotaFilter) validate() *Error {
	seen := map[string]bool{}
	for _, c := range f.Components {
		if c.Type != EntityUser && c.Type != EntityClientID {
			return newError(CodeInvalidRequest, "unknown entity type %q: quotas apply to %s and %s", truncate(c.Type, 64), EntityUser, EntityClientID).with("field", "entity_type")
		}
		if seen[c.Type] {
			return newError(CodeInvalidRequest, "the entity type %s is filtered twice", c.Type).with("field", "entity_type")
		}
		seen[c.Type] = true
		if c.Match < MatchExact || c.Match > MatchAny {
			return newError(CodeInvalidRequest, "unknown match type %d", c.Match).with("field", "match_type")
		}
	}
	return nil
}

func (f QuotaFilter) matches(e catalog.QuotaEntity) bool {
	has := map[string]bool{}
	for _, c := range f.Components {
		part := e.User
		if c.Type == EntityClientID {
			part = e.ClientID
		}
		has[c.Type] = true
		switch {
		case part == "":
			return false
		case c.Match == MatchExact && part != c.Name:
			return false
		case c.Match == MatchDefault && part != catalog.DefaultEntity:
			return false
		}
	}
	if f.Strict {
		if e.User != "" && !has[EntityUser] || e.ClientID != "" && !has[EntityClientID] {
			return false
		}
	}
	return true
}

func (b *Broker) quotaCall(ctx context.Context, who Principal, op acl.Operation) *Error {
	if b.d.QuotaStore == nil {
		return newError(CodeRoleUnavailable, "this node's catalog keeps no quotas")
	}
	return b.authorize(ctx, who, op, acl.Cluster())
}

// DescribeQuotas lists the entities f selects with their keys.
func (b *Broker) DescribeQuotas(ctx context.Context, who Principal, f QuotaFilter) ([]catalog.QuotaEntry, error) {
	if e := b.quotaCall(ctx, who, acl.OpDescribeConfigs); e != nil {
		return nil, e
	}
	if e := f.validate(); e != nil {
		return nil, e
	}
	all, err := b.d.QuotaStore.QuotaEntries(ctx)
	if err != nil {
		return nil, catalogError("describe quotas", err)
	}
	var out []catalog.QuotaEntry
	for _, en := range all {
		if f.matches(en.Entity) {
			out = append(out, en)
		}
	}
	return out, nil
}

// AlterQuotas applies every alteration or none: one that is not valid is refused with
// CodeInvalidRequest, Details["entry"] its index, and nothing changes. validateOnly
// checks without changing anything.
func (b *Broker) AlterQuotas(ctx context.Context, who Principal, alts []catalog.QuotaAlteration, validateOnly bool) error {
	if e := b.quotaCall(ctx, who, acl.OpAlterConfigs); e != nil {
		return e
	}
	seen := map[catalog.QuotaEntity]bool{}
	for i, a := range alts {
		if err := catalog.ValidateQuotaAlteration(a); err != nil {
			return newError(CodeInvalidRequest, "%s", err.Error()).with("entry", i).cause(err)
		}
		if seen[a.Entity] {
			return newError(CodeInvalidRequest, "the entity %s is altered twice", a.Entity).with("entry", i)
		}
		seen[a.Entity] = true
	}
	if validateOnly || len(alts) == 0 {
		return nil
	}
	details := make(map[string]any, len(alts))
	for _, a := range alts {
		details[a.Entity.String()] = map[string]any{"set": a.Set, "remove": a.Remove}
	}
	if err := b.d.QuotaStore.AlterQuotas(withAuditOf(ctx, who, "quota.alter", "quota", fmt.Sprintf("%d entities", len(alts)), details), alts); err != nil {
		if errors.Is(err, catalog.ErrInvalidQuota) {
			return newError(CodeInvalidRequest, "%s", say(err, catalog.ErrInvalidQuota, "a quota is not valid")).cause(err)
		}
		return catalogError("alter quotas", err)
	}
	return nil
}

// ProduceThrottle counts n bytes produced by who in one request and answers how long
// who must now pause for its producer_byte_rate (0: within it, or none).
func (b *Broker) ProduceThrottle(who Principal, n int64) time.Duration {
	return b.d.Quotas.Record(quota.Produce, who.Name, who.ClientID, n)
}

// FetchThrottle is ProduceThrottle for bytes fetched (consumer_byte_rate).
func (b *Broker) FetchThrottle(who Principal, n int64) time.Duration {
	return b.d.Quotas.Record(quota.Fetch, who.Name, who.ClientID, n)
}

// RequestThrottle counts d of request-handling time for who and answers the pause its
// request_percentage asks for.
func (b *Broker) RequestThrottle(who Principal, d time.Duration) time.Duration {
	return b.d.Quotas.Record(quota.Request, who.Name, who.ClientID, int64(d))
}

// MutationThrottle is how long who should wait before its next topic or partition
// creation or deletion (controller_mutation_rate), for a response's throttle time.
func (b *Broker) MutationThrottle(who Principal) time.Duration {
	return b.d.Quotas.Owed(quota.Mutation, who.Name, who.ClientID)
}

// AdmitBytes is the HTTP API's check before it serves a produce (fetch: false) or a
// fetch: a caller that owes more than the bounded delay (quota.Config.MaxDelay) is
// refused, with CodeThrottled and the time to wait, before anything is done — a front
// end that holds its answers back cannot hold one back for longer.
func (b *Broker) AdmitBytes(who Principal, fetch bool) error {
	kind, name := quota.Produce, "produce"
	if fetch {
		kind, name = quota.Fetch, "fetch"
	}
	owed := b.d.Quotas.Owed(kind, who.Name, who.ClientID)
	if owed <= b.d.Quotas.MaxDelay() {
		return nil
	}
	b.d.Quotas.Refused(who.Name, name)
	return throttled(owed-b.d.Quotas.MaxDelay(), "%s is over its %s quota on this node: retry after the time given", who.name(), name)
}

// DelayFor counts n bytes served over HTTP and answers how long to hold the answer
// back: the throttle, bounded by quota.Config.MaxDelay.
func (b *Broker) DelayFor(who Principal, fetch bool, n int64) time.Duration {
	kind := quota.Produce
	if fetch {
		kind = quota.Fetch
	}
	return min(b.d.Quotas.Record(kind, who.Name, who.ClientID, n), b.d.Quotas.MaxDelay())
}

// throttled is a CodeThrottled refusal carrying the time to wait (Details
// "retry_after_ms", at least 1).
func throttled(wait time.Duration, format string, args ...any) *Error {
	ms := max(int64(math.Ceil(float64(wait)/float64(time.Millisecond))), 1)
	return newError(CodeThrottled, format, args...).with("retry_after_ms", ms)
}

// RetryAfter is how long a CodeThrottled refusal asks its caller to wait; 0 for other
// errors.
func RetryAfter(err error) time.Duration {
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeThrottled {
		return 0
	}
	ms, _ := e.Details["retry_after_ms"].(int64)
	return time.Duration(ms) * time.Millisecond
}

// mutate asks who's controller_mutation_rate for n partitions created or deleted.
func (b *Broker) mutate(who Principal, n int32) *Error {
	wait, ok := b.d.Quotas.Mutate(who.Name, who.ClientID, int64(n))
	if ok {
		return nil
	}
	return throttled(wait, "%s is over its controller_mutation_rate: retry after the time given", who.name())
}

// withOwner attaches who and its caps to a creation, for the catalog to check under
// the principal's lock.
func (b *Broker) withOwner(ctx context.Context, who Principal) context.Context {
	return catalog.WithOwner(ctx, b.d.Quotas.Caps(who.Name))
}

// capError maps the catalog's refusal of a creation past a cap.
func (b *Broker) capError(who Principal, kind string, err error) *Error {
	b.d.Quotas.Refused(who.Name, kind)
	return newError(CodeQuotaExceeded, "%s", say(err, catalog.ErrCapReached, "%s has reached its %s", who.name(), kind)).with("quota", kind).cause(err)
}

// DefaultEntity names an entity part's default ("<default>").
const DefaultEntity = catalog.DefaultEntity

// PartsFilter selects the entities with the parts given (entity type → a name, or
// DefaultEntity for the default); strict: and no other part.
func PartsFilter(parts map[string]string, strict bool) QuotaFilter {
	f := QuotaFilter{Strict: strict}
	for typ, name := range parts {
		c := QuotaComponent{Type: typ, Match: MatchExact, Name: name}
		if name == DefaultEntity {
			c = QuotaComponent{Type: typ, Match: MatchDefault}
		}
		f.Components = append(f.Components, c)
	}
	return f
}
