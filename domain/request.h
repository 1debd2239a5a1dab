/*
 * Requests of the eval functions: decoding and validation with the contract's
 * messages, and the normalized start request (NormalizedEvalRequestV1) that an
 * evaluation keeps for its whole life.
 *
 * Start validation runs in two stages and the first failure wins:
 *   1. shape: the body is an object; required members are present; every member has
 *      its type ("control.prompt must be a string", "runs must be an integer"); enum
 *      values are known ("model.thinking_level must be one of minimal, low, ...");
 *      nested objects (model, control, treatment, evaluator, limits and its
 *      sub-objects, functions, output) have no unknown member ("model.colour is not a
 *      known field"). Unknown top-level members are ignored (e.g. _caller_worker_id).
 *   2. rules, in this order:
 *        "model.model cannot be empty"                      (blank after Unicode trim)
 *        "model.provider cannot be empty when supplied"
 *        "control.prompt cannot be empty", "treatment.prompt cannot be empty"
 *        "evaluator.function_id cannot be empty"
 *        "variant labels cannot be empty when supplied"
 *        dimension prompt:        "prompt comparison requires identical system prompts",
 *                                 "prompt comparison requires different prompts"
 *        dimension system_prompt: "system_prompt comparison requires identical prompts",
 *                                 "system_prompt comparison requires different system prompts"
 *          (exact byte comparisons; a null system prompt differs from "")
 *        "runs must be between 1 and <max_runs>"
 *        the limits rules (limits.h)
 *        "concurrency must be between 1 and 16"
 * All errors are EVD_EINVAL (EVD_ENOMEM when memory runs out).
 *
 * The normalized request has every default filled: runs 3, execution_order
 * balanced_control_first, model.system_prompt_strategy enrich, limits (limits.h),
 * functions {allow:[],deny:[],expose:"agent_trigger"} (deny everything), output
 * {type:"text"}; evaluator.arguments {} when omitted. Each variant carries
 * system_prompt explicitly (a string, or null for "no system prompt"); null optional
 * members are left out. Numbers typed double in the contract (max_cost_usd) are reals.
 *
 * `concurrency` (how many pairs of one evaluation may be in flight, 1..16, default 1)
 * is an evald extension of the start request. NormalizedEvalRequestV1 allows no extra
 * member, so it is returned beside the normalized request, never inside it.
 *
 * Pure; thread-safe. Borrowed strings returned by the small decoders live as long as
 * the body passed in.
 */
#ifndef EVD_DOMAIN_REQUEST_H
#define EVD_DOMAIN_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "domain/limits.h"
#include "domain/vocab.h"

#define EVD_REQUEST_DEFAULT_RUNS 3u
#define EVD_REQUEST_DEFAULT_MAX_RUNS 100u /* EVALD_MAX_RUNS */
#define EVD_REQUEST_DEFAULT_CONCURRENCY 1u
#define EVD_REQUEST_MAX_CONCURRENCY 16u
#define EVD_REQUEST_DEFAULT_LIST_LIMIT 50u
#define EVD_REQUEST_MAX_LIST_LIMIT 100u

/*
 * eval::start. body: the request (borrowed). max_runs: the upper bound of runs
 * (EVALD_MAX_RUNS, >= 1). On EVD_OK *normalized is a new reference to the
 * NormalizedEvalRequestV1 and *concurrency (when not NULL) the pairs in flight; on error
 * *normalized is NULL and err names the field.
 */
enum evd_code evd_request_start(const json_t *body, uint32_t max_runs, json_t **normalized,
                                uint32_t *concurrency, struct evd_err *err);

/*
 * Checks a stored NormalizedEvalRequestV1 (borrowed) before an evaluation trusts it
 * again: the same shape and rules as a start, every required member present, no
 * unknown member at the top level either, source_evaluation_id allowed, and runs
 * only bounded by the contract's uint32 (the configured maximum may have changed since).
 */
enum evd_code evd_request_check_normalized(const json_t *normalized, struct evd_err *err);

/*
 * Decodes a FunctionPolicy object `f` (borrowed; NULL gives the deny-all default) found at
 * the dotted path `parent` ("functions", "evaluator.arguments.functions"): allow and deny
 * arrays of strings, expose agent_trigger|native, no other member. *out is a new reference
 * to the normalized policy {allow, deny, expose}; messages name `parent`.
 */
enum evd_code evd_request_functions(const json_t *f, const char *parent, json_t **out,
                                    struct evd_err *err);

/* Read-only view of a normalized request; every pointer is borrowed from it. */
struct evd_request_view {
    enum evd_dimension dimension;
    enum evd_order order;
    uint32_t runs;
    const json_t *model;               /* EvalModelConfigV1 */
    const json_t *control;             /* EvalVariantV1 */
    const json_t *treatment;           /* EvalVariantV1 */
    const json_t *evaluator;           /* EvaluatorSpecV1, or NULL */
    const char *evaluator_function_id; /* NULL without evaluator */
    const json_t *evaluator_arguments; /* NULL without evaluator */
    const json_t *functions;           /* FunctionPolicy */
    const json_t *output;              /* OutputContract */
    const json_t *metadata;            /* any, or NULL */
    const char *source_evaluation_id;  /* NULL unless a rerun */
    struct evd_limits limits;
};

/* Fills a view of a normalized request; checks it first (evd_request_check_normalized). */
enum evd_code evd_request_view(const json_t *normalized, struct evd_request_view *out,
                               struct evd_err *err);
/* The same for a request that evd_request_start (or a rerun of one) produced, which is not
 * checked again: only its limits are decoded (EVD_EINVAL when they do not decode). For the
 * engine's own stored requests, once per run. */
enum evd_code evd_request_view_trusted(const json_t *normalized, struct evd_request_view *out,
                                       struct evd_err *err);

/*
 * The request of a rerun: a deep copy of the source's normalized request (not
 * validated again) with source_evaluation_id = source_id and, when reverse_order, the
 * other balanced order. New reference, or NULL on ENOMEM.
 */
json_t *evd_request_rerun(const json_t *source_normalized, const char *source_id,
                          bool reverse_order);

/*
 * The body of a re-score, {evaluator} (borrowed): a closed object ("<name> is not a known
 * field"), the evaluator required ("evaluator is required", null too) and decoded and
 * checked as a start's ("evaluator.colour is not a known field", "evaluator.function_id
 * must be a string", "evaluator.function_id cannot be empty"). *evaluator is the
 * normalized EvaluatorSpecV1 (arguments {} when omitted; new reference). Whether anything
 * can run it is the engine's check, as at a start.
 */
enum evd_code evd_request_rescore_args(const json_t *body, json_t **evaluator,
                                       struct evd_err *err);

/*
 * eval::list {limit?}: limit null or absent -> 50; otherwise an integer in 1..100,
 * else "limit must be between 1 and 100" ("limit must be an integer" for other types).
 * Unknown members are ignored.
 */
enum evd_code evd_request_list(const json_t *body, uint32_t *limit, struct evd_err *err);

/*
 * eval::status, eval::result, eval::cancel, eval::delete {evaluation_id}:
 * "evaluation_id is required", "evaluation_id must be a string". *evaluation_id is
 * borrowed from body. Unknown members are ignored.
 */
enum evd_code evd_request_evaluation_id(const json_t *body, const char **evaluation_id,
                                        struct evd_err *err);

/* eval::rerun {evaluation_id, reverse_order = false}: "reverse_order must be a boolean". */
enum evd_code evd_request_rerun_args(const json_t *body, const char **evaluation_id,
                                     bool *reverse_order, struct evd_err *err);

/* eval::step {evaluation_id, step}: step is a required non-negative integer. */
enum evd_code evd_request_step(const json_t *body, const char **evaluation_id, uint64_t *step,
                               struct evd_err *err);

/* eval::on-turn-completed {session_id = "", terminal = false}; other members ignored. */
enum evd_code evd_request_wake(const json_t *body, const char **session_id, bool *terminal,
                               struct evd_err *err);

/*
 * eval::sweep {scheduled_at?: integer|null, scheduled_time?: string|null}: checked for
 * type only; the values are not used.
 */
enum evd_code evd_request_sweep(const json_t *body, struct evd_err *err);

/*
 * Pieces of a start request that ad-hoc sessions take as well, decoded and normalized with
 * the same messages:
 *   model      an EvalModelConfigV1 object; also "model.model cannot be empty" and
 *              "model.provider cannot be empty when supplied"
 *   functions  a FunctionPolicy; NULL or JSON null gives the deny-all default
 *   output     an OutputContract; NULL or JSON null gives {"type":"text"}
 * Arguments are borrowed; on EVD_OK *out is a new reference, else NULL.
 */
enum evd_code evd_request_model(const json_t *model, json_t **out, struct evd_err *err);
enum evd_code evd_request_functions_or_default(const json_t *functions, json_t **out,
                                               struct evd_err *err);
enum evd_code evd_request_output(const json_t *output, json_t **out, struct evd_err *err);

/* EvaluatorInputV1, decoded; every pointer is borrowed from the body. */
struct evd_evaluator_input {
    const char *evaluation_id;
    const char *run_id;
    const char *session_id;
    enum evd_role role;
    const json_t *output;     /* any JSON value, JSON null included */
    const json_t *metrics;    /* a checked SessionMetricsResponseV1 */
    const json_t *arguments;  /* any JSON value; NULL when omitted (reads as {}) */
    const json_t *transcript; /* the conversation (an array), NULL when omitted or null */
    const char *case_id;      /* an experiment run's case, NULL when omitted or null */
};

/*
 * Decodes an EvaluatorInputV1: evaluation_id, run_id, session_id (strings), role
 * (control|treatment), output (any, required), metrics (SessionMetricsResponseV1,
 * checked deeply), arguments (any, default {}), transcript (an array or null, optional:
 * the conversation, domain/trajectory.h; its entries are read by the evaluators that use
 * them), case_id (a string or null, optional). Unknown top-level members are ignored.
 */
enum evd_code evd_request_evaluator_input(const json_t *body, struct evd_evaluator_input *out,
                                          struct evd_err *err);

#endif
