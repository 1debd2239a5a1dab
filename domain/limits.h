/*
 * Evaluation limits (EvalLimitsV1): decoding with defaults, start-time validation, the
 * normalized JSON form, and the post-hoc limit failures of a completed run computed
 * from its SessionMetricsResponseV1. Pure; thread-safe; JSON arguments are borrowed.
 *
 * Defaults: invocation_timeout_seconds 120, scenario_timeout_seconds 600, max_turns 1000,
 * max_output_tokens_per_call 8192; max_total_tokens, max_cost_usd,
 * max_function_call_errors and max_error_spans unset. A partial object resolves to the
 * defaults field by field.
 */
#ifndef EVD_DOMAIN_LIMITS_H
#define EVD_DOMAIN_LIMITS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

#define EVD_LIMITS_DEFAULT_INVOCATION_TIMEOUT_S 120u
#define EVD_LIMITS_DEFAULT_SCENARIO_TIMEOUT_S 600u
#define EVD_LIMITS_DEFAULT_MAX_TURNS 1000u
#define EVD_LIMITS_DEFAULT_MAX_OUTPUT_TOKENS 8192u

struct evd_limits {
    /* limits.execution */
    uint64_t invocation_timeout_seconds; /* each provider / function / evaluator call */
    uint64_t scenario_timeout_seconds;   /* wall clock of one run */
    uint32_t max_turns;                  /* assistant generations per run */
    uint64_t max_output_tokens_per_call;
    bool has_max_total_tokens;
    uint64_t max_total_tokens; /* input + output tokens of the whole run */
    bool has_max_cost_usd;
    double max_cost_usd;
    /* limits.evaluation (post-hoc only) */
    bool has_max_function_call_errors;
    uint64_t max_function_call_errors;
    bool has_max_error_spans;
    uint64_t max_error_spans;
};

/* Fills every field with its default. */
void evd_limits_defaults(struct evd_limits *out);

/*
 * Decodes the `limits` member of a start request (borrowed; NULL when absent means all
 * defaults). Checks structure and types only: unknown fields at any level
 * ("limits.execution.foo is not a known field"), "limits must be an object",
 * "limits.execution.max_turns must be an integer", negative integers, max_cost_usd not a
 * number. Range rules are evd_limits_validate's.
 */
enum evd_code evd_limits_decode(const json_t *limits, struct evd_limits *out, struct evd_err *err);

/*
 * The start-time rules, first failure wins:
 *   "limits.execution.invocation_timeout_seconds must be greater than zero"
 *   "limits.execution.scenario_timeout_seconds must be greater than zero"
 *   "limits.execution.max_turns must be greater than zero"
 *   "limits.execution.max_output_tokens_per_call must be greater than zero"
 *   "limits.execution.max_total_tokens must be greater than zero when supplied"
 *   "limits.execution.max_cost_usd must be a finite non-negative number"
 */
enum evd_code evd_limits_validate(const struct evd_limits *limits, struct evd_err *err);

/*
 * The execution limits alone, as an ad-hoc session takes them (ExecutionLimitsV1, a flat
 * object): decode with defaults (NULL = all defaults) and validate with the same rules and
 * messages as above, naming fields under `path` (e.g. "limits.max_turns must be greater
 * than zero"). The evaluation (post-hoc) limits stay unset.
 */
enum evd_code evd_limits_decode_execution(const json_t *execution, const char *path,
                                          struct evd_limits *out, struct evd_err *err);
enum evd_code evd_limits_validate_at(const struct evd_limits *limits, const char *path,
                                     struct evd_err *err);

/*
 * The normalized EvalLimitsV1: {"evaluation":{...set fields},"execution":{four required
 * fields, then the optional ones that are set}}; max_cost_usd is always a real.
 * New reference, or NULL on ENOMEM.
 */
json_t *evd_limits_to_json(const struct evd_limits *limits);

/*
 * Post-hoc checks of a run that completed without error, in this order; each yields
 * one EvalFailureV1:
 *   max_total_tokens  input+output (saturating) > limit -> limit   "total tokens <t> exceeded limit
 * <L>" either count missing            -> collect "total-token validation requires input_tokens and
 * output_tokens" max_cost_usd      cost > limit                    -> limit   "cost $<c:.6f>
 * exceeded limit $<L:.6f>" cost missing                    -> collect "cost validation requires
 * cost_usd from every model generation" max_function_call_errors  errors > limit          -> limit
 * "function call errors <n> exceeded limit <L>" max_error_spans   traces present, count > limit ->
 * limit   "error spans <n> exceeded limit <L>" traces missing                  -> collect
 * "error-span validation requires in-memory observability metrics" collect failures carry
 * function_id "harness::metrics" (the wording of the contract). metrics is a
 * SessionMetricsResponseV1 (borrowed; NULL reads as one with no usage). Returns a new array
 * (possibly empty), or NULL on ENOMEM. Limit failures never fail a run; with an evaluator they
 * force passed = false (see run.h).
 */
json_t *evd_limits_failures(const struct evd_limits *limits, const json_t *metrics);

#endif
