-- The steps of several case jobs in one statement (engine/cell_batch.c): the cells they
-- finished written together, with the spend, the case rows and the analysis's mark folded
-- once for all of them, then each job's next cell started as evald_cell_next starts it.
--
-- A case job's step (evald_cell_step, migrations/0023) is one transaction and about 16
-- statements a cell; most of them run once a batch here. Only cells of experiments without
-- a judge, a budget or an anytime stopping rule come here (the engine sends the others one
-- by one): their next steps take no lock of another job's rows before the folded ones.
--
-- Locks, in the order every transaction on an experiment takes them: the jobs (in id
-- order), then their runs and cases (each job's own), the spend shards (in key order),
-- then the experiment rows (in id order). Two batches therefore never wait for each other
-- in a circle over what they fold; a batch that fails (a deadlock with a finalization, a
-- lost connection) wrote nothing, and the engine sends its steps again one by one.
--
-- p_steps: [{job, exp, case, position, attempt, run, transcript, cells, flaky,
-- disagree}], at most one step a job; a step without a position only starts its job's
-- next cell (a job's first step). One row a step, in no particular order: o_job and what
-- evald_cell_step answers for it.
CREATE FUNCTION evald_cell_steps(p_owner text, p_lease_ms bigint, p_now bigint,
                                 p_max_attempts integer, p_steps jsonb)
RETURNS TABLE (o_job bigint, o_outcome text, o_position integer, o_attempt integer,
               o_schedule integer, o_lease_left_ms bigint, o_case integer, o_body text,
               o_done text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_held bigint[];
    v_written bigint[];
    v_job bigint;
BEGIN
    -- The jobs this owner still holds; a job it no longer holds has nothing to write (its
    -- cell was taken over or cancelled).
    SELECT coalesce(array_agg(h.id), '{}') INTO v_held
    FROM (SELECT j.id FROM jobs j
          WHERE j.id IN (SELECT (e->>'job')::bigint FROM jsonb_array_elements(p_steps) e)
            AND j.lease_owner = p_owner
          ORDER BY j.id
          FOR UPDATE) h;
    -- The finished runs that still run with their attempt.
    WITH s AS (
        SELECT * FROM jsonb_to_recordset(p_steps)
            AS x(job bigint, exp text, "case" integer, position integer, attempt integer,
                 run jsonb, transcript jsonb)
        WHERE x.job = ANY (v_held) AND x.position IS NOT NULL
    ), w AS (
        UPDATE experiment_runs r SET
            status = s.run->>'status',
            passed = (s.run->>'passed')::boolean,
            score = CASE WHEN jsonb_typeof(s.run->'evaluation'->'score') = 'number'
                    THEN (s.run->'evaluation'->>'score')::double precision END,
            output = s.run->'output',
            evaluation = s.run->'evaluation',
            benchmark = s.run->'benchmark',
            metrics = s.run->'metrics',
            failures = coalesce(s.run->'failures', '[]'),
            transcript = s.transcript,
            progress = NULL,
            completed_at = coalesce((s.run->>'completed_at')::bigint, p_now)
        FROM s
        WHERE r.experiment_id = s.exp AND r.case_index = s."case" AND r.position = s.position
          AND r.status = 'running' AND r.attempt = s.attempt
        RETURNING s.job
    )
    SELECT coalesce(array_agg(w.job), '{}') INTO v_written FROM w;
    IF cardinality(v_written) > 0 THEN
        -- Their spend, one row a shard (engine/cells.c: the provider calls, tokens, cost).
        INSERT INTO experiment_spend (experiment_id, shard, calls, input_tokens, output_tokens,
                                      cost_usd, unpriced, runs)
        SELECT x.exp, (x."case" % 16)::smallint,
               sum((x.run->'spend'->>'calls')::bigint)::bigint,
               sum((x.run->'spend'->>'input_tokens')::bigint)::bigint,
               sum((x.run->'spend'->>'output_tokens')::bigint)::bigint,
               sum(coalesce((x.run->'spend'->>'cost_usd')::double precision, 0)),
               sum(CASE WHEN jsonb_typeof(x.run->'spend'->'cost_usd') = 'number'
                   THEN 0 ELSE 1 END)::integer,
               count(*)::integer
        FROM jsonb_to_recordset(p_steps) AS x(job bigint, exp text, "case" integer, run jsonb)
        WHERE x.job = ANY (v_written) AND x.run ? 'spend'
        GROUP BY 1, 2
        ORDER BY 1, 2
        ON CONFLICT (experiment_id, shard) DO UPDATE SET
            calls = experiment_spend.calls + excluded.calls,
            input_tokens = experiment_spend.input_tokens + excluded.input_tokens,
            output_tokens = experiment_spend.output_tokens + excluded.output_tokens,
            cost_usd = experiment_spend.cost_usd + excluded.cost_usd,
            unpriced = experiment_spend.unpriced + excluded.unpriced,
            runs = experiment_spend.runs + excluded.runs;
        UPDATE experiment_cases c SET cells = x.cells, flaky = x.flaky, disagree = x.disagree,
            changed_seq = nextval('experiment_change_seq')
        FROM jsonb_to_recordset(p_steps)
            AS x(job bigint, exp text, "case" integer, cells jsonb, flaky boolean,
                 disagree boolean)
        WHERE x.job = ANY (v_written) AND c.experiment_id = x.exp AND c.case_index = x."case";
        -- The analysis is out of date (the analyst rebuilds it and notifies watchers).
        UPDATE experiments SET dirty = true
        WHERE id IN (SELECT d.id FROM experiments d
                     WHERE d.id IN (SELECT x.exp
                                    FROM jsonb_to_recordset(p_steps) AS x(job bigint, exp text)
                                    WHERE x.job = ANY (v_written))
                       AND NOT d.dirty
                     ORDER BY d.id
                     FOR NO KEY UPDATE);
    END IF;
    RETURN QUERY
        SELECT x.job, 'lost'::text, NULL::integer, NULL::integer, NULL::integer,
               NULL::bigint, NULL::integer, NULL::text, NULL::text
        FROM jsonb_to_recordset(p_steps) AS x(job bigint, position integer)
        WHERE NOT x.job = ANY (v_held)
           OR (x.position IS NOT NULL AND NOT x.job = ANY (v_written));
    FOR v_job IN
        SELECT x.job FROM jsonb_to_recordset(p_steps) AS x(job bigint, position integer)
        WHERE x.job = ANY (v_held) AND (x.position IS NULL OR x.job = ANY (v_written))
        ORDER BY x.job
    LOOP
        RETURN QUERY
            SELECT v_job, n.o_outcome, n.o_position, n.o_attempt, n.o_schedule,
                   n.o_lease_left_ms, n.o_case, n.o_body, n.o_done
            FROM evald_cell_next(v_job, p_owner, p_lease_ms, p_now, p_max_attempts) n;
    END LOOP;
END
$$;
