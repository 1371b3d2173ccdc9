-- strata_commit_groups: the live definition, applied after the migrations at every start
-- (migrate.go: applyFunctions, under the migration lock). Change the function here,
-- never in a migration: a migration only changes tables, and drops a function whose
-- signature changes (this file then creates the new one).
--
-- First defined in 0040_group_commit.sql; body replaced by 0120_assignment_epoch.sql,
-- whose body this is.

-- A flush that commits consumer-group offsets, in one round trip (issue 13): the SQL
-- twin of catalog.CheckOffsetCommit (as Plan.CheckGroupOffsets applies it to a flush's
-- requests) runs here, inside the statement, and hands strata_commit (0030) its
-- refusals and the offsets to store. Before, the flush took an explicit transaction and
-- six round trips to lock, read and check the groups in Go. The conformance suites
-- (catalogtest RunProducers and RunGroups) guard that this twin answers as the Go rules
-- do on SQLite.
--
-- The arguments are strata_commit's, without its p_go_* (which this computes), then
-- the offsets of the requests that carry any, one element per offset, in request order:
-- p_gc_req its request, p_gc_group the group, p_gc_member the member (NULL: a commit
-- from outside the group), p_gc_mepoch its epoch, p_gc_topic the topic's NAME (resolved
-- here, after the locks), p_gc_part, p_gc_off, p_gc_meta. The caller has checked their
-- shape (catalog.ValidateOffsetCommit) and passes a request whose shape is wrong as
-- refused in p_pre, without its offsets. p_assignor is the assignor of a group that a
-- commit without a member creates (catalog.DefaultAssignor).
--
-- It answers strata_commit's rows, and for a request whose offsets it refused, on each
-- of its batches: o_grow, the offset (0-based, in the request's order) the refusal is
-- about, and o_gvalue, the figure its message needs (catalog.OffsetCommitRefusal); the
-- refusal itself is the request's code, 'group:' and one of catalog's Refused* codes.
CREATE OR REPLACE FUNCTION strata_commit_groups(
    p_key               text,
    p_size              bigint,
    p_key_time          timestamptz,
    p_commit_timeout_ms bigint,
    p_req               int[],
    p_topic             bigint[],
    p_part              int[],
    p_pos               bigint[],
    p_len               bigint[],
    p_records           int[],
    p_max_ts            bigint[],
    p_pid               bigint[],
    p_epoch             smallint[],
    p_seq               int[],
    p_pre               text[],
    p_touch_ms          bigint,
    p_assignor          text,
    p_gc_req            int[],
    p_gc_group          text[],
    p_gc_member         text[],
    p_gc_mepoch         int[],
    p_gc_topic          text[],
    p_gc_part           int[],
    p_gc_off            bigint[],
    p_gc_meta           text[]
) RETURNS TABLE (o_batch int, o_code text, o_base bigint, o_dup boolean, o_expected int, o_grow int, o_gvalue bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    nreq      int := cardinality(p_pre);
    v_pre     text[] := p_pre;
    v_grow    int[];    -- per request: the offset its refusal is about
    v_gvalue  bigint[]; -- per request: the figure its refusal's message needs
    v_code    text[];   -- per offset: the first check it fails
    v_value   bigint[]; -- per offset: that check's figure
    v_tid     bigint[]; -- per offset: its topic's id
    v_idx     int[];    -- per offset: its place in its request
    v_created text[];
    v_now     timestamptz;
    g         record;
    k         int;
    r         int;
    go_req    int[];
    go_group  text[];
    go_topic  bigint[];
    go_part   int[];
    go_off    bigint[];
    go_meta   text[];
    go_member text[];
    go_mepoch int[];
BEGIN
    -- Lock order, everywhere: partitions (sorted), producer state, groups. strata_commit
    -- takes the first two again below; they are already held by then.
    PERFORM 1 FROM partitions p
    WHERE (p.topic_id, p.partition) IN (SELECT u.tid, u.pno FROM unnest(p_topic, p_part) AS u(tid, pno))
    ORDER BY p.topic_id, p.partition
    FOR UPDATE;
    -- The producer rows in the mode strata_commit takes them (0070): exclusively when a
    -- request's epoch is above its producer's (a bump, which strata_commit writes),
    -- shared otherwise. A shared lock held here and upgraded there would deadlock with
    -- another flush bumping the same producer. Epochs only grow, so the unlocked read
    -- decides the same way both times or, there, for the weaker lock already covered.
    IF EXISTS (SELECT 1 FROM unnest(p_pid, p_epoch) AS u(id, ep) JOIN producers p ON p.id = u.id
               WHERE u.ep > p.epoch) THEN
        PERFORM 1 FROM producers p
        WHERE p.id IN (SELECT u.id FROM unnest(p_pid) AS u(id) WHERE u.id IS NOT NULL)
        ORDER BY p.id
        FOR NO KEY UPDATE;
    ELSE
        PERFORM 1 FROM producers p
        WHERE p.id IN (SELECT u.id FROM unnest(p_pid) AS u(id) WHERE u.id IS NOT NULL)
        ORDER BY p.id
        FOR SHARE;
    END IF;

    -- A commit without a member creates its group (as CommitOffsets does) and takes its
    -- lock exclusively, so that no member joins between the check and the write. A
    -- group created here that ends up storing nothing is removed at the end.
    WITH ins AS (
        INSERT INTO groups (name, assignor)
        SELECT DISTINCT u.grp, p_assignor FROM unnest(p_gc_group, p_gc_member) AS u(grp, mem)
        WHERE u.mem IS NULL
        ORDER BY 1
        ON CONFLICT (name) DO NOTHING
        RETURNING name
    )
    SELECT coalesce(array_agg(ins.name), '{}') INTO v_created FROM ins;
    -- Groups in name order (bytewise, as Go sorts): FOR UPDATE when a commit without a
    -- member names it, else FOR SHARE, so member commits of one group run side by side.
    FOR g IN
        SELECT u.grp, bool_or(u.mem IS NULL) AS excl
        FROM unnest(p_gc_group, p_gc_member) AS u(grp, mem)
        GROUP BY u.grp ORDER BY u.grp COLLATE "C"
    LOOP
        IF g.excl THEN
            PERFORM 1 FROM groups x WHERE x.name = g.grp FOR UPDATE;
        ELSE
            PERFORM 1 FROM groups x WHERE x.name = g.grp FOR SHARE;
        END IF;
    END LOOP;
    -- Leases are judged on the clock read once the locks are held (READ COMMITTED: the
    -- statements below see the rows as the lock holders before us left them).
    v_now := clock_timestamp();

    -- Each offset's checks, in catalog.CheckOffsetCommit's order: the group and the
    -- member (the same for every offset of a request), then the topic, the partition,
    -- the offset against the high watermark, the owner.
    SELECT coalesce(array_agg(x.code ORDER BY x.n), '{}'), coalesce(array_agg(x.value ORDER BY x.n), '{}'),
           coalesce(array_agg(x.tid ORDER BY x.n), '{}'), coalesce(array_agg(x.i ORDER BY x.n), '{}')
    INTO v_code, v_value, v_tid, v_idx
    FROM (
        SELECT u.n,
               (row_number() OVER (PARTITION BY u.req ORDER BY u.n) - 1)::int AS i,
               t.id AS tid,
               CASE
                   WHEN gr.name IS NULL THEN 'group:group_not_found'
                   WHEN u.mem IS NULL AND EXISTS (SELECT 1 FROM group_members lm
                                                  WHERE lm.group_name = u.grp AND lm.expires_at > v_now)
                       THEN 'group:group_not_empty'
                   WHEN u.mem IS NOT NULL AND (m.member_id IS NULL OR m.expires_at <= v_now) THEN 'group:unknown_member'
                   WHEN u.mem IS NOT NULL AND u.mep > m.epoch THEN 'group:stale_member_epoch'
                   WHEN t.id IS NULL THEN 'group:topic_not_found'
                   WHEN p.partition IS NULL OR u.pno >= t.partitions THEN 'group:partition_out_of_range'
                   WHEN u.off > p.high_watermark THEN 'group:invalid_offset'
                   WHEN u.mem IS NOT NULL AND a.owner IS DISTINCT FROM u.mem THEN 'group:not_owner'
                   WHEN u.mem IS NOT NULL AND u.mep < a.owner_epoch THEN 'group:stale_assignment_epoch'
               END AS code,
               CASE
                   WHEN u.mem IS NOT NULL AND u.mep > m.epoch THEN m.epoch::bigint
                   WHEN t.id IS NOT NULL AND (p.partition IS NULL OR u.pno >= t.partitions) THEN t.partitions::bigint
                   WHEN p.partition IS NOT NULL AND u.off > p.high_watermark THEN p.high_watermark
                   WHEN u.mem IS NOT NULL AND a.owner = u.mem AND u.mep < a.owner_epoch THEN a.owner_epoch::bigint
               END AS value
        FROM unnest(p_gc_req, p_gc_group, p_gc_member, p_gc_mepoch, p_gc_topic, p_gc_part, p_gc_off)
             WITH ORDINALITY AS u(req, grp, mem, mep, topic, pno, off, n)
        LEFT JOIN groups gr ON gr.name = u.grp
        LEFT JOIN group_members m ON m.group_name = u.grp AND m.member_id = u.mem
        LEFT JOIN topics t ON t.name = u.topic AND t.deleted_at IS NULL
        LEFT JOIN partitions p ON p.topic_id = t.id AND p.partition = u.pno
        LEFT JOIN group_assignments a ON a.group_name = u.grp AND a.topic_id = t.id AND a.partition = u.pno
    ) x;

    -- A request is refused for its first failing offset, as the Go check stops there.
    v_grow := array_fill(NULL::int, ARRAY[nreq]);
    v_gvalue := array_fill(NULL::bigint, ARRAY[nreq]);
    FOR k IN 1..cardinality(p_gc_req) LOOP
        r := p_gc_req[k] + 1;
        IF v_code[k] IS NOT NULL AND v_pre[r] IS NULL THEN
            v_pre[r] := v_code[k];
            v_grow[r] := v_idx[k];
            v_gvalue[r] := v_value[k];
        END IF;
    END LOOP;

    -- The offsets of the requests not refused: strata_commit stores those whose
    -- batches commit.
    SELECT coalesce(array_agg(u.req ORDER BY u.n), '{}'), coalesce(array_agg(u.grp ORDER BY u.n), '{}'),
           coalesce(array_agg(u.tid ORDER BY u.n), '{}'), coalesce(array_agg(u.pno ORDER BY u.n), '{}'),
           coalesce(array_agg(u.off ORDER BY u.n), '{}'), coalesce(array_agg(u.meta ORDER BY u.n), '{}'),
           coalesce(array_agg(u.mem ORDER BY u.n), '{}'), coalesce(array_agg(u.mep ORDER BY u.n), '{}')
    INTO go_req, go_group, go_topic, go_part, go_off, go_meta, go_member, go_mepoch
    FROM unnest(p_gc_req, p_gc_group, v_tid, p_gc_part, p_gc_off, p_gc_meta, p_gc_member, p_gc_mepoch)
         WITH ORDINALITY AS u(req, grp, tid, pno, off, meta, mem, mep, n)
    WHERE v_pre[u.req + 1] IS NULL;

    RETURN QUERY
    SELECT c.o_batch, c.o_code, c.o_base, c.o_dup, c.o_expected,
           v_grow[p_req[c.o_batch + 1] + 1], v_gvalue[p_req[c.o_batch + 1] + 1]
    FROM strata_commit(p_key, p_size, p_key_time, p_commit_timeout_ms, p_req, p_topic, p_part, p_pos, p_len,
                       p_records, p_max_ts, p_pid, p_epoch, p_seq, v_pre, p_touch_ms,
                       go_req, go_group, go_topic, go_part, go_off, go_meta, go_member, go_mepoch) AS c;

    -- A group this commit created and stored nothing for never existed (the Go rules
    -- create it only with its offsets).
    IF cardinality(v_created) > 0 THEN
        DELETE FROM groups x WHERE x.name = ANY (v_created)
            AND NOT EXISTS (SELECT 1 FROM group_offsets o WHERE o.group_name = x.name);
    END IF;
    RETURN;
END
$fn$;
