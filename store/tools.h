/*
 * HTTP tools: functions the agent may call (and HTTP evaluators), registered with
 * PUT /v1/tools/{id}. SQL only; validation is the engine's
 * (engine/tools.c).
 */
#ifndef EVD_STORE_TOOLS_H
#define EVD_STORE_TOOLS_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>

#include "common/err.h"

struct evd_tool {
    char *id;
    char *description;
    json_t *request_schema;
    char *url;
    long timeout_ms;
    int64_t created_at, updated_at;
};

void evd_store_tool_clear(struct evd_tool *t);
/* EVD_ENOTFOUND when unknown. */
enum evd_code evd_store_tool_get(PGconn *c, const char *id, struct evd_tool *out,
                                 struct evd_err *err);
/* Inserts or replaces; *created tells which. */
enum evd_code evd_store_tool_put(PGconn *c, const struct evd_tool *t, bool *created,
                                 struct evd_err *err);
enum evd_code evd_store_tool_delete(PGconn *c, const char *id, bool *deleted,
                                    struct evd_err *err);
/* Every tool as [{id, description, request_schema, url, timeout_ms, created_at,
 * updated_at}] ordered by id (new reference), or NULL + err. */
json_t *evd_store_tools_json(PGconn *c, struct evd_err *err);
/* One tool as JSON (new reference). */
json_t *evd_tool_to_json(const struct evd_tool *t);

#endif
