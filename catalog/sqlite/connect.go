package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// Connectors. Every write runs in one immediate transaction on the writer connection —
// this backend's lock for connectors, tasks, workers and offsets alike — and the rules
// are catalog's (connect.go, connectcommit.go): this file loads and stores rows.

var _ catalog.Connect = (*Catalog)(nil)

const (
	selectConnector = `SELECT name, type, config, principal, target_state, worker, topics FROM connectors`
	selectTasks     = `SELECT connector, task, config, generation, coalesce(owner, ''), coalesce(lease_until, 0), state, trace, worker, metrics
		FROM connector_tasks`
	nextGeneration = `UPDATE connect_generations SET last = last + 1 WHERE id = 1 RETURNING last`
)

func nextGen(ctx context.Context, tx *sql.Tx) (int64, error) {
	var g int64
	err := tx.QueryRowContext(ctx, nextGeneration).Scan(&g)
	return g, err
}

// loadConnectors reads connectors (one by name, or all when name is "") with their
// tasks, in name order.
func loadConnectors(ctx context.Context, q rowQueryer, name string) ([]catalog.Connector, error) {
	where, args := " ORDER BY name", []any{}
	if name != "" {
		where, args = " WHERE name = ?", []any{name}
	}
	rows, err := q.QueryContext(ctx, selectConnector+where, args...)
	if err != nil {
		return nil, err
	}
	var out []catalog.Connector
	at := map[string]int{}
	for rows.Next() {
		var c catalog.Connector
		var cfg, topics string
		if err := rows.Scan(&c.Name, &c.Type, &cfg, &c.Principal, &c.TargetState, &c.Worker, &topics); err != nil {
			rows.Close()
			return nil, err
		}
		if c.Config, err = catalog.DecodeConfig(cfg); err != nil {
			rows.Close()
			return nil, err
		}
		if err := json.Unmarshal([]byte(topics), &c.Topics); err != nil {
			rows.Close()
			return nil, fmt.Errorf("connector %s: topics: %w", c.Name, err)
		}
		at[c.Name] = len(out)
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	where = " ORDER BY connector, task"
	if name != "" {
		where = " WHERE connector = ? ORDER BY task"
	}
	if rows, err = q.QueryContext(ctx, selectTasks+where, args...); err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			conn, cfg string
			t         catalog.ConnectTask
			lease     int64
		)
		if err := rows.Scan(&conn, &t.Task, &cfg, &t.Generation, &t.Owner, &lease, &t.State, &t.Trace, &t.Worker, &t.Metrics); err != nil {
			return nil, err
		}
		if t.Config, err = catalog.DecodeConfig(cfg); err != nil {
			return nil, err
		}
		t.LeaseUntil = fromMS(lease)
		if i, ok := at[conn]; ok {
			out[i].Tasks = append(out[i].Tasks, t)
		}
	}
	return out, rows.Err()
}

func loadConnector(ctx context.Context, q rowQueryer, name string) (catalog.Connector, error) {
	cs, err := loadConnectors(ctx, q, name)
	if err != nil {
		return catalog.Connector{}, err
	}
	if len(cs) == 0 {
		return catalog.Connector{}, fmt.Errorf("%w: %s", catalog.ErrConnectorNotFound, name)
	}
	return cs[0], nil
}

// PutConnector creates or replaces a connector (see catalog.Connect).
func (c *Catalog) PutConnector(ctx context.Context, spec catalog.ConnectorSpec, upsert bool) (catalog.Connector, bool, error) {
	if err := catalog.ValidateConnectorSpec(spec); err != nil {
		return catalog.Connector{}, false, err
	}
	var (
		out     catalog.Connector
		created bool
	)
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		if err := engine.CheckOwnerCap(ctx, sqlQuerier{tx}, engine.OwnedConnector, spec.Name); err != nil {
			return err
		}
		old, err := loadConnector(ctx, tx, spec.Name)
		switch {
		case errors.Is(err, catalog.ErrConnectorNotFound):
			created = true
			state := spec.TargetState
			if state == "" {
				state = catalog.StateRunning
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO connectors (name, type, config, principal, target_state, worker, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, spec.Name, spec.Type, catalog.EncodeConfig(spec.Config), spec.Principal, state,
				spec.Worker, now.UnixMilli(), now.UnixMilli()); err != nil {
				return err
			}
		case err != nil:
			return err
		case !upsert:
			return fmt.Errorf("%w: %s", catalog.ErrConnectorExists, spec.Name)
		case old.Type != spec.Type:
			return fmt.Errorf("%w: connector %s is a %s connector; a %s connector needs another name", catalog.ErrInvalidConnector, spec.Name, old.Type, spec.Type)
		default:
			if _, err := tx.ExecContext(ctx, `UPDATE connectors SET config = ?, worker = ?, principal = ?, updated_at = ? WHERE name = ?`,
				catalog.EncodeConfig(spec.Config), spec.Worker, spec.Principal, now.UnixMilli(), spec.Name); err != nil {
				return err
			}
		}
		write, remove := catalog.PlanTaskConfigs(old.Tasks, spec.Tasks, !created && old.Principal != spec.Principal)
		for _, id := range remove {
			if _, err := tx.ExecContext(ctx, `DELETE FROM connector_tasks WHERE connector = ? AND task = ?`, spec.Name, id); err != nil {
				return err
			}
		}
		for _, id := range write {
			gen, err := nextGen(ctx, tx)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO connector_tasks (connector, task, config, generation) VALUES (?, ?, ?, ?)
				ON CONFLICT (connector, task) DO UPDATE SET config = excluded.config, generation = excluded.generation`,
				spec.Name, id, catalog.EncodeConfig(spec.Tasks[id]), gen); err != nil {
				return err
			}
		}
		out, err = loadConnector(ctx, tx, spec.Name)
		out.Now = now
		return err
	})
	if err != nil {
		return catalog.Connector{}, false, fmt.Errorf("sqlite: put connector %s: %w", spec.Name, err)
	}
	return out, created, nil
}

// ReadConnectors reads one connector (none when name is not one), or every one when
// name is empty (engine.ConnectBackend).
func (e sqliteEngine) ReadConnectors(ctx context.Context, name string) ([]catalog.Connector, error) {
	c := e.c
	tx, err := c.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	now, err := scanNow(tx.QueryRowContext(ctx, nowSQL))
	if err != nil {
		return nil, err
	}
	cs, err := loadConnectors(ctx, tx, name)
	for i := range cs {
		cs[i].Now = now
	}
	return cs, err
}

// connectorTx runs fn on an existing connector in a write transaction.
func (c *Catalog) connectorTx(ctx context.Context, op, name string, fn func(tx *sql.Tx, now time.Time, conn catalog.Connector) error) error {
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		if catalog.ValidateConnectorName(name) != nil {
			return fmt.Errorf("%w: %s", catalog.ErrConnectorNotFound, name)
		}
		conn, err := loadConnector(ctx, tx, name)
		if err != nil {
			return err
		}
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		conn.Now = now
		return fn(tx, now, conn)
	})
	if err != nil {
		return fmt.Errorf("sqlite: %s %s: %w", op, name, err)
	}
	return nil
}

// bumpTasks gives tasks a new generation each; release also takes them from their
// owners.
func bumpTasks(ctx context.Context, tx *sql.Tx, name string, tasks []int32, release bool, state string) error {
	for _, id := range tasks {
		gen, err := nextGen(ctx, tx)
		if err != nil {
			return err
		}
		q := `UPDATE connector_tasks SET generation = ?, state = coalesce(nullif(?, ''), state) WHERE connector = ? AND task = ?`
		if release {
			q = `UPDATE connector_tasks SET generation = ?, state = coalesce(nullif(?, ''), state), owner = NULL, lease_until = NULL
				WHERE connector = ? AND task = ?`
		}
		if _, err := tx.ExecContext(ctx, q, gen, state, name, id); err != nil {
			return err
		}
	}
	return nil
}

func taskIDs(ts []catalog.ConnectTask) []int32 {
	ids := make([]int32, len(ts))
	for i, t := range ts {
		ids[i] = t.Task
	}
	return ids
}

// DeleteConnector removes a connector and its tasks; its source offsets stay.
func (c *Catalog) DeleteConnector(ctx context.Context, name string) error {
	return c.connectorTx(ctx, "delete connector", name, func(tx *sql.Tx, _ time.Time, _ catalog.Connector) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM connectors WHERE name = ?`, name)
		return err
	})
}

// SetTargetState pauses, resumes or stops a connector.
func (c *Catalog) SetTargetState(ctx context.Context, name, state string) error {
	if err := catalog.ValidateTargetState(state); err != nil {
		return err
	}
	return c.connectorTx(ctx, "set target state", name, func(tx *sql.Tx, now time.Time, conn catalog.Connector) error {
		if _, err := tx.ExecContext(ctx, `UPDATE connectors SET target_state = ?, updated_at = ? WHERE name = ?`, state, now.UnixMilli(), name); err != nil {
			return err
		}
		if state == catalog.StateStopped && conn.TargetState != catalog.StateStopped {
			return bumpTasks(ctx, tx, name, taskIDs(conn.Tasks), true, catalog.TaskUnassigned)
		}
		return nil
	})
}

// RestartTasks restarts a connector's tasks.
func (c *Catalog) RestartTasks(ctx context.Context, name string, task int32, onlyFailed bool) (catalog.Connector, error) {
	var out catalog.Connector
	err := c.connectorTx(ctx, "restart tasks", name, func(tx *sql.Tx, now time.Time, conn catalog.Connector) error {
		ids, err := catalog.RestartChoice(conn, task, onlyFailed)
		if err != nil {
			return err
		}
		if err := bumpTasks(ctx, tx, name, ids, false, catalog.TaskRestarting); err != nil {
			return err
		}
		out, err = loadConnector(ctx, tx, name)
		out.Now = now
		return err
	})
	return out, err
}

// ReportTaskState records a task instance's state.
func (c *Catalog) ReportTaskState(ctx context.Context, f catalog.TaskFence, worker, state, trace string) error {
	if err := catalog.ValidateTaskState(state); err != nil {
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
		_, err = tx.ExecContext(ctx, `UPDATE connector_tasks SET state = ?, trace = ?, worker = ? WHERE connector = ? AND task = ?`,
			state, catalog.TruncateTrace(trace), worker, f.Connector, f.Task)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: report state of connector %s task %d: %w", f.Connector, f.Task, err)
	}
	return nil
}

func taskGeneration(ctx context.Context, q rowQueryer, id catalog.TaskID) (int64, bool, error) {
	var gen int64
	err := q.QueryRowContext(ctx, `SELECT generation FROM connector_tasks WHERE connector = ? AND task = ?`, id.Connector, id.Task).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return gen, err == nil, err
}

// AddConnectorTopics records topics a connector used.
func (c *Catalog) AddConnectorTopics(ctx context.Context, name string, topics []string) error {
	return c.connectorTx(ctx, "add connector topics", name, func(tx *sql.Tx, _ time.Time, conn catalog.Connector) error {
		all := append(slices.Clone(conn.Topics), topics...)
		slices.Sort(all)
		all = slices.Compact(all)
		if slices.Equal(all, conn.Topics) {
			return nil
		}
		b, _ := json.Marshal(all)
		_, err := tx.ExecContext(ctx, `UPDATE connectors SET topics = ? WHERE name = ?`, string(b), name)
		return err
	})
}

// ResetConnectorTopics forgets the topics a connector used.
func (c *Catalog) ResetConnectorTopics(ctx context.Context, name string) error {
	return c.connectorTx(ctx, "reset connector topics", name, func(tx *sql.Tx, _ time.Time, _ catalog.Connector) error {
		_, err := tx.ExecContext(ctx, `UPDATE connectors SET topics = '[]' WHERE name = ?`, name)
		return err
	})
}

// WorkerHeartbeat renews a worker and its tasks, releases and claims tasks.
func (c *Catalog) WorkerHeartbeat(ctx context.Context, b catalog.WorkerBeat) (catalog.WorkerAssignment, error) {
	if err := catalog.ValidateWorkerBeat(b); err != nil {
		return catalog.WorkerAssignment{}, err
	}
	var out catalog.WorkerAssignment
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		until := now.Add(b.Lease).UnixMilli()
		if _, err := tx.ExecContext(ctx, `DELETE FROM connect_workers WHERE lease_until < ?`, now.Add(-catalog.WorkerForgetAfter).UnixMilli()); err != nil {
			return err
		}
		if b.Leave {
			if _, err := tx.ExecContext(ctx, `DELETE FROM connect_workers WHERE id = ?`, b.Worker); err != nil {
				return err
			}
		} else if _, err := tx.ExecContext(ctx, `INSERT INTO connect_workers (id, lease_until) VALUES (?, ?)
			ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until`, b.Worker, until); err != nil {
			return err
		}
		workers, tasks, err := loadLeases(ctx, tx)
		if err != nil {
			return err
		}
		plan := engine.PlanWorkerBeat(now, b, workers, tasks)
		for _, id := range plan.Release {
			if _, err := tx.ExecContext(ctx, `UPDATE connector_tasks SET owner = NULL, lease_until = NULL, state = ?
				WHERE connector = ? AND task = ?`, catalog.TaskUnassigned, id.Connector, id.Task); err != nil {
				return err
			}
		}
		for _, id := range plan.Renew {
			if _, err := tx.ExecContext(ctx, `UPDATE connector_tasks SET lease_until = ? WHERE connector = ? AND task = ?`,
				until, id.Connector, id.Task); err != nil {
				return err
			}
		}
		for _, id := range plan.Claim {
			gen, err := nextGen(ctx, tx)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE connector_tasks SET owner = ?, lease_until = ?, generation = ?, state = ?, trace = ''
				WHERE connector = ? AND task = ?`, b.Worker, until, gen, catalog.TaskUnassigned, id.Connector, id.Task); err != nil {
				return err
			}
		}
		out = catalog.WorkerAssignment{Excess: plan.Excess, Workers: plan.Workers, Now: now}
		out.Tasks, err = loadAssigned(ctx, tx, b.Worker)
		return err
	})
	if err != nil {
		return catalog.WorkerAssignment{}, fmt.Errorf("sqlite: worker heartbeat %s: %w", b.Worker, err)
	}
	return out, nil
}

func loadLeases(ctx context.Context, tx *sql.Tx) ([]engine.WorkerRow, []engine.TaskLease, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, lease_until FROM connect_workers`)
	if err != nil {
		return nil, nil, err
	}
	var workers []engine.WorkerRow
	for rows.Next() {
		var w engine.WorkerRow
		var until int64
		if err := rows.Scan(&w.ID, &until); err != nil {
			rows.Close()
			return nil, nil, err
		}
		w.LeaseUntil = fromMS(until)
		workers = append(workers, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	rows, err = tx.QueryContext(ctx, `SELECT t.connector, t.task, coalesce(t.owner, ''), coalesce(t.lease_until, 0), c.target_state
		FROM connector_tasks t JOIN connectors c ON c.name = t.connector ORDER BY t.connector, t.task`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var tasks []engine.TaskLease
	for rows.Next() {
		var t engine.TaskLease
		var until int64
		if err := rows.Scan(&t.Connector, &t.Task, &t.Owner, &until, &t.TargetState); err != nil {
			return nil, nil, err
		}
		t.LeaseUntil = fromMS(until)
		tasks = append(tasks, t)
	}
	return workers, tasks, rows.Err()
}

func loadAssigned(ctx context.Context, tx *sql.Tx, worker string) ([]catalog.AssignedTask, error) {
	rows, err := tx.QueryContext(ctx, `SELECT t.connector, t.task, t.generation, t.config, c.type, c.principal, c.target_state, c.config
		FROM connector_tasks t JOIN connectors c ON c.name = t.connector WHERE t.owner = ? ORDER BY t.connector, t.task`, worker)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []catalog.AssignedTask
	for rows.Next() {
		var a catalog.AssignedTask
		var tcfg, ccfg string
		if err := rows.Scan(&a.Connector, &a.Task, &a.Generation, &tcfg, &a.Type, &a.Principal, &a.TargetState, &ccfg); err != nil {
			return nil, err
		}
		if a.Config, err = catalog.DecodeConfig(tcfg); err != nil {
			return nil, err
		}
		if a.ConnectorConfig, err = catalog.DecodeConfig(ccfg); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// SourceOffsets reads a connector's source offsets for a current task instance.
func (c *Catalog) SourceOffsets(ctx context.Context, f catalog.TaskFence) ([]catalog.SourceOffset, error) {
	if err := catalog.ValidateFence(f); err != nil {
		return nil, err
	}
	tx, err := c.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: source offsets of %s: %w", f.Connector, err)
	}
	defer tx.Rollback()
	gen, found, err := taskGeneration(ctx, tx, f.ID())
	if err == nil {
		err = engine.CheckFence(f, gen, found)
	}
	var out []catalog.SourceOffset
	if err == nil {
		out, err = loadOffsets(ctx, tx, f.Connector)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: source offsets of connector %s task %d: %w", f.Connector, f.Task, err)
	}
	return out, nil
}

func loadOffsets(ctx context.Context, q rowQueryer, name string) ([]catalog.SourceOffset, error) {
	rows, err := q.QueryContext(ctx, `SELECT partition, "offset" FROM connect_offsets WHERE connector = ? ORDER BY partition`, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []catalog.SourceOffset{}
	for rows.Next() {
		var o catalog.SourceOffset
		if err := rows.Scan(&o.Partition, &o.Offset); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// CommitSourceOffsets commits source offsets without records.
func (c *Catalog) CommitSourceOffsets(ctx context.Context, sc catalog.SourceCommit) error {
	if err := catalog.ValidateSourceCommit(sc); err != nil {
		return err
	}
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		gen, found, err := taskGeneration(ctx, tx, sc.Fence.ID())
		if err != nil {
			return err
		}
		if err := engine.CheckFence(sc.Fence, gen, found); err != nil {
			return err
		}
		rows := make([]engine.SourceOffsetRow, len(sc.Offsets))
		for i, o := range sc.Offsets {
			rows[i] = engine.SourceOffsetRow{Connector: sc.Fence.Connector, SourceOffset: o}
		}
		return writeSourceOffsets(ctx, tx, rows, now)
	})
	if err != nil {
		return fmt.Errorf("sqlite: commit source offsets of connector %s task %d: %w", sc.Fence.Connector, sc.Fence.Task, err)
	}
	return nil
}

// writeSourceOffsets stores source offsets; an empty Offset removes one.
func writeSourceOffsets(ctx context.Context, tx *sql.Tx, rows []engine.SourceOffsetRow, now time.Time) error {
	for _, r := range rows {
		var err error
		if r.Offset == "" {
			_, err = tx.ExecContext(ctx, `DELETE FROM connect_offsets WHERE connector = ? AND partition = ?`, r.Connector, r.Partition)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO connect_offsets (connector, partition, "offset", updated_at) VALUES (?, ?, ?, ?)
				ON CONFLICT (connector, partition) DO UPDATE SET "offset" = excluded."offset", updated_at = excluded.updated_at`,
				r.Connector, r.Partition, r.Offset, now.UnixMilli())
		}
		if err != nil {
			return fmt.Errorf("source offset of connector %s: %w", r.Connector, err)
		}
	}
	return nil
}

// ConnectorOffsets reads a connector's source offsets.
func (c *Catalog) ConnectorOffsets(ctx context.Context, name string) ([]catalog.SourceOffset, error) {
	if catalog.ValidateConnectorName(name) != nil {
		return []catalog.SourceOffset{}, nil
	}
	out, err := loadOffsets(ctx, c.r, name)
	if err != nil {
		return nil, fmt.Errorf("sqlite: offsets of connector %s: %w", name, err)
	}
	return out, nil
}

// AlterConnectorOffsets edits a stopped connector's source offsets.
func (c *Catalog) AlterConnectorOffsets(ctx context.Context, name string, offsets []catalog.SourceOffset, reset bool) error {
	if err := catalog.ValidateOffsetEdit(offsets, reset); err != nil {
		return err
	}
	return c.connectorTx(ctx, "alter offsets of connector", name, func(tx *sql.Tx, now time.Time, conn catalog.Connector) error {
		if err := catalog.CheckOffsetEdit(conn); err != nil {
			return err
		}
		if err := bumpTasks(ctx, tx, name, taskIDs(conn.Tasks), true, ""); err != nil {
			return err
		}
		if reset {
			_, err := tx.ExecContext(ctx, `DELETE FROM connect_offsets WHERE connector = ?`, name)
			return err
		}
		rows := make([]engine.SourceOffsetRow, len(offsets))
		for i, o := range offsets {
			rows[i] = engine.SourceOffsetRow{Connector: name, SourceOffset: o}
		}
		return writeSourceOffsets(ctx, tx, rows, now)
	})
}

// checkSources loads the generations of the flush's fenced tasks and checks them
// (engine.Plan.CheckSources).
func checkSources(ctx context.Context, tx *sql.Tx, plan *engine.Plan, errs []error) (*engine.SourceCheck, error) {
	gens := map[catalog.TaskID]int64{}
	for _, id := range plan.Fences() {
		gen, found, err := taskGeneration(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		if found {
			gens[id] = gen
		}
	}
	return plan.CheckSources(errs, gens), nil
}
