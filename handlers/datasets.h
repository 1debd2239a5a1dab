/* Datasets of test cases for experiments: /v1/datasets (docs/experiments.md). */
#ifndef EVD_HANDLERS_DATASETS_H
#define EVD_HANDLERS_DATASETS_H

#include "handlers/api.h"

/* POST /v1/datasets: JSON, JSONL or CSV, streamed (an upload route, EVD_ROUTE_UPLOAD). */
void evd_h_dataset_upload(struct evd_req *req, struct evd_resp *resp);

void evd_h_datasets_list(struct evd_req *req, struct evd_resp *resp);
void evd_h_dataset_get(struct evd_req *req, struct evd_resp *resp);
void evd_h_dataset_cases(struct evd_req *req, struct evd_resp *resp);
void evd_h_dataset_delete(struct evd_req *req, struct evd_resp *resp);

#endif
