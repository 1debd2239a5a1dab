/*
 * Dataset resources over the engine; see datasets.h. POST /v1/datasets is an upload
 * route: the server hands its body over piece by piece as it arrives (struct
 * evd_upload_ops, handlers/api.h), so a 32 MiB upload is never buffered whole.
 */
#include "handlers/datasets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/datasets.h"

struct upload {
    struct evd_dataset_upload *u;
    bool refused; /* a refusal is in *resp already; the rest of the body is discarded */
};

/* The media type of ct without parameters matches `type` (case-insensitive). */
static bool media_is(const char *ct, const char *type)
{
    if (ct == NULL)
        return false;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    return n == strlen(type) && strncasecmp(ct, type, n) == 0;
}

static bool format_of(const char *ct, enum evd_dataset_format *f)
{
    if (media_is(ct, "application/json")) {
        *f = EVD_DATASET_JSON;
    } else if (media_is(ct, "application/x-ndjson") || media_is(ct, "application/jsonl") ||
               media_is(ct, "application/x-jsonlines")) {
        *f = EVD_DATASET_JSONL;
    } else if (media_is(ct, "text/csv")) {
        *f = EVD_DATASET_CSV;
    } else {
        return false;
    }
    return true;
}

static const struct evd_upload_ops upload_ops;

void evd_h_dataset_upload(struct evd_req *req, struct evd_resp *resp)
{
    enum evd_dataset_format f;
    if (!format_of(evd_req_header(req, "Content-Type"), &f)) {
        evd_resp_problem(resp, EVD_EMEDIA,
                         "request body must be application/json, application/x-ndjson or "
                         "text/csv");
        return;
    }
    struct upload *up = calloc(1, sizeof(*up));
    if (up == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
        return;
    }
    struct evd_err err = {0};
    if (evd_dataset_upload_begin(req->ctx->engine, f,
                                 f == EVD_DATASET_JSON ? NULL : evd_req_query(req, "name"),
                                 (size_t)req->ctx->max_dataset_cases, &up->u, &err) != EVD_OK) {
        free(up);
        evd_resp_error(resp, &err);
        return;
    }
    resp->upload = &upload_ops;
    resp->upload_state = up;
}

static int upload_chunk(void *state, const char *data, size_t len, struct evd_resp *resp)
{
    struct upload *up = state;
    if (up->refused)
        return -1;
    struct evd_err err = {0};
    if (evd_dataset_upload_feed(up->u, data, len, &err) != EVD_OK) {
        up->refused = true;
        evd_resp_error(resp, &err);
        return -1;
    }
    return 0;
}

static void upload_end(void *state, struct evd_req *req, struct evd_resp *resp)
{
    (void)req;
    struct upload *up = state;
    if (up->refused)
        return;
    struct evd_err err = {0};
    json_t *row = NULL;
    bool created = false;
    if (evd_dataset_upload_finish(up->u, &row, &created, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    char loc[128];
    snprintf(loc, sizeof(loc), "/v1/datasets/%s",
             json_string_value(json_object_get(row, "dataset_id")));
    evd_resp_header(resp, "Location", loc);
    evd_resp_json(resp, created ? 201 : 200, row);
}

static void upload_free(void *state)
{
    struct upload *up = state;
    if (up == NULL)
        return;
    evd_dataset_upload_free(up->u);
    free(up);
}

/* A JSON upload is compared as canonical JSON for Idempotency-Key; CSV and JSON Lines as
 * bytes (the server's default). */
static bool upload_fingerprint(void *state, char out[65])
{
    struct upload *up = state;
    return !up->refused && evd_dataset_upload_fingerprint(up->u, out);
}

static const struct evd_upload_ops upload_ops = {
    .chunk = upload_chunk,
    .end = upload_end,
    .free = upload_free,
    .fingerprint = upload_fingerprint,
};

void evd_h_datasets_list(struct evd_req *req, struct evd_resp *resp)
{
    unsigned limit;
    if (!evd_req_page_limit(req, resp, &limit))
        return;
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc =
        evd_dataset_list(req->ctx->engine, limit, evd_req_query(req, "before"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_dataset_get(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_dataset_get(req->ctx->engine, evd_req_param(req, "id"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_dataset_cases(struct evd_req *req, struct evd_resp *resp)
{
    unsigned limit;
    if (!evd_req_page_limit(req, resp, &limit))
        return;
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_dataset_cases(req->ctx->engine, evd_req_param(req, "id"), limit,
                                         evd_req_query(req, "before"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_dataset_delete(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    enum evd_code rc = evd_dataset_delete(req->ctx->engine, evd_req_param(req, "id"), &err);
    evd_resp_outcome(resp, 200, rc, rc == EVD_OK ? json_pack("{s:b}", "deleted", 1) : NULL, &err);
}
