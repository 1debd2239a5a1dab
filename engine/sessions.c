/*
 * Session functions and the comparison (see sessions.h). Each call borrows one pool
 * connection; every write is one transaction that holds the session row lock, so a
 * refused request writes nothing and concurrent calls on one session serialize.
 */
#include "engine/sessions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/prometheus.h"
#include "common/util.h"
#include "domain/compare.h"
#include "domain/request.h"
#include "domain/session.h"
#include "engine/internal.h"
#include "harness/providers.h"
#include "store/db.h"
#include "store/sessions.h"

static bool working(const char *status)
{
    return strcmp(status, "working") == 0;
}

enum evd_code evd_session_create(struct evd_engine *e, json_t *request, json_t **response,
                                 bool *started, struct evd_err *err)
{
    struct evd_session_request req;
    *started = false;
    enum evd_code rc = evd_session_request_decode(request, &req, err);
    if (rc != EVD_OK)
        return rc;
    struct evd_resolved_model resolved;
    rc = evd_providers_resolve(e->opts.providers, json_object_get(req.config, "model"), &resolved,
                               err);
    if (rc != EVD_OK) {
        evd_session_request_clear(&req);
        return rc;
    }
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL) {
        evd_session_request_clear(&req);
        return err ? err->code : EVD_EDB;
    }
    char id[48], turn_id[48];
    evd_new_id("ses_", id, sizeof(id));
    evd_new_id("turn_", turn_id, sizeof(turn_id));
    int64_t now = evd_now_ms();
    if ((rc = evd_db_begin(c, err)) == EVD_OK &&
        (rc = evd_store_session_insert(c, id, req.title, req.config, now, err)) == EVD_OK &&
        (req.prompt == NULL ||
         (rc = evd_store_turn_add(c, id, 1, turn_id, req.prompt, now, err)) == EVD_OK) &&
        (req.prompt == NULL || (rc = evd_store_notify(c, EVD_CHANNEL_JOBS, "", err)) == EVD_OK) &&
        (rc = evd_store_notify(c, EVD_CHANNEL_EVENTS, id, err)) == EVD_OK)
        rc = evd_db_commit(c, err);
    evd_db_rollback(c);
    if (rc == EVD_OK) {
        *started = req.prompt != NULL;
        *response = evd_store_session_view(c, id, NULL, false, err);
        if (*response == NULL)
            rc = err && err->code ? err->code : EVD_EDB;
        evd_metrics_count("evald_sessions_started_total", NULL, NULL, 1);
        evd_log(EVD_LOG_INFO, "session created", "session_id", id, "turn_id",
                *started ? turn_id : NULL, NULL);
    }
    evd_db_release(e->opts.db, c);
    evd_session_request_clear(&req);
    return rc;
}

enum evd_code evd_session_list(struct evd_engine *e, json_t *request, const char *before,
                               json_t **response, struct evd_err *err)
{
    uint32_t limit = 50;
    enum evd_code rc = evd_request_list(request, &limit, err);
    if (rc != EVD_OK)
        return rc;
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return err ? err->code : EVD_EDB;
    char *next = NULL;
    json_t *list = evd_store_session_list(c, limit, before, &next, err);
    evd_db_release(e->opts.db, c);
    if (list == NULL)
        return err && err->code ? err->code : EVD_EDB;
    *response = json_pack("{s:o}", "sessions", list);
    if (next != NULL)
        json_object_set_new(*response, "next_cursor", json_string(next));
    free(next);
    return EVD_OK;
}

/* The metrics of a session view: the stored sum plus the running turn's snapshot. */
static json_t *live_metrics(const char *id, const json_t *stored, const json_t *turns,
                            bool is_working)
{
    const json_t *last = json_array_get(turns, json_array_size(turns) - 1);
    const json_t *progress = json_object_get(last, "progress");
    const char *st = json_string_value(json_object_get(last, "status"));
    bool running = st != NULL && strcmp(st, "running") == 0 && json_is_object(progress);
    json_t *m = NULL;
    if (running)
        m = evd_session_metrics_add(json_is_object(stored) ? stored : NULL, progress, id, false);
    else if (json_is_object(stored))
        m = json_deep_copy(stored);
    if (m != NULL)
        json_object_set_new(m, "complete", json_boolean(!is_working));
    return m;
}

enum evd_code evd_session_get(struct evd_engine *e, const char *id, bool messages,
                              json_t **response, struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return err ? err->code : EVD_EDB;
    json_t *turns = NULL;
    struct evd_store_session s = {0};
    enum evd_code rc = EVD_OK;
    json_t *view = evd_store_session_view(c, id, &turns, messages, err);
    if (view == NULL)
        rc = err && err->code ? err->code : EVD_EDB;
    else
        rc = evd_store_session_get(c, id, false, &s, err);
    evd_db_release(e->opts.db, c);
    if (rc == EVD_OK) {
        bool is_working = working(s.status);
        json_t *m = live_metrics(id, s.metrics, turns, is_working);
        json_object_set_new(view, "metrics", m ? m : json_null());
        if (messages) {
            json_t *msgs = evd_session_messages(turns);
            if (msgs == NULL)
                rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
            else
                json_object_set_new(view, "messages", msgs);
        }
    }
    if (rc == EVD_OK) {
        *response = view;
        view = NULL;
    }
    json_decref(view);
    json_decref(turns);
    evd_store_session_clear(&s);
    return rc;
}

enum evd_code evd_session_send(struct evd_engine *e, const char *id, json_t *request,
                               json_t **response, struct evd_err *err)
{
    const char *content = NULL;
    enum evd_code rc = evd_session_message_decode(request, &content, err);
    if (rc != EVD_OK)
        return rc;
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return err ? err->code : EVD_EDB;
    struct evd_store_session s = {0};
    char turn_id[48];
    evd_new_id("turn_", turn_id, sizeof(turn_id));
    int64_t now = evd_now_ms();
    if ((rc = evd_db_begin(c, err)) != EVD_OK ||
        (rc = evd_store_session_get(c, id, true, &s, err)) != EVD_OK)
        goto out;
    if (working(s.status)) {
        rc = evd_err_set(err, EVD_ECONFLICT,
                         "%s is still working; wait for its turn to finish or cancel it", id);
        goto out;
    }
    if ((rc = evd_store_turn_add(c, id, s.turn_count + 1, turn_id, content, now, err)) ||
        (rc = evd_store_notify(c, EVD_CHANNEL_JOBS, "", err)) ||
        (rc = evd_store_notify(c, EVD_CHANNEL_EVENTS, id, err)) || (rc = evd_db_commit(c, err)))
        goto out;
    *response = json_pack("{s:s, s:s, s:s, s:I, s:n, s:n, s:[]}", "turn_id", turn_id, "session_id",
                          id, "status", "queued", "created_at", (json_int_t)now, "started_at",
                          "completed_at", "failures");
    if (*response == NULL)
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
out:
    evd_db_rollback(c);
    evd_db_release(e->opts.db, c);
    evd_store_session_clear(&s);
    return rc;
}

enum evd_code evd_session_cancel(struct evd_engine *e, const char *id, json_t **response,
                                 struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return err ? err->code : EVD_EDB;
    struct evd_store_session s = {0};
    json_t *progress = NULL, *merged = NULL;
    json_t *failure =
        json_pack("{s:s, s:s}", "phase", "cancel", "message", "session turn cancelled");
    int64_t now = evd_now_ms(), started = 0;
    bool found = false;
    enum evd_code rc;
    if ((rc = evd_db_begin(c, err)) != EVD_OK ||
        (rc = evd_store_session_get(c, id, true, &s, err)) != EVD_OK)
        goto out;
    if (!working(s.status)) {
        *response = json_pack("{s:b, s:s}", "cancelled", 0, "status", s.status);
        goto out;
    }
    if ((rc = evd_store_turn_cancel(c, id, failure, now, &found, &progress, &started, err)))
        goto out;
    /* The usage of the turn up to its last snapshot was spent: it counts. */
    if (json_is_object(progress))
        merged = evd_session_metrics_add(s.metrics, progress, id, true);
    if ((rc = evd_store_session_jobs_delete(c, id, err)) ||
        (rc = evd_store_session_after_turn(c, id, "cancelled", merged, NULL,
                                           started > 0 ? now - started : 0, 0, now, err)) ||
        (rc = evd_store_notify(c, EVD_CHANNEL_CANCEL, id, err)) ||
        (rc = evd_store_notify(c, EVD_CHANNEL_EVENTS, id, err)) || (rc = evd_db_commit(c, err)))
        goto out;
    evd_log(EVD_LOG_INFO, "session turn cancelled", "session_id", id, NULL);
    *response = json_pack("{s:b, s:s}", "cancelled", found, "status", "cancelled");
out:
    evd_db_rollback(c);
    evd_db_release(e->opts.db, c);
    evd_store_session_clear(&s);
    json_decref(progress);
    json_decref(merged);
    json_decref(failure);
    return rc;
}

enum evd_code evd_session_delete(struct evd_engine *e, const char *id, json_t **response,
                                 struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return err ? err->code : EVD_EDB;
    struct evd_store_session s = {0};
    bool deleted = false;
    enum evd_code rc;
    if ((rc = evd_db_begin(c, err)) != EVD_OK ||
        (rc = evd_store_session_get(c, id, true, &s, err)) != EVD_OK)
        goto out;
    if (working(s.status)) {
        rc = evd_err_set(err, EVD_ECONFLICT,
                         "%s is still working; cancel it or wait before "
                         "deleting it",
                         id);
        goto out;
    }
    if ((rc = evd_store_session_delete(c, id, &deleted, err)) ||
        (rc = evd_store_notify(c, EVD_CHANNEL_EVENTS, id, err)) || (rc = evd_db_commit(c, err)))
        goto out;
    *response = json_pack("{s:b}", "deleted", deleted);
out:
    evd_db_rollback(c);
    evd_db_release(e->opts.db, c);
    evd_store_session_clear(&s);
    return rc;
}

/* ---- comparison -------------------------------------------------------------------------- */

enum evd_code evd_sessions_compare(struct evd_engine *e, json_t *request, json_t **response,
                                   struct evd_err *err)
{
    struct evd_compare_request req;
    enum evd_code rc = evd_compare_request_decode(request, &req, err);
    if (rc != EVD_OK)
        return rc;
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return err ? err->code : EVD_EDB;
    int64_t now = evd_now_ms();
    json_t *rows = evd_store_compare_read(c, req.ids, req.n, now, err);
    evd_db_release(e->opts.db, c);
    if (rows == NULL)
        return err && err->code ? err->code : EVD_EDB;

    struct evd_compare_source src[EVD_COMPARE_MAX];
    memset(src, 0, sizeof(src));
    for (size_t i = 0; i < req.n && rc == EVD_OK; i++) {
        json_t *row = NULL, *r;
        size_t k;
        json_array_foreach(rows, k, r)
        {
            if (json_integer_value(json_object_get(r, "ord")) == (json_int_t)i + 1)
                row = r;
        }
        if (row == NULL) {
            rc = evd_err_set(err, EVD_ENOTFOUND, "session not found: %s", req.ids[i]);
            break;
        }
        struct evd_compare_source *s = &src[i];
        s->session_id = req.ids[i];
        s->kind = json_string_value(json_object_get(row, "kind"));
        s->title = json_string_value(json_object_get(row, "title"));
        s->session = json_object_get(row, "session");
        s->turn_status = json_string_value(json_object_get(row, "turn_status"));
        s->terminal = s->turn_status == NULL || (strcmp(s->turn_status, "queued") != 0 &&
                                                 strcmp(s->turn_status, "running") != 0);
        s->metrics = json_object_get(row, "metrics");
        s->progress = json_object_get(row, "progress");
        json_t *wall = json_object_get(row, "wall_time_ms");
        s->has_wall_time = json_is_integer(wall);
        s->wall_time_ms = json_integer_value(wall);
    }
    if (rc == EVD_OK) {
        *response = evd_compare_build(src, req.n, req.baseline, now);
        if (*response == NULL)
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory building the comparison");
    }
    json_decref(rows);
    return rc;
}

json_t *evd_sessions_watch_ids(struct evd_engine *e, json_t *request, struct evd_err *err)
{
    struct evd_compare_request req;
    if (evd_compare_request_decode(request, &req, err) != EVD_OK)
        return NULL;
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return NULL;
    json_t *evals = evd_store_compare_evaluations(c, req.ids, req.n, err);
    evd_db_release(e->opts.db, c);
    if (evals == NULL)
        return NULL;
    for (size_t i = 0; i < req.n; i++)
        json_array_append_new(evals, json_string(req.ids[i]));
    return evals;
}
