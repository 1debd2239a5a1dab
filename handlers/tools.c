/*
 * /v1/tools: validation of a tool definition {description, request_schema, url,
 * timeout_ms} and its storage. The id names the function the agent sees (and an
 * evaluator.function_id may name it); request_schema must be a valid draft-07
 * schema because payloads are validated against it before every call. The REST
 * representation names the id `tool_id` (the store and the harness say `id`).
 */
#include "handlers/tools.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/json.h"
#include "common/util.h"
#include "schema/jsonschema.h"
#include "store/db.h"
#include "store/tools.h"

#define TOOL_TIMEOUT_DEFAULT_MS 30000
#define TOOL_TIMEOUT_MAX_MS 600000
#define TOOL_DESCRIPTION_MAX 4096

static const char ALNUM[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

static bool valid_id(const char *id)
{
    size_t n = strlen(id);
    return n >= 1 && n <= 128 && strchr(ALNUM, id[0]) != NULL &&
           strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-") == n;
}

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

enum evd_code evd_h_tool_decode(const char *id, json_t *body, struct evd_tool *t,
                                struct evd_err *err)
{
    static const char *const known[] = {"description", "request_schema", "url", "timeout_ms", NULL};
    memset(t, 0, sizeof(*t));
    if (!valid_id(id))
        return evd_err_set(err, EVD_EINVAL,
                           "tool id must be 1-128 characters of letters, digits, '_', '.', ':' "
                           "or '-', starting with a letter or digit");
    if (strncmp(id, "eval::", 6) == 0)
        return evd_err_set(err, EVD_EINVAL, "tool ids starting with eval:: are reserved");
    if (body == NULL || !json_is_object(body))
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    const char *unknown = evd_json_unknown_member(body, known);
    if (unknown != NULL)
        return evd_err_set(err, EVD_EINVAL, "%s is not a known field", unknown);
    json_t *desc = json_object_get(body, "description");
    if (!json_is_string(desc) || json_string_length(desc) == 0)
        return evd_err_set(err, EVD_EINVAL, "description must be a non-empty string");
    if (json_string_length(desc) > TOOL_DESCRIPTION_MAX)
        return evd_err_set(err, EVD_EINVAL, "description must be at most %d bytes",
                           TOOL_DESCRIPTION_MAX);
    json_t *schema = json_object_get(body, "request_schema");
    if (!json_is_object(schema))
        return evd_err_set(err, EVD_EINVAL, "request_schema must be a JSON Schema object");
    struct evd_err serr = {0};
    struct evd_jsonschema *compiled = evd_jsonschema_new(schema, &serr);
    if (compiled == NULL)
        return evd_err_set(err, EVD_EINVAL, "request_schema is not a valid JSON Schema: %s",
                           serr.msg);
    evd_jsonschema_free(compiled);
    json_t *url = json_object_get(body, "url");
    const char *u = json_string_value(url);
    if (u == NULL || (strncasecmp(u, "http://", 7) != 0 && strncasecmp(u, "https://", 8) != 0) ||
        strlen(u) > 2048)
        return evd_err_set(err, EVD_EINVAL, "url must be an http or https URL");
    json_t *timeout = json_object_get(body, "timeout_ms");
    long tms = TOOL_TIMEOUT_DEFAULT_MS;
    if (timeout != NULL) {
        if (!json_is_integer(timeout) || json_integer_value(timeout) < 1 ||
            json_integer_value(timeout) > TOOL_TIMEOUT_MAX_MS)
            return evd_err_set(err, EVD_EINVAL, "timeout_ms must be an integer between 1 and %d",
                               TOOL_TIMEOUT_MAX_MS);
        tms = (long)json_integer_value(timeout);
    }
    t->id = (char *)id;
    t->description = (char *)json_string_value(desc);
    t->request_schema = schema;
    t->url = (char *)u;
    t->timeout_ms = tms;
    t->created_at = t->updated_at = evd_now_ms();
    return EVD_OK;
}

void evd_h_tools_list(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    PGconn *c = evd_db_acquire(req->ctx->db, &err);
    json_t *tools = c ? evd_store_tools_json(c, &err) : NULL;
    evd_db_release(req->ctx->db, c);
    if (tools == NULL) {
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
    struct evd_tool t;
    const char *id = evd_req_param(req, "id");
    if (evd_h_tool_decode(id, req->body, &t, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    PGconn *c = evd_db_acquire(req->ctx->db, &err);
    bool created = false;
    if (c == NULL || evd_store_tool_put(c, &t, &created, &err) != EVD_OK) {
        evd_db_release(req->ctx->db, c);
        evd_resp_error(resp, &err);
        return;
    }
    struct evd_tool stored;
    enum evd_code rc = evd_store_tool_get(c, id, &stored, &err);
    evd_db_release(req->ctx->db, c);
    if (rc != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    if (created) {
        char loc[sizeof("/v1/tools/") + 128];
        snprintf(loc, sizeof(loc), "/v1/tools/%s", id);
        evd_resp_header(resp, "Location", loc);
    }
    evd_resp_json(resp, created ? 201 : 200, rest_tool(evd_tool_to_json(&stored)));
    evd_store_tool_clear(&stored);
}

void evd_h_tool_get(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    struct evd_tool t;
    PGconn *c = evd_db_acquire(req->ctx->db, &err);
    enum evd_code rc = c ? evd_store_tool_get(c, evd_req_param(req, "id"), &t, &err) : EVD_EDB;
    evd_db_release(req->ctx->db, c);
    if (rc != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    evd_resp_json(resp, 200, rest_tool(evd_tool_to_json(&t)));
    evd_store_tool_clear(&t);
}

void evd_h_tool_delete(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    bool deleted = false;
    const char *id = evd_req_param(req, "id");
    PGconn *c = evd_db_acquire(req->ctx->db, &err);
    enum evd_code rc = c ? evd_store_tool_delete(c, id, &deleted, &err) : EVD_EDB;
    evd_db_release(req->ctx->db, c);
    if (rc != EVD_OK) {
        evd_resp_error(resp, &err);
    } else if (!deleted) {
        char detail[200];
        snprintf(detail, sizeof(detail), "tool not found: %s", id);
        evd_resp_problem(resp, EVD_ENOTFOUND, detail);
    } else {
        evd_resp_json(resp, 200, json_pack("{s:b}", "deleted", 1));
    }
}
