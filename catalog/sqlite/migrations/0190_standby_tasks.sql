-- Standby tasks placed by the catalog (issue 38): a member's per-task state lags
-- (task_lags, JSON [{"topic","partition","lag"}], catalog.TaskLag) and the standby
-- copies of each task it asks for (engine/standby.go reads both).
ALTER TABLE group_members ADD COLUMN task_lags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE group_members ADD COLUMN standby_replicas INTEGER NOT NULL DEFAULT 0
    CHECK (standby_replicas >= 0);
