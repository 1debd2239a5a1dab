/*
 * The trajectory evaluator, eval::assert::trajectory (../shared/spec/agent-cases.md,
 * "Trajectory evaluator"): the function calls a run made, read from the transcript of
 * its EvaluatorInputV1 in conversation order, against an expected list of calls; and the
 * transcript an agent turn gives that input.
 *
 * Arguments {"expected": [{"name", "arguments"?}, …], "mode"?, "match_arguments"?}:
 *   mode  strict (the default: the spec names none) — the calls, in order, are the
 *         expected list; unordered — the same multiset; subset — every call made is an
 *         expected one (nothing unexpected; an expected call may be missing); superset —
 *         every expected call was made (extra calls allowed).
 *   match_arguments  exact (the default) — the call's arguments deep-equal the expected
 *         ones (the exact evaluator's equality); subset — every member of the expected
 *         arguments is in the call's, objects compared member-wise again, anything else
 *         by equality; ignore — names only. An expected call without `arguments` (or
 *         with null) matches any arguments of a call of its name.
 * Unknown members (of the arguments and of an expected call) are refused. Messages name
 * the field: "eval::assert::trajectory requires evaluator arguments.expected",
 * "evaluator arguments must be an object", "evaluator arguments.expected must be an
 * array", "evaluator arguments.expected[1] must be an object",
 * "evaluator arguments.expected[1].name is required" / "… must be a string" / "… cannot be
 * empty", "evaluator arguments.expected[1].arguments must be an object" (indices 0-based),
 * "evaluator arguments.mode must be one of strict, unordered, subset, superset",
 * "evaluator arguments.match_arguments must be one of exact, subset, ignore",
 * "evaluator arguments.<key> is not a known field" (expected[i].<key> likewise).
 *
 * The calls: every `function_calls` entry of every transcript entry, in order; an input
 * without a transcript made none. "transcript must be an array",
 * "transcript[0] must be an object", "transcript[0].function_calls must be an array",
 * "transcript[0].function_calls[1] must be an object",
 * "transcript[0].function_calls[1].name is required" / "… must be a string",
 * "transcript[0].function_calls[1].arguments must be an object".
 *
 * Verdict {passed, score, reason, details}: score = matched expected calls / expected
 * calls (1.0 when none is expected), whatever passed says. In strict a call matches only
 * the expected call at its own position; in the other modes calls and expected calls are
 * paired by a maximum bipartite matching (a greedy pairing can miss one when arguments
 * match as subsets). Reasons name the first mismatch with its 1-based position:
 *   strict    "call 2: expected book, got lookup", "call 2: expected book {…}, got book
 *             {…}" (same name, other arguments), "call 3: expected book, got no call",
 *             "call 3: expected no call, got lookup"
 *   others    "call 3: unexpected lookup" (the first call left unpaired), "expected call
 *             2: book was not made" (the first expected call left unpaired); unordered
 *             names both, joined by "; ". Arguments are shown ({…}, canonical JSON cut to
 *             EVD_EVALUATOR_EXCERPT_CHARS) when they are what differs: a call or expected
 *             call whose name the other side also left unpaired.
 *   passed    "2 calls matched the expected calls in order" (strict), "… in some order"
 *             (unordered), "every call was expected (1 of 2 expected calls made)" (subset),
 *             "every expected call was made (3 calls, 2 expected)" (superset).
 * details: {mode, match_arguments, calls (the names made, in order), expected (count),
 * matched (count)}.
 *
 * Pure; thread-safe; inputs are borrowed; answers are new references.
 */
#ifndef EVD_DOMAIN_TRAJECTORY_H
#define EVD_DOMAIN_TRAJECTORY_H

#include <jansson.h>
#include <stddef.h>

#include "common/err.h"
#include "domain/request.h"

#define EVD_EVALUATOR_TRAJECTORY "eval::assert::trajectory"

enum evd_trajectory_mode {
    EVD_TRAJECTORY_STRICT,
    EVD_TRAJECTORY_UNORDERED,
    EVD_TRAJECTORY_SUBSET,
    EVD_TRAJECTORY_SUPERSET,
};

enum evd_trajectory_match {
    EVD_TRAJECTORY_ARGS_EXACT,
    EVD_TRAJECTORY_ARGS_SUBSET,
    EVD_TRAJECTORY_ARGS_IGNORE,
};

/* Decoded arguments; expected is borrowed from the arguments decoded. */
struct evd_trajectory_args {
    const json_t *expected; /* array of {name, arguments?}, checked */
    enum evd_trajectory_mode mode;
    enum evd_trajectory_match match;
};

/* Checks and decodes evaluator arguments (borrowed; NULL reads as {}). */
enum evd_code evd_trajectory_args_decode(const json_t *arguments, struct evd_trajectory_args *out,
                                         struct evd_err *err);

/*
 * The calls of a transcript (borrowed; NULL or JSON null: none) in order, as a new array
 * of {name, arguments} (arguments {} when the call had none). EVD_EINVAL with the
 * messages above.
 */
enum evd_code evd_trajectory_calls(const json_t *transcript, json_t **calls, struct evd_err *err);

/* Whether call arguments `actual` match `expected` under `match` (both borrowed; a NULL
 * or null expected matches anything). */
bool evd_trajectory_args_match(enum evd_trajectory_match match, const json_t *expected,
                               const json_t *actual);

/* The verdict of `calls` (as evd_trajectory_calls makes them) against decoded args. */
enum evd_code evd_trajectory_score(const struct evd_trajectory_args *args, const json_t *calls,
                                   json_t **response, struct evd_err *err);

/* eval::assert::trajectory on a decoded EvaluatorInputV1 (its arguments and transcript). */
enum evd_code evd_evaluator_trajectory(const struct evd_evaluator_input *in, json_t **response,
                                       struct evd_err *err);

/*
 * The transcript of one agent turn as EvaluatorInputV1 carries it (new reference, NULL on
 * ENOMEM): the messages of `prior` (the case's conversation so far, [{role, content}],
 * borrowed; NULL: none), then {"role":"user","content":prompt} (when prompt is neither NULL
 * nor ""),
 * {"role":"assistant","content":<output: a string as it is, other JSON as canonical
 * text, NULL or null as "">, "function_calls"?:[{name, arguments, result?, error?}]}],
 * the calls from `harness` (the harness's {generations, function_calls}, borrowed, or
 * NULL) in the order made, named by function id.
 */
json_t *evd_trajectory_transcript(const json_t *prior, const char *prompt, const json_t *output,
                                  const json_t *harness);

#endif
