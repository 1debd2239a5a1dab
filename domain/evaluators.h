/*
 * Evaluators: the two built-in deterministic ones and the check every evaluator's
 * answer goes through before a run trusts it.
 *
 * eval::assert::exact — passed when output deep-equals arguments.expected: objects
 *   compare without regard to key order, arrays in order, strings byte for byte,
 *   numbers by kind and value (integer 1 differs from real 1.0, 100 from 1e2).
 *   Without arguments.expected (null is a value): "eval::assert::exact requires
 *   evaluator arguments.expected".
 * eval::assert::normalized_text — passed when text.h's normalization of output and of
 *   arguments.expected are equal. expected must be a string: "eval::assert::
 *   normalized_text requires string evaluator arguments.expected". An output that is
 *   not a string does not pass (reason "output was not text (actual=…, expected=…)").
 * eval::assert::trajectory — the run's function calls against arguments.expected:
 *   domain/trajectory.h.
 * The first two answer {passed, score: 1.0 or 0.0, reason}. The values quoted in reasons are
 * compact canonical JSON (or the normalized text) cut to 512 characters followed by
 * "…" when longer.
 *
 * Pure; thread-safe; inputs are borrowed; answers are new references.
 */
#ifndef EVD_DOMAIN_EVALUATORS_H
#define EVD_DOMAIN_EVALUATORS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "domain/request.h"

#define EVD_EVALUATOR_EXACT "eval::assert::exact"
#define EVD_EVALUATOR_NORMALIZED_TEXT "eval::assert::normalized_text"
/* EVD_EVALUATOR_TRAJECTORY "eval::assert::trajectory" is in domain/trajectory.h. */
/*
 * The agent review evaluator: a reviewing agent with its own model, instructions and
 * function policy answers a GREEN or RED verdict (domain/review.h for its arguments). It
 * is built into evald but not pure: the engine runs it through the harness.
 */
#define EVD_EVALUATOR_AGENT_REVIEW "eval::assert::agent_review"
/* Characters (code points) of a value quoted in a reason before it is cut. */
#define EVD_EVALUATOR_EXCERPT_CHARS 512

/* Whether function_id names a built-in deterministic evaluator (exact, normalized_text,
 * trajectory). */
bool evd_evaluator_is_builtin(const char *function_id);
/* Whether function_id names the agent review evaluator. */
bool evd_evaluator_is_agent_review(const char *function_id);
/* Whether evaluator `function_id` may read its input's transcript: every one but the two
 * built-ins that score the output alone (exact, normalized_text), whose input is not built
 * with it (the transcript of every run would be work on the runs' hot path for nothing). */
bool evd_evaluator_reads_transcript(const char *function_id);

/*
 * Runs the built-in evaluator function_id on a decoded input. *response is a new
 * EvaluatorResponseV1. EVD_ENOTFOUND when function_id is not built in; EVD_EINVAL when
 * the arguments do not suit it (messages above).
 */
enum evd_code evd_evaluator_run(const char *function_id, const struct evd_evaluator_input *in,
                                json_t **response, struct evd_err *err);

enum evd_code evd_evaluator_exact(const struct evd_evaluator_input *in, json_t **response,
                                  struct evd_err *err);
enum evd_code evd_evaluator_normalized_text(const struct evd_evaluator_input *in, json_t **response,
                                            struct evd_err *err);

/* Deep JSON equality with the exact evaluator's rules. */
bool evd_evaluator_json_equal(const json_t *a, const json_t *b);

/*
 * The first EVD_EVALUATOR_EXCERPT_CHARS code points of s followed by "…" when s is
 * longer, else s itself. malloc'd, NUL-terminated; NULL on ENOMEM.
 */
char *evd_evaluator_excerpt(const char *s, size_t len);

/*
 * Checks an evaluator's answer and returns it normalized as an EvaluatorResponseV1
 * (*normalized, new reference): an object with `passed` (boolean, required), `score`
 * (null or a finite number in [0,1], kept as a real), `reason` (null or a string),
 * `details` (any; null is left out) and nothing else. Messages:
 *   "evaluator response must be an object"
 *   "evaluator response member <name> is not a known field"
 *   "evaluator response member passed is required" / "... must be a boolean"
 *   "evaluator score must be a finite number between 0 and 1"
 *   "evaluator response member reason must be a string"
 */
enum evd_code evd_evaluator_check_response(const json_t *answer, json_t **normalized,
                                           struct evd_err *err);

#endif
