/*
 * The writer thread: it writes the outcomes of finished runs, several in one transaction
 * (evald_finish_runs_ahead), and in the same transaction starts the next runs of a quick
 * chain ahead for its worker (migrations/0027) and claims the next job of each worker that
 * will have nothing else to do (migrations/0015), so that a run costs its worker no
 * transaction of its own: a worker hands its outcome over and goes on with its runs ahead,
 * or waits for the batch and goes on with the job the batch claimed for it, or, when
 * nothing else was due, waits for work. A worker has at most EVD_AHEAD_MAX + 1 writes
 * outstanding, written in the order it handed them over. A batch that fails (a lost
 * connection, a deadlock, a
 * restart of PostgreSQL) writes and claims nothing and is written again, with a growing
 * pause, outcomes kept in memory: a finished call is never paid for twice because its
 * write failed. Meanwhile the keeper renews the leases of its runs (their in-flight slots
 * stay registered until written); a run whose lease a renewal finds gone (cancelled, or
 * taken over after all) leaves the batch, and at a stop the writer gives up once the
 * leases it can no longer renew run out. A batch of quick chains' runs waits a moment for
 * more while each of their workers still has runs ahead to call (gather).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

#include "common/log.h"
#include "common/prometheus.h"
#include "common/util.h"
#include "engine/internal.h"
#include "store/db.h"
#include "store/jobs.h"

/* Runs written in one transaction at most. */
#define BATCH_MAX 64
/* A batch of quick chains waits for more (gather, below). */
#define GATHER_RUNS 48
#define GATHER_AHEAD 4
#define GATHER_MS 2

bool evd_engine_wait_written(struct evd_engine *e, struct evd_handover *h)
{
    pthread_mutex_lock(&e->writes_mu);
    bool was = h->outstanding > 0;
    while (h->outstanding > 0)
        pthread_cond_wait(&e->written_cv, &e->writes_mu);
    pthread_mutex_unlock(&e->writes_mu);
    return was;
}

void evd_engine_chain(struct evd_engine *e, struct evd_handover *h, const char *id, int position)
{
    pthread_mutex_lock(&e->writes_mu);
    snprintf(h->chain, sizeof(h->chain), "%s", position > 0 ? id : "");
    h->tail = position;
    h->quick = false;
    pthread_mutex_unlock(&e->writes_mu);
}

bool evd_engine_next_ahead(struct evd_engine *e, struct evd_handover *h,
                           struct evd_ahead_run *out)
{
    pthread_mutex_lock(&e->writes_mu);
    while (h->nahead == 0 && h->outstanding > 0)
        pthread_cond_wait(&e->written_cv, &e->writes_mu);
    bool got = h->nahead > 0;
    if (got) {
        /* A batch that found nothing due for it spoke of a moment now past. */
        if (h->next == EVD_NEXT_NOTHING)
            h->next = EVD_NEXT_UNKNOWN;
        *out = h->ahead[0];
        memmove(&h->ahead[0], &h->ahead[1], (size_t)(h->nahead - 1) * sizeof(h->ahead[0]));
        if (--h->nahead == GATHER_AHEAD - 1)
            pthread_cond_signal(&e->writes_cv); /* a batch waiting for more goes now */
    }
    pthread_mutex_unlock(&e->writes_mu);
    return got;
}

void evd_engine_write_later(struct evd_engine *e, char *text, const char *evaluation_id,
                            const char *status, int slot, bool quick, struct evd_handover *h)
{
    struct pending_write *w = calloc(1, sizeof(*w));
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
    while (h->outstanding > EVD_AHEAD_MAX)
        pthread_cond_wait(&e->written_cv, &e->writes_mu);
    h->outstanding++;
    h->quick = quick;
    pthread_mutex_unlock(&e->writes_mu);
    if (!evd_queue_push(&e->writes, w)) { /* out of memory (the queue closes only later) */
        pthread_mutex_lock(&e->writes_mu);
        h->outstanding--;
        pthread_cond_broadcast(&e->written_cv);
        pthread_mutex_unlock(&e->writes_mu);
        evd_engine_inflight_remove(e, slot);
        free(text);
        free(w);
        evd_log(EVD_LOG_WARN, "could not queue a finished run; it runs again", "evaluation_id",
                evaluation_id, NULL);
    }
}

/* The workers of a batch, each once in the order of their first run, and what each asks
 * for (under writes_mu): runs ahead when its chain is quick, and a job when it will have
 * nothing else to do once this batch is written (no run ahead held, every write of its in
 * this batch, no job claimed for it yet). */
struct batch_worker {
    struct evd_handover *h;
    int writes;    /* its runs in the batch */
    bool asked;    /* runs ahead asked for */
    char chain[64]; /* of its chain (the worker's may change once the batch is done) */
};

static size_t batch_workers(struct evd_engine *e, struct pending_write *const *batch, size_t n,
                            bool claiming, struct batch_worker *ws,
                            struct evd_store_ahead_item *items)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < m && ws[k].h != batch[i]->h)
            k++;
        if (k == m)
            ws[m++] = (struct batch_worker){.h = batch[i]->h};
        ws[k].writes++;
    }
    int room = evd_engine_inflight_ahead_room(e); /* only this thread adds runs ahead */
    pthread_mutex_lock(&e->writes_mu);
    for (size_t k = 0; k < m; k++) {
        struct evd_handover *h = ws[k].h;
        int held = h->nahead + (h->outstanding - ws[k].writes);
        int want = EVD_AHEAD_MAX - held < room ? EVD_AHEAD_MAX - held : room;
        ws[k].asked = claiming && h->chain[0] != '\0' && h->quick && want > 0;
        if (ws[k].asked)
            room -= want;
        snprintf(ws[k].chain, sizeof(ws[k].chain), "%s", h->chain);
        items[k] = (struct evd_store_ahead_item){
            .evaluation_id = ws[k].asked ? ws[k].chain : NULL,
            .after = h->tail,
            .n = ws[k].asked ? want : 0,
            .need = claiming && h->nahead == 0 && h->outstanding == ws[k].writes &&
                    h->next != EVD_NEXT_JOB,
        };
    }
    pthread_mutex_unlock(&e->writes_mu);
    return m;
}

/* Registers a run started ahead in flight and gives it to its worker; false when it could
 * not (no memory, no room), and then it is handed back, and so must the runs after it be
 * (`give_back`): none of them may be called before it. */
static bool deliver_ahead(struct evd_engine *e, PGconn *c, struct evd_handover *h,
                          const char *evaluation_id, const struct evd_store_ahead_run *run,
                          int64_t sent, bool give_back)
{
    struct evd_ahead_run a = {.attempt = run->attempt, .slot = -1};
    a.job.id = run->job_id;
    snprintf(a.job.kind, sizeof(a.job.kind), "run");
    snprintf(a.job.evaluation_id, sizeof(a.job.evaluation_id), "%s", evaluation_id);
    a.job.run_position = run->position;
    a.job.attempts = run->job_attempts;
    a.job.claimed_mono = sent;
    if (!give_back && (a.cancel = evd_cancel_new()) != NULL)
        a.slot = evd_engine_inflight_add_ahead(e, &a.job, a.attempt, a.cancel);
    pthread_mutex_lock(&e->writes_mu);
    bool room = a.slot >= 0 && h->nahead < EVD_AHEAD_MAX;
    if (room) {
        h->ahead[h->nahead++] = a;
        if (run->position > h->tail)
            h->tail = run->position;
    }
    pthread_mutex_unlock(&e->writes_mu);
    if (room) {
        evd_metrics_count("evald_runs_started_ahead_total", NULL, NULL, 1);
        return true;
    }
    if (a.slot >= 0)
        evd_engine_inflight_remove(e, a.slot);
    evd_cancel_free(a.cancel);
    struct evd_err err = {0};
    if (evd_store_job_hand_back(c, a.job.id, e->owner, evaluation_id, a.job.run_position,
                                a.attempt, &err) != EVD_OK)
        evd_log(EVD_LOG_WARN, "could not hand a run ahead back; its lease runs out",
                "evaluation_id", evaluation_id, "error", err.msg, NULL);
    return false;
}

/*
 * Writes one batch and, in its transaction, starts runs ahead for its quick chains and
 * claims a job for each of its workers that will have nothing else to do (none once the
 * engine stops: they leave); false when it could not, and then nothing of it is written,
 * started or claimed. What it started and claimed goes to the workers' handovers under
 * writes_mu before the batch is done (evd_engine_writer_main); a worker that needed a job
 * and got none learns that nothing else was due.
 */
static bool write_batch(struct evd_engine *e, PGconn *c, struct pending_write **batch, size_t n)
{
    struct evd_buf array = {0};
    int results[BATCH_MAX];
    int64_t left[BATCH_MAX];
    struct evd_store_claimed claimed[BATCH_MAX];
    struct batch_worker ws[BATCH_MAX];
    struct evd_store_ahead_item items[BATCH_MAX];
    struct evd_store_ahead_run started[BATCH_MAX * EVD_AHEAD_MAX];
    bool claiming = !atomic_load(&e->stopping);
    size_t m = batch_workers(e, batch, n, claiming, ws, items);
    struct evd_store_claims claims = {.n = claiming ? (int)m : 0,
                                      .lease_ms = e->opts.lease_ms,
                                      .max_attempts = EVD_MAX_ATTEMPTS,
                                      .out = claimed};
    struct evd_store_ahead ahead = {
        .items = items, .nitems = m, .out = started, .cap = sizeof(started) / sizeof(started[0])};
    int rc = evd_buf_append(&array, "[", 1);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = (i > 0 ? evd_buf_append(&array, ",", 1) : 0) ||
             evd_buf_append(&array, batch[i]->text, strlen(batch[i]->text));
    if (rc == 0)
        rc = evd_buf_append(&array, "]", 1);
    struct evd_err err = {0};
    if (rc != 0 || evd_store_runs_finish_ahead(c, array.data, evd_now_ms(), e->owner, n, results,
                                               left, &claims, &ahead, &err) != EVD_OK) {
        evd_log(EVD_LOG_WARN, "could not record runs; trying again", "error",
                rc != 0 ? "out of memory" : err.msg, NULL);
        evd_buf_free(&array);
        return false;
    }
    evd_buf_free(&array);
    evd_metrics_count("evald_run_batches_total", NULL, NULL, 1);
    long enqueued = 0;
    for (size_t i = 0; i < n; i++)
        enqueued += results[i] > 0 ? results[i] : 0;
    /* The batch's own workers have their jobs (or know the queue is empty); this process's
     * other workers wake, without the keeper's round trip, for what the batch enqueued
     * beyond what it claimed or started ahead. Waking one for every job enqueued had two
     * claimers race for each, and one found nothing (W1 of bench/bench.py: 7,093 claims
     * for about 4,000 runs, 4,555 once the batch's workers were counted). */
    evd_engine_wake(e, enqueued - (claiming ? (long)claims.got + ahead.taken : (long)n));
    bool got_ahead[BATCH_MAX] = {false}, broken[BATCH_MAX] = {false};
    for (size_t k = 0; k < ahead.got; k++) { /* each item's runs in plan order */
        const struct evd_store_ahead_run *run = &started[k];
        got_ahead[run->item] = true;
        if (!deliver_ahead(e, c, ws[run->item].h, items[run->item].evaluation_id, run,
                           ahead.sent, broken[run->item]))
            broken[run->item] = true;
    }
    pthread_mutex_lock(&e->writes_mu);
    size_t next_claim = 0;
    for (size_t k = 0; k < m; k++) {
        if (!items[k].need || got_ahead[k])
            continue;
        struct evd_handover *h = ws[k].h;
        h->next = next_claim < claims.got ? EVD_NEXT_JOB : EVD_NEXT_NOTHING;
        if (next_claim < claims.got)
            h->job = claimed[next_claim++];
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

/*
 * A batch costs PostgreSQL a share of its own beside its runs' (W1 at 0 ms: 0.13 ms a run
 * in batches of 10, 0.09 in batches of 50), and only quick chains make small batches often:
 * their workers hand over a run every fraction of a millisecond and go on with the runs
 * ahead they hold. So a batch whose every worker still holds at least GATHER_AHEAD runs
 * ahead to call waits for more, up to GATHER_RUNS runs or GATHER_MS; a worker that gets
 * down to fewer (evd_engine_next_ahead signals it), or a stop, sends it at once; so does a
 * run of a worker with fewer (a slow run, a chain's end, a worker waiting for its write).
 */

/* Whether the batch may wait for more (under writes_mu). */
static bool may_gather(struct evd_engine *e, struct pending_write *const *batch, size_t n)
{
    if (n >= GATHER_RUNS || e->writes.len > 0 || atomic_load(&e->stopping))
        return false;
    for (size_t i = 0; i < n; i++)
        if (batch[i]->h->nahead < GATHER_AHEAD)
            return false;
    return true;
}

/* Adds to batch[0..*n) what comes while it may wait for more. */
static void gather(struct evd_engine *e, struct pending_write **batch, size_t *n)
{
    struct timespec until;
    evd_clock_after(CLOCK_REALTIME, GATHER_MS, &until);
    for (;;) {
        struct pending_write *w;
        while (*n < BATCH_MAX && (w = evd_queue_try_pop(&e->writes)) != NULL)
            batch[(*n)++] = w;
        pthread_mutex_lock(&e->writes_mu);
        bool wait = may_gather(e, batch, *n);
        if (wait)
            wait = pthread_cond_timedwait(&e->writes_cv, &e->writes_mu, &until) == 0;
        pthread_mutex_unlock(&e->writes_mu);
        if (!wait)
            return;
    }
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
        gather(e, batch, &n);
        write_until_done(e, &c, batch, n);
        pthread_mutex_lock(&e->writes_mu);
        for (size_t i = 0; i < n; i++) {
            batch[i]->h->outstanding--;
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
