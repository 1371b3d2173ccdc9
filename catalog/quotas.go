package catalog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Quotas are Kafka's client quotas (KIP-13, KIP-55, KIP-546, KIP-599) and Strata's
// count caps, kept in the catalog. An entity is a user (a principal, "User:alice"), a
// client id, or both, each either named or "<default>"; a key's value for a caller is
// the most specific entity's that sets it (ResolveOrder). Every change bumps the
// security version in the same transaction and notifies (WatchSecurity), so each
// node's cached view follows within its poll interval at worst. Proved by catalogtest
// (its "quotas" case).
type Quotas interface {
	// AlterQuotas applies every alteration in one transaction, or none: each is valid
	// (ValidateQuotaAlteration) or the call fails wrapping ErrInvalidQuota and changes
	// nothing. An entity left without keys is gone.
	AlterQuotas(ctx context.Context, alts []QuotaAlteration) error
	// QuotaEntries lists every entity with at least one key, sorted by user then client
	// id.
	QuotaEntries(ctx context.Context) ([]QuotaEntry, error)
}

// DefaultEntity names an entity's default: the user or client id of every caller that
// no entity names.
const DefaultEntity = "<default>"

// The quota keys: Kafka's four, then Strata's caps per principal.
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaTopicCount             = "topic_count"
	QuotaConnectorCount         = "connector_count"
)

// quotaKeys says of each key whether its value is a whole number (Kafka's LONG keys;
// the caps) and whether it may be set on an entity with a client id (the caps are the
// principal's alone).
var quotaKeys = map[string]struct{ whole, perClient bool }{
	QuotaProducerByteRate:       {whole: true, perClient: true},
	QuotaConsumerByteRate:       {whole: true, perClient: true},
	QuotaRequestPercentage:      {perClient: true},
	QuotaControllerMutationRate: {perClient: true},
	QuotaTopicCount:             {whole: true},
	QuotaConnectorCount:         {whole: true},
}

// QuotaKeys lists the keys, sorted.
func QuotaKeys() []string {
	out := make([]string, 0, len(quotaKeys))
	for k := range quotaKeys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ErrInvalidQuota is wrapped by every refusal of a quota alteration.
var ErrInvalidQuota = errors.New("invalid quota")

// QuotaEntity is who a quota applies to: a user ("User:alice", or DefaultEntity), a
// client id (or DefaultEntity), or both. An empty field is not part of the entity.
type QuotaEntity struct {
	User     string
	ClientID string
}

func (e QuotaEntity) String() string {
	var parts []string
	if e.User != "" {
		parts = append(parts, "user="+e.User)
	}
	if e.ClientID != "" {
		parts = append(parts, "client_id="+e.ClientID)
	}
	return strings.Join(parts, ",")
}

// QuotaEntry is an entity and the keys set on it.
type QuotaEntry struct {
	Entity QuotaEntity
	Values map[string]float64
}

// QuotaAlteration sets and removes keys of one entity.
type QuotaAlteration struct {
	Entity QuotaEntity
	Set    map[string]float64
	Remove []string
}

// maxEntityName bounds a user or client id in an entity.
const maxEntityName = 255

// ValidateQuotaEntity says what is wrong with e: it names a user, a client id or both;
// a user is a principal ("User:NAME") or the default.
func ValidateQuotaEntity(e QuotaEntity) error {
	if e.User == "" && e.ClientID == "" {
		return fmt.Errorf("%w: the entity names neither a user nor a client id", ErrInvalidQuota)
	}
	if len(e.User) > maxEntityName || len(e.ClientID) > maxEntityName {
		return fmt.Errorf("%w: an entity name is longer than %d bytes", ErrInvalidQuota, maxEntityName)
	}
	if e.User != "" && e.User != DefaultEntity {
		name, ok := strings.CutPrefix(e.User, "User:")
		if !ok || name == "" {
			return fmt.Errorf("%w: the user %q is not a principal: write User:NAME or %s", ErrInvalidQuota, e.User, DefaultEntity)
		}
	}
	return nil
}

// ValidateQuotaAlteration says what is wrong with a: a valid entity, known keys, each
// set or removed once, values that are finite, not negative, whole for the whole-number
// keys, and no caps on an entity with a client id.
func ValidateQuotaAlteration(a QuotaAlteration) error {
	if err := ValidateQuotaEntity(a.Entity); err != nil {
		return err
	}
	seen := map[string]bool{}
	check := func(k string) error {
		info, ok := quotaKeys[k]
		if !ok {
			return fmt.Errorf("%w: unknown quota key %q (known: %s)", ErrInvalidQuota, k, strings.Join(QuotaKeys(), ", "))
		}
		if seen[k] {
			return fmt.Errorf("%w: the key %s is altered twice", ErrInvalidQuota, k)
		}
		seen[k] = true
		if !info.perClient && a.Entity.ClientID != "" {
			return fmt.Errorf("%w: %s is a cap per principal: set it on a user entity without a client id", ErrInvalidQuota, k)
		}
		return nil
	}
	for k, v := range a.Set {
		if err := check(k); err != nil {
			return err
		}
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			return fmt.Errorf("%w: %s is not a finite number", ErrInvalidQuota, k)
		case v < 0:
			return fmt.Errorf("%w: %s is %v: it may not be negative", ErrInvalidQuota, k, v)
		case quotaKeys[k].whole && v != math.Trunc(v):
			return fmt.Errorf("%w: %s is %v: it must be a whole number", ErrInvalidQuota, k, v)
		case quotaKeys[k].whole && v > math.MaxInt64/2:
			return fmt.Errorf("%w: %s is %v: too large", ErrInvalidQuota, k, v)
		}
	}
	for _, k := range a.Remove {
		if err := check(k); err != nil {
			return err
		}
	}
	return nil
}

// ResolveOrder lists the entities whose keys apply to a caller (user, client id), most
// specific first: Kafka's precedence (docs: "Quotas", KIP-55).
func ResolveOrder(user, clientID string) [8]QuotaEntity {
	d := DefaultEntity
	return [8]QuotaEntity{
		{User: user, ClientID: clientID},
		{User: user, ClientID: d},
		{User: user},
		{User: d, ClientID: clientID},
		{User: d, ClientID: d},
		{User: d},
		{ClientID: clientID},
		{ClientID: d},
	}
}

// Owner is the principal a creation counts against, with its caps (-1: none), as the
// broker core read them from its quota view. It rides the creation's context (WithOwner)
// like the audit record; the backend checks the cap in the creation's own transaction
// under the principal's row lock (docs/design.md's lock order: principals first).
type Owner struct {
	Principal  string
	TopicCap   int64
	ConnectCap int64
}

type ownerKey struct{}

// WithOwner attaches the owner of the creation ctx will perform.
func WithOwner(ctx context.Context, o Owner) context.Context {
	return context.WithValue(ctx, ownerKey{}, o)
}

// OwnerOf returns the owner attached to ctx, if any.
func OwnerOf(ctx context.Context) (Owner, bool) {
	o, ok := ctx.Value(ownerKey{}).(Owner)
	return o, ok && o.Principal != ""
}

// ErrCapReached is wrapped when a creation would take a principal past its
// topic_count or connector_count.
var ErrCapReached = errors.New("quota cap reached")
