-- Evaluations, their planned runs, the job table the workers claim from, and the
-- completion events written in the same transaction that makes an evaluation
-- terminal. Timestamps that the API returns are Unix epoch milliseconds (bigint);
-- lease and due times are timestamptz so that every process uses the database clock.

CREATE TABLE evaluations (
    id                   text PRIMARY KEY,
    status               text NOT NULL
                         CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    request              jsonb NOT NULL,            -- NormalizedEvalRequestV1
    concurrency          integer NOT NULL DEFAULT 1 CHECK (concurrency BETWEEN 1 AND 16),
    step                 bigint NOT NULL DEFAULT 0, -- advances once per finished run
    report               jsonb,                     -- EvalReportV1, once terminal
    error                text,
    source_evaluation_id text,
    total_runs           integer NOT NULL,
    terminal_runs        integer NOT NULL DEFAULT 0,
    passed_runs          integer NOT NULL DEFAULT 0,
    failed_runs          integer NOT NULL DEFAULT 0,
    eligible             boolean,
    created_at           bigint NOT NULL,
    updated_at           bigint NOT NULL,
    completed_at         bigint
);

-- Newest-first listing with a stable tie-break, and the sweeper's scan of live ones.
CREATE INDEX evaluations_newest ON evaluations (created_at DESC, id DESC);
CREATE INDEX evaluations_live ON evaluations (status) WHERE status IN ('queued', 'running');

CREATE TABLE runs (
    evaluation_id      text NOT NULL REFERENCES evaluations (id) ON DELETE CASCADE,
    position           integer NOT NULL,            -- execution_position, 1-based
    run_id             text NOT NULL,               -- control-1
    role               text NOT NULL CHECK (role IN ('control', 'treatment')),
    iteration          integer NOT NULL,
    pair_position      integer NOT NULL CHECK (pair_position IN (1, 2)),
    session_id         text NOT NULL,
    status             text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    attempt            integer NOT NULL DEFAULT 0,  -- attempts started (at most 3)
    passed             boolean,
    turn_id            text,
    output             jsonb,
    evaluation         jsonb,                       -- EvaluatorResponseV1
    benchmark          jsonb,                       -- EvalBenchmarkV1
    metrics            jsonb,                       -- SessionMetricsResponseV1
    failures           jsonb NOT NULL DEFAULT '[]',
    transcript         jsonb,                       -- generations and function calls
    started_at         bigint NOT NULL DEFAULT 0,
    completed_at       bigint,
    PRIMARY KEY (evaluation_id, position)
);

CREATE UNIQUE INDEX runs_session ON runs (session_id);

-- Due work. A job is claimable when it is due and nobody holds a live lease on it.
CREATE TABLE jobs (
    id            bigserial PRIMARY KEY,
    kind          text NOT NULL CHECK (kind IN ('run', 'step', 'deliver', 'session')),
    evaluation_id text,
    run_position  integer,
    ref           text,
    due_at        timestamptz NOT NULL DEFAULT now(),
    lease_owner   text,
    lease_until   timestamptz,
    attempts      integer NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX jobs_due ON jobs (due_at);
-- At most one job per run, and one pending step per evaluation.
CREATE UNIQUE INDEX jobs_one_per_run ON jobs (evaluation_id, run_position) WHERE kind = 'run';
CREATE UNIQUE INDEX jobs_one_step ON jobs (evaluation_id) WHERE kind = 'step';

-- eval::completed, written exactly once per evaluation in the transaction that makes
-- it terminal; webhooks and the iii adapter deliver from here.
CREATE TABLE completion_events (
    event_id      text PRIMARY KEY,
    evaluation_id text NOT NULL UNIQUE,
    payload       jsonb NOT NULL,
    created_at    bigint NOT NULL
);

-- HTTP functions the agent (and HTTP evaluators) may call.
CREATE TABLE tools (
    id             text PRIMARY KEY,
    description    text NOT NULL,
    request_schema jsonb NOT NULL,
    url            text NOT NULL,
    timeout_ms     integer NOT NULL,
    created_at     bigint NOT NULL,
    updated_at     bigint NOT NULL
);
