/*
 * Human review of experiment runs and the experiments derived from a finished one, over
 * engine/reviews.h (docs/experiments.md, "Review, re-score and retry"): the review of a
 * run, the reviews, the review queue, the agreement, ?source= on an experiment's read,
 * re-score and retry.
 */
#ifndef EVD_HANDLERS_REVIEWS_H
#define EVD_HANDLERS_REVIEWS_H

#include "handlers/api.h"

/* PUT /v1/experiments/{id}/runs/{run_id}/review: 200 with the review as stored. */
void evd_h_experiment_review_put(struct evd_req *req, struct evd_resp *resp);
/* GET /v1/experiments/{id}/reviews?reviewer=&limit=&before= */
void evd_h_experiment_reviews(struct evd_req *req, struct evd_resp *resp);
/* GET /v1/experiments/{id}/review-queue?reviewer=&limit= */
void evd_h_experiment_review_queue(struct evd_req *req, struct evd_resp *resp);
/* GET /v1/experiments/{id}/agreement */
void evd_h_experiment_agreement(struct evd_req *req, struct evd_resp *resp);
/* GET /v1/experiments/{id}?source=…: called by evd_h_experiment_get when source is given. */
void evd_h_experiment_get_source(struct evd_req *req, struct evd_resp *resp);
/* POST /v1/experiments/{id}/rescore and /retry: 202 {experiment_id, …} and Location. */
void evd_h_experiment_rescore(struct evd_req *req, struct evd_resp *resp);
void evd_h_experiment_retry(struct evd_req *req, struct evd_resp *resp);

#endif
