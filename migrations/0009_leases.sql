-- Leases that hold (issue 17): the claim commits durably, the keeper's renewal waits for
-- no lock, and scheduling waits for no job row, so that writing runs and renewing leases
-- cannot deadlock. docs/engine.md has the rules these keep.

-- The claim commits synchronously now. With an asynchronous commit a crash of PostgreSQL
-- could undo a claim whose worker was already calling the provider: the run was free
-- again, a second worker started it, and the provider had it twice at once. A claim
-- that found nothing writes nothing and costs no flush. Otherwise as in 0006.
CREATE OR REPLACE FUNCTION evald_claim(p_owner text, p_lease_ms bigint, p_now bigint,
                            p_max_attempts integer,
                            OUT o_outcome text, OUT o_job_id bigint, OUT o_kind text,
                            OUT o_evaluation_id text, OUT o_run_position integer,
                            OUT o_job_attempts integer, OUT o_ref text, OUT o_attempt integer)
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


-- Renews this owner's leases on p_ids: every third of the lease, by the keeper. Rows are
-- locked in id order and with SKIP LOCKED, so the renewal waits for nothing and cannot
-- close a cycle with a finish, a claim or a cancel that holds one of them (a finish
-- locks its evaluations, then runs and jobs). One row per id of p_ids still leased to
-- p_owner: o_renewed true when renewed, false when another transaction held its row at
-- that moment (tried again at the next renewal). An id without a row is no longer this
-- owner's: its run was finished, cancelled or taken over.
CREATE FUNCTION evald_renew(p_owner text, p_ids bigint[], p_lease_ms bigint)
RETURNS TABLE (o_id bigint, o_renewed boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_done bigint[];
BEGIN
    WITH l AS (
        SELECT j.id FROM jobs j WHERE j.lease_owner = p_owner AND j.id = ANY(p_ids)
        ORDER BY j.id FOR UPDATE SKIP LOCKED),
    u AS (
        UPDATE jobs j SET lease_until = now() + make_interval(secs => p_lease_ms / 1000.0)
        FROM l WHERE j.id = l.id AND j.lease_owner = p_owner
        RETURNING j.id)
    SELECT coalesce(array_agg(u.id), '{}') INTO v_done FROM u;
    RETURN QUERY
        SELECT d, true FROM unnest(v_done) AS d
        UNION ALL
        SELECT j.id, false FROM jobs j
        WHERE j.lease_owner = p_owner AND j.id = ANY(p_ids) AND j.id <> ALL(v_done);
END
$$;

-- Scheduling inserts a job only for a run that has none. ON CONFLICT alone looked at the
-- existing job, and waited for whoever held its row (a keeper renewing its lease) while
-- this finish held another job's row that the keeper wanted next: a deadlock, after
-- which the runs of the batch were executed a second time. Otherwise as in 0006.
CREATE OR REPLACE FUNCTION evald_schedule(p_eval text, p_conc integer, p_owner text DEFAULT '')
RETURNS integer LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_conc integer := greatest(1, least(coalesce(p_conc, 1), 16));
    v_open integer;
    v_new integer;
BEGIN
    WITH open_runs AS (
        SELECT r.position, (r.position - 1) / 2 AS pair
        FROM runs r
        WHERE r.evaluation_id = p_eval AND r.status IN ('pending', 'running')
        ORDER BY r.position
        LIMIT 2 * v_conc),
    firsts AS (
        SELECT DISTINCT ON (o.pair) o.pair, o.position FROM open_runs o ORDER BY o.pair, o.position),
    chosen AS (
        SELECT f.position FROM firsts f ORDER BY f.pair LIMIT v_conc),
    added AS (
        INSERT INTO jobs (kind, evaluation_id, run_position)
        SELECT 'run', p_eval, c.position FROM chosen c
        WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.evaluation_id = p_eval
                          AND j.run_position = c.position AND j.kind = 'run')
        ON CONFLICT (evaluation_id, run_position) WHERE kind = 'run' DO NOTHING
        RETURNING 1)
    SELECT (SELECT count(*) FROM open_runs), (SELECT count(*) FROM added) INTO v_open, v_new;
    IF v_new > 0 THEN
        PERFORM pg_notify('evald_jobs', v_new::text
                          || CASE WHEN p_owner <> '' THEN ' ' || p_owner ELSE '' END);
    END IF;
    IF v_open = 0 THEN
        RETURN -1;
    END IF;
    RETURN v_new;
END
$$;

