-- Strata catalog, SQLite. Times are unix milliseconds by the database clock. Offsets are
-- assigned only by the commit (catalog.Plan.Assign); nothing else writes watermarks.

-- A topic's id is never reused (AUTOINCREMENT), so a topic deleted and recreated under
-- the same name never sees the old one's rows. Deletion only stamps deleted_at: the
-- compactor reclaims the data later. configs holds the explicit configs as a JSON object.
CREATE TABLE topics (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL,
    partitions INTEGER NOT NULL CHECK (partitions > 0),
    configs    TEXT    NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL,
    deleted_at INTEGER
);
CREATE UNIQUE INDEX topics_live_name ON topics (name) WHERE deleted_at IS NULL;

-- max_timestamp is the running maximum timestamp of the partition's last chunk (-1: no
-- chunk yet), the seed of the next chunk's running_max_timestamp.
CREATE TABLE partitions (
    topic_id         INTEGER NOT NULL REFERENCES topics (id),
    partition        INTEGER NOT NULL CHECK (partition >= 0),
    log_start_offset INTEGER NOT NULL DEFAULT 0,
    high_watermark   INTEGER NOT NULL DEFAULT 0,
    bytes            INTEGER NOT NULL DEFAULT 0,
    max_timestamp    INTEGER NOT NULL DEFAULT -1,
    PRIMARY KEY (topic_id, partition)
) WITHOUT ROWID;

-- One row per object the catalog knows: 'live' once committed, 'aborted' when fenced by
-- Settle (the commit can never land; the sweep deletes the object), 'deleting' once the
-- compactor has dropped its chunk rows and waits out the grace period. marked_at is when
-- the row left 'live'.
CREATE TABLE segments (
    id         INTEGER PRIMARY KEY,
    key        TEXT    NOT NULL UNIQUE,
    size       INTEGER NOT NULL,
    state      TEXT    NOT NULL CHECK (state IN ('live', 'aborted', 'deleting')),
    created_at INTEGER NOT NULL,
    marked_at  INTEGER
);
CREATE INDEX segments_by_state ON segments (state, marked_at);

-- A chunk row is a contiguous offset range of one partition at a byte range of one
-- object. running_max_timestamp is the partition's maximum timestamp up to and including
-- this chunk, non-decreasing in offset order, so a lookup by time is an index seek.
-- chunks_by_offset is UNIQUE: two rows claiming one offset is a bug to refuse, not store.
CREATE TABLE chunks (
    id                    INTEGER PRIMARY KEY,
    topic_id              INTEGER NOT NULL,
    partition             INTEGER NOT NULL,
    base_offset           INTEGER NOT NULL,
    last_offset           INTEGER NOT NULL CHECK (last_offset >= base_offset),
    segment_id            INTEGER NOT NULL REFERENCES segments (id),
    pos                   INTEGER NOT NULL,
    len                   INTEGER NOT NULL,
    max_timestamp         INTEGER NOT NULL,
    running_max_timestamp INTEGER NOT NULL,
    real_offsets          INTEGER NOT NULL DEFAULT 0,
    FOREIGN KEY (topic_id, partition) REFERENCES partitions (topic_id, partition)
);
CREATE UNIQUE INDEX chunks_by_offset ON chunks (topic_id, partition, last_offset);
CREATE INDEX chunks_by_time ON chunks (topic_id, partition, running_max_timestamp, last_offset);
CREATE INDEX chunks_by_segment ON chunks (segment_id);

-- Idempotent producers (exactly-once issue): ids and epochs handed out, and per
-- partition the last batch committed, against which a retry is recognised.
CREATE TABLE producers (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    transactional_id TEXT UNIQUE,
    epoch            INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE TABLE producer_state (
    producer_id    INTEGER NOT NULL,
    producer_epoch INTEGER NOT NULL,
    topic_id       INTEGER NOT NULL,
    partition      INTEGER NOT NULL,
    first_sequence INTEGER NOT NULL, -- base sequence of the last batch committed
    last_sequence  INTEGER NOT NULL, -- its last sequence
    base_offset    INTEGER NOT NULL, -- its base offset, answered again to a duplicate
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (producer_id, topic_id, partition)
) WITHOUT ROWID;
