package broker

import (
	"context"
	"errors"
	"strconv"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/registry"
	"github.com/strata-io/strata/segment"
)

// JSON records on topics whose values are framed for the schema registry, for the
// HTTP front end: a produce may send values as JSON, encoded here to a schema
// registered under the topic's value subject and framed with its id; a fetch may
// have framed values decoded to JSON. The rules (which subject, which version, who may
// read it, what fits) are here, once; the front end decodes its parameter and calls.

// ValueSchema names the schema a produce's JSON values are encoded to: the latest
// version of the topic's value subject, or a schema id registered under it.
type ValueSchema struct {
	Latest bool
	ID     int64
}

// ParseValueSchema reads "latest" or a schema id (a positive integer).
func ParseValueSchema(s string) (ValueSchema, bool) {
	if s == "latest" {
		return ValueSchema{Latest: true}, true
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n <= 0 {
		return ValueSchema{}, false
	}
	return ValueSchema{ID: n}, true
}

// valueSchema resolves sel under topic's value subject: the schema, parsed, with its
// id and subject.
func (b *Broker) valueSchema(ctx context.Context, who Principal, ti *TopicInfo, sel ValueSchema) (*registry.Schema, catalog.Schema, string, error) {
	if e := b.check(CapRegistry); e != nil {
		return nil, catalog.Schema{}, "", e
	}
	strategy := registry.Strategy(ti.Config.ValueSubjectStrategy)
	if sel.Latest {
		subject, ok := strategy.Subject(ti.Name, false, "")
		if !ok {
			return nil, catalog.Schema{}, "", newError(CodeInvalidParameter, "topic %q names its value subjects by record name (%s strategy): name the schema by its id, not latest", ti.Name, strategy).
				with("parameter", "schema")
		}
		if e := b.registryCall(ctx, who, acl.OpRead, subject); e != nil {
			return nil, catalog.Schema{}, "", e
		}
		v, e := b.subjectVersion(ctx, subject, LatestVersion, false)
		if e != nil {
			return nil, catalog.Schema{}, "", e
		}
		p, e := b.schemas.parsed(ctx, b, v.Schema)
		if e != nil {
			return nil, catalog.Schema{}, "", e
		}
		return p, v.Schema, subject, nil
	}
	s, err := b.schemas.byID(ctx, b.d.Registry, sel.ID)
	if err != nil {
		return nil, catalog.Schema{}, "", registryError("schema by id", err)
	}
	p, e := b.schemas.parsed(ctx, b, s)
	if e != nil {
		return nil, catalog.Schema{}, "", e
	}
	subject, ok := strategy.Subject(ti.Name, false, p.RecordName())
	if !ok {
		return nil, catalog.Schema{}, "", newError(CodeInvalidParameter, "schema id %d has no record name, which the topic's %s subject name strategy needs", sel.ID, strategy).
			with("parameter", "schema")
	}
	if e := b.registryCall(ctx, who, acl.OpRead, subject); e != nil {
		return nil, catalog.Schema{}, "", e
	}
	reg, err := b.schemas.registered(ctx, b.d.Registry, subject, sel.ID, b.now())
	if err != nil {
		return nil, catalog.Schema{}, "", registryError("schema by id", err)
	}
	if !reg {
		return nil, catalog.Schema{}, "", regError(RegSchemaNotFound, "Schema %d is not registered under subject %s", sel.ID, subject)
	}
	return p, s, subject, nil
}

// EncodeValues replaces each record's value, JSON text, with its encoding to the
// schema sel names under topic's value subject, framed with the schema's id; a null
// value (a tombstone) stays null. A value that does not fit refuses the request,
// naming the record (422 schema_validation_failed); nothing is changed then. The
// caller may write the topic; reading the subject is checked here.
func (b *Broker) EncodeValues(ctx context.Context, who Principal, topic string, sel ValueSchema, recs []Record) error {
	ti, e := b.lookupTopic(ctx, topic)
	if e != nil {
		return e
	}
	p, s, subject, err := b.valueSchema(ctx, who, &ti, sel)
	if err != nil {
		return err
	}
	out := make([][]byte, len(recs))
	for i := range recs {
		if recs[i].Value == nil {
			continue
		}
		enc, err := p.EncodeJSON(recs[i].Value)
		if err != nil {
			if !errors.Is(err, registry.ErrEncode) {
				return newError(CodeInternal, "records[%d].value: encode to schema %d", i, s.ID).unexpected("encode JSON", err)
			}
			return newError(CodeSchemaValidationFailed, "records[%d].value: %v (schema id %d of subject %q, %s)", i, err, s.ID, subject, p.Type()).
				with("record", i).with("field", "value").with("schema_id", s.ID).with("subject", subject)
		}
		out[i] = registry.AppendFrame(make([]byte, 0, 5+len(enc)), int32(s.ID), enc)
	}
	for i := range recs {
		if out[i] != nil {
			recs[i].Value = out[i]
		}
	}
	return nil
}

// DecodeValues replaces, in fetched records, each value framed with a registered
// schema's id by its JSON text, and answers how many it decoded; a value that is not
// framed, names no schema, or does not decode is left as it is (the front end shows
// such bytes as it shows any). With authorization, the caller must read a subject
// holding each schema it meets.
func (b *Broker) DecodeValues(ctx context.Context, who Principal, recs []segment.DecodedRecord) (int, error) {
	if e := b.check(CapRegistry); e != nil {
		return 0, e
	}
	allowed := map[int32]bool{}
	n := 0
	for i := range recs {
		id, payload, ok := registry.ParseFrame(recs[i].Value)
		if !ok {
			continue
		}
		s, err := b.schemas.byID(ctx, b.d.Registry, int64(id))
		if err != nil {
			if e := registryError("decode", err); RegistryCode(e) == RegSchemaNotFound {
				continue
			}
			return 0, registryError("decode", err)
		}
		if may, seen := allowed[id]; !seen {
			may = !b.Secured() || b.mayReadSchema(ctx, who, int64(id)) == nil
			allowed[id] = may
			if !may {
				continue
			}
		} else if !may {
			continue
		}
		p, e := b.schemas.parsed(ctx, b, s)
		if e != nil {
			continue
		}
		js, err := p.DecodeJSON(payload)
		if err != nil {
			continue
		}
		recs[i].Value = js
		n++
	}
	return n, nil
}
