/*
 * HTTP tools over the store; see tools.h. The checks are pure and come before any
 * connection is borrowed; each call holds one pool connection at most.
 */
#include "engine/tools.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/json.h"
#include "common/util.h"
#include "engine/internal.h"
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

enum evd_code evd_tools_decode(const char *id, json_t *body, struct evd_tool *t,
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

enum evd_code evd_tools_list(struct evd_engine *e, json_t **response, struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    json_t *tools = c ? evd_store_tools_json(c, err) : NULL;
    evd_db_release(e->opts.db, c);
    if (tools == NULL)
        return err ? err->code : EVD_EDB;
    *response = tools;
    return EVD_OK;
}

/* The stored tool `id` as JSON on `c`. */
static enum evd_code get_json(PGconn *c, const char *id, json_t **response, struct evd_err *err)
{
    struct evd_tool t;
    enum evd_code rc = evd_store_tool_get(c, id, &t, err);
    if (rc != EVD_OK)
        return rc;
    *response = evd_tool_to_json(&t);
    evd_store_tool_clear(&t);
    return EVD_OK;
}

enum evd_code evd_tools_put(struct evd_engine *e, const char *id, json_t *body, json_t **response,
                            bool *created, struct evd_err *err)
{
    struct evd_tool t;
    enum evd_code rc = evd_tools_decode(id, body, &t, err);
    if (rc != EVD_OK)
        return rc;
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return err ? err->code : EVD_EDB;
    *created = false;
    rc = evd_store_tool_put(c, &t, created, err);
    if (rc == EVD_OK)
        rc = get_json(c, id, response, err);
    evd_db_release(e->opts.db, c);
    return rc;
}

enum evd_code evd_tools_get(struct evd_engine *e, const char *id, json_t **response,
                            struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return err ? err->code : EVD_EDB;
    enum evd_code rc = get_json(c, id, response, err);
    evd_db_release(e->opts.db, c);
    return rc;
}

enum evd_code evd_tools_delete(struct evd_engine *e, const char *id, bool *deleted,
                               struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return err ? err->code : EVD_EDB;
    *deleted = false;
    enum evd_code rc = evd_store_tool_delete(c, id, deleted, err);
    evd_db_release(e->opts.db, c);
    return rc;
}
