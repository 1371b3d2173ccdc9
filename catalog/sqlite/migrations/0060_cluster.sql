-- The Kafka front end's view of the cluster (catalog.Cluster).

-- Every topic gets a random UUID (Kafka's topic id) at creation, never reused: the
-- unique index spans deleted topics too. New topics get a version-4 UUID from Go
-- (catalog.NewUUID); existing ones 16 random bytes (randomblob is evaluated per row).
ALTER TABLE topics ADD COLUMN uuid BLOB;
UPDATE topics SET uuid = randomblob(16);
CREATE UNIQUE INDEX topics_uuid ON topics (uuid);

-- The node registry: one row per node id ever used (see catalog.ChooseNodeID); times
-- are unix ms on the database clock.
CREATE TABLE kafka_nodes (
    id          INTEGER PRIMARY KEY CHECK (id >= 0),
    addr        TEXT    NOT NULL,
    token       INTEGER NOT NULL,
    lease_until INTEGER NOT NULL
);

-- The cluster id, made once by the first node that asks (catalog.NewClusterID).
CREATE TABLE kafka_cluster (
    singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
    cluster_id TEXT    NOT NULL
);
