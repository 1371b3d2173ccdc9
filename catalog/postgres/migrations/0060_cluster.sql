-- The Kafka front end's view of the cluster (catalog.Cluster).

-- Every topic gets a random UUID (Kafka's topic id) at creation, never reused: the
-- unique index spans deleted topics too. Adding the column with a volatile default
-- gives each existing topic its own UUID.
ALTER TABLE topics ADD COLUMN uuid uuid NOT NULL DEFAULT gen_random_uuid();
CREATE UNIQUE INDEX topics_uuid ON topics (uuid);

-- The node registry: one row per node id ever used. A registration takes an id whose
-- lease has ended (catalog.ChooseNodeID) or a new one; token tells this registration
-- from a later one of the same id, so a node whose id was taken over cannot renew it.
CREATE TABLE kafka_nodes (
    id          int         PRIMARY KEY CHECK (id >= 0),
    addr        text        NOT NULL,
    token       bigint      NOT NULL,
    lease_until timestamptz NOT NULL
);

-- The cluster id, made once by the first node that asks (catalog.NewClusterID).
CREATE TABLE kafka_cluster (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    cluster_id text    NOT NULL
);
