-- The life of a run in server-side functions, so that a run costs two statements (claim
-- and start; finish and schedule) instead of thirteen round trips. Each
-- statement inside a function takes a fresh snapshot (READ COMMITTED), so a function
-- that waited for an evaluation's lock sees every run committed by the lock's previous
-- holder. docs/bench.md has the figures; docs/engine.md the rules they keep.

-- Schedules the runs of an evaluation that may start now: pairs in plan order, at most
-- `p_conc` unfinished pairs open at once, inside a pair the second run only after the
-- first is terminal. Each unfinished pair has one or two open runs, so the first
-- 2 × concurrency open runs name every pair that may be open. Enqueues a job for each
-- chosen run that has none and notifies evald_jobs with their number, followed by
-- `p_owner` when given:
-- the process that enqueued them wakes its own workers at once, and its keeper passes the
-- notification over. Returns the number enqueued, or
-- -1 when no run is open any more (the evaluation is ready to be finalized).
-- The caller holds the evaluation's row lock.
CREATE FUNCTION evald_schedule(p_eval text, p_conc integer, p_owner text DEFAULT '')
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

-- Claimable jobs, in small partial indexes instead of one scan of jobs_due: that one
-- starts with every job whose lease is live (a run in flight), which each claim walked
-- past. Free run jobs and free jobs of other kinds (session turns) are apart, so that
-- neither look walks the other's; an expired lease is found in jobs_leased, whose first
-- entry usually ends the look at once (its lease is live).
CREATE INDEX jobs_free_runs ON jobs (due_at, id) WHERE lease_owner IS NULL AND kind = 'run';
CREATE INDEX jobs_free_other ON jobs (due_at, id) WHERE lease_owner IS NULL AND kind <> 'run';
CREATE INDEX jobs_leased ON jobs (lease_until) WHERE lease_owner IS NOT NULL;

-- Claims a due job with a lease and, for a run job in the ordinary case, starts its next
-- attempt in the same transaction: the run becomes running with attempt + 1, a queued
-- evaluation running, and evald_events is notified. Which job, in this order: the oldest
-- expired lease (its run was interrupted), of any kind; the oldest free job of another
-- kind than run (a session turn); the oldest free run job.
-- The claim never waits for a lock and never takes the evaluation's: the job's row and
-- then the run's are locked with SKIP LOCKED, and the evaluation is only read (its
-- queued → running change is skipped while someone holds it; the next start makes it).
-- So claims of one evaluation do not queue behind each other or behind its finishes, and
-- the lock order (evaluation first, then its runs and jobs) cannot be inverted: a cancel
-- or a timeout that holds the evaluation and wants this run waits for this short
-- transaction, which waits for nothing; one that already holds the run makes the claim
-- leave the start to the caller.
-- o_outcome:
--   none      no job is due;
--   run       a run job was claimed and its attempt o_attempt started;
--   obsolete  the run's evaluation is gone or terminal: the job was deleted;
--   claimed   a job was claimed and nothing else done (another kind of job, a run whose
--             attempts are exhausted or which is already terminal, or whose row another
--             transaction holds): the caller starts a run in a transaction of its own,
--             which takes the evaluation's lock first.
-- The claim commits asynchronously: a crash of PostgreSQL can lose at most the last
-- moments of claims and starts, which leaves those runs pending, to be started again;
-- finishes stay synchronous, and a synchronous commit makes every earlier one durable.
CREATE FUNCTION evald_claim(p_owner text, p_lease_ms bigint, p_now bigint,
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
    PERFORM set_config('synchronous_commit', 'off', true);
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

-- Writes a run's outcome, only if it is still running with this attempt (a worker whose
-- lease was taken over, or whose evaluation was cancelled, writes nothing), deletes its
-- job, moves the evaluation's step and counters by exactly this run (the only open →
-- terminal transition besides cancel, whose caller recounts), notifies evald_events
-- and schedules what may run next. o_result is -2 when nothing was written, else what
-- evald_schedule returned (-1: every run is terminal, finalize; n ≥ 0: jobs enqueued).
-- The job is deleted only if its row can be locked at once: a claimer whose snapshot
-- predates the job's lease may hold that lock for the rest of its transaction (FOR UPDATE
-- keeps a row locked that its recheck then rejected), and waiting for it here would hold
-- the evaluation's lock meanwhile. Such a job stays behind, still leased to this process:
-- o_job_left is its id, for the caller to delete once it has committed.
CREATE FUNCTION evald_finish_run(p_eval text, p_pos integer, p_attempt integer,
                                 p_status text, p_passed boolean, p_output jsonb,
                                 p_evaluation jsonb, p_benchmark jsonb, p_metrics jsonb,
                                 p_failures jsonb, p_transcript jsonb, p_completed_at bigint,
                                 p_turn text, p_started_at bigint, p_now bigint,
                                 p_owner text DEFAULT '',
                                 OUT o_result integer, OUT o_job_left bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_status text;
    v_conc integer;
    v_passed boolean;
    v_job bigint;
BEGIN
    o_result := -2;
    o_job_left := 0;
    SELECT e.status, e.concurrency INTO v_status, v_conc FROM evaluations e
    WHERE e.id = p_eval FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE runs SET status = p_status, passed = p_passed, output = p_output,
        evaluation = p_evaluation, benchmark = p_benchmark, metrics = p_metrics,
        failures = p_failures, transcript = p_transcript, completed_at = p_completed_at,
        turn_id = p_turn,
        started_at = CASE WHEN p_started_at > 0 THEN p_started_at ELSE started_at END
    WHERE evaluation_id = p_eval AND position = p_pos AND status = 'running'
        AND attempt = p_attempt
    RETURNING passed INTO v_passed;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT j.id INTO v_job FROM jobs j
    WHERE j.evaluation_id = p_eval AND j.run_position = p_pos AND j.kind = 'run'
    FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        DELETE FROM jobs WHERE id = v_job;
    ELSE
        SELECT j.id INTO v_job FROM jobs j
        WHERE j.evaluation_id = p_eval AND j.run_position = p_pos AND j.kind = 'run';
        o_job_left := coalesce(v_job, 0);
    END IF;
    UPDATE evaluations SET step = step + 1, updated_at = p_now,
        terminal_runs = terminal_runs + 1,
        passed_runs = passed_runs + (v_passed IS TRUE)::int,
        failed_runs = failed_runs + (v_passed IS FALSE)::int
    WHERE id = p_eval;
    PERFORM pg_notify('evald_events', p_eval);
    o_result := 0;
    IF v_status NOT IN ('completed', 'failed', 'cancelled') THEN
        o_result := evald_schedule(p_eval, v_conc, p_owner);
    END IF;
END
$$;

-- Transcripts, run documents and reports are compressed when TOASTed; lz4 costs a
-- fraction of pglz's CPU for the same kind of text (storing the 770 kB report of a
-- 1,000-run evaluation took 40 ms with pglz).
ALTER TABLE runs ALTER COLUMN transcript SET COMPRESSION lz4,
    ALTER COLUMN output SET COMPRESSION lz4,
    ALTER COLUMN metrics SET COMPRESSION lz4;
ALTER TABLE evaluations ALTER COLUMN report SET COMPRESSION lz4,
    ALTER COLUMN request SET COMPRESSION lz4;

-- Finishes several runs in one transaction: the batch of the writer thread, which takes
-- the finish off the workers' path. p_runs is an array of objects with evald_finish_run's
-- parameters by name (evaluation_id, position, attempt, status, passed, output,
-- evaluation, benchmark, metrics, failures, transcript, completed_at, turn_id,
-- started_at). They are finished in evaluation id order, so two batches lock
-- evaluations in the same order and cannot wait for each other in a circle. One row per
-- element, in any order: its index (1-based), o_result and o_job_left as evald_finish_run
-- answers them; every job it enqueues is announced.
CREATE FUNCTION evald_finish_runs(p_runs jsonb, p_now bigint, p_owner text DEFAULT '')
RETURNS TABLE (o_index integer, o_result integer, o_job_left bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    r record;
    f record;
BEGIN
    FOR r IN SELECT x.ord::integer AS i, x.v FROM jsonb_array_elements(p_runs)
             WITH ORDINALITY AS x(v, ord) ORDER BY x.v->>'evaluation_id', x.ord LOOP
        SELECT * INTO f FROM evald_finish_run(
            r.v->>'evaluation_id', (r.v->>'position')::integer, (r.v->>'attempt')::integer,
            r.v->>'status', (r.v->>'passed')::boolean, r.v->'output', r.v->'evaluation',
            r.v->'benchmark', r.v->'metrics', coalesce(r.v->'failures', '[]'::jsonb),
            r.v->'transcript', (r.v->>'completed_at')::bigint, r.v->>'turn_id',
            coalesce((r.v->>'started_at')::bigint, 0), p_now, p_owner);
        o_index := r.i;
        o_result := f.o_result;
        o_job_left := f.o_job_left;
        RETURN NEXT;
    END LOOP;
END
$$;
