/* Judgements, pairs, pair reviews and the judge's agreement; see judges.h. */
#include "handlers/judges.h"

#include "engine/judges.h"

void evd_h_experiment_judgements(struct evd_req *req, struct evd_resp *resp)
{
    unsigned limit;
    if (!evd_req_page_limit(req, resp, &limit))
        return;
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_experiment_judgements(
        req->ctx->engine, evd_req_param(req, "id"), evd_req_query(req, "case_id"),
        evd_req_query(req, "treatment"), limit, evd_req_query(req, "before"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_pair(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_experiment_pair(req->ctx->engine, evd_req_param(req, "id"),
                                           evd_req_param(req, "case_id"),
                                           evd_req_param(req, "repeat"),
                                           evd_req_param(req, "treatment"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_pair_review_put(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_experiment_pair_review_put(
        req->ctx->engine, evd_req_param(req, "id"), evd_req_param(req, "case_id"),
        evd_req_param(req, "repeat"), evd_req_param(req, "treatment"), req->body, &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_pair_reviews(struct evd_req *req, struct evd_resp *resp)
{
    unsigned limit;
    if (!evd_req_page_limit(req, resp, &limit))
        return;
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_experiment_pair_reviews(req->ctx->engine, evd_req_param(req, "id"),
                                                   evd_req_query(req, "reviewer"), limit,
                                                   evd_req_query(req, "before"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_judge_agreement(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc =
        evd_experiment_judge_agreement(req->ctx->engine, evd_req_param(req, "id"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}
