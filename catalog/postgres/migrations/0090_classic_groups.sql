-- Kafka's classic groups (JoinGroup/SyncGroup), catalog/classic.go and
-- catalog/classic_engine.go hold the rules. A group has one type, kept in its row;
-- a classic member's step locks the group's row FOR UPDATE (the "groups" place of the
-- lock order) and rewrites these rows. Deadlines are on the database clock.
ALTER TABLE groups ADD COLUMN type text NOT NULL DEFAULT 'consumer' CHECK (type IN ('consumer', 'classic'));

-- The classic state of a group: kept when the group changes type while empty, so its
-- generation never goes back. deadline is the timer of PreparingRebalance and
-- CompletingRebalance (NULL in the other states).
CREATE TABLE classic_groups (
    name              text        PRIMARY KEY REFERENCES groups (name) ON DELETE CASCADE,
    state             text        NOT NULL,
    generation        int         NOT NULL,
    synced_generation int         NOT NULL,
    protocol_type     text        NOT NULL,
    protocol          text        NOT NULL,
    leader            text        NOT NULL,
    deadline          timestamptz
);

-- One row per classic member, and per id handed out with MEMBER_ID_REQUIRED (pending).
-- protocols is catalog.EncodeClassicProtocols; topics the subscription its consumer
-- protocol metadata names. Each member also has a row in group_members (its "mirror",
-- catalog.ClassicGroup.Mirror), so the rules about a group's live members see it.
CREATE TABLE classic_members (
    group_name           text        NOT NULL REFERENCES groups (name) ON DELETE CASCADE,
    member_id            text        NOT NULL,
    instance_id          text,
    client_id            text        NOT NULL,
    client_host          text        NOT NULL,
    session_timeout_ms   bigint      NOT NULL CHECK (session_timeout_ms > 0),
    rebalance_timeout_ms bigint      NOT NULL CHECK (rebalance_timeout_ms >= 0),
    protocols            bytea       NOT NULL,
    topics               text[],
    assignment           bytea,
    generation           int         NOT NULL,
    joining              boolean     NOT NULL,
    syncing              boolean     NOT NULL,
    pending              boolean     NOT NULL,
    session_deadline     timestamptz NOT NULL,
    joined_at            timestamptz NOT NULL,
    PRIMARY KEY (group_name, member_id)
);
CREATE UNIQUE INDEX classic_members_instance ON classic_members (group_name, instance_id) WHERE instance_id IS NOT NULL;
