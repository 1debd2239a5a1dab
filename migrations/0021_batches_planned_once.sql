-- Half of PostgreSQL's time in a writer's batch was planning, not running: the two
-- functions of migrations/0019 that write a batch's runs and claim its workers' next jobs
-- planned their statements at every call (force_custom_plan), about 0.8 ms of a batch of
-- two runs (pg_stat_statements with track_planning, W1 of bench/bench.py with 4
-- evaluations), because a plan kept from a moment when the tables were small scanned them
-- whole once they were not. They now keep their plans (one a connection), and no kept
-- plan scans a table whose rows it reaches by key (enable_seqscan off inside them and the
-- functions they call: every statement there finds its rows through a primary key or the
-- jobs' and runs' indexes). The one statement whose kept plan still went wrong — it chose
-- to walk the open runs, which looked empty when it was planned, rather than reach the
-- claimed jobs' runs by key — is planned at each call, as before.
ALTER FUNCTION evald_finish_runs(jsonb, bigint, text)
    SET plan_cache_mode = force_generic_plan
    SET enable_seqscan = off;

CREATE OR REPLACE FUNCTION evald_claim_jobs(p_ids bigint[], p_owner text, p_lease_ms bigint,
                                 p_now bigint, p_max_attempts integer)
RETURNS TABLE (o_outcome text, o_job_id bigint, o_kind text, o_evaluation_id text,
               o_run_position integer, o_job_attempts integer, o_ref text, o_attempt integer,
               o_request text, o_rescore boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
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
    -- Planned at each call: a plan kept from a moment when runs looked empty walks every
    -- open run to find the few it wants.
    EXECUTE $q$
    WITH free AS (
        SELECT j.id, r.evaluation_id, r.position FROM runs r
        JOIN jobs j ON j.evaluation_id = r.evaluation_id AND j.run_position = r.position
        WHERE j.id = ANY ($1) AND j.id <> ALL ($2) AND j.kind = 'run'
            AND r.status IN ('pending', 'running') AND r.attempt < $3
        FOR UPDATE OF r SKIP LOCKED),
    started AS (
        UPDATE runs r SET status = 'running', attempt = r.attempt + 1, started_at = $4,
            completed_at = NULL, progress = NULL
        FROM free f
        WHERE r.evaluation_id = f.evaluation_id AND r.position = f.position
        RETURNING f.id)
    SELECT coalesce(array_agg(s.id), '{}') FROM started s$q$
    INTO v_started USING p_ids, v_gone, p_max_attempts, p_now;
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
