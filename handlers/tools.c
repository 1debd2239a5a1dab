/*
 * /v1/tools over the engine (engine/tools.h), which checks and stores tool definitions.
 * The REST representation names the id `tool_id` (the store and the harness say `id`).
 */
#include "handlers/tools.h"

#include <stdio.h>

#include "engine/tools.h"

/* The REST shape of a stored tool: `id` becomes `tool_id`. Steals `t`; new reference. */
static json_t *rest_tool(json_t *t)
{
    json_t *id = json_object_get(t, "id");
    if (id != NULL) {
        json_object_set(t, "tool_id", id);
        json_object_del(t, "id");
    }
    return t;
}

void evd_h_tools_list(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *tools = NULL;
    if (evd_tools_list(req->ctx->engine, &tools, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) rest_tool(t);
    evd_resp_json(resp, 200, json_pack("{s:o}", "tools", tools));
}

void evd_h_tool_put(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    const char *id = evd_req_param(req, "id");
    json_t *stored = NULL;
    bool created = false;
    if (evd_tools_put(req->ctx->engine, id, req->body, &stored, &created, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    if (created) {
        char loc[sizeof("/v1/tools/") + 128];
        snprintf(loc, sizeof(loc), "/v1/tools/%s", id);
        evd_resp_header(resp, "Location", loc);
    }
    evd_resp_json(resp, created ? 201 : 200, rest_tool(stored));
}

void evd_h_tool_get(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *stored = NULL;
    if (evd_tools_get(req->ctx->engine, evd_req_param(req, "id"), &stored, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    evd_resp_json(resp, 200, rest_tool(stored));
}

void evd_h_tool_delete(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    bool deleted = false;
    const char *id = evd_req_param(req, "id");
    if (evd_tools_delete(req->ctx->engine, id, &deleted, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
    } else if (!deleted) {
        char detail[200];
        snprintf(detail, sizeof(detail), "tool not found: %s", id);
        evd_resp_problem(resp, EVD_ENOTFOUND, detail);
    } else {
        evd_resp_json(resp, 200, json_pack("{s:b}", "deleted", 1));
    }
}
