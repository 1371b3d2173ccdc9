-- Per-topic usage (issue 32, catalog/usage.go): counts per topic, principal and minute,
-- added by each node in transactions of their own (never inside a flush commit) and
-- dropped after the node's --usage-retention. No foreign key: a deleted topic's rows
-- age out like the others, and a node's late counts for it are not refused.
CREATE TABLE topic_usage (
    topic_id     bigint           NOT NULL,
    principal    text             NOT NULL,
    minute       bigint           NOT NULL, -- unix seconds of the bucket's start
    bytes_in     bigint           NOT NULL DEFAULT 0,
    bytes_out    bigint           NOT NULL DEFAULT 0,
    records_in   bigint           NOT NULL DEFAULT 0,
    records_out  bigint           NOT NULL DEFAULT 0,
    put_requests double precision NOT NULL DEFAULT 0,
    get_requests double precision NOT NULL DEFAULT 0,
    commits      double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (topic_id, minute, principal)
);
-- The retention sweep.
CREATE INDEX topic_usage_minute ON topic_usage (minute);
