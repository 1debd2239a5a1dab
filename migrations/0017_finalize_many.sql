-- The finalizer's batch (engine/steps.c) in a few statements instead of eight round trips
-- for each evaluation (a savepoint, its lock, the schedule, its row, its runs, the report,
-- two notifications). 1,024 evaluations of one run pair finishing within half a second
-- waited 0.3 s for their reports, on a machine whose two cores the round trips filled.

-- Locks the evaluations p_ids in id order (the writer's order), schedules the runs that
-- may start of those with runs still open (evald_schedule: they leave the batch), and
-- answers a row for each one whose runs are all terminal: what its report is built from.
-- Terminal and unknown ones are passed over.
CREATE FUNCTION evald_finalize_take(p_ids text[])
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
        CONTINUE WHEN evald_schedule(v_id, v_conc) <> -1;
        RETURN QUERY SELECT e.id, e.created_at, e.error, e.request, e.total_runs
                     FROM evaluations e WHERE e.id = v_id;
    END LOOP;
END
$$;

-- Makes evaluations terminal with their reports, in the caller's transaction: p_items is
-- an array of {id, status, report, eligible (true, false or null), event_id, payload}.
-- Each gets its status, report, eligibility, completed_at and recounted run counters, its
-- completion event in the outbox, and the notifications evald_events and
-- evald_completed (the webhook and iii deliveries wake on the latter). Returns how many
-- were written (an unknown id writes nothing).
CREATE FUNCTION evald_finish_evals(p_items jsonb, p_now bigint)
RETURNS integer LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    r record;
    v_n integer := 0;
BEGIN
    FOR r IN SELECT x.v FROM jsonb_array_elements(p_items) AS x(v) LOOP
        UPDATE evaluations e SET status = r.v->>'status', report = r.v->'report',
            eligible = (r.v->>'eligible')::boolean, completed_at = p_now, updated_at = p_now,
            terminal_runs = s.terminal, passed_runs = s.passed, failed_runs = s.failed
        FROM (SELECT count(*) FILTER (WHERE q.status IN ('completed', 'failed', 'cancelled'))
                         AS terminal,
                     count(*) FILTER (WHERE q.passed) AS passed,
                     count(*) FILTER (WHERE q.passed = false
                                      AND q.status IN ('completed', 'failed', 'cancelled'))
                         AS failed
              FROM runs q WHERE q.evaluation_id = r.v->>'id') s
        WHERE e.id = r.v->>'id';
        CONTINUE WHEN NOT FOUND;
        INSERT INTO completion_events (event_id, evaluation_id, payload, created_at)
        VALUES (r.v->>'event_id', r.v->>'id', r.v->'payload', p_now);
        PERFORM pg_notify('evald_events', r.v->>'id');
        PERFORM pg_notify('evald_completed', r.v->>'id');
        v_n := v_n + 1;
    END LOOP;
    RETURN v_n;
END
$$;
