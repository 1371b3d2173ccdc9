-- A share group's running total of records copied to its dead-letter topic, kept on
-- its dead-letter lease row and added to by the flush that commits each copy (in its
-- transaction, so the total counts exactly the copies that committed); shown in the
-- group's description.
ALTER TABLE share_dlq_leases ADD COLUMN copied INTEGER NOT NULL DEFAULT 0;
