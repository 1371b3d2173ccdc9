package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// ReportTaskMetrics records a task instance's metrics.
func (c *Catalog) ReportTaskMetrics(ctx context.Context, f catalog.TaskFence, metrics string) error {
	if err := catalog.ValidateTaskMetrics(metrics); err != nil {
		return err
	}
	err := c.writeTx(ctx, func(tx *sql.Tx, _ time.Time) error {
		gen, found, err := taskGeneration(ctx, tx, f.ID())
		if err != nil {
			return err
		}
		if err := engine.CheckFence(f, gen, found); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE connector_tasks SET metrics = ? WHERE connector = ? AND task = ?`, metrics, f.Connector, f.Task)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: report metrics of connector %s task %d: %w", f.Connector, f.Task, err)
	}
	return nil
}
