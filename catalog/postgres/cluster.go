package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
)

var _ catalog.Cluster = (*Catalog)(nil)

// nodesLockID is the transaction-scoped advisory lock that serialises node
// registrations, so nodes starting at once never choose the same id ("strata nodes").
const nodesLockID int64 = 0x737472617461_6e

// RegisterNode takes an id for the node at addr (catalog.ChooseNodeID) under the
// registration lock, with a new token and a lease of ttl on the database clock.
func (c *Catalog) RegisterNode(ctx context.Context, addr string, ttl time.Duration) (catalog.NodeLease, error) {
	if err := catalog.ValidateNodeLease(addr, ttl); err != nil {
		return catalog.NodeLease{}, fmt.Errorf("postgres: register node %s: %w", addr, err)
	}
	var l catalog.NodeLease
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, nodesLockID); err != nil {
			return err
		}
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id, addr, lease_until FROM kafka_nodes`)
		if err != nil {
			return err
		}
		nodes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (catalog.NodeRow, error) {
			var n catalog.NodeRow
			err := r.Scan(&n.ID, &n.Addr, &n.LeaseUntil)
			return n, err
		})
		if err != nil {
			return err
		}
		l = catalog.NodeLease{Node: catalog.Node{ID: catalog.ChooseNodeID(nodes, addr, now), Addr: addr}, Token: catalog.NewNodeToken()}
		return tx.QueryRow(ctx, `
			INSERT INTO kafka_nodes (id, addr, token, lease_until)
			VALUES ($1, $2, $3, clock_timestamp() + $4 * interval '1 microsecond')
			ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, token = excluded.token, lease_until = excluded.lease_until
			RETURNING lease_until`, l.ID, addr, l.Token, ttl.Microseconds()).Scan(&l.LeaseUntil)
	})
	if err != nil {
		return catalog.NodeLease{}, fmt.Errorf("postgres: register node %s: %w", addr, err)
	}
	l.LeaseUntil = l.LeaseUntil.UTC()
	return l, nil
}

// RenewNode extends a lease that is still this registration's.
func (c *Catalog) RenewNode(ctx context.Context, l catalog.NodeLease, ttl time.Duration) (catalog.NodeLease, error) {
	if err := catalog.ValidateNodeLease(l.Addr, ttl); err != nil {
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
	if _, err := c.pool.Exec(ctx, `INSERT INTO kafka_cluster (cluster_id) VALUES ($1) ON CONFLICT DO NOTHING`, catalog.NewClusterID()); err != nil {
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
