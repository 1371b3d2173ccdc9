package broker

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/registry"
)

// The schema registry's calls (Confluent's API, served by registry/rest): what may be
// registered, under which id and version, what each level and mode allows, and who may
// do it. Formats and compatibility are package registry's; the state is the catalog's,
// whose registration runs the compatibility check inside its transaction so that two
// nodes registering at once cannot both pass against the same latest version. Refusals
// carry Confluent's error_code in Details["registry_code"].

// SchemaRegistry is the registry part of the catalog (both backends).
type SchemaRegistry = catalog.Registry

// Confluent's error codes the registry answers with.
const (
	RegSubjectNotFound       = 40401
	RegVersionNotFound       = 40402
	RegSchemaNotFound        = 40403
	RegSubjectSoftDeleted    = 40404
	RegSubjectNotSoftDeleted = 40405
	RegVersionSoftDeleted    = 40406
	RegVersionNotSoftDeleted = 40407
	RegCompatNotConfigured   = 40408
	RegModeNotConfigured     = 40409
	RegIncompatible          = 409
	RegInvalidSchema         = 42201
	RegInvalidVersion        = 42202
	RegInvalidLevel          = 42203
	RegInvalidMode           = 42204
	RegNotPermitted          = 42205
	RegReferenceExists       = 42206
	RegIDDoesNotMatch        = 42207
	RegInvalidSubject        = 42208
)

// regError is a registry refusal with Confluent's code; its class (not found, refused,
// incompatible) follows from the code as Confluent's HTTP status does.
func regError(code int, format string, args ...any) *Error {
	c := CodeInvalidSchema
	switch {
	case code == RegIncompatible:
		c = CodeIncompatibleSchema
	case code/100 == 404:
		c = CodeSchemaNotFound
	}
	return newError(c, format, args...).with("registry_code", code)
}

// RegistryCode is the Confluent error_code of a registry refusal, 0 for other errors.
func RegistryCode(e *Error) int {
	if c, ok := e.Details["registry_code"].(int); ok {
		return c
	}
	return 0
}

var registryErrors = []struct {
	err  error
	code int
}{
	{catalog.ErrSubjectNotFound, RegSubjectNotFound},
	{catalog.ErrVersionNotFound, RegVersionNotFound},
	{catalog.ErrSchemaNotFound, RegSchemaNotFound},
	{catalog.ErrSubjectSoftDeleted, RegSubjectSoftDeleted},
	{catalog.ErrSubjectNotSoftDeleted, RegSubjectNotSoftDeleted},
	{catalog.ErrVersionSoftDeleted, RegVersionSoftDeleted},
	{catalog.ErrVersionNotSoftDeleted, RegVersionNotSoftDeleted},
	{catalog.ErrReferenceExists, RegReferenceExists},
	{catalog.ErrReferenceNotFound, RegInvalidSchema},
	{catalog.ErrSchemaIDConflict, RegIDDoesNotMatch},
	{catalog.ErrVersionExists, RegNotPermitted},
}

// registryError maps a catalog registry error (or passes the core's own through).
func registryError(op string, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	for _, r := range registryErrors {
		if errors.Is(err, r.err) {
			return regError(r.code, "%s", say(err, r.err, "%s", r.err.Error())).cause(err)
		}
	}
	return catalogError(op, err)
}

// SchemaRequest is a schema as a client sends it to register, look up or check.
type SchemaRequest struct {
	Type       string // "" is AVRO
	Schema     string
	References []catalog.SchemaReference
	// ID and Version, above 0, register at that id and version (import mode; outside
	// it, an ID must be the one the schema has).
	ID      int64
	Version int32
}

// Version names a version: above 0 that version, LatestVersion the newest.
const LatestVersion int32 = -1

// ParseSchemaVersion reads a version as the registry's paths spell it: 1 to 2^31-1,
// "latest" or -1.
func ParseSchemaVersion(s string) (int32, error) {
	if s == "latest" {
		return LatestVersion, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 || n < -1 || n > math.MaxInt32 {
		return 0, regError(RegInvalidVersion, "The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", truncate(s, 64))
	}
	return int32(n), nil
}

func (b *Broker) registryCall(ctx context.Context, who Principal, op acl.Operation, subject string) *Error {
	if e := b.check(CapRegistry); e != nil {
		return e
	}
	if subject == "" {
		return nil
	}
	if err := registry.ValidateSubject(subject); err != nil {
		return regError(RegInvalidSubject, "The specified subject is not valid: %v", err)
	}
	return b.authorize(ctx, who, op, acl.Subject(subject))
}

// RegisterSchema registers a schema under subject (idempotently: a schema the subject
// holds answers its version), checking it against the subject's versions under its
// compatibility level, and answers the version with the schema's id.
func (b *Broker) RegisterSchema(ctx context.Context, who Principal, subject string, req SchemaRequest) (catalog.SubjectSchema, error) {
	if e := b.registryCall(ctx, who, acl.OpWrite, subject); e != nil {
		return catalog.SubjectSchema{}, e
	}
	mode, e := b.effectiveMode(ctx, subject)
	if e != nil {
		return catalog.SubjectSchema{}, e
	}
	switch {
	case mode == registry.ReadOnly || mode == registry.ReadOnlyOverride:
		return catalog.SubjectSchema{}, regError(RegNotPermitted, "Subject %s is in read-only mode", subject)
	case mode == registry.Import && req.ID <= 0:
		return catalog.SubjectSchema{}, regError(RegNotPermitted, "Subject %s is in import mode: register with the schema's id", subject)
	case mode != registry.Import && req.Version > 0:
		return catalog.SubjectSchema{}, regError(RegNotPermitted, "A version is given only in import mode; subject %s is in %s mode", subject, mode)
	}
	parsed, ns, e := b.parseRequest(ctx, subject, req)
	if e != nil {
		return catalog.SubjectSchema{}, e
	}
	level, e := b.effectiveLevel(ctx, subject)
	if e != nil {
		return catalog.SubjectSchema{}, e
	}
	if mode == registry.Import {
		level = registry.None
	}
	check := func(live []catalog.SubjectSchema) error {
		if mode != registry.Import && req.ID > 0 {
			return regError(RegNotPermitted, "Overwrite new schema with id %d is not permitted outside import mode", req.ID)
		}
		prior, e := b.priors(ctx, live)
		if e != nil {
			return e
		}
		if msgs := registry.Check(level, parsed, prior); len(msgs) > 0 {
			return regError(RegIncompatible, "Schema being registered is incompatible with an earlier schema for subject \"%s\", details: [%s]", subject, strings.Join(msgs, ", "))
		}
		return nil
	}
	ctx = withAudit(ctx, who, "subject.register", acl.Subject(subject), map[string]any{"schema_type": parsed.Type(), "fingerprint": ns.Fingerprint})
	out, created, err := b.d.Registry.RegisterSchema(ctx, ns, check)
	if err != nil {
		return catalog.SubjectSchema{}, registryError("register schema", err)
	}
	if !created && req.ID > 0 && out.ID != req.ID {
		return catalog.SubjectSchema{}, regError(RegIDDoesNotMatch, "Schema already registered with id %d instead of input id %d", out.ID, req.ID)
	}
	b.schemas.subjectChanged(subject)
	return out, nil
}

// parseRequest resolves a request's references, parses it and fills the registration.
func (b *Broker) parseRequest(ctx context.Context, subject string, req SchemaRequest) (*registry.Schema, catalog.NewSchema, *Error) {
	typ := req.Type
	if typ == "" {
		typ = registry.TypeAvro
	}
	refs, e := b.resolveRefs(ctx, req.References, 0)
	if e != nil {
		return nil, catalog.NewSchema{}, e
	}
	parsed, err := registry.Parse(typ, req.Schema, refs)
	if err != nil {
		return nil, catalog.NewSchema{}, regError(RegInvalidSchema, "Invalid schema %s with refs %v of type %s, details: %v", truncate(req.Schema, 256), req.References, typ, err)
	}
	refsOut := req.References
	if refsOut == nil {
		refsOut = []catalog.SchemaReference{}
	}
	ns := catalog.NewSchema{Subject: subject, Version: req.Version, Schema: catalog.Schema{
		ID: req.ID, Type: typ, Text: parsed.Canonical(), References: refsOut, Fingerprint: registry.Fingerprint(parsed, refsOut),
	}}
	return parsed, ns, nil
}

// resolveRefs reads the schemas references name, theirs too (live versions only).
func (b *Broker) resolveRefs(ctx context.Context, refs []catalog.SchemaReference, depth int) ([]registry.Resolved, *Error) {
	if depth > 16 {
		return nil, regError(RegInvalidSchema, "Invalid schema: references nest deeper than 16")
	}
	var out []registry.Resolved
	for _, r := range refs {
		if r.Name == "" || r.Subject == "" || r.Version == 0 {
			return nil, regError(RegInvalidSchema, "Invalid schema: a reference needs a name, a subject and a version, got %+v", r)
		}
		v, e := b.subjectVersion(ctx, r.Subject, r.Version, false)
		if e != nil {
			return nil, regError(RegInvalidSchema, "Invalid schema: reference %q to subject %s version %d: %s", r.Name, r.Subject, r.Version, e.Message)
		}
		inner, e := b.resolveRefs(ctx, v.References, depth+1)
		if e != nil {
			return nil, e
		}
		out = append(out, registry.Resolved{Name: r.Name, Type: v.Type, Text: v.Text, Refs: inner})
	}
	return out, nil
}

// priors parses a subject's live versions (through the node's cache).
func (b *Broker) priors(ctx context.Context, live []catalog.SubjectSchema) ([]registry.Prior, *Error) {
	out := make([]registry.Prior, 0, len(live))
	for _, v := range live {
		p, e := b.schemas.parsed(ctx, b, v.Schema)
		if e != nil {
			return nil, e
		}
		out = append(out, registry.Prior{Version: v.Version, Schema: p})
	}
	return out, nil
}

// LookupSchema answers the version of subject that holds the schema req describes
// (POST /subjects/{subject}); with deleted, soft-deleted versions count.
func (b *Broker) LookupSchema(ctx context.Context, who Principal, subject string, req SchemaRequest, deleted bool) (catalog.SubjectSchema, error) {
	if e := b.registryCall(ctx, who, acl.OpRead, subject); e != nil {
		return catalog.SubjectSchema{}, e
	}
	vs, err := b.d.Registry.SubjectSchemas(ctx, subject, deleted)
	if err != nil {
		return catalog.SubjectSchema{}, registryError("look up schema", err)
	}
	if len(vs) == 0 {
		return catalog.SubjectSchema{}, regError(RegSubjectNotFound, "Subject '%s' not found.", subject)
	}
	_, ns, e := b.parseRequest(ctx, subject, req)
	if e != nil {
		return catalog.SubjectSchema{}, e
	}
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].Fingerprint == ns.Fingerprint {
			return vs[i], nil
		}
	}
	return catalog.SubjectSchema{}, regError(RegSchemaNotFound, "Schema not found")
}

// SchemaByID answers a schema by its id; with authorization, the caller must read a
// subject that holds it.
func (b *Broker) SchemaByID(ctx context.Context, who Principal, id int64) (catalog.Schema, error) {
	if e := b.registryCall(ctx, who, acl.OpRead, ""); e != nil {
		return catalog.Schema{}, e
	}
	// From the catalog, not the node's cache: a schema deleted for good on another
	// node is gone here too. (Validation, on the produce path, reads the cache.)
	s, err := b.d.Registry.SchemaByID(ctx, id)
	if err != nil {
		return catalog.Schema{}, registryError("schema by id", err)
	}
	if b.Secured() {
		if e := b.mayReadSchema(ctx, who, id); e != nil {
			return catalog.Schema{}, e
		}
	}
	return s, nil
}

func (b *Broker) mayReadSchema(ctx context.Context, who Principal, id int64) *Error {
	us, err := b.d.Registry.SchemaUsages(ctx, id, true)
	if err != nil {
		return registryError("schema by id", err)
	}
	for _, u := range us {
		if b.may(who, acl.OpRead, acl.Subject(u.Subject)) {
			return nil
		}
	}
	if len(us) == 0 {
		return regError(RegSchemaNotFound, "Schema %d not found", id)
	}
	return b.authorize(ctx, who, acl.OpRead, acl.Subject(us[0].Subject))
}

// SchemaUsages lists the subject versions holding schema id that the caller may read.
func (b *Broker) SchemaUsages(ctx context.Context, who Principal, id int64, deleted bool) ([]catalog.SubjectSchema, error) {
	if e := b.registryCall(ctx, who, acl.OpRead, ""); e != nil {
		return nil, e
	}
	us, err := b.d.Registry.SchemaUsages(ctx, id, deleted)
	if err != nil {
		return nil, registryError("schema usages", err)
	}
	if len(us) == 0 {
		return nil, regError(RegSchemaNotFound, "Schema %d not found", id)
	}
	return filterRead(b, who, us, func(u catalog.SubjectSchema) string { return u.Subject }), nil
}

func filterRead[T any](b *Broker, who Principal, items []T, subject func(T) string) []T {
	if !b.Secured() {
		return items
	}
	out := items[:0:0]
	for _, it := range items {
		if b.may(who, acl.OpDescribe, acl.Subject(subject(it))) {
			out = append(out, it)
		}
	}
	return out
}

// Subjects lists the subjects the caller may describe, those starting with prefix.
func (b *Broker) Subjects(ctx context.Context, who Principal, prefix string, deleted bool) ([]string, error) {
	if e := b.registryCall(ctx, who, acl.OpDescribe, ""); e != nil {
		return nil, e
	}
	subs, err := b.d.Registry.Subjects(ctx, deleted)
	if err != nil {
		return nil, registryError("list subjects", err)
	}
	out := subs[:0]
	for _, s := range subs {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return filterRead(b, who, out, func(s string) string { return s }), nil
}

// SubjectVersions lists a subject's versions (404 40401 when it has none).
func (b *Broker) SubjectVersions(ctx context.Context, who Principal, subject string, deleted bool) ([]catalog.SubjectSchema, error) {
	if e := b.registryCall(ctx, who, acl.OpRead, subject); e != nil {
		return nil, e
	}
	vs, err := b.d.Registry.SubjectSchemas(ctx, subject, deleted)
	if err != nil {
		return nil, registryError("subject versions", err)
	}
	if len(vs) == 0 {
		return nil, regError(RegSubjectNotFound, "Subject '%s' not found.", subject)
	}
	return vs, nil
}

// SubjectVersion answers one version of a subject (LatestVersion: the newest).
func (b *Broker) SubjectVersion(ctx context.Context, who Principal, subject string, version int32, deleted bool) (catalog.SubjectSchema, error) {
	if e := b.registryCall(ctx, who, acl.OpRead, subject); e != nil {
		return catalog.SubjectSchema{}, e
	}
	v, e := b.subjectVersion(ctx, subject, version, deleted)
	if e != nil {
		return catalog.SubjectSchema{}, e
	}
	return v, nil
}

func (b *Broker) subjectVersion(ctx context.Context, subject string, version int32, deleted bool) (catalog.SubjectSchema, *Error) {
	vs, err := b.d.Registry.SubjectSchemas(ctx, subject, true)
	if err != nil {
		return catalog.SubjectSchema{}, registryError("subject version", err)
	}
	if len(vs) == 0 {
		return catalog.SubjectSchema{}, regError(RegSubjectNotFound, "Subject '%s' not found.", subject)
	}
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if (version == LatestVersion && (!v.Deleted || deleted)) || v.Version == version {
			if v.Deleted && !deleted {
				break
			}
			return v, nil
		}
	}
	return catalog.SubjectSchema{}, regError(RegVersionNotFound, "Version %s not found.", versionWords(version))
}

func versionWords(v int32) string {
	if v == LatestVersion {
		return "latest"
	}
	return strconv.Itoa(int(v))
}

// DeleteSubject deletes a subject's versions: soft, or (permanent) for good once soft.
func (b *Broker) DeleteSubject(ctx context.Context, who Principal, subject string, permanent bool) ([]int32, error) {
	if e := b.registryCall(ctx, who, acl.OpDelete, subject); e != nil {
		return nil, e
	}
	if e := b.writable(ctx, subject); e != nil {
		return nil, e
	}
	ctx = withAudit(ctx, who, "subject.delete", acl.Subject(subject), map[string]any{"permanent": permanent})
	vs, err := b.d.Registry.DeleteSubject(ctx, subject, permanent)
	if err != nil {
		return nil, registryError("delete subject", err)
	}
	b.schemas.subjectChanged(subject)
	return vs, nil
}

// DeleteSchemaVersion deletes one version (LatestVersion: the newest live one) and answers it.
func (b *Broker) DeleteSchemaVersion(ctx context.Context, who Principal, subject string, version int32, permanent bool) (int32, error) {
	if e := b.registryCall(ctx, who, acl.OpDelete, subject); e != nil {
		return 0, e
	}
	if e := b.writable(ctx, subject); e != nil {
		return 0, e
	}
	if version == LatestVersion {
		v, e := b.subjectVersion(ctx, subject, LatestVersion, permanent)
		if e != nil {
			return 0, e
		}
		version = v.Version
	}
	ctx = withAudit(ctx, who, "subject.version.delete", acl.Subject(subject), map[string]any{"version": version, "permanent": permanent})
	if err := b.d.Registry.DeleteSchemaVersion(ctx, subject, version, permanent); err != nil {
		return 0, registryError("delete version", err)
	}
	b.schemas.subjectChanged(subject)
	return version, nil
}

// ReferencedBy lists the ids of the live schemas that reference a subject's version.
func (b *Broker) ReferencedBy(ctx context.Context, who Principal, subject string, version int32) ([]int64, error) {
	if e := b.registryCall(ctx, who, acl.OpRead, subject); e != nil {
		return nil, e
	}
	v, e := b.subjectVersion(ctx, subject, version, true)
	if e != nil {
		return nil, e
	}
	ids, err := b.d.Registry.ReferencedBy(ctx, subject, v.Version)
	if err != nil {
		return nil, registryError("referenced by", err)
	}
	return ids, nil
}

// CheckCompatibility answers why req may not be registered after a subject's version
// (LatestVersion), or after all its live versions (all): empty when it may. The level is the
// subject's; the check itself is the registration's.
func (b *Broker) CheckCompatibility(ctx context.Context, who Principal, subject string, version int32, all bool, req SchemaRequest) ([]string, error) {
	if e := b.registryCall(ctx, who, acl.OpRead, subject); e != nil {
		return nil, e
	}
	parsed, _, e := b.parseRequest(ctx, subject, req)
	if e != nil {
		return nil, e
	}
	level, e := b.effectiveLevel(ctx, subject)
	if e != nil {
		return nil, e
	}
	var against []catalog.SubjectSchema
	if all {
		vs, err := b.d.Registry.SubjectSchemas(ctx, subject, false)
		if err != nil {
			return nil, registryError("check compatibility", err)
		}
		against = vs
	} else {
		v, e := b.subjectVersion(ctx, subject, version, false)
		if e != nil {
			if RegistryCode(e) == RegSubjectNotFound && version == LatestVersion {
				return nil, nil // nothing to be incompatible with
			}
			return nil, e
		}
		against = []catalog.SubjectSchema{v}
		if strings.HasSuffix(string(level), "_TRANSITIVE") {
			level = registry.Level(strings.TrimSuffix(string(level), "_TRANSITIVE"))
		}
	}
	prior, e := b.priors(ctx, against)
	if e != nil {
		return nil, e
	}
	msgs := registry.Check(level, parsed, prior)
	if msgs == nil {
		msgs = []string{}
	}
	return msgs, nil
}

func (b *Broker) registryConfig(ctx context.Context, subject string) (catalog.RegistryConfig, *Error) {
	c, err := b.d.Registry.RegistryConfig(ctx, subject)
	if err != nil {
		return c, registryError("registry config", err)
	}
	return c, nil
}

// effectiveLevel is the subject's level, else the registry's, else BACKWARD.
func (b *Broker) effectiveLevel(ctx context.Context, subject string) (registry.Level, *Error) {
	for _, s := range []string{subject, ""} {
		c, e := b.registryConfig(ctx, s)
		if e != nil {
			return "", e
		}
		if c.Compatibility != "" {
			return registry.Level(c.Compatibility), nil
		}
	}
	return registry.DefaultLevel, nil
}

// effectiveMode is the subject's mode, else the registry's, else READWRITE.
func (b *Broker) effectiveMode(ctx context.Context, subject string) (registry.Mode, *Error) {
	for _, s := range []string{subject, ""} {
		c, e := b.registryConfig(ctx, s)
		if e != nil {
			return "", e
		}
		if c.Mode != "" {
			return registry.Mode(c.Mode), nil
		}
	}
	return registry.DefaultMode, nil
}

// writable refuses changes to a subject in a read-only mode.
func (b *Broker) writable(ctx context.Context, subject string) *Error {
	m, e := b.effectiveMode(ctx, subject)
	if e != nil {
		return e
	}
	if m == registry.ReadOnly || m == registry.ReadOnlyOverride {
		return regError(RegNotPermitted, "Subject %s is in read-only mode", subject)
	}
	return nil
}

// configResource is what reading or setting subject's config is authorized on: the
// subject, or the cluster for the registry's own.
func configResource(subject string) acl.Resource {
	if subject == "" {
		return acl.Cluster()
	}
	return acl.Subject(subject)
}

func (b *Broker) configCall(ctx context.Context, who Principal, op acl.Operation, subject string) *Error {
	if e := b.registryCall(ctx, who, op, subject); e != nil || subject != "" {
		return e
	}
	return b.authorize(ctx, who, op, acl.Cluster())
}

// CompatibilityLevel answers a subject's level ("" the registry's). A subject without
// its own: 40408, unless defaultToGlobal.
func (b *Broker) CompatibilityLevel(ctx context.Context, who Principal, subject string, defaultToGlobal bool) (registry.Level, error) {
	if e := b.configCall(ctx, who, acl.OpDescribeConfigs, subject); e != nil {
		return "", e
	}
	if subject != "" && !defaultToGlobal {
		c, e := b.registryConfig(ctx, subject)
		if e != nil {
			return "", e
		}
		if c.Compatibility == "" {
			return "", regError(RegCompatNotConfigured, "Subject '%s' does not have subject-level compatibility configured", subject)
		}
		return registry.Level(c.Compatibility), nil
	}
	l, e := b.effectiveLevel(ctx, subject)
	if e != nil {
		return "", e
	}
	return l, nil
}

// SetCompatibilityLevel sets a subject's level ("" the registry's).
func (b *Broker) SetCompatibilityLevel(ctx context.Context, who Principal, subject, level string) (registry.Level, error) {
	if e := b.configCall(ctx, who, acl.OpAlterConfigs, subject); e != nil {
		return "", e
	}
	l, ok := registry.ParseLevel(level)
	if !ok {
		return "", regError(RegInvalidLevel, "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive")
	}
	ctx = withAudit(ctx, who, "subject.config.alter", configResource(subject), map[string]any{"compatibility": string(l)})
	if _, err := b.d.Registry.SetRegistryConfig(ctx, subject, catalog.RegistryConfig{Compatibility: string(l)}); err != nil {
		return "", registryError("set compatibility", err)
	}
	return l, nil
}

// DeleteCompatibilityLevel unsets a subject's level and answers what it was (the
// effective one after, for the registry's own).
func (b *Broker) DeleteCompatibilityLevel(ctx context.Context, who Principal, subject string) (registry.Level, error) {
	if e := b.configCall(ctx, who, acl.OpAlterConfigs, subject); e != nil {
		return "", e
	}
	ctx = withAudit(ctx, who, "subject.config.delete", configResource(subject), nil)
	before, err := b.d.Registry.DeleteRegistryConfig(ctx, subject, true, false)
	if err != nil {
		return "", registryError("delete compatibility", err)
	}
	if before.Compatibility == "" {
		if subject != "" {
			return "", regError(RegSubjectNotFound, "Subject '%s' not found.", subject)
		}
		return registry.DefaultLevel, nil
	}
	return registry.Level(before.Compatibility), nil
}

// RegistryMode answers a subject's mode ("" the registry's). A subject without its
// own: 40409, unless defaultToGlobal.
func (b *Broker) RegistryMode(ctx context.Context, who Principal, subject string, defaultToGlobal bool) (registry.Mode, error) {
	if e := b.configCall(ctx, who, acl.OpDescribeConfigs, subject); e != nil {
		return "", e
	}
	if subject != "" && !defaultToGlobal {
		c, e := b.registryConfig(ctx, subject)
		if e != nil {
			return "", e
		}
		if c.Mode == "" {
			return "", regError(RegModeNotConfigured, "Subject '%s' does not have subject-level mode configured", subject)
		}
		return registry.Mode(c.Mode), nil
	}
	m, e := b.effectiveMode(ctx, subject)
	if e != nil {
		return "", e
	}
	return m, nil
}

// SetRegistryMode sets a subject's mode ("" the registry's). IMPORT needs an empty
// subject (registry) unless force.
func (b *Broker) SetRegistryMode(ctx context.Context, who Principal, subject, mode string, force bool) (registry.Mode, error) {
	if e := b.configCall(ctx, who, acl.OpAlterConfigs, subject); e != nil {
		return "", e
	}
	m, ok := registry.ParseMode(mode)
	if !ok {
		return "", regError(RegInvalidMode, "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT")
	}
	if m == registry.Import && !force {
		var nonEmpty bool
		if subject == "" {
			subs, err := b.d.Registry.Subjects(ctx, true)
			if err != nil {
				return "", registryError("set mode", err)
			}
			nonEmpty = len(subs) > 0
		} else {
			vs, err := b.d.Registry.SubjectSchemas(ctx, subject, true)
			if err != nil {
				return "", registryError("set mode", err)
			}
			nonEmpty = len(vs) > 0
		}
		if nonEmpty {
			return "", regError(RegNotPermitted, "Cannot import since found existing subjects")
		}
	}
	ctx = withAudit(ctx, who, "subject.mode.alter", configResource(subject), map[string]any{"mode": string(m)})
	if _, err := b.d.Registry.SetRegistryConfig(ctx, subject, catalog.RegistryConfig{Mode: string(m)}); err != nil {
		return "", registryError("set mode", err)
	}
	return m, nil
}

// DeleteRegistryMode unsets a subject's mode and answers what it was.
func (b *Broker) DeleteRegistryMode(ctx context.Context, who Principal, subject string) (registry.Mode, error) {
	if e := b.configCall(ctx, who, acl.OpAlterConfigs, subject); e != nil {
		return "", e
	}
	ctx = withAudit(ctx, who, "subject.mode.delete", configResource(subject), nil)
	before, err := b.d.Registry.DeleteRegistryConfig(ctx, subject, false, true)
	if err != nil {
		return "", registryError("delete mode", err)
	}
	if before.Mode == "" {
		if subject != "" {
			return "", regError(RegSubjectNotFound, "Subject '%s' not found.", subject)
		}
		return registry.DefaultMode, nil
	}
	return registry.Mode(before.Mode), nil
}
