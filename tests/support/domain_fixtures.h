/*
 * Fixtures shared by the domain suites: JSON parsing that fails the test on bad
 * input, a valid start request, dotted-path edits of JSON values, metrics and run
 * outcomes. Single-threaded test helpers; every json_t returned is a new reference.
 */
#ifndef EVD_TESTS_DOMAIN_FIXTURES_H
#define EVD_TESTS_DOMAIN_FIXTURES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "domain/vocab.h"

/* Parses JSON text (any value); aborts the process on malformed text. */
json_t *evd_dt_parse(const char *text);

/* A valid prompt-comparison start request: labels, one shared system prompt, exact evaluator. */
json_t *evd_dt_start_body(void);

/*
 * Sets the member at a dotted path ("control.prompt", "limits.execution.max_turns") of
 * obj to the JSON parsed from value_json, creating intermediate objects; value_json
 * NULL deletes the member instead.
 */
void evd_dt_set(json_t *obj, const char *path, const char *value_json);

/* Canonical-free compact dump with sorted keys for messages (static buffer, test use only). */
const char *evd_dt_dump(const json_t *v);

/*
 * A SessionMetricsResponseV1 for session_id: complete, one session, the given totals;
 * a negative input/output/cost leaves that member out; error_spans < 0 leaves traces
 * out.
 */
json_t *evd_dt_metrics(const char *session_id, bool complete, int64_t turns, int64_t function_calls,
                       int64_t function_call_errors, int64_t input_tokens, int64_t output_tokens,
                       double cost_usd, int64_t error_spans);

/* A normalized request for the given runs/order, with or without the exact evaluator. */
json_t *evd_dt_normalized(uint32_t runs, enum evd_order order, bool with_evaluator);

/*
 * Drives plan run `run` to a terminal state the way the engine does:
 * passed 1/0 completes it with an evaluation of that verdict (score 1.0/0.0), -1 completes it
 * unevaluated, -2 fails it (phase await). total_tokens < 0 records metrics without token
 * counts.
 */
void evd_dt_finish_run(json_t *run, int passed, int64_t total_tokens, int64_t wall_ms);

/* splitmix64: a fixed-seed generator for property tests; returns the next value. */
uint64_t evd_dt_rand(uint64_t *state);

/* A random evaluation driven through the domain API; both members are new references. */
struct evd_dt_eval {
    json_t *request; /* NormalizedEvalRequestV1 */
    json_t *runs;    /* EvalRunV1 array in plan order */
    bool cancelled;  /* the evaluation was cancelled part-way */
};

/*
 * Builds a random normalized request (runs 1..max_runs, either order, with or without
 * evaluator, random limits) and drives a random prefix of its plan to random outcomes:
 * passed, not passed, unevaluated, failed in any phase, cancelled, with metrics that
 * may be incomplete or lack tokens, cost or traces. The next run may be left running.
 */
void evd_dt_random_eval(uint64_t *rng, uint32_t max_runs, struct evd_dt_eval *out);
void evd_dt_eval_release(struct evd_dt_eval *e);

/* Swaps the roles of every run (control <-> treatment), in place. */
void evd_dt_swap_roles(json_t *runs);

#endif
