/*
 * The start request of an experiment (../shared/spec/experiments.md, "Starting an
 * experiment"): decoding, validation with the contract's messages, the normalized request
 * an experiment keeps for its life, the check of every case against its templates, and
 * the request of one cell (a case and an arm) for the runner.
 *
 * Validation, first failure wins:
 *   1. the body is an object with no unknown member;
 *      "exactly one of dataset_id and cases must be given";
 *      "treatments must contain between 1 and 4 variants" (an array of objects);
 *      "repeats must be between 1 and <max>", "concurrency must be between 1 and <max>";
 *      "analysis.alpha must be greater than 0 and less than 0.5",
 *      "analysis.min_effect must be between 0 and 1", analysis.cluster_by a non-empty
 *      string; name, when given, a non-empty string of at most 200 bytes;
 *   2. labels: the control's and each treatment's default to A, B, C, … in arm order;
 *      "variant labels cannot be empty when supplied"; "variant labels must be unique";
 *   3. every treatment against the control with the seed's own rules (domain/request.h:
 *      model, evaluator, limits, functions, output, and the dimension rules applied to
 *      the templates), its messages naming `treatments[i]` where the seed says
 *      `treatment`; then the treatments pairwise ("prompt comparison requires different
 *      prompts", and the system-prompt twin).
 *   The model dimension (../shared/spec/agent-cases.md, "Model variants") has its own
 *   path instead of 3: the prompt and system prompt are the request's (`prompt` required,
 *   "prompt cannot be empty"; `system_prompt` optional), no top-level `model` ("model is not
 *   allowed with dimension model …"), and each variant is {label?, model: {model, provider,
 *   options?}} ("control.model is required", "treatments[0].model.provider is required",
 *   "… cannot be empty", "treatments[0].prompt is not allowed with dimension model …");
 *   options {temperature 0..2, top_p (0, 1], reasoning_effort minimal|low|medium|high|xhigh,
 *   max_output_tokens > 0}, closed. Variants differ in model, provider or options:
 *   "treatments[1]: differs from the control in nothing", "treatments[1]: differs from
 *   treatments[0] in nothing". The shared members go through the seed's rules as in 3.
 *   Other dimensions refuse the top-level texts: "prompt is only allowed with dimension
 *   model …".
 * Per case (evd_experiment_check_case): "case <id>: template variable <name> is not
 * defined", "case <id>: cluster_by variable <name> is not defined". Size
 * (evd_experiment_check_size): "an experiment may plan at most <max> runs (cases × arms ×
 * repeats = <n>)".
 *
 * Then (domain/experiment_stop.c, ../shared/spec/sequential.md): `stopping` — "stopping.rule
 * must be fixed or anytime", "stopping.min_cases must be between 2 and 100000",
 * "stopping.seed must be a non-negative integer"; `budget` — "budget.max_calls must be a
 * positive integer", "budget.max_tokens must be a positive integer", "budget.max_cost_usd
 * must be a positive number"; `plan` — "plan.effect must be between 0 and 1", "plan.sd must
 * be a positive number" (kept in the request unused, so that one file serves a plan and a
 * start). Each is a closed object ("stopping.x is not a known field").
 *
 * The normalized request: {name (or null), dimension, model, control, treatments[],
 * dataset_id (absent for inline cases until the dataset exists), evaluator {function_id,
 * arguments}, repeats, concurrency, limits, functions, output, metadata?, analysis {alpha,
 * min_effect, cluster_by (or null)}, stopping {rule, min_cases, seed (null until the start
 * derives it from the experiment's id)}, budget (its caps, or null), plan?}; variants are
 * {label, prompt, system_prompt}. A model experiment has no `model`, but `prompt` and
 * `system_prompt` (or null), and variants {label, model: {model, provider, options}}
 * (options normalized: temperature and top_p reals, only the keys given).
 *
 * Pure; thread-safe. Returned pointers into a body are borrowed from it.
 */
#ifndef EVD_DOMAIN_EXPERIMENT_H
#define EVD_DOMAIN_EXPERIMENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define EVD_EXPERIMENT_MAX_TREATMENTS 4u
#define EVD_EXPERIMENT_DEFAULT_REPEATS 3u
#define EVD_EXPERIMENT_DEFAULT_CONCURRENCY 4u
#define EVD_EXPERIMENT_DEFAULT_ALPHA 0.05
#define EVD_EXPERIMENT_DEFAULT_MIN_CASES 10u
#define EVD_EXPERIMENT_MAX_MIN_CASES 100000u
#define EVD_EXPERIMENT_MAX_SEED 9007199254740991.0 /* 2^53 − 1: exact in every JSON reader */

struct evd_experiment_limits {
    uint32_t max_repeats;     /* EVALD_MAX_RUNS */
    uint32_t max_concurrency; /* EVALD_MAX_CONCURRENCY */
};

/*
 * Validates body (borrowed) and builds the normalized request (new reference in
 * *normalized). *cases is the body's inline `cases` (borrowed from body), or NULL when
 * the body names a dataset_id.
 */
enum evd_code evd_experiment_request(const json_t *body, const struct evd_experiment_limits *lim,
                                     json_t **normalized, const json_t **cases,
                                     struct evd_err *err);

/* `stopping` with its defaults ({rule, min_cases, seed or null}); *out a new reference. */
enum evd_code evd_experiment_stopping(const json_t *stopping, json_t **out, struct evd_err *err);

/* `budget`'s caps ({max_calls?, max_tokens?, max_cost_usd?}), or JSON null when absent. */
enum evd_code evd_experiment_budget(const json_t *budget, json_t **out, struct evd_err *err);

/* The `plan` object of a plan request (borrowed strings). */
struct evd_experiment_plan_opts {
    bool has_effect, has_sd;
    double effect, sd;
    const char *pilot; /* plan.pilot_experiment_id, or NULL */
};
enum evd_code evd_experiment_plan_options(const json_t *plan, struct evd_experiment_plan_opts *out,
                                          struct evd_err *err);

/* Number of arms (1 + treatments) of a normalized request. */
size_t evd_experiment_arms(const json_t *normalized);

/* Checks one normalized case (domain/dataset.h) against the templates (messages included),
 * cluster_by and, where an arm's prompt renders empty, "case <id>: messages must end with
 * a user message when the prompt is empty". */
enum evd_code evd_experiment_check_case(const json_t *normalized, const json_t *c,
                                        struct evd_err *err);

/* Checks cases × arms × repeats against max_runs (EVALD_MAX_EXPERIMENT_RUNS). */
enum evd_code evd_experiment_check_size(const json_t *normalized, size_t cases, uint64_t max_runs,
                                        struct evd_err *err);

/*
 * The conversation so far of case c (agent-cases.md), each message's content rendered as
 * a template: *out a new reference [{role, content}], or NULL when the case has none.
 */
enum evd_code evd_experiment_messages(const json_t *c, json_t **out, struct evd_err *err);

/*
 * The variant and evaluator of arm `arm` (0 = control) on case c, templates rendered: on
 * EVD_OK *variant is {label, prompt, system_prompt, messages?, tool_results?} (the case's
 * conversation rendered, its mocked tools' answers as they are) and *evaluator
 * {function_id, arguments} (new references). A prompt may be "": the conversation is sent
 * as it is (evd_experiment_check_case made sure it ends with the user). For the model dimension *variant also has `model` (as
 * evd_experiment_arm_model) and `limits` (as evd_experiment_arm_limits): the arm's own.
 */
enum evd_code evd_experiment_cell(const json_t *normalized, const json_t *c, size_t arm,
                                  json_t **variant, json_t **evaluator, struct evd_err *err);

/*
 * The cluster key of case c under analysis.cluster_by (the var's string, or the compact
 * JSON of another value) as a malloc'd string, or NULL when the experiment has no
 * cluster_by or on ENOMEM (*err says which).
 */
char *evd_experiment_cluster_key(const json_t *normalized, const json_t *c, struct evd_err *err);

/*
 * The model object the harness is given for arm `arm` (new reference in *model): the
 * request's `model`, or for the model dimension the seed's model object of the arm's
 * variant (domain/request.h), options mapped onto what the harness takes:
 * reasoning_effort → thinking_level, temperature and top_p → provider_options.<provider>
 * (merged into the provider's request body). EVD_EINVAL for an arm that is not one.
 */
enum evd_code evd_experiment_arm_model(const json_t *normalized, size_t arm, json_t **model,
                                       struct evd_err *err);

/*
 * The limits of arm `arm` (new reference; NULL without memory): the request's, except that
 * a model variant's options.max_output_tokens is its limits.execution.max_output_tokens_per_call
 * (the harness writes it as each provider's output cap).
 */
json_t *evd_experiment_arm_limits(const json_t *normalized, size_t arm);

/* The label of arm `arm` (0: the control) of a normalized request, or NULL. */
const char *evd_experiment_arm_label(const json_t *request, unsigned arm);

#endif
