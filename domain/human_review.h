/*
 * A person's review of one experiment run (docs/experiments.md, "Human review"): the body
 * of PUT /v1/experiments/{id}/runs/{run_id}/review, a closed object
 *   {verdict: "pass" | "fail", note?: string | null, reviewer: string}
 * Messages name the field: "verdict is required", "verdict must be one of pass, fail",
 * "note must be at most 4000 characters", "reviewer cannot be empty", "reviewer must be at
 * most 200 characters", "<name> is not a known field"; strings may not hold NUL.
 * Pure; thread-safe. Also the review queue's idea of a score near its threshold.
 */
#ifndef EVD_DOMAIN_HUMAN_REVIEW_H
#define EVD_DOMAIN_HUMAN_REVIEW_H

#include <jansson.h>
#include <stdbool.h>

#include "common/err.h"

#define EVD_HUMAN_REVIEW_NOTE_MAX 4000    /* characters (code points) */
#define EVD_HUMAN_REVIEW_REVIEWER_MAX 200 /* characters */

struct evd_human_review {
    bool pass;
    const char *note;     /* NULL when absent or null; borrowed from the body */
    const char *reviewer; /* borrowed from the body */
};

/*
 * A person's outcome of a judged pair (docs/judges.md, "Pair reviews"): the body of PUT
 * /v1/experiments/{id}/pairs/{case_id}/{repeat}/{treatment}/review, a closed object
 *   {winner: "control" | "tie" | "treatment", note?: string | null, reviewer: string}
 * with the messages and limits of a run's review ("winner is required", "winner must be
 * one of control, tie, treatment", …).
 */
struct evd_pair_review {
    const char *winner;   /* static: "control", "tie" or "treatment" */
    const char *note;     /* NULL when absent or null; borrowed from the body */
    const char *reviewer; /* borrowed from the body */
};
enum evd_code evd_pair_review_decode(const json_t *body, struct evd_pair_review *out,
                                     struct evd_err *err);

enum evd_code evd_human_review_decode(const json_t *body, struct evd_human_review *out,
                                      struct evd_err *err);

/*
 * The threshold the review queue measures a score against: evaluator.arguments.threshold
 * when it is a number in [0, 1] (borrowed evaluator), else 0.5, the middle of the score
 * range. A score is near when it is within EVD_HUMAN_REVIEW_NEAR of it.
 */
#define EVD_HUMAN_REVIEW_NEAR 0.1
double evd_human_review_threshold(const json_t *evaluator);

#endif
