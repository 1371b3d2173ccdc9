-- Compactor state (catalog/compact.go).

-- One row per partition the compactor has seen, created lazily by AcquirePartitions.
-- holder/token/lease_until are the lease: token grows with every grant and is the
-- fencing token every write under the lease checks; rows are claimed with FOR UPDATE
-- SKIP LOCKED so compactors never queue behind each other. The rest is the checkpoint
-- a pass leaves for the next. reclaimed_at: a deleted topic's partition whose rows are
-- all gone; it is never leased again. Lock order: partitions, then these rows, then
-- segments.
CREATE TABLE compactor_partitions (
    topic_id      bigint      NOT NULL,
    partition     int         NOT NULL,
    holder        text,
    token         bigint      NOT NULL DEFAULT 0,
    lease_until   timestamptz NOT NULL DEFAULT '-infinity',
    last_pass_at  timestamptz NOT NULL DEFAULT '-infinity',
    clean_offset  bigint      NOT NULL DEFAULT 0,
    tombstone_due bigint      NOT NULL DEFAULT 0,
    compacted_at  timestamptz NOT NULL DEFAULT '-infinity',
    reclaimed_at  timestamptz,
    PRIMARY KEY (topic_id, partition)
);
CREATE INDEX compactor_partitions_due ON compactor_partitions (last_pass_at) WHERE reclaimed_at IS NULL;

-- Whole-catalog jobs (deletion, orphan sweep), leased like partitions.
CREATE TABLE compactor_jobs (
    name        text PRIMARY KEY,
    holder      text,
    token       bigint      NOT NULL DEFAULT 0,
    lease_until timestamptz NOT NULL DEFAULT '-infinity',
    done_at     timestamptz NOT NULL DEFAULT '-infinity'
);

-- The deletion job finds 'deleting' segments by age.
CREATE INDEX segments_deleting ON segments (marked_at) WHERE state = 'deleting';
