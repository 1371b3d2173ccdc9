-- strata_commit_txn: the live definition, applied after the migrations at every start
-- (migrate.go: applyFunctions, under the migration lock). Change the function here,
-- never in a migration: a migration only changes tables, and drops a function whose
-- signature changes (this file then creates the new one).
--
-- Defined in 0135_transactions.sql, whose body this is.

-- A flush with transactional requests (catalog.Request.Txn), in one round trip: the SQL
-- twin of engine.Plan.CheckTxns and TxnCheck.Writes, around the existing commit —
-- strata_commit_connect (0080) when the flush commits source offsets,
-- strata_commit_groups (0040, 0120) when it commits group offsets, strata_commit
-- (0070) otherwise — which it calls with its refusals added to p_pre. It redefines
-- none. The conformance suite (catalogtest RunTransactions) guards that it answers as
-- the Go rules do on SQLite.
--
-- The arguments are strata_commit_connect's, then one element per transactional
-- request: p_tx_req its index, p_tx_tid the transactional id it names, p_tx_implicit
-- whether its produce may begin the transaction and add its partitions (transactions
-- v2). It answers strata_commit_connect's rows; for a request it refused, the code is
-- one of the engine's RefusedTxn* codes, with o_grow the request's batch (not added)
-- or o_gvalue the producer's epoch (fenced).
CREATE OR REPLACE FUNCTION strata_commit_txn(
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
    p_so_off            text[],
    p_tx_req            int[],
    p_tx_tid            text[],
    p_tx_implicit       boolean[]
) RETURNS TABLE (o_batch int, o_code text, o_base bigint, o_dup boolean, o_expected int, o_grow int, o_gvalue bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    n        int := cardinality(p_req);
    nreq     int := cardinality(p_pre);
    v_pre    text[] := p_pre;
    v_grow   int[];     -- per request: the batch its refusal is about (partition_not_added)
    v_gvalue bigint[];  -- per request: the producer's epoch (producer_fenced)
    v_base   bigint[];  -- per batch: its base offset (NULL: refused)
    v_dup    boolean[]; -- per batch: a duplicate's
    v_done   boolean[]; -- per request: committed now (not refused, not a duplicate)
    v_now    timestamptz;
    v_begin  text[];
    v_state  text;
    v_owner  bigint;
    v_epoch  smallint;
    v_row    int;
    i        int;
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
    -- Lock order, everywhere: partitions (sorted), producers (in the mode strata_commit
    -- takes them: exclusively when a request bumps its producer's epoch, see 0070),
    -- transactions, then groups and tasks (taken by the functions called below).
    PERFORM 1 FROM partitions p
    WHERE (p.topic_id, p.partition) IN (SELECT u.tid, u.pno FROM unnest(p_topic, p_part) AS u(tid, pno))
    ORDER BY p.topic_id, p.partition
    FOR UPDATE;
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
    PERFORM 1 FROM transactions t
    WHERE t.transactional_id IN (SELECT DISTINCT u.tid FROM unnest(p_tx_tid) AS u(tid))
    ORDER BY t.transactional_id COLLATE "C"
    FOR UPDATE;
    v_now := clock_timestamp();

    -- Each transactional request not refused before (engine.Plan.CheckTxns).
    v_grow := array_fill(NULL::int, ARRAY[nreq]);
    v_gvalue := array_fill(NULL::bigint, ARRAY[nreq]);
    FOR k IN 1..cardinality(p_tx_req) LOOP
        r := p_tx_req[k] + 1;
        CONTINUE WHEN v_pre[r] IS NOT NULL;
        i := array_position(p_req, p_tx_req[k]); -- its first batch
        SELECT p.epoch INTO v_epoch FROM producers p WHERE p.id = p_pid[i];
        CONTINUE WHEN NOT FOUND; -- unknown: strata_commit refuses it
        SELECT t.producer_id, t.state INTO v_owner, v_state FROM transactions t WHERE t.transactional_id = p_tx_tid[k];
        IF NOT FOUND OR v_owner <> p_pid[i] THEN
            v_pre[r] := 'txn:invalid_producer_id_mapping';
        ELSIF p_epoch[i] <> v_epoch THEN
            v_pre[r] := 'txn:producer_fenced';
            v_gvalue[r] := v_epoch;
        ELSIF p_tx_implicit[k] THEN
            NULL;
        ELSIF v_state <> 'ongoing' THEN
            v_pre[r] := 'txn:no_transaction';
        ELSE
            SELECT min(b.n - i) INTO v_row
            FROM unnest(p_req, p_topic, p_part) WITH ORDINALITY AS b(req, tid, pno, n)
            WHERE b.req = p_tx_req[k]
              AND NOT EXISTS (SELECT 1 FROM txn_partitions x
                              WHERE x.transactional_id = p_tx_tid[k] AND x.topic_id = b.tid AND x.partition = b.pno);
            IF v_row IS NOT NULL THEN
                v_pre[r] := 'txn:partition_not_added';
                v_grow[r] := v_row;
            END IF;
        END IF;
    END LOOP;

    IF cardinality(p_cx_req) > 0 THEN
        SELECT array_agg(c.o_batch), array_agg(c.o_code), array_agg(c.o_base), array_agg(c.o_dup),
               array_agg(c.o_expected), array_agg(c.o_grow), array_agg(c.o_gvalue)
        INTO a_batch, a_code, a_base, a_dup, a_exp, a_grow, a_gvalue
        FROM strata_commit_connect(p_key, p_size, p_key_time, p_commit_timeout_ms, p_req, p_topic, p_part, p_pos, p_len,
                                   p_records, p_max_ts, p_pid, p_epoch, p_seq, v_pre, p_touch_ms, p_assignor,
                                   p_gc_req, p_gc_group, p_gc_member, p_gc_mepoch, p_gc_topic, p_gc_part, p_gc_off, p_gc_meta,
                                   p_cx_req, p_cx_conn, p_cx_task, p_cx_gen, p_so_req, p_so_conn, p_so_part, p_so_off) AS c;
    ELSIF cardinality(p_gc_req) > 0 THEN
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

    -- What the transactional requests that committed now write (TxnCheck.Writes): the
    -- transactions they begin, then their first offsets where the transaction had none.
    v_base := array_fill(NULL::bigint, ARRAY[n]);
    v_dup := array_fill(false, ARRAY[n]);
    v_done := array_fill(false, ARRAY[nreq]);
    FOR k IN 1..coalesce(cardinality(a_batch), 0) LOOP
        v_base[a_batch[k] + 1] := a_base[k];
        v_dup[a_batch[k] + 1] := a_dup[k];
        IF a_base[k] IS NOT NULL AND NOT a_dup[k] THEN
            v_done[p_req[a_batch[k] + 1] + 1] := true;
        END IF;
    END LOOP;
    SELECT coalesce(array_agg(DISTINCT t.transactional_id), '{}') INTO v_begin
    FROM unnest(p_tx_req, p_tx_tid) AS u(req, tid)
    JOIN transactions t ON t.transactional_id = u.tid AND t.state <> 'ongoing'
    WHERE v_done[u.req + 1];
    IF cardinality(v_begin) > 0 THEN
        DELETE FROM txn_partitions x WHERE x.transactional_id = ANY (v_begin);
        DELETE FROM txn_groups x WHERE x.transactional_id = ANY (v_begin);
        DELETE FROM txn_offsets x WHERE x.transactional_id = ANY (v_begin);
        UPDATE transactions t SET state = 'ongoing', started_at = v_now, updated_at = v_now
        WHERE t.transactional_id = ANY (v_begin);
    END IF;
    INSERT INTO txn_partitions AS x (transactional_id, topic_id, partition, first_offset)
    SELECT u.tid, b.topic, b.pno, min(v_base[b.n])
    FROM unnest(p_tx_req, p_tx_tid) AS u(req, tid)
    JOIN unnest(p_req, p_topic, p_part) WITH ORDINALITY AS b(req, topic, pno, n) ON b.req = u.req
    WHERE v_done[u.req + 1]
    GROUP BY u.tid, b.topic, b.pno
    ORDER BY u.tid COLLATE "C", b.topic, b.pno
    ON CONFLICT (transactional_id, topic_id, partition)
    DO UPDATE SET first_offset = coalesce(x.first_offset, excluded.first_offset);

    RETURN QUERY
    SELECT a_batch[g.j], a_code[g.j], a_base[g.j], a_dup[g.j], a_exp[g.j],
           CASE WHEN a_code[g.j] LIKE 'txn:%' THEN v_grow[p_req[a_batch[g.j] + 1] + 1] ELSE a_grow[g.j] END,
           CASE WHEN a_code[g.j] LIKE 'txn:%' THEN v_gvalue[p_req[a_batch[g.j] + 1] + 1] ELSE a_gvalue[g.j] END
    FROM generate_series(1, coalesce(cardinality(a_batch), 0)) AS g(j);
END
$fn$;
