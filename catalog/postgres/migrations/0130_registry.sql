-- Schema registry (issue 31): schemas by global id, the versions of each subject, the
-- references between them, and the registry's and each subject's compatibility level
-- and mode (catalog/registry.go).

-- A schema keeps its row for ever once registered, so its id is never handed to another
-- schema; fingerprint is the registry's identity of it (canonical text, type, refs).
CREATE TABLE registry_schemas (
    id          bigint PRIMARY KEY CHECK (id > 0),
    schema_type text   NOT NULL,
    schema_text text   NOT NULL,
    refs        text   NOT NULL DEFAULT '[]', -- JSON: [{name, subject, version}]
    fingerprint text   NOT NULL UNIQUE
);

-- A subject's versions; deleted is a soft delete. A permanent delete removes the row.
CREATE TABLE registry_versions (
    subject   text    NOT NULL,
    version   int     NOT NULL CHECK (version > 0),
    schema_id bigint  NOT NULL REFERENCES registry_schemas (id),
    deleted   boolean NOT NULL DEFAULT false,
    PRIMARY KEY (subject, version)
);
CREATE INDEX registry_versions_schema ON registry_versions (schema_id);

-- The subject versions each schema references (its refs, as rows to look up by target).
CREATE TABLE registry_refs (
    schema_id bigint NOT NULL REFERENCES registry_schemas (id),
    subject   text   NOT NULL,
    version   int    NOT NULL,
    PRIMARY KEY (schema_id, subject, version)
);
CREATE INDEX registry_refs_target ON registry_refs (subject, version);

-- Compatibility level and mode, per subject; the subject '' is the registry's own.
CREATE TABLE registry_config (
    subject       text PRIMARY KEY,
    compatibility text NOT NULL DEFAULT '',
    mode          text NOT NULL DEFAULT ''
);

-- One row: every registry write locks it first (writes serialise, so a compatibility
-- check sees every version committed before its own), and it holds the next id.
CREATE TABLE registry_state (
    id      int    PRIMARY KEY CHECK (id = 1),
    next_id bigint NOT NULL
);
INSERT INTO registry_state (id, next_id) VALUES (1, 1);
