/*
 * The writer thread: it writes the outcomes of finished runs, several in one transaction
 * (evald_finish_runs), and in the same transaction claims the next job of each worker
 * whose run it wrote (migrations/0015), so that a run costs its worker no transaction of
 * its own: a worker hands its outcome over, waits for the batch, and goes on with the job
 * the batch claimed for it, or, when nothing else was due, waits for work. A worker has
 * at most one write outstanding. A batch that fails (a lost connection, a deadlock, a
 * restart of PostgreSQL) writes and claims nothing and is written again, with a growing
 * pause, outcomes kept in memory: a finished call is never paid for twice because its
 * write failed. Meanwhile the keeper renews the leases of its runs (their in-flight slots
 * stay registered until written); a run whose lease a renewal finds gone (cancelled, or
 * taken over after all) leaves the batch, and at a stop the writer gives up once the
 * leases it can no longer renew run out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/prometheus.h"
#include "common/util.h"
#include "engine/internal.h"
#include "store/db.h"
#include "store/jobs.h"

/* Runs written in one transaction at most. */
#define BATCH_MAX 64

bool evd_engine_wait_written(struct evd_engine *e, struct evd_handover *h)
{
    pthread_mutex_lock(&e->writes_mu);
    bool was = h->outstanding;
    while (h->outstanding)
        pthread_cond_wait(&e->written_cv, &e->writes_mu);
    pthread_mutex_unlock(&e->writes_mu);
    return was;
}

void evd_engine_write_later(struct evd_engine *e, char *text, const char *evaluation_id,
                            const char *status, int slot, struct evd_handover *h)
{
    struct pending_write *w = calloc(1, sizeof(*w));
    evd_engine_wait_written(e, h);
    if (w == NULL) {
        evd_engine_inflight_remove(e, slot);
        free(text);
        evd_log(EVD_LOG_WARN, "could not queue a finished run; it runs again", "evaluation_id",
                evaluation_id, NULL);
        return;
    }
    w->text = text;
    w->slot = slot;
    snprintf(w->evaluation_id, sizeof(w->evaluation_id), "%s", evaluation_id);
    snprintf(w->status, sizeof(w->status), "%s", status ? status : "");
    w->h = h;
    pthread_mutex_lock(&e->writes_mu);
    h->outstanding = true;
    h->next = EVD_NEXT_UNKNOWN;
    pthread_mutex_unlock(&e->writes_mu);
    if (!evd_queue_push(&e->writes, w)) { /* out of memory (the queue closes only later) */
        pthread_mutex_lock(&e->writes_mu);
        h->outstanding = false;
        pthread_mutex_unlock(&e->writes_mu);
        evd_engine_inflight_remove(e, slot);
        free(text);
        free(w);
        evd_log(EVD_LOG_WARN, "could not queue a finished run; it runs again", "evaluation_id",
                evaluation_id, NULL);
    }
}

/*
 * Writes one batch and, in its transaction, claims a job for each of its workers (none
 * once the engine stops: they leave); false when it could not, and then nothing of it is
 * written or claimed. The claims go to the batch's workers in order, the jobs' handovers
 * filled under writes_mu when the batch is done (evd_engine_writer_main); a worker left
 * without one learns that nothing else was due.
 */
static bool write_batch(struct evd_engine *e, PGconn *c, struct pending_write **batch, size_t n)
{
    struct evd_buf array = {0};
    int results[BATCH_MAX];
    int64_t left[BATCH_MAX];
    struct evd_store_claimed claimed[BATCH_MAX];
    bool claiming = !atomic_load(&e->stopping);
    struct evd_store_claims claims = {.n = claiming ? (int)n : 0,
                                      .lease_ms = e->opts.lease_ms,
                                      .max_attempts = EVD_MAX_ATTEMPTS,
                                      .out = claimed};
    int rc = evd_buf_append(&array, "[", 1);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = (i > 0 ? evd_buf_append(&array, ",", 1) : 0) ||
             evd_buf_append(&array, batch[i]->text, strlen(batch[i]->text));
    if (rc == 0)
        rc = evd_buf_append(&array, "]", 1);
    struct evd_err err = {0};
    if (rc != 0 || evd_store_runs_finish_batch(c, array.data, evd_now_ms(), e->owner, n, results,
                                               left, &claims, &err) != EVD_OK) {
        evd_log(EVD_LOG_WARN, "could not record runs; trying again", "error",
                rc != 0 ? "out of memory" : err.msg, NULL);
        evd_buf_free(&array);
        return false;
    }
    evd_buf_free(&array);
    long enqueued = 0;
    for (size_t i = 0; i < n; i++)
        enqueued += results[i] > 0 ? results[i] : 0;
    /* The batch's own workers have their jobs (or know the queue is empty); this process's
     * other workers wake, without the keeper's round trip, for what the batch enqueued
     * beyond what it claimed. Waking one for every job enqueued had two claimers race for
     * each, and one found nothing (W1 of bench/bench.py: 7,093 claims for about 4,000
     * runs, 4,555 once the batch's workers were counted). */
    evd_engine_wake(e, enqueued - (long)(claiming ? claims.got : n));
    pthread_mutex_lock(&e->writes_mu);
    for (size_t i = 0; claiming && i < n; i++) {
        struct evd_handover *h = batch[i]->h;
        h->next = i < claims.got ? EVD_NEXT_JOB : EVD_NEXT_NOTHING;
        if (i < claims.got)
            h->job = claimed[i];
    }
    pthread_mutex_unlock(&e->writes_mu);
    for (size_t i = 0; i < n; i++) {
        if (results[i] == EVD_RUN_NOT_WRITTEN)
            continue;
        evd_metrics_count("evald_runs_finished_total", "status", batch[i]->status, 1);
        if (results[i] == EVD_RUN_ALL_TERMINAL)
            evd_engine_finalize_later(e, batch[i]->evaluation_id);
        if (left[i] > 0) {
            /* A claimer with an older snapshot held its row a moment ago: it is free by
             * now, or soon; this thread may wait for it. */
            struct evd_err derr = {0};
            evd_store_job_delete_owned(c, left[i], e->owner, &derr);
        }
    }
    return true;
}

/* Drops from the batch the runs whose lease is gone; returns how many are left. */
static size_t drop_lost(struct evd_engine *e, struct pending_write **batch, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (evd_engine_inflight_lost(e, batch[i]->slot))
            evd_log(EVD_LOG_WARN, "run's lease lost before its outcome was written",
                    "evaluation_id", batch[i]->evaluation_id, NULL);
        else
            batch[k++] = batch[i];
    }
    return k;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Writes the batch until it is written, its leases are gone, or (stopping) they ran out. */
static void write_until_done(struct evd_engine *e, PGconn **c, struct pending_write *const *all,
                             size_t total)
{
    struct pending_write *batch[BATCH_MAX];
    size_t n = total;
    memcpy(batch, all, n * sizeof(*batch));
    long pause = 100;
    int64_t stop_seen = 0;
    while (n > 0) {
        struct evd_err err = {0};
        if (*c != NULL && !evd_db_ensure(*c)) {
            evd_db_finish(*c);
            *c = NULL;
        }
        if (*c == NULL && (*c = evd_db_connect(e->opts.conninfo, &err)) == NULL)
            evd_log(EVD_LOG_WARN, "could not record runs; trying again", "error", err.msg, NULL);
        if (*c != NULL && write_batch(e, *c, batch, n))
            break;
        if (atomic_load(&e->stopping)) {
            /* Nobody renews the leases any more: once they run out, others run again. */
            if (stop_seen == 0)
                stop_seen = evd_mono_ms();
            else if (evd_mono_ms() - stop_seen > e->opts.lease_ms) {
                evd_log(EVD_LOG_WARN, "could not record runs before the stop; they run again",
                        NULL);
                break;
            }
        }
        pause_ms(pause);
        pause = pause * 2 > 2000 ? 2000 : pause * 2;
        n = drop_lost(e, batch, n);
    }
    for (size_t i = 0; i < total; i++)
        evd_engine_inflight_remove(e, all[i]->slot);
}

void *evd_engine_writer_main(void *arg)
{
    struct evd_engine *e = arg;
    PGconn *c = NULL;
    struct pending_write *batch[BATCH_MAX];
    for (;;) {
        /* Until the workers are gone: a stopping worker may still hand over its last (the
         * last worker out closes the queue). */
        struct pending_write *w = evd_queue_pop_wait(&e->writes, NULL);
        if (w == NULL)
            break; /* stopping, the workers gone and every write done */
        size_t n = 0;
        batch[n++] = w;
        while (n < BATCH_MAX && (w = evd_queue_try_pop(&e->writes)) != NULL)
            batch[n++] = w;
        write_until_done(e, &c, batch, n);
        pthread_mutex_lock(&e->writes_mu);
        for (size_t i = 0; i < n; i++) {
            batch[i]->h->outstanding = false;
            free(batch[i]->text);
            free(batch[i]);
        }
        pthread_cond_broadcast(&e->written_cv);
        pthread_mutex_unlock(&e->writes_mu);
    }
    evd_db_finish(c);
    return NULL;
}

void evd_engine_worker_done(struct evd_engine *e, struct evd_handover *h)
{
    evd_engine_wait_written(e, h);
    pthread_mutex_lock(&e->writes_mu);
    bool last = --e->writers_clients == 0;
    pthread_mutex_unlock(&e->writes_mu);
    if (last) /* workers leave only once the engine stops: nothing more can come */
        evd_queue_close(&e->writes);
}

void evd_engine_pending_write_free(void *item)
{
    struct pending_write *w = item;
    free(w->text);
    free(w);
}
