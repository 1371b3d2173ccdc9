package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// securityChannel carries "keys or ACLs changed" notifications (no payload); the
// transaction that changes them sends it, so it is delivered only if it commits.
const securityChannel = "strata_security"

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

const insertAuditSQL = `INSERT INTO audit_log (principal, action, resource_type, resource_name, details)
	VALUES ($1, $2, $3, $4, $5::jsonb)`

func auditArgs(a *catalog.Audit) []any {
	details, err := json.Marshal(a.Details)
	if err != nil || a.Details == nil {
		details = []byte("{}")
	}
	return []any{a.Principal, a.Action, a.ResourceType, a.Resource, string(details)}
}

// writeAudit writes the audit record ctx carries (catalog.WithAudit), if any, in the
// transaction of tx: the administrative methods call it first.
func writeAudit(ctx context.Context, tx execer) error {
	a, ok := catalog.AuditOf(ctx)
	if !ok {
		return nil
	}
	if _, err := tx.Exec(ctx, insertAuditSQL, auditArgs(a)...); err != nil {
		return fmt.Errorf("write audit record: %w", err)
	}
	return nil
}

// queueAudit is writeAudit for a transaction sent as a pipeline (twoTrips).
func queueAudit(ctx context.Context, b *pgx.Batch) {
	if a, ok := catalog.AuditOf(ctx); ok {
		b.Queue(insertAuditSQL, auditArgs(a)...)
	}
}

// securityTx runs fn in a transaction that first takes the security row (changes to
// keys and ACLs serialise on it), bumps its version and writes the audit record, and
// last notifies the nodes.
func (c *Catalog) securityTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE security_state SET version = version + 1 WHERE id = 1`); err != nil {
			return err
		}
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, securityChannel)
		return err
	})
}

const keyColumns = `id, principal, digest, description, created_by, created_at, expires_at, revoked_at`

func scanKey(row pgx.Row) (catalog.APIKey, error) {
	var (
		k                catalog.APIKey
		digest           []byte
		expires, revoked *time.Time
	)
	if err := row.Scan(&k.ID, &k.Principal, &digest, &k.Description, &k.CreatedBy, &k.CreatedAt, &expires, &revoked); err != nil {
		return catalog.APIKey{}, err
	}
	copy(k.Digest[:], digest)
	k.CreatedAt = k.CreatedAt.UTC()
	if expires != nil {
		k.ExpiresAt = expires.UTC()
	}
	if revoked != nil {
		k.RevokedAt = revoked.UTC()
	}
	return k, nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// CreateKey stores a key.
func (c *Catalog) CreateKey(ctx context.Context, k catalog.APIKey) (catalog.APIKey, error) {
	var out catalog.APIKey
	err := c.securityTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanKey(tx.QueryRow(ctx, `INSERT INTO api_keys (id, principal, digest, description, created_by, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+keyColumns,
			k.ID, k.Principal, k.Digest[:], k.Description, k.CreatedBy, nullTime(k.ExpiresAt)))
		return err
	})
	if isUniqueViolation(err) {
		return catalog.APIKey{}, fmt.Errorf("postgres: create key %s: %w", k.ID, catalog.ErrKeyExists)
	}
	if err != nil {
		return catalog.APIKey{}, fmt.Errorf("postgres: create key %s: %w", k.ID, err)
	}
	return out, nil
}

// RevokeKey revokes a live key.
func (c *Catalog) RevokeKey(ctx context.Context, id string) (catalog.APIKey, error) {
	var out catalog.APIKey
	err := c.securityTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanKey(tx.QueryRow(ctx, `UPDATE api_keys SET revoked_at = clock_timestamp()
			WHERE id = $1 AND revoked_at IS NULL RETURNING `+keyColumns, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.ErrKeyNotFound
		}
		return err
	})
	if err != nil {
		return catalog.APIKey{}, fmt.Errorf("postgres: revoke key %s: %w", id, err)
	}
	return out, nil
}

// Keys lists every key, oldest first.
func (c *Catalog) Keys(ctx context.Context) ([]catalog.APIKey, error) {
	rows, err := c.pool.Query(ctx, `SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list keys: %w", err)
	}
	ks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (catalog.APIKey, error) { return scanKey(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: list keys: %w", err)
	}
	return ks, nil
}

// CreateACL stores a binding (once).
func (c *Catalog) CreateACL(ctx context.Context, b acl.Binding) error {
	if err := b.Validate(); err != nil {
		return err
	}
	cols := catalog.BindingColumns(b)
	err := c.securityTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO acls (principal, host, resource_type, resource_name, pattern_type, operation, permission)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6])
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: create ACL (%s): %w", b, err)
	}
	return nil
}

const aclColumns = `principal, host, resource_type, resource_name, pattern_type, operation, permission`

func collectBindings(rows pgx.Rows) ([]acl.Binding, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (acl.Binding, error) {
		var cols [7]string
		if err := r.Scan(&cols[0], &cols[1], &cols[2], &cols[3], &cols[4], &cols[5], &cols[6]); err != nil {
			return acl.Binding{}, err
		}
		return catalog.ScanBinding(cols)
	})
}

// DeleteACLs deletes the bindings f selects. They are chosen in Go (acl.Filter, the
// one definition of a match) among all rows, read under the security row's lock.
func (c *Catalog) DeleteACLs(ctx context.Context, f acl.Filter) ([]acl.Binding, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var deleted []acl.Binding
	err := c.securityTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+aclColumns+` FROM acls ORDER BY resource_type, resource_name, principal`)
		if err != nil {
			return err
		}
		all, err := collectBindings(rows)
		if err != nil {
			return err
		}
		for _, b := range all {
			if !f.Matches(b) {
				continue
			}
			cols := catalog.BindingColumns(b)
			if _, err := tx.Exec(ctx, `DELETE FROM acls WHERE principal = $1 AND host = $2 AND resource_type = $3
				AND resource_name = $4 AND pattern_type = $5 AND operation = $6 AND permission = $7`,
				cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6]); err != nil {
				return err
			}
			deleted = append(deleted, b)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: delete ACLs: %w", err)
	}
	return deleted, nil
}

// ACLs lists every binding.
func (c *Catalog) ACLs(ctx context.Context) ([]acl.Binding, error) {
	rows, err := c.pool.Query(ctx, `SELECT `+aclColumns+` FROM acls ORDER BY resource_type, resource_name, principal`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list ACLs: %w", err)
	}
	bs, err := collectBindings(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: list ACLs: %w", err)
	}
	return bs, nil
}

// SecurityVersion answers the version of keys and ACLs and the database clock.
func (c *Catalog) SecurityVersion(ctx context.Context) (int64, time.Time, error) {
	var (
		v   int64
		now time.Time
	)
	if err := c.pool.QueryRow(ctx, `SELECT version, clock_timestamp() FROM security_state WHERE id = 1`).Scan(&v, &now); err != nil {
		return 0, time.Time{}, fmt.Errorf("postgres: security version: %w", err)
	}
	return v, now.UTC(), nil
}

// WatchSecurity calls fn for every notification of a change to keys or ACLs, on a
// dedicated connection, reconnecting with backoff, until ctx ends.
func (c *Catalog) WatchSecurity(ctx context.Context, fn func()) error {
	return c.reconnecting(ctx, "watch security", func(ctx context.Context) (bool, error) { return c.watchOnce(ctx, fn) })
}

func (c *Catalog) watchOnce(ctx context.Context, fn func()) (connected bool, err error) {
	cfg := c.connConfig.Copy()
	cfg.RuntimeParams["application_name"] = listenApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("postgres: watch security: connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+securityChannel); err != nil {
		return false, fmt.Errorf("postgres: watch security: %w", err)
	}
	fn() // changes made before LISTEN took effect
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, fmt.Errorf("postgres: watch security: wait: %w", err)
		}
		fn()
	}
}

// AuditLog lists audit records after an id.
func (c *Catalog) AuditLog(ctx context.Context, after int64, limit int) ([]catalog.AuditRecord, error) {
	if limit <= 0 || limit > catalog.MaxAuditPage {
		limit = catalog.MaxAuditPage
	}
	rows, err := c.pool.Query(ctx, `SELECT id, at, principal, action, resource_type, resource_name, details
		FROM audit_log WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: audit log: %w", err)
	}
	rs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (catalog.AuditRecord, error) {
		var (
			a       catalog.AuditRecord
			details []byte
		)
		if err := r.Scan(&a.ID, &a.Time, &a.Principal, &a.Action, &a.ResourceType, &a.Resource, &details); err != nil {
			return a, err
		}
		a.Time = a.Time.UTC()
		return a, json.Unmarshal(details, &a.Details)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: audit log: %w", err)
	}
	return rs, nil
}

// ProducerOwner answers whom a producer id belongs to.
func (c *Catalog) ProducerOwner(ctx context.Context, id int64) (catalog.ProducerOwner, error) {
	var tid, principal *string
	err := c.pool.QueryRow(ctx, `SELECT transactional_id, principal FROM producers WHERE id = $1`, id).Scan(&tid, &principal)
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.ProducerOwner{}, fmt.Errorf("postgres: producer %d: %w", id, catalog.ErrUnknownProducer)
	}
	if err != nil {
		return catalog.ProducerOwner{}, fmt.Errorf("postgres: producer %d: %w", id, err)
	}
	var o catalog.ProducerOwner
	if tid != nil {
		o.TransactionalID = *tid
	}
	if principal != nil {
		o.Principal = *principal
	} else {
		o.Unowned = true
	}
	return o, nil
}

// SecurityTx runs the engine's security scripts (SCRAM credentials, quotas) in
// securityTx.
func (e pgEngine) SecurityTx(ctx context.Context, fn func(q engine.RegistryQuerier) error) error {
	return e.c.securityTx(ctx, func(tx pgx.Tx) error { return fn(txQuerier{tx}) })
}
