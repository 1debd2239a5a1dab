/*
 * Engine threads: workers, keeper, sweeper, and the start and stop of every thread
 * (the in-flight registry is engine/inflight.c, the change hub engine/hub.c).
 *   workers  claim due jobs (FOR UPDATE SKIP LOCKED + lease) on their own
 *            connection; an idle worker sleeps on work_cv until the keeper announces
 *            new jobs (or a second passes: jobs may become due without a NOTIFY);
 *   keeper   renews, every third of the lease, the leases of this process's runs in
 *            flight or with the writer (each renewal moves the run's cancel token
 *            deadline: calls stop at three quarters of a lease not renewed), LISTENs on
 *            evald_cancel (cancel tokens), evald_events (SSE subscriptions) and
 *            evald_jobs (wakes as many idle workers as jobs were enqueued), triggers runs
 *            past their scenario deadline, and trades this process's demand of provider
 *            limits for the other processes' (exchange_limits);
 *   sweeper  re-arms what a crash or a lost notification left behind.
 * Stop: set `stopping`, write the wake pipe (every poll returns), trigger every
 * in-flight cancel token with REASON_SHUTDOWN (runs are handed back), join.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/internal.h"
#include "harness/providers.h"
#include "harness/ratelimit.h"
#include "store/db.h"
#include "store/jobs.h"
#include "store/limiters.h"
#include "store/listen.h"

/* ---- the workers' connections --------------------------------------------------- */

PGconn *evd_wconn_get(struct evd_wconn *w, struct evd_err *err)
{
    if (w->c == NULL)
        w->c = evd_db_acquire(w->e->wdb, err);
    return w->c;
}

void evd_wconn_put(struct evd_wconn *w)
{
    if (w->c != NULL)
        evd_db_release(w->e->wdb, w->c);
    w->c = NULL;
}

PGconn *evd_wconn_borrow(struct evd_wconn *w, bool *had, struct evd_err *err)
{
    *had = w->c != NULL;
    return evd_wconn_get(w, err);
}

void evd_wconn_return(struct evd_wconn *w, bool had)
{
    if (!had)
        evd_wconn_put(w);
}

/* ---- connections that LISTEN ------------------------------------------------------ */

/* A listener on the engine's channels (none: a worker's or the sweeper's connection). */
struct evd_listener *evd_engine_listener(struct evd_engine *e, const char *const *channels,
                                         evd_listen_fn on_notify)
{
    struct evd_listener_opts o = {.conninfo = e->opts.conninfo,
                                  .channels = channels,
                                  .wake_fd = e->wake_pipe[0],
                                  .stopping = &e->stopping,
                                  .what = "engine connection failed, retrying",
                                  .on_notify = on_notify,
                                  .arg = e};
    struct evd_listener *l = evd_listener_new(&o);
    if (l == NULL)
        evd_log(EVD_LOG_ERROR, "out of memory for an engine connection", NULL);
    return l;
}

/* ---- workers ---------------------------------------------------------------------- */

/*
 * Waits until the keeper hands out a wake-up (a job was enqueued somewhere), a batch of
 * starts hands over a job it claimed (the ready queue), the timeout passes (a job may
 * have become due) or the engine stops. Only as many idle workers wake as jobs were
 * announced, instead of every LISTENing worker per NOTIFY. True when this worker took a
 * wake-up: it then owes claim_done its claim's end. A job handed over is left in the
 * ready queue for the caller to take (take_ready), with no wake-up taken for it.
 */
static bool wait_for_work(struct evd_engine *e, int timeout_ms)
{
    struct timespec until;
    evd_clock_after(CLOCK_REALTIME, timeout_ms, &until);
    pthread_mutex_lock(&e->work_mu);
    e->idle++;
    while (e->work_tokens == 0 && e->ready_len == 0 && !atomic_load(&e->stopping))
        if (pthread_cond_timedwait(&e->work_cv, &e->work_mu, &until) == ETIMEDOUT)
            break;
    e->idle--;
    bool took = e->work_tokens > 0 && e->ready_len == 0;
    if (took) {
        e->work_tokens--;
        e->woken_claiming++;
    }
    pthread_mutex_unlock(&e->work_mu);
    return took;
}

/* The oldest job a batch of starts claimed and handed over, into *out; false when none. */
static bool take_ready(struct evd_engine *e, struct evd_store_claimed *out)
{
    pthread_mutex_lock(&e->work_mu);
    bool got = e->ready_len > 0;
    if (got) {
        *out = e->ready[e->ready_head];
        e->ready_head = (e->ready_head + 1) % e->ready_cap;
        e->ready_len--;
    }
    pthread_mutex_unlock(&e->work_mu);
    return got;
}

int evd_engine_reserve_idle(struct evd_engine *e, int want)
{
    pthread_mutex_lock(&e->work_mu);
    /* Idle workers not already due to wake for an announced job or a handed-over one. */
    long free_idle = e->idle - e->work_tokens - (long)e->ready_len - e->reserved;
    long k = want < free_idle ? want : free_idle;
    if (k < 0 || atomic_load(&e->stopping) || e->ready == NULL)
        k = 0;
    e->reserved += k;
    pthread_mutex_unlock(&e->work_mu);
    return (int)k;
}

void evd_engine_hand_ready(struct evd_engine *e, int reserved, const struct evd_store_claimed *jobs,
                           size_t n)
{
    pthread_mutex_lock(&e->work_mu);
    e->reserved -= reserved;
    size_t handed = 0;
    /* The ring has room for every worker, and no more jobs are claimed than idle workers
     * were reserved, so it never overflows; a job it could not take runs out its lease. */
    for (; handed < n && e->ready_len < e->ready_cap; handed++) {
        e->ready[(e->ready_head + e->ready_len) % e->ready_cap] = jobs[handed];
        e->ready_len++;
    }
    /* One wake-up a job: a broadcast woke every idle worker (a thousand, in a burst of
     * starts) for each batch, and the herd cost more CPU than the starts. */
    for (size_t i = 0; i < handed; i++)
        pthread_cond_signal(&e->work_cv);
    pthread_mutex_unlock(&e->work_mu);
    if (handed < n)
        evd_log(EVD_LOG_ERROR, "no room for a claimed job; its lease runs out", NULL);
    for (size_t i = handed; i < n; i++) {
        struct evd_store_job left = jobs[i].job; /* the ring did not take it: ours to free */
        evd_store_job_clear(&left);
    }
}

/* Announces `n` new jobs to the idle workers (called by the keeper). */
static void wake_workers(struct evd_engine *e, long n)
{
    pthread_mutex_lock(&e->work_mu);
    e->work_tokens += n < 1 ? 1 : n;
    if (e->work_tokens > e->opts.workers)
        e->work_tokens = e->opts.workers; /* not nworkers: it grows while they start */
    for (long i = 0; i < e->work_tokens; i++)
        pthread_cond_signal(&e->work_cv);
    pthread_mutex_unlock(&e->work_mu);
}

void evd_engine_wake(struct evd_engine *e, long n)
{
    if (n > 0)
        wake_workers(e, n);
}

/*
 * The end of a claim of a worker that was idle (woken: it had taken a wake-up). When the
 * claim took a job and saw more due, one more worker wakes, but only when no wake-up is
 * still on its way to a claim: each job a start enqueues comes with a wake-up of its own,
 * and a claim that sees the next start's job while that job's worker is waking woke a
 * third, which found nothing (1,024 starts at once: 928 empty claims of 1,952). The last
 * claimer of a backlog always sees no other, so a backlog still fans out.
 */
static void claim_done(struct evd_engine *e, bool woken, bool more)
{
    pthread_mutex_lock(&e->work_mu);
    if (woken)
        e->woken_claiming--;
    bool wake = more && e->work_tokens == 0 && e->woken_claiming == 0;
    pthread_mutex_unlock(&e->work_mu);
    if (wake)
        wake_workers(e, 1);
}

/* A few workers look for due work every second (leases that ran out, retries that came
 * due); the others sleep until jobs are announced or another worker claimed one. */
#define EVD_POLLERS 4

struct worker_arg {
    struct evd_engine *e;
    long index;
};

static void *worker_main(void *arg)
{
    struct worker_arg *me = arg;
    struct evd_engine *e = me->e;
    struct evd_wconn w = {e, NULL};
    struct evd_handover h = {0}; /* this worker's finished run with the writer, and what
                                    the writer's batch claimed for it */
    bool idle = true; /* this worker comes from waiting for work, not from a job */
    bool woken = false; /* ... and took a wake-up to come (claim_done) */
    const int idle_ms = me->index < EVD_POLLERS ? 1000 : 30000;
    for (;;) {
        struct evd_err err = {0};
        /* The writer's batch that writes this worker's finished run claims its next job
         * (usually the run that write enqueues): wait for it rather than claim on our own
         * and find the queue empty, or pay a transaction for the claim. */
        evd_engine_wait_written(e, &h);
        enum evd_handover_next next = h.next; /* the writer is done with h */
        h.next = EVD_NEXT_UNKNOWN;
        struct evd_store_job job = {.request = NULL};
        enum evd_claim_outcome outcome = EVD_CLAIM_NONE;
        int attempt = 0;
        enum evd_code rc = EVD_OK;
        bool took;
        struct evd_store_claimed ready;
        if (next == EVD_NEXT_JOB) {
            /* Claimed for it: executed even when the engine stops now (the run registers
             * as stopping and is handed back at once). */
            job = h.job.job;
            outcome = h.job.outcome;
            attempt = h.job.attempt;
            took = true;
        } else if (!atomic_load(&e->stopping) && take_ready(e, &ready)) {
            /* Claimed by a batch of starts for an idle worker. (One that waited in the
             * queue past its lease's margin stops at once and is handed back: its
             * deadline counts from the claim.) */
            if (woken)
                claim_done(e, true, false);
            woken = false;
            job = ready.job;
            outcome = ready.outcome;
            attempt = ready.attempt;
            took = true;
        } else {
            if (atomic_load(&e->stopping))
                break;
            if (next == EVD_NEXT_NOTHING) {
                /* Its batch found nothing else due: sleep until a job is announced. */
                woken = wait_for_work(e, idle_ms);
                idle = true;
                continue;
            }
            PGconn *c = evd_wconn_get(&w, &err);
            if (c == NULL) {
                if (woken)
                    claim_done(e, true, false);
                woken = wait_for_work(e, 500); /* the database is away: try again */
                continue;
            }
            rc = evd_store_job_claim_start(c, e->owner, e->opts.lease_ms, evd_now_ms(),
                                           EVD_MAX_ATTEMPTS, &job, &outcome, &attempt, &err);
            took = rc == EVD_OK && (outcome == EVD_CLAIM_RUN || outcome == EVD_CLAIM_CLAIMED);
            /* A worker that was idle and found work may wake one more when more is due: a
             * backlog fans out, one claim at a time, and stops where the queue does. A
             * worker going from one job to the next does not: the jobs its writes enqueue
             * are its own to claim, and a worker woken for them finds nothing (W1 of
             * bench/bench.py: 3,337 empty claims for 2,256 runs). */
            if (woken || (took && idle))
                claim_done(e, woken, took && idle && job.more);
            woken = false;
        }
        if (took) {
            idle = false;
            /* One path for every kind: claimed, then executed by its entry, which holds
             * the connection only while it talks to the database. */
            const struct evd_job_kind *kind = evd_engine_job_kind(job.kind);
            if (kind != NULL)
                kind->process(e, &w, &job, outcome == EVD_CLAIM_RUN ? attempt : 0, &h);
            else
                evd_log(EVD_LOG_WARN, "job of an unknown kind left to its lease", "kind",
                        job.kind, NULL);
            evd_store_job_clear(&job);
            evd_wconn_put(&w);
            continue;
        }
        evd_store_job_clear(&job);
        evd_wconn_put(&w);
        if (rc == EVD_OK && outcome == EVD_CLAIM_OBSOLETE)
            continue;
        if (rc != EVD_OK) {
            woken = wait_for_work(e, 500);
            continue;
        }
        /* Nothing due: sleep until a job is announced, or (a poller) look again in a
         * second. */
        woken = wait_for_work(e, idle_ms);
        idle = true;
    }
    evd_wconn_put(&w);
    evd_engine_worker_done(e, &h);
    return NULL;
}

/* ---- keeper ----------------------------------------------------------------------- */

/*
 * Renews the leases of this process's runs: those in flight and those whose outcome the
 * writer has yet to write. A renewed run's calls may go on until the lease, as counted
 * from the moment this renewal was sent, is EVD_LEASE_MARGIN_MS from its end; a run
 * whose lease is gone is triggered (in flight) or marked lost (with the writer).
 */
static void renew(struct evd_engine *e, PGconn *c)
{
    int64_t *ids = e->renew_ids;
    enum evd_lease_state *state = e->renew_state;
    size_t n = evd_engine_inflight_due(e, ids);
    if (n == 0)
        return;
    struct evd_err err = {0};
    int64_t sent = evd_mono_ms();
    if (evd_store_jobs_renew(c, e->owner, ids, n, e->opts.lease_ms, state, &err) != EVD_OK) {
        evd_log(EVD_LOG_WARN, "could not renew leases", "error", err.msg, NULL);
        return;
    }
    evd_engine_inflight_renewed(e, ids, state, n,
                                sent + e->opts.lease_ms - EVD_LEASE_MARGIN_MS(e->opts.lease_ms));
}

/*
 * The split of provider limits between the processes of the database (harness/
 * ratelimit.h, evd_rl_part): every EXCHANGE_MS the keeper trades this process's demand of
 * each limit it knows for the other processes' (store/limiters.h) and sets its part of
 * each. A process that stops reporting stops counting after FRESH_MS.
 */
#define EXCHANGE_MS 250
#define FRESH_MS 1000
#define DEMANDS_MAX 64

struct demands {
    const struct evd_hx_demand *d;
    size_t n;
};

static void set_part(void *arg, const char *provider, const char *model, const int *others,
                     size_t n)
{
    const struct demands *mine = arg;
    double o[256];
    size_t k = n < 256 ? n : 256;
    for (size_t i = 0; i < k; i++)
        o[i] = others[i];
    for (size_t i = 0; i < mine->n; i++)
        if (strcmp(mine->d[i].provider, provider) == 0 && strcmp(mine->d[i].model, model) == 0)
            evd_hx_limiter_set_part(provider, model, evd_rl_part(mine->d[i].demand, o, k));
}

static void exchange_limits(struct evd_engine *e, PGconn *c)
{
    struct evd_hx_demand d[DEMANDS_MAX];
    struct evd_store_demand sd[DEMANDS_MAX];
    size_t n = evd_hx_limiter_demands(d, DEMANDS_MAX);
    if (n == 0)
        return;
    for (size_t i = 0; i < n; i++)
        sd[i] = (struct evd_store_demand){d[i].provider, d[i].model, d[i].demand};
    struct demands mine = {d, n};
    struct evd_err err = {0};
    if (evd_store_limiter_exchange(c, e->owner, sd, n, FRESH_MS, set_part, &mine, &err) !=
        EVD_OK)
        evd_log(EVD_LOG_DEBUG, "could not trade the limits' demands", "error", err.msg, NULL);
}

/* What the keeper does on a notification. */
static void keeper_notified(void *arg, const char *channel, const char *payload)
{
    struct evd_engine *e = arg;
    if (strcmp(channel, EVD_CHANNEL_EVENTS) == 0) {
        evd_engine_publish(e, payload);
    } else if (strcmp(channel, EVD_CHANNEL_CANCEL) == 0) {
        char id[64];
        int position = 0;
        snprintf(id, sizeof(id), "%s", payload);
        char *colon = strchr(id, ':');
        if (colon) {
            *colon = '\0';
            position = atoi(colon + 1);
        }
        evd_engine_inflight_cancel(e, id, position, REASON_CANCELLED);
    } else if (strcmp(channel, EVD_CHANNEL_JOBS) == 0) {
        /* "<count>[ <owner>]": a process wakes its own workers when it enqueues. */
        const char *sp = strchr(payload, ' ');
        if (sp == NULL || strcmp(sp + 1, e->owner) != 0)
            wake_workers(e, atol(payload));
    }
}

static void *keeper_main(void *arg)
{
    struct evd_engine *e = arg;
    static const char *const channels[] = {EVD_CHANNEL_EVENTS, EVD_CHANNEL_CANCEL,
                                           EVD_CHANNEL_JOBS, NULL};
    struct evd_listener *l = evd_engine_listener(e, channels, keeper_notified);
    PGconn *c = l ? evd_listener_conn(l) : NULL;
    long period = e->opts.lease_ms / 3 < EXCHANGE_MS ? e->opts.lease_ms / 3 : EXCHANGE_MS;
    int64_t next_renew = 0, next_exchange = 0;
    while (c != NULL && !atomic_load(&e->stopping)) {
        if (!evd_listener_wait(l, (int)period, NULL)) {
            c = evd_listener_conn(l);
            continue;
        }
        if (evd_mono_ms() >= next_renew) {
            renew(e, c);
            next_renew = evd_mono_ms() + e->opts.lease_ms / 3;
        }
        if (evd_mono_ms() >= next_exchange) {
            exchange_limits(e, c);
            next_exchange = evd_mono_ms() + EXCHANGE_MS;
        }
    }
    evd_listener_free(l);
    return NULL;
}

/* ---- sweeper ---------------------------------------------------------------------- */

static void *sweeper_main(void *arg)
{
    struct evd_engine *e = arg;
    struct evd_listener *l = evd_engine_listener(e, NULL, NULL);
    PGconn *c = l ? evd_listener_conn(l) : NULL;
    while (c != NULL && !atomic_load(&e->stopping)) {
        if (!evd_listener_ensure(l)) {
            c = evd_listener_conn(l);
            continue;
        }
        long acted = evd_engine_sweep_once(e, c);
        if (acted > 0) {
            char n[24];
            snprintf(n, sizeof(n), "%ld", acted);
            evd_log(EVD_LOG_INFO, "sweep", "acted", n, NULL);
        }
        struct pollfd pfd = {.fd = e->wake_pipe[0], .events = POLLIN};
        poll(&pfd, 1, (int)e->opts.sweep_interval_ms);
    }
    evd_listener_free(l);
    return NULL;
}

/* ---- start / stop ----------------------------------------------------------------- */

struct evd_engine *evd_engine_start(const struct evd_engine_options *opts, struct evd_err *err)
{
    struct evd_engine *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    e->opts = *opts;
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
    evd_queue_init_shared(&e->starts, &e->starts_mu, &e->starts_cv);
    e->ninflight = 2 * (int)(opts->workers > 0 ? opts->workers : 1) + 16;
    e->inflight = calloc((size_t)e->ninflight, sizeof(*e->inflight));
    e->renew_ids = calloc((size_t)e->ninflight, sizeof(*e->renew_ids));
    e->renew_state = calloc((size_t)e->ninflight, sizeof(*e->renew_state));
    e->ready_cap = opts->workers > 0 ? (size_t)opts->workers : 0;
    e->ready = e->ready_cap > 0 ? calloc(e->ready_cap, sizeof(*e->ready)) : NULL;
    long wconns = opts->worker_connections > 0 ? opts->worker_connections : 32;
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
            if (pthread_create(&e->workers[e->nworkers], &attr, worker_main,
                               &e->worker_args[e->nworkers]) == 0) {
                e->nworkers++;
            } else {
                pthread_mutex_lock(&e->writes_mu);
                e->writers_clients--;
                pthread_mutex_unlock(&e->writes_mu);
            }
        }
        pthread_attr_destroy(&attr);
        pthread_create(&e->keeper, NULL, keeper_main, e);
        pthread_create(&e->sweeper, NULL, sweeper_main, e);
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
    while (take_ready(e, &cl)) {
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
    free(e);
}
