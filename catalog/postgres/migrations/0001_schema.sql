-- Strata catalog schema. Offsets live only here: every row that decides what a reader
-- may see is written by the one-transaction commit (0002) or by topic administration.

-- A topic's id is an identity that is never reused: a topic deleted and recreated under
-- the same name gets a new id and never sees the old one's rows. Deleted topics keep
-- their row (deleted_at) so their chunks and objects can be reclaimed later; only live
-- names must be unique.
CREATE TABLE topics (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL,
    partitions int         NOT NULL CHECK (partitions > 0),
    configs    jsonb       NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    deleted_at timestamptz
);
CREATE UNIQUE INDEX topics_live_name ON topics (name) WHERE deleted_at IS NULL;

-- One row per partition; the commit locks these rows (sorted) and advances
-- high_watermark. max_timestamp is the running maximum of every chunk committed so far
-- (-1, catalog.NoTimestamp, before the first), so a new chunk's running_max_timestamp
-- needs no lookup of the previous chunk.
CREATE TABLE partitions (
    topic_id         bigint NOT NULL REFERENCES topics (id),
    partition        int    NOT NULL CHECK (partition >= 0),
    log_start_offset bigint NOT NULL DEFAULT 0,
    high_watermark   bigint NOT NULL DEFAULT 0,
    bytes            bigint NOT NULL DEFAULT 0,
    max_timestamp    bigint NOT NULL DEFAULT -1,
    PRIMARY KEY (topic_id, partition),
    CHECK (log_start_offset <= high_watermark)
);

-- One row per object key ever committed or fenced. The unique key is what the fencing
-- insert of a settle races against: 'aborted' means the key can never commit.
CREATE TABLE segments (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        text        NOT NULL UNIQUE,
    size       bigint      NOT NULL CHECK (size >= 0),
    state      text        NOT NULL CHECK (state IN ('live', 'aborted', 'deleting')),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    marked_at  timestamptz
);
CREATE INDEX segments_state ON segments (state, created_at) WHERE state <> 'live';

-- A chunk is a contiguous offset range of one partition at a byte range of one object.
-- The primary key doubles as the offset lookup index (a seek on last_offset >= offset);
-- the second index answers "first chunk whose running maximum timestamp reaches ts".
CREATE TABLE chunks (
    topic_id              bigint  NOT NULL,
    partition             int     NOT NULL,
    base_offset           bigint  NOT NULL,
    last_offset           bigint  NOT NULL,
    segment_id            bigint  NOT NULL REFERENCES segments (id),
    pos                   bigint  NOT NULL CHECK (pos >= 0),
    len                   bigint  NOT NULL CHECK (len > 0),
    max_timestamp         bigint  NOT NULL,
    running_max_timestamp bigint  NOT NULL,
    real_offsets          boolean NOT NULL DEFAULT false,
    PRIMARY KEY (topic_id, partition, last_offset),
    CHECK (base_offset <= last_offset)
);
CREATE INDEX chunks_time ON chunks (topic_id, partition, running_max_timestamp, last_offset);
-- Settle reads a segment's rows back; the compactor and the sweep find rows by object.
CREATE INDEX chunks_segment ON chunks (segment_id);

-- Idempotent producer state per partition, locked after the partitions (lock order:
-- partitions, producer state, groups). The sequence rules arrive with idempotence; the
-- table is here so the commit's lock order is fixed from the start.
CREATE TABLE producer_state (
    producer_id    bigint      NOT NULL,
    topic_id       bigint      NOT NULL,
    partition      int         NOT NULL,
    epoch          smallint    NOT NULL,
    first_sequence int         NOT NULL, -- of the latest committed batch
    last_sequence  int         NOT NULL,
    base_offset    bigint      NOT NULL,
    last_offset    bigint      NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (topic_id, partition, producer_id)
);
