-- Push subscriptions (issue 36): a share group whose records the push role hands to a
-- webhook or a Lambda function. settings is the subscription's JSON
-- (catalog.PushSubscription's settings: topics, target, batch size, linger,
-- concurrency, timeout, retry policy, principal); paused 1 with last_error, or 0; the
-- signing secret; the push role's lease (holder '' released; expires_ms on the database
-- clock, Unix ms; token grows with every new holder). Rules: engine.Push.

CREATE TABLE push_subscriptions (
    group_id   text   PRIMARY KEY,
    settings   text   NOT NULL,
    paused     bigint   NOT NULL DEFAULT 0,
    last_error text   NOT NULL DEFAULT '',
    secret     text   NOT NULL,
    created_ms bigint   NOT NULL,
    updated_ms bigint   NOT NULL,
    holder     text   NOT NULL DEFAULT '',
    token      bigint   NOT NULL DEFAULT 0,
    expires_ms bigint   NOT NULL DEFAULT 0
);
