-- Ad-hoc agent sessions: a session keeps its configuration, the provider-neutral
-- conversation after its last completed turn, and the metrics summed over its finished
-- turns; each user message starts one turn, executed by the workers as a 'session' job
-- (jobs.ref = session id, jobs.run_position = turn sequence number).
-- A running turn (and a running evaluation run) keeps a metrics snapshot taken after
-- each generation in `progress`, so that comparisons can show partial figures.

CREATE TABLE sessions (
    id            text PRIMARY KEY,                -- ses_ + 32 hex
    title         text,
    status        text NOT NULL DEFAULT 'idle'
                  CHECK (status IN ('idle', 'working', 'done', 'error', 'cancelled')),
    config        jsonb NOT NULL,                  -- {model, system_prompt, functions, output, limits, metadata?}
    conversation  jsonb NOT NULL DEFAULT '[]',     -- harness conversation after the last completed turn
    metrics       jsonb,                           -- SessionMetricsResponseV1 over the finished turns
    wall_time_ms  bigint NOT NULL DEFAULT 0,       -- summed over the finished turns
    turn_count    integer NOT NULL DEFAULT 0,
    message_count integer NOT NULL DEFAULT 0,
    created_at    bigint NOT NULL,
    updated_at    bigint NOT NULL
);

CREATE INDEX sessions_newest ON sessions (created_at DESC, id DESC);

CREATE TABLE session_turns (
    session_id   text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq          integer NOT NULL,                 -- 1-based
    turn_id      text NOT NULL UNIQUE,             -- turn_ + 32 hex
    prompt       text NOT NULL,
    status       text NOT NULL DEFAULT 'queued'
                 CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    attempt      integer NOT NULL DEFAULT 0,       -- attempts started (at most 3)
    output       jsonb,
    failures     jsonb NOT NULL DEFAULT '[]',
    metrics      jsonb,                            -- this turn's SessionMetricsResponseV1
    progress     jsonb,                            -- running snapshot, complete:false
    transcript   jsonb,                            -- {generations, function_calls, spans}
    created_at   bigint NOT NULL,
    started_at   bigint,
    completed_at bigint,
    PRIMARY KEY (session_id, seq)
);

-- At most one job per session turn.
CREATE UNIQUE INDEX jobs_one_per_turn ON jobs (ref, run_position) WHERE kind = 'session';

ALTER TABLE runs ADD COLUMN progress jsonb;
