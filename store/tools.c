/* SQL of the tools table; see tools.h. */
#include "store/tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db.h"

void evd_store_tool_clear(struct evd_tool *t)
{
    free(t->id);
    free(t->description);
    free(t->url);
    json_decref(t->request_schema);
    memset(t, 0, sizeof(*t));
}

json_t *evd_tool_to_json(const struct evd_tool *t)
{
    return json_pack("{s:s, s:s, s:O, s:s, s:I, s:I, s:I}", "id", t->id, "description",
                     t->description, "request_schema", t->request_schema, "url", t->url,
                     "timeout_ms", (json_int_t)t->timeout_ms, "created_at",
                     (json_int_t)t->created_at, "updated_at", (json_int_t)t->updated_at);
}

static const char SQL_COLS[] =
    "SELECT id, description, request_schema, url, timeout_ms, created_at, updated_at FROM tools";

static void fill(PGresult *r, int i, struct evd_tool *t)
{
    t->id = strdup(PQgetvalue(r, i, 0));
    t->description = strdup(PQgetvalue(r, i, 1));
    t->request_schema = json_loads(PQgetvalue(r, i, 2), 0, NULL);
    t->url = strdup(PQgetvalue(r, i, 3));
    t->timeout_ms = atol(PQgetvalue(r, i, 4));
    t->created_at = strtoll(PQgetvalue(r, i, 5), NULL, 10);
    t->updated_at = strtoll(PQgetvalue(r, i, 6), NULL, 10);
}

enum evd_code evd_store_tool_get(PGconn *c, const char *id, struct evd_tool *out,
                                 struct evd_err *err)
{
    memset(out, 0, sizeof(*out));
    char sql[sizeof(SQL_COLS) + 32];
    snprintf(sql, sizeof(sql), "%s WHERE id = $1", SQL_COLS);
    const char *p[] = {id};
    PGresult *r = evd_db_query(c, sql, 1, p, err);
    if (r == NULL)
        return err ? err->code : EVD_EDB;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return evd_err_set(err, EVD_ENOTFOUND, "tool not found: %s", id);
    }
    fill(r, 0, out);
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_tool_put(PGconn *c, const struct evd_tool *t, bool *created,
                                 struct evd_err *err)
{
    char *schema = json_dumps(t->request_schema, JSON_COMPACT);
    char timeout[24], now[24];
    snprintf(timeout, sizeof(timeout), "%ld", t->timeout_ms);
    snprintf(now, sizeof(now), "%lld", (long long)t->updated_at);
    const char *p[] = {t->id, t->description, schema, t->url, timeout, now};
    PGresult *r = evd_db_query(
        c,
        "INSERT INTO tools (id, description, request_schema, url, timeout_ms, created_at,"
        " updated_at) VALUES ($1, $2, $3::jsonb, $4, $5::int, $6::bigint, $6::bigint)"
        " ON CONFLICT (id) DO UPDATE SET description = EXCLUDED.description,"
        " request_schema = EXCLUDED.request_schema, url = EXCLUDED.url,"
        " timeout_ms = EXCLUDED.timeout_ms, updated_at = EXCLUDED.updated_at"
        " RETURNING (xmax = 0)",
        6, p, err);
    free(schema);
    if (r == NULL)
        return err ? err->code : EVD_EDB;
    *created = PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_tool_delete(PGconn *c, const char *id, bool *deleted,
                                    struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(c, "DELETE FROM tools WHERE id = $1", 1, p, err);
    if (r == NULL)
        return err ? err->code : EVD_EDB;
    *deleted = atoi(PQcmdTuples(r)) == 1;
    PQclear(r);
    return EVD_OK;
}

json_t *evd_store_tools_json(PGconn *c, struct evd_err *err)
{
    char sql[sizeof(SQL_COLS) + 32];
    snprintf(sql, sizeof(sql), "%s ORDER BY id", SQL_COLS);
    PGresult *r = evd_db_query(c, sql, 0, NULL, err);
    if (r == NULL)
        return NULL;
    json_t *out = json_array();
    for (int i = 0; i < PQntuples(r); i++) {
        struct evd_tool t;
        fill(r, i, &t);
        json_array_append_new(out, evd_tool_to_json(&t));
        evd_store_tool_clear(&t);
    }
    PQclear(r);
    return out;
}
