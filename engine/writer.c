/*
 * The writer thread: it writes the outcomes of finished runs, several in one transaction
 * (evald_finish_runs), so that a worker hands its outcome over and claims its next run at
 * once instead of waiting for its own write and commit. A worker has at most one write
 * outstanding, and waits for it only when it finds nothing to claim (its own write may be
 * what enqueues its evaluation's next run). A failed batch writes nothing: its runs keep
 * their leases until they expire and run again, as after a crash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "engine/internal.h"
#include "store/db.h"

/* Runs written in one transaction at most. */
#define BATCH_MAX 64

bool evd_engine_wait_written(struct evd_engine *e, bool *outstanding)
{
    pthread_mutex_lock(&e->writes_mu);
    bool was = *outstanding;
    while (*outstanding)
        pthread_cond_wait(&e->written_cv, &e->writes_mu);
    pthread_mutex_unlock(&e->writes_mu);
    return was;
}

void evd_engine_write_later(struct evd_engine *e, char *text, const char *evaluation_id,
                            const char *status, bool *outstanding)
{
    struct pending_write *w = calloc(1, sizeof(*w));
    evd_engine_wait_written(e, outstanding);
    if (w == NULL) {
        free(text);
        evd_log(EVD_LOG_WARN, "could not queue a finished run; it runs again", "evaluation_id",
                evaluation_id, NULL);
        return;
    }
    w->text = text;
    snprintf(w->evaluation_id, sizeof(w->evaluation_id), "%s", evaluation_id);
    snprintf(w->status, sizeof(w->status), "%s", status ? status : "");
    w->outstanding = outstanding;
    pthread_mutex_lock(&e->writes_mu);
    *outstanding = true;
    if (e->writes_tail != NULL)
        e->writes_tail->next = w;
    else
        e->writes_head = w;
    e->writes_tail = w;
    pthread_cond_signal(&e->writes_cv);
    pthread_mutex_unlock(&e->writes_mu);
}

/* Writes one batch; when it cannot, nothing of it is written (and it is logged). */
static void write_batch(struct evd_engine *e, PGconn *c, struct pending_write **batch, size_t n)
{
    struct evd_buf array = {0};
    int results[BATCH_MAX];
    int64_t left[BATCH_MAX];
    int rc = evd_buf_append(&array, "[", 1);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = (i > 0 ? evd_buf_append(&array, ",", 1) : 0) ||
             evd_buf_append(&array, batch[i]->text, strlen(batch[i]->text));
    if (rc == 0)
        rc = evd_buf_append(&array, "]", 1);
    struct evd_err err = {0};
    if (rc != 0 || evd_store_runs_finish_batch(c, array.data, evd_now_ms(), e->owner, n, results,
                                               left, &err) != EVD_OK) {
        evd_log(EVD_LOG_WARN, "could not record runs; they run again", "error",
                rc != 0 ? "out of memory" : err.msg, NULL);
        evd_buf_free(&array);
        return;
    }
    evd_buf_free(&array);
    long enqueued = 0;
    for (size_t i = 0; i < n; i++)
        enqueued += results[i] > 0 ? results[i] : 0;
    evd_engine_wake(e, enqueued); /* this process's workers, without the keeper's round trip */
    for (size_t i = 0; i < n; i++) {
        if (results[i] == EVD_RUN_NOT_WRITTEN)
            continue;
        evd_metrics_count("evald_runs_finished_total", "status", batch[i]->status, 1);
        if (results[i] == EVD_RUN_ALL_TERMINAL)
            evd_engine_finalize_later(e, batch[i]->evaluation_id);
        if (left[i] > 0) {
            /* A claimer with an older snapshot held its row a moment ago: it is free by
             * now, or soon; this thread may wait for it. */
            char id[32];
            snprintf(id, sizeof(id), "%lld", (long long)left[i]);
            const char *p[] = {id, e->owner};
            struct evd_err derr = {0};
            evd_db_exec(c, "DELETE FROM jobs WHERE id = $1::bigint AND lease_owner = $2", 2, p,
                        &derr);
        }
    }
}

void *evd_engine_writer_main(void *arg)
{
    struct evd_engine *e = arg;
    PGconn *c = NULL;
    struct pending_write *batch[BATCH_MAX];
    for (;;) {
        size_t n = 0;
        pthread_mutex_lock(&e->writes_mu);
        /* Until the workers are gone: a stopping worker may still hand over its last. */
        while (e->writes_head == NULL && !(atomic_load(&e->stopping) && e->writers_clients == 0))
            pthread_cond_wait(&e->writes_cv, &e->writes_mu);
        while (e->writes_head != NULL && n < BATCH_MAX) {
            batch[n++] = e->writes_head;
            if ((e->writes_head = e->writes_head->next) == NULL)
                e->writes_tail = NULL;
        }
        pthread_mutex_unlock(&e->writes_mu);
        if (n == 0)
            break; /* stopping, the workers gone and every write done */
        struct evd_err err = {0};
        if (c != NULL && !evd_db_ensure(c)) {
            PQfinish(c);
            c = NULL;
        }
        if (c == NULL && (c = evd_db_connect(e->opts.conninfo, &err)) == NULL)
            evd_log(EVD_LOG_WARN, "could not record runs; they run again", "error", err.msg,
                    NULL);
        if (c != NULL)
            write_batch(e, c, batch, n);
        pthread_mutex_lock(&e->writes_mu);
        for (size_t i = 0; i < n; i++) {
            *batch[i]->outstanding = false;
            free(batch[i]->text);
            free(batch[i]);
        }
        pthread_cond_broadcast(&e->written_cv);
        pthread_mutex_unlock(&e->writes_mu);
    }
    PQfinish(c);
    return NULL;
}

void evd_engine_worker_done(struct evd_engine *e, bool *outstanding)
{
    evd_engine_wait_written(e, outstanding);
    pthread_mutex_lock(&e->writes_mu);
    e->writers_clients--;
    pthread_cond_signal(&e->writes_cv);
    pthread_mutex_unlock(&e->writes_mu);
}
