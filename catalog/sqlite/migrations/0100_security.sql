-- Security (issue 20): API keys, ACL bindings, the version both are at, and the audit
-- log of administrative actions (catalog/security.go). Times are unix ms on the
-- database clock; 0 means none.

-- A key's secret is never stored: digest is its SHA-256. A revoked key keeps its row.
CREATE TABLE api_keys (
    id          TEXT    PRIMARY KEY,
    principal   TEXT    NOT NULL,
    digest      BLOB    NOT NULL UNIQUE CHECK (length(digest) = 32),
    description TEXT    NOT NULL DEFAULT '',
    created_by  TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL DEFAULT 0,
    revoked_at  INTEGER NOT NULL DEFAULT 0
);

-- ACL bindings, a set, with package acl's canonical names.
CREATE TABLE acls (
    principal     TEXT    NOT NULL,
    host          TEXT    NOT NULL,
    resource_type TEXT    NOT NULL,
    resource_name TEXT    NOT NULL,
    pattern_type  TEXT    NOT NULL,
    operation     TEXT    NOT NULL,
    permission    TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host, operation, permission)
);

-- One row, bumped by every change to keys or ACLs; nodes poll it.
CREATE TABLE security_state (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO security_state (id, version) VALUES (1, 0);

-- One row per administrative action, written in the action's own transaction.
CREATE TABLE audit_log (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    at            INTEGER NOT NULL,
    principal     TEXT    NOT NULL,
    action        TEXT    NOT NULL,
    resource_type TEXT    NOT NULL,
    resource_name TEXT    NOT NULL,
    details       TEXT    NOT NULL DEFAULT '{}'
);
