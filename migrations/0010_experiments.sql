-- Experiments (docs/experiments.md): a control and 1–4 treatments over every case of a
-- dataset. An experiment keeps its own copy of its cases (a dataset may be deleted once
-- no live experiment uses it), one row per planned run, and the analysis as last built.
-- Its runs are executed by the engine's workers as jobs of kind 'cell': one job per case,
-- whose cells run one after another; at most `concurrency` case jobs exist at once and
-- next_case is the first case not yet given a job.

ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check
    CHECK (kind IN ('run', 'step', 'deliver', 'session', 'cell'));
CREATE UNIQUE INDEX jobs_one_per_case ON jobs (ref, run_position) WHERE kind = 'cell';

CREATE TABLE experiments (
    id            text PRIMARY KEY,
    name          text,
    status        text NOT NULL
                  CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    request       jsonb NOT NULL,           -- the normalized request (domain/experiment.h)
    dataset_id    text NOT NULL,
    dataset_sha256 text NOT NULL,
    arms          integer NOT NULL CHECK (arms BETWEEN 2 AND 5),
    repeats       integer NOT NULL CHECK (repeats > 0),
    concurrency   integer NOT NULL CHECK (concurrency > 0),
    case_count    integer NOT NULL CHECK (case_count > 0),
    total_runs    integer NOT NULL,
    next_case     integer NOT NULL DEFAULT 1,
    terminal_runs integer NOT NULL DEFAULT 0,
    passed_runs   integer NOT NULL DEFAULT 0,
    failed_runs   integer NOT NULL DEFAULT 0,
    -- {arms, comparisons, analysis} as last built; rebuilt while dirty (a run finished
    -- since), at most about once a second, and once more when the experiment ends.
    analysis      jsonb NOT NULL,
    dirty         boolean NOT NULL DEFAULT false,
    analysis_seq  bigint NOT NULL DEFAULT 0,
    created_at    bigint NOT NULL,
    updated_at    bigint NOT NULL,
    completed_at  bigint
);
CREATE INDEX experiments_newest ON experiments (created_at DESC, id DESC);
CREATE INDEX experiments_live ON experiments (status) WHERE status IN ('queued', 'running');
CREATE INDEX experiments_dirty ON experiments (id) WHERE dirty;
CREATE INDEX experiments_dataset ON experiments (dataset_id)
    WHERE status IN ('queued', 'running');
CREATE SEQUENCE experiment_analysis_seq;

-- One row a case: its normalized body, its cluster (analysis.cluster_by's value as text),
-- and per arm the analysis cell (docs/experiments.md, "Cells") written with each run.
CREATE TABLE experiment_cases (
    experiment_id text NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    case_index    integer NOT NULL,
    case_id       text NOT NULL,
    body          jsonb NOT NULL,
    cluster       text,
    cells         jsonb NOT NULL DEFAULT '[]',
    flaky         boolean NOT NULL DEFAULT false,
    disagree      boolean NOT NULL DEFAULT false,
    -- experiment_change_seq at the last write of cells: an analyst that has seen the
    -- changes up to some number reads only the cases changed after it.
    changed_seq   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (experiment_id, case_index)
);
CREATE INDEX experiment_cases_id ON experiment_cases (experiment_id, case_id);
CREATE INDEX experiment_cases_changed ON experiment_cases (experiment_id, changed_seq);
CREATE SEQUENCE experiment_change_seq;

CREATE TABLE experiment_runs (
    experiment_id text NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    case_index    integer NOT NULL,
    position      integer NOT NULL,          -- within the case, 1-based
    arm           integer NOT NULL,
    repeat        integer NOT NULL,
    run_id        text NOT NULL,
    session_id    text NOT NULL,
    status        text NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    attempt       integer NOT NULL DEFAULT 0,
    passed        boolean,
    score         double precision,
    output        jsonb,
    evaluation    jsonb,
    benchmark     jsonb,
    metrics       jsonb,
    failures      jsonb NOT NULL DEFAULT '[]',
    transcript    jsonb,
    progress      jsonb,
    started_at    bigint NOT NULL DEFAULT 0,
    completed_at  bigint,
    PRIMARY KEY (experiment_id, case_index, position)
);
CREATE UNIQUE INDEX experiment_runs_session ON experiment_runs (session_id);
CREATE INDEX experiment_runs_open ON experiment_runs (experiment_id, case_index, position)
    WHERE status IN ('pending', 'running');

-- Gives cases jobs, in dataset order, until `concurrency` exist. Returns the number of
-- new jobs, or -1 when the experiment has no job and no case left to give one (every run
-- is terminal: the caller finalizes). The experiment's row lock serialises it.
CREATE FUNCTION evald_experiment_schedule(p_exp text, p_owner text DEFAULT '')
RETURNS integer LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    x experiments%ROWTYPE;
    v_jobs integer;
    v_last integer;
    v_new integer := 0;
BEGIN
    SELECT * INTO x FROM experiments WHERE id = p_exp FOR UPDATE;
    IF NOT FOUND OR x.status NOT IN ('queued', 'running') THEN
        RETURN 0;
    END IF;
    SELECT count(*) INTO v_jobs FROM jobs WHERE kind = 'cell' AND ref = p_exp;
    v_last := least(x.case_count, x.next_case + greatest(x.concurrency - v_jobs, 0) - 1);
    IF v_last >= x.next_case THEN
        INSERT INTO jobs (kind, ref, run_position)
        SELECT 'cell', p_exp, g FROM generate_series(x.next_case, v_last) AS g
        ON CONFLICT (ref, run_position) WHERE kind = 'cell' DO NOTHING;
        GET DIAGNOSTICS v_new = ROW_COUNT;
        UPDATE experiments SET next_case = v_last + 1 WHERE id = p_exp;
        IF v_new > 0 THEN
            PERFORM pg_notify('evald_jobs', v_new::text
                              || CASE WHEN p_owner <> '' THEN ' ' || p_owner ELSE '' END);
        END IF;
    END IF;
    IF v_jobs + v_new = 0 THEN
        RETURN -1; -- nothing was left to schedule (next_case is past the last case)
    END IF;
    RETURN v_new;
END
$$;

-- The next cell of case job p_job (kind 'cell', held by p_owner), in one transaction:
--   gone       the experiment is terminal or deleted: the job is deleted
--   lost       p_owner no longer holds the job: nothing done
--   done       every run of the case is terminal: the job is deleted and the next cases
--              scheduled; o_schedule is evald_experiment_schedule's answer (-1: finalize)
--   exhausted  the next run used up its attempts: the caller fails it (o_position,
--              o_attempt the attempt to write as)
--   started    the next run is running with attempt o_attempt; o_lease_left_ms of the
--              job's lease are left
CREATE FUNCTION evald_cell_next(p_job bigint, p_owner text, p_lease_ms bigint, p_now bigint,
                                p_max_attempts integer,
                                OUT o_outcome text, OUT o_position integer,
                                OUT o_attempt integer, OUT o_schedule integer,
                                OUT o_lease_left_ms bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    j jobs%ROWTYPE;
    v_status text;
    r experiment_runs%ROWTYPE;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job AND lease_owner = p_owner FOR UPDATE;
    IF NOT FOUND THEN
        o_outcome := 'lost';
        RETURN;
    END IF;
    SELECT status INTO v_status FROM experiments WHERE id = j.ref;
    IF NOT FOUND OR v_status NOT IN ('queued', 'running') THEN
        DELETE FROM jobs WHERE id = p_job;
        o_outcome := 'gone';
        RETURN;
    END IF;
    SELECT * INTO r FROM experiment_runs
    WHERE experiment_id = j.ref AND case_index = j.run_position
      AND status IN ('pending', 'running')
    ORDER BY position LIMIT 1 FOR UPDATE;
    IF NOT FOUND THEN
        DELETE FROM jobs WHERE id = p_job;
        o_schedule := evald_experiment_schedule(j.ref, p_owner);
        o_outcome := 'done';
        RETURN;
    END IF;
    -- The lease is renewed once a third of it has passed (the keeper renews it while a
    -- cell is in flight); o_lease_left_ms tells the caller how much of it is left.
    IF j.lease_until < now() + make_interval(secs => p_lease_ms * 2 / 3 / 1000.0) THEN
        UPDATE jobs SET lease_until = now() + make_interval(secs => p_lease_ms / 1000.0)
        WHERE id = p_job;
        o_lease_left_ms := p_lease_ms;
    ELSE
        o_lease_left_ms := (extract(epoch FROM j.lease_until - now()) * 1000)::bigint;
    END IF;
    o_position := r.position;
    IF r.attempt >= p_max_attempts THEN
        UPDATE experiment_runs SET status = 'running', started_at = p_now
        WHERE experiment_id = j.ref AND case_index = j.run_position AND position = r.position;
        o_attempt := r.attempt;
        o_outcome := 'exhausted';
        RETURN;
    END IF;
    UPDATE experiment_runs SET status = 'running', attempt = r.attempt + 1, started_at = p_now,
        completed_at = NULL, progress = NULL
    WHERE experiment_id = j.ref AND case_index = j.run_position AND position = r.position;
    IF v_status = 'queued' THEN
        UPDATE experiments SET status = 'running', updated_at = p_now
        WHERE id = j.ref AND status = 'queued';
    END IF;
    o_attempt := r.attempt + 1;
    o_outcome := 'started';
END
$$;

-- Writes a finished cell (if still running with p_attempt): the run, its case's cells and
-- flags, and marks the experiment's analysis out of date. False when the run was taken
-- over or cancelled meanwhile (nothing written).
CREATE FUNCTION evald_cell_finish(p_exp text, p_case integer, p_position integer,
                                  p_attempt integer, p_run jsonb, p_transcript jsonb,
                                  p_cells jsonb, p_flaky boolean, p_disagree boolean,
                                  p_now bigint)
RETURNS boolean LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    UPDATE experiment_runs SET
        status = p_run->>'status',
        passed = (p_run->>'passed')::boolean,
        score = CASE WHEN jsonb_typeof(p_run->'evaluation'->'score') = 'number'
                THEN (p_run->'evaluation'->>'score')::double precision END,
        output = p_run->'output',
        evaluation = p_run->'evaluation',
        benchmark = p_run->'benchmark',
        metrics = p_run->'metrics',
        failures = coalesce(p_run->'failures', '[]'),
        transcript = p_transcript,
        progress = NULL,
        completed_at = coalesce((p_run->>'completed_at')::bigint, p_now)
    WHERE experiment_id = p_exp AND case_index = p_case AND position = p_position
      AND status = 'running' AND attempt = p_attempt;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE experiment_cases SET cells = p_cells, flaky = p_flaky, disagree = p_disagree,
        changed_seq = nextval('experiment_change_seq')
    WHERE experiment_id = p_exp AND case_index = p_case;
    -- Watchers hear of it from the analyst, which rebuilds the analysis and notifies
    -- (twice a second at most): a notification per run would serialise the commits.
    UPDATE experiments SET dirty = true WHERE id = p_exp AND NOT dirty;
    RETURN true;
END
$$;

-- evald_cell_finish of the cell just run (when p_position is not null), then
-- evald_cell_next, in one statement: a case job pays one round trip and one commit a
-- cell. 'lost' when the finished cell was not written (taken over or cancelled).
CREATE FUNCTION evald_cell_step(p_job bigint, p_owner text, p_lease_ms bigint, p_now bigint,
                                p_max_attempts integer, p_exp text, p_case integer,
                                p_position integer, p_attempt integer, p_run jsonb,
                                p_transcript jsonb, p_cells jsonb, p_flaky boolean,
                                p_disagree boolean,
                                OUT o_outcome text, OUT o_position integer,
                                OUT o_attempt integer, OUT o_schedule integer,
                                OUT o_lease_left_ms bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    -- Locks in the order every transaction on an experiment takes them: the case's job,
    -- then runs and cases, then the experiment row (a cancel deletes the jobs first and
    -- locks the experiment last, so the two cannot wait for each other in a circle). A job
    -- this owner no longer holds has nothing to write: its cell was taken over or cancelled.
    PERFORM 1 FROM jobs WHERE id = p_job AND lease_owner = p_owner FOR UPDATE;
    IF NOT FOUND THEN
        o_outcome := 'lost';
        RETURN;
    END IF;
    IF p_position IS NOT NULL AND NOT evald_cell_finish(p_exp, p_case, p_position, p_attempt,
            p_run, p_transcript, p_cells, p_flaky, p_disagree, p_now) THEN
        o_outcome := 'lost';
        RETURN;
    END IF;
    SELECT * INTO o_outcome, o_position, o_attempt, o_schedule, o_lease_left_ms
    FROM evald_cell_next(p_job, p_owner, p_lease_ms, p_now, p_max_attempts);
END
$$;
