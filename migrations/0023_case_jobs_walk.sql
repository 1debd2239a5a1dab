-- A case job walks on to the experiment's next case instead of ending with its case.
--
-- Each case cost six round trips for its two runs (pg_stat_statements, bench/experiment.py
-- E1: 2,000 cases x 2 arms at concurrency 64): the claim of its job, the experiment's
-- request, the case, and three steps. The step that ended a case deleted its job, locked
-- the experiment's row to give the next case a new job, and announced it (evald_jobs):
-- 64 workers queued for that row, 5 ms a case on average, and an experiment ran at about
-- 1,200 calls/s whatever its concurrency.
--
-- Now, when the case's last cell is written, the same job moves on to the first case not
-- yet dispatched and starts its first open cell in the same statement, answering that
-- case's body and terminal runs: the worker goes on without a claim, a read of the request
-- or of the case, and nothing is announced. Cases are taken in order with SKIP LOCKED on
-- their rows (`dispatched`, below), so no two jobs wait for each other and no transaction
-- waits for the experiment's row: a case whose taker's transaction fails stays
-- undispatched for the next one. A job ends when no case is left; the scheduler
-- (evald_experiment_schedule) gives out the first `concurrency` jobs and fills up after an
-- interruption, as before. Locks: the job, then the runs and case it finished, then the
-- next case's row and runs (which no one else holds: an undispatched case has no job, and
-- a cancel deletes the jobs, waiting for this one, before it touches runs).

-- True once a job has taken the case. Cases of experiments already there count as taken
-- below next_case, the scheduler's mark before.
ALTER TABLE experiment_cases ADD COLUMN dispatched boolean NOT NULL DEFAULT true;
ALTER TABLE experiment_cases ALTER COLUMN dispatched SET DEFAULT false;
UPDATE experiment_cases c SET dispatched = false
FROM experiments x
WHERE x.id = c.experiment_id AND x.status IN ('queued', 'running')
    AND c.case_index >= x.next_case;
CREATE INDEX experiment_cases_undispatched ON experiment_cases (experiment_id, case_index)
    WHERE NOT dispatched;

-- Gives cases jobs, in order, until `concurrency` exist (migrations/0010), taking the
-- cases not yet dispatched. Returns the number of new jobs, or -1 when the experiment has
-- no job and no case left to give one (every run is terminal: the caller finalizes). The
-- experiment's row lock serialises it with itself; the jobs that walk do not take it.
CREATE OR REPLACE FUNCTION evald_experiment_schedule(p_exp text, p_owner text DEFAULT '')
RETURNS integer LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    x experiments%ROWTYPE;
    v_jobs integer;
    v_new integer := 0;
BEGIN
    SELECT * INTO x FROM experiments WHERE id = p_exp FOR UPDATE;
    IF NOT FOUND OR x.status NOT IN ('queued', 'running') THEN
        RETURN 0;
    END IF;
    SELECT count(*) INTO v_jobs FROM jobs WHERE kind = 'cell' AND ref = p_exp;
    IF v_jobs < x.concurrency THEN
        WITH taken AS (
            SELECT c.case_index FROM experiment_cases c
            WHERE c.experiment_id = p_exp AND NOT c.dispatched
            ORDER BY c.case_index
            LIMIT x.concurrency - v_jobs
            FOR UPDATE SKIP LOCKED),
        marked AS (
            UPDATE experiment_cases c SET dispatched = true FROM taken t
            WHERE c.experiment_id = p_exp AND c.case_index = t.case_index
            RETURNING c.case_index),
        added AS (
            INSERT INTO jobs (kind, ref, run_position)
            SELECT 'cell', p_exp, m.case_index FROM marked m
            ON CONFLICT (ref, run_position) WHERE kind = 'cell' DO NOTHING
            RETURNING 1)
        SELECT count(*) INTO v_new FROM added;
        IF v_new > 0 THEN
            PERFORM pg_notify('evald_jobs', v_new::text
                              || CASE WHEN p_owner <> '' THEN ' ' || p_owner ELSE '' END);
        END IF;
    END IF;
    IF v_jobs + v_new = 0 THEN
        RETURN -1; -- nothing was left to schedule (every case was dispatched)
    END IF;
    RETURN v_new;
END
$$;

DROP FUNCTION evald_cell_step(bigint, text, bigint, bigint, integer, text, integer, integer,
                              integer, jsonb, jsonb, jsonb, boolean, boolean);
DROP FUNCTION evald_cell_next(bigint, text, bigint, bigint, integer);

-- As in migrations/0010, with o_case: the case of the cell started (or exhausted), and,
-- when the job moved to another case than p_case, that case's body and terminal runs
-- (o_body, o_done, as evd_store_cell_case reads them).
CREATE FUNCTION evald_cell_next(p_job bigint, p_owner text, p_lease_ms bigint, p_now bigint,
                                p_max_attempts integer,
                                OUT o_outcome text, OUT o_position integer,
                                OUT o_attempt integer, OUT o_schedule integer,
                                OUT o_lease_left_ms bigint, OUT o_case integer,
                                OUT o_body text, OUT o_done text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    j jobs%ROWTYPE;
    v_status text;
    v_next integer;
    v_moved boolean := false;
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
    LOOP
        SELECT * INTO r FROM experiment_runs
        WHERE experiment_id = j.ref AND case_index = j.run_position
          AND status IN ('pending', 'running')
        ORDER BY position LIMIT 1 FOR UPDATE;
        EXIT WHEN FOUND;
        -- The case is done: the job takes the first case not yet dispatched, if any.
        SELECT c.case_index INTO v_next FROM experiment_cases c
        WHERE c.experiment_id = j.ref AND NOT c.dispatched
        ORDER BY c.case_index
        LIMIT 1
        FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            DELETE FROM jobs WHERE id = p_job;
            o_schedule := evald_experiment_schedule(j.ref, p_owner);
            o_outcome := 'done';
            RETURN;
        END IF;
        UPDATE experiment_cases SET dispatched = true
        WHERE experiment_id = j.ref AND case_index = v_next;
        UPDATE jobs SET run_position = v_next WHERE id = p_job;
        j.run_position := v_next;
        v_moved := true;
    END LOOP;
    -- The lease is renewed once a third of it has passed (the keeper renews it while a
    -- cell is in flight); o_lease_left_ms tells the caller how much of it is left.
    IF j.lease_until < now() + make_interval(secs => p_lease_ms * 2 / 3 / 1000.0) THEN
        UPDATE jobs SET lease_until = now() + make_interval(secs => p_lease_ms / 1000.0)
        WHERE id = p_job;
        o_lease_left_ms := p_lease_ms;
    ELSE
        o_lease_left_ms := (extract(epoch FROM j.lease_until - now()) * 1000)::bigint;
    END IF;
    o_case := j.run_position;
    IF v_moved THEN
        SELECT c.body::text,
               (SELECT coalesce(json_agg(json_build_object('position', d.position, 'arm', d.arm,
                        'repeat', d.repeat, 'status', d.status, 'passed', d.passed,
                        'benchmark', d.benchmark) ORDER BY d.position), '[]')
                FROM experiment_runs d
                WHERE d.experiment_id = c.experiment_id AND d.case_index = c.case_index
                    AND d.status IN ('completed', 'failed', 'cancelled'))::text
        INTO o_body, o_done
        FROM experiment_cases c WHERE c.experiment_id = j.ref AND c.case_index = j.run_position;
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

CREATE FUNCTION evald_cell_step(p_job bigint, p_owner text, p_lease_ms bigint, p_now bigint,
                                p_max_attempts integer, p_exp text, p_case integer,
                                p_position integer, p_attempt integer, p_run jsonb,
                                p_transcript jsonb, p_cells jsonb, p_flaky boolean,
                                p_disagree boolean,
                                OUT o_outcome text, OUT o_position integer,
                                OUT o_attempt integer, OUT o_schedule integer,
                                OUT o_lease_left_ms bigint, OUT o_case integer,
                                OUT o_body text, OUT o_done text)
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
    SELECT * INTO o_outcome, o_position, o_attempt, o_schedule, o_lease_left_ms, o_case,
                  o_body, o_done
    FROM evald_cell_next(p_job, p_owner, p_lease_ms, p_now, p_max_attempts);
END
$$;
