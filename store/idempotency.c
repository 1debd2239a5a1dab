/* SQL of the idempotency keys; see idempotency.h. */
#include "store/idempotency.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db.h"

void evd_store_idem_clear(struct evd_store_idem *k)
{
    free(k->fingerprint);
    free(k->location);
    free(k->content_type);
    free(k->body);
    memset(k, 0, sizeof(*k));
}

static char *column(PGresult *r, int col)
{
    return PQgetisnull(r, 0, col) ? NULL : strdup(PQgetvalue(r, 0, col));
}

static const char SQL_CLAIM[] =
    "SELECT claimed, fingerprint, status, location, content_type, body"
    " FROM evald_idempotency_claim($1, $2, $3, $4)";

enum evd_code evd_store_idem_claim(PGconn *c, const char *scope, const char *key,
                                   const char *fingerprint, long stale_ms,
                                   struct evd_store_idem *out, struct evd_err *err)
{
    memset(out, 0, sizeof(*out));
    char stale[24];
    snprintf(stale, sizeof(stale), "%ld", stale_ms);
    const char *p[] = {scope, key, fingerprint, stale};
    PGresult *r = evd_db_query(c, SQL_CLAIM, 4, p, err);
    if (r == NULL)
        return err ? err->code : EVD_EDB;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return EVD_OK; /* found stays false */
    }
    out->found = true;
    out->claimed = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    out->fingerprint = column(r, 1);
    out->status = PQgetisnull(r, 0, 2) ? 0 : atoi(PQgetvalue(r, 0, 2));
    out->location = column(r, 3);
    out->content_type = column(r, 4);
    out->body = column(r, 5);
    PQclear(r);
    if (out->fingerprint == NULL) {
        evd_store_idem_clear(out);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    return EVD_OK;
}

static const char SQL_ANSWER[] =
    "UPDATE idempotency_keys SET status = $3, location = $4, content_type = $5, body = $6"
    " WHERE scope = $1 AND key = $2";

enum evd_code evd_store_idem_answer(PGconn *c, const char *scope, const char *key, int status,
                                    const char *location, const char *content_type,
                                    const char *body, struct evd_err *err)
{
    char st[16];
    snprintf(st, sizeof(st), "%d", status);
    const char *p[] = {scope, key, st, location, content_type, body};
    return evd_db_exec(c, SQL_ANSWER, 6, p, err);
}

static const char SQL_FORGET[] = "DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2";

enum evd_code evd_store_idem_forget(PGconn *c, const char *scope, const char *key,
                                    struct evd_err *err)
{
    const char *p[] = {scope, key};
    return evd_db_exec(c, SQL_FORGET, 2, p, err);
}
