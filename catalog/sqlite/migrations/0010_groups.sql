-- Consumer groups (catalog/groups.go holds the rules). Times are unix milliseconds by
-- the database clock; a member's lease ends at expires_at. Every write to a group's
-- rows runs in one immediate transaction, which is this backend's group lock.

-- epoch is the last member epoch handed out: member epochs are unique and increasing
-- within a group, so an epoch from before a rejoin can never match again.
CREATE TABLE groups (
    name       TEXT    PRIMARY KEY,
    assignor   TEXT    NOT NULL,
    epoch      INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

-- prev_epoch is still accepted from heartbeats (an answer that bumped the epoch may
-- have been lost); commits need epoch itself. topics is the subscription, a sorted JSON
-- array of names.
CREATE TABLE group_members (
    group_name         TEXT    NOT NULL REFERENCES groups (name) ON DELETE CASCADE,
    member_id          TEXT    NOT NULL,
    epoch              INTEGER NOT NULL,
    prev_epoch         INTEGER NOT NULL,
    topics             TEXT    NOT NULL,
    session_timeout_ms INTEGER NOT NULL CHECK (session_timeout_ms > 0),
    expires_at         INTEGER NOT NULL,
    joined_at          INTEGER NOT NULL,
    PRIMARY KEY (group_name, member_id)
) WITHOUT ROWID;

-- One row per partition that has an owner (the member entitled to it now) or a target
-- (the member the assignor wants it at). owner <> target is a revocation in progress:
-- the partition is granted to target only once owner is NULL.
CREATE TABLE group_assignments (
    group_name TEXT    NOT NULL REFERENCES groups (name) ON DELETE CASCADE,
    topic_id   INTEGER NOT NULL,
    partition  INTEGER NOT NULL,
    owner      TEXT,
    target     TEXT,
    PRIMARY KEY (group_name, topic_id, partition)
) WITHOUT ROWID;

-- Committed offsets: the next offset to read. Keyed by topic id, so a topic recreated
-- under the same name starts without offsets.
CREATE TABLE group_offsets (
    group_name       TEXT    NOT NULL REFERENCES groups (name) ON DELETE CASCADE,
    topic_id         INTEGER NOT NULL,
    partition        INTEGER NOT NULL,
    committed_offset INTEGER NOT NULL CHECK (committed_offset >= 0),
    metadata         TEXT    NOT NULL DEFAULT '',
    member_id        TEXT,
    member_epoch     INTEGER,
    committed_at     INTEGER NOT NULL,
    PRIMARY KEY (group_name, topic_id, partition)
) WITHOUT ROWID;
