package kafka

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// The client quota requests (KIP-546): DescribeClientQuotas and AlterClientQuotas over
// the core's quota administration. Kafka names a user bare ("alice") where the core
// names the principal ("User:alice"); a nil name is the default.

const userPrefix = "User:"

// principalOf is a Kafka quota user name as the core's principal.
func principalOf(name *string) string {
	if name == nil {
		return broker.DefaultEntity
	}
	return userPrefix + *name
}

// bareUser is a principal as Kafka's quota APIs name it: nil for the default.
func bareUser(principal string) *string {
	if principal == broker.DefaultEntity {
		return nil
	}
	s := strings.TrimPrefix(principal, userPrefix)
	return &s
}

func (s *Server) describeClientQuotas(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	f := broker.QuotaFilter{Strict: in.Strict}
	for _, c := range in.Components {
		qc := broker.QuotaComponent{Type: c.EntityType, Match: broker.QuotaMatch(c.MatchType)}
		if c.MatchType == 0 { // exact
			if c.Match == nil {
				qc.Match = broker.MatchDefault
			} else if qc.Name = *c.Match; c.EntityType == broker.EntityUser {
				qc.Name = principalOf(c.Match)
			}
		}
		f.Components = append(f.Components, qc)
	}
	es, err := s.deps.Core.DescribeQuotas(ctx, r.who, f)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.kafkaError(err)
		return resp, nil
	}
	for _, e := range es {
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		if e.Entity.User != "" {
			p := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			p.Type, p.Name = broker.EntityUser, bareUser(e.Entity.User)
			entry.Entity = append(entry.Entity, p)
		}
		if e.Entity.ClientID != "" {
			p := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			p.Type = broker.EntityClientID
			if e.Entity.ClientID != broker.DefaultEntity {
				id := e.Entity.ClientID
				p.Name = &id
			}
			entry.Entity = append(entry.Entity, p)
		}
		for _, k := range catalog.QuotaKeys() {
			if v, ok := e.Values[k]; ok {
				val := kmsg.NewDescribeClientQuotasResponseEntryValue()
				val.Key, val.Value = k, v
				entry.Values = append(entry.Values, val)
			}
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return resp, nil
}

// entityOf converts a Kafka entity: a user, a client id, or both, each once.
func entityOf(parts []kmsg.AlterClientQuotasRequestEntryEntity) (catalog.QuotaEntity, error) {
	var e catalog.QuotaEntity
	for _, p := range parts {
		switch p.Type {
		case broker.EntityUser:
			if e.User != "" {
				return e, fmt.Errorf("the entity names a user twice")
			}
			e.User = principalOf(p.Name)
		case broker.EntityClientID:
			if e.ClientID != "" {
				return e, fmt.Errorf("the entity names a client id twice")
			}
			e.ClientID = broker.DefaultEntity
			if p.Name != nil {
				e.ClientID = *p.Name
			}
			if e.ClientID == "" {
				return e, fmt.Errorf("an empty client id: name one, or give none for the default")
			}
		default:
			return e, fmt.Errorf("entity type %q: quotas apply to %s and %s", p.Type, broker.EntityUser, broker.EntityClientID)
		}
	}
	return e, nil
}

// alterClientQuotas applies every entry or none: an invalid entry gets its own error,
// and the others INVALID_REQUEST saying they were not applied.
func (s *Server) alterClientQuotas(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	alts := make([]catalog.QuotaAlteration, len(in.Entries))
	bad, code, msg := -1, int16(0), ""
	for i, en := range in.Entries {
		e, err := entityOf(en.Entity)
		if err != nil && bad < 0 {
			bad, code, msg = i, kerr.InvalidRequest.Code, err.Error()
		}
		alts[i] = catalog.QuotaAlteration{Entity: e, Set: map[string]float64{}}
		for _, op := range en.Ops {
			if op.Remove {
				alts[i].Remove = append(alts[i].Remove, op.Key)
			} else {
				alts[i].Set[op.Key] = op.Value
			}
		}
	}
	if bad < 0 {
		if err := s.deps.Core.AlterQuotas(ctx, r.who, alts, in.ValidateOnly); err != nil {
			var m *string
			code, m = s.kafkaError(err)
			msg = deref(m)
			bad = -2 // every entry
			if e := broker.AsError("alter quotas", err); e.Details != nil {
				if i, ok := e.Details["entry"].(int); ok {
					bad = i
				}
			}
		}
	}
	for i, en := range in.Entries {
		res := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range en.Entity {
			ep := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ep.Type, ep.Name = p.Type, p.Name
			res.Entity = append(res.Entity, ep)
		}
		switch {
		case bad == i || bad == -2:
			m := msg
			res.ErrorCode, res.ErrorMessage = code, &m
		case bad >= 0:
			m := fmt.Sprintf("not applied: entry %d of the request is invalid, and a request is applied whole or not at all", bad)
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, &m
		}
		resp.Entries = append(resp.Entries, res)
	}
	return resp, nil
}
