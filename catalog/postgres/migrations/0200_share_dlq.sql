-- Dead-letter topics for share groups (KIP-1191; docs/design.md "Share groups"; the rules
-- are catalog/internal/engine/share_dlq.go). Records pending dead-lettering are a state
-- of share_partitions' in-flight ranges; a group's mover holds this lease, whose token
-- grows with every new holder so that a copy's flush commit refuses a mover whose lease
-- was taken over. holder '' is a released lease; expires_ms is on the database clock
-- (Unix ms).
CREATE TABLE share_dlq_leases (
    group_name text   PRIMARY KEY,
    holder     text   NOT NULL,
    token      bigint NOT NULL,
    expires_ms bigint NOT NULL
);

-- The mover's look for pending records (share.go's dlqPendingSQL, whose WHERE this
-- predicate must equal) reads only the share-partitions that have some.
CREATE INDEX share_partitions_dlq_pending ON share_partitions (group_name, topic_id, partition)
    WHERE state LIKE '%"s":4%';
