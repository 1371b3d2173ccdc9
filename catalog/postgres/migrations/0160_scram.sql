-- SCRAM credentials (issue 34, catalog/scram.go): per user and mechanism (Kafka's
-- numbers: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512) the salt, the iteration count and the keys
-- derived from the salted password; never the password. Changes go through the security
-- transaction (security_state's version, strata_security notifications).
CREATE TABLE scram_credentials (
    user_name  text     NOT NULL,
    mechanism  smallint NOT NULL CHECK (mechanism IN (1, 2)),
    salt       bytea    NOT NULL,
    iterations integer  NOT NULL CHECK (iterations >= 4096),
    stored_key bytea    NOT NULL,
    server_key bytea    NOT NULL,
    PRIMARY KEY (user_name, mechanism)
);
