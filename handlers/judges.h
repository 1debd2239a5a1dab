/*
 * Judgements, pairs, pair reviews and the judge's agreement (docs/judges.md): HTTP
 * semantics over engine/judges.h. Stateless.
 */
#ifndef EVD_HANDLERS_JUDGES_H
#define EVD_HANDLERS_JUDGES_H

#include "handlers/api.h"

void evd_h_experiment_judgements(struct evd_req *req, struct evd_resp *resp);
void evd_h_experiment_pair(struct evd_req *req, struct evd_resp *resp);
void evd_h_experiment_pair_review_put(struct evd_req *req, struct evd_resp *resp);
void evd_h_experiment_pair_reviews(struct evd_req *req, struct evd_resp *resp);
void evd_h_experiment_judge_agreement(struct evd_req *req, struct evd_resp *resp);

#endif
