/*
 * The eval functions on top of the store and the domain. Each takes a pool
 * connection for its duration; writes happen in one transaction holding the
 * evaluation's row lock, so a refused request writes nothing and concurrent calls
 * on one evaluation serialize.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/prometheus.h"
#include "common/util.h"
#include "domain/evaluators.h"
#include "domain/plan.h"
#include "domain/report.h"
#include "domain/request.h"
#include "engine/internal.h"
#include "harness/providers.h"
#include "schema/structured.h"
#include "store/db.h"
#include "store/tools.h"

#define WITH_CONN(e, c, err)                                                                       \
    PGconn *c = evd_db_acquire((e)->opts.db, (err));                                               \
    if (c == NULL)                                                                                 \
    return (err) ? (err)->code : EVD_EDB

/* "running" → "Running", as the contract's conflict messages print statuses. */
static void capitalized(const char *status, char *out, size_t n)
{
    snprintf(out, n, "%s", status);
    if (out[0] >= 'a' && out[0] <= 'z')
        out[0] = (char)(out[0] - 'a' + 'A');
}

/*
 * Rejects an evaluator that nothing can run: a built-in, the agent review (whose arguments
 * are checked now), a registered tool, or, when the iii adapter is configured, any
 * function of the iii engine (whose workers come and go, so it is looked up when the run
 * is scored).
 */
enum evd_code evd_engine_check_evaluator(struct evd_engine *e, PGconn *c, const json_t *ev,
                                        struct evd_err *err)
{
    const char *fid = json_string_value(json_object_get(ev, "function_id"));
    if (fid == NULL || evd_evaluator_is_builtin(fid))
        return EVD_OK;
    if (evd_evaluator_is_agent_review(fid))
        return evd_engine_review_check(e->opts.providers, json_object_get(ev, "arguments"), err);
    if (e->opts.remote != NULL)
        return EVD_OK;
    struct evd_tool tool;
    PGconn *own = c == NULL ? evd_db_acquire(e->opts.db, err) : NULL;
    if (c == NULL && own == NULL)
        return err ? err->code : EVD_EDB;
    enum evd_code rc = evd_store_tool_get(c != NULL ? c : own, fid, &tool, err);
    evd_db_release(e->opts.db, own);
    if (rc == EVD_ENOTFOUND)
        return evd_err_set(err, EVD_EINVAL,
                           "evaluator.function_id %s is neither a built-in evaluator "
                           "(eval::assert::exact, eval::assert::normalized_text, "
                           "eval::assert::trajectory, eval::assert::agent_review) nor a "
                           "registered tool",
                           fid);
    evd_store_tool_clear(&tool);
    return rc;
}

/* An output schema that does not compile would fail every run: refuse it at start. */
static enum evd_code check_output(const json_t *output, struct evd_err *err)
{
    json_t *schema = json_object_get(output, "schema");
    if (schema == NULL || json_is_null(schema))
        return EVD_OK;
    struct evd_err cerr = {EVD_OK, ""};
    struct evd_so_contract *c = evd_so_value_new(schema, &cerr);
    if (c != NULL) {
        evd_so_contract_free(c);
        return EVD_OK;
    }
    const char *m = cerr.msg;
    if (strncmp(m, "output schema: ", 15) == 0)
        m += 15;
    return evd_err_set(err, cerr.code, "output.schema: %s", m);
}

/* The checks of a normalized request that need no database: its model resolves and its
 * output contract fits the provider. Fills *view. */
static enum evd_code prepare(struct evd_engine *e, const json_t *normalized,
                             struct evd_request_view *view, struct evd_err *err)
{
    enum evd_code rc = evd_request_view_trusted(normalized, view, err);
    if (rc != EVD_OK)
        return rc;
    struct evd_resolved_model resolved;
    if ((rc = evd_providers_resolve(e->opts.providers, (json_t *)view->model, &resolved, err)))
        return rc;
    return check_output(view->output, err);
}

enum evd_code evd_engine_check_start(struct evd_engine *e, PGconn *c, const json_t *model,
                                     const json_t *output, const json_t *evaluator,
                                     struct evd_err *err)
{
    struct evd_resolved_model resolved;
    enum evd_code rc;
    if ((rc = evd_providers_resolve(e->opts.providers, (json_t *)model, &resolved, err)) ||
        (rc = check_output(output, err)))
        return rc;
    return evaluator != NULL ? evd_engine_check_evaluator(e, c, evaluator, err) : EVD_OK;
}

/* A start on its way through the starter: who gets the answer. */
struct start_call {
    char id[48];
    char source_id[64];
    evd_eval_started_fn done;
    void *arg;
};

/* The starter's answer (evd_engine_created_fn): the start's response, or its error. */
static void created(void *arg, enum evd_code rc, int enqueued, const struct evd_err *err)
{
    (void)enqueued;
    struct start_call *s = arg;
    json_t *response = NULL;
    if (rc == EVD_OK) {
        evd_metrics_count("evald_evaluations_started_total", NULL, NULL, 1);
        evd_log(EVD_LOG_INFO, "evaluation started", "evaluation_id", s->id,
                "source_evaluation_id", s->source_id[0] ? s->source_id : NULL, NULL);
        response = json_pack("{s:s, s:s}", "evaluation_id", s->id, "status", "queued");
    }
    struct evd_err nomem = {0};
    if (rc == EVD_OK && response == NULL) {
        rc = evd_err_set(&nomem, EVD_ENOMEM, "out of memory");
        err = &nomem;
    }
    s->done(s->arg, rc, response, err);
    free(s);
}

/* Creates the evaluation of a normalized, checked request through the starter (its batch
 * claims the first runs for idle workers; engine/starter.c), which answers `done`. Holds
 * no connection. Steals `normalized`: the starter's thread owns it from here (view, which
 * points into it, is not used after), so that no json_t is seen by two threads. Returns
 * EVD_OK when the start is on its way (done will be called), else the error, and done is
 * not called. */
static enum evd_code create(struct evd_engine *e, json_t *normalized,
                            const struct evd_request_view *view, uint32_t concurrency,
                            const char *source_id, evd_eval_started_fn done, void *arg,
                            struct evd_err *err)
{
    struct start_call *s = calloc(1, sizeof(*s));
    json_t *runs = NULL;
    if (s != NULL) {
        evd_new_id("eval_", s->id, sizeof(s->id));
        runs = evd_plan_build(s->id, view->runs, view->order);
    }
    if (runs == NULL) {
        free(s);
        json_decref(normalized);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    snprintf(s->source_id, sizeof(s->source_id), "%s", source_id ? source_id : "");
    s->done = done;
    s->arg = arg;
    const struct evd_store_new_eval item = {s->id, normalized, (int)concurrency, runs, source_id};
    evd_engine_create_later(e, &item, created, s);
    return EVD_OK;
}

/* A caller that waits for its start's answer (evd_eval_start, evd_eval_rerun). */
struct start_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    enum evd_code rc;
    json_t *response;
    struct evd_err err;
};

static void start_waited(void *arg, enum evd_code rc, json_t *response, const struct evd_err *err)
{
    struct start_wait *w = arg;
    pthread_mutex_lock(&w->mu);
    w->rc = rc;
    w->response = response;
    if (rc != EVD_OK && err != NULL)
        w->err = *err;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* create(), waiting for the answer; steals `normalized` as create() does. */
static enum evd_code create_wait(struct evd_engine *e, json_t *normalized,
                                 const struct evd_request_view *view, uint32_t concurrency,
                                 const char *source_id, json_t **response, struct evd_err *err)
{
    struct start_wait w = {.done = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    enum evd_code rc =
        create(e, normalized, view, concurrency, source_id, start_waited, &w, err);
    if (rc == EVD_OK) {
        pthread_mutex_lock(&w.mu);
        while (!w.done)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        rc = w.rc;
        if (rc == EVD_OK)
            *response = w.response;
        else if (err != NULL)
            *err = w.err;
    }
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}

/* The checks of a start (evd_request_start, prepare, the evaluator): *normalized (new
 * reference) and *view on EVD_OK. */
static enum evd_code check_start(struct evd_engine *e, json_t *request, json_t **normalized,
                                 struct evd_request_view *view, uint32_t *concurrency,
                                 struct evd_err *err)
{
    *normalized = NULL;
    enum evd_code rc =
        evd_request_start(request, (uint32_t)e->opts.max_runs, normalized, concurrency, err);
    if (rc == EVD_OK)
        rc = prepare(e, *normalized, view, err);
    if (rc == EVD_OK)
        rc = evd_engine_check_evaluator(e, NULL, json_object_get(*normalized, "evaluator"), err);
    if (rc != EVD_OK) {
        json_decref(*normalized);
        *normalized = NULL;
    }
    return rc;
}

enum evd_code evd_eval_start(struct evd_engine *e, json_t *request, json_t **response,
                             struct evd_err *err)
{
    json_t *normalized = NULL;
    uint32_t concurrency = 1;
    struct evd_request_view view;
    enum evd_code rc = check_start(e, request, &normalized, &view, &concurrency, err);
    if (rc == EVD_OK)
        rc = create_wait(e, normalized, &view, concurrency, NULL, response, err);
    return rc;
}

enum evd_code evd_eval_start_async(struct evd_engine *e, json_t *request, evd_eval_started_fn done,
                                   void *arg, struct evd_err *err)
{
    json_t *normalized = NULL;
    uint32_t concurrency = 1;
    struct evd_request_view view;
    enum evd_code rc = check_start(e, request, &normalized, &view, &concurrency, err);
    if (rc == EVD_OK)
        rc = create(e, normalized, &view, concurrency, NULL, done, arg, err);
    return rc;
}

enum evd_code evd_eval_rerun(struct evd_engine *e, json_t *request, json_t **response,
                             struct evd_err *err)
{
    const char *id = NULL;
    bool reverse = false;
    enum evd_code rc = evd_request_rerun_args(request, &id, &reverse, err);
    if (rc != EVD_OK)
        return rc;
    struct evd_store_eval src = {0};
    json_t *req = NULL;
    struct evd_request_view view;
    {
        WITH_CONN(e, c, err);
        if ((rc = evd_store_eval_get(c, id, false, &src, err)) == EVD_OK) {
            if (!evd_engine_status_terminal(src.status)) {
                char st[16];
                capitalized(src.status, st, sizeof(st));
                rc = evd_err_set(err, EVD_ECONFLICT,
                                 "%s is still %s; rerun it after completion or cancellation", id,
                                 st);
            } else {
                req = evd_request_rerun(src.request, id, reverse);
                rc = req ? prepare(e, req, &view, err)
                         : evd_err_set(err, EVD_ENOMEM, "out of memory");
                if (rc == EVD_OK)
                    rc = evd_engine_check_evaluator(e, c, json_object_get(req, "evaluator"), err);
            }
        }
        evd_db_release(e->opts.db, c);
    }
    if (rc == EVD_OK)
        rc = create_wait(e, req, &view, (uint32_t)src.concurrency, id, response, err);
    else
        json_decref(req);
    evd_store_eval_clear(&src);
    return rc;
}

enum evd_code evd_eval_list(struct evd_engine *e, json_t *request, const char *before, bool extras,
                            json_t **response, struct evd_err *err)
{
    uint32_t limit = 50;
    enum evd_code rc = evd_request_list(request, &limit, err);
    if (rc != EVD_OK)
        return rc;
    WITH_CONN(e, c, err);
    char *next = NULL;
    json_t *list = evd_store_eval_list(c, limit, before, &next, err);
    evd_db_release(e->opts.db, c);
    if (list == NULL)
        return err ? err->code : EVD_EDB;
    *response = json_pack("{s:o}", "evaluations", list);
    if (extras && next != NULL)
        json_object_set_new(*response, "next_cursor", json_string(next));
    free(next);
    return EVD_OK;
}

enum evd_code evd_eval_status(struct evd_engine *e, json_t *request, json_t **response,
                              struct evd_err *err)
{
    const char *id = NULL;
    enum evd_code rc = evd_request_evaluation_id(request, &id, err);
    if (rc != EVD_OK)
        return rc;
    WITH_CONN(e, c, err);
    struct evd_err local = {0};
    json_t *st = evd_store_eval_status(c, id, &local);
    evd_db_release(e->opts.db, c);
    if (st == NULL && local.code != EVD_ENOTFOUND) {
        if (err)
            *err = local;
        return local.code;
    }
    *response = st ? st : json_null();
    return EVD_OK;
}

enum evd_code evd_eval_result(struct evd_engine *e, json_t *request, bool extras, json_t **response,
                              struct evd_err *err)
{
    const char *id = NULL;
    enum evd_code rc = evd_request_evaluation_id(request, &id, err);
    if (rc != EVD_OK)
        return rc;
    WITH_CONN(e, c, err);
    struct evd_store_eval ev;
    json_t *runs = NULL;
    rc = evd_store_eval_get(c, id, false, &ev, err);
    if (rc == EVD_ENOTFOUND) {
        *response = json_null();
        rc = EVD_OK;
        goto out;
    }
    if (rc != EVD_OK)
        goto out;
    /* A finished evaluation's report already holds its progress: its runs (and their
     * decoding) are needed only for the resource's per-run extras. */
    bool from_report = !extras && evd_engine_status_terminal(ev.status) && json_is_object(ev.report);
    if (!from_report)
        runs = evd_store_runs(c, id, extras, err);
    enum evd_eval_status st = EVD_EVAL_QUEUED;
    evd_eval_status_parse(ev.status, &st);
    struct evd_eval_record rec = {
        .evaluation_id = ev.id,
        .status = st,
        .request = ev.request,
        .runs = runs,
        .report = ev.report,
        .created_at = ev.created_at,
        .updated_at = ev.updated_at,
        .completed_at = ev.completed_at,
        .error = ev.error,
        .share = true, /* runs and ev.report are this call's own, unchanged below */
    };
    json_t *out = runs || from_report ? evd_report_result(&rec) : NULL;
    if (out == NULL) {
        rc = err && err->code ? err->code : evd_err_set(err, EVD_ENOMEM, "out of memory");
    } else {
        if (extras) {
            /* The resource representation: identity, timing and per-run detail. */
            json_object_set_new(out, "evaluation_id", json_string(ev.id));
            json_object_set_new(out, "created_at", json_integer(ev.created_at));
            json_object_set_new(out, "updated_at", json_integer(ev.updated_at));
            if (ev.completed_at)
                json_object_set_new(out, "completed_at", json_integer(ev.completed_at));
            json_object_set_new(out, "concurrency", json_integer(ev.concurrency));
            if (ev.source_id[0]) {
                json_object_set_new(out, "source_evaluation_id", json_string(ev.source_id));
                json_object_set_new(out, "derivation",
                                    json_string(ev.rescore ? "rescore" : "rerun"));
            }
            json_t *pruns = json_object_get(json_object_get(out, "progress"), "runs");
            for (size_t i = 0; i < json_array_size(pruns); i++) {
                json_t *src = json_array_get(runs, i), *dst = json_array_get(pruns, i);
                static const char *keys[] = {"attempt", "trace_id", "generations",
                                             "function_calls"};
                for (size_t k = 0; k < 4; k++)
                    if (json_object_get(src, keys[k]))
                        json_object_set(dst, keys[k], json_object_get(src, keys[k]));
            }
        }
        *response = out;
    }
    evd_store_eval_clear(&ev);
out:
    json_decref(runs);
    evd_db_release(e->opts.db, c);
    return rc;
}

enum evd_code evd_eval_cancel(struct evd_engine *e, json_t *request, json_t **response,
                              struct evd_err *err)
{
    const char *id = NULL;
    enum evd_code rc = evd_request_evaluation_id(request, &id, err);
    if (rc != EVD_OK)
        return rc;
    WITH_CONN(e, c, err);
    struct evd_store_eval ev = {0};
    json_t *runs = NULL;
    int64_t now = evd_now_ms();
    if ((rc = evd_db_begin(c, err)) != EVD_OK)
        goto out;
    if ((rc = evd_store_eval_get(c, id, true, &ev, err)) != EVD_OK)
        goto out;
    if (evd_engine_status_terminal(ev.status)) {
        *response = json_pack("{s:b, s:s}", "cancelled", 0, "status", ev.status);
        goto out;
    }
    json_t *failure = json_pack("{s:s, s:s}", "phase", "cancel", "message", "evaluation cancelled");
    rc = evd_store_runs_cancel_open(c, id, failure, now, err);
    json_decref(failure);
    if (rc == EVD_OK)
        rc = evd_store_jobs_delete_eval(c, id, err);
    if (rc == EVD_OK)
        rc = evd_store_eval_touch(c, id, false, now, err);
    if (rc == EVD_OK && (runs = evd_store_runs(c, id, false, err)) == NULL)
        rc = err ? err->code : EVD_EDB;
    if (rc == EVD_OK)
        rc = evd_engine_finalize(c, &ev, runs, "cancelled", now, err);
    if (rc == EVD_OK)
        rc = evd_store_notify(c, EVD_CHANNEL_CANCEL, id, err);
    if (rc == EVD_OK)
        rc = evd_db_commit(c, err);
    if (rc == EVD_OK)
        *response = json_pack("{s:b, s:s}", "cancelled", 1, "status", "cancelled");
out:
    if (rc == EVD_OK && evd_db_in_transaction(c))
        evd_db_commit(c, NULL);
    evd_db_rollback(c);
    json_decref(runs);
    evd_store_eval_clear(&ev);
    evd_db_release(e->opts.db, c);
    return rc;
}

enum evd_code evd_eval_delete(struct evd_engine *e, json_t *request, json_t **response,
                              struct evd_err *err)
{
    const char *id = NULL;
    enum evd_code rc = evd_request_evaluation_id(request, &id, err);
    if (rc != EVD_OK)
        return rc;
    WITH_CONN(e, c, err);
    struct evd_store_eval ev = {0};
    bool deleted = false;
    if ((rc = evd_db_begin(c, err)) != EVD_OK)
        goto out;
    rc = evd_store_eval_get(c, id, true, &ev, err);
    if (rc == EVD_ENOTFOUND) {
        rc = EVD_OK;
    } else if (rc == EVD_OK && !evd_engine_status_terminal(ev.status)) {
        char st[16];
        capitalized(ev.status, st, sizeof(st));
        rc = evd_err_set(err, EVD_ECONFLICT, "%s is still %s; cancel or wait before deleting it",
                         id, st);
    } else if (rc == EVD_OK) {
        rc = evd_store_eval_delete(c, id, &deleted, err);
    }
    if (rc == EVD_OK)
        rc = evd_db_commit(c, err);
    if (rc == EVD_OK)
        *response = json_pack("{s:b}", "deleted", deleted);
out:
    evd_db_rollback(c);
    evd_store_eval_clear(&ev);
    evd_db_release(e->opts.db, c);
    return rc;
}

/* Advances an evaluation if it is live and (when step >= 0) at that step. */
static enum evd_code poke(struct evd_engine *e, const char *id, int64_t step, bool *skipped,
                          char *status, size_t status_len, struct evd_err *err)
{
    WITH_CONN(e, c, err);
    struct evd_store_eval ev = {0};
    enum evd_code rc = evd_db_begin(c, err);
    if (rc == EVD_OK)
        rc = evd_store_eval_get(c, id, true, &ev, err);
    *skipped = true;
    if (rc == EVD_ENOTFOUND) {
        snprintf(status, status_len, "failed");
        rc = EVD_OK;
    } else if (rc == EVD_OK) {
        snprintf(status, status_len, "%s", ev.status);
        if (!evd_engine_status_terminal(ev.status) && (step < 0 || step == ev.step)) {
            rc = evd_engine_advance(c, id, evd_now_ms(), err);
            if (rc == EVD_OK)
                rc = evd_db_commit(c, err);
            *skipped = false;
        }
    }
    evd_db_rollback(c);
    evd_store_eval_clear(&ev);
    evd_db_release(e->opts.db, c);
    return rc;
}

enum evd_code evd_eval_step(struct evd_engine *e, json_t *request, json_t **response,
                            struct evd_err *err)
{
    const char *id = NULL;
    uint64_t step = 0;
    enum evd_code rc = evd_request_step(request, &id, &step, err);
    if (rc != EVD_OK)
        return rc;
    bool skipped = true;
    char status[16];
    if ((rc = poke(e, id, (int64_t)step, &skipped, status, sizeof(status), err)) != EVD_OK)
        return rc;
    *response = json_pack("{s:b, s:s}", "skipped", skipped, "status", status);
    return EVD_OK;
}

enum evd_code evd_eval_wake(struct evd_engine *e, json_t *request, json_t **response,
                            struct evd_err *err)
{
    const char *session = NULL;
    bool terminal = false;
    enum evd_code rc = evd_request_wake(request, &session, &terminal, err);
    if (rc != EVD_OK)
        return rc;
    bool woke = false;
    if (terminal && strncmp(session, "eval_", 5) == 0) {
        char id[64] = "";
        PGconn *c = evd_db_acquire(e->opts.db, err);
        if (c == NULL)
            return err ? err->code : EVD_EDB;
        evd_store_run_eval_of_session(c, session, id, sizeof(id), err);
        evd_db_release(e->opts.db, c);
        if (id[0]) {
            bool skipped = true;
            char status[16];
            if ((rc = poke(e, id, -1, &skipped, status, sizeof(status), err)) != EVD_OK)
                return rc;
            woke = !skipped;
        }
    }
    *response = json_pack("{s:b}", "woke", woke);
    return EVD_OK;
}

enum evd_code evd_eval_sweep(struct evd_engine *e, json_t *request, json_t **response,
                             struct evd_err *err)
{
    enum evd_code rc = evd_request_sweep(request, err);
    if (rc != EVD_OK)
        return rc;
    WITH_CONN(e, c, err);
    long n = evd_engine_sweep_once(e, c);
    evd_db_release(e->opts.db, c);
    *response = json_pack("{s:I}", "swept", (json_int_t)n);
    return EVD_OK;
}

enum evd_code evd_eval_assert(struct evd_engine *e, const char *function_id, json_t *request,
                              json_t **response, struct evd_err *err)
{
    (void)e;
    struct evd_evaluator_input in;
    enum evd_code rc = evd_request_evaluator_input(request, &in, err);
    if (rc != EVD_OK)
        return rc;
    return evd_evaluator_run(function_id, &in, response, err);
}
