/*
 * One scenario, the part every kind of run shares (engine-internal): the agent turn on
 * the harness with the registered HTTP tools and the iii engine's functions its policy
 * allows, then the evaluator (built-in, agent review, HTTP tool or iii function), recorded
 * into the run object in the seed's way (evd_run_record_outcome, evd_run_complete,
 * evd_run_fail). An evaluation run (engine/runner.c) and an experiment cell
 * (engine/cells.c) differ only in where the scenario comes from and where the run goes.
 * No lock is held and nothing is written here except the progress snapshots the caller's
 * callback makes; the worker's connection (w) is given back before the provider is called
 * and is not held when this returns.
 */
#ifndef EVD_ENGINE_SCENARIO_H
#define EVD_ENGINE_SCENARIO_H

#include <jansson.h>
#include <stdbool.h>

#include "common/trace.h"
#include "domain/limits.h"
#include "engine/internal.h"

/*
 * The trace of one run attempt (docs/otel.md): the root span `invoke_agent <label>` and its
 * attributes. ctx is evd_trace_for_run(owner_id, run_id, attempt).
 */
struct evd_scenario_trace {
    struct evd_trace_ctx ctx;
    const char *owner_key; /* "evald.evaluation_id" or "evald.experiment_id" */
    const char *owner_id;
    const char *run_id;
    const char *label;   /* the arm's label; NULL: the role */
    const char *role;    /* "control" or "treatment" */
    int repeat;          /* the evaluation run's iteration, the experiment run's repeat */
    int attempt;         /* 1-based */
    const char *case_id; /* experiment runs; NULL otherwise */
};

struct evd_scenario {
    const char *subject_id;            /* evaluation or experiment id: logs, evaluator input */
    const char *session_id;            /* the run's session id (X-Evald-Session) */
    const char *prompt;                /* "": `messages` is sent as it is */
    const char *system_prompt;         /* NULL = none */
    const json_t *messages;            /* the case's conversation so far, [{role, content}]
                                          sent before the prompt (agent-cases.md), or NULL */
    const json_t *simulator;           /* the experiment's simulated user (normalized), or
                                          NULL: the run is one agent turn (simulate.h) */
    const char *simulator_instructions; /* rendered for the case */
    /* A simulated conversation's earlier checkpoint (or NULL) and where it keeps its
     * next ones (simulate.h). */
    const json_t *checkpoint;
    int (*save)(void *ctx, const json_t *checkpoint);
    const json_t *mock_tools;          /* the experiment's mocked tools, or NULL */
    const json_t *tool_results;        /* the case's answers to them, or NULL */
    const json_t *model;
    const json_t *limits_json;         /* the request's limits member */
    const struct evd_limits *limits;   /* decoded */
    const json_t *functions;           /* FunctionPolicy */
    const json_t *output;              /* OutputContract */
    const json_t *metadata;            /* or NULL */
    const char *evaluator_function_id; /* NULL: no evaluator */
    const json_t *evaluator_arguments; /* or NULL */
    void (*progress)(void *ctx, json_t *metrics); /* snapshots while it runs, or NULL */
    bool judge_metrics; /* the run's benchmark is an experiment's: the agent review's model
                           use goes into it as judge_total_tokens and judge_cost_usd, and
                           the time the calls waited for the rate limiter as
                           limiter_wait_ms */
    void *progress_ctx;
    const struct evd_scenario_trace *trace; /* the run's trace, or NULL */
};

struct evd_scenario_outcome {
    bool not_started;   /* it could not be prepared (the database failed): the run is as it
                         * was; the attempt counts and the run is tried again after its lease */
    bool interrupted;   /* the cancel token stopped a call, or may have failed the evaluator */
    json_t *metrics;    /* the harness's final metrics (new reference, or NULL) */
    json_t *transcript; /* the turns, spans and the reviewer's turns (new reference) */
};

/*
 * With s->trace, both calls below open the run attempt's root span and name the run in the
 * calling thread's log lines (evd_log_set_trace), which the caller clears when it is done
 * with the run.
 *
 * Runs scenario `s` for `run` (a running run object, updated in place to its terminal
 * status, unless the token stops it) under `cancel`. `started_at` is the run's start
 * (evd_now_ms). Fills *out; the caller clears it with evd_scenario_outcome_clear.
 */
void evd_scenario_run(struct evd_engine *e, struct evd_wconn *w, const struct evd_scenario *s,
                      json_t *run, struct evd_cancel *cancel, int64_t started_at,
                      struct evd_scenario_outcome *out);
void evd_scenario_outcome_clear(struct evd_scenario_outcome *out);

/* What a finished agent turn left in the store (borrowed). */
struct evd_scenario_stored {
    const json_t *output;
    const json_t *metrics;    /* or NULL */
    const json_t *benchmark;  /* or NULL */
    const json_t *transcript; /* or NULL */
};

/*
 * A re-score (docs/experiments.md, "Re-score"): `run` (a running run object) takes the
 * stored agent turn as it was and only the evaluator of scenario `s` runs, by the same
 * path as in evd_scenario_run; no model is called for the target (the agent review calls
 * its reviewer's). The run ends completed with the new verdict, or failed in the evaluate
 * phase; out->transcript is the stored one with the new reviewer's turns.
 */
void evd_scenario_rescore(struct evd_engine *e, struct evd_wconn *w, const struct evd_scenario *s,
                          json_t *run, const struct evd_scenario_stored *stored,
                          struct evd_cancel *cancel, struct evd_scenario_outcome *out);

#endif
