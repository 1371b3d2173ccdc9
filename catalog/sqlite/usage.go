package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

var _ catalog.Usage = (*Catalog)(nil)

const addUsageSQL = `INSERT INTO topic_usage (topic_id, principal, minute, bytes_in, bytes_out, records_in, records_out, put_requests, get_requests, commits)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (topic_id, minute, principal) DO UPDATE SET
		bytes_in = bytes_in + excluded.bytes_in, bytes_out = bytes_out + excluded.bytes_out,
		records_in = records_in + excluded.records_in, records_out = records_out + excluded.records_out,
		put_requests = put_requests + excluded.put_requests, get_requests = get_requests + excluded.get_requests,
		commits = commits + excluded.commits`

// AddUsage adds deltas to their buckets in one transaction.
func (c *Catalog) AddUsage(ctx context.Context, deltas []catalog.UsageDelta) error {
	deltas = catalog.MergeUsage(deltas)
	if len(deltas) == 0 {
		return nil
	}
	err := c.writeTx(ctx, func(tx *sql.Tx, _ time.Time) error {
		st, err := tx.PrepareContext(ctx, addUsageSQL)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, d := range deltas {
			if _, err := st.ExecContext(ctx, d.TopicID, d.Principal, d.Minute.Unix(), d.BytesIn, d.BytesOut, d.RecordsIn, d.RecordsOut,
				d.PutRequests, d.GetRequests, d.Commits); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: add usage (%d buckets): %w", len(deltas), err)
	}
	return nil
}

// TopicUsage sums the topic's buckets from since's onwards, per principal.
func (c *Catalog) TopicUsage(ctx context.Context, topicID int64, since time.Time) ([]catalog.PrincipalUsage, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT principal, sum(bytes_in), sum(bytes_out), sum(records_in), sum(records_out),
			sum(put_requests), sum(get_requests), sum(commits)
		FROM topic_usage WHERE topic_id = ? AND minute >= ? GROUP BY principal ORDER BY principal`, topicID, catalog.UsageMinute(since).Unix())
	if err != nil {
		return nil, fmt.Errorf("sqlite: usage of topic %d: %w", topicID, err)
	}
	defer rows.Close()
	var out []catalog.PrincipalUsage
	for rows.Next() {
		var u catalog.PrincipalUsage
		if err := rows.Scan(&u.Principal, &u.BytesIn, &u.BytesOut, &u.RecordsIn, &u.RecordsOut, &u.PutRequests, &u.GetRequests, &u.Commits); err != nil {
			return nil, fmt.Errorf("sqlite: usage of topic %d: %w", topicID, err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: usage of topic %d: %w", topicID, err)
	}
	return out, nil
}

// PruneUsage drops the buckets that start before before.
func (c *Catalog) PruneUsage(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := c.writeTx(ctx, func(tx *sql.Tx, _ time.Time) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM topic_usage WHERE minute < ?`, before.Unix())
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: prune usage before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}
