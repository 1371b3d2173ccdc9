-- Connectors (catalog/connect.go holds the rules). Times are unix milliseconds by the
-- database clock. Every write runs in one immediate transaction, which is this
-- backend's lock for all of it.

-- config is the connector's config as JSON (provider references unresolved); topics the
-- topics its tasks used, a sorted JSON array.
CREATE TABLE connectors (
    name         TEXT    PRIMARY KEY,
    type         TEXT    NOT NULL CHECK (type IN ('source', 'sink')),
    config       TEXT    NOT NULL,
    principal    TEXT    NOT NULL,
    target_state TEXT    NOT NULL CHECK (target_state IN ('RUNNING', 'PAUSED', 'STOPPED')),
    worker       TEXT    NOT NULL DEFAULT '',
    topics       TEXT    NOT NULL DEFAULT '[]',
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) WITHOUT ROWID;

-- One row per task: its config, the generation its instance runs under (handed out by
-- connect_generations, never reused), the worker holding it until lease_until, and its
-- last reported state.
CREATE TABLE connector_tasks (
    connector   TEXT    NOT NULL REFERENCES connectors (name) ON DELETE CASCADE,
    task        INTEGER NOT NULL CHECK (task >= 0),
    config      TEXT    NOT NULL,
    generation  INTEGER NOT NULL,
    owner       TEXT,
    lease_until INTEGER,
    state       TEXT    NOT NULL DEFAULT 'UNASSIGNED',
    trace       TEXT    NOT NULL DEFAULT '',
    worker      TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (connector, task)
) WITHOUT ROWID;

CREATE TABLE connect_workers (
    id          TEXT    PRIMARY KEY,
    lease_until INTEGER NOT NULL
) WITHOUT ROWID;

-- The last generation handed out.
CREATE TABLE connect_generations (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL
);
INSERT INTO connect_generations (id, last) VALUES (1, 0);

-- Source offsets: canonical JSON partition → canonical JSON offset. Not tied to the
-- connector row: they outlive a connector's deletion, as Kafka Connect's do.
CREATE TABLE connect_offsets (
    connector  TEXT    NOT NULL,
    partition  TEXT    NOT NULL,
    "offset"   TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (connector, partition)
) WITHOUT ROWID;
