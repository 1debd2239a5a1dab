-- Sequential experiments and budgets (docs/experiments.md, "Stopping early" and "Budgets").
--
-- Cases are dispatched in `dispatch_index` order: the dataset's order for the fixed rule,
-- a permutation drawn from the request's seed for the anytime rule (written at the start).
-- A case enters the analysis's sequence once all its runs are terminal: the analyst gives
-- it the next `seq` under the experiment's row lock, so that every process reads one
-- sequence and a confidence sequence updated case by case never sees a case move.
--
-- The decision to stop is a property of the stored state, made in one transaction: the
-- analyst, holding the experiment's row, marks every case not yet dispatched as dispatched
-- and skipped (its runs `skipped`) and writes `stopped`. A case job takes its next case
-- with SKIP LOCKED on the case rows, so it either took its case before the decision
-- committed (the decision's UPDATE waited for it and then passed over the case) or finds
-- none left after it: no case is dispatched after the decision, in any process.
--
-- The spend of every finished run is counted in 16 shards (so that 64 case jobs do not
-- queue on one row); with a budget, a case is dispatched only
-- while the spend plus a reservation for the runs in flight and for the case stays within
-- every cap. A budget that refuses the next case ends the job as if no case were left; the
-- finish then skips the rest with the reason `budget`.

ALTER TABLE experiment_cases ADD COLUMN dispatch_index integer;
UPDATE experiment_cases SET dispatch_index = case_index;
ALTER TABLE experiment_cases ALTER COLUMN dispatch_index SET NOT NULL;
-- A case inserted without one (a re-score or retry copies its source's cases,
-- migrations/0012) is dispatched in dataset order.
CREATE FUNCTION evald_case_dispatch_default() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.dispatch_index := coalesce(NEW.dispatch_index, NEW.case_index);
    RETURN NEW;
END
$$;
CREATE TRIGGER experiment_cases_dispatch_default BEFORE INSERT ON experiment_cases
    FOR EACH ROW EXECUTE FUNCTION evald_case_dispatch_default();
ALTER TABLE experiment_cases ADD COLUMN seq integer;
ALTER TABLE experiment_cases ADD COLUMN skipped boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX experiment_cases_seq ON experiment_cases (experiment_id, seq)
    WHERE seq IS NOT NULL;
DROP INDEX experiment_cases_undispatched;
CREATE INDEX experiment_cases_undispatched ON experiment_cases (experiment_id, dispatch_index)
    WHERE NOT dispatched;

ALTER TABLE experiment_runs DROP CONSTRAINT experiment_runs_status_check;
ALTER TABLE experiment_runs ADD CONSTRAINT experiment_runs_status_check
    CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled', 'skipped'));

ALTER TABLE experiments ADD COLUMN stop_rule text NOT NULL DEFAULT 'fixed'
    CHECK (stop_rule IN ('fixed', 'anytime'));
-- {reason, at_case, runs_saved} once dispatching stopped (null while it goes on, and for a
-- cancelled experiment).
ALTER TABLE experiments ADD COLUMN stopped jsonb;
ALTER TABLE experiments ADD COLUMN skipped_runs integer NOT NULL DEFAULT 0;
-- The request's caps with the reservation of a run before any finished:
-- {max_calls?, max_tokens?, max_cost_usd?, reserve: {calls, tokens, cost_usd}}.
ALTER TABLE experiments ADD COLUMN budget jsonb;

CREATE TABLE experiment_spend (
    experiment_id   text NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    shard           smallint NOT NULL,
    calls           bigint NOT NULL DEFAULT 0,
    input_tokens    bigint NOT NULL DEFAULT 0,
    output_tokens   bigint NOT NULL DEFAULT 0,
    cost_usd        double precision NOT NULL DEFAULT 0,
    unpriced        integer NOT NULL DEFAULT 0, -- runs whose cost could not be counted
    runs            integer NOT NULL DEFAULT 0, -- finished runs counted above
    dispatched_runs integer NOT NULL DEFAULT 0, -- runs of the cases dispatched
    PRIMARY KEY (experiment_id, shard)
);

-- How many more cases of p_runs runs each the budget lets start now: for every cap, the
-- spend so far plus (the runs dispatched and not yet counted + k · p_runs) times the mean
-- spend of a counted run (the reservation of the budget before any run was counted) stays
-- within the cap. 2^31 − 1 when no cap limits it.
CREATE FUNCTION evald_experiment_budget_room(p_exp text, p_budget jsonb, p_runs integer)
RETURNS integer LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_calls double precision;
    v_tokens double precision;
    v_cost double precision;
    v_runs bigint;
    v_dispatched bigint;
    v_room double precision := 2147483647;
    v_inflight bigint;
    v_mean double precision;
    v_cap double precision;
    v_spent double precision;
    k text;
BEGIN
    SELECT coalesce(sum(calls), 0), coalesce(sum(input_tokens + output_tokens), 0),
           coalesce(sum(cost_usd), 0),
           coalesce(sum(runs), 0), coalesce(sum(dispatched_runs), 0)
    INTO v_calls, v_tokens, v_cost, v_runs, v_dispatched
    FROM experiment_spend WHERE experiment_id = p_exp;
    v_inflight := greatest(v_dispatched - v_runs, 0);
    FOREACH k IN ARRAY ARRAY['calls', 'tokens', 'cost_usd'] LOOP
        v_cap := (p_budget->>('max_' || k))::double precision;
        CONTINUE WHEN v_cap IS NULL;
        v_spent := CASE k WHEN 'calls' THEN v_calls WHEN 'tokens' THEN v_tokens ELSE v_cost END;
        IF v_runs > 0 THEN
            v_mean := v_spent / v_runs;
        ELSE
            v_mean := coalesce((p_budget->'reserve'->>k)::double precision, 0);
        END IF;
        IF v_mean <= 0 THEN
            -- Nothing is spent a run: the cap stops nothing until it is reached.
            IF v_spent >= v_cap THEN
                v_room := 0;
            END IF;
            CONTINUE;
        END IF;
        v_room := least(v_room,
                        floor(((v_cap - v_spent) / v_mean - v_inflight) / greatest(p_runs, 1)));
    END LOOP;
    RETURN greatest(v_room, 0)::integer;
END
$$;

-- How many more cases an anytime experiment may dispatch now: the cases dispatched beyond
-- those in the sequence stay below twice its concurrency, so that a decision finds at most
-- that many cases run for nothing however fast they go (the analyst places completed cases
-- in the sequence, and gives out jobs again, at each pass). Cases are dispatched in
-- dispatch_index order, so the first undispatched one's index tells how many went.
CREATE FUNCTION evald_experiment_lookahead(p_exp text, p_concurrency integer)
RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT 2 * p_concurrency
           - (coalesce((SELECT min(dispatch_index) FROM experiment_cases
                        WHERE experiment_id = p_exp AND NOT dispatched), 1) - 1)
           + coalesce((SELECT max(seq) FROM experiment_cases WHERE experiment_id = p_exp), 0);
$$;

-- Counts a dispatched case's runs in its shard (only for an experiment with a budget).
CREATE FUNCTION evald_experiment_count_dispatch(p_exp text, p_case integer, p_runs integer)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO experiment_spend (experiment_id, shard, dispatched_runs)
    VALUES (p_exp, (p_case % 16)::smallint, p_runs)
    ON CONFLICT (experiment_id, shard)
    DO UPDATE SET dispatched_runs = experiment_spend.dispatched_runs + excluded.dispatched_runs;
$$;

-- Marks every case not yet dispatched as skipped, and its runs; returns the runs skipped.
-- The caller holds the experiment's row.
CREATE FUNCTION evald_experiment_skip(p_exp text, p_now bigint)
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
        RETURNING 1)
    SELECT count(*) INTO v_runs FROM r;
    UPDATE experiments SET skipped_runs = skipped_runs + v_runs WHERE id = p_exp;
    RETURN v_runs;
END
$$;

-- As in migrations/0023, taking cases in dispatch_index order and, with a budget, only
-- while it has room for one more.
CREATE OR REPLACE FUNCTION evald_experiment_schedule(p_exp text, p_owner text DEFAULT '')
RETURNS integer LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    x experiments%ROWTYPE;
    v_jobs integer;
    v_new integer := 0;
    v_want integer;
    v_case integer;
    v_held boolean := false; -- the anytime rule's lookahead holds cases back for now
BEGIN
    SELECT * INTO x FROM experiments WHERE id = p_exp FOR UPDATE;
    IF NOT FOUND OR x.status NOT IN ('queued', 'running') THEN
        RETURN 0;
    END IF;
    SELECT count(*) INTO v_jobs FROM jobs WHERE kind = 'cell' AND ref = p_exp;
    v_want := x.concurrency - v_jobs;
    IF v_want > 0 AND x.budget IS NOT NULL THEN
        v_want := least(v_want, evald_experiment_budget_room(p_exp, x.budget,
                                                             x.arms * x.repeats));
    END IF;
    IF v_want > 0 AND x.stop_rule = 'anytime'
            AND evald_experiment_lookahead(p_exp, x.concurrency) < v_want THEN
        v_want := greatest(evald_experiment_lookahead(p_exp, x.concurrency), 0);
        v_held := true;
    END IF;
    IF v_want > 0 THEN
        FOR v_case IN
            SELECT c.case_index FROM experiment_cases c
            WHERE c.experiment_id = p_exp AND NOT c.dispatched
            ORDER BY c.dispatch_index
            LIMIT v_want
            FOR UPDATE SKIP LOCKED
        LOOP
            UPDATE experiment_cases SET dispatched = true
            WHERE experiment_id = p_exp AND case_index = v_case;
            INSERT INTO jobs (kind, ref, run_position) VALUES ('cell', p_exp, v_case)
            ON CONFLICT (ref, run_position) WHERE kind = 'cell' DO NOTHING;
            IF FOUND THEN
                v_new := v_new + 1;
            END IF;
            IF x.budget IS NOT NULL THEN
                PERFORM evald_experiment_count_dispatch(p_exp, v_case, x.arms * x.repeats);
            END IF;
        END LOOP;
        IF v_new > 0 THEN
            PERFORM pg_notify('evald_jobs', v_new::text
                              || CASE WHEN p_owner <> '' THEN ' ' || p_owner ELSE '' END);
        END IF;
    END IF;
    IF v_jobs + v_new = 0 AND NOT v_held THEN
        RETURN -1; -- nothing left to schedule: every case was dispatched, or none may be
    END IF;
    RETURN v_new;
END
$$;

-- As in migrations/0023, taking the next case in dispatch_index order, while the budget
-- has room for it and the anytime rule's lookahead lets it go, and counting it in the
-- budget's shard.
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
    v_next integer;
    v_moved boolean := false;
    r experiment_runs%ROWTYPE;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job AND lease_owner = p_owner FOR UPDATE;
    IF NOT FOUND THEN
        o_outcome := 'lost';
        RETURN;
    END IF;
    SELECT status, budget, arms * repeats, stop_rule = 'anytime', concurrency
    INTO v_status, v_budget, v_case_runs, v_anytime, v_concurrency
    FROM experiments WHERE id = j.ref;
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
        -- The case is done: the job takes the first case not yet dispatched, if any, if
        -- the budget has room for it and if the anytime rule's lookahead lets it go.
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
                    AND d.status IN ('completed', 'failed', 'cancelled', 'skipped'))::text
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

-- As in migrations/0010, counting the run's spend.
CREATE OR REPLACE FUNCTION evald_cell_finish(p_exp text, p_case integer, p_position integer,
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
    -- The run's spend (engine/cells.c: its provider calls, tokens and cost).
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
    UPDATE experiment_cases SET cells = p_cells, flaky = p_flaky, disagree = p_disagree,
        changed_seq = nextval('experiment_change_seq')
    WHERE experiment_id = p_exp AND case_index = p_case;
    -- Watchers hear of it from the analyst, which rebuilds the analysis and notifies
    -- (twice a second at most): a notification per run would serialise the commits.
    UPDATE experiments SET dirty = true WHERE id = p_exp AND NOT dirty;
    RETURN true;
END
$$;

