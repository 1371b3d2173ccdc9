-- strata_commit commits one flush: ONE transaction in ONE round trip, called as a single
-- statement (implicit transaction). It reproduces in SQL the shared rules of package
-- catalog (CheckCommitTime, Plan.CheckRequests, Plan.Assign); the Go caller has already
-- validated the flush's shape with catalog.PlanSegment.
--
-- Batches come as parallel arrays, one element per batch, numbered from 0 in the order
-- requests and their batches appear in the flush; p_req says which request each belongs
-- to. It returns one row per batch: the batch number, the batch's own check failure
-- (NULL, or a catalog request error code: topic_not_found, partition_out_of_range,
-- timestamp_out_of_range) and, when its request was accepted, its base offset. A
-- request fails as a whole on its first failing batch.
--
-- Whole-flush refusals are raised with their own SQLSTATEs, so the caller knows the
-- outcome for certain: SR001 the segment is older than the commit timeout, SR002 the key
-- was fenced by a settle, SR003 the key is already committed.
CREATE FUNCTION strata_commit(
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
    p_max_ts            bigint[]
) RETURNS TABLE (o_batch int, o_code text, o_base bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_now    timestamptz := clock_timestamp();
    v_limit  bigint;
    v_seg    bigint;
    v_state  text;
BEGIN
    -- The sweep deletes unreferenced objects older than twice the commit timeout; a
    -- commit arriving later than one timeout could land in an object it already removed.
    IF v_now - p_key_time > p_commit_timeout_ms * interval '1 millisecond' THEN
        RAISE EXCEPTION USING ERRCODE = 'SR001', MESSAGE = format(
            'segment %s: key time %s is older than the commit timeout (%s ms) by the database clock %s',
            p_key, p_key_time, p_commit_timeout_ms, v_now);
    END IF;
    -- LogAppendTime batches may be stamped at most catalog.LogAppendTimeSkew (1 s) ahead.
    v_limit := floor(extract(epoch FROM v_now) * 1000)::bigint + 1000;

    -- ON CONFLICT waits for an in-flight transaction holding the same key (a settle's
    -- fencing insert), so exactly one of commit and fence wins.
    INSERT INTO segments (key, size, state) VALUES (p_key, p_size, 'live')
    ON CONFLICT (key) DO NOTHING
    RETURNING id INTO v_seg;
    IF v_seg IS NULL THEN
        SELECT s.state INTO v_state FROM segments s WHERE s.key = p_key;
        IF v_state = 'aborted' THEN
            RAISE EXCEPTION USING ERRCODE = 'SR002', MESSAGE = format('segment %s was fenced by a settle', p_key);
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'SR003', MESSAGE = format('segment %s is already committed (%s)', p_key, v_state);
    END IF;

    -- Lock order everywhere: partition rows sorted by (topic_id, partition). LockRows sits
    -- above the sort, so rows are locked in this order. A separate statement, so the
    -- checks below run on a snapshot taken after every lock is held (READ COMMITTED): a
    -- topic deleted or grown while we waited is seen as it now is.
    PERFORM 1 FROM partitions p
    WHERE (p.topic_id, p.partition) IN (SELECT u.tid, u.pno FROM unnest(p_topic, p_part) AS u(tid, pno))
    ORDER BY p.topic_id, p.partition
    FOR UPDATE;

    RETURN QUERY
    WITH b AS (
        SELECT (u.n - 1)::int AS i, u.req, u.topic_id, u.partition, u.pos, u.len, u.records, u.max_ts
        FROM unnest(p_req, p_topic, p_part, p_pos, p_len, p_records, p_max_ts)
             WITH ORDINALITY AS u(req, topic_id, partition, pos, len, records, max_ts, n)
    ),
    -- Each batch's own check (catalog.Plan.CheckRequests).
    bc AS (
        SELECT b.*,
               CASE
                   WHEN t.id IS NULL OR t.deleted_at IS NOT NULL THEN 'topic_not_found'
                   WHEN b.partition < 0 OR b.partition >= t.partitions OR p.partition IS NULL
                       THEN 'partition_out_of_range'
                   WHEN t.configs ->> 'message.timestamp.type' = 'LogAppendTime' AND b.max_ts > v_limit
                       THEN 'timestamp_out_of_range'
               END AS bcode,
               p.high_watermark AS hwm,
               p.max_timestamp AS pmax
        FROM b
        LEFT JOIN topics t ON t.id = b.topic_id
        LEFT JOIN partitions p ON p.topic_id = b.topic_id AND p.partition = b.partition
    ),
    -- A request is atomic: it is refused when any of its batches fails.
    rc AS (
        SELECT bc.req, bool_and(bc.bcode IS NULL) AS ok
        FROM bc
        GROUP BY bc.req
    ),
    -- Every batch in object order within its partition, with whether the previous batch
    -- there was accepted and where it ended: a refused batch, or a gap, starts a new run.
    a AS (
        SELECT bc.*, rc.ok,
               lag(rc.ok) OVER w AS prev_ok,
               lag(bc.pos + bc.len) OVER w AS prev_end
        FROM bc JOIN rc ON rc.req = bc.req
        WINDOW w AS (PARTITION BY bc.topic_id, bc.partition ORDER BY bc.pos)
    ),
    -- Accepted batches take dense offsets from the high watermark, in object order.
    acc AS (
        SELECT a.*,
               a.hwm + sum(a.records) OVER w - a.records AS base,
               sum(CASE WHEN a.prev_ok AND a.prev_end = a.pos THEN 0 ELSE 1 END) OVER w AS run
        FROM a
        WHERE a.ok
        WINDOW w AS (PARTITION BY a.topic_id, a.partition ORDER BY a.pos)
    ),
    ch AS (
        SELECT acc.topic_id, acc.partition,
               min(acc.base) AS base_offset,
               max(acc.base + acc.records - 1) AS last_offset,
               min(acc.pos) AS pos,
               sum(acc.len)::bigint AS len,
               max(acc.max_ts) AS max_ts,
               max(acc.pmax) AS pmax
        FROM acc
        GROUP BY acc.topic_id, acc.partition, acc.run
    ),
    ins AS (
        INSERT INTO chunks (topic_id, partition, base_offset, last_offset, segment_id, pos, len,
                            max_timestamp, running_max_timestamp)
        SELECT ch.topic_id, ch.partition, ch.base_offset, ch.last_offset, v_seg, ch.pos, ch.len, ch.max_ts,
               greatest(ch.pmax, max(ch.max_ts) OVER (PARTITION BY ch.topic_id, ch.partition ORDER BY ch.base_offset))
        FROM ch
    ),
    upd AS (
        UPDATE partitions p
        SET high_watermark = x.hwm,
            bytes = p.bytes + x.bytes,
            max_timestamp = greatest(p.max_timestamp, x.max_ts)
        FROM (SELECT ch.topic_id, ch.partition, max(ch.last_offset) + 1 AS hwm,
                     sum(ch.len)::bigint AS bytes, max(ch.max_ts) AS max_ts
              FROM ch GROUP BY ch.topic_id, ch.partition) x
        WHERE p.topic_id = x.topic_id AND p.partition = x.partition
    )
    SELECT a.i, a.bcode, acc.base::bigint
    FROM a LEFT JOIN acc ON acc.i = a.i
    ORDER BY a.i;
END
$fn$;
