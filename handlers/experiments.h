/*
 * Experiment resources over engine/experiments.h: /v1/experiments and its sub-resources
 * (docs/experiments.md, "REST"). POST /v1/experiments is an upload route (its body may
 * carry inline cases up to EVALD_MAX_DATASET_BYTES); the events and the export stream.
 */
#ifndef EVD_HANDLERS_EXPERIMENTS_H
#define EVD_HANDLERS_EXPERIMENTS_H

#include "handlers/api.h"

/* POST /v1/experiments (EVD_ROUTE_UPLOAD): 202 {experiment_id, status} and Location. */
void evd_h_experiment_start(struct evd_req *req, struct evd_resp *resp);
/* POST /v1/experiments/plan: the start's checks, nothing written, 200 with the plan. */
void evd_h_experiment_plan(struct evd_req *req, struct evd_resp *resp);

void evd_h_experiments_list(struct evd_req *req, struct evd_resp *resp);
void evd_h_experiment_get(struct evd_req *req, struct evd_resp *resp);
void evd_h_experiment_cases(struct evd_req *req, struct evd_resp *resp);
void evd_h_experiment_runs(struct evd_req *req, struct evd_resp *resp);
/* GET /v1/experiments/{id}/events: SSE `progress` events, then one `status` event. */
void evd_h_experiment_events(struct evd_req *req, struct evd_resp *resp);
/* GET /v1/experiments/{id}/export?format=jsonl|csv, streamed. */
void evd_h_experiment_export(struct evd_req *req, struct evd_resp *resp);
void evd_h_experiment_cancel(struct evd_req *req, struct evd_resp *resp);
/* DELETE /v1/experiments/{id}: 204, 404, or 409 unless terminal. */
void evd_h_experiment_delete(struct evd_req *req, struct evd_resp *resp);

#endif
