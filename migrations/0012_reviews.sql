-- Human review of experiment runs, and experiments derived from another one
-- (docs/experiments.md, "Review, re-score and retry"). A review is one reviewer's verdict
-- on one run; a second review of the same run by the same reviewer replaces the first.
-- A derived experiment is a copy of a terminal experiment's cases and runs: a re-score
-- runs again only the evaluator of every run that has an output, a retry runs again only
-- the runs that failed before a verdict; every other run keeps its result.

ALTER TABLE experiments ADD COLUMN source_experiment_id text;
ALTER TABLE experiments ADD COLUMN derivation text CHECK (derivation IN ('rescore', 'retry'));
ALTER TABLE experiments ADD COLUMN retried_runs integer;
-- The run id in the source experiment that a retried run replaces.
ALTER TABLE experiment_runs ADD COLUMN retried_from text;

CREATE TABLE experiment_reviews (
    id            bigserial PRIMARY KEY,
    experiment_id text NOT NULL,
    case_index    integer NOT NULL,
    position      integer NOT NULL,
    reviewer      text NOT NULL,
    verdict       text NOT NULL CHECK (verdict IN ('pass', 'fail')),
    note          text,
    created_at    bigint NOT NULL,
    updated_at    bigint NOT NULL,
    FOREIGN KEY (experiment_id, case_index, position)
        REFERENCES experiment_runs (experiment_id, case_index, position) ON DELETE CASCADE,
    UNIQUE (experiment_id, case_index, position, reviewer)
);
CREATE INDEX experiment_reviews_list ON experiment_reviews (experiment_id, id);

-- The human verdict of each reviewed run of p_exp: the majority of its reviewers'
-- verdicts, a tie going to the most recent review.
CREATE FUNCTION evald_human_verdicts(p_exp text)
RETURNS TABLE (case_index integer, "position" integer, passed boolean, reviews integer)
LANGUAGE sql STABLE AS $$
    SELECT v.case_index, v.position,
           CASE WHEN 2 * sum((v.verdict = 'pass')::int) > count(*) THEN true
                WHEN 2 * sum((v.verdict = 'pass')::int) < count(*) THEN false
                ELSE (array_agg(v.verdict = 'pass' ORDER BY v.updated_at DESC, v.id DESC))[1]
           END,
           count(*)::int
    FROM experiment_reviews v WHERE v.experiment_id = p_exp
    GROUP BY v.case_index, v.position
$$;

-- Whether run r is run again by a derivation of kind p_kind:
--   rescore  the run reached its evaluator (completed, or failed in the evaluate phase)
--   retry    the run failed before a verdict in any other phase (provider errors,
--            timeouts, exhausted attempts)
CREATE FUNCTION evald_derive_reruns(p_kind text, p_status text, p_output jsonb,
                                    p_failures jsonb)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE p_kind
        WHEN 'rescore' THEN p_output IS NOT NULL AND jsonb_typeof(p_output) <> 'null'
             AND (p_status = 'completed'
                  OR (p_status = 'failed' AND coalesce(p_failures, '[]') @> '[{"phase": "evaluate"}]'))
        WHEN 'retry' THEN p_status = 'failed'
             AND NOT coalesce(p_failures, '[]') @> '[{"phase": "evaluate"}]'
        ELSE false END
$$;

-- Creates experiment p_id, a derivation of kind p_kind of the terminal experiment p_src,
-- with request p_request, and schedules its case jobs. Returns the number of runs to run
-- again, -1 when p_src is unknown, -2 when it is not terminal (nothing written).
CREATE FUNCTION evald_experiment_derive(p_src text, p_id text, p_kind text, p_request jsonb,
                                        p_now bigint, p_owner text)
RETURNS integer LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    s experiments%ROWTYPE;
    v_open integer;
    v_sched integer;
BEGIN
    SELECT * INTO s FROM experiments WHERE id = p_src FOR SHARE;
    IF NOT FOUND THEN
        RETURN -1;
    END IF;
    IF s.status IN ('queued', 'running') THEN
        RETURN -2;
    END IF;
    INSERT INTO experiments (id, name, status, request, dataset_id, dataset_sha256, arms,
                             repeats, concurrency, case_count, total_runs, analysis, dirty,
                             created_at, updated_at, source_experiment_id, derivation)
    VALUES (p_id, s.name, 'queued', p_request, s.dataset_id, s.dataset_sha256, s.arms,
            s.repeats, s.concurrency, s.case_count, s.total_runs, s.analysis, true, p_now,
            p_now, p_src, p_kind);
    INSERT INTO experiment_runs (experiment_id, case_index, position, arm, repeat, run_id,
                                 session_id, status, attempt, passed, score, output,
                                 evaluation, benchmark, metrics, failures, transcript,
                                 started_at, completed_at, retried_from)
    SELECT p_id, r.case_index, r.position, r.arm, r.repeat, r.run_id,
           p_id || '_' || r.case_index || '_' || r.arm || '_' || r.repeat,
           CASE WHEN o.again THEN 'pending' ELSE r.status END,
           CASE WHEN o.again THEN 0 ELSE r.attempt END,
           CASE WHEN o.again THEN NULL ELSE r.passed END,
           CASE WHEN o.again THEN NULL ELSE r.score END,
           CASE WHEN o.again AND p_kind = 'retry' THEN NULL ELSE r.output END,
           CASE WHEN o.again THEN NULL ELSE r.evaluation END,
           CASE WHEN o.again AND p_kind = 'retry' THEN NULL ELSE r.benchmark END,
           CASE WHEN o.again AND p_kind = 'retry' THEN NULL ELSE r.metrics END,
           CASE WHEN o.again THEN '[]' ELSE r.failures END,
           CASE WHEN o.again AND p_kind = 'retry' THEN NULL ELSE r.transcript END,
           CASE WHEN o.again THEN 0 ELSE r.started_at END,
           CASE WHEN o.again THEN NULL ELSE r.completed_at END,
           CASE WHEN o.again AND p_kind = 'retry' THEN r.run_id END
    FROM experiment_runs r,
         LATERAL (SELECT evald_derive_reruns(p_kind, r.status, r.output, r.failures)
                  AS again) o
    WHERE r.experiment_id = p_src;
    SELECT count(*) INTO v_open FROM experiment_runs
    WHERE experiment_id = p_id AND status = 'pending';
    -- A case keeps its cells until one of its runs finishes again (then they are rebuilt
    -- from all its terminal runs); a case with a run to re-score starts from no cell.
    INSERT INTO experiment_cases (experiment_id, case_index, case_id, body, cluster, cells,
                                  flaky, disagree, changed_seq)
    SELECT p_id, c.case_index, c.case_id, c.body, c.cluster,
           CASE WHEN p_kind = 'rescore' AND EXISTS (
                    SELECT 1 FROM experiment_runs r WHERE r.experiment_id = p_id
                    AND r.case_index = c.case_index AND r.status = 'pending')
                THEN '[]' ELSE c.cells END,
           c.flaky, c.disagree, nextval('experiment_change_seq')
    FROM experiment_cases c WHERE c.experiment_id = p_src;
    IF p_kind = 'retry' THEN
        UPDATE experiments SET retried_runs = v_open WHERE id = p_id;
    END IF;
    v_sched := evald_experiment_schedule(p_id, p_owner);
    RETURN v_open;
END
$$;
