package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

var _ catalog.Cluster = (*Catalog)(nil)

// NodeTx runs a registration in one immediate transaction, which excludes every other
// registration (engine.NodeBackend).
func (e sqliteEngine) NodeTx(ctx context.Context, fn func(engine.NodeStmts) error) error {
	tx, err := e.c.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(sqliteNodes{tx}); err != nil {
		return err
	}
	return tx.Commit()
}

// sqliteNodes is a registration's statements (engine.NodeStmts).
type sqliteNodes struct{ tx *sql.Tx }

// LockNodes reads the clock: the immediate transaction already holds the file's lock.
func (q sqliteNodes) LockNodes(ctx context.Context) (time.Time, error) {
	return scanNow(q.tx.QueryRowContext(ctx, nowSQL))
}

func (q sqliteNodes) Nodes(ctx context.Context) ([]engine.NodeRow, error) {
	rows, err := q.tx.QueryContext(ctx, `SELECT id, addr, lease_until FROM kafka_nodes`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var nodes []engine.NodeRow
	for rows.Next() {
		var (
			n     engine.NodeRow
			until int64
		)
		if err := rows.Scan(&n.ID, &n.Addr, &until); err != nil {
			return nil, err
		}
		n.LeaseUntil = time.UnixMilli(until).UTC()
		nodes = append(nodes, n)
	}
	return nodes, rows.Err()
}

func (q sqliteNodes) PutNode(ctx context.Context, id int32, addr string, token int64, now time.Time, ttl time.Duration) (time.Time, error) {
	until := now.Add(ttl).UnixMilli()
	if _, err := q.tx.ExecContext(ctx, `
		INSERT INTO kafka_nodes (id, addr, token, lease_until) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, token = excluded.token, lease_until = excluded.lease_until`,
		id, addr, token, until); err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(until).UTC(), nil // as stored
}

// RenewNode extends a lease that is still this registration's.
func (c *Catalog) RenewNode(ctx context.Context, l catalog.NodeLease, ttl time.Duration) (catalog.NodeLease, error) {
	if err := engine.ValidateNodeLease(l.Addr, ttl); err != nil {
		return catalog.NodeLease{}, fmt.Errorf("sqlite: renew node %d: %w", l.ID, err)
	}
	var until int64
	err := c.w.QueryRowContext(ctx, `
		UPDATE kafka_nodes SET lease_until = (`+nowSQL+`) + ? WHERE id = ? AND token = ? RETURNING lease_until`,
		ttl.Milliseconds(), l.ID, l.Token).Scan(&until)
	if errors.Is(err, sql.ErrNoRows) {
		return catalog.NodeLease{}, fmt.Errorf("sqlite: renew node %d: %w", l.ID, catalog.ErrNodeLeaseLost)
	}
	if err != nil {
		return catalog.NodeLease{}, fmt.Errorf("sqlite: renew node %d: %w", l.ID, err)
	}
	l.LeaseUntil = time.UnixMilli(until).UTC()
	return l, nil
}

// DeregisterNode ends the lease now, if it is still this registration's.
func (c *Catalog) DeregisterNode(ctx context.Context, l catalog.NodeLease) error {
	if _, err := c.w.ExecContext(ctx, `
		UPDATE kafka_nodes SET lease_until = min(lease_until, (`+nowSQL+`)) WHERE id = ? AND token = ?`,
		l.ID, l.Token); err != nil {
		return fmt.Errorf("sqlite: deregister node %d: %w", l.ID, err)
	}
	return nil
}

// LiveNodes lists the nodes whose lease has not ended, by id.
func (c *Catalog) LiveNodes(ctx context.Context) ([]catalog.Node, error) {
	rows, err := c.r.QueryContext(ctx, `
		SELECT id, addr, lease_until FROM kafka_nodes WHERE lease_until > (`+nowSQL+`) ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: live nodes: %w", err)
	}
	defer rows.Close()
	var nodes []catalog.Node
	for rows.Next() {
		var (
			n     catalog.Node
			until int64
		)
		if err := rows.Scan(&n.ID, &n.Addr, &until); err != nil {
			return nil, fmt.Errorf("sqlite: live nodes: %w", err)
		}
		n.LeaseUntil = time.UnixMilli(until).UTC()
		nodes = append(nodes, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: live nodes: %w", err)
	}
	return nodes, nil
}

// ClusterID returns the cluster id, storing a new one if there is none yet.
func (c *Catalog) ClusterID(ctx context.Context) (string, error) {
	var id string
	err := c.r.QueryRowContext(ctx, `SELECT cluster_id FROM kafka_cluster`).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("sqlite: cluster id: %w", err)
	}
	// The insert and the read back share the writer's immediate transaction, so the id
	// read is the one stored, whoever stored it.
	err = c.w.QueryRowContext(ctx, `
		INSERT INTO kafka_cluster (singleton, cluster_id) VALUES (1, ?)
		ON CONFLICT (singleton) DO UPDATE SET cluster_id = cluster_id RETURNING cluster_id`,
		engine.NewClusterID()).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("sqlite: cluster id: %w", err)
	}
	return id, nil
}

// TopicByUUID returns the live topic whose UUID is id.
func (c *Catalog) TopicByUUID(ctx context.Context, id catalog.UUID) (catalog.Topic, error) {
	t, err := scanTopic(c.r.QueryRowContext(ctx,
		`SELECT `+topicColumns+` FROM topics WHERE uuid = ? AND deleted_at IS NULL`, id[:]))
	if errors.Is(err, sql.ErrNoRows) {
		return catalog.Topic{}, fmt.Errorf("sqlite: topic uuid %s: %w", id, catalog.ErrTopicNotFound)
	}
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: topic uuid %s: %w", id, err)
	}
	return t, nil
}
