-- Share groups (KIP-932; docs/design.md "Share groups"; the rules are the engine's,
-- catalog/internal/engine/share*.go). Times are unix milliseconds by the database clock.

-- A share group and its epoch, bumped when its membership or a subscription changes.
CREATE TABLE share_groups (
    name       TEXT    PRIMARY KEY,
    epoch      INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

-- A member's lease: it leaves when expires_at passes without a heartbeat. topics is
-- the subscription, a sorted JSON array.
CREATE TABLE share_members (
    group_name         TEXT    NOT NULL REFERENCES share_groups (name) ON DELETE CASCADE,
    member_id          TEXT    NOT NULL,
    epoch              INTEGER NOT NULL,
    topics             TEXT    NOT NULL,
    session_timeout_ms INTEGER NOT NULL CHECK (session_timeout_ms > 0),
    expires_at         INTEGER NOT NULL,
    PRIMARY KEY (group_name, member_id)
) WITHOUT ROWID;

-- A share-partition: every record below start_offset is done; state holds the records
-- in flight from there as contiguous offset ranges, each in one state (a JSON array of
-- {f,l,s,c,d,m}: first, last, state, delivery count, lock deadline, member), bounded by
-- group.share.partition.max.record.locks.
CREATE TABLE share_partitions (
    group_name   TEXT    NOT NULL REFERENCES share_groups (name) ON DELETE CASCADE,
    topic_id     INTEGER NOT NULL,
    partition    INTEGER NOT NULL,
    start_offset INTEGER NOT NULL CHECK (start_offset >= 0),
    state        TEXT    NOT NULL DEFAULT '[]',
    PRIMARY KEY (group_name, topic_id, partition)
) WITHOUT ROWID;

-- Configs set on a group id (IncrementalAlterConfigs on resource type GROUP), kept
-- whether or not the group exists: clients configure a group before its first member.
CREATE TABLE group_configs (
    group_name TEXT PRIMARY KEY,
    configs    TEXT NOT NULL
) WITHOUT ROWID;
