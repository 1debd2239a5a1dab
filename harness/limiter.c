/*
 * The process's rate limiters: one struct evd_rl (harness/ratelimit.h) per provider and
 * model, created at the first call to it and kept until the process ends, each guarded
 * by its own mutex. Lock order: reg_mu (the list) is taken alone, or before an entry's mu
 * only while rendering the metrics, copying the view (GET /v1/providers), or reading and
 * setting the processes' split of a limit (the keeper); a cancel
 * token's mu before an entry's mu (the waker of a waiting call). An entry's mu is never
 * held across a call or an allocation of the view's JSON; waiting calls sleep on it.
 */
#include "harness/internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cancel.h"
#include "common/util.h"

/* A generous ceiling on one limiter's adaptive window (where it starts); the process's
 * workers bound the calls in flight first. */
#define WINDOW_MAX 4096

struct waiter;

struct evd_hx_limiter {
    struct evd_hx_limiter *next;
    char provider[72];
    char model[256];
    pthread_mutex_t mu;
    struct evd_rl rl;
    int64_t waited_ms;    /* what the calls that asked waited in all (under mu) */
    uint64_t reported_calls; /* rl.calls at the last evd_hx_limiter_demands (under mu) */
    struct waiter *queue; /* the calls waiting, first come first (under mu) */
};

/* Model ids come from requests: past this many limiters, further ones go unlimited. */
#define MAX_LIMITERS 1024

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct evd_hx_limiter *reg_head;
static size_t reg_count;

struct evd_hx_limiter *evd_hx_limiter_get(const struct evd_provider *pr, const char *model)
{
    const char *name = evd_provider_name(pr);
    if (model == NULL)
        model = "";
    pthread_mutex_lock(&reg_mu);
    struct evd_hx_limiter *l = reg_head;
    while (l != NULL && (strcmp(l->provider, name) != 0 || strcmp(l->model, model) != 0))
        l = l->next;
    if (l == NULL && reg_count < MAX_LIMITERS && (l = calloc(1, sizeof(*l))) != NULL) {
        reg_count++;
        snprintf(l->provider, sizeof(l->provider), "%s", name);
        snprintf(l->model, sizeof(l->model), "%s", model);
        pthread_mutex_init(&l->mu, NULL);
        double rpm = 0, tpm = 0;
        evd_provider_rate(pr, model, &rpm, &tpm);
        uint64_t seed = (uint64_t)evd_mono_ms() ^ (uint64_t)(uintptr_t)l;
        evd_rl_init(&l->rl, rpm, tpm, WINDOW_MAX, seed, evd_mono_ms());
        l->next = reg_head;
        reg_head = l;
    }
    pthread_mutex_unlock(&reg_mu);
    return l;
}

void evd_hx_limiter_forget(void)
{
    pthread_mutex_lock(&reg_mu);
    while (reg_head != NULL) {
        struct evd_hx_limiter *l = reg_head;
        reg_head = l->next;
        pthread_mutex_destroy(&l->mu);
        free(l);
    }
    reg_count = 0;
    pthread_mutex_unlock(&reg_mu);
}

/*
 * The calls that wait for a limiter queue up in arrival order, and only the first asks the
 * limiter when it may go; the others sleep until they come first. A thousand calls that
 * each asked again every few milliseconds (the spacing of requests under a limit) cost more
 * CPU than everything else the process did. Each waiter sleeps on its own condition
 * variable: the head is woken when its time comes, when a call ends (a slot or a new limit)
 * or by its cancel token; the others when they come first or by their tokens, and at
 * least every WAITER_NAP_MS to look at their deadlines.
 */
#define HEAD_NAP_MS 200
#define WAITER_NAP_MS 1000

struct waiter {
    pthread_cond_t cv; /* CLOCK_MONOTONIC; waited on with the limiter's mu */
    struct waiter *next;
    struct evd_hx_limiter *l;
};

/* The cancel token's waker: takes the limiter's mu (never held while a token's mu is
 * taken), so the signal cannot fall between the waiter's look at its token and its
 * wait. */
static void wake_waiter(void *arg)
{
    struct waiter *w = arg;
    pthread_mutex_lock(&w->l->mu);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->l->mu);
}

static void timed_wait(struct waiter *w, int64_t ms)
{
    struct timespec until;
    evd_clock_after(CLOCK_MONOTONIC, ms, &until);
    pthread_cond_timedwait(&w->cv, &w->l->mu, &until);
}

enum evd_code evd_hx_limiter_wait(struct evd_hx_limiter *l, double est_tokens,
                                  int64_t deadline_ms, struct evd_cancel *cancel,
                                  int64_t *waited_ms)
{
    if (l == NULL)
        return EVD_OK;
    int64_t t0 = evd_mono_ms();
    pthread_mutex_lock(&l->mu);
    if (l->queue == NULL && evd_rl_acquire(&l->rl, t0, est_tokens) == 0) {
        pthread_mutex_unlock(&l->mu);
        return EVD_OK; /* no wait */
    }
    pthread_mutex_unlock(&l->mu);

    struct waiter me = {.l = l};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&me.cv, &ca);
    pthread_condattr_destroy(&ca);
    struct evd_cancel_waker waker = {wake_waiter, &me, NULL};
    evd_cancel_watch(cancel, &waker);

    enum evd_code rc = EVD_OK;
    pthread_mutex_lock(&l->mu);
    struct waiter **tail = &l->queue;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = &me;
    l->rl.waiting++;
    for (;;) {
        if (evd_cancel_is_set(cancel)) {
            rc = EVD_ECANCELLED;
            break;
        }
        int64_t now = evd_mono_ms();
        if (now >= deadline_ms) {
            rc = EVD_ETIMEOUT;
            break;
        }
        int64_t nap = WAITER_NAP_MS;
        if (l->queue == &me) {
            int64_t d = evd_rl_acquire(&l->rl, now, est_tokens);
            if (d == 0)
                break;
            nap = d < HEAD_NAP_MS ? d : HEAD_NAP_MS;
        }
        if (nap > deadline_ms - now)
            nap = deadline_ms - now;
        timed_wait(&me, nap);
    }
    struct waiter **pp = &l->queue;
    while (*pp != &me)
        pp = &(*pp)->next;
    *pp = me.next;
    if (l->queue != NULL)
        pthread_cond_signal(&l->queue->cv); /* the next in line asks now */
    l->rl.waiting--;
    int64_t waited = evd_mono_ms() - t0;
    l->waited_ms += waited;
    pthread_mutex_unlock(&l->mu);

    evd_cancel_unwatch(cancel, &waker);
    pthread_cond_destroy(&me.cv);
    if (waited_ms != NULL)
        *waited_ms += waited;
    return rc;
}

double evd_hx_limiter_estimate(struct evd_hx_limiter *l, double raw_tokens)
{
    if (l == NULL)
        return raw_tokens;
    pthread_mutex_lock(&l->mu);
    double est = evd_rl_estimate(&l->rl, raw_tokens);
    pthread_mutex_unlock(&l->mu);
    return est;
}

void evd_hx_limiter_done(struct evd_hx_limiter *l, long status, double est_tokens,
                         double raw_tokens, double used_tokens,
                         const struct evd_rl_observed *obs)
{
    if (l == NULL)
        return;
    pthread_mutex_lock(&l->mu);
    evd_rl_done(&l->rl, evd_mono_ms(), status, est_tokens, used_tokens, obs);
    evd_rl_learn(&l->rl, raw_tokens, used_tokens);
    if (l->queue != NULL)
        pthread_cond_signal(&l->queue->cv); /* a slot is free, or the limits changed */
    pthread_mutex_unlock(&l->mu);
}

size_t evd_hx_limiter_demands(struct evd_hx_demand *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&reg_mu);
    for (struct evd_hx_limiter *l = reg_head; l != NULL && n < max; l = l->next) {
        pthread_mutex_lock(&l->mu);
        if (l->rl.rpm > 0 || l->rl.tpm > 0) {
            struct evd_hx_demand *d = &out[n++];
            memcpy(d->provider, l->provider, sizeof(d->provider));
            memcpy(d->model, l->model, sizeof(d->model));
            uint64_t sent = l->rl.calls - l->reported_calls;
            d->demand = l->rl.waiting + (sent > INT32_MAX / 2 ? INT32_MAX / 2 : (int)sent);
            l->reported_calls = l->rl.calls;
        }
        pthread_mutex_unlock(&l->mu);
    }
    pthread_mutex_unlock(&reg_mu);
    return n;
}

void evd_hx_limiter_set_part(const char *provider, const char *model, double part)
{
    pthread_mutex_lock(&reg_mu);
    struct evd_hx_limiter *l = reg_head;
    while (l != NULL && (strcmp(l->provider, provider) != 0 || strcmp(l->model, model) != 0))
        l = l->next;
    if (l != NULL) {
        pthread_mutex_lock(&l->mu);
        evd_rl_set_part(&l->rl, evd_mono_ms(), part);
        if (l->queue != NULL)
            pthread_cond_signal(&l->queue->cv); /* a larger part may let it go sooner */
        pthread_mutex_unlock(&l->mu);
    }
    pthread_mutex_unlock(&reg_mu);
}

/* A Prometheus label value: backslash, quote and newline escaped (model ids come from
 * requests; provider names are letters, digits, '-', '_' and '.'). */
static void label_escape(const char *s, char *out, size_t outsz)
{
    size_t j = 0;
    for (; *s && j + 3 < outsz; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n') {
            out[j++] = '\\';
            out[j++] = *s == '\n' ? 'n' : *s;
        } else {
            out[j++] = *s;
        }
    }
    out[j] = '\0';
}

int evd_hx_limiter_render(struct evd_buf *out)
{
    static const struct {
        const char *name, *type, *help;
    } names[] = {
        {"evald_provider_inflight", "gauge", "provider calls sent and not yet answered"},
        {"evald_provider_waiting", "gauge", "provider calls waiting for the rate limiter"},
        {"evald_provider_window", "gauge", "provider calls the adaptive window allows in flight"},
        {"evald_provider_share", "gauge",
         "share of its part of a known limit this process takes (cut by 429s from other "
         "clients)"},
        {"evald_provider_part", "gauge",
         "part of a known limit this process takes by agreement with the other processes of "
         "its database"},
        {"evald_provider_limit_rpm", "gauge", "requests per minute in force (0: none known)"},
        {"evald_provider_limit_tpm", "gauge", "tokens per minute in force (0: none known)"},
        {"evald_provider_calls_total", "counter", "provider calls the rate limiter let through"},
        {"evald_provider_throttled_total", "counter", "provider answers of 429"},
        {"evald_provider_limiter_wait_seconds_total", "counter",
         "time provider calls waited for the rate limiter before they were sent"},
    };
    int rc = 0;
    pthread_mutex_lock(&reg_mu);
    for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
        rc |= evd_buf_printf(out, "# HELP %s %s.\n# TYPE %s %s\n", names[n].name, names[n].help,
                             names[n].name, names[n].type);
        for (struct evd_hx_limiter *l = reg_head; l != NULL; l = l->next) {
            pthread_mutex_lock(&l->mu);
            double v = 0;
            switch (n) {
            case 0: v = l->rl.inflight; break;
            case 1: v = l->rl.waiting; break;
            case 2: v = evd_rl_window(&l->rl); break;
            case 3: v = l->rl.share; break;
            case 4: v = l->rl.part; break;
            case 5: v = l->rl.rpm; break;
            case 6: v = l->rl.tpm; break;
            case 7: v = (double)l->rl.calls; break;
            case 8: v = (double)l->rl.throttled; break;
            default: v = (double)l->waited_ms / 1000.0; break;
            }
            pthread_mutex_unlock(&l->mu);
            char model[2 * sizeof(l->model)];
            label_escape(l->model, model, sizeof(model));
            rc |= evd_buf_printf(out, "%s{provider=\"%s\",model=\"%s\"} %.17g\n", names[n].name,
                                 l->provider, model, v);
        }
    }
    pthread_mutex_unlock(&reg_mu);
    return rc;
}

/* One limiter's figures, copied under its mutex. */
struct snap {
    char provider[72];
    char model[256];
    int inflight, waiting, window;
    double share, part, rpm, tpm, cfg_rpm, cfg_tpm;
    uint64_t calls, throttled;
    int64_t hold_ms, waited_ms;
};

static int snap_cmp(const void *a, const void *b)
{
    const struct snap *x = a, *y = b;
    int c = strcmp(x->provider, y->provider);
    return c != 0 ? c : strcmp(x->model, y->model);
}

/* A limit as JSON: null when none is known (new reference). */
static json_t *limit_json(double v)
{
    return v > 0 ? json_real(v) : json_null();
}

json_t *evd_hx_limiter_view(void)
{
    json_t *arr = json_array();
    struct snap *snaps = NULL;
    size_t n = 0;
    if (arr == NULL)
        return NULL;
    pthread_mutex_lock(&reg_mu);
    if (reg_count > 0)
        snaps = calloc(reg_count, sizeof(*snaps));
    int64_t now = evd_mono_ms();
    for (struct evd_hx_limiter *l = reg_head; l != NULL && snaps != NULL; l = l->next) {
        struct snap *sn = &snaps[n++];
        memcpy(sn->provider, l->provider, sizeof(sn->provider));
        memcpy(sn->model, l->model, sizeof(sn->model));
        pthread_mutex_lock(&l->mu);
        sn->inflight = l->rl.inflight;
        sn->waiting = l->rl.waiting;
        sn->window = evd_rl_window(&l->rl);
        sn->share = l->rl.share;
        sn->part = l->rl.part;
        sn->rpm = l->rl.rpm;
        sn->tpm = l->rl.tpm;
        sn->cfg_rpm = l->rl.cfg_rpm;
        sn->cfg_tpm = l->rl.cfg_tpm;
        sn->calls = l->rl.calls;
        sn->throttled = l->rl.throttled;
        sn->hold_ms = l->rl.hold_until_ms > now ? l->rl.hold_until_ms - now : 0;
        sn->waited_ms = l->waited_ms;
        pthread_mutex_unlock(&l->mu);
    }
    bool short_of_memory = reg_count > 0 && snaps == NULL;
    pthread_mutex_unlock(&reg_mu);
    if (short_of_memory) {
        json_decref(arr);
        return NULL;
    }
    if (n > 1)
        qsort(snaps, n, sizeof(*snaps), snap_cmp);
    int64_t wall = evd_now_ms();
    for (size_t i = 0; i < n; i++) {
        const struct snap *sn = &snaps[i];
        json_t *e = json_pack(
            "{s:s,s:s,s:i,s:i,s:i,s:f,s:f,s:o,s:o,s:b,s:b,s:I,s:I,s:I,s:o,s:I}", "provider",
            sn->provider, "model", sn->model, "in_flight", sn->inflight, "waiting", sn->waiting,
            "window", sn->window, "share", sn->share, "part", sn->part, "limit_rpm",
            limit_json(sn->rpm),
            "limit_tpm", limit_json(sn->tpm),
            "rpm_configured", sn->cfg_rpm > 0, "tpm_configured", sn->cfg_tpm > 0, "calls",
            (json_int_t)sn->calls, "throttled", (json_int_t)sn->throttled, "hold_ms",
            (json_int_t)sn->hold_ms, "held_until",
            sn->hold_ms > 0 ? json_integer((json_int_t)(wall + sn->hold_ms)) : json_null(),
            "limiter_wait_ms", (json_int_t)sn->waited_ms);
        if (e == NULL || json_array_append_new(arr, e) != 0) {
            json_decref(arr);
            arr = NULL;
            break;
        }
    }
    free(snaps);
    return arr;
}
