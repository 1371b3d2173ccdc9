package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// Authorization is decided here, once, for every front end (docs/design.md "Security"):
// each call asks about the resources it touches before it looks any of them up, so a
// refusal says the same thing whether the resource exists or not.

// Authorizer decides whether who may do op on r: package security, over the catalog's
// ACLs and the configured superusers.
type Authorizer interface {
	Allowed(who Principal, op acl.Operation, r acl.Resource) bool
}

// Security is the catalog's part that keeps keys, ACLs and the audit log.
type Security = catalog.Security

// AnonymousName names Anonymous in the audit log and the access log, as Kafka does.
const AnonymousName = "User:ANONYMOUS"

// Authorize answers nil when who may do op on r, else a *Error with CodeForbidden naming
// the operation and the resource (details "operation", "resource_type", "resource"),
// identical whether r exists or not. Every call of the core authorizes what it does; a
// front end calls Authorize first only where it must decide before it reads a body or
// looks anything up (the HTTP API before a produce's topic lookup).
func (b *Broker) Authorize(ctx context.Context, who Principal, op acl.Operation, r acl.Resource) error {
	if e := b.authorize(ctx, who, op, r); e != nil {
		return e
	}
	return nil
}

func (b *Broker) authorize(ctx context.Context, who Principal, op acl.Operation, r acl.Resource) *Error {
	ok := b.may(who, op, r)
	if a, _ := ctx.Value(accessKey{}).(*Access); a != nil {
		a.record(Decision{Operation: op, Resource: r, Allowed: ok})
	}
	if !ok {
		return Forbidden(op, r)
	}
	return nil
}

// may is authorize without the access log: for filtering listings.
func (b *Broker) may(who Principal, op acl.Operation, r acl.Resource) bool {
	return b.d.Authorizer == nil || b.d.Authorizer.Allowed(who, op, r)
}

// Secured says whether the node enforces authorization.
func (b *Broker) Secured() bool { return b.d.Authorizer != nil }

// Forbidden is the refusal of op on r.
func Forbidden(op acl.Operation, r acl.Resource) *Error {
	return newError(CodeForbidden, "not authorized to %s %s", op, r).
		with("operation", op.String()).with("resource_type", r.Type.String()).with("resource", r.Name)
}

// authorizeTopics authorizes op on each topic named, in order, once each.
func (b *Broker) authorizeTopics(ctx context.Context, who Principal, op acl.Operation, topics []string) *Error {
	return b.authorizeEach(ctx, who, op, len(topics), func(i int) string { return topics[i] })
}

// authorizeEach authorizes op on topic(i) for i < n, once per distinct name: a produce
// names its topic once per record, usually the same one.
func (b *Broker) authorizeEach(ctx context.Context, who Principal, op acl.Operation, n int, topic func(int) string) *Error {
	var done []string
	var many map[string]bool // past a few topics
	for i := range n {
		t := topic(i)
		if (len(done) > 0 && done[len(done)-1] == t) || many[t] || (many == nil && slices.Contains(done, t)) {
			continue
		}
		if e := b.authorize(ctx, who, op, acl.Topic(t)); e != nil {
			return e
		}
		done = append(done, t)
		if many != nil || len(done) > 16 {
			if many == nil {
				many = make(map[string]bool, 2*len(done))
				for _, d := range done {
					many[d] = true
				}
			}
			many[t] = true
		}
	}
	return nil
}

// withAudit attaches the audit record of an administrative action by who on r; the
// catalog writes it in the action's transaction (catalog.WithAudit).
func withAudit(ctx context.Context, who Principal, action string, r acl.Resource, details map[string]any) context.Context {
	return withAuditOf(ctx, who, action, r.Type.String(), r.Name, details)
}

// withAuditOf is withAudit for what is not an ACL resource (a key, an ACL).
func withAuditOf(ctx context.Context, who Principal, action, resType, res string, details map[string]any) context.Context {
	return catalog.WithAudit(ctx, catalog.Audit{Principal: who.name(), Action: action, ResourceType: resType, Resource: res, Details: details})
}

// name is the principal's name for the logs: AnonymousName when it has none.
func (p Principal) name() string {
	if p.Name == "" {
		return AnonymousName
	}
	return p.Name
}

// Access collects the authorization decisions made for one request, for the front
// end's access log. Attach one with WithAccess; it is safe for concurrent use (a Kafka
// request's partitions are served at once).
type Access struct {
	mu        sync.Mutex
	decisions []Decision
	more      int
}

// Decision is one authorization decision.
type Decision struct {
	Operation acl.Operation
	Resource  acl.Resource
	Allowed   bool
}

type accessKey struct{}

// maxDecisions bounds what an Access keeps of one request.
const maxDecisions = 8

// WithAccess returns ctx carrying a new Access.
func WithAccess(ctx context.Context) (context.Context, *Access) {
	a := &Access{}
	return context.WithValue(ctx, accessKey{}, a), a
}

func (a *Access) record(d Decision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, have := range a.decisions {
		if have == d {
			return
		}
	}
	if len(a.decisions) == maxDecisions {
		a.more++
		return
	}
	a.decisions = append(a.decisions, d)
}

// Decisions lists the distinct decisions made (the first maxDecisions), and how many
// more there were.
func (a *Access) Decisions() ([]Decision, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Decision(nil), a.decisions...), a.more
}

// Summary is what an access-log line says of the decisions: the refusal if there was
// one, else the first decision; n counts them all; ok is false when none was made.
func (a *Access) Summary() (d Decision, n int, ok bool) {
	ds, more := a.Decisions()
	if len(ds) == 0 {
		return Decision{}, more, false
	}
	d = ds[0]
	for _, x := range ds {
		if !x.Allowed {
			d = x
			break
		}
	}
	return d, len(ds) + more, true
}

// Attrs are the summary's access-log attributes.
func (d Decision) Attrs(n int) []slog.Attr {
	return []slog.Attr{slog.String("operation", d.Operation.String()), slog.String("resource_type", d.Resource.Type.String()),
		slog.String("resource", d.Resource.Name), slog.Bool("allowed", d.Allowed), slog.Int("decisions", n)}
}

// producerTxnCache remembers whom each producer id belongs to (its transactional id
// and its creator): neither ever changes, so entries never go stale.
type producerTxnCache struct {
	mu sync.Mutex
	m  map[int64]catalog.ProducerOwner
}

// maxProducerTxns bounds the cache; past it, it starts again empty.
const maxProducerTxns = 100_000

// authorizeProducer lets who use producer id p (produce with it, or bump its epoch)
// only if it is who's: a producer id with a transactional id belongs to whoever may
// write to that transactional id, so that a principal cannot produce (or bump the
// epoch) as another's transactional producer; one without belongs to the principal
// that created it, so that a principal with write on a topic of its own cannot fence
// another's producer by using its (sequential, guessable) id. Only with authorization
// on: the anonymous mode shares everything.
func (b *Broker) authorizeProducer(ctx context.Context, who Principal, p *catalog.Producer) *Error {
	if p == nil || b.d.Authorizer == nil || b.d.Security == nil {
		return nil
	}
	b.producerTxns.mu.Lock()
	owner, ok := b.producerTxns.m[p.ID]
	b.producerTxns.mu.Unlock()
	if !ok {
		var err error
		owner, err = b.d.Security.ProducerOwner(ctx, p.ID)
		switch {
		case errors.Is(err, catalog.ErrUnknownProducer):
			return nil // the commit refuses it, as unknown; InitProducer hands out a new id
		case err != nil:
			return catalogError("authorize producer", err)
		}
		b.rememberProducer(p.ID, owner)
	}
	switch {
	case owner.TransactionalID != "":
		return b.authorize(ctx, who, acl.OpWrite, acl.TransactionalID(owner.TransactionalID))
	case owner.Unowned:
		// Handed out before owners were recorded (or by an older node during an
		// upgrade): nobody can be told apart, as before. Such ids expire when idle.
		return nil
	case owner.Principal != who.Name:
		return producerNotOwned(p.ID)
	}
	return nil
}

// producerNotOwned refuses the use of another principal's producer id, as Kafka refuses
// an idempotent producer without IdempotentWrite on the cluster
// (CLUSTER_AUTHORIZATION_FAILED), saying the same whoever the owner is.
func producerNotOwned(id int64) *Error {
	return newError(CodeForbidden, "not authorized to use producer id %d: it was handed out to another principal; initialise a producer of your own", id).
		with("operation", "idempotent-write").with("resource_type", acl.TypeCluster.String()).with("resource", acl.ClusterName).
		with("producer_id", id)
}

func (b *Broker) rememberProducer(id int64, owner catalog.ProducerOwner) {
	b.producerTxns.mu.Lock()
	defer b.producerTxns.mu.Unlock()
	if b.producerTxns.m == nil || len(b.producerTxns.m) >= maxProducerTxns {
		b.producerTxns.m = map[int64]catalog.ProducerOwner{}
	}
	b.producerTxns.m[id] = owner
}

// checkConfigLimits refuses configs beyond what the operator allows unless who may
// alter the cluster's configs: message.timestamp.after.max.ms above
// Config.MaxTimestampAfterMs lets producers stamp records far ahead, which pins them
// against time retention, so it is the cluster's business (catalog.CheckConfigLimits).
// On a node without authorization nobody has that permission: only the flag raises it.
func (b *Broker) checkConfigLimits(ctx context.Context, who Principal, configs map[string]string) *Error {
	err := catalog.CheckConfigLimits(configs, b.maxAfterMs)
	if err == nil {
		return nil
	}
	if b.d.Authorizer == nil {
		return catalogError("configs", err)
	}
	if e := b.authorize(ctx, who, acl.OpAlterConfigs, acl.Cluster()); e != nil {
		const key = "message.timestamp.after.max.ms"
		e.Message = fmt.Sprintf("not authorized to alter-configs the cluster: %s above %d lets producers stamp records far ahead, which needs that permission", key, b.maxAfterMs)
		return e.with("config", key)
	}
	return nil
}

// alterDetails are a topic change's audit details.
func alterDetails(partitions int32, configs map[string]string) map[string]any {
	d := map[string]any{}
	if partitions != 0 {
		d["partitions"] = partitions
	}
	if len(configs) > 0 {
		d["configs"] = configs
	}
	return d
}
