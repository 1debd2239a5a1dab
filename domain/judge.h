/*
 * The pairwise judge of an experiment (shared spec judges.md, "Request", "Judging"): its
 * request member, checked and normalized, its task checked against a case, and the
 * prompt of one judge call.
 *
 * The request, first failure wins (every message names its field):
 *   `judge` an object with no unknown member ("judge.x is not a known field");
 *   "judge.kind must be pairwise" (absent: pairwise);
 *   judge.model as a start's model, its messages prefixed ("judge.model.model cannot be
 *   empty", …);
 *   judge.task a non-empty string ("judge.task is required", "judge.task must be a
 *   string", "judge.task cannot be empty"), a template of the case;
 *   judge.instructions a string or absent (a template too);
 *   "judge.orders must be both or one" (absent: both);
 *   "judge.max_tokens must be between 1 and 100000" (absent: 512).
 * The normalized judge: {kind, model, task, instructions (or null), orders, max_tokens}.
 *
 * Per case (evd_judge_check_case): the task's and the instructions' placeholders,
 * "case <id>: template variable <name> is not defined", as a prompt's.
 *
 * The call (evd_judge_prompt): the rendered task and instructions with the two answers,
 * the one in slot 1 first, and the answer the judge must give, {"winner": "1" | "2" |
 * "tie", "reason": string}, whose JSON Schema evd_judge_schema returns for the provider's
 * structured-output mode.
 *
 * Pure; thread-safe. Returned pointers into a body are borrowed from it.
 */
#ifndef EVD_DOMAIN_JUDGE_H
#define EVD_DOMAIN_JUDGE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define EVD_JUDGE_DEFAULT_MAX_TOKENS 512
#define EVD_JUDGE_MAX_TOKENS 100000

/* `judge` (borrowed, NULL or JSON null when absent) checked and normalized: *out is a new
 * reference, or JSON null when there is no judge. */
enum evd_code evd_judge_request(const json_t *judge, json_t **out, struct evd_err *err);

/* Checks the normalized judge's templates against case c. */
enum evd_code evd_judge_check_case(const json_t *judge, const json_t *c, struct evd_err *err);

/*
 * The prompt of one judge call on case c: the two outputs' texts (borrowed, len bytes
 * each), `slot1` the one shown first. On EVD_OK *prompt is a malloc'd NUL-terminated
 * string, and *instructions the rendered instructions (malloc'd) or NULL when there are
 * none: the system prompt of the call.
 */
enum evd_code evd_judge_prompt(const json_t *judge, const json_t *c, const char *slot1,
                               size_t len1, const char *slot2, size_t len2, char **prompt,
                               char **instructions, struct evd_err *err);

/* The JSON Schema of the judge's answer (new reference): a closed object with a required
 * `winner` ("1", "2" or "tie") and `reason` (a string). */
json_t *evd_judge_schema(void);

/*
 * The judge calls of one case (engine/judgements.c, migrations/0025), numbered 1..n with
 * n = repeats × treatments × orders (orders 2 for "both", 1 for "one"): position p is
 * repeat r, treatment t (1-based arm) and order o with, for k = p − 1,
 *   o = k mod orders + 1 ("both"), or evd_pref_single_order(r) ("one"),
 *   t = ⌊k / orders⌋ mod treatments + 1,  r = ⌊k / (orders × treatments)⌋ + 1,
 * so a repeat's pairs come before the next repeat's, each pair's orders together.
 */
struct evd_judge_call {
    uint32_t repeat;
    unsigned treatment, order;
};

/* 2 for orders "both", 1 for "one", of a normalized judge; 0 for no judge (JSON null). */
unsigned evd_judge_orders(const json_t *judge);

/* The call at position p (1 <= p <= repeats × treatments × orders). */
void evd_judge_call_at(unsigned treatments, unsigned orders, uint32_t p,
                       struct evd_judge_call *out);

#endif
