-- Pairwise judges (docs/judges.md).
--
-- A judged experiment has one judgement row per judge call: per case, repeat, treatment and
-- order (one order per pair with orders "one"), numbered within the case by `position`
-- (engine/judgements.c). A judgement waits until its pair's two runs have ended; the run
-- that ends second makes it pending when both have an output, and a run that ended
-- without one leaves its pair unjudged (`skipped`). The case's job runs a pending
-- judgement before its next run, so that the pair is judged as soon as it can be while
-- other case jobs go on with their runs; a case is done when its runs and its judgements
-- are. Judgements are started, finished, handed back and recovered like the runs of the
-- case (migrations/0023): attempt + 1 at each start, written only by the attempt that
-- runs, at most EVD_MAX_ATTEMPTS interrupted attempts.
--
-- The case row keeps the tallies of its judged pairs per treatment (`judged`, built by the
-- case job from all the case's judgements), so that the analyst takes a judged case in as
-- it takes in its cells. Judge calls count in the experiment's spend (and budget) with
-- runs = 0; their metrics stay out of the arms'.

ALTER TABLE experiments ADD COLUMN judge_orders smallint NOT NULL DEFAULT 0
    CHECK (judge_orders IN (0, 1, 2)); -- 0: no judge; 1: orders "one"; 2: "both"
ALTER TABLE experiment_cases ADD COLUMN judged jsonb;
-- The case's judgements left unjudged by a run without an output: with the answered and
-- failed ones in `judged`, the analyst knows when every judgement of the case is settled
-- (the anytime rule's sequence by the judge's verdict).
ALTER TABLE experiment_cases ADD COLUMN judge_unjudged integer NOT NULL DEFAULT 0;

CREATE TABLE experiment_judgements (
    experiment_id text NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    case_index    integer NOT NULL,
    position      integer NOT NULL,  -- within the case, 1-based
    repeat        integer NOT NULL,
    treatment     integer NOT NULL,  -- the treatment's arm, 1..m
    judge_order   integer NOT NULL CHECK (judge_order IN (1, 2)),
    status        text NOT NULL DEFAULT 'waiting'
                  CHECK (status IN ('waiting', 'pending', 'running', 'completed', 'failed',
                                    'skipped', 'cancelled')),
    attempt       integer NOT NULL DEFAULT 0,
    winner_slot   text CHECK (winner_slot IN ('1', '2', 'tie')),
    reason        text,
    len_control   bigint,           -- code points of the outputs judged
    len_treatment bigint,
    metrics       jsonb,            -- {calls, input_tokens, output_tokens, cost_usd, latency_ms}
    error         text,
    started_at    bigint NOT NULL DEFAULT 0,
    completed_at  bigint,
    PRIMARY KEY (experiment_id, case_index, position)
);
CREATE INDEX experiment_judgements_open ON experiment_judgements (experiment_id, case_index,
    position) WHERE status IN ('pending', 'running');
CREATE INDEX experiment_judgements_pair ON experiment_judgements (experiment_id, case_index,
    repeat, treatment);

-- A person's outcome of a pair (docs/judges.md, "Pair reviews"); a reviewer's second review
-- of a pair replaces the first.
CREATE TABLE experiment_pair_reviews (
    experiment_id text NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    case_index    integer NOT NULL,
    repeat        integer NOT NULL,
    treatment     integer NOT NULL,
    reviewer      text NOT NULL,
    winner        text NOT NULL CHECK (winner IN ('control', 'tie', 'treatment')),
    note          text,
    created_at    bigint NOT NULL,
    updated_at    bigint NOT NULL,
    seq           bigserial,
    PRIMARY KEY (experiment_id, case_index, repeat, treatment, reviewer)
);
CREATE INDEX experiment_pair_reviews_order ON experiment_pair_reviews (experiment_id, seq);

-- After run (p_case, p_arm, p_repeat) ended: the pairs it belongs to become pending when
-- both their runs have an output, or are left unjudged when it has none. Returns the
-- judgements it left unjudged.
CREATE FUNCTION evald_judge_pairs_ready(p_exp text, p_case integer, p_arm integer,
                                        p_repeat integer, p_has_output boolean)
RETURNS integer LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_unjudged integer := 0;
BEGIN
    IF p_has_output THEN
        UPDATE experiment_judgements g SET status = 'pending'
        WHERE g.experiment_id = p_exp AND g.case_index = p_case AND g.repeat = p_repeat
          AND g.status = 'waiting' AND (p_arm = 0 OR g.treatment = p_arm)
          AND EXISTS (SELECT 1 FROM experiment_runs o
                      WHERE o.experiment_id = p_exp AND o.case_index = p_case
                        AND o.repeat = p_repeat
                        AND o.arm = CASE WHEN p_arm = 0 THEN g.treatment ELSE 0 END
                        AND o.status IN ('completed', 'failed')
                        AND o.output IS NOT NULL AND jsonb_typeof(o.output) <> 'null');
    ELSE
        UPDATE experiment_judgements g SET status = 'skipped'
        WHERE g.experiment_id = p_exp AND g.case_index = p_case AND g.repeat = p_repeat
          AND g.status IN ('waiting', 'pending') AND (p_arm = 0 OR g.treatment = p_arm);
        GET DIAGNOSTICS v_unjudged = ROW_COUNT;
    END IF;
    RETURN v_unjudged;
END
$$;

-- As in migrations/0024, and a judged experiment's pairs made ready (p_run->'judge_pairs').
CREATE OR REPLACE FUNCTION evald_cell_finish(p_exp text, p_case integer, p_position integer,
                                  p_attempt integer, p_run jsonb, p_transcript jsonb,
                                  p_cells jsonb, p_flaky boolean, p_disagree boolean,
                                  p_now bigint)
RETURNS boolean LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_unjudged integer := 0;
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
    IF p_run ? 'spend' THEN
        INSERT INTO experiment_spend (experiment_id, shard, calls, input_tokens, output_tokens,
                                      cost_usd, unpriced, runs)
        VALUES (p_exp, (p_case % 16)::smallint, (p_run->'spend'->>'calls')::bigint,
                (p_run->'spend'->>'input_tokens')::bigint,
                (p_run->'spend'->>'output_tokens')::bigint,
                coalesce((p_run->'spend'->>'cost_usd')::double precision, 0),
                CASE WHEN jsonb_typeof(p_run->'spend'->'cost_usd') = 'number' THEN 0 ELSE 1 END,
                1)
        ON CONFLICT (experiment_id, shard) DO UPDATE SET
            calls = experiment_spend.calls + excluded.calls,
            input_tokens = experiment_spend.input_tokens + excluded.input_tokens,
            output_tokens = experiment_spend.output_tokens + excluded.output_tokens,
            cost_usd = experiment_spend.cost_usd + excluded.cost_usd,
            unpriced = experiment_spend.unpriced + excluded.unpriced,
            runs = experiment_spend.runs + 1;
    END IF;
    IF (p_run->>'judge_pairs')::boolean THEN
        v_unjudged := evald_judge_pairs_ready(p_exp, p_case, (p_run->>'arm')::int,
                                              (p_run->>'repeat')::int,
                                              p_run->'output' IS NOT NULL
                                              AND jsonb_typeof(p_run->'output') <> 'null');
    END IF;
    UPDATE experiment_cases SET cells = p_cells, flaky = p_flaky, disagree = p_disagree,
        judge_unjudged = judge_unjudged + v_unjudged,
        changed_seq = nextval('experiment_change_seq')
    WHERE experiment_id = p_exp AND case_index = p_case;
    UPDATE experiments SET dirty = true WHERE id = p_exp AND NOT dirty;
    RETURN true;
END
$$;

-- Writes judgement p_position of case p_case if it still runs with p_attempt:
-- p_j = {status, winner_slot?, reason?, len_control?, len_treatment?, metrics?, error?,
-- completed_at}; p_judged is the case's tallies with it (engine/judgements.c).
CREATE FUNCTION evald_judge_finish(p_exp text, p_case integer, p_position integer,
                                   p_attempt integer, p_j jsonb, p_judged jsonb, p_now bigint)
RETURNS boolean LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    UPDATE experiment_judgements SET
        status = p_j->>'status',
        winner_slot = p_j->>'winner_slot',
        reason = p_j->>'reason',
        len_control = (p_j->>'len_control')::bigint,
        len_treatment = (p_j->>'len_treatment')::bigint,
        metrics = p_j->'metrics',
        error = p_j->>'error',
        completed_at = coalesce((p_j->>'completed_at')::bigint, p_now)
    WHERE experiment_id = p_exp AND case_index = p_case AND position = p_position
      AND status = 'running' AND attempt = p_attempt;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF jsonb_typeof(p_j->'metrics') = 'object' THEN
        INSERT INTO experiment_spend (experiment_id, shard, calls, input_tokens, output_tokens,
                                      cost_usd, unpriced, runs)
        VALUES (p_exp, (p_case % 16)::smallint,
                coalesce((p_j->'metrics'->>'calls')::bigint, 0),
                coalesce((p_j->'metrics'->>'input_tokens')::bigint, 0),
                coalesce((p_j->'metrics'->>'output_tokens')::bigint, 0),
                coalesce((p_j->'metrics'->>'cost_usd')::double precision, 0),
                CASE WHEN jsonb_typeof(p_j->'metrics'->'cost_usd') = 'number'
                       OR coalesce((p_j->'metrics'->>'calls')::bigint, 0) = 0 THEN 0 ELSE 1 END,
                0)
        ON CONFLICT (experiment_id, shard) DO UPDATE SET
            calls = experiment_spend.calls + excluded.calls,
            input_tokens = experiment_spend.input_tokens + excluded.input_tokens,
            output_tokens = experiment_spend.output_tokens + excluded.output_tokens,
            cost_usd = experiment_spend.cost_usd + excluded.cost_usd,
            unpriced = experiment_spend.unpriced + excluded.unpriced;
    END IF;
    UPDATE experiment_cases SET judged = p_judged,
        changed_seq = nextval('experiment_change_seq')
    WHERE experiment_id = p_exp AND case_index = p_case;
    UPDATE experiments SET dirty = true WHERE id = p_exp AND NOT dirty;
    RETURN true;
END
$$;

-- As in migrations/0024, with the case's judgements: a pending (or interrupted) judgement
-- goes before the case's next run (o_outcome 'judge', or 'judge_exhausted' when its
-- attempts were all interrupted), and a case is done when neither is left.
CREATE OR REPLACE FUNCTION evald_cell_next(p_job bigint, p_owner text, p_lease_ms bigint, p_now bigint,
                                p_max_attempts integer,
                                OUT o_outcome text, OUT o_position integer,
                                OUT o_attempt integer, OUT o_schedule integer,
                                OUT o_lease_left_ms bigint, OUT o_case integer,
                                OUT o_body text, OUT o_done text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    j jobs%ROWTYPE;
    v_status text;
    v_budget jsonb;
    v_case_runs integer;
    v_anytime boolean;
    v_concurrency integer;
    v_judged boolean;
    v_next integer;
    v_moved boolean := false;
    v_judge boolean := false;
    r experiment_runs%ROWTYPE;
    g experiment_judgements%ROWTYPE;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job AND lease_owner = p_owner FOR UPDATE;
    IF NOT FOUND THEN
        o_outcome := 'lost';
        RETURN;
    END IF;
    SELECT status, budget, arms * repeats, stop_rule = 'anytime', concurrency, judge_orders > 0
    INTO v_status, v_budget, v_case_runs, v_anytime, v_concurrency, v_judged
    FROM experiments WHERE id = j.ref;
    IF NOT FOUND OR v_status NOT IN ('queued', 'running') THEN
        DELETE FROM jobs WHERE id = p_job;
        o_outcome := 'gone';
        RETURN;
    END IF;
    LOOP
        IF v_judged THEN
            SELECT * INTO g FROM experiment_judgements
            WHERE experiment_id = j.ref AND case_index = j.run_position
              AND status IN ('pending', 'running')
            ORDER BY position LIMIT 1 FOR UPDATE;
            IF FOUND THEN
                v_judge := true;
                EXIT;
            END IF;
        END IF;
        SELECT * INTO r FROM experiment_runs
        WHERE experiment_id = j.ref AND case_index = j.run_position
          AND status IN ('pending', 'running')
        ORDER BY position LIMIT 1 FOR UPDATE;
        EXIT WHEN FOUND;
        v_next := NULL;
        IF (v_budget IS NULL OR evald_experiment_budget_room(j.ref, v_budget, v_case_runs) > 0)
           AND (NOT v_anytime OR evald_experiment_lookahead(j.ref, v_concurrency) > 0)
        THEN
            SELECT c.case_index INTO v_next FROM experiment_cases c
            WHERE c.experiment_id = j.ref AND NOT c.dispatched
            ORDER BY c.dispatch_index
            LIMIT 1
            FOR UPDATE SKIP LOCKED;
        END IF;
        IF v_next IS NULL THEN
            DELETE FROM jobs WHERE id = p_job;
            o_schedule := evald_experiment_schedule(j.ref, p_owner);
            o_outcome := 'done';
            RETURN;
        END IF;
        UPDATE experiment_cases SET dispatched = true
        WHERE experiment_id = j.ref AND case_index = v_next;
        IF v_budget IS NOT NULL THEN
            PERFORM evald_experiment_count_dispatch(j.ref, v_next, v_case_runs);
        END IF;
        UPDATE jobs SET run_position = v_next WHERE id = p_job;
        j.run_position := v_next;
        v_moved := true;
    END LOOP;
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
                    AND d.status IN ('completed', 'failed', 'cancelled', 'skipped'))::text
        INTO o_body, o_done
        FROM experiment_cases c WHERE c.experiment_id = j.ref AND c.case_index = j.run_position;
    END IF;
    IF v_judge THEN
        o_position := g.position;
        IF g.attempt >= p_max_attempts THEN
            UPDATE experiment_judgements SET status = 'running', started_at = p_now
            WHERE experiment_id = j.ref AND case_index = j.run_position
              AND position = g.position;
            o_attempt := g.attempt;
            o_outcome := 'judge_exhausted';
            RETURN;
        END IF;
        UPDATE experiment_judgements SET status = 'running', attempt = g.attempt + 1,
            started_at = p_now, completed_at = NULL
        WHERE experiment_id = j.ref AND case_index = j.run_position AND position = g.position;
        IF v_status = 'queued' THEN
            UPDATE experiments SET status = 'running', updated_at = p_now
            WHERE id = j.ref AND status = 'queued';
        END IF;
        o_attempt := g.attempt + 1;
        o_outcome := 'judge';
        RETURN;
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

-- evald_cell_step for a finished judgement: writes it, then the case job's next step.
CREATE FUNCTION evald_judge_step(p_job bigint, p_owner text, p_lease_ms bigint, p_now bigint,
                                 p_max_attempts integer, p_exp text, p_case integer,
                                 p_position integer, p_attempt integer, p_j jsonb,
                                 p_judged jsonb,
                                 OUT o_outcome text, OUT o_position integer,
                                 OUT o_attempt integer, OUT o_schedule integer,
                                 OUT o_lease_left_ms bigint, OUT o_case integer,
                                 OUT o_body text, OUT o_done text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    -- The lock order of evald_cell_step: the job, then judgements and cases, then the
    -- experiment row.
    PERFORM 1 FROM jobs WHERE id = p_job AND lease_owner = p_owner FOR UPDATE;
    IF NOT FOUND THEN
        o_outcome := 'lost';
        RETURN;
    END IF;
    IF NOT evald_judge_finish(p_exp, p_case, p_position, p_attempt, p_j, p_judged, p_now) THEN
        o_outcome := 'lost';
        RETURN;
    END IF;
    SELECT * INTO o_outcome, o_position, o_attempt, o_schedule, o_lease_left_ms, o_case,
                  o_body, o_done
    FROM evald_cell_next(p_job, p_owner, p_lease_ms, p_now, p_max_attempts);
END
$$;

-- As in migrations/0024, and the skipped cases' judgements unjudged.
CREATE OR REPLACE FUNCTION evald_experiment_skip(p_exp text, p_now bigint)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_runs integer;
BEGIN
    WITH c AS (
        UPDATE experiment_cases SET dispatched = true, skipped = true
        WHERE experiment_id = p_exp AND NOT dispatched
        RETURNING case_index),
    r AS (
        UPDATE experiment_runs r SET status = 'skipped', completed_at = p_now
        FROM c WHERE r.experiment_id = p_exp AND r.case_index = c.case_index
            AND r.status = 'pending'
        RETURNING 1),
    g AS (
        UPDATE experiment_judgements g SET status = 'skipped', completed_at = p_now
        FROM c WHERE g.experiment_id = p_exp AND g.case_index = c.case_index
            AND g.status IN ('waiting', 'pending')
        RETURNING 1)
    SELECT count(*) INTO v_runs FROM r;
    UPDATE experiments SET skipped_runs = skipped_runs + v_runs WHERE id = p_exp;
    RETURN v_runs;
END
$$;

-- The arm a judge's answer names: order 1 shows the control in slot 1, order 2 the
-- treatment; a tie names none.
CREATE FUNCTION evald_judge_named(p_order integer, p_slot text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_slot IS NULL THEN NULL
                WHEN p_slot = 'tie' THEN 'tie'
                WHEN (p_order = 1) = (p_slot = '1') THEN 'control'
                ELSE 'treatment' END
$$;

-- A pair's outcome from its answered orders (docs/judges.md): an arm named by one order
-- and not contradicted by the other wins; both tie, or the orders name different arms
-- (inconsistent), is a tie. Null while no order is answered.
CREATE FUNCTION evald_pair_outcome(p_exp text, p_case integer, p_repeat integer,
                                   p_treatment integer,
                                   OUT o_outcome text, OUT o_inconsistent boolean)
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN count(*) = 0 THEN NULL
                WHEN count(*) FILTER (WHERE n = 'control') > 0
                     AND count(*) FILTER (WHERE n = 'treatment') > 0 THEN 'tie'
                WHEN count(*) FILTER (WHERE n = 'treatment') > 0 THEN 'treatment'
                WHEN count(*) FILTER (WHERE n = 'control') > 0 THEN 'control'
                ELSE 'tie' END,
           count(*) FILTER (WHERE n = 'control') > 0
               AND count(*) FILTER (WHERE n = 'treatment') > 0
    FROM (SELECT evald_judge_named(h.judge_order, h.winner_slot) AS n
          FROM experiment_judgements h
          WHERE h.experiment_id = p_exp AND h.case_index = p_case AND h.repeat = p_repeat
            AND h.treatment = p_treatment AND h.status = 'completed') q
$$;

-- A pair's human outcome: the majority of its reviewers' (latest) reviews; null when
-- nobody reviewed it or the reviewers are split evenly at the top.
CREATE FUNCTION evald_pair_human(p_exp text, p_case integer, p_repeat integer,
                                 p_treatment integer)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN count(*) = 0 THEN NULL
                WHEN (array_agg(k ORDER BY k DESC))[1]
                     = coalesce((array_agg(k ORDER BY k DESC))[2], -1) THEN NULL
                ELSE (array_agg(winner ORDER BY k DESC))[1] END
    FROM (SELECT winner, count(*) AS k FROM experiment_pair_reviews
          WHERE experiment_id = p_exp AND case_index = p_case AND repeat = p_repeat
            AND treatment = p_treatment
          GROUP BY winner) q
$$;
