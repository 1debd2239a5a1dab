/*
 * /v1/subscriptions over the webhooks module (webhooks/webhooks.h): decode, call,
 * encode. 201 + Location on create; 404 for unknown ids. Stateless; thread-safe.
 */
#include "handlers/subscriptions.h"

#include <stdio.h>
#include <stdlib.h>

#include "webhooks/webhooks.h"

/* Answers `out` (steals it) with `status`, or the error. */
static void answer(struct evd_resp *resp, enum evd_code rc, int status, json_t *out,
                   const struct evd_err *err)
{
    if (rc != EVD_OK)
        evd_resp_error(resp, err);
    else
        evd_resp_json(resp, status, out);
}

void evd_h_subs_list(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_webhooks_list(req->ctx->webhooks, &out, &err);
    answer(resp, rc, 200, out, &err);
}

void evd_h_sub_create(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_webhooks_subscribe(req->ctx->webhooks, req->body, &out, &err);
    if (rc == EVD_OK) {
        char loc[128];
        snprintf(loc, sizeof(loc), "/v1/subscriptions/%s",
                 json_string_value(json_object_get(out, "subscription_id")));
        evd_resp_header(resp, "Location", loc);
    }
    answer(resp, rc, 201, out, &err);
}

void evd_h_sub_get(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_webhooks_get(req->ctx->webhooks, evd_req_param(req, "id"), &out, &err);
    answer(resp, rc, 200, out, &err);
}

void evd_h_sub_delete(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    enum evd_code rc = evd_webhooks_delete(req->ctx->webhooks, evd_req_param(req, "id"), &err);
    answer(resp, rc, 200, rc == EVD_OK ? json_pack("{s:b}", "deleted", 1) : NULL, &err);
}

void evd_h_sub_deliveries(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    long limit = 0;
    const char *l = evd_req_query(req, "limit");
    if (l != NULL) {
        char *end = NULL;
        limit = strtol(l, &end, 10);
        if (*l == '\0' || *end != '\0' || limit < 1 || limit > 100) {
            evd_resp_problem(resp, EVD_EINVAL, "limit must be between 1 and 100");
            return;
        }
    }
    json_t *out = NULL;
    enum evd_code rc = evd_webhooks_deliveries(req->ctx->webhooks, evd_req_param(req, "id"), limit,
                                               evd_req_query(req, "before"), &out, &err);
    answer(resp, rc, 200, out, &err);
}
