-- Standby tasks placed by the catalog (issue 38): a member of a group with the Streams
-- assignor reports, per task, how many changelog records its local state is behind
-- (task_lags: [{"topic","partition","lag"}], catalog.TaskLag), and asks on join for
-- standby_replicas copies of each task. engine/standby.go reads both: a task moves
-- first to a member caught up on it, and each member is told its standby tasks.
ALTER TABLE group_members ADD COLUMN task_lags jsonb NOT NULL DEFAULT '[]';
ALTER TABLE group_members ADD COLUMN standby_replicas int NOT NULL DEFAULT 0
    CHECK (standby_replicas >= 0);
