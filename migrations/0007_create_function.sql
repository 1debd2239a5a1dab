-- A new evaluation in one statement: the evaluation, its planned runs, its first jobs
-- (evald_schedule; `p_owner` as there) and the change notification; returns the number
-- of jobs enqueued. Starting 32 evaluations at once was
-- six round trips each, and the spread of their start times delayed every later run.
-- The new row needs no lock: no other transaction can see it before this one commits.
CREATE FUNCTION evald_create(p_id text, p_request jsonb, p_conc integer, p_source text,
                             p_runs jsonb, p_now bigint, p_owner text DEFAULT '')
RETURNS integer LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    INSERT INTO evaluations (id, status, request, concurrency, source_evaluation_id,
                             total_runs, created_at, updated_at)
    VALUES (p_id, 'queued', p_request, p_conc, NULLIF(p_source, ''),
            jsonb_array_length(p_runs), p_now, p_now);
    INSERT INTO runs (evaluation_id, position, run_id, role, iteration, pair_position,
                      session_id)
    SELECT p_id, x.execution_position, x.run_id, x.role, x.iteration, x.pair_position,
           x.session_id
    FROM jsonb_to_recordset(p_runs) AS x(execution_position int, run_id text, role text,
                                         iteration int, pair_position int, session_id text);
    PERFORM pg_notify('evald_events', p_id);
    RETURN evald_schedule(p_id, p_conc, p_owner);
END
$$;
