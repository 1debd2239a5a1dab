/*
 * REST resources of evaluations, evaluators and models, and the registration of
 * every eval function in the function mirror's dispatch table.
 */
#ifndef EVD_HANDLERS_EVALUATIONS_H
#define EVD_HANDLERS_EVALUATIONS_H

#include "handlers/api.h"

/* Registers eval::* implementations with handlers/functions.c (before threads). */
void evd_evaluations_register(void);

void evd_h_eval_create(struct evd_req *req, struct evd_resp *resp);
void evd_h_eval_list(struct evd_req *req, struct evd_resp *resp);
void evd_h_eval_get(struct evd_req *req, struct evd_resp *resp);
void evd_h_eval_status(struct evd_req *req, struct evd_resp *resp);
void evd_h_eval_events(struct evd_req *req, struct evd_resp *resp);
void evd_h_eval_cancel(struct evd_req *req, struct evd_resp *resp);
void evd_h_eval_rerun(struct evd_req *req, struct evd_resp *resp);
void evd_h_eval_rescore(struct evd_req *req, struct evd_resp *resp);
void evd_h_eval_delete(struct evd_req *req, struct evd_resp *resp);
void evd_h_evaluator_exact(struct evd_req *req, struct evd_resp *resp);
void evd_h_evaluator_normalized(struct evd_req *req, struct evd_resp *resp);
void evd_h_evaluator_trajectory(struct evd_req *req, struct evd_resp *resp);
void evd_h_models(struct evd_req *req, struct evd_resp *resp);

#endif
