/*
 * Reviews, the review queue, the agreement, the analysis by source, re-score and retry:
 * HTTP semantics over engine/reviews.h (statuses through evd_http_status). Stateless; the
 * engine validates and answers the documents.
 */
#include "handlers/reviews.h"

#include <stdio.h>
#include <stdlib.h>

#include "engine/reviews.h"

/* The largest `offset` of the review queue (more than an experiment's runs can be). */
#define EVD_REVIEW_OFFSET_MAX 1000000000

void evd_h_experiment_review_put(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    bool created = false;
    if (req->body == NULL) {
        evd_resp_problem(resp, EVD_EINVAL, "request body must be a JSON object");
        return;
    }
    enum evd_code rc =
        evd_experiment_review_put(req->ctx->engine, evd_req_param(req, "id"),
                                  evd_req_param(req, "run_id"), req->body, &out, &created, &err);
    (void)created; /* a new review and a replaced one both answer 200 */
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_reviews(struct evd_req *req, struct evd_resp *resp)
{
    unsigned limit;
    if (!evd_req_page_limit(req, resp, &limit))
        return;
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_experiment_reviews(req->ctx->engine, evd_req_param(req, "id"),
                                              evd_req_query(req, "reviewer"), limit,
                                              evd_req_query(req, "before"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_review_queue(struct evd_req *req, struct evd_resp *resp)
{
    unsigned limit;
    if (!evd_req_page_limit(req, resp, &limit))
        return;
    /* offset: the runs of the queue to pass over, those the reviewer skipped (they stay in
     * the queue until reviewed). */
    unsigned offset = 0;
    const char *s = evd_req_query(req, "offset");
    if (s != NULL) {
        char *end = NULL;
        long v = strtol(s, &end, 10);
        if (*s == '\0' || *end != '\0' || v < 0 || v > EVD_REVIEW_OFFSET_MAX) {
            char detail[64];
            snprintf(detail, sizeof(detail), "offset must be between 0 and %d",
                     EVD_REVIEW_OFFSET_MAX);
            evd_resp_problem(resp, EVD_EINVAL, detail);
            return;
        }
        offset = (unsigned)v;
    }
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc =
        evd_experiment_review_queue(req->ctx->engine, evd_req_param(req, "id"),
                                    evd_req_query(req, "reviewer"), limit, offset, &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_agreement(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc =
        evd_experiment_agreement(req->ctx->engine, evd_req_param(req, "id"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_get_source(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_experiment_get_source(req->ctx->engine, evd_req_param(req, "id"),
                                                 evd_req_query(req, "source"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

static void derived(struct evd_resp *resp, enum evd_code rc, json_t *out, const struct evd_err *err)
{
    if (rc == EVD_OK) {
        char loc[160];
        snprintf(loc, sizeof(loc), "/v1/experiments/%s",
                 json_string_value(json_object_get(out, "experiment_id")));
        evd_resp_header(resp, "Location", loc);
    }
    evd_resp_outcome(resp, 202, rc, out, err);
}

void evd_h_experiment_rescore(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    if (req->body == NULL) {
        evd_resp_problem(resp, EVD_EINVAL, "request body must be a JSON object");
        return;
    }
    enum evd_code rc =
        evd_experiment_rescore(req->ctx->engine, evd_req_param(req, "id"), req->body, &out, &err);
    derived(resp, rc, out, &err);
}

void evd_h_experiment_retry(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc =
        evd_experiment_retry(req->ctx->engine, evd_req_param(req, "id"), req->body, &out, &err);
    derived(resp, rc, out, &err);
}
