/*
 * The step machine. An evaluation advances in the transaction that finished one of
 * its runs (or by a step/sweep/wake call): with its row locked, it either schedules
 * the runs that may start now or, once every run is terminal, builds the report and
 * records the completion event. Scheduling rule: pairs run in plan order; at most
 * `concurrency` unfinished pairs are open at once; inside a pair the second run
 * starts only after the first is terminal. With concurrency 1 this is exactly the
 * reference's strictly sequential order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/prometheus.h"
#include "domain/plan.h"
#include "domain/report.h"
#include "domain/run.h"
#include "domain/vocab.h"
#include "engine/internal.h"
#include "common/util.h"
#include "store/db.h"

bool evd_engine_status_terminal(const char *status)
{
    return strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0 ||
           strcmp(status, "cancelled") == 0;
}

/* The report of evaluation ev (status `status`, its runs all terminal: `runs`, which it
 * may share) into f (f->report a new reference), or NULL without memory. */
static json_t *build_final(const struct evd_store_eval *ev, json_t *runs, const char *status,
                           int64_t now, struct evd_store_final *f, struct evd_err *err)
{
    enum evd_eval_status st;
    if (!evd_eval_status_parse(status, &st)) {
        evd_err_set(err, EVD_EINTERNAL, "unknown evaluation status %s", status);
        return NULL;
    }
    struct evd_eval_record rec = {
        .evaluation_id = ev->id,
        .status = st,
        .request = ev->request,
        .runs = runs,
        .created_at = ev->created_at,
        .updated_at = now,
        .completed_at = now,
        .error = ev->error,
        .share = true, /* runs is the caller's private copy, dropped after the report */
    };
    json_t *report = evd_report_build(&rec);
    if (report == NULL) {
        evd_err_set(err, EVD_ENOMEM, "could not build the report of %s", ev->id);
        return NULL;
    }
    f->id = ev->id;
    f->status = status;
    f->report = report;
    f->eligible = evd_report_eligible(report);
    /* The completion event carries the report's eligibility, except on cancel, where it
     * is false whatever the report says. */
    f->eligible_event = strcmp(status, "cancelled") == 0 ? 0 : f->eligible;
    return report;
}

/* What follows a committed (or to-be-committed) terminal transition in this process. */
static void finished(const char *id, const char *status)
{
    evd_metrics_count("evald_evaluations_finished_total", "status", status, 1);
    evd_log(EVD_LOG_INFO, "evaluation finished", "evaluation_id", id, "status", status, NULL);
}

enum evd_code evd_engine_finalize(PGconn *c, const struct evd_store_eval *ev, json_t *runs,
                                  const char *status, int64_t now, struct evd_err *err)
{
    struct evd_store_final f;
    json_t *report = build_final(ev, runs, status, now, &f, err);
    if (report == NULL)
        return err && err->code ? err->code : EVD_ENOMEM;
    enum evd_code rc = evd_store_evals_finish(c, &f, 1, now, err);
    json_decref(report);
    if (rc == EVD_OK)
        finished(ev->id, status);
    return rc;
}

/* Runs of an evaluation from which its report's memory is worth trimming. */
#define TRIM_AFTER_RUNS 64

/* Finalizes an evaluation whose runs are all terminal (the only full read of its runs). */
static enum evd_code complete(PGconn *c, const char *evaluation_id, int64_t now,
                              struct evd_err *err)
{
    struct evd_store_eval ev;
    enum evd_code rc = evd_store_eval_get(c, evaluation_id, false, &ev, err);
    if (rc != EVD_OK)
        return rc;
    json_t *runs = evd_store_runs(c, evaluation_id, false, err);
    if (runs == NULL)
        rc = err && err->code ? err->code : EVD_EDB;
    else
        rc = evd_engine_finalize(c, &ev, runs, "completed", now, err);
    size_t n_runs = runs ? json_array_size(runs) : 0;
    json_decref(runs);
    evd_store_eval_clear(&ev);
    /* A report holds every run several times over while it is built (decoded rows, their
     * projection, its text): a large one's freed pages go back rather than stay in the
     * arena. Not a small one's: glibc's trim walks every arena of the process, and costs
     * more than a two-run evaluation's whole report. */
    if (n_runs >= TRIM_AFTER_RUNS)
        evd_memory_trim();
    return rc;
}

enum evd_code evd_engine_advance_state(PGconn *c, const char *evaluation_id,
                                       const struct evd_store_eval_state *st, int64_t now,
                                       struct evd_err *err)
{
    if (evd_engine_status_terminal(st->status))
        return EVD_OK;
    int result = 0;
    enum evd_code rc = evd_store_schedule(c, evaluation_id, st->concurrency, &result, err);
    if (rc == EVD_OK && result == EVD_RUN_ALL_TERMINAL)
        rc = complete(c, evaluation_id, now, err);
    return rc;
}

enum evd_code evd_engine_advance(PGconn *c, const char *evaluation_id, int64_t now,
                                 struct evd_err *err)
{
    struct evd_store_eval_state st;
    enum evd_code rc = evd_store_eval_state(c, evaluation_id, false, &st, err);
    return rc == EVD_OK ? evd_engine_advance_state(c, evaluation_id, &st, now, err) : rc;
}

enum evd_code evd_engine_write_run(PGconn *c, const char *evaluation_id, int position,
                                   int attempt, json_t *run, json_t *transcript, bool *written,
                                   bool *finalize, int64_t now, struct evd_err *err)
{
    int result = EVD_RUN_NOT_WRITTEN;
    int64_t left = 0;
    *written = *finalize = false;
    enum evd_code rc = evd_store_run_finish(c, evaluation_id, position, attempt, run, transcript,
                                            now, &result, &left, err);
    if (rc != EVD_OK || result == EVD_RUN_NOT_WRITTEN)
        return rc;
    *written = true;
    *finalize = result == EVD_RUN_ALL_TERMINAL;
    evd_metrics_count("evald_runs_finished_total", "status",
                      json_string_value(json_object_get(run, "status")), 1);
    return EVD_OK;
}

/* The finalizer's queue, under the engine's finals_mu and finals_cv (which the stop
 * broadcasts); made with the engine. */
static struct evd_queue *finals(struct evd_engine *e)
{
    return &e->finals;
}

/*
 * Reports are built by the finalizer thread on a connection of its own, one at a time
 * unless a backlog calls in its helper (below). A report holds every run of its evaluation
 * several times over while it is built (decoded rows, their projection, its text), so
 * evaluations finishing together (W1: four of 500 runs) held all of theirs at once, which
 * set the process's peak memory (40 MiB, against 18 while runs execute); libpq never
 * shrinks a connection's buffers, so each worker connection that once read 500 runs and
 * sent their report kept megabytes for good; and a worker that finished an evaluation's
 * last run would wait for the report before it claimed again (W2: 32 evaluations finishing
 * within a few waves). A finalization lost to a crash is the sweeper's: the evaluation is
 * live and has no job.
 */
void evd_engine_finalize_later(struct evd_engine *e, const char *evaluation_id)
{
    char *id = strdup(evaluation_id);
    if (id != NULL && evd_queue_push(finals(e), id))
        return;
    free(id);
    /* A queue closed by the finalizer on its way out: the stop's leftovers are the
     * sweeper's, as a finalization lost to a crash is. */
    if (!atomic_load(&e->stopping))
        evd_log(EVD_LOG_WARN, "could not queue a finalization; the sweeper will do it",
                "evaluation_id", evaluation_id, NULL);
}

/* Finalizations done in one transaction at most: evaluations finishing together (a wave
 * of answers, one run each) then share a commit, and its flush to disk, instead of waiting
 * for one each in turn on the finalizer's one connection. */
#define FINALS_MAX 32

static enum evd_code finalize_one(PGconn *c, const char *evaluation_id, struct evd_err *err)
{
    struct evd_store_eval_state st;
    enum evd_code rc = evd_store_eval_state(c, evaluation_id, true, &st, err);
    return rc == EVD_OK ? evd_engine_advance_state(c, evaluation_id, &st, evd_now_ms(), err) : rc;
}

static int cmp_ids(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The runs whose reports the finalizer holds at once: several small evaluations' up to
 * this many, or one evaluation's, whatever its size (the memory rule above). */
#define CHUNK_RUNS 64

/* Reports evs[0..n) (taken, in the open transaction), their runs read with one query,
 * and writes them with one statement. Then trims, after a large report. */
static bool finalize_chunk(PGconn *c, struct evd_store_eval *evs, size_t n, int64_t now,
                           struct evd_err *err)
{
    json_t *runs[FINALS_MAX] = {0};
    json_t *reports[FINALS_MAX] = {0};
    struct evd_store_final finals_[FINALS_MAX];
    const char *ids[FINALS_MAX];
    int largest = 0;
    for (size_t i = 0; i < n; i++) {
        ids[i] = evs[i].id;
        if (evs[i].total_runs > largest)
            largest = evs[i].total_runs;
    }
    bool ok = evd_store_runs_many(c, ids, n, runs, err) == EVD_OK;
    for (size_t i = 0; ok && i < n; i++)
        ok = (reports[i] = build_final(&evs[i], runs[i], "completed", now, &finals_[i], err)) !=
             NULL;
    if (ok)
        ok = evd_store_evals_finish(c, finals_, n, now, err) == EVD_OK;
    for (size_t i = 0; i < n; i++) {
        json_decref(reports[i]);
        json_decref(runs[i]);
    }
    if (largest >= TRIM_AFTER_RUNS) /* as after a large report one by one (complete) */
        evd_memory_trim();
    return ok;
}

/*
 * The usual batch, in a few statements whatever its size: lock the evaluations and take
 * the ones whose runs are all terminal (evald_finalize_take), then, a chunk of them at a
 * time (CHUNK_RUNS), read their runs with one query, build their reports and write them
 * with one statement (evald_finish_evals), all in one transaction. False when that did
 * not happen: nothing of it was written (rolled back), and the caller takes the batch one
 * by one, behind savepoints, so that the evaluation that failed it fails alone.
 */
static bool finalize_fast(PGconn *c, char **ids, size_t n)
{
    struct evd_err err = {0};
    struct evd_store_eval evs[FINALS_MAX];
    size_t taken = 0;
    int64_t now = evd_now_ms();
    bool ok = evd_db_begin(c, &err) == EVD_OK &&
              evd_store_finals_take(c, (const char *const *)ids, n, evs, &taken, &err) == EVD_OK;
    for (size_t i = 0; ok && i < taken;) {
        size_t j = i + 1;
        long runs = evs[i].total_runs;
        while (j < taken && runs + evs[j].total_runs <= CHUNK_RUNS)
            runs += evs[j++].total_runs;
        ok = finalize_chunk(c, evs + i, j - i, now, &err);
        i = j;
    }
    if (ok)
        ok = evd_db_commit(c, &err) == EVD_OK;
    evd_db_rollback(c);
    if (!ok && err.code != EVD_OK)
        evd_log(EVD_LOG_WARN, "could not finalize a batch at once; finalizing one by one",
                "evaluation_id", ids[0], "error", err.msg, NULL);
    for (size_t i = 0; i < taken; i++) {
        if (ok)
            finished(evs[i].id, "completed");
        evd_store_eval_clear(&evs[i]);
    }
    return ok;
}

/* Finalizes ids[0..n) in one transaction, locking their rows in id order (the writer's
 * order, so that the two do not deadlock). Each evaluation goes behind a savepoint, so
 * that one that cannot be finalized holds back no other and undoes only its own work (its
 * report, completion event and notifications); the sweeper has it later. The completion
 * counts and logs of the others are then not made twice, as a retry of the whole batch
 * one by one would make them. */
static void finalize_batch(PGconn *c, char **ids, size_t n)
{
    struct evd_err err = {0};
    qsort(ids, n, sizeof(*ids), cmp_ids);
    if (finalize_fast(c, ids, n))
        return;
    enum evd_code rc = evd_db_begin(c, &err);
    for (size_t i = 0; rc == EVD_OK && i < n; i++) {
        struct evd_err one = {0};
        if ((rc = evd_db_mark(c, &err)) != EVD_OK)
            break;
        if (finalize_one(c, ids[i], &one) != EVD_OK) {
            evd_log(EVD_LOG_WARN, "could not finalize; the sweeper will", "evaluation_id", ids[i],
                    "error", one.msg, NULL);
            rc = evd_db_rollback_to_mark(c, &err);
        }
    }
    if (rc == EVD_OK)
        rc = evd_db_commit(c, &err);
    evd_db_rollback(c);
    if (rc != EVD_OK) /* the connection, most likely: none of the batch is written */
        evd_log(EVD_LOG_WARN, "could not finalize a batch; the sweeper will", "evaluation_id",
                ids[0], "error", err.msg, NULL);
}

/* Takes up to FINALS_MAX queued ids after `first` (when not NULL) into ids; their count. */
static size_t take_batch(struct evd_queue *q, char *first, char **ids)
{
    size_t n = 0;
    if (first != NULL)
        ids[n++] = first;
    while (n < FINALS_MAX && (ids[n] = evd_queue_try_pop(q)) != NULL)
        n++;
    return n;
}

/* Finalizes ids[0..n) on *c (connecting when it must), then frees them. */
static void finalize_taken(struct evd_engine *e, PGconn **c, char **ids, size_t n)
{
    struct evd_err err = {0};
    if (*c != NULL && !evd_db_ensure(*c)) {
        evd_db_finish(*c);
        *c = NULL;
    }
    if (*c == NULL)
        *c = evd_db_connect(e->opts.conninfo, &err);
    if (*c != NULL)
        finalize_batch(*c, ids, n);
    else
        evd_log(EVD_LOG_WARN, "could not finalize; the sweeper will", "evaluation_id", ids[0],
                "error", err.msg, NULL);
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
}

/* Asks the helper in when a full batch still waits after the one just taken. */
static void ask_for_help(struct evd_engine *e)
{
    if (evd_queue_len(finals(e)) < FINALS_MAX)
        return;
    pthread_mutex_lock(&e->finals_mu);
    e->finals_help = true;
    pthread_cond_signal(&e->finals_help_cv);
    pthread_mutex_unlock(&e->finals_mu);
}

void *evd_engine_finalizer_main(void *arg)
{
    struct evd_engine *e = arg;
    struct evd_queue *q = finals(e);
    PGconn *c = NULL;
    char *ids[FINALS_MAX], *first;
    /* Until stopping and nothing is left to finalize. */
    while ((first = evd_queue_pop_wait(q, &e->stopping)) != NULL) {
        size_t n = take_batch(q, first, ids);
        ask_for_help(e);
        finalize_taken(e, &c, ids, n);
    }
    /* What comes after this is the sweeper's (finalize_later frees it). */
    evd_queue_close(q);
    while ((first = evd_queue_try_pop(q)) != NULL)
        free(first);
    evd_db_finish(c);
    return NULL;
}

/*
 * The finalizer's helper: it sleeps until the finalizer, taking a batch, leaves another
 * full one behind, and then takes batches while full ones wait. One finalizer alternates
 * with PostgreSQL, a core at most: 1,024 evaluations that finished within a second (one
 * run each) waited 0.5-1 s for their reports after their last run was written. A few
 * large evaluations finishing together never make a full batch, so their reports are
 * still built one at a time (the memory rule above). At a stop the helper leaves; the
 * finalizer finishes the queue. It connects the first time it is asked.
 */
void *evd_engine_finalizer_helper_main(void *arg)
{
    struct evd_engine *e = arg;
    struct evd_queue *q = finals(e);
    PGconn *c = NULL;
    char *ids[FINALS_MAX];
    for (;;) {
        pthread_mutex_lock(&e->finals_mu);
        while (!e->finals_help && !atomic_load(&e->stopping))
            pthread_cond_wait(&e->finals_help_cv, &e->finals_mu);
        e->finals_help = false;
        pthread_mutex_unlock(&e->finals_mu);
        if (atomic_load(&e->stopping))
            break;
        size_t n;
        while (!atomic_load(&e->stopping) && evd_queue_len(q) >= FINALS_MAX &&
               (n = take_batch(q, NULL, ids)) > 0)
            finalize_taken(e, &c, ids, n);
    }
    evd_db_finish(c);
    return NULL;
}

/* Fails one overdue run in its own transaction. */
static void time_out_run(PGconn *c, const json_t *item, int64_t now)
{
    struct evd_err err = {0};
    const char *id = json_string_value(json_object_get(item, "evaluation_id"));
    int position = (int)json_integer_value(json_object_get(item, "position"));
    int attempt = (int)json_integer_value(json_object_get(item, "attempt"));
    json_int_t timeout_s = json_integer_value(json_object_get(item, "timeout_s"));
    struct evd_store_eval ev;
    json_t *runs = NULL;
    if (evd_db_begin(c, &err) != EVD_OK)
        return;
    if (evd_store_eval_get(c, id, true, &ev, &err) != EVD_OK)
        goto out;
    runs = evd_store_runs(c, id, false, &err);
    json_t *run = runs ? json_array_get(runs, (size_t)position - 1) : NULL;
    if (run == NULL || strcmp(json_string_value(json_object_get(run, "status")) ?: "", "running"))
        goto out_ev;
    char msg[128];
    snprintf(msg, sizeof(msg), "run exceeded %llds wall-clock limit", (long long)timeout_s);
    bool written = false, finalize = false;
    if (evd_run_fail(run, EVD_PHASE_AWAIT, NULL, msg, now) == 0 &&
        evd_engine_write_run(c, id, position, attempt, run, NULL, &written, &finalize, now,
                             &err) == EVD_OK &&
        (!finalize || complete(c, id, now, &err) == EVD_OK) && written) {
        char payload[96];
        snprintf(payload, sizeof(payload), "%s:%d", id, position);
        evd_store_notify(c, EVD_CHANNEL_CANCEL, payload, NULL);
        evd_log(EVD_LOG_WARN, "run timed out", "evaluation_id", id, "run_id",
                json_string_value(json_object_get(run, "run_id")), NULL);
    }
out_ev:
    evd_store_eval_clear(&ev);
out:
    json_decref(runs);
    if (err.code == EVD_OK && evd_db_in_transaction(c))
        evd_db_commit(c, &err);
    evd_db_rollback(c);
}

long evd_engine_sweep_once(struct evd_engine *e, PGconn *c)
{
    (void)e;
    struct evd_err err = {0};
    long acted = 0;
    int64_t now = evd_now_ms();
    json_t *overdue = evd_store_timed_out_runs(c, now, &err);
    size_t i;
    json_t *item;
    json_array_foreach(overdue, i, item)
    {
        time_out_run(c, item, now);
        acted++;
    }
    json_decref(overdue);
    json_t *stalled = evd_store_stalled_evals(c, &err);
    json_array_foreach(stalled, i, item)
    {
        const char *id = json_string_value(item);
        struct evd_store_eval ev;
        if (evd_db_begin(c, &err) != EVD_OK)
            break;
        if (evd_store_eval_get(c, id, true, &ev, &err) == EVD_OK) {
            if (evd_engine_advance(c, id, evd_now_ms(), &err) == EVD_OK)
                acted++;
            evd_store_eval_clear(&ev);
        }
        if (err.code == EVD_OK)
            evd_db_commit(c, &err);
        evd_db_rollback(c);
        err.code = EVD_OK;
    }
    json_decref(stalled);
    return acted;
}
