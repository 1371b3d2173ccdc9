package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

const topicColumns = `id, uuid, name, partitions, configs, created_at`

func scanTopic(row interface{ Scan(...any) error }) (catalog.Topic, error) {
	var (
		t       catalog.Topic
		configs string
		created int64
		uuid    []byte
	)
	if err := row.Scan(&t.ID, &uuid, &t.Name, &t.Partitions, &configs, &created); err != nil {
		return catalog.Topic{}, err
	}
	copy(t.UUID[:], uuid)
	t.Configs = map[string]string{}
	if err := json.Unmarshal([]byte(configs), &t.Configs); err != nil {
		return catalog.Topic{}, fmt.Errorf("topic %d: configs: %w", t.ID, err)
	}
	t.CreatedAt = time.UnixMilli(created).UTC()
	return t, nil
}

func encodeConfigs(m map[string]string) (string, error) {
	if m == nil {
		m = map[string]string{}
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// insertPartitions adds partition rows [from, to) of a topic in one statement.
const insertPartitions = `INSERT INTO partitions (topic_id, partition)
	WITH RECURSIVE n(p) AS (SELECT ?2 UNION ALL SELECT p + 1 FROM n WHERE p + 1 < ?3)
	SELECT ?1, p FROM n WHERE p < ?3`

// CreateTopic creates a topic with every partition at offset 0.
func (c *Catalog) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error) {
	if err := catalog.ValidateTopicName(name); err != nil {
		return catalog.Topic{}, err
	}
	if err := catalog.ValidatePartitions(partitions); err != nil {
		return catalog.Topic{}, err
	}
	explicit := map[string]string{}
	for k, v := range configs {
		explicit[k] = v
	}
	if _, err := catalog.ParseConfig(explicit); err != nil {
		return catalog.Topic{}, err
	}
	if err := catalog.CheckConfigLimits(explicit, c.opts.MaxTimestampAfterMs); err != nil {
		return catalog.Topic{}, err
	}
	cfg, err := encodeConfigs(explicit)
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: create topic %s: %w", name, err)
	}

	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: create topic %s: %w", name, err)
	}
	defer tx.Rollback()
	if err := writeAudit(ctx, tx); err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: create topic %s: %w", name, err)
	}
	var t catalog.Topic
	err = engine.CreateOwnedTopic(ctx, sqlQuerier{tx}, name, func() (int64, error) {
		// The immediate transaction excludes every other writer, so checking first is
		// not a race.
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM topics WHERE name = ? AND deleted_at IS NULL`, name).Scan(&n); err != nil {
			return 0, err
		}
		if n > 0 {
			return 0, catalog.ErrTopicExists
		}
		uuid := catalog.NewUUID()
		var err error
		t, err = scanTopic(tx.QueryRowContext(ctx, `INSERT INTO topics (uuid, name, partitions, configs, created_at)
			VALUES (?, ?, ?, ?, (`+nowSQL+`)) RETURNING `+topicColumns, uuid[:], name, partitions, cfg))
		if err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, insertPartitions, t.ID, 0, partitions); err != nil {
			return 0, fmt.Errorf("partitions: %w", err)
		}
		return t.ID, nil
	})
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: create topic %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: create topic %s: commit: %w", name, err)
	}
	return t, nil
}

// Topic returns the live topic called name.
func (c *Catalog) Topic(ctx context.Context, name string) (catalog.Topic, error) {
	if catalog.ValidateTopicName(name) != nil { // cannot exist; spare the query
		return catalog.Topic{}, fmt.Errorf("sqlite: topic %q: %w", name, catalog.ErrTopicNotFound)
	}
	t, err := scanTopic(c.r.QueryRowContext(ctx, `SELECT `+topicColumns+` FROM topics WHERE name = ? AND deleted_at IS NULL`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return catalog.Topic{}, fmt.Errorf("sqlite: topic %q: %w", name, catalog.ErrTopicNotFound)
	}
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: topic %q: %w", name, err)
	}
	return t, nil
}

// TopicByID returns the live topic with id.
func (c *Catalog) TopicByID(ctx context.Context, id int64) (catalog.Topic, error) {
	t, err := scanTopic(c.r.QueryRowContext(ctx, `SELECT `+topicColumns+` FROM topics WHERE id = ? AND deleted_at IS NULL`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return catalog.Topic{}, fmt.Errorf("sqlite: topic id %d: %w", id, catalog.ErrTopicNotFound)
	}
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: topic id %d: %w", id, err)
	}
	return t, nil
}

// Topics lists the live topics ordered by name.
func (c *Catalog) Topics(ctx context.Context) ([]catalog.Topic, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT `+topicColumns+` FROM topics WHERE deleted_at IS NULL ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list topics: %w", err)
	}
	defer rows.Close()
	var ts []catalog.Topic
	for rows.Next() {
		t, err := scanTopic(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list topics: %w", err)
		}
		ts = append(ts, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list topics: %w", err)
	}
	return ts, nil
}

// DeleteTopic marks the live topic called name deleted. Its rows stay for the compactor
// to reclaim; nothing can reach them any more, since every lookup skips deleted topics
// and a new topic of the same name gets a new id.
func (c *Catalog) DeleteTopic(ctx context.Context, name string) error {
	if catalog.ValidateTopicName(name) != nil {
		return fmt.Errorf("sqlite: delete topic %q: %w", name, catalog.ErrTopicNotFound)
	}
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		var id int64
		err := tx.QueryRowContext(ctx, `UPDATE topics SET deleted_at = ? WHERE name = ? AND deleted_at IS NULL RETURNING id`,
			ms(now), name).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return catalog.ErrTopicNotFound
		}
		if err != nil {
			return err
		}
		return compactNow(ctx, tx, id)
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete topic %q: %w", name, err)
	}
	return nil
}

// UpdateTopic grows the partition count and updates configs (see catalog.Catalog).
func (c *Catalog) UpdateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error) {
	if catalog.ValidateTopicName(name) != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: update topic %q: %w", name, catalog.ErrTopicNotFound)
	}
	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: update topic %q: %w", name, err)
	}
	defer tx.Rollback()
	if err := writeAudit(ctx, tx); err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: update topic %q: %w", name, err)
	}
	t, err := scanTopic(tx.QueryRowContext(ctx, `SELECT `+topicColumns+` FROM topics WHERE name = ? AND deleted_at IS NULL`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return catalog.Topic{}, fmt.Errorf("sqlite: update topic %q: %w", name, catalog.ErrTopicNotFound)
	}
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: update topic %q: %w", name, err)
	}
	grow := int32(0)
	if partitions != 0 {
		if partitions < t.Partitions {
			return catalog.Topic{}, catalog.PartitionsOnlyGrow(name, t.Partitions, partitions)
		}
		if err := catalog.ValidatePartitions(partitions); err != nil {
			return catalog.Topic{}, err
		}
		grow = partitions
	}
	merged, _, err := catalog.UpdateConfigs(t.Configs, configs)
	if err != nil {
		return catalog.Topic{}, err
	}
	if err := catalog.CheckConfigLimits(configs, c.opts.MaxTimestampAfterMs); err != nil {
		return catalog.Topic{}, err
	}
	if len(configs) > 0 {
		if err := compactNow(ctx, tx, t.ID); err != nil {
			return catalog.Topic{}, fmt.Errorf("sqlite: update topic %q: %w", name, err)
		}
	}
	cfg, err := encodeConfigs(merged)
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: update topic %q: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE topics SET configs = ? WHERE id = ?`, cfg, t.ID); err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: update topic %q: %w", name, err)
	}
	t.Configs = merged
	if grow > t.Partitions {
		if _, err := tx.ExecContext(ctx, `UPDATE topics SET partitions = ? WHERE id = ?`, grow, t.ID); err != nil {
			return catalog.Topic{}, fmt.Errorf("sqlite: update topic %q: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, insertPartitions, t.ID, t.Partitions, grow); err != nil {
			return catalog.Topic{}, fmt.Errorf("sqlite: update topic %q: partitions: %w", name, err)
		}
		t.Partitions = grow
	}
	if err := tx.Commit(); err != nil {
		return catalog.Topic{}, fmt.Errorf("sqlite: update topic %q: commit: %w", name, err)
	}
	return t, nil
}
