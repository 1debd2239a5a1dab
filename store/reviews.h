/*
 * SQL of human reviews and derived experiments (migrations/0012_reviews.sql): reviews of
 * experiment runs, the review queue, the tables of the agreement, the runs of an
 * experiment with the verdicts of a chosen source, and the copy of a terminal experiment
 * into a re-score or a retry. Every function runs on the caller's connection; JSON out is
 * new references.
 */
#ifndef EVD_STORE_REVIEWS_H
#define EVD_STORE_REVIEWS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "store/db.h"

struct evd_store_review {
    const char *experiment_id, *run_id;
    const char *verdict; /* "pass" or "fail" */
    const char *note;    /* or NULL */
    const char *reviewer;
    int64_t now;
};
/*
 * Records (or replaces, for the same reviewer and run) a review: *review is the review
 * object and *created whether it is new. EVD_ENOTFOUND for an unknown experiment or run,
 * EVD_ECONFLICT for a run with no output to review.
 */
enum evd_code evd_store_review_put(PGconn *c, const struct evd_store_review *rv, json_t **review,
                                   bool *created, struct evd_err *err);

/* The experiment's reviews in the order they were first made (store/page.h ascending
 * pages), reviewer NULL for everyone's. EVD_ENOTFOUND for an unknown experiment. */
json_t *evd_store_reviews_list(PGconn *c, const char *id, const char *reviewer, unsigned limit,
                               const char *before, char **next_cursor, struct evd_err *err);

/*
 * The review queue: the experiment's runs with an output that `reviewer` (NULL: anyone)
 * has not reviewed, most useful first (docs/experiments.md, "The review queue"); a score
 * is near when |score − threshold| <= near. At most `limit` items after the first `offset`
 * (new array).
 */
json_t *evd_store_review_queue(PGconn *c, const char *id, const char *reviewer, double threshold,
                               double near, unsigned limit, unsigned offset, struct evd_err *err);

/* Counts of runs with both an evaluator verdict and a human verdict: [evaluator pass &
 * human pass, pass & fail, fail & pass, fail & fail]; *reviews the reviews made. */
enum evd_code evd_store_review_table(PGconn *c, const char *id, uint64_t counts[4],
                                     int64_t *reviews, struct evd_err *err);
/* The same table between the evaluator of `id` and that of experiment `source` over the
 * runs (case and position) both evaluated. */
enum evd_code evd_store_source_table(PGconn *c, const char *id, const char *source,
                                     uint64_t counts[4], struct evd_err *err);

enum evd_store_verdicts { EVD_VERDICTS_EVALUATOR, EVD_VERDICTS_HUMAN, EVD_VERDICTS_HUMAN_FIRST };
/* Every case of `id` in dataset order: {case_index, cluster, runs: [{position, arm, repeat,
 * status, passed, benchmark}]} with the terminal runs' passed taken from `source` (null
 * where it gives no verdict). New array, or NULL + err. */
json_t *evd_store_verdict_rows(PGconn *c, const char *id, enum evd_store_verdicts source,
                               struct evd_err *err);

/* source_experiment_id, derivation and retried_runs of `id` ({} members null when not
 * derived), or NULL + EVD_ENOTFOUND. */
json_t *evd_store_experiment_derived(PGconn *c, const char *id, struct evd_err *err);

/* evald_experiment_derive: experiment `id` of kind "rescore" or "retry" from the terminal
 * experiment `source` with the normalized request `request` (JSON text); *reruns the runs
 * to run again. EVD_ENOTFOUND when `source` is unknown, EVD_ECONFLICT while it is live. */
enum evd_code evd_store_experiment_derive(PGconn *c, const char *source, const char *id,
                                          const char *kind, const char *request, int64_t now,
                                          const char *owner, int64_t *reruns, struct evd_err *err);

/* The case bodies of experiment `id` in dataset order (new array), or NULL + err. */
json_t *evd_store_experiment_bodies(PGconn *c, const char *id, struct evd_err *err);

/* The stored agent turn of a run of a re-score: {output, metrics, benchmark, transcript}
 * (new reference; a null column is an absent member), or NULL + err. */
json_t *evd_store_rescore_input(PGconn *c, const char *id, int case_index, int position,
                                struct evd_err *err);

#endif
