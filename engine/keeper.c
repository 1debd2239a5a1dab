/*
 * The keeper and the sweeper.
 *   keeper   renews, every third of the lease, the leases of this process's runs in
 *            flight or with the writer (each renewal moves the run's cancel token
 *            deadline: calls stop at three quarters of a lease not renewed), LISTENs on
 *            evald_cancel (cancel tokens), evald_events (SSE subscriptions) and
 *            evald_jobs (wakes as many idle workers as jobs were enqueued), triggers runs
 *            past their scenario deadline, and trades this process's demand of provider
 *            limits for the other processes' (exchange_limits);
 *   sweeper  re-arms what a crash or a lost notification left behind.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/internal.h"
#include "harness/providers.h"
#include "harness/ratelimit.h"
#include "store/jobs.h"
#include "store/limiters.h"
#include "store/listen.h"

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
            evd_engine_announce(e, atol(payload));
    }
}

void *evd_engine_keeper_main(void *arg)
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

void *evd_engine_sweeper_main(void *arg)
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
