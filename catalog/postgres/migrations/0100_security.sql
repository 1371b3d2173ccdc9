-- Security (issue 20): API keys, ACL bindings, the version both are at, and the audit
-- log of administrative actions (catalog/security.go).

-- A key's secret is never stored: digest is its SHA-256. A revoked key keeps its row,
-- so the audit log's references stay readable and an id is never handed out twice.
CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    principal   text        NOT NULL,
    digest      bytea       NOT NULL UNIQUE CHECK (octet_length(digest) = 32),
    description text        NOT NULL DEFAULT '',
    created_by  text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at  timestamptz,
    revoked_at  timestamptz
);

-- ACL bindings as Kafka has them, a set: the same binding is stored once. Names are
-- package acl's canonical spellings.
CREATE TABLE acls (
    principal     text        NOT NULL,
    host          text        NOT NULL,
    resource_type text        NOT NULL,
    resource_name text        NOT NULL,
    pattern_type  text        NOT NULL,
    operation     text        NOT NULL,
    permission    text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host, operation, permission)
);

-- One row: every change to keys or ACLs locks it first (so such changes serialise; no
-- other transaction locks it) and bumps version, which nodes poll beside the
-- strata_security notifications.
CREATE TABLE security_state (
    id      int    PRIMARY KEY CHECK (id = 1),
    version bigint NOT NULL
);
INSERT INTO security_state (id, version) VALUES (1, 0);

-- One row per administrative action, written in the action's own transaction.
CREATE TABLE audit_log (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    principal     text        NOT NULL,
    action        text        NOT NULL,
    resource_type text        NOT NULL,
    resource_name text        NOT NULL,
    details       jsonb       NOT NULL DEFAULT '{}'
);
