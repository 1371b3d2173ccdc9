-- Compactor state (catalog/compact.go). Times are unix milliseconds by the database
-- clock, as everywhere in this schema.

-- One row per partition the compactor has seen, created lazily by AcquirePartitions.
-- holder/token/lease_until are the lease: token grows with every grant and is the
-- fencing token every write under the lease checks. The rest is the checkpoint a pass
-- leaves for the next. reclaimed_at: a deleted topic's partition whose rows are all
-- gone; it is never leased again. No foreign key: the row may outlive nothing, and the
-- partitions table belongs to the commit path.
CREATE TABLE compactor_partitions (
    topic_id      INTEGER NOT NULL,
    partition     INTEGER NOT NULL,
    holder        TEXT,
    token         INTEGER NOT NULL DEFAULT 0,
    lease_until   INTEGER NOT NULL DEFAULT 0,
    last_pass_at  INTEGER NOT NULL DEFAULT 0,
    clean_offset  INTEGER NOT NULL DEFAULT 0,
    tombstone_due INTEGER NOT NULL DEFAULT 0,
    compacted_at  INTEGER NOT NULL DEFAULT 0,
    reclaimed_at  INTEGER,
    PRIMARY KEY (topic_id, partition)
) WITHOUT ROWID;
CREATE INDEX compactor_partitions_due ON compactor_partitions (last_pass_at) WHERE reclaimed_at IS NULL;

-- Whole-catalog jobs (deletion, orphan sweep), leased like partitions.
CREATE TABLE compactor_jobs (
    name        TEXT PRIMARY KEY,
    holder      TEXT,
    token       INTEGER NOT NULL DEFAULT 0,
    lease_until INTEGER NOT NULL DEFAULT 0,
    done_at     INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- The sweep and the deletion job find segments by state and age.
CREATE INDEX segments_by_state_created ON segments (state, created_at);
