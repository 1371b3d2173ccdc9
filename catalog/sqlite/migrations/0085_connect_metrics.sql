-- What a task instance measures of the system it reads or writes (a JSON object; a
-- Postgres source: its slot's lag, wal_status and safe WAL size), shown in its status.
ALTER TABLE connector_tasks ADD COLUMN metrics TEXT NOT NULL DEFAULT '';
