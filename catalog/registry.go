package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Registry is the schema registry's state (package registry serves it, the broker core
// decides what may change): schemas by their global id, the versions of each subject,
// the references between schemas, and the compatibility level and mode of the registry
// and of each subject. Ids are assigned here, from one counter, and never handed out
// twice; the same schema (by fingerprint) under several subjects has one id. Every write
// takes one lock first (the registry_state row), so registrations serialise and a
// compatibility check sees every version that can be committed before it. The rules
// the backends share are the Plan* functions below. Proved by catalogtest (its "registry" suite).
type Registry interface {
	// RegisterSchema registers s under its subject in one transaction: when a version
	// of the subject (not deleted) already holds a schema with s.Fingerprint, it answers
	// that version and created false, changing nothing. Otherwise it calls check with
	// the subject's versions that are not deleted (oldest first, schemas filled in); an
	// error from check is returned as it is and nothing changes. Then the schema takes
	// the id its fingerprint already has, or s.ID when set (import: ErrSchemaIDConflict
	// when that id holds another schema or the fingerprint another id), or the next id;
	// and the version s.Version when set (import: ErrVersionExists when taken), or one
	// more than the subject's highest (deleted versions count: a version number is
	// never reused). A reference to a version that does not exist:
	// ErrReferenceNotFound.
	RegisterSchema(ctx context.Context, s NewSchema, check func(live []SubjectSchema) error) (SubjectSchema, bool, error)
	// SchemaByID answers the schema with id, if some version of some subject (deleted
	// or not) holds it; else ErrSchemaNotFound.
	SchemaByID(ctx context.Context, id int64) (Schema, error)
	// SchemaUsages lists the subject versions that hold schema id, by subject and
	// version, soft-deleted ones only with deleted.
	SchemaUsages(ctx context.Context, id int64, deleted bool) ([]SubjectSchema, error)
	// Subjects lists the subjects with a version, sorted; with deleted, also those
	// whose versions are all soft-deleted.
	Subjects(ctx context.Context, deleted bool) ([]string, error)
	// SubjectSchemas lists a subject's versions, oldest first, with their schemas;
	// soft-deleted ones only with deleted. None: an empty list.
	SubjectSchemas(ctx context.Context, subject string, deleted bool) ([]SubjectSchema, error)
	// DeleteSchemaVersion soft-deletes (or, permanent, removes a soft-deleted) version
	// of a subject, under PlanVersionDelete's rules.
	DeleteSchemaVersion(ctx context.Context, subject string, version int32, permanent bool) error
	// DeleteSubject soft-deletes every version of a subject (or, permanent, removes
	// them and the subject's config), under PlanSubjectDelete's rules, and answers the
	// versions it deleted.
	DeleteSubject(ctx context.Context, subject string, permanent bool) ([]int32, error)
	// ReferencedBy lists the ids of the schemas, held by versions not deleted, that
	// reference a subject's version, ascending.
	ReferencedBy(ctx context.Context, subject string, version int32) ([]int64, error)
	// RegistryConfig answers the compatibility level and mode set for a subject (""
	// for the registry's own); unset fields are empty.
	RegistryConfig(ctx context.Context, subject string) (RegistryConfig, error)
	// SetRegistryConfig sets the non-empty fields of cfg for a subject ("" for the
	// registry) and answers what is then set.
	SetRegistryConfig(ctx context.Context, subject string, cfg RegistryConfig) (RegistryConfig, error)
	// DeleteRegistryConfig unsets a subject's compatibility level and/or mode and
	// answers what was set before.
	DeleteRegistryConfig(ctx context.Context, subject string, compatibility, mode bool) (RegistryConfig, error)
}

// Errors of Registry.
var (
	ErrSubjectNotFound       = errors.New("subject not found")
	ErrVersionNotFound       = errors.New("version not found")
	ErrSchemaNotFound        = errors.New("schema not found")
	ErrSubjectSoftDeleted    = errors.New("subject was soft deleted")
	ErrSubjectNotSoftDeleted = errors.New("subject was not soft deleted first")
	ErrVersionSoftDeleted    = errors.New("version was soft deleted")
	ErrVersionNotSoftDeleted = errors.New("version was not soft deleted first")
	ErrReferenceExists       = errors.New("a schema references this version")
	ErrReferenceNotFound     = errors.New("referenced subject version not found")
	ErrSchemaIDConflict      = errors.New("schema id conflict")
	ErrVersionExists         = errors.New("version exists")
)

// Schema is a registered schema: its global id, type (AVRO, PROTOBUF, JSON), text as
// registered, and references.
type Schema struct {
	ID         int64
	Type       string
	Text       string
	References []SchemaReference
	// Fingerprint identifies the schema whatever its spelling (the registry's
	// canonical form, with type and references): equal fingerprints, one id.
	Fingerprint string
}

// SchemaReference names another subject's version a schema refers to by Name (an
// Avro full name, a Protobuf import path, a JSON Schema URL).
type SchemaReference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int32  `json:"version"`
}

// SubjectSchema is one version of a subject and the schema it holds.
type SubjectSchema struct {
	Subject string
	Version int32
	Deleted bool
	Schema
}

// NewSchema is a registration.
type NewSchema struct {
	Subject string
	// Schema to register, Fingerprint set; ID set (above 0) only in import mode.
	Schema
	// Version, above 0, is the version to register at (import mode).
	Version int32
}

// RegistryConfig is a compatibility level and a mode; empty: not set.
type RegistryConfig struct {
	Compatibility string
	Mode          string
}

// PlanRegister is RegisterSchema's rule over a subject's versions (deleted ones too),
// oldest first: the live version already holding fingerprint (found), else the version
// the registration takes.
func PlanRegister(rows []SubjectSchema, s NewSchema) (found *SubjectSchema, version int32, err error) {
	var max int32
	for i := range rows {
		r := &rows[i]
		if !r.Deleted && r.Fingerprint == s.Fingerprint && (s.ID <= 0 || r.ID == s.ID) {
			return r, r.Version, nil
		}
		max = maxOf(max, r.Version)
	}
	if s.Version <= 0 {
		return nil, max + 1, nil
	}
	for i := range rows {
		if rows[i].Version == s.Version {
			return nil, 0, fmt.Errorf("%w: %s has a version %d already", ErrVersionExists, s.Subject, s.Version)
		}
	}
	return nil, s.Version, nil
}

func maxOf(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}

// Live returns the versions of rows that are not deleted.
func Live(rows []SubjectSchema) []SubjectSchema {
	out := make([]SubjectSchema, 0, len(rows))
	for _, r := range rows {
		if !r.Deleted {
			out = append(out, r)
		}
	}
	return out
}

// PlanVersionDelete is DeleteSchemaVersion's rule over a subject's versions (deleted
// ones too) and whether a live schema references the version: a version the subject
// does not have is ErrVersionNotFound (ErrSubjectNotFound when it has none); a soft
// delete of a soft-deleted version ErrVersionSoftDeleted; a permanent delete of a live
// one ErrVersionNotSoftDeleted; a referenced one ErrReferenceExists.
func PlanVersionDelete(rows []SubjectSchema, subject string, version int32, permanent, referenced bool) error {
	if len(rows) == 0 {
		return fmt.Errorf("%w: %s", ErrSubjectNotFound, subject)
	}
	i := slices.IndexFunc(rows, func(r SubjectSchema) bool { return r.Version == version })
	switch {
	case i < 0:
		return fmt.Errorf("%w: %s has no version %d", ErrVersionNotFound, subject, version)
	case !permanent && rows[i].Deleted:
		return fmt.Errorf("%w: %s version %d", ErrVersionSoftDeleted, subject, version)
	case permanent && !rows[i].Deleted:
		return fmt.Errorf("%w: %s version %d", ErrVersionNotSoftDeleted, subject, version)
	case referenced:
		return fmt.Errorf("%w: %s version %d", ErrReferenceExists, subject, version)
	}
	return nil
}

// PlanSubjectDelete is DeleteSubject's rule: the versions to delete, or why not (no
// versions: ErrSubjectNotFound; a soft delete of a subject whose versions are all
// soft-deleted: ErrSubjectSoftDeleted; a permanent delete of one with live versions:
// ErrSubjectNotSoftDeleted; referenced: ErrReferenceExists).
func PlanSubjectDelete(rows []SubjectSchema, subject string, permanent, referenced bool) ([]int32, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrSubjectNotFound, subject)
	}
	live := Live(rows)
	switch {
	case !permanent && len(live) == 0:
		return nil, fmt.Errorf("%w: %s", ErrSubjectSoftDeleted, subject)
	case permanent && len(live) > 0:
		return nil, fmt.Errorf("%w: %s", ErrSubjectNotSoftDeleted, subject)
	case referenced:
		return nil, fmt.Errorf("%w: %s", ErrReferenceExists, subject)
	}
	pick := live
	if permanent {
		pick = rows
	}
	out := make([]int32, len(pick))
	for i, r := range pick {
		out[i] = r.Version
	}
	return out, nil
}
