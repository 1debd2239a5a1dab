/* Keyset pagination; see page.h. */
#include "store/page.h"

#include "store/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum evd_code evd_store_page_open(struct evd_store_page *pg, unsigned limit, const char *before,
                                  struct evd_err *err)
{
    memset(pg, 0, sizeof(*pg));
    snprintf(pg->lim_buf, sizeof(pg->lim_buf), "%u", limit);
    pg->lim = pg->lim_buf;
    if (before == NULL)
        return EVD_OK;
    const char *us = strchr(before, '_');
    if (us == NULL || us == before || (size_t)(us - before) >= sizeof(pg->ts_buf) ||
        strspn(before, "0123456789") != (size_t)(us - before) ||
        strlen(us + 1) >= sizeof(pg->id_buf))
        return evd_err_set(err, EVD_EINVAL, "before must be a cursor returned as next_cursor");
    snprintf(pg->ts_buf, sizeof(pg->ts_buf), "%.*s", (int)(us - before), before);
    snprintf(pg->id_buf, sizeof(pg->id_buf), "%s", us + 1);
    pg->ts = pg->ts_buf;
    pg->id = pg->id_buf;
    return EVD_OK;
}

json_t *evd_store_page_rows(PGresult *r, unsigned limit, char **next_cursor, struct evd_err *err)
{
    *next_cursor = NULL;
    json_t *out = json_array();
    int n = PQntuples(r);
    for (int i = 0; out != NULL && i < n && (unsigned)i < limit; i++) {
        json_t *v = json_loads(PQgetvalue(r, i, 0), 0, NULL);
        if (v == NULL || json_array_append_new(out, v) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    if (out != NULL && (unsigned)n > limit) {
        char cur[128];
        snprintf(cur, sizeof(cur), "%s_%s", PQgetvalue(r, (int)limit - 1, 1),
                 PQgetvalue(r, (int)limit - 1, 2));
        if ((*next_cursor = strdup(cur)) == NULL) {
            json_decref(out);
            out = NULL;
        }
    }
    if (out == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    return out;
}

json_t *evd_store_page_list(PGconn *c, const char *sql, unsigned limit, const char *before,
                            char **next_cursor, struct evd_err *err)
{
    struct evd_store_page pg;
    *next_cursor = NULL;
    if (evd_store_page_open(&pg, limit, before, err) != EVD_OK)
        return NULL;
    const char *p[] = {pg.lim, pg.ts, pg.id};
    PGresult *r = evd_db_query(c, sql, 3, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = evd_store_page_rows(r, limit, next_cursor, err);
    PQclear(r);
    return out;
}

json_t *evd_store_page_ascending(PGconn *c, const char *sql, const char *what, const char *id,
                                 const char *extra, unsigned limit, const char *before,
                                 char **next_cursor, struct evd_err *err)
{
    *next_cursor = NULL;
    struct evd_store_page pg;
    if (evd_store_page_open(&pg, limit, before, err) != EVD_OK)
        return NULL;
    if (pg.id != NULL && strcmp(pg.id, id) != 0) {
        evd_err_set(err, EVD_EINVAL, "before must be a cursor returned as next_cursor");
        return NULL;
    }
    const char *p[] = {id, pg.lim, pg.ts, extra};
    PGresult *r = evd_db_query(c, sql, 4, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = NULL;
    int n = PQntuples(r);
    if (n == 0 || !PQgetisnull(r, 0, 0)) {
        evd_err_set(err, EVD_ENOTFOUND, "%s not found: %s", what, id);
        goto out;
    }
    out = json_array();
    for (int i = 1; out != NULL && i < n && (unsigned)(i - 1) < limit; i++) {
        json_t *v = evd_db_col_json(r, i, 0);
        if (v == NULL || json_array_append_new(out, v) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    if (out != NULL && (unsigned)(n - 1) > limit) {
        char cur[128];
        snprintf(cur, sizeof(cur), "%s_%s", PQgetvalue(r, (int)limit, 1), id);
        if ((*next_cursor = strdup(cur)) == NULL) {
            json_decref(out);
            out = NULL;
        }
    }
    if (out == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
out:
    PQclear(r);
    return out;
}
