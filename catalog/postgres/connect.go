package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// Connectors. The rules are catalog's (connect.go, connectcommit.go); this file loads
// and stores rows, in the lock order migrations/0080_connect.sql states: connector rows,
// then task rows — FOR UPDATE before any change of generation, which waits for the
// flush commits holding them FOR KEY SHARE — then source offsets. None of this is on the
// produce path (the flush commit's fence check is strata_commit_connect's), so
// transactions here take the round trips they need.

var _ catalog.Connect = (*Catalog)(nil)

const (
	pgSelectConnector = `SELECT name, type, config, principal, target_state, worker, topics FROM connectors`
	pgSelectTasks     = `SELECT connector, task, config, generation, coalesce(owner, ''), lease_until, state, trace, worker, metrics
		FROM connector_tasks`
)

// queryer is a pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// loadConnectors reads connectors (one by name, or all for "") with their tasks. lock
// ("", "FOR UPDATE", "FOR SHARE") locks the connector rows, and with FOR UPDATE the task
// rows too.
func loadConnectors(ctx context.Context, q queryer, name, lock string) ([]catalog.Connector, error) {
	where, args := " ORDER BY name COLLATE \"C\"", []any{}
	if name != "" {
		where, args = " WHERE name = $1", []any{name}
	}
	rows, err := q.Query(ctx, pgSelectConnector+where+" "+lock, args...)
	if err != nil {
		return nil, err
	}
	var out []catalog.Connector
	at := map[string]int{}
	var c catalog.Connector
	var cfg string
	_, err = pgx.ForEachRow(rows, []any{&c.Name, &c.Type, &cfg, &c.Principal, &c.TargetState, &c.Worker, &c.Topics}, func() error {
		conf, err := catalog.DecodeConfig(cfg)
		if err != nil {
			return err
		}
		x := c
		x.Config, x.Topics = conf, slices.Clone(c.Topics)
		at[x.Name] = len(out)
		out = append(out, x)
		return nil
	})
	if err != nil || len(out) == 0 {
		return out, err
	}
	taskLock := ""
	if lock == "FOR UPDATE" {
		taskLock = "FOR UPDATE"
	}
	where = ` ORDER BY connector COLLATE "C", task`
	if name != "" {
		where = " WHERE connector = $1 ORDER BY task"
	}
	if rows, err = q.Query(ctx, pgSelectTasks+where+" "+taskLock, args...); err != nil {
		return nil, err
	}
	var (
		conn  string
		t     catalog.ConnectTask
		lease *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&conn, &t.Task, &cfg, &t.Generation, &t.Owner, &lease, &t.State, &t.Trace, &t.Worker, &t.Metrics}, func() error {
		x := t
		var err error
		if x.Config, err = catalog.DecodeConfig(cfg); err != nil {
			return err
		}
		if lease != nil {
			x.LeaseUntil = lease.UTC()
		}
		if i, ok := at[conn]; ok {
			out[i].Tasks = append(out[i].Tasks, x)
		}
		return nil
	})
	return out, err
}

func loadConnector(ctx context.Context, q queryer, name, lock string) (catalog.Connector, error) {
	cs, err := loadConnectors(ctx, q, name, lock)
	if err != nil {
		return catalog.Connector{}, err
	}
	if len(cs) == 0 {
		return catalog.Connector{}, fmt.Errorf("%w: %s", catalog.ErrConnectorNotFound, name)
	}
	return cs[0], nil
}

func txNow(ctx context.Context, q queryer) (time.Time, error) {
	var now time.Time
	err := q.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now)
	return now.UTC(), err
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
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		if err := engine.CheckOwnerCap(ctx, txQuerier{tx}, engine.OwnedConnector, spec.Name); err != nil {
			return err
		}
		state := spec.TargetState
		if state == "" {
			state = catalog.StateRunning
		}
		tag, err := tx.Exec(ctx, `INSERT INTO connectors (name, type, config, principal, target_state, worker)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING`,
			spec.Name, spec.Type, catalog.EncodeConfig(spec.Config), spec.Principal, state, spec.Worker)
		if err != nil {
			return err
		}
		created = tag.RowsAffected() == 1
		old, err := loadConnector(ctx, tx, spec.Name, "FOR UPDATE")
		switch {
		case err != nil:
			return err
		case created:
		case !upsert:
			return fmt.Errorf("%w: %s", catalog.ErrConnectorExists, spec.Name)
		case old.Type != spec.Type:
			return fmt.Errorf("%w: connector %s is a %s connector; a %s connector needs another name", catalog.ErrInvalidConnector, spec.Name, old.Type, spec.Type)
		default:
			if _, err := tx.Exec(ctx, `UPDATE connectors SET config = $1, worker = $2, principal = $3, updated_at = clock_timestamp() WHERE name = $4`,
				catalog.EncodeConfig(spec.Config), spec.Worker, spec.Principal, spec.Name); err != nil {
				return err
			}
		}
		write, remove := catalog.PlanTaskConfigs(old.Tasks, spec.Tasks, old.Principal != spec.Principal)
		if _, err := tx.Exec(ctx, `DELETE FROM connector_tasks WHERE connector = $1 AND task = ANY ($2)`, spec.Name, orEmpty(remove)); err != nil {
			return err
		}
		for _, id := range write {
			if _, err := tx.Exec(ctx, `INSERT INTO connector_tasks (connector, task, config, generation)
				VALUES ($1, $2, $3, nextval('connect_generation'))
				ON CONFLICT (connector, task) DO UPDATE SET config = excluded.config, generation = excluded.generation`,
				spec.Name, id, catalog.EncodeConfig(spec.Tasks[id])); err != nil {
				return err
			}
		}
		if out, err = loadConnector(ctx, tx, spec.Name, ""); err != nil {
			return err
		}
		out.Now, err = txNow(ctx, tx)
		return err
	})
	if err != nil {
		return catalog.Connector{}, false, fmt.Errorf("postgres: put connector %s: %w", spec.Name, err)
	}
	return out, created, nil
}

// ReadConnectors reads one connector (none when name is not one), or every one when
// name is empty (engine.ConnectBackend).
func (e pgEngine) ReadConnectors(ctx context.Context, name string) ([]catalog.Connector, error) {
	c := e.c
	var cs []catalog.Connector
	// One snapshot for the connectors, their tasks and the clock.
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		now, err := txNow(ctx, tx)
		if err != nil {
			return err
		}
		if cs, err = loadConnectors(ctx, tx, name, ""); err != nil {
			return err
		}
		for i := range cs {
			cs[i].Now = now
		}
		return nil
	})
	return cs, err
}

// connectorTx runs fn on an existing connector, its row and its tasks' locked FOR
// UPDATE, in a transaction.
func (c *Catalog) connectorTx(ctx context.Context, op, name string, fn func(tx pgx.Tx, conn catalog.Connector) error) error {
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if catalog.ValidateConnectorName(name) != nil {
			return fmt.Errorf("%w: %s", catalog.ErrConnectorNotFound, name)
		}
		conn, err := loadConnector(ctx, tx, name, "FOR UPDATE")
		if err != nil {
			return err
		}
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		if conn.Now, err = txNow(ctx, tx); err != nil {
			return err
		}
		return fn(tx, conn)
	})
	if err != nil {
		return fmt.Errorf("postgres: %s %s: %w", op, name, err)
	}
	return nil
}

// bumpTasks gives tasks (locked FOR UPDATE by the caller) a new generation each;
// release also takes them from their owners; a state other than "" is set.
func bumpTasks(ctx context.Context, tx pgx.Tx, name string, tasks []int32, release bool, state string) error {
	_, err := tx.Exec(ctx, `UPDATE connector_tasks SET generation = nextval('connect_generation'),
			state = coalesce(nullif($3, ''), state),
			owner = CASE WHEN $4 THEN NULL ELSE owner END,
			lease_until = CASE WHEN $4 THEN NULL ELSE lease_until END
		WHERE connector = $1 AND task = ANY ($2)`, name, orEmpty(tasks), state, release)
	return err
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
	return c.connectorTx(ctx, "delete connector", name, func(tx pgx.Tx, _ catalog.Connector) error {
		_, err := tx.Exec(ctx, `DELETE FROM connectors WHERE name = $1`, name)
		return err
	})
}

// SetTargetState pauses, resumes or stops a connector.
func (c *Catalog) SetTargetState(ctx context.Context, name, state string) error {
	if err := catalog.ValidateTargetState(state); err != nil {
		return err
	}
	return c.connectorTx(ctx, "set target state", name, func(tx pgx.Tx, conn catalog.Connector) error {
		if _, err := tx.Exec(ctx, `UPDATE connectors SET target_state = $1, updated_at = clock_timestamp() WHERE name = $2`, state, name); err != nil {
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
	err := c.connectorTx(ctx, "restart tasks", name, func(tx pgx.Tx, conn catalog.Connector) error {
		ids, err := catalog.RestartChoice(conn, task, onlyFailed)
		if err != nil {
			return err
		}
		if err := bumpTasks(ctx, tx, name, ids, false, catalog.TaskRestarting); err != nil {
			return err
		}
		out, err = loadConnector(ctx, tx, name, "")
		out.Now = conn.Now
		return err
	})
	return out, err
}

// reportSQL records a state only at the instance's generation; it answers the task's
// generation either way (none: no such task), so a refusal needs no second trip.
const reportSQL = `WITH t AS (SELECT generation FROM connector_tasks WHERE connector = $1 AND task = $2),
	u AS (UPDATE connector_tasks SET state = $4, trace = $5, worker = $6
	      WHERE connector = $1 AND task = $2 AND generation = $3 RETURNING 1)
	SELECT (SELECT generation FROM t), (SELECT count(*) FROM u)`

// ReportTaskState records a task instance's state.
func (c *Catalog) ReportTaskState(ctx context.Context, f catalog.TaskFence, worker, state, trace string) error {
	if err := catalog.ValidateTaskState(state); err != nil {
		return err
	}
	var (
		gen     *int64
		updated int64
	)
	err := c.pool.QueryRow(ctx, reportSQL, f.Connector, f.Task, f.Generation, state, catalog.TruncateTrace(trace), worker).Scan(&gen, &updated)
	if err == nil && updated == 0 {
		var current int64
		if gen != nil {
			current = *gen
		}
		err = engine.CheckFence(f, current, gen != nil)
		if err == nil {
			err = errors.New("the state was not recorded")
		}
	}
	if err != nil {
		return fmt.Errorf("postgres: report state of connector %s task %d: %w", f.Connector, f.Task, err)
	}
	return nil
}

// AddConnectorTopics records topics a connector used.
func (c *Catalog) AddConnectorTopics(ctx context.Context, name string, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	tag, err := c.pool.Exec(ctx, `UPDATE connectors SET topics = (SELECT array_agg(DISTINCT x ORDER BY x) FROM unnest(topics || $2) AS x)
		WHERE name = $1 AND NOT topics @> $2`, name, topics)
	if err != nil {
		return fmt.Errorf("postgres: add topics of connector %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		if _, err := c.Connector(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// ResetConnectorTopics forgets the topics a connector used.
func (c *Catalog) ResetConnectorTopics(ctx context.Context, name string) error {
	return c.connectorTx(ctx, "reset topics of connector", name, func(tx pgx.Tx, _ catalog.Connector) error {
		_, err := tx.Exec(ctx, `UPDATE connectors SET topics = '{}' WHERE name = $1`, name)
		return err
	})
}

// WorkerHeartbeat renews a worker and its tasks, releases and claims tasks. Heartbeats
// run one at a time (the connect_workers table lock), with every connector row
// FOR SHARE, so the plan is made on rows nothing else changes meanwhile.
func (c *Catalog) WorkerHeartbeat(ctx context.Context, b catalog.WorkerBeat) (catalog.WorkerAssignment, error) {
	if err := catalog.ValidateWorkerBeat(b); err != nil {
		return catalog.WorkerAssignment{}, err
	}
	var out catalog.WorkerAssignment
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE connect_workers IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM connectors ORDER BY name COLLATE "C" FOR SHARE`); err != nil {
			return err
		}
		now, err := txNow(ctx, tx)
		if err != nil {
			return err
		}
		until := now.Add(b.Lease)
		if _, err := tx.Exec(ctx, `DELETE FROM connect_workers WHERE lease_until < $1`, now.Add(-catalog.WorkerForgetAfter)); err != nil {
			return err
		}
		if b.Leave {
			_, err = tx.Exec(ctx, `DELETE FROM connect_workers WHERE id = $1`, b.Worker)
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO connect_workers (id, lease_until) VALUES ($1, $2)
				ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until`, b.Worker, until)
		}
		if err != nil {
			return err
		}
		workers, tasks, err := pgLoadLeases(ctx, tx)
		if err != nil {
			return err
		}
		plan := engine.PlanWorkerBeat(now, b, workers, tasks)
		if err := applyWorkerPlan(ctx, tx, b.Worker, until, plan); err != nil {
			return err
		}
		out = catalog.WorkerAssignment{Excess: plan.Excess, Workers: plan.Workers, Now: now}
		out.Tasks, err = pgLoadAssigned(ctx, tx, b.Worker)
		return err
	})
	if err != nil {
		return catalog.WorkerAssignment{}, fmt.Errorf("postgres: worker heartbeat %s: %w", b.Worker, err)
	}
	return out, nil
}

// applyWorkerPlan writes a heartbeat's plan: releases and claims lock their rows
// FOR UPDATE first (in key order), waiting for the commits that hold them.
func applyWorkerPlan(ctx context.Context, tx pgx.Tx, worker string, until time.Time, plan engine.WorkerPlan) error {
	ids := func(ts []catalog.TaskID) ([]string, []int32) {
		cs, ns := make([]string, len(ts)), make([]int32, len(ts))
		for i, t := range ts {
			cs[i], ns[i] = t.Connector, t.Task
		}
		return cs, ns
	}
	moved := append(slices.Clone(plan.Release), plan.Claim...)
	if len(moved) > 0 {
		cs, ns := ids(moved)
		if _, err := tx.Exec(ctx, `SELECT 1 FROM connector_tasks
			WHERE (connector, task) IN (SELECT * FROM unnest($1::text[], $2::int[]))
			ORDER BY connector COLLATE "C", task FOR UPDATE`, cs, ns); err != nil {
			return err
		}
	}
	if len(plan.Release) > 0 {
		cs, ns := ids(plan.Release)
		if _, err := tx.Exec(ctx, `UPDATE connector_tasks SET owner = NULL, lease_until = NULL, state = $3
			WHERE (connector, task) IN (SELECT * FROM unnest($1::text[], $2::int[]))`, cs, ns, catalog.TaskUnassigned); err != nil {
			return err
		}
	}
	if len(plan.Renew) > 0 {
		cs, ns := ids(plan.Renew)
		if _, err := tx.Exec(ctx, `UPDATE connector_tasks SET lease_until = $3
			WHERE (connector, task) IN (SELECT * FROM unnest($1::text[], $2::int[]))`, cs, ns, until); err != nil {
			return err
		}
	}
	for _, id := range plan.Claim {
		if _, err := tx.Exec(ctx, `UPDATE connector_tasks SET owner = $3, lease_until = $4, generation = nextval('connect_generation'),
			state = $5, trace = '' WHERE connector = $1 AND task = $2`, id.Connector, id.Task, worker, until, catalog.TaskUnassigned); err != nil {
			return err
		}
	}
	return nil
}

func pgLoadLeases(ctx context.Context, tx pgx.Tx) ([]engine.WorkerRow, []engine.TaskLease, error) {
	rows, err := tx.Query(ctx, `SELECT id, lease_until FROM connect_workers`)
	if err != nil {
		return nil, nil, err
	}
	var workers []engine.WorkerRow
	var w engine.WorkerRow
	if _, err := pgx.ForEachRow(rows, []any{&w.ID, &w.LeaseUntil}, func() error {
		workers = append(workers, w)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	rows, err = tx.Query(ctx, `SELECT t.connector, t.task, coalesce(t.owner, ''), t.lease_until, c.target_state
		FROM connector_tasks t JOIN connectors c ON c.name = t.connector ORDER BY t.connector COLLATE "C", t.task`)
	if err != nil {
		return nil, nil, err
	}
	var tasks []engine.TaskLease
	var t engine.TaskLease
	var lease *time.Time
	_, err = pgx.ForEachRow(rows, []any{&t.Connector, &t.Task, &t.Owner, &lease, &t.TargetState}, func() error {
		x := t
		if lease != nil {
			x.LeaseUntil = *lease
		} else {
			x.LeaseUntil = time.Time{}
		}
		tasks = append(tasks, x)
		return nil
	})
	return workers, tasks, err
}

func pgLoadAssigned(ctx context.Context, tx pgx.Tx, worker string) ([]catalog.AssignedTask, error) {
	rows, err := tx.Query(ctx, `SELECT t.connector, t.task, t.generation, t.config, c.type, c.principal, c.target_state, c.config
		FROM connector_tasks t JOIN connectors c ON c.name = t.connector WHERE t.owner = $1 ORDER BY t.connector COLLATE "C", t.task`, worker)
	if err != nil {
		return nil, err
	}
	var out []catalog.AssignedTask
	var a catalog.AssignedTask
	var tcfg, ccfg string
	_, err = pgx.ForEachRow(rows, []any{&a.Connector, &a.Task, &a.Generation, &tcfg, &a.Type, &a.Principal, &a.TargetState, &ccfg}, func() error {
		x := a
		var err error
		if x.Config, err = catalog.DecodeConfig(tcfg); err != nil {
			return err
		}
		if x.ConnectorConfig, err = catalog.DecodeConfig(ccfg); err != nil {
			return err
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

// sourceOffsetsSQL reads a task's generation and its connector's offsets in one
// statement (one snapshot).
const sourceOffsetsSQL = `SELECT (SELECT generation FROM connector_tasks WHERE connector = $1 AND task = $2),
	coalesce((SELECT array_agg(partition ORDER BY partition COLLATE "C") FROM connect_offsets WHERE connector = $1), '{}'),
	coalesce((SELECT array_agg("offset" ORDER BY partition COLLATE "C") FROM connect_offsets WHERE connector = $1), '{}')`

// SourceOffsets reads a connector's source offsets for a current task instance.
func (c *Catalog) SourceOffsets(ctx context.Context, f catalog.TaskFence) ([]catalog.SourceOffset, error) {
	if err := catalog.ValidateFence(f); err != nil {
		return nil, err
	}
	var (
		gen         *int64
		parts, offs []string
	)
	err := c.pool.QueryRow(ctx, sourceOffsetsSQL, f.Connector, f.Task).Scan(&gen, &parts, &offs)
	if err == nil {
		var current int64
		if gen != nil {
			current = *gen
		}
		err = engine.CheckFence(f, current, gen != nil)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: source offsets of connector %s task %d: %w", f.Connector, f.Task, err)
	}
	out := make([]catalog.SourceOffset, len(parts))
	for i := range parts {
		out[i] = catalog.SourceOffset{Partition: parts[i], Offset: offs[i]}
	}
	return out, nil
}

// CommitSourceOffsets commits source offsets without records: the task row FOR KEY
// SHARE, as a flush commit takes it, then the fence check and the upserts.
func (c *Catalog) CommitSourceOffsets(ctx context.Context, sc catalog.SourceCommit) error {
	if err := catalog.ValidateSourceCommit(sc); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		var gen int64
		err := tx.QueryRow(ctx, `SELECT generation FROM connector_tasks WHERE connector = $1 AND task = $2 FOR KEY SHARE`,
			sc.Fence.Connector, sc.Fence.Task).Scan(&gen)
		found := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err := engine.CheckFence(sc.Fence, gen, found); err != nil {
			return err
		}
		rows := make([]engine.SourceOffsetRow, len(sc.Offsets))
		for i, o := range sc.Offsets {
			rows[i] = engine.SourceOffsetRow{Connector: sc.Fence.Connector, SourceOffset: o}
		}
		return writeSourceOffsets(ctx, tx, rows)
	})
	if err != nil {
		return fmt.Errorf("postgres: commit source offsets of connector %s task %d: %w", sc.Fence.Connector, sc.Fence.Task, err)
	}
	return nil
}

// writeSourceOffsets stores source offsets in (connector, partition) order; an empty
// Offset removes one.
func writeSourceOffsets(ctx context.Context, tx pgx.Tx, rows []engine.SourceOffsetRow) error {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b engine.SourceOffsetRow) int {
		if a.Connector != b.Connector {
			return cmp.Compare(a.Connector, b.Connector)
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	for _, r := range rows {
		var err error
		if r.Offset == "" {
			_, err = tx.Exec(ctx, `DELETE FROM connect_offsets WHERE connector = $1 AND partition = $2`, r.Connector, r.Partition)
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO connect_offsets (connector, partition, "offset") VALUES ($1, $2, $3)
				ON CONFLICT (connector, partition) DO UPDATE SET "offset" = excluded."offset", updated_at = clock_timestamp()`,
				r.Connector, r.Partition, r.Offset)
		}
		if err != nil {
			return fmt.Errorf("source offset of connector %s: %w", r.Connector, err)
		}
	}
	return nil
}

// ConnectorOffsets reads a connector's source offsets.
func (c *Catalog) ConnectorOffsets(ctx context.Context, name string) ([]catalog.SourceOffset, error) {
	rows, err := c.pool.Query(ctx, `SELECT partition, "offset" FROM connect_offsets WHERE connector = $1 ORDER BY partition COLLATE "C"`, name)
	if err != nil {
		return nil, fmt.Errorf("postgres: offsets of connector %s: %w", name, err)
	}
	out := []catalog.SourceOffset{}
	var o catalog.SourceOffset
	if _, err := pgx.ForEachRow(rows, []any{&o.Partition, &o.Offset}, func() error {
		out = append(out, o)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("postgres: offsets of connector %s: %w", name, err)
	}
	return out, nil
}

// AlterConnectorOffsets edits a stopped connector's source offsets.
func (c *Catalog) AlterConnectorOffsets(ctx context.Context, name string, offsets []catalog.SourceOffset, reset bool) error {
	if err := catalog.ValidateOffsetEdit(offsets, reset); err != nil {
		return err
	}
	return c.connectorTx(ctx, "alter offsets of connector", name, func(tx pgx.Tx, conn catalog.Connector) error {
		if err := catalog.CheckOffsetEdit(conn); err != nil {
			return err
		}
		if err := bumpTasks(ctx, tx, name, taskIDs(conn.Tasks), true, ""); err != nil {
			return err
		}
		if reset {
			_, err := tx.Exec(ctx, `DELETE FROM connect_offsets WHERE connector = $1`, name)
			return err
		}
		rows := make([]engine.SourceOffsetRow, len(offsets))
		for i, o := range offsets {
			rows[i] = engine.SourceOffsetRow{Connector: name, SourceOffset: o}
		}
		return writeSourceOffsets(ctx, tx, rows)
	})
}
