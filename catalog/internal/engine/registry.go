package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/strata-io/strata/catalog"
)

// The schema registry's state is small and written rarely, so both backends run the
// same statements (written with $N placeholders; SQLite reads them as ?N) through the
// narrow RegistryDB below: the rules are catalog.Plan*, the SQL is here once.

// RegistryRows is a result set (pgx.Rows and *sql.Rows behind an adapter).
type RegistryRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// RegistryQuerier runs statements in a transaction or on the read pool.
type RegistryQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (RegistryRows, error)
	Exec(ctx context.Context, sql string, args ...any) (int64, error)
}

// RegistryDB is what a backend gives the registry.
type RegistryDB interface {
	// Name is the backend's name, for errors ("postgres", "sqlite").
	Name() string
	// WriteTx runs fn in a write transaction, commits it when fn returns nil, and
	// writes the audit record ctx carries first (catalog.WithAudit).
	WriteTx(ctx context.Context, fn func(q RegistryQuerier) error) error
	// Reader is the read side (outside any transaction).
	Reader() RegistryQuerier
}

// Registry implements catalog.Registry over DB; a backend embeds it, so its methods are
// the backend's, written once.
type Registry struct{ DB RegistryDB }

func (r Registry) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", r.DB.Name(), op, err)
}

const versionColumns = `v.subject, v.version, v.deleted, s.id, s.schema_type, s.schema_text, s.refs, s.fingerprint`

func scanVersions(rows RegistryRows, err error) ([]catalog.SubjectSchema, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []catalog.SubjectSchema
	for rows.Next() {
		var (
			v    catalog.SubjectSchema
			refs string
		)
		if err := rows.Scan(&v.Subject, &v.Version, &v.Deleted, &v.ID, &v.Type, &v.Text, &refs, &v.Fingerprint); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(refs), &v.References); err != nil {
			return nil, fmt.Errorf("stored references of schema %d: %w", v.ID, err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func subjectRows(ctx context.Context, q RegistryQuerier, subject string, deleted bool) ([]catalog.SubjectSchema, error) {
	return scanVersions(q.Query(ctx, `SELECT `+versionColumns+` FROM registry_versions v JOIN registry_schemas s ON s.id = v.schema_id
		WHERE v.subject = $1 AND ($2 OR NOT v.deleted) ORDER BY v.version`, subject, deleted))
}

func scanInts[T int32 | int64](rows RegistryRows, err error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// lock takes the registry's lock (SQLite's immediate transaction already holds the
// file's) and answers the next id.
func lock(ctx context.Context, q RegistryQuerier) (int64, error) {
	ids, err := scanInts[int64](q.Query(ctx, `SELECT next_id FROM registry_state WHERE id = 1 FOR UPDATE`))
	if err != nil {
		return 0, fmt.Errorf("lock the registry: %w", err)
	}
	if len(ids) != 1 {
		return 0, errors.New("lock the registry: no registry_state row")
	}
	return ids[0], nil
}

// registerSchema is RegisterSchema without the backend's name on its errors.
func (r Registry) registerSchema(ctx context.Context, s catalog.NewSchema, check func(live []catalog.SubjectSchema) error) (out catalog.SubjectSchema, created bool, err error) {
	refs, err := json.Marshal(nonNil(s.References))
	if err != nil {
		return out, false, err
	}
	err = r.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		next, err := lock(ctx, q)
		if err != nil {
			return err
		}
		rows, err := subjectRows(ctx, q, s.Subject, true)
		if err != nil {
			return err
		}
		found, version, err := catalog.PlanRegister(rows, s)
		if err != nil {
			return err
		}
		if found != nil {
			out = *found
			return errDone
		}
		if err := check(catalog.Live(rows)); err != nil {
			return err
		}
		for _, ref := range s.References {
			n, err := scanInts[int64](q.Query(ctx, `SELECT schema_id FROM registry_versions WHERE subject = $1 AND version = $2`, ref.Subject, ref.Version))
			if err != nil {
				return err
			}
			if len(n) == 0 {
				return fmt.Errorf("%w: %s version %d (reference %q)", catalog.ErrReferenceNotFound, ref.Subject, ref.Version, ref.Name)
			}
		}
		byPrint, err := scanInts[int64](q.Query(ctx, `SELECT id FROM registry_schemas WHERE fingerprint = $1`, s.Fingerprint))
		if err != nil {
			return err
		}
		id := s.ID
		switch {
		case len(byPrint) == 1 && id > 0 && byPrint[0] != id:
			return fmt.Errorf("%w: this schema has id %d, not %d", catalog.ErrSchemaIDConflict, byPrint[0], id)
		case len(byPrint) == 1:
			id = byPrint[0]
		case id > 0:
			taken, err := scanInts[int64](q.Query(ctx, `SELECT id FROM registry_schemas WHERE id = $1`, id))
			if err != nil {
				return err
			}
			if len(taken) > 0 {
				return fmt.Errorf("%w: id %d holds another schema", catalog.ErrSchemaIDConflict, id)
			}
		default:
			id = next
		}
		if len(byPrint) == 0 {
			if _, err := q.Exec(ctx, `INSERT INTO registry_schemas (id, schema_type, schema_text, refs, fingerprint) VALUES ($1, $2, $3, $4, $5)`,
				id, s.Type, s.Text, string(refs), s.Fingerprint); err != nil {
				return fmt.Errorf("insert schema %d: %w", id, err)
			}
			for _, ref := range s.References {
				if _, err := q.Exec(ctx, `INSERT INTO registry_refs (schema_id, subject, version) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
					id, ref.Subject, ref.Version); err != nil {
					return fmt.Errorf("insert reference of schema %d: %w", id, err)
				}
			}
			if _, err := q.Exec(ctx, `UPDATE registry_state SET next_id = $1 WHERE id = 1`, max(next, id+1)); err != nil {
				return fmt.Errorf("advance the next id: %w", err)
			}
		}
		if _, err := q.Exec(ctx, `INSERT INTO registry_versions (subject, version, schema_id, deleted) VALUES ($1, $2, $3, $4)`,
			s.Subject, version, id, false); err != nil {
			return fmt.Errorf("insert %s version %d: %w", s.Subject, version, err)
		}
		out = catalog.SubjectSchema{Subject: s.Subject, Version: version, Schema: s.Schema}
		out.ID = id
		created = true
		return nil
	})
	if errors.Is(err, errDone) {
		err = nil
	}
	return out, created, err
}

// errDone ends a write transaction that found nothing to write (it rolls back).
var errDone = errors.New("nothing to write")

func nonNil(refs []catalog.SchemaReference) []catalog.SchemaReference {
	if refs == nil {
		return []catalog.SchemaReference{}
	}
	return refs
}

// schemaByID is SchemaByID without the backend's name on its errors.
func (r Registry) schemaByID(ctx context.Context, id int64) (catalog.Schema, error) {
	rows, err := scanVersions(r.DB.Reader().Query(ctx, `SELECT `+versionColumns+` FROM registry_versions v JOIN registry_schemas s ON s.id = v.schema_id
		WHERE s.id = $1 LIMIT 1`, id))
	if err != nil {
		return catalog.Schema{}, err
	}
	if len(rows) == 0 {
		return catalog.Schema{}, fmt.Errorf("%w: id %d", catalog.ErrSchemaNotFound, id)
	}
	return rows[0].Schema, nil
}

// schemaUsages is SchemaUsages without the backend's name on its errors.
func (r Registry) schemaUsages(ctx context.Context, id int64, deleted bool) ([]catalog.SubjectSchema, error) {
	return scanVersions(r.DB.Reader().Query(ctx, `SELECT `+versionColumns+` FROM registry_versions v JOIN registry_schemas s ON s.id = v.schema_id
		WHERE s.id = $1 AND ($2 OR NOT v.deleted) ORDER BY v.subject, v.version`, id, deleted))
}

// subjects is Subjects without the backend's name on its errors.
func (r Registry) subjects(ctx context.Context, deleted bool) ([]string, error) {
	rows, err := r.DB.Reader().Query(ctx, `SELECT DISTINCT subject FROM registry_versions WHERE $1 OR NOT deleted ORDER BY subject`, deleted)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// subjectSchemas is SubjectSchemas without the backend's name on its errors.
func (r Registry) subjectSchemas(ctx context.Context, subject string, deleted bool) ([]catalog.SubjectSchema, error) {
	return subjectRows(ctx, r.DB.Reader(), subject, deleted)
}

// referenced reports whether a live version holds a schema referencing one of the
// subject's versions (all of them with version 0).
func referenced(ctx context.Context, q RegistryQuerier, subject string, version int32) (bool, error) {
	ids, err := scanInts[int64](q.Query(ctx, `SELECT r.schema_id FROM registry_refs r
		WHERE r.subject = $1 AND ($2 = 0 OR r.version = $2)
		  AND EXISTS (SELECT 1 FROM registry_versions v WHERE v.schema_id = r.schema_id AND NOT v.deleted) LIMIT 1`, subject, version))
	return len(ids) > 0, err
}

// deleteSchemaVersion is DeleteSchemaVersion without the backend's name on its errors.
func (r Registry) deleteSchemaVersion(ctx context.Context, subject string, version int32, permanent bool) error {
	return r.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		if _, err := lock(ctx, q); err != nil {
			return err
		}
		rows, err := subjectRows(ctx, q, subject, true)
		if err != nil {
			return err
		}
		ref, err := referenced(ctx, q, subject, version)
		if err != nil {
			return err
		}
		if err := catalog.PlanVersionDelete(rows, subject, version, permanent, ref); err != nil {
			return err
		}
		stmt := `UPDATE registry_versions SET deleted = $3 WHERE subject = $1 AND version = $2`
		if permanent {
			stmt = `DELETE FROM registry_versions WHERE subject = $1 AND version = $2 AND $3`
		}
		_, err = q.Exec(ctx, stmt, subject, version, true)
		return err
	})
}

// deleteSubject is DeleteSubject without the backend's name on its errors.
func (r Registry) deleteSubject(ctx context.Context, subject string, permanent bool) (versions []int32, err error) {
	err = r.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		if _, err := lock(ctx, q); err != nil {
			return err
		}
		rows, err := subjectRows(ctx, q, subject, true)
		if err != nil {
			return err
		}
		ref, err := referenced(ctx, q, subject, 0)
		if err != nil {
			return err
		}
		if versions, err = catalog.PlanSubjectDelete(rows, subject, permanent, ref); err != nil {
			return err
		}
		if permanent {
			if _, err := q.Exec(ctx, `DELETE FROM registry_versions WHERE subject = $1`, subject); err != nil {
				return err
			}
			_, err = q.Exec(ctx, `DELETE FROM registry_config WHERE subject = $1`, subject)
			return err
		}
		_, err = q.Exec(ctx, `UPDATE registry_versions SET deleted = $2 WHERE subject = $1`, subject, true)
		return err
	})
	return versions, err
}

// referencedBy is ReferencedBy without the backend's name on its errors.
func (r Registry) referencedBy(ctx context.Context, subject string, version int32) ([]int64, error) {
	ids, err := scanInts[int64](r.DB.Reader().Query(ctx, `SELECT DISTINCT r.schema_id FROM registry_refs r
		WHERE r.subject = $1 AND r.version = $2
		  AND EXISTS (SELECT 1 FROM registry_versions v WHERE v.schema_id = r.schema_id AND NOT v.deleted)
		ORDER BY r.schema_id`, subject, version))
	if ids == nil && err == nil {
		ids = []int64{}
	}
	return ids, err
}

func readConfig(ctx context.Context, q RegistryQuerier, subject string) (catalog.RegistryConfig, error) {
	rows, err := q.Query(ctx, `SELECT compatibility, mode FROM registry_config WHERE subject = $1`, subject)
	if err != nil {
		return catalog.RegistryConfig{}, err
	}
	defer rows.Close()
	var c catalog.RegistryConfig
	if rows.Next() {
		if err := rows.Scan(&c.Compatibility, &c.Mode); err != nil {
			return c, err
		}
	}
	return c, rows.Err()
}

// registryConfig is RegistryConfig without the backend's name on its errors.
func (r Registry) registryConfig(ctx context.Context, subject string) (catalog.RegistryConfig, error) {
	return readConfig(ctx, r.DB.Reader(), subject)
}

// setRegistryConfig is SetRegistryConfig without the backend's name on its errors.
func (r Registry) setRegistryConfig(ctx context.Context, subject string, cfg catalog.RegistryConfig) (out catalog.RegistryConfig, err error) {
	err = r.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		if _, err := lock(ctx, q); err != nil {
			return err
		}
		cur, err := readConfig(ctx, q, subject)
		if err != nil {
			return err
		}
		out = cur
		if cfg.Compatibility != "" {
			out.Compatibility = cfg.Compatibility
		}
		if cfg.Mode != "" {
			out.Mode = cfg.Mode
		}
		return writeConfig(ctx, q, subject, out)
	})
	return out, err
}

func writeConfig(ctx context.Context, q RegistryQuerier, subject string, c catalog.RegistryConfig) error {
	if c == (catalog.RegistryConfig{}) {
		_, err := q.Exec(ctx, `DELETE FROM registry_config WHERE subject = $1`, subject)
		return err
	}
	_, err := q.Exec(ctx, `INSERT INTO registry_config (subject, compatibility, mode) VALUES ($1, $2, $3)
		ON CONFLICT (subject) DO UPDATE SET compatibility = excluded.compatibility, mode = excluded.mode`, subject, c.Compatibility, c.Mode)
	return err
}

// deleteRegistryConfig is DeleteRegistryConfig without the backend's name on its errors.
func (r Registry) deleteRegistryConfig(ctx context.Context, subject string, compatibility, mode bool) (before catalog.RegistryConfig, err error) {
	err = r.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		if _, err := lock(ctx, q); err != nil {
			return err
		}
		if before, err = readConfig(ctx, q, subject); err != nil {
			return err
		}
		after := before
		if compatibility {
			after.Compatibility = ""
		}
		if mode {
			after.Mode = ""
		}
		return writeConfig(ctx, q, subject, after)
	})
	return before, err
}

// SQLitePlaceholders rewrites the $N placeholders of the statements above as SQLite's
// ?N, and drops FOR UPDATE (SQLite's immediate transaction is the lock).
func SQLitePlaceholders(sql string) string {
	sql = strings.ReplaceAll(sql, " FOR UPDATE", "")
	return strings.ReplaceAll(sql, "$", "?")
}

var _ catalog.Registry = Registry{}

// The methods of catalog.Registry: each runs its script and names the backend and the
// operation on its errors.

// RegisterSchema implements catalog.Registry.
func (r Registry) RegisterSchema(ctx context.Context, s catalog.NewSchema, check func(live []catalog.SubjectSchema) error) (catalog.SubjectSchema, bool, error) {
	v, created, err := r.registerSchema(ctx, s, check)
	return v, created, r.wrap("register schema under "+s.Subject, err)
}

// SchemaByID implements catalog.Registry.
func (r Registry) SchemaByID(ctx context.Context, id int64) (catalog.Schema, error) {
	v, err := r.schemaByID(ctx, id)
	return v, r.wrap("schema by id", err)
}

// SchemaUsages implements catalog.Registry.
func (r Registry) SchemaUsages(ctx context.Context, id int64, deleted bool) ([]catalog.SubjectSchema, error) {
	v, err := r.schemaUsages(ctx, id, deleted)
	return v, r.wrap("schema usages", err)
}

// Subjects implements catalog.Registry.
func (r Registry) Subjects(ctx context.Context, deleted bool) ([]string, error) {
	v, err := r.subjects(ctx, deleted)
	return v, r.wrap("subjects", err)
}

// SubjectSchemas implements catalog.Registry.
func (r Registry) SubjectSchemas(ctx context.Context, subject string, deleted bool) ([]catalog.SubjectSchema, error) {
	v, err := r.subjectSchemas(ctx, subject, deleted)
	return v, r.wrap("versions of "+subject, err)
}

// DeleteSchemaVersion implements catalog.Registry.
func (r Registry) DeleteSchemaVersion(ctx context.Context, subject string, version int32, permanent bool) error {
	return r.wrap("delete a version of "+subject, r.deleteSchemaVersion(ctx, subject, version, permanent))
}

// DeleteSubject implements catalog.Registry.
func (r Registry) DeleteSubject(ctx context.Context, subject string, permanent bool) ([]int32, error) {
	v, err := r.deleteSubject(ctx, subject, permanent)
	return v, r.wrap("delete subject "+subject, err)
}

// ReferencedBy implements catalog.Registry.
func (r Registry) ReferencedBy(ctx context.Context, subject string, version int32) ([]int64, error) {
	v, err := r.referencedBy(ctx, subject, version)
	return v, r.wrap("references to "+subject, err)
}

// RegistryConfig implements catalog.Registry.
func (r Registry) RegistryConfig(ctx context.Context, subject string) (catalog.RegistryConfig, error) {
	v, err := r.registryConfig(ctx, subject)
	return v, r.wrap("registry config", err)
}

// SetRegistryConfig implements catalog.Registry.
func (r Registry) SetRegistryConfig(ctx context.Context, subject string, cfg catalog.RegistryConfig) (catalog.RegistryConfig, error) {
	v, err := r.setRegistryConfig(ctx, subject, cfg)
	return v, r.wrap("set registry config", err)
}

// DeleteRegistryConfig implements catalog.Registry.
func (r Registry) DeleteRegistryConfig(ctx context.Context, subject string, compatibility, mode bool) (catalog.RegistryConfig, error) {
	v, err := r.deleteRegistryConfig(ctx, subject, compatibility, mode)
	return v, r.wrap("delete registry config", err)
}
