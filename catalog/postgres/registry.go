package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// The schema registry (catalog.Registry): the statements and rules are the engine's,
// shared with SQLite; this file runs them on the pool.

type pgRegistry struct{ c *Catalog }

func (r pgRegistry) WriteTx(ctx context.Context, fn func(q engine.RegistryQuerier) error) error {
	return pgx.BeginFunc(ctx, r.c.pool, func(tx pgx.Tx) error {
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		return fn(txQuerier{tx})
	})
}

func (r pgRegistry) Reader() engine.RegistryQuerier { return poolQuerier{r.c} }

type txQuerier struct{ tx pgx.Tx }

func (q txQuerier) Query(ctx context.Context, sql string, args ...any) (engine.RegistryRows, error) {
	return q.tx.Query(ctx, sql, args...)
}

func (q txQuerier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.tx.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

type poolQuerier struct{ c *Catalog }

func (q poolQuerier) Query(ctx context.Context, sql string, args ...any) (engine.RegistryRows, error) {
	return q.c.pool.Query(ctx, sql, args...)
}

func (q poolQuerier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.c.pool.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (c *Catalog) registry() engine.Registry { return engine.Registry{DB: pgRegistry{c}} }

func wrapRegistry(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// RegisterSchema implements catalog.Registry.
func (c *Catalog) RegisterSchema(ctx context.Context, s catalog.NewSchema, check func([]catalog.SubjectSchema) error) (catalog.SubjectSchema, bool, error) {
	out, created, err := c.registry().RegisterSchema(ctx, s, check)
	return out, created, wrapRegistry("register schema under "+s.Subject, err)
}

// SchemaByID implements catalog.Registry.
func (c *Catalog) SchemaByID(ctx context.Context, id int64) (catalog.Schema, error) {
	s, err := c.registry().SchemaByID(ctx, id)
	return s, wrapRegistry("schema by id", err)
}

// SchemaUsages implements catalog.Registry.
func (c *Catalog) SchemaUsages(ctx context.Context, id int64, deleted bool) ([]catalog.SubjectSchema, error) {
	s, err := c.registry().SchemaUsages(ctx, id, deleted)
	return s, wrapRegistry("schema usages", err)
}

// Subjects implements catalog.Registry.
func (c *Catalog) Subjects(ctx context.Context, deleted bool) ([]string, error) {
	s, err := c.registry().Subjects(ctx, deleted)
	return s, wrapRegistry("subjects", err)
}

// SubjectSchemas implements catalog.Registry.
func (c *Catalog) SubjectSchemas(ctx context.Context, subject string, deleted bool) ([]catalog.SubjectSchema, error) {
	s, err := c.registry().SubjectSchemas(ctx, subject, deleted)
	return s, wrapRegistry("versions of "+subject, err)
}

// DeleteSchemaVersion implements catalog.Registry.
func (c *Catalog) DeleteSchemaVersion(ctx context.Context, subject string, version int32, permanent bool) error {
	return wrapRegistry("delete a version of "+subject, c.registry().DeleteSchemaVersion(ctx, subject, version, permanent))
}

// DeleteSubject implements catalog.Registry.
func (c *Catalog) DeleteSubject(ctx context.Context, subject string, permanent bool) ([]int32, error) {
	v, err := c.registry().DeleteSubject(ctx, subject, permanent)
	return v, wrapRegistry("delete subject "+subject, err)
}

// ReferencedBy implements catalog.Registry.
func (c *Catalog) ReferencedBy(ctx context.Context, subject string, version int32) ([]int64, error) {
	v, err := c.registry().ReferencedBy(ctx, subject, version)
	return v, wrapRegistry("references to "+subject, err)
}

// RegistryConfig implements catalog.Registry.
func (c *Catalog) RegistryConfig(ctx context.Context, subject string) (catalog.RegistryConfig, error) {
	v, err := c.registry().RegistryConfig(ctx, subject)
	return v, wrapRegistry("registry config", err)
}

// SetRegistryConfig implements catalog.Registry.
func (c *Catalog) SetRegistryConfig(ctx context.Context, subject string, cfg catalog.RegistryConfig) (catalog.RegistryConfig, error) {
	v, err := c.registry().SetRegistryConfig(ctx, subject, cfg)
	return v, wrapRegistry("set registry config", err)
}

// DeleteRegistryConfig implements catalog.Registry.
func (c *Catalog) DeleteRegistryConfig(ctx context.Context, subject string, compatibility, mode bool) (catalog.RegistryConfig, error) {
	v, err := c.registry().DeleteRegistryConfig(ctx, subject, compatibility, mode)
	return v, wrapRegistry("delete registry config", err)
}
