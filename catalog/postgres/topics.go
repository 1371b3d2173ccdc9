package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

const topicColumns = `id, uuid, name, partitions, configs, created_at`

func scanTopic(row pgx.Row) (catalog.Topic, error) {
	var t catalog.Topic
	if err := row.Scan(&t.ID, &t.UUID, &t.Name, &t.Partitions, &t.Configs, &t.CreatedAt); err != nil {
		return catalog.Topic{}, err
	}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	t.CreatedAt = t.CreatedAt.UTC()
	return t, nil
}

// configsJSON encodes configs as a JSON string: as text, it binds the same way in every
// query exec mode (a Go map has no parameter type of its own under exec or simple
// protocol).
func configsJSON(configs map[string]string) string {
	if configs == nil {
		return "{}"
	}
	b, _ := json.Marshal(configs) // a map[string]string always encodes
	return string(b)
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// CreateTopic creates a topic and its partition rows in one statement.
func (c *Catalog) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error) {
	if err := catalog.ValidateTopicName(name); err != nil {
		return catalog.Topic{}, err
	}
	if err := catalog.ValidatePartitions(partitions); err != nil {
		return catalog.Topic{}, err
	}
	cfg, err := catalog.ParseConfig(configs)
	if err != nil {
		return catalog.Topic{}, err
	}
	if err := catalog.CheckConfigLimits(configs, c.maxTimestampAfterMs); err != nil {
		return catalog.Topic{}, err
	}
	var t catalog.Topic
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		return engine.CreateOwnedTopic(ctx, txQuerier{tx}, name, func() (int64, error) {
			var err error
			t, err = scanTopic(tx.QueryRow(ctx, `
		WITH t AS (
			INSERT INTO topics (uuid, name, partitions, configs) VALUES ($5, $1, $2, $3::jsonb)
			RETURNING `+topicColumns+`
		), p AS (
			INSERT INTO partitions (topic_id, partition, retention_ms)
			SELECT t.id, g, $4::bigint FROM t, generate_series(0, $2 - 1) AS g
		)
		SELECT `+topicColumns+` FROM t`, name, partitions, configsJSON(configs), retentionArg(cfg), catalog.NewUUID()))
			return t.ID, err
		})
	})
	if isUniqueViolation(err) {
		return catalog.Topic{}, fmt.Errorf("postgres: create topic %q: %w", name, catalog.ErrTopicExists)
	}
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("postgres: create topic %q: %w", name, err)
	}
	c.analyzeAfterGrowth(ctx, partitions)
	return t, nil
}

// analyzeGrowth is the partition rows added at once past which the table's planner
// statistics are refreshed at once.
const analyzeGrowth = 1000

// analyzeAfterGrowth refreshes the partitions table's planner statistics after a
// topic added `added` partition rows, when they are many. The commit function's plans
// are made per connection from those statistics; made while the table held a few
// rows, they scan it whole, and until autovacuum analyzes it (within a minute) a
// flush commit of 64 partitions cost the database 20 ms of CPU with 5,000 partition
// rows instead of 2 ms (the bench's capacity phase). ANALYZE invalidates the cached
// plans. A failure is only logged: autovacuum will do it.
func (c *Catalog) analyzeAfterGrowth(ctx context.Context, added int32) {
	if added < analyzeGrowth {
		return
	}
	if _, err := c.pool.Exec(ctx, `ANALYZE partitions`); err != nil {
		c.log.Warn("analyze the partitions table after a topic grew (autovacuum will)", "partitions", added, "err", err)
	}
}

// notFoundByName answers for a name no topic can have (it could not be stored, e.g. a
// NUL byte): ErrTopicNotFound, without asking the database.
func notFoundByName(op, name string) error {
	if catalog.ValidateTopicName(name) != nil {
		return fmt.Errorf("postgres: %s %q: %w", op, name, catalog.ErrTopicNotFound)
	}
	return nil
}

// Topic returns the live topic called name.
func (c *Catalog) Topic(ctx context.Context, name string) (catalog.Topic, error) {
	if err := notFoundByName("topic", name); err != nil {
		return catalog.Topic{}, err
	}
	t, err := scanTopic(c.pool.QueryRow(ctx,
		`SELECT `+topicColumns+` FROM topics WHERE name = $1 AND deleted_at IS NULL`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.Topic{}, fmt.Errorf("postgres: topic %q: %w", name, catalog.ErrTopicNotFound)
	}
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("postgres: topic %q: %w", name, err)
	}
	return t, nil
}

// TopicByID returns the live topic with the given id.
func (c *Catalog) TopicByID(ctx context.Context, id int64) (catalog.Topic, error) {
	t, err := scanTopic(c.pool.QueryRow(ctx,
		`SELECT `+topicColumns+` FROM topics WHERE id = $1 AND deleted_at IS NULL`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.Topic{}, fmt.Errorf("postgres: topic id %d: %w", id, catalog.ErrTopicNotFound)
	}
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("postgres: topic id %d: %w", id, err)
	}
	return t, nil
}

// Topics lists the live topics by name.
func (c *Catalog) Topics(ctx context.Context) ([]catalog.Topic, error) {
	rows, err := c.pool.Query(ctx,
		`SELECT `+topicColumns+` FROM topics WHERE deleted_at IS NULL ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list topics: %w", err)
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (catalog.Topic, error) { return scanTopic(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: list topics: %w", err)
	}
	return ts, nil
}

// lockTopic locks a live topic's row, then its partition rows in order (the commit's
// lock order), so a commit either finishes before the change or sees it.
func lockTopic(ctx context.Context, tx pgx.Tx, name string) (catalog.Topic, error) {
	t, err := scanTopic(tx.QueryRow(ctx,
		`SELECT `+topicColumns+` FROM topics WHERE name = $1 AND deleted_at IS NULL FOR UPDATE`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.Topic{}, catalog.ErrTopicNotFound
	}
	if err != nil {
		return catalog.Topic{}, err
	}
	if _, err := tx.Exec(ctx,
		`SELECT 1 FROM partitions WHERE topic_id = $1 ORDER BY partition FOR UPDATE`, t.ID); err != nil {
		return catalog.Topic{}, err
	}
	return t, nil
}

// retentionArg is a topic's time retention as its partition rows keep it for the
// commit's compaction due time (engine.TimeRetentionMs): NULL for none.
func retentionArg(cfg catalog.Config) any {
	if ms := engine.TimeRetentionMs(cfg); ms >= 0 {
		return ms
	}
	return nil
}

// compactNow makes every partition of a topic due for the compactor now (its configs
// changed, or it was deleted), in a transaction that holds the partition rows.
func compactNow(ctx context.Context, tx pgx.Tx, topicID int64) error {
	_, err := tx.Exec(ctx, `UPDATE partitions SET compact_due = clock_timestamp()
		WHERE topic_id = $1 AND (compact_due IS NULL OR compact_due > clock_timestamp())`, topicID)
	return err
}

// DeleteTopic marks the topic deleted. Its rows stay for the compactor to reclaim; its
// name is free at once.
func (c *Catalog) DeleteTopic(ctx context.Context, name string) error {
	if err := notFoundByName("delete topic", name); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		t, err := lockTopic(ctx, tx, name)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE topics SET deleted_at = clock_timestamp() WHERE id = $1`, t.ID); err != nil {
			return err
		}
		return compactNow(ctx, tx, t.ID)
	})
	if err != nil {
		return fmt.Errorf("postgres: delete topic %q: %w", name, err)
	}
	return nil
}

// UpdateTopic grows the partition count and sets or removes configs.
func (c *Catalog) UpdateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error) {
	if err := notFoundByName("update topic", name); err != nil {
		return catalog.Topic{}, err
	}
	if partitions != 0 {
		if err := catalog.ValidatePartitions(partitions); err != nil {
			return catalog.Topic{}, err
		}
	}
	if err := catalog.CheckConfigLimits(configs, c.maxTimestampAfterMs); err != nil {
		return catalog.Topic{}, err
	}
	var out catalog.Topic
	var before int32
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		t, err := lockTopic(ctx, tx, name)
		if err != nil {
			return err
		}
		before = t.Partitions
		if partitions != 0 && partitions < t.Partitions {
			return catalog.PartitionsOnlyGrow(name, t.Partitions, partitions)
		}
		merged, cfg, err := catalog.UpdateConfigs(t.Configs, configs)
		if err != nil {
			return err
		}
		n := t.Partitions
		if partitions > n {
			n = partitions
			if _, err := tx.Exec(ctx, `
				INSERT INTO partitions (topic_id, partition, retention_ms)
				SELECT $1, g, $4::bigint FROM generate_series($2::int, $3::int - 1) AS g`, t.ID, t.Partitions, n, retentionArg(cfg)); err != nil {
				return err
			}
		}
		out, err = scanTopic(tx.QueryRow(ctx,
			`UPDATE topics SET partitions = $2, configs = $3::jsonb WHERE id = $1 RETURNING `+topicColumns,
			t.ID, n, configsJSON(merged)))
		if err != nil || len(configs) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE partitions SET retention_ms = $2 WHERE topic_id = $1 AND retention_ms IS DISTINCT FROM $2`,
			t.ID, retentionArg(cfg)); err != nil {
			return err
		}
		return compactNow(ctx, tx, t.ID)
	})
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("postgres: update topic %q: %w", name, err)
	}
	if partitions > 0 {
		c.analyzeAfterGrowth(ctx, partitions-before)
	}
	return out, nil
}

// Partitions lists a live topic's partitions in order.
func (c *Catalog) Partitions(ctx context.Context, topicID int64) ([]catalog.PartitionInfo, error) {
	rows, err := c.pool.Query(ctx, `
		SELECT p.topic_id, p.partition, p.log_start_offset, p.high_watermark, p.bytes,
			coalesce(`+openTxnSQL+`, p.high_watermark)
		FROM topics t JOIN partitions p ON p.topic_id = t.id
		WHERE t.id = $1 AND t.deleted_at IS NULL
		ORDER BY p.partition`, topicID)
	if err != nil {
		return nil, fmt.Errorf("postgres: partitions of topic id %d: %w", topicID, err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (catalog.PartitionInfo, error) {
		var p catalog.PartitionInfo
		err := r.Scan(&p.TopicID, &p.Partition, &p.LogStartOffset, &p.HighWatermark, &p.Bytes, &p.LastStableOffset)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: partitions of topic id %d: %w", topicID, err)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("postgres: partitions of topic id %d: %w", topicID, catalog.ErrTopicNotFound)
	}
	return ps, nil
}
