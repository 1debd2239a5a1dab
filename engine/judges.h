/*
 * Judgements, pairs and pair reviews of an experiment over HTTP (docs/judges.md, "Reading
 * and reviewing judgements"): engine/pairs.c on store/judgements.h. `treatment` and
 * `repeat` come as the request's text; a treatment that is not an arm index 1…m, or a
 * repeat outside 1…repeats, answers EVD_ENOTFOUND, as an unknown experiment does.
 */
#ifndef EVD_ENGINE_JUDGES_H
#define EVD_ENGINE_JUDGES_H

#include <jansson.h>

#include "common/err.h"

struct evd_engine;

/* {judgements: […], next_cursor?}; case_id and treatment NULL: every one. */
enum evd_code evd_experiment_judgements(struct evd_engine *e, const char *id,
                                        const char *case_id, const char *treatment,
                                        unsigned limit, const char *before, json_t **response,
                                        struct evd_err *err);
/* The pair view: {case_id, case_index, repeat, treatment, label, task, control,
 * treatment_run, judgements, outcome, inconsistent, human, reviews}. */
enum evd_code evd_experiment_pair(struct evd_engine *e, const char *id, const char *case_id,
                                  const char *repeat, const char *treatment, json_t **response,
                                  struct evd_err *err);
/* A reviewer's outcome of a pair (domain/human_review.h, evd_pair_review_decode). */
enum evd_code evd_experiment_pair_review_put(struct evd_engine *e, const char *id,
                                             const char *case_id, const char *repeat,
                                             const char *treatment, const json_t *body,
                                             json_t **response, struct evd_err *err);
/* {reviews: […], next_cursor?} in the order they were first made. */
enum evd_code evd_experiment_pair_reviews(struct evd_engine *e, const char *id,
                                          const char *reviewer, unsigned limit,
                                          const char *before, json_t **response,
                                          struct evd_err *err);
/* {treatments: [{treatment, label, count, raw, kappa, kappa_ci_low, kappa_ci_high,
 * confusion}]}: the judge's outcome against the human's, per treatment. */
enum evd_code evd_experiment_judge_agreement(struct evd_engine *e, const char *id,
                                             json_t **response, struct evd_err *err);

#endif
