package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

// Backend is every interface the engine's transaction scripts run over, which a backend
// implements with one adapter (its transactions and statements).
type Backend interface {
	SwapBackend
	ClassicBackend
	GroupBackend
	ProducerBackend
	NodeBackend
	TxnBackend
	RegistryDB
	InventoryBackend
	ConnectBackend
	ShareBackend
	QuotaBackend
}

// Methods are the catalog methods whose transaction scripts are the engine's, run over
// DB. Each backend's Catalog embeds it (as it embeds Registry), so such a method is
// written once, not once per backend: a new one is a script here, a line below, and the
// statements each backend's adapter gives.
type Methods struct{ DB Backend }

// SwapChunks implements catalog.Compaction (SwapChunks).
func (m Methods) SwapChunks(ctx context.Context, s catalog.Swap) error {
	return SwapChunks(ctx, m.DB, s)
}

// Heartbeat implements catalog.Groups (Heartbeat).
func (m Methods) Heartbeat(ctx context.Context, hb catalog.Heartbeat) (catalog.HeartbeatResult, error) {
	return Heartbeat(ctx, m.DB, hb)
}

// CommitOffsets implements catalog.Groups (CommitOffsets).
func (m Methods) CommitOffsets(ctx context.Context, oc catalog.OffsetCommit) error {
	return CommitOffsets(ctx, m.DB, "commit", oc)
}

// ResetOffsets implements catalog.Groups: offsets set while the group has no live
// members, a commit from outside the group.
func (m Methods) ResetOffsets(ctx context.Context, group string, offsets []catalog.CommitOffset) error {
	return CommitOffsets(ctx, m.DB, "reset", catalog.OffsetCommit{Group: group, Offsets: offsets})
}

// JoinGroup implements catalog.ClassicGroups (JoinGroup).
func (m Methods) JoinGroup(ctx context.Context, j catalog.ClassicJoin) (catalog.ClassicJoinResult, error) {
	return JoinGroup(ctx, m.DB, j)
}

// SyncGroup implements catalog.ClassicGroups (SyncGroup).
func (m Methods) SyncGroup(ctx context.Context, s catalog.ClassicSync) (catalog.ClassicSyncResult, error) {
	return SyncGroup(ctx, m.DB, s)
}

// ClassicHeartbeat implements catalog.ClassicGroups (ClassicHeartbeat).
func (m Methods) ClassicHeartbeat(ctx context.Context, h catalog.ClassicHeartbeat) (bool, error) {
	return ClassicHeartbeat(ctx, m.DB, h)
}

// LeaveGroup implements catalog.ClassicGroups (LeaveGroup).
func (m Methods) LeaveGroup(ctx context.Context, group string, members []catalog.ClassicLeaver) ([]error, error) {
	return LeaveGroup(ctx, m.DB, group, members)
}

// CommitClassicOffsets implements catalog.ClassicGroups (CommitClassicOffsets).
func (m Methods) CommitClassicOffsets(ctx context.Context, cc catalog.ClassicCommit) error {
	return CommitClassicOffsets(ctx, m.DB, cc)
}

// InitProducer implements catalog.Producers (InitProducer).
func (m Methods) InitProducer(ctx context.Context, transactionalID string, current *catalog.Producer, owner string) (catalog.Producer, error) {
	return InitProducer(ctx, m.DB, m.DB, transactionalID, current, owner)
}

// RegisterNode implements catalog.Cluster (RegisterNode).
func (m Methods) RegisterNode(ctx context.Context, addr string, ttl time.Duration) (catalog.NodeLease, error) {
	return RegisterNode(ctx, m.DB, addr, ttl)
}

// InitTxnProducer implements catalog.Transactions: a transactional id's identity.
func (m Methods) InitTxnProducer(ctx context.Context, req catalog.InitTxn) (catalog.Producer, error) {
	p, err := InitTxnProducer(ctx, m.DB, req)
	if err != nil {
		return catalog.Producer{}, fmt.Errorf("%s: init producer %q: %w", m.DB.Name(), req.TransactionalID, err)
	}
	return p, nil
}

// AddTxnPartitions implements catalog.Transactions: partitions join a transaction.
func (m Methods) AddTxnPartitions(ctx context.Context, req catalog.TxnPartitions) error {
	if err := AddTxnPartitions(ctx, m.DB, req); err != nil {
		return fmt.Errorf("%s: add partitions to transaction %q: %w", m.DB.Name(), req.TransactionalID, err)
	}
	return nil
}

// AddTxnGroup implements catalog.Transactions: a group joins a transaction.
func (m Methods) AddTxnGroup(ctx context.Context, req catalog.TxnGroup) error {
	if err := AddTxnGroup(ctx, m.DB, req); err != nil {
		return fmt.Errorf("%s: add group %s to transaction %q: %w", m.DB.Name(), req.Group, req.TransactionalID, err)
	}
	return nil
}

// TxnCommitOffsets implements catalog.Transactions: a transaction's pending offsets.
func (m Methods) TxnCommitOffsets(ctx context.Context, req catalog.TxnOffsetCommit) error {
	if err := TxnCommitOffsets(ctx, m.DB, req); err != nil {
		return fmt.Errorf("%s: transactional offset commit of %q to group %s: %w", m.DB.Name(), req.TransactionalID, req.Group, err)
	}
	return nil
}

// EndTxn implements catalog.Transactions: a transaction commits or aborts.
func (m Methods) EndTxn(ctx context.Context, req catalog.EndTxn) (catalog.EndTxnResult, error) {
	res, err := EndTxn(ctx, m.DB, req)
	if err != nil {
		return catalog.EndTxnResult{}, fmt.Errorf("%s: end transaction %q: %w", m.DB.Name(), req.TransactionalID, err)
	}
	return res, nil
}

// classicReads are the held classic calls' reads over DB.
func (m Methods) classicReads() ClassicReads {
	return ClassicReads{Read: m.DB.ReadClassic, Tick: func(ctx context.Context, group string) (*ClassicGroup, time.Time, error) {
		return TickClassic(ctx, m.DB, group)
	}}
}

// PollJoin implements catalog.ClassicGroups: a held JoinGroup's answer.
func (m Methods) PollJoin(ctx context.Context, group, member, instance string, wait int32) (catalog.ClassicJoinAnswer, catalog.ClassicPoll, error) {
	return m.classicReads().PollJoin(ctx, group, member, instance, wait)
}

// PollSync implements catalog.ClassicGroups: a held SyncGroup's answer.
func (m Methods) PollSync(ctx context.Context, group, member, instance string, generation int32) (catalog.ClassicSyncResult, catalog.ClassicPoll, error) {
	return m.classicReads().PollSync(ctx, group, member, instance, generation)
}

// DescribeClassicGroup implements catalog.ClassicGroups: a classic group described.
func (m Methods) DescribeClassicGroup(ctx context.Context, group string) (catalog.ClassicDescription, error) {
	return m.classicReads().Describe(ctx, group)
}

// InventorySegments implements catalog.Inventory (InventoryPages): each page of
// segments read with its chunk rows in one query.
func (m Methods) InventorySegments(ctx context.Context, fn func(catalog.SegmentRecord) error) error {
	return InventoryPages(ctx, m.DB.InventoryPage, fn)
}

// Connector implements catalog.Connect: one connector (a name that cannot be one is not
// found).
func (m Methods) Connector(ctx context.Context, name string) (catalog.Connector, error) {
	var cs []catalog.Connector
	if name == "" || catalog.ValidateConnectorName(name) == nil {
		var err error
		if cs, err = m.DB.ReadConnectors(ctx, name); err != nil {
			return catalog.Connector{}, fmt.Errorf("%s: connector %s: %w", m.DB.Name(), name, err)
		}
	}
	if len(cs) == 0 {
		return catalog.Connector{}, fmt.Errorf("%s: %w: %s", m.DB.Name(), catalog.ErrConnectorNotFound, name)
	}
	return cs[0], nil
}

// Connectors implements catalog.Connect: every connector.
func (m Methods) Connectors(ctx context.Context) ([]catalog.Connector, error) {
	cs, err := m.DB.ReadConnectors(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("%s: connectors: %w", m.DB.Name(), err)
	}
	return cs, nil
}

// ShareHeartbeat implements catalog.ShareGroups (ShareHeartbeat).
func (m Methods) ShareHeartbeat(ctx context.Context, hb catalog.ShareHeartbeat) (catalog.ShareMember, error) {
	return ShareHeartbeat(ctx, m.DB, hb)
}

// ShareAcquire implements catalog.ShareGroups (ShareAcquire).
func (m Methods) ShareAcquire(ctx context.Context, req catalog.ShareAcquire) (catalog.ShareAcquireResult, error) {
	return ShareAcquire(ctx, m.DB, req)
}

// ShareAcknowledge implements catalog.ShareGroups (ShareAcknowledge).
func (m Methods) ShareAcknowledge(ctx context.Context, req catalog.ShareAck) ([]error, error) {
	return ShareAcknowledge(ctx, m.DB, req)
}

// DescribeShareGroup implements catalog.ShareGroups (DescribeShareGroup).
func (m Methods) DescribeShareGroup(ctx context.Context, group string) (catalog.ShareGroupDescription, error) {
	return DescribeShareGroup(ctx, m.DB, group)
}

// ListShareGroups implements catalog.ShareGroups (ListShareGroups).
func (m Methods) ListShareGroups(ctx context.Context) ([]string, error) {
	return ListShareGroups(ctx, m.DB)
}

// DeleteShareGroup implements catalog.ShareGroups (DeleteShareGroup).
func (m Methods) DeleteShareGroup(ctx context.Context, group string) error {
	return DeleteShareGroup(ctx, m.DB, group)
}

// ShareOffsets implements catalog.ShareGroups (ShareOffsets).
func (m Methods) ShareOffsets(ctx context.Context, group string) ([]catalog.ShareOffset, error) {
	return ShareOffsets(ctx, m.DB, group)
}

// AlterShareOffsets implements catalog.ShareGroups (AlterShareOffsets).
func (m Methods) AlterShareOffsets(ctx context.Context, group string, offsets []catalog.ShareOffset) error {
	return AlterShareOffsets(ctx, m.DB, group, offsets)
}

// DeleteShareOffsets implements catalog.ShareGroups (DeleteShareOffsets).
func (m Methods) DeleteShareOffsets(ctx context.Context, group string, topicIDs []int64) error {
	return DeleteShareOffsets(ctx, m.DB, group, topicIDs)
}

// IsShareGroup implements catalog.ShareGroups (IsShareGroup).
func (m Methods) IsShareGroup(ctx context.Context, group string) (bool, error) {
	return IsShareGroup(ctx, m.DB, group)
}

// GroupConfigs implements catalog.ShareGroups (GroupConfigs).
func (m Methods) GroupConfigs(ctx context.Context, group string) (map[string]string, error) {
	return GroupConfigs(ctx, m.DB, group)
}

// SetGroupConfigs implements catalog.ShareGroups (SetGroupConfigs).
func (m Methods) SetGroupConfigs(ctx context.Context, group string, configs map[string]string) error {
	return SetGroupConfigs(ctx, m.DB, group, configs)
}

// ShareDLQPending implements catalog.ShareDLQ (ShareDLQPending).
func (m Methods) ShareDLQPending(ctx context.Context, max int) ([]catalog.ShareDLQWork, error) {
	return ShareDLQPending(ctx, m.DB, max)
}

// AcquireShareDLQLease implements catalog.ShareDLQ (AcquireShareDLQLease).
func (m Methods) AcquireShareDLQLease(ctx context.Context, group, holder string, ttl time.Duration) (catalog.ShareDLQLease, bool, error) {
	return AcquireShareDLQLease(ctx, m.DB, group, holder, ttl)
}

// ArchiveShareDLQ implements catalog.ShareDLQ (ArchiveShareDLQ).
func (m Methods) ArchiveShareDLQ(ctx context.Context, c catalog.ShareDLQCommit) error {
	return ArchiveShareDLQ(ctx, m.DB, c)
}

// ReleaseShareDLQLease implements catalog.ShareDLQ (ReleaseShareDLQLease).
func (m Methods) ReleaseShareDLQLease(ctx context.Context, l catalog.ShareDLQLease) error {
	return ReleaseShareDLQLease(ctx, m.DB, l)
}
