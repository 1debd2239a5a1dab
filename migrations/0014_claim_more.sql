-- The claim also says whether another job is due beside the one it took (o_more), so that
-- a worker that claimed wakes one more only when there is something for it: every claim
-- woke one more, which found nothing about once a run, and those empty claims were about a
-- fifth of PostgreSQL's CPU at 0 ms (2,400 of 7,929 claims for 2,256 runs in W1 of
-- bench/bench.py). The body is otherwise migrations/0009's.
DROP FUNCTION evald_claim(text, bigint, bigint, integer);

CREATE FUNCTION evald_claim(p_owner text, p_lease_ms bigint, p_now bigint,
                            p_max_attempts integer,
                            OUT o_outcome text, OUT o_job_id bigint, OUT o_kind text,
                            OUT o_evaluation_id text, OUT o_run_position integer,
                            OUT o_job_attempts integer, OUT o_ref text, OUT o_attempt integer,
                            OUT o_more boolean)
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
        o_more := false;
        RETURN;
    END IF;
    -- Whether another job is due beside this one: the claiming worker wakes one more only
    -- then. (Locked rows count: a hint, at worst one claim that finds nothing.)
    o_more := EXISTS (SELECT 1 FROM jobs WHERE lease_owner IS NULL AND kind = 'run'
                      AND due_at <= now() AND id <> j.id)
           OR EXISTS (SELECT 1 FROM jobs WHERE lease_owner IS NULL AND kind <> 'run'
                      AND due_at <= now() AND id <> j.id)
           OR EXISTS (SELECT 1 FROM jobs WHERE lease_owner IS NOT NULL
                      AND lease_until < now() AND due_at <= now() AND id <> j.id);
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

