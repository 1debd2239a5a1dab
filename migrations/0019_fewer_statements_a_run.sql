-- Less of PostgreSQL's time a run, measured on the burst of bench/limits.py (1,024
-- evaluations of one run pair started at once), where the writer's batches that write the
-- first runs and claim the second ones were the bottleneck between the two waves.
--
-- 1. A claimed run job brings its evaluation's stored request (o_request, as text) and
--    whether it is a re-score (o_rescore), which the run reads first: the process kept the
--    requests of the evaluations it ran recently, and with a thousand in flight it read
--    them again, one statement a run.
-- 2. The writer's batch finishes its runs, and a batch claims free run jobs, in a few
--    statements instead of several a run.
-- 3. The finalizer's batch asks whether an evaluation still has open runs before it
--    schedules it.
-- 4. jobs_due (migrations/0001) is read by no statement since the claims look in the
--    partial indexes of migrations/0006, but every job written, leased and handed back
--    updated it.

DROP INDEX jobs_due;

-- 1. The claims of migrations/0015, with o_request and o_rescore (their result types
-- change: they are dropped and created again); a batch's claims of free run jobs in a few
-- statements for all of them.
DROP FUNCTION evald_claim(text, bigint, bigint, integer);
DROP FUNCTION evald_finish_runs(jsonb, bigint, text, integer, bigint, integer);
DROP FUNCTION evald_create_many(jsonb, bigint, text, integer, bigint, integer);
DROP FUNCTION evald_claim_many(text, bigint, bigint, integer, integer);
DROP FUNCTION evald_claim_next(text, bigint, bigint, integer);
DROP FUNCTION evald_finish_run(text, integer, integer, text, boolean, jsonb, jsonb, jsonb, jsonb,
                               jsonb, jsonb, bigint, text, bigint, bigint, text);

-- Claims the jobs p_ids, which the caller has locked (FOR UPDATE SKIP LOCKED), with the
-- rules of evald_claim_next (migrations/0006, 0009 and 0015), in a few statements for all
-- of them: one row each, in p_ids' order. A run job of an evaluation gone or over is
-- deleted ('obsolete'); the others are leased for p_lease_ms; a run job whose run is free,
-- not over and with attempts left starts the run's next attempt in the same statements
-- ('run', with o_attempt, its evaluation's stored request and whether it is a re-score;
-- a queued evaluation becomes running unless someone holds it); any other job is only
-- claimed ('claimed': a run someone holds, a cancel or a timeout, is started the old way
-- by its worker). One evald_claim_next a claim, in a loop, was 0.3 ms of PostgreSQL's time
-- a claim in the writer's batches of 64. The statements are planned at each call
-- (force_custom_plan), for the tables as they are then: a generic plan made while they
-- were small joined runs by scanning it whole once they were not (50 to 200 ms a batch).
CREATE FUNCTION evald_claim_jobs(p_ids bigint[], p_owner text, p_lease_ms bigint,
                                 p_now bigint, p_max_attempts integer)
RETURNS TABLE (o_outcome text, o_job_id bigint, o_kind text, o_evaluation_id text,
               o_run_position integer, o_job_attempts integer, o_ref text, o_attempt integer,
               o_request text, o_rescore boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_gone bigint[];
    v_started bigint[];
BEGIN
    SELECT coalesce(array_agg(j.id), '{}') INTO v_gone FROM jobs j
    WHERE j.id = ANY (p_ids) AND j.kind = 'run'
        AND NOT EXISTS (SELECT 1 FROM evaluations e WHERE e.id = j.evaluation_id
                        AND e.status NOT IN ('completed', 'failed', 'cancelled'));
    UPDATE jobs SET lease_owner = p_owner, attempts = attempts + 1,
        lease_until = now() + make_interval(secs => p_lease_ms / 1000.0)
    WHERE id = ANY (p_ids) AND id <> ALL (v_gone);
    WITH free AS (
        SELECT j.id, r.evaluation_id, r.position FROM runs r
        JOIN jobs j ON j.evaluation_id = r.evaluation_id AND j.run_position = r.position
        WHERE j.id = ANY (p_ids) AND j.id <> ALL (v_gone) AND j.kind = 'run'
            AND r.status IN ('pending', 'running') AND r.attempt < p_max_attempts
        FOR UPDATE OF r SKIP LOCKED),
    started AS (
        UPDATE runs r SET status = 'running', attempt = r.attempt + 1, started_at = p_now,
            completed_at = NULL, progress = NULL
        FROM free f
        WHERE r.evaluation_id = f.evaluation_id AND r.position = f.position
        RETURNING f.id)
    SELECT coalesce(array_agg(s.id), '{}') INTO v_started FROM started s;
    UPDATE evaluations SET status = 'running', updated_at = p_now
    WHERE id IN (SELECT q.id FROM evaluations q
                 WHERE q.id IN (SELECT j.evaluation_id FROM jobs j
                                WHERE j.id = ANY (v_started))
                     AND q.status = 'queued'
                 FOR UPDATE SKIP LOCKED);
    PERFORM pg_notify('evald_events', d.evaluation_id)
    FROM (SELECT DISTINCT j.evaluation_id FROM jobs j WHERE j.id = ANY (v_started)) d;
    RETURN QUERY
        SELECT CASE WHEN x.id = ANY (v_gone) THEN 'obsolete'
                    WHEN x.id = ANY (v_started) THEN 'run' ELSE 'claimed' END,
               j.id, j.kind, coalesce(j.evaluation_id, ''), coalesce(j.run_position, 0),
               j.attempts + (x.id = ANY (v_gone))::integer, coalesce(j.ref, ''),
               CASE WHEN x.id = ANY (v_started) THEN r.attempt END,
               CASE WHEN x.id = ANY (v_started) THEN e.request::text END,
               CASE WHEN x.id = ANY (v_started)
                    THEN e.derivation IS NOT DISTINCT FROM 'rescore' END
        FROM unnest(p_ids) WITH ORDINALITY AS x(id, ord)
        JOIN jobs j ON j.id = x.id
        LEFT JOIN runs r ON r.evaluation_id = j.evaluation_id AND r.position = j.run_position
        LEFT JOIN evaluations e ON e.id = j.evaluation_id
        ORDER BY x.ord;
    DELETE FROM jobs WHERE id = ANY (v_gone);
END
$$;

-- The claim of migrations/0015 (the oldest expired lease, else the oldest free job of
-- another kind, else the oldest free run job), made by evald_claim_jobs.
CREATE FUNCTION evald_claim_next(p_owner text, p_lease_ms bigint, p_now bigint,
                                 p_max_attempts integer,
                                 OUT o_outcome text, OUT o_job_id bigint, OUT o_kind text,
                                 OUT o_evaluation_id text, OUT o_run_position integer,
                                 OUT o_job_attempts integer, OUT o_ref text,
                                 OUT o_attempt integer, OUT o_request text,
                                 OUT o_rescore boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_id bigint;
BEGIN
    SELECT j.id INTO v_id FROM jobs j
    WHERE j.lease_owner IS NOT NULL AND j.lease_until < now() AND j.due_at <= now()
    ORDER BY j.lease_until
    FOR UPDATE SKIP LOCKED
    LIMIT 1;
    IF NOT FOUND THEN
        SELECT j.id INTO v_id FROM jobs j
        WHERE j.lease_owner IS NULL AND j.kind <> 'run' AND j.due_at <= now()
        ORDER BY j.due_at, j.id
        FOR UPDATE SKIP LOCKED
        LIMIT 1;
    END IF;
    IF NOT FOUND THEN
        SELECT j.id INTO v_id FROM jobs j
        WHERE j.lease_owner IS NULL AND j.kind = 'run' AND j.due_at <= now()
        ORDER BY j.due_at, j.id
        FOR UPDATE SKIP LOCKED
        LIMIT 1;
    END IF;
    IF NOT FOUND THEN
        o_outcome := 'none';
        RETURN;
    END IF;
    SELECT * INTO o_outcome, o_job_id, o_kind, o_evaluation_id, o_run_position,
                  o_job_attempts, o_ref, o_attempt, o_request, o_rescore
    FROM evald_claim_jobs(ARRAY[v_id], p_owner, p_lease_ms, p_now, p_max_attempts);
END
$$;

CREATE FUNCTION evald_claim(p_owner text, p_lease_ms bigint, p_now bigint,
                            p_max_attempts integer,
                            OUT o_outcome text, OUT o_job_id bigint, OUT o_kind text,
                            OUT o_evaluation_id text, OUT o_run_position integer,
                            OUT o_job_attempts integer, OUT o_ref text, OUT o_attempt integer,
                            OUT o_request text, OUT o_rescore boolean, OUT o_more boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    SELECT c.o_outcome, c.o_job_id, c.o_kind, c.o_evaluation_id, c.o_run_position,
           c.o_job_attempts, c.o_ref, c.o_attempt, c.o_request, c.o_rescore
    INTO o_outcome, o_job_id, o_kind, o_evaluation_id, o_run_position, o_job_attempts, o_ref,
         o_attempt, o_request, o_rescore
    FROM evald_claim_next(p_owner, p_lease_ms, p_now, p_max_attempts) c;
    IF o_outcome = 'none' THEN
        o_more := false;
        RETURN;
    END IF;
    -- (Locked rows count: a hint, at worst one claim that finds nothing.)
    o_more := EXISTS (SELECT 1 FROM jobs WHERE lease_owner IS NULL AND kind = 'run'
                      AND due_at <= now() AND id <> o_job_id)
           OR EXISTS (SELECT 1 FROM jobs WHERE lease_owner IS NULL AND kind <> 'run'
                      AND due_at <= now() AND id <> o_job_id)
           OR EXISTS (SELECT 1 FROM jobs WHERE lease_owner IS NOT NULL
                      AND lease_until < now() AND due_at <= now() AND id <> o_job_id);
END
$$;

-- Up to p_n claims in the caller's transaction, the rows evald_claim_next would claim one
-- after the other (migrations/0015), obsolete ones not counted: expired leases and jobs of
-- other kinds one at a time (rare; locked ones count, and then such a claim takes a run
-- job), then the free run jobs, the usual case, all at once.
CREATE FUNCTION evald_claim_many(p_owner text, p_lease_ms bigint, p_now bigint,
                                 p_max_attempts integer, p_n integer)
RETURNS TABLE (o_outcome text, o_job_id bigint, o_kind text, o_evaluation_id text,
               o_run_position integer, o_job_attempts integer, o_ref text, o_attempt integer,
               o_request text, o_rescore boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    c record;
    v_n integer := 0;
    v_want integer;
    v_ids bigint[];
    v_got integer;
BEGIN
    WHILE v_n < coalesce(p_n, 0)
          AND (EXISTS (SELECT 1 FROM jobs WHERE lease_owner IS NOT NULL
                       AND lease_until < now() AND due_at <= now())
               OR EXISTS (SELECT 1 FROM jobs WHERE lease_owner IS NULL AND kind <> 'run'
                          AND due_at <= now())) LOOP
        SELECT * INTO c FROM evald_claim_next(p_owner, p_lease_ms, p_now, p_max_attempts);
        EXIT WHEN c.o_outcome = 'none';
        CONTINUE WHEN c.o_outcome = 'obsolete';
        RETURN QUERY SELECT c.o_outcome, c.o_job_id, c.o_kind, c.o_evaluation_id,
                            c.o_run_position, c.o_job_attempts, c.o_ref, c.o_attempt,
                            c.o_request, c.o_rescore;
        v_n := v_n + 1;
    END LOOP;
    WHILE v_n < coalesce(p_n, 0) LOOP
        v_want := p_n - v_n;
        SELECT array_agg(f.id ORDER BY f.due_at, f.id) INTO v_ids
        FROM (SELECT j.id, j.due_at FROM jobs j
              WHERE j.lease_owner IS NULL AND j.kind = 'run' AND j.due_at <= now()
              ORDER BY j.due_at, j.id
              FOR UPDATE SKIP LOCKED
              LIMIT v_want) f;
        EXIT WHEN v_ids IS NULL;
        RETURN QUERY SELECT * FROM evald_claim_jobs(v_ids, p_owner, p_lease_ms, p_now,
                                                    p_max_attempts) k
                     WHERE k.o_outcome <> 'obsolete';
        GET DIAGNOSTICS v_got = ROW_COUNT;
        v_n := v_n + v_got;
        EXIT WHEN array_length(v_ids, 1) < v_want;
    END LOOP;
END
$$;

CREATE FUNCTION evald_finish_runs(p_runs jsonb, p_now bigint, p_owner text, p_claims integer,
                                  p_lease_ms bigint, p_max_attempts integer)
RETURNS TABLE (o_index integer, o_result integer, o_job_left bigint, o_outcome text,
               o_job_id bigint, o_kind text, o_evaluation_id text, o_run_position integer,
               o_job_attempts integer, o_ref text, o_attempt integer, o_request text,
               o_rescore boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY SELECT f.o_index, f.o_result, f.o_job_left, NULL::text, NULL::bigint,
                        NULL::text, NULL::text, NULL::integer, NULL::integer, NULL::text,
                        NULL::integer, NULL::text, NULL::boolean
                 FROM evald_finish_runs(p_runs, p_now, p_owner) f;
    RETURN QUERY SELECT NULL::integer, NULL::integer, NULL::bigint, c.*
                 FROM evald_claim_many(p_owner, p_lease_ms, p_now, p_max_attempts,
                                       p_claims) c;
END
$$;

CREATE FUNCTION evald_create_many(p_items jsonb, p_now bigint, p_owner text, p_claims integer,
                                  p_lease_ms bigint, p_max_attempts integer)
RETURNS TABLE (o_index integer, o_result integer, o_outcome text, o_job_id bigint,
               o_kind text, o_evaluation_id text, o_run_position integer,
               o_job_attempts integer, o_ref text, o_attempt integer, o_request text,
               o_rescore boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT x.ord::integer AS i, x.v FROM jsonb_array_elements(p_items)
             WITH ORDINALITY AS x(v, ord) ORDER BY x.ord LOOP
        o_index := r.i;
        o_result := evald_create(r.v->>'id', r.v->'request', (r.v->>'concurrency')::integer,
                                 coalesce(r.v->>'source', ''), r.v->'runs', p_now, p_owner);
        RETURN NEXT;
    END LOOP;
    RETURN QUERY SELECT NULL::integer, NULL::integer, c.*
                 FROM evald_claim_many(p_owner, p_lease_ms, p_now, p_max_attempts,
                                       p_claims) c;
END
$$;

-- 2. evald_finish_runs (migrations/0006) as statements over the whole batch, with the
-- answers evald_finish_run gave each run; it is now the only way a run is finished (a
-- caller that finishes one run sends a batch of one, and evald_finish_run is dropped).
-- The batch's evaluations are locked first, in id order (byte order, as the finalizer
-- locks them: migrations/0017); then its runs are written, the jobs of the runs written
-- deleted where their rows can be locked at once (else o_job_left, for the caller to
-- delete once it has committed), the evaluations' step and counters moved by the runs
-- written, and each evaluation notified and scheduled once, after all of its runs: its
-- last element in the batch answers what evald_schedule returned, its others 0. An
-- element not written answers -2. (The schedule comes after the statement that writes
-- the runs: it must see them.) Planned at each call, as evald_claim_jobs is.
CREATE OR REPLACE FUNCTION evald_finish_runs(p_runs jsonb, p_now bigint,
                                             p_owner text DEFAULT '')
RETURNS TABLE (o_index integer, o_result integer, o_job_left bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_index integer[];
    v_left bigint[];
    v_eval text[];
    v_last boolean[];
    v_status text[];
    v_conc integer[];
BEGIN
    PERFORM 1 FROM evaluations e
    WHERE e.id IN (SELECT x.v->>'evaluation_id' FROM jsonb_array_elements(p_runs) AS x(v))
    ORDER BY e.id COLLATE "C"
    FOR UPDATE;
    WITH items AS (
        SELECT x.ord::integer AS i, x.v FROM jsonb_array_elements(p_runs)
        WITH ORDINALITY AS x(v, ord)),
    written AS (
        UPDATE runs r SET status = i.v->>'status', passed = (i.v->>'passed')::boolean,
            output = i.v->'output', evaluation = i.v->'evaluation',
            benchmark = i.v->'benchmark', metrics = i.v->'metrics',
            failures = coalesce(i.v->'failures', '[]'::jsonb), transcript = i.v->'transcript',
            completed_at = (i.v->>'completed_at')::bigint, turn_id = i.v->>'turn_id',
            started_at = CASE WHEN coalesce((i.v->>'started_at')::bigint, 0) > 0
                              THEN (i.v->>'started_at')::bigint ELSE r.started_at END
        FROM items i
        WHERE r.evaluation_id = i.v->>'evaluation_id'
            AND r.position = (i.v->>'position')::integer AND r.status = 'running'
            AND r.attempt = (i.v->>'attempt')::integer
        RETURNING i.i, r.evaluation_id, r.position, r.passed),
    free AS (
        SELECT j.id, j.evaluation_id, j.run_position FROM jobs j
        WHERE (j.evaluation_id, j.run_position) IN (SELECT w.evaluation_id, w.position
                                                    FROM written w)
            AND j.kind = 'run'
        FOR UPDATE OF j SKIP LOCKED),
    deleted AS (
        DELETE FROM jobs j USING free f WHERE j.id = f.id RETURNING j.id),
    counted AS (
        UPDATE evaluations e SET step = e.step + c.n, updated_at = p_now,
            terminal_runs = e.terminal_runs + c.n, passed_runs = e.passed_runs + c.passed,
            failed_runs = e.failed_runs + c.failed
        FROM (SELECT w.evaluation_id, count(*)::integer AS n,
                     count(*) FILTER (WHERE w.passed IS TRUE)::integer AS passed,
                     count(*) FILTER (WHERE w.passed IS FALSE)::integer AS failed
              FROM written w GROUP BY w.evaluation_id) c
        WHERE e.id = c.evaluation_id
        RETURNING e.id, e.status, e.concurrency),
    answers AS (
        SELECT w.i, w.evaluation_id, c.status, c.concurrency,
               w.i = max(w.i) OVER (PARTITION BY w.evaluation_id) AS last,
               CASE WHEN f.id IS NOT NULL THEN 0
                    ELSE coalesce((SELECT j.id FROM jobs j
                                   WHERE j.evaluation_id = w.evaluation_id
                                       AND j.run_position = w.position AND j.kind = 'run'),
                                  0) END AS job_left
        FROM written w
        JOIN counted c ON c.id = w.evaluation_id
        LEFT JOIN free f ON f.evaluation_id = w.evaluation_id AND f.run_position = w.position)
    SELECT array_agg(a.i ORDER BY a.evaluation_id COLLATE "C", a.i),
           array_agg(a.job_left ORDER BY a.evaluation_id COLLATE "C", a.i),
           array_agg(a.evaluation_id ORDER BY a.evaluation_id COLLATE "C", a.i),
           array_agg(a.last ORDER BY a.evaluation_id COLLATE "C", a.i),
           array_agg(a.status ORDER BY a.evaluation_id COLLATE "C", a.i),
           array_agg(a.concurrency ORDER BY a.evaluation_id COLLATE "C", a.i)
    INTO v_index, v_left, v_eval, v_last, v_status, v_conc
    FROM answers a;
    FOR k IN 1 .. coalesce(array_length(v_index, 1), 0) LOOP
        o_index := v_index[k];
        o_job_left := v_left[k];
        o_result := 0;
        IF v_last[k] THEN
            PERFORM pg_notify('evald_events', v_eval[k]);
            IF v_status[k] NOT IN ('completed', 'failed', 'cancelled') THEN
                o_result := evald_schedule(v_eval[k], v_conc[k], p_owner);
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
    RETURN QUERY SELECT x.ord::integer, -2, 0::bigint
                 FROM jsonb_array_elements(p_runs) WITH ORDINALITY AS x(v, ord)
                 WHERE x.ord::integer <> ALL (coalesce(v_index, '{}'));
END
$$;

-- 3. The finalizer's take of migrations/0017: an evaluation whose runs are all terminal
-- (the usual case: the writer saw its last run written) is not scheduled, which would
-- have found no run to start; one with runs still open is, and leaves the batch.
CREATE OR REPLACE FUNCTION evald_finalize_take(p_ids text[])
RETURNS TABLE (o_id text, o_created_at bigint, o_error text, o_request jsonb,
               o_total_runs integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_id text;
    v_status text;
    v_conc integer;
BEGIN
    FOR v_id IN SELECT DISTINCT x.id COLLATE "C" FROM unnest(p_ids) AS x(id) ORDER BY 1 LOOP
        SELECT e.status, e.concurrency INTO v_status, v_conc FROM evaluations e
        WHERE e.id = v_id FOR UPDATE;
        CONTINUE WHEN NOT FOUND OR v_status IN ('completed', 'failed', 'cancelled');
        CONTINUE WHEN EXISTS (SELECT 1 FROM runs r WHERE r.evaluation_id = v_id
                              AND r.status IN ('pending', 'running'))
                      AND evald_schedule(v_id, v_conc) <> -1;
        RETURN QUERY SELECT e.id, e.created_at, e.error, e.request, e.total_runs
                     FROM evaluations e WHERE e.id = v_id;
    END LOOP;
END
$$;
