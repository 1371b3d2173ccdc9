-- Kafka's classic groups (JoinGroup/SyncGroup), catalog/classic.go and
-- catalog/classic_engine.go hold the rules. A group has one type, kept in its row.
-- Times are unix milliseconds by the database clock; every step runs in one immediate
-- transaction, this backend's group lock.
ALTER TABLE groups ADD COLUMN type TEXT NOT NULL DEFAULT 'consumer';

-- The classic state of a group: kept when the group changes type while empty, so its
-- generation never goes back. deadline is the timer of PreparingRebalance and
-- CompletingRebalance (NULL in the other states).
CREATE TABLE classic_groups (
    name              TEXT    PRIMARY KEY REFERENCES groups (name) ON DELETE CASCADE,
    state             TEXT    NOT NULL,
    generation        INTEGER NOT NULL,
    synced_generation INTEGER NOT NULL,
    protocol_type     TEXT    NOT NULL,
    protocol          TEXT    NOT NULL,
    leader            TEXT    NOT NULL,
    deadline          INTEGER
) WITHOUT ROWID;

-- One row per classic member, and per id handed out with MEMBER_ID_REQUIRED (pending).
-- protocols is catalog.EncodeClassicProtocols; topics the subscription (a JSON array, or
-- NULL). Each member also has a row in group_members (its "mirror").
CREATE TABLE classic_members (
    group_name           TEXT    NOT NULL REFERENCES groups (name) ON DELETE CASCADE,
    member_id            TEXT    NOT NULL,
    instance_id          TEXT,
    client_id            TEXT    NOT NULL,
    client_host          TEXT    NOT NULL,
    session_timeout_ms   INTEGER NOT NULL CHECK (session_timeout_ms > 0),
    rebalance_timeout_ms INTEGER NOT NULL CHECK (rebalance_timeout_ms >= 0),
    protocols            BLOB    NOT NULL,
    topics               TEXT,
    assignment           BLOB,
    generation           INTEGER NOT NULL,
    joining              INTEGER NOT NULL,
    syncing              INTEGER NOT NULL,
    pending              INTEGER NOT NULL,
    session_deadline     INTEGER NOT NULL,
    joined_at            INTEGER NOT NULL,
    PRIMARY KEY (group_name, member_id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX classic_members_instance ON classic_members (group_name, instance_id) WHERE instance_id IS NOT NULL;
