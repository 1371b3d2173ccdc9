-- strata_commit: the live definition, applied after the migrations at every start
-- (migrate.go: applyFunctions, under the migration lock). Change the function here,
-- never in a migration: a migration only changes tables, and drops a function whose
-- signature changes (this file then creates the new one).
--
-- First defined in 0002_commit.sql; signature from 0030_producers.sql; body replaced by
-- 0050_compaction_due.sql and 0070_producer_epoch_bump.sql, whose body this is.

-- strata_commit commits one flush: ONE transaction in ONE round trip when called as a
-- single statement (a flush that commits group offsets runs it inside a transaction
-- that has locked and checked the groups first: catalog/postgres/commit.go). It
-- reproduces in SQL the shared rules of package catalog: CheckCommitTime,
-- Plan.CheckRequests, Plan.CheckProducers, Plan.Assign and ProducerCheck.Finish, and
-- stores GroupCheck.Rows. The Go caller has validated the flush's shape with
-- catalog.PlanSegment.
--
-- Batches come as parallel arrays, one element per batch, numbered from 0 in the order
-- requests and their batches appear in the flush; p_req says which request each belongs
-- to. Idempotent batches carry their request's producer id and epoch (p_pid, p_epoch;
-- NULL otherwise) and their base sequence (p_seq). p_pre, one element per request,
-- holds a refusal the caller decided before the call (its group offsets): the code
-- 'refused', or NULL. p_go_* are the offsets to store for requests that commit (one
-- element per offset; p_go_req its request).
--
-- It returns one row per batch: the batch number; a refusal code on the batch that
-- decided it (its own check: topic_not_found, partition_out_of_range,
-- timestamp_out_of_range; or the request's: refused, producer_fenced,
-- unknown_producer_id, out_of_order_sequence — with o_expected the sequence expected);
-- its base offset when its request committed or is a duplicate (then the original, and
-- o_dup is true).
--
-- Whole-flush refusals are raised with their own SQLSTATEs, so the caller knows the
-- outcome for certain: SR001 the segment is older than the commit timeout, SR002 the key
-- was fenced by a settle, SR003 the key is already committed.
CREATE OR REPLACE FUNCTION strata_commit(
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
    p_go_req            int[],
    p_go_group          text[],
    p_go_topic          bigint[],
    p_go_part           int[],
    p_go_off            bigint[],
    p_go_meta           text[],
    p_go_member         text[],
    p_go_mepoch         int[]
) RETURNS TABLE (o_batch int, o_code text, o_base bigint, o_dup boolean, o_expected int)
LANGUAGE plpgsql AS $fn$
DECLARE
    kept     constant int := 5;          -- catalog.ProducerBatchesKept
    seqmod   constant bigint := 2147483648; -- sequences wrap at 2^31 (catalog.AddSequence)
    v_now    timestamptz := clock_timestamp();
    v_limit  bigint;
    v_seg    bigint;
    v_state  text;
    n        int := cardinality(p_req);
    nreq     int;
    v_code   text[];    -- per batch: its own check's failure
    v_out    text[];    -- per batch: the code answered
    v_exp    int[];     -- per batch: the sequence expected (out_of_order_sequence)
    v_orig   bigint[];  -- per batch of a duplicate: its original base offset (< 0: -batch of this flush)
    v_base   bigint[];  -- per batch: the base offset assigned
    v_rcode  text[];    -- per request: why it is refused ('duplicate' for a duplicate), NULL if it commits
    v_first  int[];     -- per request: its first batch
    v_last   int[];     -- per request: its last batch
    -- Producer state, one slot per (producer, partition), sorted by (topic, partition,
    -- producer); a slot's batches sit at (slot-1)*kept+1 .. (slot-1)*kept+s_n.
    v_slot   int[];     -- per batch: its slot
    k_pid    bigint[];
    k_tid    bigint[];
    k_part   int[];
    s_epoch  smallint[];
    s_n      int[];
    s_first  int[];
    s_last   int[];
    s_base   bigint[];  -- < 0: -batch of this flush, resolved after assignment
    s_dirty  boolean[];
    v_reg_id bigint[];
    v_reg_ep smallint[];
    v_touch  bigint[] := '{}';
    v_idem   boolean;
    -- >>> 0070 epoch bump: the bumped producers' registry slots. <<<
    v_bumped int[] := '{}';
    r        int;
    i        int;
    i2       int;
    j        int;
    k        int;
    o        int;
    pid      bigint;
    ep       smallint;
    lastseq  int;
    want     int;
    dup      boolean;
    found    boolean;
    ok       boolean;
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

    -- Each batch's own check (catalog.Plan.CheckRequests).
    SELECT array_agg(x.code ORDER BY x.n) INTO v_code
    FROM (
        SELECT u.n,
               CASE
                   WHEN t.id IS NULL OR t.deleted_at IS NOT NULL THEN 'topic_not_found'
                   WHEN u.partition < 0 OR u.partition >= t.partitions OR p.partition IS NULL
                       THEN 'partition_out_of_range'
                   WHEN t.configs ->> 'message.timestamp.type' = 'LogAppendTime' AND u.max_ts > v_limit
                       THEN 'timestamp_out_of_range'
               END AS code
        FROM unnest(p_topic, p_part, p_max_ts) WITH ORDINALITY AS u(topic_id, partition, max_ts, n)
        LEFT JOIN topics t ON t.id = u.topic_id
        LEFT JOIN partitions p ON p.topic_id = u.topic_id AND p.partition = u.partition
    ) x;
    v_out := v_code;

    -- A request is atomic: refused on its first failing batch, else by the caller's
    -- own refusal (group offsets).
    nreq := p_req[n] + 1;
    v_rcode := array_fill(NULL::text, ARRAY[nreq]);
    v_first := array_fill(NULL::int, ARRAY[nreq]);
    v_last := array_fill(NULL::int, ARRAY[nreq]);
    FOR i IN 1..n LOOP
        r := p_req[i] + 1;
        IF v_first[r] IS NULL THEN
            v_first[r] := i;
        END IF;
        v_last[r] := i;
        IF v_rcode[r] IS NULL AND v_code[i] IS NOT NULL THEN
            v_rcode[r] := v_code[i];
        END IF;
    END LOOP;
    FOR r IN 1..nreq LOOP
        IF v_rcode[r] IS NULL AND p_pre[r] IS NOT NULL THEN
            v_rcode[r] := p_pre[r];
            v_out[v_first[r]] := p_pre[r];
        END IF;
    END LOOP;

    -- Idempotent producers (catalog.Plan.CheckProducers), in request order.
    v_idem := EXISTS (SELECT 1 FROM unnest(p_pid) AS x(id) WHERE x.id IS NOT NULL);
    IF v_idem THEN
        -- Registry rows, shared-locked in id order: InitProducer (which fences) and the
        -- expiry pass wait for this commit, and it for them.
        -- >>> 0070 epoch bump: a flush that may bump an epoch (a request's epoch above
        -- its producer's, read without a lock: epochs only grow) locks its registry rows
        -- exclusively instead, so that it never upgrades a shared lock that another
        -- flush bumping the same producer also holds (a deadlock). Same rows, same order.
        IF EXISTS (SELECT 1 FROM unnest(p_pid, p_epoch) AS u(id, ep) JOIN producers p ON p.id = u.id
                   WHERE u.ep > p.epoch) THEN
            SELECT coalesce(array_agg(x.id ORDER BY x.id), '{}'), coalesce(array_agg(x.epoch ORDER BY x.id), '{}')
            INTO v_reg_id, v_reg_ep
            FROM (SELECT p.id, p.epoch FROM producers p
                  WHERE p.id IN (SELECT DISTINCT u.id FROM unnest(p_pid) AS u(id) WHERE u.id IS NOT NULL)
                  ORDER BY p.id FOR NO KEY UPDATE) x;
        ELSE
        -- <<< 0070 (the statement below is 0030's, indented)
            SELECT coalesce(array_agg(x.id ORDER BY x.id), '{}'), coalesce(array_agg(x.epoch ORDER BY x.id), '{}')
            INTO v_reg_id, v_reg_ep
            FROM (SELECT p.id, p.epoch FROM producers p
                  WHERE p.id IN (SELECT DISTINCT u.id FROM unnest(p_pid) AS u(id) WHERE u.id IS NOT NULL)
                  ORDER BY p.id FOR SHARE) x;
        END IF;

        -- Slots and their stored state. The partition row locks held above serialise
        -- every writer of these rows.
        WITH keys AS (
            SELECT DISTINCT u.pid, u.tid, u.pno
            FROM unnest(p_pid, p_topic, p_part) AS u(pid, tid, pno) WHERE u.pid IS NOT NULL
        ), ks AS (
            SELECT keys.*, row_number() OVER (ORDER BY keys.tid, keys.pno, keys.pid)::int AS slot FROM keys
        )
        -- Each slot's kept batches are padded to kept elements, so that they aggregate
        -- into rectangular (slot × kept) arrays, flattened below.
        SELECT array_agg(ks.pid ORDER BY ks.slot), array_agg(ks.tid ORDER BY ks.slot), array_agg(ks.pno ORDER BY ks.slot),
               array_agg(s.epoch ORDER BY ks.slot), array_agg(coalesce(cardinality(s.first_seqs), 0) ORDER BY ks.slot),
               array_agg(coalesce(s.first_seqs, '{}') || array_fill(NULL::int, ARRAY[kept - coalesce(cardinality(s.first_seqs), 0)]) ORDER BY ks.slot),
               array_agg(coalesce(s.last_seqs, '{}') || array_fill(NULL::int, ARRAY[kept - coalesce(cardinality(s.last_seqs), 0)]) ORDER BY ks.slot),
               array_agg(coalesce(s.base_offsets, '{}') || array_fill(NULL::bigint, ARRAY[kept - coalesce(cardinality(s.base_offsets), 0)]) ORDER BY ks.slot)
        INTO k_pid, k_tid, k_part, s_epoch, s_n, s_first, s_last, s_base
        FROM ks LEFT JOIN producer_state s ON s.topic_id = ks.tid AND s.partition = ks.pno AND s.producer_id = ks.pid;
        s_first := ARRAY(SELECT unnest(s_first));
        s_last := ARRAY(SELECT unnest(s_last));
        s_base := ARRAY(SELECT unnest(s_base));

        SELECT array_agg(x.slot ORDER BY u.n) INTO v_slot
        FROM unnest(p_pid, p_topic, p_part) WITH ORDINALITY AS u(pid, tid, pno, n)
        LEFT JOIN unnest(k_pid, k_tid, k_part) WITH ORDINALITY AS x(pid, tid, pno, slot)
               ON x.pid = u.pid AND x.tid = u.tid AND x.pno = u.pno;

        s_dirty := array_fill(false, ARRAY[cardinality(k_pid)]);
        v_orig := array_fill(NULL::bigint, ARRAY[n]);
        v_exp := array_fill(NULL::int, ARRAY[n]);

        FOR r IN 1..nreq LOOP
            pid := p_pid[v_first[r]];
            CONTINUE WHEN pid IS NULL;
            ep := p_epoch[v_first[r]];

            -- 1. A duplicate: every batch matches a kept batch at this epoch.
            dup := true;
            FOR i IN v_first[r]..v_last[r] LOOP
                k := v_slot[i];
                lastseq := ((p_seq[i]::bigint + p_records[i] - 1) % seqmod)::int;
                found := false;
                IF s_epoch[k] = ep THEN
                    FOR j IN 1..s_n[k] LOOP
                        o := (k - 1) * kept + j;
                        IF s_first[o] = p_seq[i] AND s_last[o] = lastseq THEN
                            v_orig[i] := s_base[o];
                            found := true;
                            EXIT;
                        END IF;
                    END LOOP;
                END IF;
                IF NOT found THEN
                    dup := false;
                    EXIT;
                END IF;
            END LOOP;
            IF dup THEN
                v_rcode[r] := 'duplicate';
                FOR i IN v_first[r]..v_last[r] LOOP
                    v_out[i] := NULL;
                END LOOP;
                CONTINUE;
            END IF;

            -- 2. Refused already.
            CONTINUE WHEN v_rcode[r] IS NOT NULL;

            -- 3. The producer's identity.
            j := array_position(v_reg_id, pid);
            -- >>> 0070 epoch bump: an epoch ahead goes on to the sequence checks (which
            -- then expect 0 everywhere). (0030: IF j IS NULL OR ep > v_reg_ep[j].) <<<
            IF j IS NULL THEN
                v_rcode[r] := 'unknown_producer_id';
            ELSIF ep < v_reg_ep[j] THEN
                v_rcode[r] := 'producer_fenced';
            END IF;
            IF v_rcode[r] IS NOT NULL THEN
                v_out[v_first[r]] := v_rcode[r];
                CONTINUE;
            END IF;

            -- 4. Sequences, continuing within the request.
            ok := true;
            FOR i IN v_first[r]..v_last[r] LOOP
                k := v_slot[i];
                want := NULL;
                FOR i2 IN REVERSE i - 1..v_first[r] LOOP
                    IF v_slot[i2] = k THEN
                        want := ((p_seq[i2]::bigint + p_records[i2]) % seqmod)::int;
                        EXIT;
                    END IF;
                END LOOP;
                IF want IS NULL THEN
                    want := 0;
                    IF s_epoch[k] = ep AND s_n[k] > 0 THEN
                        want := ((s_last[(k - 1) * kept + s_n[k]]::bigint + 1) % seqmod)::int;
                    END IF;
                END IF;
                IF p_seq[i] <> want THEN
                    v_rcode[r] := 'out_of_order_sequence';
                    v_out[i] := 'out_of_order_sequence';
                    v_exp[i] := want;
                    ok := false;
                    EXIT;
                END IF;
            END LOOP;
            CONTINUE WHEN NOT ok;

            -- 5. Accepted: its batches become the latest kept.
            v_touch := v_touch || pid;
            -- >>> 0070 epoch bump: the epoch ahead becomes the producer's; later
            -- requests of the flush at an older one are fenced. <<<
            IF ep > v_reg_ep[j] THEN
                v_reg_ep[j] := ep;
                v_bumped := v_bumped || j;
            END IF;
            FOR i IN v_first[r]..v_last[r] LOOP
                k := v_slot[i];
                o := (k - 1) * kept;
                IF s_epoch[k] IS DISTINCT FROM ep THEN
                    s_epoch[k] := ep;
                    s_n[k] := 0;
                END IF;
                IF s_n[k] = kept THEN
                    FOR j IN 1..kept - 1 LOOP
                        s_first[o + j] := s_first[o + j + 1];
                        s_last[o + j] := s_last[o + j + 1];
                        s_base[o + j] := s_base[o + j + 1];
                    END LOOP;
                    s_n[k] := kept - 1;
                END IF;
                s_n[k] := s_n[k] + 1;
                s_first[o + s_n[k]] := p_seq[i];
                s_last[o + s_n[k]] := ((p_seq[i]::bigint + p_records[i] - 1) % seqmod)::int;
                s_base[o + s_n[k]] := -i;
                s_dirty[k] := true;
            END LOOP;
        END LOOP;
    END IF;

    -- Offsets (catalog.Plan.Assign): accepted batches take dense offsets from the high
    -- watermark in object order; a refused batch, or a gap, starts a new chunk run.
    WITH a AS (
        SELECT u.n::int AS i, u.topic_id, u.partition, u.pos, u.len, u.records, u.max_ts,
               (v_rcode[u.req + 1] IS NULL) AS ok,
               p.high_watermark AS hwm,
               p.max_timestamp AS pmax
        FROM unnest(p_req, p_topic, p_part, p_pos, p_len, p_records, p_max_ts)
             WITH ORDINALITY AS u(req, topic_id, partition, pos, len, records, max_ts, n)
        LEFT JOIN partitions p ON p.topic_id = u.topic_id AND p.partition = u.partition
    ),
    w AS (
        SELECT a.*,
               lag(a.ok) OVER win AS prev_ok,
               lag(a.pos + a.len) OVER win AS prev_end
        FROM a
        WINDOW win AS (PARTITION BY a.topic_id, a.partition ORDER BY a.pos)
    ),
    acc AS (
        SELECT w.*,
               w.hwm + sum(w.records) OVER win - w.records AS base,
               sum(CASE WHEN w.prev_ok AND w.prev_end = w.pos THEN 0 ELSE 1 END) OVER win AS run
        FROM w
        WHERE w.ok
        WINDOW win AS (PARTITION BY w.topic_id, w.partition ORDER BY w.pos)
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
            max_timestamp = greatest(p.max_timestamp, x.max_ts),
            -- >>> 0050: the compaction due time, the one change this migration makes here. <<<
            -- catalog.CommitDue's SQL twin: due once the new rows settle (twice the
            -- commit timeout), or when retention.ms expires the new chunk, judged by its
            -- records' time clamped to now, if sooner; unless due sooner already. Left
            -- alone, the row stays a HOT update.
            compact_due = least(p.compact_due,
                v_now + 2 * p_commit_timeout_ms * interval '1 millisecond',
                CASE WHEN p.retention_ms <= 315360000000000 THEN -- 10,000 years: beyond, as good as none
                    v_now + (p.retention_ms - CASE WHEN x.max_ts = -1 THEN 0
                        ELSE greatest(floor(extract(epoch FROM v_now) * 1000)::bigint - x.max_ts, 0) END) * interval '1 millisecond'
                END)
        FROM (SELECT ch.topic_id, ch.partition, max(ch.last_offset) + 1 AS hwm,
                     sum(ch.len)::bigint AS bytes, max(ch.max_ts) AS max_ts
              FROM ch GROUP BY ch.topic_id, ch.partition) x
        WHERE p.topic_id = x.topic_id AND p.partition = x.partition
    )
    SELECT array_agg(acc.base::bigint ORDER BY a.i) INTO v_base
    FROM a LEFT JOIN acc ON acc.i = a.i;

    IF v_idem THEN
        -- The new states (catalog.ProducerCheck.Finish), in slot order: the lock order
        -- of producer_state rows.
        INSERT INTO producer_state AS ps (topic_id, partition, producer_id, epoch, first_seqs, last_seqs, base_offsets, updated_at)
        SELECT k_tid[x.slot], k_part[x.slot], k_pid[x.slot], s_epoch[x.slot],
               s_first[(x.slot - 1) * kept + 1 : (x.slot - 1) * kept + s_n[x.slot]],
               s_last[(x.slot - 1) * kept + 1 : (x.slot - 1) * kept + s_n[x.slot]],
               (SELECT array_agg(CASE WHEN b.v < 0 THEN v_base[-b.v] ELSE b.v END ORDER BY b.o)
                FROM unnest(s_base[(x.slot - 1) * kept + 1 : (x.slot - 1) * kept + s_n[x.slot]]) WITH ORDINALITY AS b(v, o)),
               v_now
        FROM generate_series(1, cardinality(k_pid)) AS x(slot)
        WHERE s_dirty[x.slot]
        ORDER BY x.slot
        ON CONFLICT (topic_id, partition, producer_id) DO UPDATE SET
            epoch = excluded.epoch, first_seqs = excluded.first_seqs, last_seqs = excluded.last_seqs,
            base_offsets = excluded.base_offsets, updated_at = excluded.updated_at;

        -- >>> 0070 epoch bump: store the bumped epochs (rows locked exclusively above). <<<
        IF cardinality(v_bumped) > 0 THEN
            UPDATE producers p SET epoch = v_reg_ep[x.j]
            FROM (SELECT DISTINCT u.j FROM unnest(v_bumped) AS u(j)) x
            WHERE p.id = v_reg_id[x.j] AND p.epoch < v_reg_ep[x.j];
        END IF;

        -- An active producer never looks idle to the expiry pass; the row is written at
        -- most once per touch interval.
        IF cardinality(v_touch) > 0 THEN
            UPDATE producers p SET last_used_at = v_now
            WHERE p.id = ANY (v_touch) AND p.last_used_at < v_now - p_touch_ms * interval '1 millisecond';
        END IF;
    END IF;

    -- Group offsets of the requests that commit now; of two requests of the flush on one
    -- group partition, the later wins.
    IF cardinality(p_go_req) > 0 THEN
        INSERT INTO group_offsets AS go (group_name, topic_id, partition, committed_offset, metadata, member_id, member_epoch, committed_at)
        SELECT DISTINCT ON (u.grp, u.tid, u.pno) u.grp, u.tid, u.pno, u.off, u.meta, u.mem, u.mep, v_now
        FROM unnest(p_go_req, p_go_group, p_go_topic, p_go_part, p_go_off, p_go_meta, p_go_member, p_go_mepoch)
             AS u(req, grp, tid, pno, off, meta, mem, mep)
        WHERE v_rcode[u.req + 1] IS NULL
        ORDER BY u.grp, u.tid, u.pno, u.req DESC
        ON CONFLICT (group_name, topic_id, partition) DO UPDATE SET
            committed_offset = excluded.committed_offset, metadata = excluded.metadata,
            member_id = excluded.member_id, member_epoch = excluded.member_epoch,
            committed_at = excluded.committed_at;
    END IF;

    RETURN QUERY
    SELECT (g.i - 1)::int,
           v_out[g.i],
           CASE WHEN v_rcode[p_req[g.i] + 1] = 'duplicate'
                THEN CASE WHEN v_orig[g.i] < 0 THEN v_base[-v_orig[g.i]] ELSE v_orig[g.i] END
                ELSE v_base[g.i] END,
           coalesce(v_rcode[p_req[g.i] + 1] = 'duplicate', false),
           CASE WHEN v_idem THEN v_exp[g.i] END
    FROM generate_series(1, n) AS g(i);
END
$fn$;
