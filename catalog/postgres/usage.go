package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

var _ catalog.Usage = (*Catalog)(nil)

// addUsageSQL adds every bucket's counts in one statement; the deltas come merged and
// sorted (catalog.MergeUsage), so no row is touched twice and rows lock in one order.
const addUsageSQL = `INSERT INTO topic_usage AS u (topic_id, principal, minute, bytes_in, bytes_out, records_in, records_out, put_requests, get_requests, commits)
	SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::float8[], $9::float8[], $10::float8[])
	ON CONFLICT (topic_id, minute, principal) DO UPDATE SET
		bytes_in = u.bytes_in + EXCLUDED.bytes_in, bytes_out = u.bytes_out + EXCLUDED.bytes_out,
		records_in = u.records_in + EXCLUDED.records_in, records_out = u.records_out + EXCLUDED.records_out,
		put_requests = u.put_requests + EXCLUDED.put_requests, get_requests = u.get_requests + EXCLUDED.get_requests,
		commits = u.commits + EXCLUDED.commits`

// AddUsage adds deltas to their buckets in one transaction.
func (c *Catalog) AddUsage(ctx context.Context, deltas []catalog.UsageDelta) error {
	deltas = catalog.MergeUsage(deltas)
	if len(deltas) == 0 {
		return nil
	}
	n := len(deltas)
	topics, principals, minutes := make([]int64, n), make([]string, n), make([]int64, n)
	bin, bout, rin, rout := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	puts, gets, commits := make([]float64, n), make([]float64, n), make([]float64, n)
	for i, d := range deltas {
		topics[i], principals[i], minutes[i] = d.TopicID, d.Principal, d.Minute.Unix()
		bin[i], bout[i], rin[i], rout[i] = d.BytesIn, d.BytesOut, d.RecordsIn, d.RecordsOut
		puts[i], gets[i], commits[i] = d.PutRequests, d.GetRequests, d.Commits
	}
	if _, err := c.pool.Exec(ctx, addUsageSQL, topics, principals, minutes, bin, bout, rin, rout, puts, gets, commits); err != nil {
		return fmt.Errorf("postgres: add usage (%d buckets): %w", n, err)
	}
	return nil
}

const topicUsageSQL = `SELECT principal, sum(bytes_in)::bigint, sum(bytes_out)::bigint, sum(records_in)::bigint, sum(records_out)::bigint,
		sum(put_requests), sum(get_requests), sum(commits)
	FROM topic_usage WHERE topic_id = $1 AND minute >= $2 GROUP BY principal ORDER BY principal`

// TopicUsage sums the topic's buckets from since's onwards, per principal.
func (c *Catalog) TopicUsage(ctx context.Context, topicID int64, since time.Time) ([]catalog.PrincipalUsage, error) {
	rows, err := c.pool.Query(ctx, topicUsageSQL, topicID, catalog.UsageMinute(since).Unix())
	if err != nil {
		return nil, fmt.Errorf("postgres: usage of topic %d: %w", topicID, err)
	}
	defer rows.Close()
	var out []catalog.PrincipalUsage
	for rows.Next() {
		var u catalog.PrincipalUsage
		if err := rows.Scan(&u.Principal, &u.BytesIn, &u.BytesOut, &u.RecordsIn, &u.RecordsOut, &u.PutRequests, &u.GetRequests, &u.Commits); err != nil {
			return nil, fmt.Errorf("postgres: usage of topic %d: %w", topicID, err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: usage of topic %d: %w", topicID, err)
	}
	return out, nil
}

// PruneUsage drops the buckets that start before before.
func (c *Catalog) PruneUsage(ctx context.Context, before time.Time) (int64, error) {
	tag, err := c.pool.Exec(ctx, `DELETE FROM topic_usage WHERE minute < $1`, before.Unix())
	if err != nil {
		return 0, fmt.Errorf("postgres: prune usage before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return tag.RowsAffected(), nil
}
