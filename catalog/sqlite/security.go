package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// changes wakes WatchSecurity in this process after a change to keys or ACLs: publish
// closes the channel waiters hold and starts a new one. (Another process on the file is
// seen by polling SecurityVersion.) The zero value is ready.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

func (c *changes) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *changes) publish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// writeAudit writes the audit record ctx carries (catalog.WithAudit), if any, in tx:
// the administrative methods call it first.
func writeAudit(ctx context.Context, tx *sql.Tx) error {
	a, ok := catalog.AuditOf(ctx)
	if !ok {
		return nil
	}
	details, err := json.Marshal(a.Details)
	if err != nil || a.Details == nil {
		details = []byte("{}")
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_log (at, principal, action, resource_type, resource_name, details)
		VALUES ((`+nowSQL+`), ?, ?, ?, ?, ?)`, a.Principal, a.Action, a.ResourceType, a.Resource, string(details)); err != nil {
		return fmt.Errorf("write audit record: %w", err)
	}
	return nil
}

// securityTx runs fn in an immediate transaction that first bumps the security version
// and writes the audit record; once it commits, this process's watchers are woken.
func (c *Catalog) securityTx(ctx context.Context, fn func(tx *sql.Tx, now time.Time) error) error {
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		if _, err := tx.ExecContext(ctx, `UPDATE security_state SET version = version + 1 WHERE id = 1`); err != nil {
			return err
		}
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		return fn(tx, now)
	})
	if err == nil {
		c.security.publish()
	}
	return err
}

const keyColumns = `id, principal, digest, description, created_by, created_at, expires_at, revoked_at`

func scanKey(row interface{ Scan(...any) error }) (catalog.APIKey, error) {
	var (
		k                         catalog.APIKey
		digest                    []byte
		created, expires, revoked int64
	)
	if err := row.Scan(&k.ID, &k.Principal, &digest, &k.Description, &k.CreatedBy, &created, &expires, &revoked); err != nil {
		return catalog.APIKey{}, err
	}
	copy(k.Digest[:], digest)
	k.CreatedAt, k.ExpiresAt, k.RevokedAt = fromMS(created), fromMS(expires), fromMS(revoked)
	return k, nil
}

func isConstraint(err error) bool {
	return err != nil && strings.Contains(err.Error(), "constraint failed")
}

// CreateKey stores a key.
func (c *Catalog) CreateKey(ctx context.Context, k catalog.APIKey) (catalog.APIKey, error) {
	var out catalog.APIKey
	err := c.securityTx(ctx, func(tx *sql.Tx, now time.Time) error {
		var err error
		expires := int64(0)
		if !k.ExpiresAt.IsZero() {
			expires = ms(k.ExpiresAt)
		}
		out, err = scanKey(tx.QueryRowContext(ctx, `INSERT INTO api_keys (id, principal, digest, description, created_by, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING `+keyColumns,
			k.ID, k.Principal, k.Digest[:], k.Description, k.CreatedBy, ms(now), expires))
		return err
	})
	if isConstraint(err) {
		return catalog.APIKey{}, fmt.Errorf("sqlite: create key %s: %w", k.ID, catalog.ErrKeyExists)
	}
	if err != nil {
		return catalog.APIKey{}, fmt.Errorf("sqlite: create key %s: %w", k.ID, err)
	}
	return out, nil
}

// RevokeKey revokes a live key.
func (c *Catalog) RevokeKey(ctx context.Context, id string) (catalog.APIKey, error) {
	var out catalog.APIKey
	err := c.securityTx(ctx, func(tx *sql.Tx, now time.Time) error {
		var err error
		out, err = scanKey(tx.QueryRowContext(ctx, `UPDATE api_keys SET revoked_at = ?
			WHERE id = ? AND revoked_at = 0 RETURNING `+keyColumns, ms(now), id))
		if errors.Is(err, sql.ErrNoRows) {
			return catalog.ErrKeyNotFound
		}
		return err
	})
	if err != nil {
		return catalog.APIKey{}, fmt.Errorf("sqlite: revoke key %s: %w", id, err)
	}
	return out, nil
}

// Keys lists every key, oldest first.
func (c *Catalog) Keys(ctx context.Context) ([]catalog.APIKey, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list keys: %w", err)
	}
	defer rows.Close()
	var ks []catalog.APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list keys: %w", err)
		}
		ks = append(ks, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list keys: %w", err)
	}
	return ks, nil
}

// CreateACL stores a binding (once).
func (c *Catalog) CreateACL(ctx context.Context, b acl.Binding) error {
	if err := b.Validate(); err != nil {
		return err
	}
	cols := catalog.BindingColumns(b)
	err := c.securityTx(ctx, func(tx *sql.Tx, now time.Time) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO acls (principal, host, resource_type, resource_name, pattern_type, operation, permission, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], ms(now))
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: create ACL (%s): %w", b, err)
	}
	return nil
}

const aclColumns = `principal, host, resource_type, resource_name, pattern_type, operation, permission`

func queryBindings(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) ([]acl.Binding, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+aclColumns+` FROM acls ORDER BY resource_type, resource_name, principal`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var bs []acl.Binding
	for rows.Next() {
		var cols [7]string
		if err := rows.Scan(&cols[0], &cols[1], &cols[2], &cols[3], &cols[4], &cols[5], &cols[6]); err != nil {
			return nil, err
		}
		b, err := catalog.ScanBinding(cols)
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
	return bs, rows.Err()
}

// DeleteACLs deletes the bindings f selects (chosen in Go by acl.Filter).
func (c *Catalog) DeleteACLs(ctx context.Context, f acl.Filter) ([]acl.Binding, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var deleted []acl.Binding
	err := c.securityTx(ctx, func(tx *sql.Tx, now time.Time) error {
		all, err := queryBindings(ctx, tx)
		if err != nil {
			return err
		}
		for _, b := range all {
			if !f.Matches(b) {
				continue
			}
			cols := catalog.BindingColumns(b)
			if _, err := tx.ExecContext(ctx, `DELETE FROM acls WHERE principal = ? AND host = ? AND resource_type = ?
				AND resource_name = ? AND pattern_type = ? AND operation = ? AND permission = ?`,
				cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6]); err != nil {
				return err
			}
			deleted = append(deleted, b)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: delete ACLs: %w", err)
	}
	return deleted, nil
}

// ACLs lists every binding.
func (c *Catalog) ACLs(ctx context.Context) ([]acl.Binding, error) {
	bs, err := queryBindings(ctx, c.r)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list ACLs: %w", err)
	}
	return bs, nil
}

// SecurityVersion answers the version of keys and ACLs and the database clock.
func (c *Catalog) SecurityVersion(ctx context.Context) (int64, time.Time, error) {
	var v, now int64
	if err := c.r.QueryRowContext(ctx, `SELECT version, (`+nowSQL+`) FROM security_state WHERE id = 1`).Scan(&v, &now); err != nil {
		return 0, time.Time{}, fmt.Errorf("sqlite: security version: %w", err)
	}
	return v, fromMS(now), nil
}

// WatchSecurity calls fn after every change to keys or ACLs made through this Catalog,
// until ctx ends (nil) or the Catalog is closed (an error).
func (c *Catalog) WatchSecurity(ctx context.Context, fn func()) error {
	for {
		ch := c.security.wait()
		select {
		case <-ctx.Done():
			return nil
		case <-c.hub.closed:
			return errClosed
		case <-ch:
			fn()
		}
	}
}

// AuditLog lists audit records after an id.
func (c *Catalog) AuditLog(ctx context.Context, after int64, limit int) ([]catalog.AuditRecord, error) {
	if limit <= 0 || limit > catalog.MaxAuditPage {
		limit = catalog.MaxAuditPage
	}
	rows, err := c.r.QueryContext(ctx, `SELECT id, at, principal, action, resource_type, resource_name, details
		FROM audit_log WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: audit log: %w", err)
	}
	defer rows.Close()
	var out []catalog.AuditRecord
	for rows.Next() {
		var (
			a       catalog.AuditRecord
			at      int64
			details string
		)
		if err := rows.Scan(&a.ID, &at, &a.Principal, &a.Action, &a.ResourceType, &a.Resource, &details); err != nil {
			return nil, fmt.Errorf("sqlite: audit log: %w", err)
		}
		a.Time = fromMS(at)
		if err := json.Unmarshal([]byte(details), &a.Details); err != nil {
			return nil, fmt.Errorf("sqlite: audit log: record %d: %w", a.ID, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: audit log: %w", err)
	}
	return out, nil
}

// ProducerOwner answers whom a producer id belongs to.
func (c *Catalog) ProducerOwner(ctx context.Context, id int64) (catalog.ProducerOwner, error) {
	var tid, principal sql.NullString
	err := c.r.QueryRowContext(ctx, `SELECT transactional_id, principal FROM producers WHERE id = ?`, id).Scan(&tid, &principal)
	if errors.Is(err, sql.ErrNoRows) {
		return catalog.ProducerOwner{}, fmt.Errorf("sqlite: producer %d: %w", id, catalog.ErrUnknownProducer)
	}
	if err != nil {
		return catalog.ProducerOwner{}, fmt.Errorf("sqlite: producer %d: %w", id, err)
	}
	return catalog.ProducerOwner{TransactionalID: tid.String, Principal: principal.String, Unowned: !principal.Valid}, nil
}

// SecurityTx runs the engine's security scripts (SCRAM credentials, quotas) in
// securityTx.
func (e sqliteEngine) SecurityTx(ctx context.Context, fn func(q engine.RegistryQuerier) error) error {
	return e.c.securityTx(ctx, func(tx *sql.Tx, _ time.Time) error { return fn(sqlQuerier{tx}) })
}
