-- strata_commit_connect: the live definition, applied after the migrations at every start
-- (migrate.go: applyFunctions, under the migration lock). Change the function here,
-- never in a migration: a migration only changes tables, and drops a function whose
-- signature changes (this file then creates the new one).
--
-- Defined in 0080_connect.sql, whose body this is.

-- A flush some of whose requests commit source offsets, in one round trip: the SQL twin
-- of catalog.Plan.CheckSources (CheckFence per request) and SourceCheck.Rows runs here,
-- around the existing commit — strata_commit_groups (0040) when the flush also commits
-- group offsets, strata_commit otherwise — which it calls with its refusals added to
-- p_pre. It redefines neither. The conformance suite (catalogtest RunConnect) guards that
-- it answers as the Go rules do on SQLite.
--
-- The arguments are strata_commit_groups', then: per request that commits source
-- offsets, p_cx_req its index, p_cx_conn, p_cx_task, p_cx_gen its fence; per source
-- offset of those requests, p_so_req its request, p_so_conn, p_so_part, p_so_off. The
-- caller has checked their shape (catalog.ValidateSourceCommit) and passes a request
-- whose shape is wrong as refused in p_pre, without its fence or offsets.
--
-- It answers strata_commit_groups' rows; for a request whose fence it refused, the code
-- is 'connect:' and one of catalog's Refused* fence codes, and o_gvalue the task's
-- current generation (catalog.FenceRefusal).
CREATE OR REPLACE FUNCTION strata_commit_connect(
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
    p_gc_meta           text[],
    p_cx_req            int[],
    p_cx_conn           text[],
    p_cx_task           int[],
    p_cx_gen            bigint[],
    p_so_req            int[],
    p_so_conn           text[],
    p_so_part           text[],
    p_so_off            text[]
) RETURNS TABLE (o_batch int, o_code text, o_base bigint, o_dup boolean, o_expected int, o_grow int, o_gvalue bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    nreq     int := cardinality(p_pre);
    v_pre    text[] := p_pre;
    v_cvalue bigint[];  -- per request: its task's generation (stale_generation)
    v_done   boolean[]; -- per request: committed now (not refused, not a duplicate)
    v_gen    bigint;
    g        record;
    k        int;
    r        int;
    a_batch  int[];
    a_code   text[];
    a_base   bigint[];
    a_dup    boolean[];
    a_exp    int[];
    a_grow   int[];
    a_gvalue bigint[];
BEGIN
    -- Lock order, everywhere: partitions (sorted), producers, groups (in the modes
    -- strata_commit_groups takes them, which takes them again below, already held),
    -- connector tasks. A group this flush creates (a commit without a member) is
    -- inserted by strata_commit_groups, after the tasks: a new row nobody else can be
    -- holding.
    PERFORM 1 FROM partitions p
    WHERE (p.topic_id, p.partition) IN (SELECT u.tid, u.pno FROM unnest(p_topic, p_part) AS u(tid, pno))
    ORDER BY p.topic_id, p.partition
    FOR UPDATE;
    PERFORM 1 FROM producers p
    WHERE p.id IN (SELECT u.id FROM unnest(p_pid) AS u(id) WHERE u.id IS NOT NULL)
    ORDER BY p.id
    FOR SHARE;
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
    -- FOR KEY SHARE: lease renewals and status reports (no key change) pass; anything
    -- that moves a generation takes FOR UPDATE first and waits for this commit.
    PERFORM 1 FROM connector_tasks t
    WHERE (t.connector, t.task) IN (SELECT u.c, u.t FROM unnest(p_cx_conn, p_cx_task) AS u(c, t))
    ORDER BY t.connector COLLATE "C", t.task
    FOR KEY SHARE;

    -- Each fence (catalog.CheckFence), on requests not refused before the call. The
    -- request's own batch checks, made inside strata_commit, still come first.
    v_cvalue := array_fill(NULL::bigint, ARRAY[nreq]);
    FOR k IN 1..coalesce(cardinality(p_cx_req), 0) LOOP
        r := p_cx_req[k] + 1;
        CONTINUE WHEN v_pre[r] IS NOT NULL;
        SELECT t.generation INTO v_gen FROM connector_tasks t WHERE t.connector = p_cx_conn[k] AND t.task = p_cx_task[k];
        IF NOT FOUND THEN
            v_pre[r] := 'connect:unknown_task';
        ELSIF v_gen <> p_cx_gen[k] THEN
            v_pre[r] := 'connect:stale_generation';
            v_cvalue[r] := v_gen;
        END IF;
    END LOOP;

    IF cardinality(p_gc_req) > 0 THEN
        SELECT array_agg(c.o_batch), array_agg(c.o_code), array_agg(c.o_base), array_agg(c.o_dup),
               array_agg(c.o_expected), array_agg(c.o_grow), array_agg(c.o_gvalue)
        INTO a_batch, a_code, a_base, a_dup, a_exp, a_grow, a_gvalue
        FROM strata_commit_groups(p_key, p_size, p_key_time, p_commit_timeout_ms, p_req, p_topic, p_part, p_pos, p_len,
                                  p_records, p_max_ts, p_pid, p_epoch, p_seq, v_pre, p_touch_ms, p_assignor,
                                  p_gc_req, p_gc_group, p_gc_member, p_gc_mepoch, p_gc_topic, p_gc_part, p_gc_off, p_gc_meta) AS c;
    ELSE
        SELECT array_agg(c.o_batch), array_agg(c.o_code), array_agg(c.o_base), array_agg(c.o_dup),
               array_agg(c.o_expected), array_agg(NULL::int), array_agg(NULL::bigint)
        INTO a_batch, a_code, a_base, a_dup, a_exp, a_grow, a_gvalue
        FROM strata_commit(p_key, p_size, p_key_time, p_commit_timeout_ms, p_req, p_topic, p_part, p_pos, p_len,
                           p_records, p_max_ts, p_pid, p_epoch, p_seq, v_pre, p_touch_ms,
                           '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}') AS c;
    END IF;

    -- The offsets of the requests that committed now (catalog.SourceCheck.Rows): the
    -- later request wins a partition both set.
    v_done := array_fill(false, ARRAY[nreq]);
    FOR k IN 1..coalesce(cardinality(a_batch), 0) LOOP
        IF a_base[k] IS NOT NULL AND NOT a_dup[k] THEN
            v_done[p_req[a_batch[k] + 1] + 1] := true;
        END IF;
    END LOOP;
    INSERT INTO connect_offsets AS o (connector, partition, "offset", updated_at)
    SELECT x.conn, x.part, x.off, clock_timestamp()
    FROM (SELECT DISTINCT ON (u.conn, u.part) u.conn, u.part, u.off
          FROM unnest(p_so_req, p_so_conn, p_so_part, p_so_off) WITH ORDINALITY AS u(req, conn, part, off, n)
          WHERE v_done[u.req + 1]
          ORDER BY u.conn, u.part, u.n DESC) x
    ORDER BY x.conn COLLATE "C", x.part COLLATE "C"
    ON CONFLICT (connector, partition) DO UPDATE SET "offset" = excluded."offset", updated_at = excluded.updated_at;

    RETURN QUERY
    SELECT u.b, u.code, u.base, u.dup, u.exp, u.grow,
           coalesce(u.gvalue, v_cvalue[p_req[u.b + 1] + 1])
    FROM unnest(a_batch, a_code, a_base, a_dup, a_exp, a_grow, a_gvalue) AS u(b, code, base, dup, exp, grow, gvalue);
END
$fn$;
