-- The re-score of a terminal evaluation (docs/experiments.md, "Re-score an evaluation"): a
-- new evaluation whose runs copy the source's stored agent turns and are scored again by
-- another evaluator through the ordinary run jobs (claim, lease, writer, finalizer), with
-- no model call for the target. The runs that the experiment re-score would leave alone
-- (evald_derive_reruns, migrations/0012: those that failed before a verdict, and cancelled
-- ones) keep their result and are terminal from the start.

-- How an evaluation with a source_evaluation_id was made from it: NULL for a rerun (which
-- runs everything again), 'rescore' for a re-score. The run worker reads it with the
-- request to choose between the agent turn and the evaluator alone.
ALTER TABLE evaluations ADD COLUMN derivation text CHECK (derivation IN ('rescore'));

-- Creates evaluation p_id, the re-score of the terminal evaluation p_src, with the
-- normalized request p_request and the planned runs p_runs (as evald_create takes them;
-- the plan is the source's, so a position names the same run in both), and schedules the
-- runs to score again. o_rescored: how many runs are scored again, -1 when p_src is
-- unknown, -2 when it is not terminal (nothing written then). o_enqueued: what
-- evald_schedule answered (-1: no run to score again, the evaluation is ready to be
-- finalized). The source is locked FOR SHARE, so it cannot be deleted or change
-- meanwhile; the new rows need no lock until this commits.
CREATE FUNCTION evald_evaluation_rescore(p_src text, p_id text, p_request jsonb, p_runs jsonb,
                                         p_now bigint, p_owner text,
                                         OUT o_rescored integer, OUT o_enqueued integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    s evaluations%ROWTYPE;
BEGIN
    o_enqueued := 0;
    SELECT * INTO s FROM evaluations WHERE id = p_src FOR SHARE;
    IF NOT FOUND THEN
        o_rescored := -1;
        RETURN;
    END IF;
    IF s.status IN ('queued', 'running') THEN
        o_rescored := -2;
        RETURN;
    END IF;
    INSERT INTO evaluations (id, status, request, concurrency, source_evaluation_id,
                             derivation, total_runs, created_at, updated_at)
    VALUES (p_id, 'queued', p_request, s.concurrency, p_src, 'rescore',
            jsonb_array_length(p_runs), p_now, p_now);
    INSERT INTO runs (evaluation_id, position, run_id, role, iteration, pair_position,
                      session_id, status, attempt, passed, turn_id, output, evaluation,
                      benchmark, metrics, failures, transcript, started_at, completed_at)
    SELECT p_id, x.execution_position, x.run_id, x.role, x.iteration, x.pair_position,
           x.session_id,
           CASE WHEN o.again THEN 'pending' ELSE r.status END,
           CASE WHEN o.again THEN 0 ELSE r.attempt END,
           CASE WHEN o.again THEN NULL ELSE r.passed END,
           r.turn_id, r.output,
           CASE WHEN o.again THEN NULL ELSE r.evaluation END,
           r.benchmark, r.metrics,
           CASE WHEN o.again THEN '[]' ELSE r.failures END,
           r.transcript,
           CASE WHEN o.again THEN 0 ELSE r.started_at END,
           CASE WHEN o.again THEN NULL ELSE r.completed_at END
    FROM jsonb_to_recordset(p_runs) AS x(execution_position int, run_id text, role text,
                                         iteration int, pair_position int, session_id text)
    JOIN runs r ON r.evaluation_id = p_src AND r.position = x.execution_position,
         LATERAL (SELECT evald_derive_reruns('rescore', r.status, r.output, r.failures)
                  AS again) o;
    SELECT count(*) FILTER (WHERE status = 'pending') INTO o_rescored
    FROM runs WHERE evaluation_id = p_id;
    -- The counters of the runs kept as they were, as evald_finish_run would have moved them.
    UPDATE evaluations e SET
        terminal_runs = k.terminal, passed_runs = k.passed, failed_runs = k.failed
    FROM (SELECT count(*) FILTER (WHERE status <> 'pending') AS terminal,
                 count(*) FILTER (WHERE status <> 'pending' AND passed IS TRUE) AS passed,
                 count(*) FILTER (WHERE status <> 'pending' AND passed IS FALSE) AS failed
          FROM runs WHERE evaluation_id = p_id) k
    WHERE e.id = p_id;
    PERFORM pg_notify('evald_events', p_id);
    o_enqueued := evald_schedule(p_id, s.concurrency, p_owner);
END
$$;
