/*
 * The pure parts of the agent review evaluator (eval::assert::agent_review): its
 * arguments (decoded and checked when an evaluation starts, messages naming
 * evaluator.arguments.<field>), the GREEN/RED verdict contract built from the owner
 * schemas, the reviewer's system prompt and prompt, and the EvaluatorResponseV1 made
 * from a verdict. The engine runs the review through the harness (engine/review.c).
 *
 * Arguments (evaluator.arguments, an object; no other member):
 *   model           string, required, not blank: the reviewing model
 *   provider        string, optional: its provider (else inferred from the model name)
 *   instructions    string, required, not blank, at most 64 KiB: what to review for
 *   green_schema    object, optional: owner fields of a GREEN verdict (structured.h rules)
 *   red_schema      object, optional: owner fields of a RED verdict
 *   functions       FunctionPolicy, optional (deny everything when absent)
 *   thinking_level  minimal|low|medium|high|xhigh, optional
 *   max_tokens      integer >= 1, optional: client-side budget of input + output tokens
 *   max_tool_calls  integer 0..100000, optional: client-side budget of function calls
 * The two budgets are checked before further function calls execute; neither is sent to
 * the provider. A null member reads as absent.
 *
 * Pure; thread-safe. Strings and schemas in struct evd_review_args are borrowed from the
 * arguments passed in; `functions` is owned (evd_review_args_clear).
 */
#ifndef EVD_DOMAIN_REVIEW_H
#define EVD_DOMAIN_REVIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "domain/request.h"
#include "schema/structured.h"

#define EVD_REVIEW_MAX_INSTRUCTIONS (64 * 1024) /* bytes */
#define EVD_REVIEW_MAX_TOOL_CALLS 100000u
#define EVD_REVIEW_MAX_OUTPUT_BYTES (64 * 1024) /* of the run's output shown in the prompt */

struct evd_review_args {
    const char *model;
    const char *provider; /* NULL = inferred */
    const char *instructions;
    const char *thinking_level; /* NULL = provider default */
    json_t *green_schema;       /* borrowed, NULL = no owner fields */
    json_t *red_schema;         /* borrowed, NULL = no owner fields */
    json_t *functions;          /* owned normalized policy {allow, deny, expose} */
    bool has_max_tokens;
    uint64_t max_tokens;
    bool has_max_tool_calls;
    uint64_t max_tool_calls;
};

/*
 * Decodes evaluator.arguments (borrowed; NULL reads as {}). EVD_EINVAL names the field,
 * e.g. "evaluator.arguments.model is required", "evaluator.arguments.max_tokens must be
 * greater than zero", "evaluator.arguments.colour is not a known field". On error *out
 * holds nothing to release.
 */
enum evd_code evd_review_args_decode(const json_t *arguments, struct evd_review_args *out,
                                     struct evd_err *err);
void evd_review_args_clear(struct evd_review_args *a);

/*
 * The verdict contract of the owner schemas; messages name
 * evaluator.arguments.green_schema / red_schema ("… must forbid undeclared top-level
 * fields", "…: invalid schema at …"). Free with evd_so_contract_free.
 */
struct evd_so_contract *evd_review_contract_new(const struct evd_review_args *a,
                                                struct evd_err *err);

/* The model object the harness takes: {model, provider?, thinking_level?,
 * system_prompt_strategy:"override"}. New reference, NULL on ENOMEM. */
json_t *evd_review_model(const struct evd_review_args *a);

/* The reviewer's system prompt: the review preamble, then the instructions. malloc'd. */
char *evd_review_system_prompt(const struct evd_review_args *a);

/*
 * The reviewer's prompt for one run (the evaluator input): the run's identity, its final
 * output (a string as text, anything else as indented JSON; cut after
 * EVD_REVIEW_MAX_OUTPUT_BYTES at a character boundary, saying so), a summary of its
 * metrics (turns, function calls and errors, tokens, cost, spans, trace duration; "not
 * reported" when absent) and the request for a GREEN or RED verdict. malloc'd, NULL on
 * ENOMEM.
 */
char *evd_review_prompt(const struct evd_evaluator_input *in);

/*
 * The EvaluatorResponseV1 of a decoded verdict (borrowed flat object {"verdict", …owner
 * fields}): {passed: verdict is GREEN, score 1.0|0.0, reason "agent review by <model>:
 * GREEN|RED", details: the verdict object}. New reference, NULL on ENOMEM.
 */
json_t *evd_review_response(const json_t *verdict, const char *model);

#endif
