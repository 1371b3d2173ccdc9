-- Producers are owned (issue 27): the principal that created a producer id, so that the
-- broker core refuses its use (produce, or an epoch bump) by any other principal when
-- authorization is on. NULL on ids handed out before this migration, or by a node that
-- predates it during a rolling upgrade: the core treats those as unowned. A transactional
-- producer is owned by whoever has write on its transactional id; the creator is kept
-- for the record.
ALTER TABLE producers ADD COLUMN principal TEXT;
