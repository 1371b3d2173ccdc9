-- Table topics (issue 35): a topic with iceberg.enabled is also an Iceberg table in its
-- bucket (package tables). Per table, its current metadata file; per partition, the
-- next offset the table does not hold; the tables role's per-partition leases. A table
-- commit moves the metadata location and the offsets in one transaction
-- (engine.Tables.CommitTable), so no range is added twice or skipped.

CREATE TABLE table_topics (
    topic_id          bigint PRIMARY KEY,
    metadata_location text   NOT NULL
);

CREATE TABLE table_offsets (
    topic_id    bigint NOT NULL,
    part        int    NOT NULL,
    next_offset bigint NOT NULL CHECK (next_offset >= 0),
    PRIMARY KEY (topic_id, part)
);

-- holder '' is a released lease; expires_ms is on the database clock (Unix ms).
CREATE TABLE table_leases (
    topic_id   bigint NOT NULL,
    part       int    NOT NULL,
    holder     text   NOT NULL,
    token      bigint NOT NULL,
    expires_ms bigint NOT NULL,
    PRIMARY KEY (topic_id, part)
);
