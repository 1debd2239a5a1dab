/* Operational endpoints; see system.h. Stateless; thread-safe. */
#include "handlers/system.h"

#include <stdio.h>
#include <string.h>

#include "common/assets.h"
#include "common/util.h"
#include "engine/health.h"

void evd_h_healthz(struct evd_req *req, struct evd_resp *resp)
{
    json_t *body = json_pack("{s:s, s:s, s:I}", "status", "ok", "version", req->ctx->version,
                             "uptime_ms", (json_int_t)(evd_now_ms() - req->ctx->started_at_ms));
    evd_resp_json(resp, 200, body);
}

void evd_h_readyz(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    enum evd_code rc = evd_engine_ready(req->ctx->engine, &err);
    /* EVD_EUNAVAIL: the database answered but migrations are missing; any other
     * failure means it could not be asked. The reason itself goes to no client. */
    const char *database = rc == EVD_OK || rc == EVD_EUNAVAIL ? "ok" : "unreachable";
    const char *migrations = rc == EVD_OK ? "ok" : rc == EVD_EUNAVAIL ? "pending" : "unknown";
    json_t *body = json_pack("{s:s, s:s, s:s}", "status", rc == EVD_OK ? "ok" : "unavailable",
                             "database", database, "migrations", migrations);
    evd_resp_json(resp, rc == EVD_OK ? 200 : 503, body);
}

void evd_h_metrics(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_buf out = {0};
    if (evd_engine_metrics_render(req->ctx->engine, &out) != 0) {
        evd_buf_free(&out);
        evd_resp_problem(resp, EVD_ENOMEM, "could not render metrics");
        return;
    }
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    resp->body = out.data;
    resp->len = out.len;
}

static void send_asset(struct evd_req *req, struct evd_resp *resp, const struct evd_asset *a,
                       const char *cache)
{
    char etag[24];
    char hex[65];
    evd_sha256_hex(a->data, a->len, hex);
    snprintf(etag, sizeof(etag), "\"%.16s\"", hex);
    const char *inm = evd_req_header(req, "If-None-Match");
    evd_resp_header(resp, "ETag", etag);
    evd_resp_header(resp, "Cache-Control", cache);
    if (inm != NULL && strcmp(inm, etag) == 0) {
        evd_resp_raw(resp, 304, NULL, "", 0);
        return;
    }
    evd_resp_raw(resp, 200, a->content_type, a->data, a->len);
}

void evd_h_openapi(struct evd_req *req, struct evd_resp *resp)
{
    const struct evd_asset *a = evd_asset_find(evd_openapi, "openapi.json");
    if (a == NULL) {
        evd_resp_problem(resp, EVD_ENOTFOUND, "this build has no OpenAPI document");
        return;
    }
    send_asset(req, resp, a, "no-cache");
}

void evd_h_console_index(struct evd_req *req, struct evd_resp *resp)
{
    const struct evd_asset *a = evd_asset_find(evd_assets, "index.html");
    if (a == NULL) {
        evd_resp_problem(resp, EVD_ENOTFOUND, "this build has no console");
        return;
    }
    send_asset(req, resp, a, "no-cache");
}

void evd_h_console_asset(struct evd_req *req, struct evd_resp *resp)
{
    const char *path = evd_req_param(req, "path");
    const struct evd_asset *a = path ? evd_asset_find(evd_assets, path) : NULL;
    if (a == NULL) {
        evd_resp_problem(resp, EVD_ENOTFOUND, "no such console asset");
        return;
    }
    /* Assets are revalidated cheaply by ETag; a new build changes the tag. */
    send_asset(req, resp, a, "public, max-age=300, must-revalidate");
}

json_t *evd_ui_content(const char *path)
{
    const struct evd_asset *a = evd_asset_find(evd_assets, path && *path ? path : "index.html");
    if (a == NULL)
        return NULL;
    return json_pack("{s:s%, s:s}", "content", (const char *)a->data, a->len, "content_type",
                     a->content_type);
}
