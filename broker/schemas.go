package broker

import (
	"context"
	"sync"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/registry"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// Broker-side schema validation (confluent.value.schema.validation and .key.), for
// every front end: a record of such a topic must carry Confluent's framing (magic byte
// 0 and a schema id), the id must be registered under the subject the topic's strategy
// names, and the bytes after the framing must decode against that schema — stricter
// than Confluent's and Redpanda's brokers, which check the id only. A failing record
// refuses its whole request, before the writer sees it, so nothing of it is stored.
// Records pass as they came: validation reads them and changes nothing.
//
// Schemas are cached per node, parsed, by id: an id never names another schema. The
// ids registered under each subject are cached for subjectTTL; an id not among them
// reads the catalog again before a refusal, so an id registered on another node a
// moment ago is accepted at once.

// subjectTTL is how long a subject's registered ids are trusted.
const subjectTTL = 2 * time.Second

// maxCachedSchemas bounds the schema cache; past it the cache starts again.
const maxCachedSchemas = 10000

type schemaCache struct {
	mu       sync.Mutex
	byIDs    map[int64]*cachedSchema
	subjects map[string]subjectIDs
}

type cachedSchema struct {
	schema catalog.Schema
	once   sync.Once
	parsed *registry.Schema
	err    *Error
}

type subjectIDs struct {
	ids    map[int64]bool
	loaded time.Time
}

func newSchemaCache() *schemaCache {
	return &schemaCache{byIDs: map[int64]*cachedSchema{}, subjects: map[string]subjectIDs{}}
}

func (c *schemaCache) entry(id int64) *cachedSchema {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byIDs[id]
}

func (c *schemaCache) put(s catalog.Schema) *cachedSchema {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byIDs[s.ID]; ok {
		return e
	}
	if len(c.byIDs) >= maxCachedSchemas {
		c.byIDs = map[int64]*cachedSchema{}
	}
	e := &cachedSchema{schema: s}
	c.byIDs[s.ID] = e
	return e
}

// byID answers a schema by id, from the cache or the catalog.
func (c *schemaCache) byID(ctx context.Context, reg SchemaRegistry, id int64) (catalog.Schema, error) {
	if e := c.entry(id); e != nil {
		return e.schema, nil
	}
	s, err := reg.SchemaByID(ctx, id)
	if err != nil {
		return catalog.Schema{}, err
	}
	return c.put(s).schema, nil
}

// parsed answers s parsed with its references, once per node.
func (c *schemaCache) parsed(ctx context.Context, b *Broker, s catalog.Schema) (*registry.Schema, *Error) {
	e := c.put(s)
	e.once.Do(func() {
		refs, re := b.resolveRefs(ctx, s.References, 0)
		if re != nil {
			e.err = re
			return
		}
		p, err := registry.Parse(s.Type, s.Text, refs)
		if err != nil {
			e.err = newError(CodeInternal, "schema %d: stored schema does not parse", s.ID).unexpected("parse stored schema", err)
			return
		}
		e.parsed = p
	})
	if e.err != nil {
		// Not kept: a reference may resolve next time.
		c.mu.Lock()
		if c.byIDs[s.ID] == e {
			delete(c.byIDs, s.ID)
		}
		c.mu.Unlock()
	}
	return e.parsed, e.err
}

// registered says whether id is registered (live) under subject, reading the catalog
// when the cached answer is old or says no.
func (c *schemaCache) registered(ctx context.Context, reg SchemaRegistry, subject string, id int64, now time.Time) (bool, error) {
	c.mu.Lock()
	s, ok := c.subjects[subject]
	c.mu.Unlock()
	if ok && now.Sub(s.loaded) < subjectTTL && s.ids[id] {
		return true, nil
	}
	vs, err := reg.SubjectSchemas(ctx, subject, false)
	if err != nil {
		return false, err
	}
	s = subjectIDs{ids: make(map[int64]bool, len(vs)), loaded: now}
	for _, v := range vs {
		s.ids[v.ID] = true
	}
	c.mu.Lock()
	if len(c.subjects) >= maxCachedSchemas {
		c.subjects = map[string]subjectIDs{}
	}
	c.subjects[subject] = s
	c.mu.Unlock()
	return s.ids[id], nil
}

// subjectChanged drops a subject's cached ids (this node changed it).
func (c *schemaCache) subjectChanged(subject string) {
	c.mu.Lock()
	delete(c.subjects, subject)
	c.mu.Unlock()
}

// validates says whether a topic's records are validated at all: the hot path's one
// check for topics without validation.
func validates(cfg *catalog.Config) bool { return cfg.KeySchemaValidation || cfg.ValueSchemaValidation }

// validateRecord checks record i's key and value under ti's validation configs.
func (b *Broker) validateRecord(ctx context.Context, ti *TopicInfo, i int, key, value []byte) *Error {
	cfg := &ti.Config
	if cfg.KeySchemaValidation {
		if e := b.validateField(ctx, ti, i, true, key); e != nil {
			return e
		}
	}
	if cfg.ValueSchemaValidation {
		return b.validateField(ctx, ti, i, false, value)
	}
	return nil
}

func (b *Broker) validateField(ctx context.Context, ti *TopicInfo, i int, key bool, data []byte) *Error {
	field, strategy := "value", ti.Config.ValueSubjectStrategy
	if key {
		field, strategy = "key", ti.Config.KeySubjectStrategy
	}
	refuse := func(format string, args ...any) *Error {
		return newError(CodeSchemaValidationFailed, "records[%d].%s: "+format, append([]any{i, field}, args...)...).
			with("record", i).with("field", field)
	}
	if data == nil {
		if key {
			return refuse("a key is required: the topic validates keys against the schema registry")
		}
		return nil // a tombstone
	}
	if b.d.Registry == nil {
		return newError(CodeRoleUnavailable, "topic %q validates records against the schema registry, which this node's catalog does not keep", ti.Name)
	}
	id, payload, ok := registry.ParseFrame(data)
	if !ok {
		return refuse("not framed for the schema registry (magic byte 0 and a 4-byte schema id, then the encoded %s)", field)
	}
	s, err := b.schemas.byID(ctx, b.d.Registry, int64(id))
	if err != nil {
		if e := registryError("validate", err); RegistryCode(e) != RegSchemaNotFound {
			return e
		}
		return refuse("schema id %d is not registered", id).with("schema_id", id)
	}
	parsed, e := b.schemas.parsed(ctx, b, s)
	if e != nil {
		return e
	}
	subject, ok := registry.Strategy(strategy).Subject(ti.Name, key, parsed.RecordName())
	if !ok {
		return refuse("schema id %d has no record name, which the %s subject name strategy needs", id, strategy).with("schema_id", id)
	}
	reg, err := b.schemas.registered(ctx, b.d.Registry, subject, int64(id), b.now())
	if err != nil {
		return registryError("validate", err)
	}
	if !reg {
		return refuse("schema id %d is not registered under subject %q", id, subject).with("schema_id", id).with("subject", subject)
	}
	if err := parsed.Validate(payload); err != nil {
		return refuse("does not decode against schema id %d of subject %q: %v", id, subject, err).with("schema_id", id).with("subject", subject)
	}
	return nil
}

// validateBatches validates the records of a batches request: the writer's records, or
// the raw batches' (decoded here to be read, and stored as they came).
func (b *Broker) validateBatches(ctx context.Context, ti *TopicInfo, wreq *writer.Request) *Error {
	if wreq.Raw == nil {
		for i := range wreq.Records {
			r := &wreq.Records[i].Record
			if e := b.validateRecord(ctx, ti, i, r.Key, r.Value); e != nil {
				return e
			}
		}
		return nil
	}
	i := 0
	for bi, raw := range wreq.Raw.Batches {
		d, err := segment.DecodeBatch(raw)
		if err != nil {
			return newError(CodeInvalidRecord, "record batch %d: %s", bi, trimSegmentErr(err)).with("batch", bi)
		}
		for j := range d.Records {
			if e := b.validateRecord(ctx, ti, i, d.Records[j].Key, d.Records[j].Value); e != nil {
				return e.with("batch", bi)
			}
			i++
		}
	}
	return nil
}
