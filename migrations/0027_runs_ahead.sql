-- Runs started ahead. The runs of an evaluation with concurrency 1 execute one after
-- another, and each was claimed in the writer's batch that wrote the run before it: a chain
-- of one durable commit a run, so that 4 such evaluations at 0 ms ran at half the speed of
-- 32 (W1 of bench/bench.py). A worker whose runs are quick now asks the batch that writes
-- one of them to start the evaluation's next runs too (evald_claim_ahead), up to a window,
-- each started as any claim starts a run (running, attempt + 1, a job leased to the
-- process) and committed before its call: the worker calls them one after another while
-- the writer writes the earlier ones, so their provider calls still never overlap.
--
-- A run started ahead has a job marked `ahead`. If that job comes free (its process died,
-- or gave it back at a stop) while an earlier run of the evaluation is still open, the
-- run is not the evaluation's to execute yet: evald_claim_jobs puts it back to pending
-- (its attempt stays counted: it may have been called) and deletes the job, and the
-- schedule gives it a job again when its turn comes. So a recovery starts again from the
-- first open run, in plan order.
ALTER TABLE jobs ADD COLUMN ahead boolean NOT NULL DEFAULT false;

CREATE OR REPLACE FUNCTION evald_claim_jobs(p_ids bigint[], p_owner text, p_lease_ms bigint,
                                 p_now bigint, p_max_attempts integer)
RETURNS TABLE (o_outcome text, o_job_id bigint, o_kind text, o_evaluation_id text,
               o_run_position integer, o_job_attempts integer, o_ref text, o_attempt integer,
               o_request text, o_rescore boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
    v_gone bigint[];
    v_behind bigint[];
    v_started bigint[];
BEGIN
    SELECT coalesce(array_agg(j.id), '{}') INTO v_gone FROM jobs j
    WHERE j.id = ANY (p_ids) AND j.kind = 'run'
        AND NOT EXISTS (SELECT 1 FROM evaluations e WHERE e.id = j.evaluation_id
                        AND e.status NOT IN ('completed', 'failed', 'cancelled'));
    SELECT coalesce(array_agg(j.id), '{}') INTO v_behind FROM jobs j
    WHERE j.id = ANY (p_ids) AND j.ahead AND j.kind = 'run' AND j.id <> ALL (v_gone)
        AND EXISTS (SELECT 1 FROM runs r WHERE r.evaluation_id = j.evaluation_id
                    AND r.position < j.run_position AND r.status IN ('pending', 'running'));
    IF cardinality(v_behind) > 0 THEN
        UPDATE runs r SET status = 'pending', started_at = 0, progress = NULL
        FROM jobs j
        WHERE j.id = ANY (v_behind) AND r.evaluation_id = j.evaluation_id
            AND r.position = j.run_position AND r.status = 'running';
        v_gone := v_gone || v_behind;
    END IF;
    UPDATE jobs SET lease_owner = p_owner, attempts = attempts + 1,
        lease_until = now() + make_interval(secs => p_lease_ms / 1000.0)
    WHERE id = ANY (p_ids) AND id <> ALL (v_gone);
    WITH free AS (
        SELECT j.id, f.evaluation_id, f.position
        FROM jobs j
        CROSS JOIN LATERAL (
            SELECT r.evaluation_id, r.position FROM runs r
            WHERE r.evaluation_id = j.evaluation_id AND r.position = j.run_position
                AND r.status IN ('pending', 'running') AND r.attempt < p_max_attempts
            FOR UPDATE SKIP LOCKED) f
        WHERE j.id = ANY (p_ids) AND j.id <> ALL (v_gone) AND j.kind = 'run'),
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

-- Starts, for owner p_owner, up to p_n runs of evaluation p_eval that follow position
-- p_after in plan order: only an evaluation still open with concurrency 1, and only the
-- unbroken sequence p_after + 1, p_after + 2, ... of runs that are pending with attempts
-- left and whose job is free or missing (the first is usually the one the schedule has
-- just enqueued). The caller holds the evaluation's row (the writer's batch locked it).
-- Each run's job is leased to p_owner and marked ahead; each run starts its next attempt
-- (with no start time until it is written).
-- Answers the runs started in order and, in o_taken, how many of their jobs had been
-- enqueued free (so not to be announced to another worker).
CREATE FUNCTION evald_claim_ahead(p_eval text, p_after integer, p_n integer, p_owner text,
                                  p_lease_ms bigint, p_max_attempts integer)
RETURNS TABLE (o_job_id bigint, o_run_position integer, o_job_attempts integer,
               o_attempt integer, o_taken integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
    v_free integer[];
    v_held integer[];
    v_pos integer[];
    v_taken integer;
BEGIN
    IF p_n < 1 OR NOT EXISTS (SELECT 1 FROM evaluations e WHERE e.id = p_eval
                              AND e.status IN ('queued', 'running')
                              AND coalesce(e.concurrency, 1) <= 1) THEN
        RETURN;
    END IF;
    SELECT coalesce(array_agg(f.run_position), '{}') INTO v_free
    FROM (SELECT j.run_position FROM jobs j
          WHERE j.evaluation_id = p_eval AND j.kind = 'run' AND j.run_position > p_after
              AND j.run_position <= p_after + p_n AND j.lease_owner IS NULL
          FOR UPDATE SKIP LOCKED) f;
    SELECT coalesce(array_agg(j.run_position), '{}') INTO v_held FROM jobs j
    WHERE j.evaluation_id = p_eval AND j.kind = 'run' AND j.run_position > p_after
        AND j.run_position <= p_after + p_n AND j.run_position <> ALL (v_free);
    WITH cand AS (
        SELECT r.position FROM runs r
        WHERE r.evaluation_id = p_eval AND r.position > p_after
            AND r.position <= p_after + p_n AND r.status = 'pending'
            AND r.attempt < p_max_attempts AND r.position <> ALL (v_held)
        ORDER BY r.position
        FOR UPDATE SKIP LOCKED),
    numbered AS (
        SELECT c.position, row_number() OVER (ORDER BY c.position) AS k FROM cand c)
    SELECT coalesce(array_agg(n.position ORDER BY n.position), '{}') INTO v_pos
    FROM numbered n WHERE n.position = p_after + n.k;
    IF cardinality(v_pos) = 0 THEN
        RETURN;
    END IF;
    UPDATE jobs SET lease_owner = p_owner, attempts = attempts + 1, ahead = true,
        lease_until = now() + make_interval(secs => p_lease_ms / 1000.0)
    WHERE evaluation_id = p_eval AND kind = 'run' AND run_position = ANY (v_pos)
        AND run_position = ANY (v_free);
    GET DIAGNOSTICS v_taken = ROW_COUNT;
    INSERT INTO jobs (kind, evaluation_id, run_position, lease_owner, lease_until, attempts,
                      ahead)
    SELECT 'run', p_eval, p.position, p_owner,
           now() + make_interval(secs => p_lease_ms / 1000.0), 1, true
    FROM unnest(v_pos) AS p(position)
    WHERE p.position <> ALL (v_free);
    -- Not started yet in time (started_at 0, as a pending run): the sweeper's wall-clock
    -- limit counts from a run's start, and the run's write brings its start.
    UPDATE runs SET status = 'running', attempt = attempt + 1, started_at = 0,
        completed_at = NULL, progress = NULL
    WHERE evaluation_id = p_eval AND position = ANY (v_pos);
    RETURN QUERY
        SELECT j.id, j.run_position, j.attempts, r.attempt, v_taken
        FROM jobs j
        JOIN runs r ON r.evaluation_id = j.evaluation_id AND r.position = j.run_position
        WHERE j.evaluation_id = p_eval AND j.kind = 'run' AND j.run_position = ANY (v_pos)
        ORDER BY j.run_position;
END
$$;

-- The writer's batch (evald_finish_runs, migrations/0019) with runs started ahead: after
-- the batch's runs are written, each item of p_ahead ({"evaluation_id", "after", "n",
-- "need"}, one a worker of the batch, in order) starts up to n runs ahead for its worker
-- (rows 'ahead', o_item its 1-based place); then the usual claims, one for each item that
-- needs a job and got no run ahead, in the items' order (rows 'run' or 'claimed'); and a
-- row 'taken' whose o_run_position counts the enqueued jobs the runs ahead took over.
CREATE FUNCTION evald_finish_runs_ahead(p_runs jsonb, p_now bigint, p_owner text,
                                        p_lease_ms bigint, p_max_attempts integer,
                                        p_ahead jsonb)
RETURNS TABLE (o_index integer, o_result integer, o_job_left bigint, o_item integer,
               o_outcome text, o_job_id bigint, o_kind text, o_evaluation_id text,
               o_run_position integer, o_job_attempts integer, o_ref text, o_attempt integer,
               o_request text, o_rescore boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    it record;
    a record;
    v_got integer;
    v_taken integer := 0;
    v_claims integer := 0;
BEGIN
    RETURN QUERY SELECT f.o_index, f.o_result, f.o_job_left, NULL::integer, NULL::text,
                        NULL::bigint, NULL::text, NULL::text, NULL::integer, NULL::integer,
                        NULL::text, NULL::integer, NULL::text, NULL::boolean
                 FROM evald_finish_runs(p_runs, p_now, p_owner) f;
    o_index := NULL; o_result := NULL; o_job_left := NULL; o_kind := 'run'; o_ref := '';
    o_request := NULL; o_rescore := NULL;
    FOR it IN SELECT x.ord::integer AS k, x.v->>'evaluation_id' AS ev,
                     coalesce((x.v->>'after')::integer, 0) AS after,
                     coalesce((x.v->>'n')::integer, 0) AS n,
                     coalesce((x.v->>'need')::boolean, false) AS need
              FROM jsonb_array_elements(p_ahead) WITH ORDINALITY AS x(v, ord) LOOP
        v_got := 0;
        IF it.n > 0 AND it.ev IS NOT NULL THEN
            FOR a IN SELECT * FROM evald_claim_ahead(it.ev, it.after, it.n, p_owner,
                                                     p_lease_ms, p_max_attempts) LOOP
                o_item := it.k;
                o_outcome := 'ahead';
                o_job_id := a.o_job_id;
                o_evaluation_id := it.ev;
                o_run_position := a.o_run_position;
                o_job_attempts := a.o_job_attempts;
                o_attempt := a.o_attempt;
                RETURN NEXT;
                v_got := v_got + 1;
                v_taken := v_taken + CASE WHEN v_got = 1 THEN a.o_taken ELSE 0 END;
            END LOOP;
        END IF;
        IF it.need AND v_got = 0 THEN
            v_claims := v_claims + 1;
        END IF;
    END LOOP;
    RETURN QUERY SELECT NULL::integer, NULL::integer, NULL::bigint, NULL::integer, c.*
                 FROM evald_claim_many(p_owner, p_lease_ms, p_now, p_max_attempts,
                                       v_claims) c;
    RETURN QUERY SELECT NULL::integer, NULL::integer, NULL::bigint, 0, 'taken'::text,
                        NULL::bigint, NULL::text, NULL::text, v_taken, NULL::integer,
                        NULL::text, NULL::integer, NULL::text, NULL::boolean;
END
$$;
ALTER FUNCTION evald_finish_runs_ahead(jsonb, bigint, text, bigint, integer, jsonb)
    SET enable_seqscan = off;

-- The writer's batch before runs ahead (migrations/0019): it has no caller left.
DROP FUNCTION evald_finish_runs(jsonb, bigint, text, integer, bigint, integer);
