package broker

import (
	"context"

	"github.com/strata-io/strata/acl"
)

// CoordinatorKind is what a coordinator is found for: Kafka's FindCoordinator key
// type. Any node coordinates anything here (no leaders); only who may ask is a rule.
type CoordinatorKind int8

// The kinds of coordinator, numbered as Kafka numbers them.
const (
	CoordinatorGroup       CoordinatorKind = 0
	CoordinatorTransaction CoordinatorKind = 1
)

// AuthorizeCoordinator answers nil when who may find the coordinator of key: describe
// on the group, or on the transactional id, as Kafka requires. Any other kind is
// CodeInvalidRequest.
func (b *Broker) AuthorizeCoordinator(ctx context.Context, who Principal, kind CoordinatorKind, key string) error {
	var r acl.Resource
	switch kind {
	case CoordinatorGroup:
		r = acl.Group(key)
	case CoordinatorTransaction:
		r = acl.TransactionalID(key)
	default:
		return newError(CodeInvalidRequest, "coordinator type %d: want 0 (group) or 1 (transaction)", kind)
	}
	if e := b.authorize(ctx, who, acl.OpDescribe, r); e != nil {
		return e
	}
	return nil
}
