-- Consumer groups (catalog/groups.go holds the rules). Leases are on the database clock.
-- A heartbeat locks its group's row FOR UPDATE and an offset commit FOR SHARE, so
-- commits run side by side but never beside a heartbeat that changes ownership. Lock
-- order, everywhere: partitions (sorted), then producer state, then groups.

-- epoch is the last member epoch handed out: member epochs are unique and increasing
-- within a group, so an epoch from before a rejoin can never match again.
CREATE TABLE groups (
    name       text        PRIMARY KEY,
    assignor   text        NOT NULL,
    epoch      int         NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- prev_epoch is still accepted from heartbeats (an answer that bumped the epoch may
-- have been lost); commits need epoch itself. topics is the subscription, sorted.
CREATE TABLE group_members (
    group_name         text        NOT NULL REFERENCES groups (name) ON DELETE CASCADE,
    member_id          text        NOT NULL,
    epoch              int         NOT NULL,
    prev_epoch         int         NOT NULL,
    topics             text[]      NOT NULL,
    session_timeout_ms bigint      NOT NULL CHECK (session_timeout_ms > 0),
    expires_at         timestamptz NOT NULL,
    joined_at          timestamptz NOT NULL,
    PRIMARY KEY (group_name, member_id)
);

-- One row per partition that has an owner (the member entitled to it now) or a target
-- (the member the assignor wants it at). owner <> target is a revocation in progress:
-- the partition is granted to target only once owner is NULL.
CREATE TABLE group_assignments (
    group_name text   NOT NULL REFERENCES groups (name) ON DELETE CASCADE,
    topic_id   bigint NOT NULL,
    partition  int    NOT NULL,
    owner      text,
    target     text,
    PRIMARY KEY (group_name, topic_id, partition)
);

-- Committed offsets: the next offset to read. Keyed by topic id, so a topic recreated
-- under the same name starts without offsets.
CREATE TABLE group_offsets (
    group_name       text        NOT NULL REFERENCES groups (name) ON DELETE CASCADE,
    topic_id         bigint      NOT NULL,
    partition        int         NOT NULL,
    committed_offset bigint      NOT NULL CHECK (committed_offset >= 0),
    metadata         text        NOT NULL DEFAULT '',
    member_id        text,
    member_epoch     int,
    committed_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (group_name, topic_id, partition)
);
