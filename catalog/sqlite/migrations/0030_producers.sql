-- Idempotent and transactional producers (catalog/producers.go holds the rules). This
-- replaces 0001's placeholder tables, which nothing wrote. Times are unix milliseconds
-- by the database clock.

DROP TABLE producer_state;
DROP TABLE producers;

-- One row per producer id handed out by InitProducer. AUTOINCREMENT: an id is never
-- handed out twice, so an expired producer's requests can never match a new one.
-- epoch is the current epoch: requests at an older one are fenced. last_used_at is
-- refreshed by InitProducer and by commits (at most every catalog.ProducerTouchInterval),
-- and a producer idle past catalog.Options.ProducerExpiry is deleted with its state.
CREATE TABLE producers (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    transactional_id TEXT    UNIQUE,
    epoch            INTEGER NOT NULL CHECK (epoch >= 0),
    created_at       INTEGER NOT NULL,
    last_used_at     INTEGER NOT NULL
);
CREATE INDEX producers_by_last_used ON producers (last_used_at);

-- A producer's state on one partition: the epoch of its batches and its latest
-- catalog.ProducerBatchesKept batches there, oldest first, as a JSON array of
-- [first_sequence, last_sequence, base_offset], against which a retry is recognised.
CREATE TABLE producer_state (
    topic_id    INTEGER NOT NULL,
    partition   INTEGER NOT NULL,
    producer_id INTEGER NOT NULL,
    epoch       INTEGER NOT NULL,
    batches     TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (topic_id, partition, producer_id)
) WITHOUT ROWID;
CREATE INDEX producer_state_by_producer ON producer_state (producer_id);
