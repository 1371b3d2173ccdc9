package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

var _ catalog.Cluster = (*Catalog)(nil)

// nodesLockID is the transaction-scoped advisory lock that serialises node
// registrations, so nodes starting at once never choose the same id ("strata nodes").
const nodesLockID int64 = 0x737472617461_6e

// NodeTx runs a registration in one transaction (engine.NodeBackend).
func (e pgEngine) NodeTx(ctx context.Context, fn func(engine.NodeStmts) error) error {
	return pgx.BeginFunc(ctx, e.c.pool, func(tx pgx.Tx) error { return fn(pgNodes{tx}) })
}

// pgNodes is a registration's statements (engine.NodeStmts).
type pgNodes struct{ tx pgx.Tx }

// LockNodes takes the transaction-scoped advisory lock nodesLockID.
func (q pgNodes) LockNodes(ctx context.Context) (time.Time, error) {
	if _, err := q.tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, nodesLockID); err != nil {
		return time.Time{}, err
	}
	var now time.Time
	err := q.tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now)
	return now, err
}

func (q pgNodes) Nodes(ctx context.Context) ([]engine.NodeRow, error) {
	rows, err := q.tx.Query(ctx, `SELECT id, addr, lease_until FROM kafka_nodes`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (engine.NodeRow, error) {
		var n engine.NodeRow
		err := r.Scan(&n.ID, &n.Addr, &n.LeaseUntil)
		return n, err
	})
}

// PutNode leases from clock_timestamp() (now is the lock's reading, a moment earlier).
func (q pgNodes) PutNode(ctx context.Context, id int32, addr string, token int64, _ time.Time, ttl time.Duration) (time.Time, error) {
	var until time.Time
	err := q.tx.QueryRow(ctx, `
		INSERT INTO kafka_nodes (id, addr, token, lease_until)
		VALUES ($1, $2, $3, clock_timestamp() + $4 * interval '1 microsecond')
		ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, token = excluded.token, lease_until = excluded.lease_until
		RETURNING lease_until`, id, addr, token, ttl.Microseconds()).Scan(&until)
	return until, err
}

// RenewNode extends a lease that is still this registration's.
func (c *Catalog) RenewNode(ctx context.Context, l catalog.NodeLease, ttl time.Duration) (catalog.NodeLease, error) {
	if err := engine.ValidateNodeLease(l.Addr, ttl); err != nil {
		return catalog.NodeLease{}, fmt.Errorf("postgres: renew node %d: %w", l.ID, err)
	}
	err := c.pool.QueryRow(ctx, `
		UPDATE kafka_nodes SET lease_until = clock_timestamp() + $3 * interval '1 microsecond'
		WHERE id = $1 AND token = $2 RETURNING lease_until`, l.ID, l.Token, ttl.Microseconds()).Scan(&l.LeaseUntil)
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.NodeLease{}, fmt.Errorf("postgres: renew node %d: %w", l.ID, catalog.ErrNodeLeaseLost)
	}
	if err != nil {
		return catalog.NodeLease{}, fmt.Errorf("postgres: renew node %d: %w", l.ID, err)
	}
	l.LeaseUntil = l.LeaseUntil.UTC()
	return l, nil
}

// DeregisterNode ends the lease now, if it is still this registration's.
func (c *Catalog) DeregisterNode(ctx context.Context, l catalog.NodeLease) error {
	if _, err := c.pool.Exec(ctx, `
		UPDATE kafka_nodes SET lease_until = least(lease_until, clock_timestamp())
		WHERE id = $1 AND token = $2`, l.ID, l.Token); err != nil {
		return fmt.Errorf("postgres: deregister node %d: %w", l.ID, err)
	}
	return nil
}

// LiveNodes lists the nodes whose lease has not ended, by id.
func (c *Catalog) LiveNodes(ctx context.Context) ([]catalog.Node, error) {
	rows, err := c.pool.Query(ctx, `
		SELECT id, addr, lease_until FROM kafka_nodes WHERE lease_until > clock_timestamp() ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("postgres: live nodes: %w", err)
	}
	nodes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (catalog.Node, error) {
		var n catalog.Node
		err := r.Scan(&n.ID, &n.Addr, &n.LeaseUntil)
		n.LeaseUntil = n.LeaseUntil.UTC()
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: live nodes: %w", err)
	}
	return nodes, nil
}

// ClusterID returns the cluster id, storing a new one if there is none yet. Two
// statements, not one: after ON CONFLICT waits for a concurrent first insert, only a
// new statement's snapshot sees the row that won.
func (c *Catalog) ClusterID(ctx context.Context) (string, error) {
	var id string
	err := c.pool.QueryRow(ctx, `SELECT cluster_id FROM kafka_cluster`).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("postgres: cluster id: %w", err)
	}
	if _, err := c.pool.Exec(ctx, `INSERT INTO kafka_cluster (cluster_id) VALUES ($1) ON CONFLICT DO NOTHING`, engine.NewClusterID()); err != nil {
		return "", fmt.Errorf("postgres: cluster id: %w", err)
	}
	if err := c.pool.QueryRow(ctx, `SELECT cluster_id FROM kafka_cluster`).Scan(&id); err != nil {
		return "", fmt.Errorf("postgres: cluster id: %w", err)
	}
	return id, nil
}

// TopicByUUID returns the live topic whose UUID is id.
func (c *Catalog) TopicByUUID(ctx context.Context, id catalog.UUID) (catalog.Topic, error) {
	t, err := scanTopic(c.pool.QueryRow(ctx,
		`SELECT `+topicColumns+` FROM topics WHERE uuid = $1 AND deleted_at IS NULL`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.Topic{}, fmt.Errorf("postgres: topic uuid %s: %w", id, catalog.ErrTopicNotFound)
	}
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("postgres: topic uuid %s: %w", id, err)
	}
	return t, nil
}
