package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// metricsSQL stores metrics only at the instance's generation and answers the task's
// generation either way (none: no such task), as reportSQL does.
const metricsSQL = `WITH t AS (SELECT generation FROM connector_tasks WHERE connector = $1 AND task = $2),
	u AS (UPDATE connector_tasks SET metrics = $4 WHERE connector = $1 AND task = $2 AND generation = $3 RETURNING 1)
	SELECT (SELECT generation FROM t), (SELECT count(*) FROM u)`

// ReportTaskMetrics records a task instance's metrics.
func (c *Catalog) ReportTaskMetrics(ctx context.Context, f catalog.TaskFence, metrics string) error {
	if err := catalog.ValidateTaskMetrics(metrics); err != nil {
		return err
	}
	var (
		gen     *int64
		updated int64
	)
	err := c.pool.QueryRow(ctx, metricsSQL, f.Connector, f.Task, f.Generation, metrics).Scan(&gen, &updated)
	if err == nil && updated == 0 {
		var current int64
		if gen != nil {
			current = *gen
		}
		err = engine.CheckFence(f, current, gen != nil)
		if err == nil {
			err = errors.New("the metrics were not recorded")
		}
	}
	if err != nil {
		return fmt.Errorf("postgres: report metrics of connector %s task %d: %w", f.Connector, f.Task, err)
	}
	return nil
}
