/* SQL of the iii adapter's delivery records; see iii.h. */
#include "store/iii.h"

#include <stdio.h>
#include <string.h>

#define I64(buf, v) snprintf(buf, sizeof(buf), "%lld", (long long)(v))

static const char SQL_UPSERT_BINDINGS[] =
    "INSERT INTO iii_bindings (binding_id, trigger_type, function_id, evaluation_id,"
    " experiment_id, first_seen_at, last_seen_at)"
    " SELECT x.binding_id, coalesce(x.trigger_type, 'eval::completed'), x.function_id,"
    " x.evaluation_id, x.experiment_id, x.seen_at, $2::bigint"
    " FROM jsonb_to_recordset($1::jsonb)"
    "  AS x(binding_id text, trigger_type text, function_id text, evaluation_id text,"
    "       experiment_id text, seen_at bigint)"
    " ON CONFLICT (binding_id) DO UPDATE SET trigger_type = EXCLUDED.trigger_type,"
    " function_id = EXCLUDED.function_id, evaluation_id = EXCLUDED.evaluation_id,"
    " experiment_id = EXCLUDED.experiment_id, last_seen_at = EXCLUDED.last_seen_at";

enum evd_code evd_store_iii_upsert_bindings(PGconn *c, const char *rows, int64_t now,
                                            struct evd_err *err)
{
    char at[24];
    I64(at, now);
    const char *p[] = {rows, at};
    return evd_db_exec(c, SQL_UPSERT_BINDINGS, 2, p, err);
}

/* eval::completed bindings get evaluation events, eval::experiment::completed bindings
 * experiment events; a filtered binding its subject's event whenever it was recorded, an
 * unfiltered one the events recorded since it was first seen. */
static const char SQL_DUE[] =
    "SELECT e.event_id, b.binding_id, e.payload::text"
    " FROM iii_bindings b JOIN completion_events e"
    "  ON CASE WHEN b.trigger_type = 'eval::experiment::completed' THEN"
    "        e.event_type = 'experiment.completed'"
    "        AND CASE WHEN b.experiment_id IS NULL THEN e.created_at >= b.first_seen_at"
    "                 ELSE e.experiment_id = b.experiment_id END"
    "      ELSE e.event_type = 'evaluation.completed'"
    "        AND CASE WHEN b.evaluation_id IS NULL THEN e.created_at >= b.first_seen_at"
    "                 ELSE e.evaluation_id = b.evaluation_id END END"
    " WHERE b.binding_id IN (SELECT jsonb_array_elements_text($1::jsonb))"
    "  AND e.created_at >= $2::bigint"
    "  AND NOT EXISTS (SELECT 1 FROM iii_deliveries d"
    "                  WHERE d.event_id = e.event_id AND d.binding_id = b.binding_id)"
    " ORDER BY e.created_at, e.event_id, b.binding_id LIMIT $3::int";

enum evd_code evd_store_iii_due(PGconn *c, const char *ids, int64_t since, int limit,
                                evd_store_iii_due_fn fn, void *arg, struct evd_err *err)
{
    char from[24], lim[16];
    I64(from, since);
    snprintf(lim, sizeof(lim), "%d", limit);
    const char *p[] = {ids, from, lim};
    PGresult *r = evd_db_query(c, SQL_DUE, 3, p, err);
    if (r == NULL)
        return evd_db_code(err);
    for (int k = 0; k < PQntuples(r); k++)
        if (!fn(arg, PQgetvalue(r, k, 0), PQgetvalue(r, k, 1), PQgetvalue(r, k, 2)))
            break;
    PQclear(r);
    return EVD_OK;
}

static const char SQL_CLAIM[] = "INSERT INTO iii_deliveries (event_id, binding_id, delivered_at)"
                                " VALUES ($1, $2, $3::bigint) ON CONFLICT DO NOTHING";

enum evd_code evd_store_iii_claim(PGconn *c, const char *event_id, const char *binding_id,
                                  int64_t now, bool *claimed, struct evd_err *err)
{
    char at[24];
    I64(at, now);
    const char *p[] = {event_id, binding_id, at};
    *claimed = false;
    PGresult *r = evd_db_query(c, SQL_CLAIM, 3, p, err);
    if (r == NULL)
        return evd_db_code(err);
    *claimed = strcmp(PQcmdTuples(r), "1") == 0;
    PQclear(r);
    return EVD_OK;
}

static const char SQL_PRUNE_DELIVERIES[] =
    "DELETE FROM iii_deliveries WHERE delivered_at < $1::bigint";
static const char SQL_PRUNE_BINDINGS[] = "DELETE FROM iii_bindings WHERE last_seen_at < $1::bigint";

enum evd_code evd_store_iii_prune(PGconn *c, int64_t before, struct evd_err *err)
{
    char at[24];
    I64(at, before);
    const char *p[] = {at};
    enum evd_code rc = evd_db_exec(c, SQL_PRUNE_DELIVERIES, 1, p, err);
    if (rc == EVD_OK)
        rc = evd_db_exec(c, SQL_PRUNE_BINDINGS, 1, p, err);
    return rc;
}
