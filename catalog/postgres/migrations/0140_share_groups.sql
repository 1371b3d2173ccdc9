-- Share groups (KIP-932; docs/design.md "Share groups"; the rules are the engine's,
-- catalog/internal/engine/share*.go). Times are by the database clock.

-- A share group and its epoch, bumped when its membership or a subscription changes.
CREATE TABLE share_groups (
    name       text        PRIMARY KEY,
    epoch      integer     NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- A member's lease: it leaves when expires_at passes without a heartbeat. topics is
-- the subscription, a sorted JSON array.
CREATE TABLE share_members (
    group_name         text        NOT NULL REFERENCES share_groups (name) ON DELETE CASCADE,
    member_id          text        NOT NULL,
    epoch              integer     NOT NULL,
    topics             text        NOT NULL,
    session_timeout_ms integer     NOT NULL CHECK (session_timeout_ms > 0),
    expires_at         timestamptz NOT NULL,
    PRIMARY KEY (group_name, member_id)
);

-- A share-partition: every record below start_offset is done; state holds the records
-- in flight from there as contiguous offset ranges, each in one state (a JSON array of
-- {f,l,s,c,d,m}: first, last, state, delivery count, lock deadline in unix ms, member),
-- bounded by group.share.partition.max.record.locks.
CREATE TABLE share_partitions (
    group_name   text    NOT NULL REFERENCES share_groups (name) ON DELETE CASCADE,
    topic_id     bigint  NOT NULL,
    partition    integer NOT NULL,
    start_offset bigint  NOT NULL CHECK (start_offset >= 0),
    state        text    NOT NULL DEFAULT '[]',
    PRIMARY KEY (group_name, topic_id, partition)
);

-- Configs set on a group id (IncrementalAlterConfigs on resource type GROUP), kept
-- whether or not the group exists: clients configure a group before its first member.
CREATE TABLE group_configs (
    group_name text PRIMARY KEY,
    configs    text NOT NULL
);
