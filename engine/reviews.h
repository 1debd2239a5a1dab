/*
 * Human review of experiment runs, the agreement of evaluator and reviewers, the analysis
 * recomputed from a chosen source of verdicts, and the experiments derived from a
 * finished one: a re-score (the stored outputs scored again by another evaluator, no
 * model call for the target) and a retry (only the runs that failed before a verdict run
 * again). See docs/experiments.md, "Review, re-score and retry".
 *
 * Thread-safety: every function may be called from any thread; they borrow pool
 * connections. Responses are new references.
 */
#ifndef EVD_ENGINE_REVIEWS_H
#define EVD_ENGINE_REVIEWS_H

#include <jansson.h>
#include <stdbool.h>

#include "common/err.h"

struct evd_engine;

/* PUT /v1/experiments/{id}/runs/{run_id}/review with `body` (borrowed): *review the
 * stored review, *created false when it replaced the same reviewer's earlier one.
 * EVD_EINVAL names the field, EVD_ENOTFOUND the experiment or run, EVD_ECONFLICT for a
 * run without an output. Nothing is written on a refusal. */
enum evd_code evd_experiment_review_put(struct evd_engine *e, const char *id, const char *run_id,
                                        const json_t *body, json_t **review, bool *created,
                                        struct evd_err *err);

/* GET /v1/experiments/{id}/reviews: {reviews: [...], next_cursor?}, reviewer NULL for all. */
enum evd_code evd_experiment_reviews(struct evd_engine *e, const char *id, const char *reviewer,
                                     unsigned limit, const char *before, json_t **response,
                                     struct evd_err *err);

/* GET /v1/experiments/{id}/review-queue: {runs: [...], threshold, near}: the next `limit`
 * runs `reviewer` (NULL: anyone) has not reviewed, most useful first, past the first
 * `offset` of them (the runs a reviewer skipped). */
enum evd_code evd_experiment_review_queue(struct evd_engine *e, const char *id,
                                          const char *reviewer, unsigned limit, unsigned offset,
                                          json_t **response, struct evd_err *err);

/* GET /v1/experiments/{id}/agreement: {reviewed_runs, reviews, agreement, kappa,
 * kappa_ci_low, kappa_ci_high, table, source_agreement (re-scores only)}. */
enum evd_code evd_experiment_agreement(struct evd_engine *e, const char *id, json_t **response,
                                       struct evd_err *err);

/* GET /v1/experiments/{id}?source=: the document with its analysis recomputed from the
 * verdicts of `source` ("evaluator" | "human" | "human_then_evaluator"; NULL or
 * "evaluator": the stored analysis); EVD_EINVAL naming source otherwise. */
enum evd_code evd_experiment_get_source(struct evd_engine *e, const char *id, const char *source,
                                        json_t **experiment, struct evd_err *err);

/* POST /v1/experiments/{id}/rescore {evaluator}: 202 {experiment_id, status,
 * source_experiment_id}. EVD_ECONFLICT while the source is not terminal. */
enum evd_code evd_experiment_rescore(struct evd_engine *e, const char *id, const json_t *body,
                                     json_t **response, struct evd_err *err);

/* POST /v1/experiments/{id}/retry: 202 {experiment_id, status, source_experiment_id,
 * retried_runs}. EVD_ECONFLICT while the source is not terminal. */
enum evd_code evd_experiment_retry(struct evd_engine *e, const char *id, const json_t *body,
                                   json_t **response, struct evd_err *err);

#endif
