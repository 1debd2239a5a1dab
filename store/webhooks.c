/* SQL of webhook subscriptions, deliveries and attempts; see webhooks.h. */
#include "store/webhooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db.h"
#include "store/events.h"
#include "store/page.h"

#define I64(buf, v) snprintf(buf, sizeof(buf), "%lld", (long long)(v))

/* Advisory lock between subscription inserts (shared) and the fan-out (exclusive);
 * "evald" + 1 in ASCII digits, distinct from the migration lock. */
#define FANOUT_LOCK_KEY "435921904741"

/* Parses column 0 of every row as JSON into a new array. */
static json_t *json_rows(PGresult *r, int max, struct evd_err *err)
{
    json_t *out = json_array();
    int n = PQntuples(r);
    for (int i = 0; out && i < n && i < max; i++) {
        json_t *v = json_loads(PQgetvalue(r, i, 0), 0, NULL);
        if (v == NULL || json_array_append_new(out, v) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    if (out == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    return out;
}

static const char SUB_JSON[] =
    "jsonb_build_object('subscription_id', id, 'url', url, 'evaluation_id', evaluation_id,"
    " 'events', to_jsonb(events), 'created_at', created_at)::text";

enum evd_code evd_store_sub_insert(PGconn *c, const char *id, const char *url,
                                   const char *evaluation_id, const char *events,
                                   const char *secret_sealed, int64_t now, json_t **out,
                                   struct evd_err *err)
{
    *out = NULL;
    enum evd_code rc =
        evd_db_exec(c, "SELECT pg_advisory_xact_lock_shared(" FANOUT_LOCK_KEY ")", 0, NULL, err);
    if (rc != EVD_OK)
        return rc;
    char ts[32], sql[1024];
    I64(ts, now);
    snprintf(sql, sizeof(sql),
             "INSERT INTO subscriptions (id, url, evaluation_id, events, secret_sealed, seq,"
             " created_at)"
             " VALUES ($1, $2, $3, coalesce((SELECT array_agg(x ORDER BY n)"
             "  FROM jsonb_array_elements_text($6::jsonb) WITH ORDINALITY AS t(x, n)),"
             " '{" EVD_EVENT_EVALUATION "}'), $4, nextval('webhook_seq'), $5::bigint)"
             " RETURNING %s",
             SUB_JSON);
    const char *p[] = {id, url, evaluation_id, secret_sealed, ts, events};
    PGresult *r = evd_db_query(c, sql, 6, p, err);
    if (r == NULL)
        return evd_db_code(err);
    *out = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
    PQclear(r);
    return *out ? EVD_OK : evd_err_set(err, EVD_ENOMEM, "out of memory");
}

json_t *evd_store_sub_list(PGconn *c, struct evd_err *err)
{
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT %s FROM subscriptions ORDER BY created_at DESC, id DESC",
             SUB_JSON);
    PGresult *r = evd_db_query(c, sql, 0, NULL, err);
    if (r == NULL)
        return NULL;
    json_t *out = json_rows(r, PQntuples(r), err);
    PQclear(r);
    return out;
}

json_t *evd_store_sub_get(PGconn *c, const char *id, struct evd_err *err)
{
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT %s FROM subscriptions WHERE id = $1", SUB_JSON);
    const char *p[] = {id};
    PGresult *r = evd_db_query(c, sql, 1, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = NULL;
    if (PQntuples(r) == 0)
        evd_err_set(err, EVD_ENOTFOUND, "subscription not found: %s", id);
    else if ((out = json_loads(PQgetvalue(r, 0, 0), 0, NULL)) == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    PQclear(r);
    return out;
}

enum evd_code evd_store_sub_delete(PGconn *c, const char *id, bool *deleted, struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(c, "DELETE FROM subscriptions WHERE id = $1", 1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    *deleted = atoi(PQcmdTuples(r)) == 1;
    PQclear(r);
    return EVD_OK;
}

static const char SQL_DELIVERIES[] =
    "SELECT jsonb_build_object("
    " 'delivery_id', d.id, 'subscription_id', d.subscription_id, 'event_id', d.event_id,"
    " 'event_type', d.event_type, 'evaluation_id', d.evaluation_id,"
    " 'experiment_id', d.experiment_id, 'status', d.status, 'attempts', d.attempts,"
    " 'created_at', d.created_at, 'last_attempt_at', d.last_attempt_at,"
    " 'next_attempt_at', CASE WHEN d.status = 'pending'"
    "   THEN (extract(epoch FROM greatest(d.next_attempt_at, d.lease_until)) * 1000)::bigint END,"
    " 'delivered_at', d.delivered_at, 'last_status_code', d.last_status_code,"
    " 'last_error', d.last_error,"
    " 'attempt_log', coalesce((SELECT jsonb_agg(jsonb_build_object("
    "     'attempt', a.attempt, 'started_at', a.started_at, 'duration_ms', a.duration_ms,"
    "     'status_code', a.status_code, 'error', a.error) ORDER BY a.attempt)"
    "   FROM webhook_attempts a WHERE a.delivery_id = d.id), '[]'::jsonb))::text,"
    " d.created_at, d.id"
    " FROM webhook_deliveries d WHERE d.subscription_id = $1"
    " AND ($3::bigint IS NULL OR (d.created_at, d.id) < ($3::bigint, $4))"
    " ORDER BY d.created_at DESC, d.id DESC LIMIT $2::int + 1";

json_t *evd_store_deliveries(PGconn *c, const char *subscription_id, unsigned limit,
                             const char *before, char **next_cursor, struct evd_err *err)
{
    struct evd_store_page pg;
    *next_cursor = NULL;
    if (evd_store_page_open(&pg, limit, before, err) != EVD_OK)
        return NULL;
    const char *p[] = {subscription_id, pg.lim, pg.ts, pg.id};
    PGresult *r = evd_db_query(c, SQL_DELIVERIES, 4, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = evd_store_page_rows(r, limit, next_cursor, err);
    PQclear(r);
    return out;
}

/* The batch of pending events, the deliveries they make (subscriptions created before
 * the event that asked for its type; an evaluation filter matches only that evaluation's
 * event, so never an experiment's), and the events marked done, in one statement. */
static const char SQL_FANOUT[] =
    "WITH ev AS ("
    "  SELECT event_id, event_type, evaluation_id, experiment_id, webhook_seq"
    "  FROM completion_events"
    "  WHERE webhooks_pending ORDER BY webhook_seq LIMIT $1::int),"
    " ins AS ("
    "  INSERT INTO webhook_deliveries (id, subscription_id, event_id, event_type, evaluation_id,"
    "   experiment_id, created_at, next_attempt_at)"
    "  SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), s.id, ev.event_id,"
    "   ev.event_type, ev.evaluation_id, ev.experiment_id, $2::bigint, now()"
    "  FROM ev JOIN subscriptions s ON s.seq < ev.webhook_seq"
    "   AND ev.event_type = ANY (s.events)"
    "   AND (s.evaluation_id IS NULL OR s.evaluation_id = ev.evaluation_id)"
    "  ON CONFLICT (event_id, subscription_id) DO NOTHING RETURNING 1),"
    " done AS ("
    "  UPDATE completion_events c SET webhooks_pending = false FROM ev"
    "  WHERE c.event_id = ev.event_id RETURNING 1)"
    " SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM ins)";

enum evd_code evd_store_webhook_fanout(PGconn *c, int batch, int64_t now, long *events,
                                       long *deliveries, struct evd_err *err)
{
    *events = *deliveries = 0;
    enum evd_code rc =
        evd_db_exec(c, "SELECT pg_advisory_xact_lock(" FANOUT_LOCK_KEY ")", 0, NULL, err);
    if (rc != EVD_OK)
        return rc;
    char b[16], ts[32];
    I64(b, batch);
    I64(ts, now);
    const char *p[] = {b, ts};
    PGresult *r = evd_db_query(c, SQL_FANOUT, 2, p, err);
    if (r == NULL)
        return evd_db_code(err);
    *events = atol(PQgetvalue(r, 0, 0));
    *deliveries = atol(PQgetvalue(r, 0, 1));
    PQclear(r);
    return EVD_OK;
}

void evd_store_delivery_clear(struct evd_store_delivery *d)
{
    free(d->url);
    free(d->secret_sealed);
    free(d->payload);
    memset(d, 0, sizeof(*d));
}

static const char SQL_CLAIM[] =
    "UPDATE webhook_deliveries d SET lease_owner = $1,"
    " lease_until = now() + $2::bigint * interval '1 millisecond', attempts = d.attempts + 1"
    " FROM subscriptions s, completion_events e"
    " WHERE d.id = (SELECT q.id FROM webhook_deliveries q"
    "   WHERE q.status = 'pending' AND q.next_attempt_at <= now()"
    "   AND (q.lease_until IS NULL OR q.lease_until < now())"
    "   AND (SELECT count(*) FROM webhook_deliveries f"
    "     WHERE f.subscription_id = q.subscription_id AND f.status = 'pending'"
    "     AND f.lease_until >= now()) < $3::int"
    "   ORDER BY q.next_attempt_at LIMIT 1 FOR UPDATE OF q SKIP LOCKED)"
    " AND s.id = d.subscription_id AND e.event_id = d.event_id"
    " RETURNING d.id, d.event_id, d.evaluation_id, d.subscription_id, s.url, s.secret_sealed,"
    " e.payload::text, d.attempts, d.created_at, d.event_type, d.experiment_id";

enum evd_code evd_store_delivery_claim(PGconn *c, const char *owner, long lease_ms,
                                       int per_subscription, struct evd_store_delivery *out,
                                       bool *found, struct evd_err *err)
{
    memset(out, 0, sizeof(*out));
    *found = false;
    char lease[24], cap[16];
    I64(lease, lease_ms);
    I64(cap, per_subscription);
    const char *p[] = {owner, lease, cap};
    PGresult *r = evd_db_query(c, SQL_CLAIM, 3, p, err);
    if (r == NULL)
        return evd_db_code(err);
    if (PQntuples(r) == 1) {
        snprintf(out->id, sizeof(out->id), "%s", PQgetvalue(r, 0, 0));
        snprintf(out->event_id, sizeof(out->event_id), "%s", PQgetvalue(r, 0, 1));
        snprintf(out->evaluation_id, sizeof(out->evaluation_id), "%s", PQgetvalue(r, 0, 2));
        snprintf(out->subscription_id, sizeof(out->subscription_id), "%s", PQgetvalue(r, 0, 3));
        out->url = strdup(PQgetvalue(r, 0, 4));
        out->secret_sealed = strdup(PQgetvalue(r, 0, 5));
        out->payload = strdup(PQgetvalue(r, 0, 6));
        out->attempt = atoi(PQgetvalue(r, 0, 7));
        out->created_at = strtoll(PQgetvalue(r, 0, 8), NULL, 10);
        snprintf(out->event_type, sizeof(out->event_type), "%s", PQgetvalue(r, 0, 9));
        snprintf(out->experiment_id, sizeof(out->experiment_id), "%s", PQgetvalue(r, 0, 10));
        *found = true;
    }
    PQclear(r);
    if (*found && (!out->url || !out->secret_sealed || !out->payload)) {
        /* The lease runs out and another attempt follows. */
        evd_store_delivery_clear(out);
        *found = false;
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    return EVD_OK;
}

static const char SQL_RECORD[] =
    "WITH d AS ("
    "  UPDATE webhook_deliveries SET status = $4, last_attempt_at = $5::bigint,"
    "   last_status_code = $6::int, last_error = $7,"
    "   delivered_at = CASE WHEN $4 = 'delivered' THEN $8::bigint END,"
    "   next_attempt_at = CASE WHEN $4 = 'pending'"
    "    THEN now() + $9::bigint * interval '1 millisecond' END,"
    "   lease_owner = NULL, lease_until = NULL"
    "  WHERE id = $1 AND lease_owner = $2 AND attempts = $3::int RETURNING id)"
    " INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status_code,"
    "  error)"
    " SELECT id, $3::int, $5::bigint, $10::int, $6::int, $7 FROM d";

enum evd_code evd_store_delivery_record(PGconn *c, const struct evd_store_delivery *d,
                                        const char *owner, const struct evd_store_attempt *a,
                                        struct evd_err *err)
{
    char attempt[16], started[32], code[16], finished[32], retry[32], dur[24];
    I64(attempt, d->attempt);
    I64(started, a->started_at);
    I64(code, a->status_code);
    I64(finished, a->finished_at);
    I64(retry, a->retry_in_ms);
    I64(dur, a->duration_ms);
    const char *p[] = {
        d->id,    owner,    attempt, a->status, started, a->status_code > 0 ? code : NULL,
        a->error, finished, retry,   dur};
    return evd_db_exec(c, SQL_RECORD, 10, p, err);
}

enum evd_code evd_store_delivery_release(PGconn *c, const struct evd_store_delivery *d,
                                         const char *owner, struct evd_err *err)
{
    char attempt[16];
    I64(attempt, d->attempt);
    const char *p[] = {d->id, owner, attempt};
    return evd_db_exec(c,
                       "UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL,"
                       " attempts = attempts - 1"
                       " WHERE id = $1 AND lease_owner = $2 AND attempts = $3::int",
                       3, p, err);
}

static const char SQL_IDLE[] =
    "SELECT EXISTS (SELECT 1 FROM completion_events WHERE webhooks_pending),"
    " (SELECT greatest(0, ceil(extract(epoch FROM"
    "   min(greatest(q.next_attempt_at, q.lease_until)) - now()) * 1000))::bigint"
    "  FROM webhook_deliveries q WHERE q.status = 'pending'"
    "  AND (q.lease_until >= now() OR (SELECT count(*) FROM webhook_deliveries f"
    "    WHERE f.subscription_id = q.subscription_id AND f.status = 'pending'"
    "    AND f.lease_until >= now()) < $1::int))";

enum evd_code evd_store_webhook_idle(PGconn *c, int per_subscription, bool *events_pending,
                                     long *next_due_ms, struct evd_err *err)
{
    *events_pending = false;
    *next_due_ms = -1;
    char cap[16];
    I64(cap, per_subscription);
    const char *p[] = {cap};
    PGresult *r = evd_db_query(c, SQL_IDLE, 1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    *events_pending = PQgetvalue(r, 0, 0)[0] == 't';
    if (!PQgetisnull(r, 0, 1))
        *next_due_ms = atol(PQgetvalue(r, 0, 1));
    PQclear(r);
    return EVD_OK;
}
