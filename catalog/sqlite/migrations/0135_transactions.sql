-- Kafka transactions (docs/design.md "Transactions"; the rules are the engine's,
-- catalog/internal/engine/txn.go). Times are unix milliseconds by the database clock.

-- One row per transactional id the coordinator knows: its producer (the producers row
-- holds the epoch), the state (empty, ongoing, complete_commit, complete_abort), the
-- timeout, when the ongoing transaction began, the identity before the reaper's last
-- bump (prev_*) and the one the last decided transaction ran under (last_*), -1 none.
-- A transaction's partitions, groups and pending offsets are written only with it.
CREATE TABLE transactions (
    transactional_id TEXT    PRIMARY KEY,
    producer_id      INTEGER NOT NULL UNIQUE,
    state            TEXT    NOT NULL CHECK (state IN ('empty', 'ongoing', 'complete_commit', 'complete_abort')),
    timeout_ms       INTEGER NOT NULL CHECK (timeout_ms > 0),
    started_at       INTEGER,
    prev_producer_id INTEGER NOT NULL DEFAULT -1,
    prev_epoch       INTEGER NOT NULL DEFAULT -1,
    last_producer_id INTEGER NOT NULL DEFAULT -1,
    last_epoch       INTEGER NOT NULL DEFAULT -1,
    updated_at       INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX transactions_ongoing ON transactions (started_at) WHERE state = 'ongoing';

-- Each partition of an ongoing transaction; first_offset is where its first batch there
-- landed (NULL until one did). The smallest first_offset of a partition is its last
-- stable offset.
CREATE TABLE txn_partitions (
    transactional_id TEXT    NOT NULL REFERENCES transactions (transactional_id) ON DELETE CASCADE,
    topic_id         INTEGER NOT NULL,
    partition        INTEGER NOT NULL,
    first_offset     INTEGER,
    PRIMARY KEY (transactional_id, topic_id, partition)
) WITHOUT ROWID;
CREATE INDEX txn_partitions_open ON txn_partitions (topic_id, partition, first_offset) WHERE first_offset IS NOT NULL;

CREATE TABLE txn_groups (
    transactional_id TEXT NOT NULL REFERENCES transactions (transactional_id) ON DELETE CASCADE,
    group_name       TEXT NOT NULL,
    PRIMARY KEY (transactional_id, group_name)
) WITHOUT ROWID;

-- TxnOffsetCommit's offsets, waiting for the transaction's commit.
CREATE TABLE txn_offsets (
    transactional_id TEXT    NOT NULL REFERENCES transactions (transactional_id) ON DELETE CASCADE,
    group_name       TEXT    NOT NULL,
    topic_id         INTEGER NOT NULL,
    partition        INTEGER NOT NULL,
    committed_offset INTEGER NOT NULL CHECK (committed_offset >= 0),
    metadata         TEXT    NOT NULL DEFAULT '',
    member_id        TEXT,
    member_epoch     INTEGER,
    PRIMARY KEY (transactional_id, group_name, topic_id, partition)
) WITHOUT ROWID;
CREATE INDEX txn_offsets_by_group ON txn_offsets (group_name);

-- Commit and abort markers: each takes one offset of its partition, which no chunk
-- covers; the reader renders it as a control batch. first_offset is the transaction's
-- first offset on the partition (NULL: it wrote nothing there): an abort row with one is
-- an aborted range.
CREATE TABLE txn_markers (
    topic_id       INTEGER NOT NULL,
    partition      INTEGER NOT NULL,
    marker_offset  INTEGER NOT NULL,
    producer_id    INTEGER NOT NULL,
    producer_epoch INTEGER NOT NULL,
    is_commit      INTEGER NOT NULL,
    timestamp_ms   INTEGER NOT NULL,
    first_offset   INTEGER,
    PRIMARY KEY (topic_id, partition, marker_offset)
) WITHOUT ROWID;
CREATE INDEX txn_markers_aborted ON txn_markers (topic_id, partition, marker_offset) WHERE is_commit = 0 AND first_offset IS NOT NULL;
