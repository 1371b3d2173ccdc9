-- The epoch at which a partition's owner was granted it (KIP-1251): an offset commit is
-- accepted at any epoch of the member from that one up to its current one; and the
-- member that last gave the partition back, which may still commit it at its current
-- epoch (engine.CheckOffsetCommit). Rows owned before this migration take their owner's
-- current epoch, the rule they were held to until now.
ALTER TABLE group_assignments ADD COLUMN owner_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE group_assignments ADD COLUMN released_by TEXT;
UPDATE group_assignments SET owner_epoch = coalesce((
    SELECT m.epoch FROM group_members m
    WHERE m.group_name = group_assignments.group_name AND m.member_id = group_assignments.owner), 0)
WHERE owner IS NOT NULL;
