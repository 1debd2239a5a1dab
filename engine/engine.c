/*
 * The start and stop of an engine: its state, its threads (workers, engine/workers.c;
 * keeper and sweeper, engine/keeper.c; writer, finalizers, analyst, starters) and the job
 * kinds it runs (engine/jobs.c), handed to the workers here. The top of the engine's core:
 * nothing below calls into it.
 * Stop: set `stopping`, write the wake pipe (every poll returns), trigger every
 * in-flight cancel token with REASON_SHUTDOWN (runs are handed back), join.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/internal.h"
#include "store/db.h"
#include "store/jobs.h"

/* ---- start / stop ----------------------------------------------------------------- */

struct evd_engine *evd_engine_start(const struct evd_engine_options *opts, struct evd_err *err)
{
    struct evd_engine *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    e->opts = *opts;
    e->kinds = evd_engine_kinds;
    e->nkinds = evd_engine_nkinds;
    if (pipe(e->wake_pipe) != 0) {
        free(e);
        evd_err_set(err, EVD_EINTERNAL, "could not create the wake pipe");
        return NULL;
    }
    char host[64] = "host", rnd[48];
    gethostname(host, sizeof(host) - 1);
    evd_new_id("", rnd, sizeof(rnd));
    snprintf(e->owner, sizeof(e->owner), "%s:%ld:%.8s", host, (long)getpid(), rnd);
    pthread_mutex_init(&e->inflight_mu, NULL);
    pthread_mutex_init(&e->hub_mu, NULL);
    pthread_cond_init(&e->hub_cv, NULL);
    pthread_mutex_init(&e->writes_mu, NULL);
    pthread_cond_init(&e->writes_cv, NULL);
    pthread_cond_init(&e->written_cv, NULL);
    pthread_mutex_init(&e->finals_mu, NULL);
    pthread_cond_init(&e->finals_cv, NULL);
    pthread_cond_init(&e->finals_help_cv, NULL);
    evd_queue_init_shared(&e->writes, &e->writes_mu, &e->writes_cv);
    evd_queue_init_shared(&e->finals, &e->finals_mu, &e->finals_cv);
    pthread_mutex_init(&e->work_mu, NULL);
    pthread_cond_init(&e->work_cv, NULL);
    pthread_mutex_init(&e->starts_mu, NULL);
    pthread_cond_init(&e->starts_cv, NULL);
    pthread_mutex_init(&e->cells_mu, NULL);
    pthread_cond_init(&e->cells_cv, NULL);
    e->cells_tail = &e->cells_head;
    evd_queue_init_shared(&e->starts, &e->starts_mu, &e->starts_cv);
    /* Runs ahead (internal.h) are registered too, up to EVD_AHEAD_MAX for each of at most
     * EVD_AHEAD_WORKERS workers at once: they matter when few chains keep the writer's
     * batches small, not when many do. */
    int workers = opts->workers > 0 ? opts->workers : 1;
    e->ahead_cap = (workers < EVD_AHEAD_WORKERS ? workers : EVD_AHEAD_WORKERS) * EVD_AHEAD_MAX;
    e->ninflight = 2 * workers + 16 + e->ahead_cap;
    e->inflight = calloc((size_t)e->ninflight, sizeof(*e->inflight));
    e->renew_ids = calloc((size_t)e->ninflight, sizeof(*e->renew_ids));
    e->renew_state = calloc((size_t)e->ninflight, sizeof(*e->renew_state));
    e->ready_cap = opts->workers > 0 ? (size_t)opts->workers : 0;
    e->ready = e->ready_cap > 0 ? calloc(e->ready_cap, sizeof(*e->ready)) : NULL;
    long wconns = opts->worker_connections > 0 ? opts->worker_connections : 16;
    if (opts->workers > 0 && wconns > opts->workers)
        wconns = opts->workers;
    if (e->inflight == NULL || e->renew_ids == NULL || e->renew_state == NULL ||
        (e->ready_cap > 0 && e->ready == NULL) ||
        (opts->workers > 0 && (e->wdb = evd_db_open(opts->conninfo, (int)wconns, err)) == NULL)) {
        if (err != NULL && err->code == EVD_OK)
            evd_err_set(err, EVD_ENOMEM, "out of memory");
        free(e->inflight);
        free(e->renew_ids);
        free(e->renew_state);
        free(e->ready);
        close(e->wake_pipe[0]);
        close(e->wake_pipe[1]);
        free(e);
        return NULL;
    }
    if (opts->workers > 0) {
        /* Workers spend their time waiting for providers: small stacks let thousands of
         * them exist (1 MiB each, of which a few pages are ever touched). */
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 1u << 20);
        e->workers = calloc((size_t)opts->workers, sizeof(*e->workers));
        e->worker_args = calloc((size_t)opts->workers, sizeof(*e->worker_args));
        for (long i = 0; e->workers && e->worker_args && i < opts->workers; i++) {
            pthread_mutex_lock(&e->writes_mu);
            e->writers_clients++; /* counted before it runs: it ends by counting itself out */
            pthread_mutex_unlock(&e->writes_mu);
            e->worker_args[e->nworkers] = (struct worker_arg){e, (long)e->nworkers};
            if (pthread_create(&e->workers[e->nworkers], &attr, evd_engine_worker_main,
                               &e->worker_args[e->nworkers]) == 0) {
                e->nworkers++;
            } else {
                pthread_mutex_lock(&e->writes_mu);
                e->writers_clients--;
                pthread_mutex_unlock(&e->writes_mu);
            }
        }
        pthread_attr_destroy(&attr);
        pthread_create(&e->keeper, NULL, evd_engine_keeper_main, e);
        pthread_create(&e->sweeper, NULL, evd_engine_sweeper_main, e);
        pthread_create(&e->writer, NULL, evd_engine_writer_main, e);
        pthread_create(&e->finalizer, NULL, evd_engine_finalizer_main, e);
        pthread_create(&e->finalizer_helper, NULL, evd_engine_finalizer_helper_main, e);
        pthread_create(&e->analyst, NULL, evd_engine_analyst_main, e);
        for (int i = 0; i < EVD_STARTERS; i++)
            pthread_create(&e->starters[i], NULL, evd_engine_starter_main, e);
        e->threads_started = true;
    }
    return e;
}

/* Wakes every thread waiting on cv, so that it sees the engine stopping. */
static void wake_all(pthread_mutex_t *mu, pthread_cond_t *cv)
{
    pthread_mutex_lock(mu);
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
}

void evd_engine_signal_stop(struct evd_engine *e)
{
    if (e == NULL || atomic_exchange(&e->stopping, true))
        return;
    ssize_t w = write(e->wake_pipe[1], "x", 1);
    (void)w;
    evd_engine_inflight_cancel(e, NULL, 0, REASON_SHUTDOWN);
    wake_all(&e->hub_mu, &e->hub_cv);
    wake_all(&e->work_mu, &e->work_cv);
    wake_all(&e->finals_mu, &e->finals_cv);
    wake_all(&e->finals_mu, &e->finals_help_cv);
    pthread_mutex_lock(&e->writes_mu);
    bool no_workers = e->writers_clients == 0;
    pthread_mutex_unlock(&e->writes_mu);
    if (no_workers) /* else the last worker out closes it (evd_engine_worker_done) */
        evd_queue_close(&e->writes);
}

/* Hands back the runs a batch of starts claimed for workers that left before taking
 * them (a stop that came between the claim and the hand-over); other kinds run out their
 * lease. */
static void hand_back_ready(struct evd_engine *e)
{
    struct evd_store_claimed cl;
    while (evd_engine_take_ready(e, &cl)) {
        struct evd_err err = {0};
        PGconn *c = cl.outcome == EVD_CLAIM_RUN ? evd_db_acquire(e->wdb, &err) : NULL;
        if (c == NULL || evd_store_job_hand_back(c, cl.job.id, e->owner, cl.job.evaluation_id,
                                                 cl.job.run_position, cl.attempt,
                                                 &err) != EVD_OK)
            evd_log(EVD_LOG_WARN, "could not hand a run back; its lease runs out",
                    "evaluation_id", cl.job.evaluation_id, NULL);
        evd_db_release(e->wdb, c);
        evd_store_job_clear(&cl.job);
    }
}

void evd_engine_stop(struct evd_engine *e)
{
    if (e == NULL)
        return;
    evd_engine_signal_stop(e);
    if (e->threads_started) {
        for (size_t i = 0; i < e->nworkers; i++)
            pthread_join(e->workers[i], NULL);
        pthread_join(e->keeper, NULL);
        pthread_join(e->sweeper, NULL);
        pthread_join(e->writer, NULL);    /* it writes what the workers handed over */
        pthread_join(e->finalizer, NULL); /* it finishes what was queued when the stop came */
        pthread_join(e->finalizer_helper, NULL);
        pthread_join(e->analyst, NULL);
        /* The server, stopped before, waits for no start any more. */
        evd_queue_close(&e->starts);
        for (int i = 0; i < EVD_STARTERS; i++)
            pthread_join(e->starters[i], NULL);
        hand_back_ready(e);
    }
    free(e->workers);
    free(e->worker_args);
    free(e->inflight);
    free(e->renew_ids);
    free(e->renew_state);
    free(e->ready);
    evd_db_close(e->wdb); /* after the workers: none holds a connection any more */
    close(e->wake_pipe[0]);
    close(e->wake_pipe[1]);
    pthread_mutex_destroy(&e->inflight_mu);
    pthread_mutex_destroy(&e->hub_mu);
    pthread_cond_destroy(&e->hub_cv);
    pthread_mutex_destroy(&e->work_mu);
    pthread_cond_destroy(&e->work_cv);
    /* Finalizations queued after the finalizer left are the sweeper's. */
    evd_queue_destroy(&e->finals, free);
    evd_queue_destroy(&e->writes, evd_engine_pending_write_free);
    pthread_mutex_destroy(&e->finals_mu);
    pthread_cond_destroy(&e->finals_cv);
    pthread_cond_destroy(&e->finals_help_cv);
    pthread_mutex_destroy(&e->writes_mu);
    pthread_cond_destroy(&e->writes_cv);
    pthread_cond_destroy(&e->written_cv);
    evd_queue_destroy(&e->starts, NULL); /* empty: every start was answered */
    pthread_mutex_destroy(&e->starts_mu);
    pthread_cond_destroy(&e->starts_cv);
    pthread_mutex_destroy(&e->cells_mu); /* no step waits: every worker is gone */
    pthread_cond_destroy(&e->cells_cv);
    free(e);
}
