package streams

import "sync/atomic"

// Metrics counts what an App (or a streamstest driver) did. Read it with Snapshot.
type Metrics struct {
	RecordsProcessed   atomic.Int64
	LateRecordsDropped atomic.Int64
	PoisonRecords      atomic.Int64
	Commits            atomic.Int64 // confirmed commits
	CommitDuplicates   atomic.Int64 // a resent commit answered as already committed
	CommitResends      atomic.Int64 // commits sent again after an unknown or retryable outcome
	EpochResends       atomic.Int64 // commits sent again at a new member epoch (stale_member_epoch)
	CommitsRefused     atomic.Int64 // commits the server refused for good: the task was dropped
	TasksDropped       atomic.Int64 // tasks dropped without a final commit (fenced, lost)
	TasksRestored      atomic.Int64
	RestoredRecords    atomic.Int64
	RepartitionPurges  atomic.Int64
}

// MetricsSnapshot is a copy of Metrics at one moment.
type MetricsSnapshot struct {
	RecordsProcessed, LateRecordsDropped, PoisonRecords          int64
	Commits, CommitDuplicates, CommitResends, EpochResends       int64
	CommitsRefused, TasksDropped, TasksRestored, RestoredRecords int64
	RepartitionPurges                                            int64
}

// Snapshot copies the counters.
func (m *Metrics) Snapshot() MetricsSnapshot {
	return MetricsSnapshot{
		RecordsProcessed: m.RecordsProcessed.Load(), LateRecordsDropped: m.LateRecordsDropped.Load(),
		PoisonRecords: m.PoisonRecords.Load(), Commits: m.Commits.Load(), CommitDuplicates: m.CommitDuplicates.Load(),
		CommitResends: m.CommitResends.Load(), EpochResends: m.EpochResends.Load(), CommitsRefused: m.CommitsRefused.Load(),
		TasksDropped: m.TasksDropped.Load(), TasksRestored: m.TasksRestored.Load(), RestoredRecords: m.RestoredRecords.Load(),
		RepartitionPurges: m.RepartitionPurges.Load(),
	}
}
