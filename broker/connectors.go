package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// Connector administration (docs/design.md "Connect"): every action of Kafka Connect's
// REST API is a call here, authorized on the connector resource before the connector is
// looked up — so a refusal reads the same whether it exists or not — and audited when
// it changes anything. create (on the cluster, or on the connector's name or a prefix of
// it) creates; describe shows the config, status, tasks, topics and offsets; alter
// reconfigures, pauses, resumes, stops, restarts and edits offsets and topics; delete
// deletes. A connector runs as one principal: whoever last stored its config, which is
// also checked, when it is stored, against what it needs (ConnectorPlan.Needs), and on
// every call its tasks make afterwards.
//
// What a config means (its plugin, its keys, its tasks) is the connect runtime's: the
// core calls back into it (ConnectorPlanner) once the caller is authorized, so that no
// validation, and no config provider, runs for a caller who may not act.

// ConnectorStore is the connector part of the catalog (both backends).
type ConnectorStore = catalog.Connect

var _ ConnectorStore = catalog.Connect(nil)

// ConnectorPlan is what the connect runtime makes of a config: the type of its plugin,
// its task configs, and what it needs of the principal it runs as, in the order to
// check (read on a sink's topics and on its group, write on a source's topics and on a
// dead-letter topic).
type ConnectorPlan struct {
	Type  string
	Tasks []map[string]string
	Needs []Need
}

// Need is one permission a connector's config needs of its principal.
type Need struct {
	Op       acl.Operation
	Resource acl.Resource
}

// ConnectorPlanner validates a connector config (cfg, as stored: config provider
// references unresolved) and plans it; a refusal is an *Error (CodeInvalidConfig, with
// the runtime's words).
type ConnectorPlanner func(ctx context.Context, name string, cfg map[string]string) (ConnectorPlan, error)

// PutConnectorRequest stores a connector's config.
type PutConnectorRequest struct {
	Name   string
	Config map[string]string
	// Upsert replaces an existing connector's config (PUT .../config; alter), or
	// creates it (create); without it, an existing connector is refused
	// (CodeConnectorExists; POST /connectors).
	Upsert bool
	// TargetState of a new connector: RUNNING (when empty), PAUSED or STOPPED.
	TargetState string
	// Worker names the worker that planned the config.
	Worker string
	Plan   ConnectorPlanner
}

// Connectors lists the connectors the caller may describe, by name.
func (b *Broker) Connectors(ctx context.Context, who Principal) ([]catalog.Connector, error) {
	if e := b.check(CapConnectors); e != nil {
		return nil, e
	}
	cs, err := b.d.Connect.Connectors(ctx)
	if err != nil {
		return nil, connectorError("list connectors", err, "")
	}
	return visible(b, who, cs, func(c catalog.Connector) acl.Resource { return acl.Connector(c.Name) }), nil
}

// Connector reads a connector: its config (as stored: references unresolved, secrets
// are the front end's to mask), target state, tasks and their statuses.
func (b *Broker) Connector(ctx context.Context, who Principal, name string) (catalog.Connector, error) {
	if e := b.connectorCall(ctx, who, acl.OpDescribe, name); e != nil {
		return catalog.Connector{}, e
	}
	return b.connector(ctx, "get connector", name)
}

func (b *Broker) connector(ctx context.Context, op, name string) (catalog.Connector, error) {
	c, err := b.d.Connect.Connector(ctx, name)
	if err != nil {
		return catalog.Connector{}, connectorError(op, err, name)
	}
	return c, nil
}

// connectorCall checks the capability, then op on the connector.
func (b *Broker) connectorCall(ctx context.Context, who Principal, op acl.Operation, name string) *Error {
	if e := b.check(CapConnectors); e != nil {
		return e
	}
	return b.authorize(ctx, who, op, acl.Connector(name))
}

// mayCreateConnector: create on the cluster or on the connector.
func (b *Broker) mayCreateConnector(who Principal, name string) bool {
	return b.may(who, acl.OpCreate, acl.Cluster()) || b.may(who, acl.OpCreate, acl.Connector(name))
}

// AuthorizeConnectorCreate answers nil when who may create a connector of that name
// (create on the cluster or on the name; with no name, on the cluster): what validating
// a config against the node's plugins and config providers needs.
func (b *Broker) AuthorizeConnectorCreate(ctx context.Context, who Principal, name string) error {
	if e := b.check(CapConnectors); e != nil {
		return e
	}
	if b.may(who, acl.OpCreate, acl.Cluster()) {
		return nil
	}
	r := acl.Cluster()
	if name != "" {
		r = acl.Connector(name)
	}
	if e := b.authorize(ctx, who, acl.OpCreate, r); e != nil {
		return e
	}
	return nil
}

// PutConnector creates a connector, or replaces its config (req.Upsert), answering
// whether it created it. Creating needs create; replacing needs alter, and makes the
// caller the principal the connector runs as. The caller must also hold everything the
// new config needs (the plan's Needs), since the connector will act as it.
func (b *Broker) PutConnector(ctx context.Context, who Principal, req PutConnectorRequest) (catalog.Connector, bool, error) {
	if e := b.check(CapConnectors); e != nil {
		return catalog.Connector{}, false, e
	}
	r := acl.Connector(req.Name)
	canAlter := req.Upsert && b.may(who, acl.OpAlter, r)
	switch {
	case !req.Upsert:
		if e := b.authorizeCreateConnector(ctx, who, req.Name); e != nil {
			return catalog.Connector{}, false, e
		}
	case !canAlter && !b.mayCreateConnector(who, req.Name):
		// Neither: the refusal names alter whether the connector exists or not.
		if e := b.authorize(ctx, who, acl.OpAlter, r); e != nil {
			return catalog.Connector{}, false, e
		}
	}
	if err := catalog.ValidateConnectorName(req.Name); err != nil {
		return catalog.Connector{}, false, connectorError("put connector", err, req.Name)
	}
	if req.TargetState != "" {
		if err := catalog.ValidateTargetState(req.TargetState); err != nil {
			return catalog.Connector{}, false, connectorError("put connector", err, req.Name)
		}
	}
	var old *catalog.Connector
	if req.Upsert {
		c, err := b.d.Connect.Connector(ctx, req.Name)
		switch {
		case err == nil:
			old = &c
		case !errors.Is(err, catalog.ErrConnectorNotFound):
			return catalog.Connector{}, false, connectorError("put connector", err, req.Name)
		}
		// Authorized for what the call turns out to do: replacing needs alter, creating
		// needs create.
		var e *Error
		if old != nil {
			e = b.authorize(ctx, who, acl.OpAlter, r)
		} else {
			e = b.authorizeCreateConnector(ctx, who, req.Name)
		}
		if e != nil {
			return catalog.Connector{}, false, e
		}
	}
	plan, e := b.planConnector(ctx, req.Plan, req.Name, req.Config)
	if e != nil {
		return catalog.Connector{}, false, e
	}
	for _, n := range plan.Needs {
		if e := b.authorize(ctx, who, n.Op, n.Resource); e != nil {
			return catalog.Connector{}, false, e
		}
	}
	spec := catalog.ConnectorSpec{Name: req.Name, Type: plan.Type, Config: req.Config, Tasks: plan.Tasks,
		Principal: who.Name, TargetState: req.TargetState, Worker: req.Worker}
	action, details := "connector.create", map[string]any{"type": plan.Type, "tasks": len(plan.Tasks), "runs_as": who.name()}
	if req.TargetState != "" {
		details["state"] = req.TargetState
	}
	if old != nil {
		action = "connector.config"
		if old.Principal != who.Name {
			details["previous_runs_as"] = principalName(old.Principal)
		}
	}
	// Without alter, an upsert may only create: a connector created meanwhile by
	// someone else is refused, not replaced. (One deleted meanwhile is created again by
	// a caller who had alter on it.)
	upsert := req.Upsert && (old != nil || canAlter)
	owner := b.d.Quotas.Caps(who.Name)
	owner.Principal = who.Name // as the connector stores it ("" for the anonymous caller)
	c, created, err := b.d.Connect.PutConnector(withAudit(catalog.WithOwner(ctx, owner), who, action, r, details), spec, upsert)
	if errors.Is(err, catalog.ErrCapReached) {
		return catalog.Connector{}, false, b.capError(who, catalog.QuotaConnectorCount, err)
	}
	if errors.Is(err, catalog.ErrConnectorExists) && req.Upsert {
		if e := b.authorize(ctx, who, acl.OpAlter, r); e != nil {
			return catalog.Connector{}, false, e
		}
	}
	if err != nil {
		return catalog.Connector{}, false, connectorError("put connector", err, req.Name)
	}
	return c, created, nil
}

func (b *Broker) authorizeCreateConnector(ctx context.Context, who Principal, name string) *Error {
	if b.may(who, acl.OpCreate, acl.Cluster()) {
		return b.authorize(ctx, who, acl.OpCreate, acl.Cluster())
	}
	return b.authorize(ctx, who, acl.OpCreate, acl.Connector(name))
}

// planConnector runs the runtime's planner; its refusals are the caller's to read.
func (b *Broker) planConnector(ctx context.Context, plan ConnectorPlanner, name string, cfg map[string]string) (ConnectorPlan, *Error) {
	if plan == nil {
		return ConnectorPlan{}, newError(CodeRoleUnavailable, "this node plans no connector configs (it runs no connect role)")
	}
	p, err := plan(ctx, name, cfg)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return ConnectorPlan{}, e
		}
		return ConnectorPlan{}, newError(CodeInvalidConfig, "%s", err.Error())
	}
	return p, nil
}

// RestartConnector computes a connector's task configs again from its stored config
// (Kafka Connect's connector restart): alter. It keeps the principal it runs as — a
// restart changes no config.
func (b *Broker) RestartConnector(ctx context.Context, who Principal, name, worker string, plan ConnectorPlanner) error {
	if e := b.connectorCall(ctx, who, acl.OpAlter, name); e != nil {
		return e
	}
	c, err := b.connector(ctx, "restart connector", name)
	if err != nil {
		return err
	}
	p, e := b.planConnector(ctx, plan, name, c.Config)
	if e != nil {
		return e
	}
	spec := catalog.ConnectorSpec{Name: name, Type: p.Type, Config: c.Config, Tasks: p.Tasks, Principal: c.Principal, Worker: worker}
	ctx = withAudit(ctx, who, "connector.restart", acl.Connector(name), map[string]any{"tasks": len(p.Tasks)})
	if _, _, err := b.d.Connect.PutConnector(ctx, spec, true); err != nil {
		return connectorError("restart connector", err, name)
	}
	return nil
}

// DeleteConnector deletes a connector and its tasks (its source offsets stay, as Kafka
// Connect keeps them).
func (b *Broker) DeleteConnector(ctx context.Context, who Principal, name string) error {
	if e := b.connectorCall(ctx, who, acl.OpDelete, name); e != nil {
		return e
	}
	if err := b.d.Connect.DeleteConnector(withAudit(ctx, who, "connector.delete", acl.Connector(name), nil), name); err != nil {
		return connectorError("delete connector", err, name)
	}
	return nil
}

// stateActions name the target states' audit actions.
var stateActions = map[string]string{
	catalog.StateRunning: "connector.resume", catalog.StatePaused: "connector.pause", catalog.StateStopped: "connector.stop",
}

// SetConnectorState pauses, resumes or stops a connector: alter.
func (b *Broker) SetConnectorState(ctx context.Context, who Principal, name, state string) error {
	if e := b.connectorCall(ctx, who, acl.OpAlter, name); e != nil {
		return e
	}
	if err := catalog.ValidateTargetState(state); err != nil {
		return connectorError("set connector state", err, name)
	}
	ctx = withAudit(ctx, who, stateActions[state], acl.Connector(name), nil)
	if err := b.d.Connect.SetTargetState(ctx, name, state); err != nil {
		return connectorError("set connector state", err, name)
	}
	return nil
}

// RestartConnectorTasks restarts a connector's tasks (task -1: all; onlyFailed: the
// FAILED ones) and answers the connector as it now is: alter.
func (b *Broker) RestartConnectorTasks(ctx context.Context, who Principal, name string, task int32, onlyFailed bool) (catalog.Connector, error) {
	if e := b.connectorCall(ctx, who, acl.OpAlter, name); e != nil {
		return catalog.Connector{}, e
	}
	details := map[string]any{"only_failed": onlyFailed}
	action := "connector.restart_tasks"
	if task >= 0 {
		action, details = "connector.restart_task", map[string]any{"task": task}
	}
	c, err := b.d.Connect.RestartTasks(withAudit(ctx, who, action, acl.Connector(name), details), name, task, onlyFailed)
	if err != nil {
		return catalog.Connector{}, connectorError("restart connector tasks", err, name, task)
	}
	return c, nil
}

// ConnectorTopics lists the topics a connector's tasks used, of those the caller may
// describe: describe on the connector.
func (b *Broker) ConnectorTopics(ctx context.Context, who Principal, name string) ([]string, error) {
	c, err := b.Connector(ctx, who, name)
	if err != nil {
		return nil, err
	}
	return visible(b, who, c.Topics, acl.Topic), nil
}

// ResetConnectorTopics forgets the topics a connector used: alter.
func (b *Broker) ResetConnectorTopics(ctx context.Context, who Principal, name string) error {
	if e := b.connectorCall(ctx, who, acl.OpAlter, name); e != nil {
		return e
	}
	if err := b.d.Connect.ResetConnectorTopics(withAudit(ctx, who, "connector.topics.reset", acl.Connector(name), nil), name); err != nil {
		return connectorError("reset connector topics", err, name)
	}
	return nil
}

// ConnectorOffsets are a connector's offsets: a source's source offsets, or a sink's
// group offsets (of its group connect-<name>).
type ConnectorOffsets struct {
	Type   string
	Source []catalog.SourceOffset
	Sink   []catalog.GroupOffset
}

// SinkGroup is a sink connector's consumer group.
func SinkGroup(connector string) string { return "connect-" + connector }

// ConnectorOffsets reads a connector's offsets: describe on it; a sink's, of the topics
// the caller may describe.
func (b *Broker) ConnectorOffsets(ctx context.Context, who Principal, name string) (ConnectorOffsets, error) {
	c, err := b.Connector(ctx, who, name)
	if err != nil {
		return ConnectorOffsets{}, err
	}
	out := ConnectorOffsets{Type: c.Type}
	if c.Type == catalog.ConnectorSink {
		if e := b.check(CapGroups); e != nil {
			return ConnectorOffsets{}, e
		}
		offs, err := b.d.Groups.GroupOffsets(ctx, SinkGroup(name))
		if err != nil && !errors.Is(err, catalog.ErrGroupNotFound) {
			return ConnectorOffsets{}, groupError("connector offsets", err, onGroup(SinkGroup(name), ""))
		}
		out.Sink = visible(b, who, offs, func(o catalog.GroupOffset) acl.Resource { return acl.Topic(o.Topic) })
		return out, nil
	}
	if out.Source, err = b.d.Connect.ConnectorOffsets(ctx, name); err != nil {
		return ConnectorOffsets{}, connectorError("connector offsets", err, name)
	}
	return out, nil
}

// OffsetsEdit is an edit of a connector's offsets: Source for a source connector
// (an Offset of "" removes the partition's), Sink for a sink.
type OffsetsEdit struct {
	Source []catalog.SourceOffset
	Sink   []SinkOffset
}

// SinkOffset is a sink connector's position in a partition; Offset -1: the log start.
type SinkOffset struct {
	Topic     string
	Partition int32
	Offset    int64
}

// OffsetsDecoder reads an edit once the connector's type is known (the body's shape
// depends on it); a refusal is an *Error.
type OffsetsDecoder func(connectorType string) (OffsetsEdit, error)

// AlterConnectorOffsets edits a STOPPED connector's offsets: alter on it, and for a
// sink describe on each topic named.
func (b *Broker) AlterConnectorOffsets(ctx context.Context, who Principal, name string, decode OffsetsDecoder) error {
	c, e := b.stoppedConnector(ctx, who, name)
	if e != nil {
		return e
	}
	edit, err := decode(c.Type)
	if err != nil {
		return AsError("decode connector offsets", err)
	}
	r := acl.Connector(name)
	if c.Type != catalog.ConnectorSink {
		if len(edit.Source) == 0 {
			return newError(CodeInvalidRequest, "the offsets to be altered may not be null or empty")
		}
		ctx = withAudit(ctx, who, "connector.offsets.alter", r, map[string]any{"partitions": len(edit.Source)})
		if err := b.d.Connect.AlterConnectorOffsets(ctx, name, edit.Source, false); err != nil {
			return connectorError("alter connector offsets", err, name)
		}
		return nil
	}
	if len(edit.Sink) == 0 {
		return newError(CodeInvalidRequest, "the offsets to be altered may not be null or empty")
	}
	offs := make([]catalog.CommitOffset, 0, len(edit.Sink))
	for _, o := range edit.Sink {
		if e := b.authorize(ctx, who, acl.OpDescribe, acl.Topic(o.Topic)); e != nil {
			return e
		}
		at := o.Offset
		if at < 0 {
			start, err := b.ListOffset(ctx, who, o.Topic, o.Partition, Earliest)
			if err != nil {
				return err
			}
			at = start
		}
		offs = append(offs, catalog.CommitOffset{Topic: o.Topic, Partition: o.Partition, Offset: at})
	}
	ctx = withAudit(ctx, who, "connector.offsets.alter", r, map[string]any{"partitions": len(offs)})
	if err := b.d.Groups.ResetOffsets(ctx, SinkGroup(name), offs); err != nil {
		return sinkOffsetsError("alter connector offsets", err, name)
	}
	return nil
}

// ResetConnectorOffsets removes a STOPPED connector's offsets (a sink's group): alter.
func (b *Broker) ResetConnectorOffsets(ctx context.Context, who Principal, name string) error {
	c, e := b.stoppedConnector(ctx, who, name)
	if e != nil {
		return e
	}
	ctx = withAudit(ctx, who, "connector.offsets.reset", acl.Connector(name), nil)
	if c.Type == catalog.ConnectorSink {
		err := b.d.Groups.DeleteGroup(ctx, SinkGroup(name))
		if err != nil && !errors.Is(err, catalog.ErrGroupNotFound) {
			return sinkOffsetsError("reset connector offsets", err, name)
		}
		return nil
	}
	if err := b.d.Connect.AlterConnectorOffsets(ctx, name, nil, true); err != nil {
		return connectorError("reset connector offsets", err, name)
	}
	return nil
}

// stoppedConnector authorizes alter, reads the connector and requires it STOPPED (and,
// for a sink, the group calls).
func (b *Broker) stoppedConnector(ctx context.Context, who Principal, name string) (catalog.Connector, *Error) {
	if e := b.connectorCall(ctx, who, acl.OpAlter, name); e != nil {
		return catalog.Connector{}, e
	}
	c, err := b.d.Connect.Connector(ctx, name)
	if err == nil {
		err = catalog.CheckOffsetEdit(c)
	}
	if err != nil {
		return catalog.Connector{}, connectorError("edit connector offsets", err, name)
	}
	if c.Type == catalog.ConnectorSink {
		if e := b.check(CapGroups); e != nil {
			return catalog.Connector{}, e
		}
	}
	return c, nil
}

// sinkOffsetsError maps a refusal of a sink's group offsets edit.
func sinkOffsetsError(op string, err error, name string) *Error {
	if errors.Is(err, catalog.ErrGroupNotEmpty) {
		return newError(CodeGroupNotEmpty, "the group %s of sink connector %s still has live members (a stopped task's session has not ended yet): retry in a moment",
			SinkGroup(name), name).cause(err)
	}
	return groupError(op, err, onGroup(SinkGroup(name), ""))
}

// connectorError maps a connector refusal of the catalog, worded for the connector
// (and task) the call named; anything else as catalogError does.
func connectorError(op string, err error, name string, task ...int32) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, catalog.ErrConnectorNotFound):
		return newError(CodeConnectorNotFound, "Connector %s not found", name).cause(err)
	case errors.Is(err, catalog.ErrConnectorExists):
		return newError(CodeConnectorExists, "Connector %s already exists", name).cause(err)
	case errors.Is(err, catalog.ErrTaskNotFound):
		t := "?"
		if len(task) > 0 {
			t = fmt.Sprint(task[0])
		}
		return newError(CodeTaskNotFound, "Task not found: %s-%s", name, t).cause(err)
	case errors.Is(err, catalog.ErrConnectorNotStopped):
		return newError(CodeConnectorNotStopped, "connector %s is not STOPPED: its offsets are edited only while it is stopped", name).cause(err)
	}
	if ce, ok := connectError(err); ok {
		return ce
	}
	return catalogError(op, err)
}

// principalName is a stored principal as the logs name it.
func principalName(p string) string { return Principal{Name: p}.name() }
