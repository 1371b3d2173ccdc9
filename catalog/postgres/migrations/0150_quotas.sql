-- Quotas (issue 34): Kafka's client quotas and Strata's caps per principal
-- (catalog/quotas.go). An entity is (user_name, client_id); '' means the entity has no
-- such part, '<default>' is the default. Changes run in the security transaction
-- (security_state's version and the strata_security notification).
CREATE TABLE quotas (
    user_name text             NOT NULL,
    client_id text             NOT NULL,
    quota_key text             NOT NULL,
    value     double precision NOT NULL CHECK (value >= 0),
    PRIMARY KEY (user_name, client_id, quota_key)
);

-- One row per principal that created a topic or a connector: a creation updates it
-- first, which locks it, so creations by one principal serialise while the cap is
-- counted (docs/design.md's lock order: principals first).
CREATE TABLE quota_principals (
    principal text   PRIMARY KEY,
    creations bigint NOT NULL
);

-- Who created each topic, for topic_count (a deleted topic stops counting: the count
-- joins live topics).
CREATE TABLE topic_owners (
    topic_id  bigint PRIMARY KEY REFERENCES topics (id) ON DELETE CASCADE,
    principal text   NOT NULL
);
CREATE INDEX topic_owners_principal ON topic_owners (principal);
CREATE INDEX connectors_principal ON connectors (principal);
