-- Push subscriptions (issue 36): a share group whose records the push role hands to a
-- webhook or a Lambda function. settings is the subscription's JSON
-- (catalog.PushSubscription's settings: topics, target, batch size, linger,
-- concurrency, timeout, retry policy, principal); paused 1 with last_error, or 0; the
-- signing secret; the push role's lease (holder '' released; expires_ms on the database
-- clock, Unix ms; token grows with every new holder). Rules: engine.Push.

CREATE TABLE push_subscriptions (
    group_id   TEXT   PRIMARY KEY,
    settings   TEXT   NOT NULL,
    paused     INTEGER   NOT NULL DEFAULT 0,
    last_error TEXT   NOT NULL DEFAULT '',
    secret     TEXT   NOT NULL,
    created_ms INTEGER   NOT NULL,
    updated_ms INTEGER   NOT NULL,
    holder     TEXT   NOT NULL DEFAULT '',
    token      INTEGER   NOT NULL DEFAULT 0,
    expires_ms INTEGER   NOT NULL DEFAULT 0
);
