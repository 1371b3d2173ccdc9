-- Compaction by due time (catalog/compact.go; the Postgres migration of the same number
-- says more). compact_due (unix ms; NULL: nothing to do until something changes) is
-- when the partition next needs the compactor, kept current by the commit, topic
-- config changes and deletion, delete-records and the compactor's release; the
-- compactor leases due partitions, most overdue first, through the partial index.
ALTER TABLE partitions ADD COLUMN compact_due INTEGER;
-- Every partition holding data is looked at once after the upgrade.
UPDATE partitions SET compact_due = CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) WHERE high_watermark > 0;
CREATE INDEX partitions_compact_due ON partitions (compact_due) WHERE compact_due IS NOT NULL;

-- Leases no longer go by the last visit.
DROP INDEX compactor_partitions_due;

-- A chunk's append time (unix ms, the database clock at its commit; for a merged row the
-- latest of the rows it replaced): time retention clamps record times to it
-- (catalog.CompactionChunk.RetentionTime). The commit and the swap write it; rows from
-- before this migration have none, and their segment's commit time stands in.
ALTER TABLE chunks ADD COLUMN append_time INTEGER;
