-- Per-topic usage (issue 32, catalog/usage.go): counts per topic, principal and minute,
-- added by each node in transactions of their own (never inside a flush commit) and
-- dropped after the node's --usage-retention. No foreign key: a deleted topic's rows
-- age out like the others, and a node's late counts for it are not refused.
CREATE TABLE topic_usage (
    topic_id     INTEGER          NOT NULL,
    principal    TEXT             NOT NULL,
    minute       INTEGER          NOT NULL, -- unix seconds of the bucket's start
    bytes_in     INTEGER          NOT NULL DEFAULT 0,
    bytes_out    INTEGER          NOT NULL DEFAULT 0,
    records_in   INTEGER          NOT NULL DEFAULT 0,
    records_out  INTEGER          NOT NULL DEFAULT 0,
    put_requests REAL             NOT NULL DEFAULT 0,
    get_requests REAL             NOT NULL DEFAULT 0,
    commits      REAL             NOT NULL DEFAULT 0,
    PRIMARY KEY (topic_id, minute, principal)
);
-- The retention sweep.
CREATE INDEX topic_usage_minute ON topic_usage (minute);
