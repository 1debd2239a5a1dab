-- Claims made inside the transactions that make work due, so that a run no longer costs a
-- transaction of its own to claim. The writer's batch of finished runs, after writing
-- them, claims as many due jobs as it has workers waiting for their write (that write is
-- what usually enqueues their evaluations' next runs), and hands the jobs to them. A batch
-- of starts claims, after creating its evaluations, as many as there are idle workers it
-- reserved. Both claim with evald_claim_next, the claim a worker makes on its own
-- (evald_claim), so which job comes first, the lease, the start of the attempt and the
-- locks taken are the same whoever claims. A claim waits for no lock (SKIP LOCKED
-- throughout), so claiming while the batch holds its evaluations' locks adds no wait to
-- the lock order of docs/engine.md.

-- The claim of migrations/0014 without o_more: the oldest expired lease, else the oldest
-- free job of another kind, else the oldest free run job; a run job's next attempt starts.
CREATE FUNCTION evald_claim_next(p_owner text, p_lease_ms bigint, p_now bigint,
                                 p_max_attempts integer,
                                 OUT o_outcome text, OUT o_job_id bigint, OUT o_kind text,
                                 OUT o_evaluation_id text, OUT o_run_position integer,
                                 OUT o_job_attempts integer, OUT o_ref text,
                                 OUT o_attempt integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    j jobs%ROWTYPE;
    v_status text;
    v_run_status text;
    v_attempt integer;
BEGIN
    SELECT * INTO j FROM jobs
    WHERE lease_owner IS NOT NULL AND lease_until < now() AND due_at <= now()
    ORDER BY lease_until
    FOR UPDATE SKIP LOCKED
    LIMIT 1;
    IF NOT FOUND THEN
        SELECT * INTO j FROM jobs
        WHERE lease_owner IS NULL AND kind <> 'run' AND due_at <= now()
        ORDER BY due_at, id
        FOR UPDATE SKIP LOCKED
        LIMIT 1;
    END IF;
    IF NOT FOUND THEN
        SELECT * INTO j FROM jobs
        WHERE lease_owner IS NULL AND kind = 'run' AND due_at <= now()
        ORDER BY due_at, id
        FOR UPDATE SKIP LOCKED
        LIMIT 1;
    END IF;
    IF NOT FOUND THEN
        o_outcome := 'none';
        RETURN;
    END IF;
    o_job_id := j.id;
    o_kind := j.kind;
    o_evaluation_id := coalesce(j.evaluation_id, '');
    o_run_position := coalesce(j.run_position, 0);
    o_ref := coalesce(j.ref, '');
    o_job_attempts := j.attempts + 1;
    IF j.kind = 'run' THEN
        SELECT e.status INTO v_status FROM evaluations e WHERE e.id = j.evaluation_id;
        IF NOT FOUND OR v_status IN ('completed', 'failed', 'cancelled') THEN
            DELETE FROM jobs WHERE id = j.id;
            o_outcome := 'obsolete';
            RETURN;
        END IF;
        SELECT r.status, r.attempt INTO v_run_status, v_attempt FROM runs r
        WHERE r.evaluation_id = j.evaluation_id AND r.position = j.run_position
        FOR UPDATE SKIP LOCKED;
        IF FOUND AND v_run_status IN ('pending', 'running') AND v_attempt < p_max_attempts THEN
            UPDATE jobs SET lease_owner = p_owner, attempts = attempts + 1,
                lease_until = now() + make_interval(secs => p_lease_ms / 1000.0)
            WHERE id = j.id;
            UPDATE runs SET status = 'running', attempt = v_attempt + 1, started_at = p_now,
                completed_at = NULL, progress = NULL
            WHERE evaluation_id = j.evaluation_id AND position = j.run_position;
            IF v_status = 'queued' THEN
                UPDATE evaluations SET status = 'running', updated_at = p_now
                WHERE id = (SELECT q.id FROM evaluations q WHERE q.id = j.evaluation_id
                            AND q.status = 'queued' FOR UPDATE SKIP LOCKED);
            END IF;
            PERFORM pg_notify('evald_events', j.evaluation_id);
            o_outcome := 'run';
            o_attempt := v_attempt + 1;
            RETURN;
        END IF;
    END IF;
    UPDATE jobs SET lease_owner = p_owner, attempts = attempts + 1,
        lease_until = now() + make_interval(secs => p_lease_ms / 1000.0)
    WHERE id = j.id;
    o_outcome := 'claimed';
END
$$;

-- A worker's own claim: evald_claim_next, and whether another job is due beside it.
CREATE OR REPLACE FUNCTION evald_claim(p_owner text, p_lease_ms bigint, p_now bigint,
                                       p_max_attempts integer,
                                       OUT o_outcome text, OUT o_job_id bigint, OUT o_kind text,
                                       OUT o_evaluation_id text, OUT o_run_position integer,
                                       OUT o_job_attempts integer, OUT o_ref text,
                                       OUT o_attempt integer, OUT o_more boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    SELECT c.o_outcome, c.o_job_id, c.o_kind, c.o_evaluation_id, c.o_run_position,
           c.o_job_attempts, c.o_ref, c.o_attempt
    INTO o_outcome, o_job_id, o_kind, o_evaluation_id, o_run_position, o_job_attempts, o_ref,
         o_attempt
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

-- Up to p_n claims, in the caller's transaction: one row per job claimed ('run' or
-- 'claimed', as evald_claim_next answers); obsolete jobs are deleted on the way and not
-- counted. Fewer rows than p_n: nothing else was due.
CREATE FUNCTION evald_claim_many(p_owner text, p_lease_ms bigint, p_now bigint,
                                 p_max_attempts integer, p_n integer)
RETURNS TABLE (o_outcome text, o_job_id bigint, o_kind text, o_evaluation_id text,
               o_run_position integer, o_job_attempts integer, o_ref text, o_attempt integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    c record;
    v_n integer := 0;
BEGIN
    WHILE v_n < coalesce(p_n, 0) LOOP
        SELECT * INTO c FROM evald_claim_next(p_owner, p_lease_ms, p_now, p_max_attempts);
        EXIT WHEN c.o_outcome = 'none';
        CONTINUE WHEN c.o_outcome = 'obsolete';
        o_outcome := c.o_outcome;
        o_job_id := c.o_job_id;
        o_kind := c.o_kind;
        o_evaluation_id := c.o_evaluation_id;
        o_run_position := c.o_run_position;
        o_job_attempts := c.o_job_attempts;
        o_ref := c.o_ref;
        o_attempt := c.o_attempt;
        RETURN NEXT;
        v_n := v_n + 1;
    END LOOP;
END
$$;

-- The writer's batch: evald_finish_runs (migrations/0006), then up to p_claims claims for
-- the workers whose runs it wrote. Rows of the finishes (o_index, o_result, o_job_left;
-- the claim's columns NULL) come first, then one row per claim (o_index NULL).
CREATE FUNCTION evald_finish_runs(p_runs jsonb, p_now bigint, p_owner text, p_claims integer,
                                  p_lease_ms bigint, p_max_attempts integer)
RETURNS TABLE (o_index integer, o_result integer, o_job_left bigint, o_outcome text,
               o_job_id bigint, o_kind text, o_evaluation_id text, o_run_position integer,
               o_job_attempts integer, o_ref text, o_attempt integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY SELECT f.o_index, f.o_result, f.o_job_left, NULL::text, NULL::bigint,
                        NULL::text, NULL::text, NULL::integer, NULL::integer, NULL::text,
                        NULL::integer
                 FROM evald_finish_runs(p_runs, p_now, p_owner) f;
    RETURN QUERY SELECT NULL::integer, NULL::integer, NULL::bigint, c.*
                 FROM evald_claim_many(p_owner, p_lease_ms, p_now, p_max_attempts,
                                       p_claims) c;
END
$$;
