-- The claim of a batch's jobs (evald_claim_jobs, migrations/0019 and 0021) planned the
-- statement that locks and starts the claimed jobs' runs at every call (EXECUTE), because
-- a kept plan of its join chose to walk the open runs, which looked empty when it was
-- planned. Parsing and planning it was a third of a small writer's batch in PostgreSQL
-- (pg_stat_statements, W1 of bench/bench.py with 4 evaluations: 0.2 of 0.9 ms a batch, and
-- more in parsing that it does not count). Each claimed job now reaches its run through a
-- lateral lookup by the run's key, a plan that does not depend on how many runs are open,
-- so the statement keeps its plan like the others.
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
