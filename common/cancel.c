/*
 * Cancel token: an atomic flag plus a mutex/condvar so that a trigger from another thread
 * also wakes a run sleeping in a retry backoff, and an optional deadline on the monotonic
 * clock from which the token counts as triggered (the engine's lease: a worker whose
 * lease is not renewed in time stops calling out even when the thread that renews it is
 * itself held up). The token outlives every run that uses it; the caller frees it. Lock
 * order: only `mu`, never held while calling out, except to the wakers, which only signal.
 */
#include "common/cancel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "common/util.h"

struct evd_cancel {
    atomic_bool set;
    _Atomic int64_t deadline; /* monotonic ms; 0 = none */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    struct evd_cancel_waker *wakers; /* under mu */
};

static void wake_all(struct evd_cancel *c)
{
    for (struct evd_cancel_waker *w = c->wakers; w != NULL; w = w->next)
        w->fn(w->arg);
}

void evd_cancel_watch(struct evd_cancel *c, struct evd_cancel_waker *w)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    w->next = c->wakers;
    c->wakers = w;
    pthread_mutex_unlock(&c->mu);
}

void evd_cancel_unwatch(struct evd_cancel *c, struct evd_cancel_waker *w)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    for (struct evd_cancel_waker **p = &c->wakers; *p != NULL; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    pthread_mutex_unlock(&c->mu);
}

int64_t evd_cancel_deadline(const struct evd_cancel *c)
{
    return c != NULL ? atomic_load(&((struct evd_cancel *)c)->deadline) : 0;
}

struct evd_cancel *evd_cancel_new(void)
{
    struct evd_cancel *c = calloc(1, sizeof(*c));
    pthread_condattr_t ca;
    if (c == NULL)
        return NULL;
    atomic_init(&c->set, false);
    atomic_init(&c->deadline, 0);
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    return c;
}

void evd_cancel_trigger(struct evd_cancel *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->set, true);
    pthread_cond_broadcast(&c->cv);
    wake_all(c);
    pthread_mutex_unlock(&c->mu);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool evd_cancel_is_set(const struct evd_cancel *c)
{
    if (c == NULL)
        return false;
    struct evd_cancel *m = (struct evd_cancel *)c;
    if (atomic_load(&m->set))
        return true;
    int64_t d = atomic_load(&m->deadline);
    if (d > 0 && mono_ms() >= d) {
        atomic_store(&m->set, true); /* once passed, a later deadline cannot undo it */
        return true;
    }
    return false;
}

bool evd_cancel_set_deadline(struct evd_cancel *c, int64_t mono)
{
    if (c == NULL)
        return false;
    pthread_mutex_lock(&c->mu);
    bool live = !evd_cancel_is_set(c);
    if (live)
        atomic_store(&c->deadline, mono);
    pthread_cond_broadcast(&c->cv); /* a sleeper recomputes its wake-up */
    wake_all(c);
    pthread_mutex_unlock(&c->mu);
    return live;
}

bool evd_cancel_sleep(struct evd_cancel *c, int64_t ms)
{
    if (ms <= 0)
        return evd_cancel_is_set(c);
    if (c == NULL) {
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0)
            ;
        return false;
    }
    struct timespec until;
    evd_clock_after(CLOCK_MONOTONIC, ms, &until);
    pthread_mutex_lock(&c->mu);
    while (!evd_cancel_is_set(c)) {
        /* Wake at the end of the sleep, or at the deadline when it comes first. */
        struct timespec wake = until;
        int64_t d = atomic_load(&c->deadline);
        struct timespec dl = {(time_t)(d / 1000), (long)(d % 1000) * 1000000L};
        bool deadline_first = d > 0 && (dl.tv_sec < until.tv_sec ||
                                        (dl.tv_sec == until.tv_sec && dl.tv_nsec < until.tv_nsec));
        if (deadline_first)
            wake = dl;
        if (pthread_cond_timedwait(&c->cv, &c->mu, &wake) != 0 && !deadline_first)
            break; /* ETIMEDOUT: the sleep is over */
    }
    bool set = evd_cancel_is_set(c);
    pthread_mutex_unlock(&c->mu);
    return set;
}

void evd_cancel_free(struct evd_cancel *c)
{
    if (c == NULL)
        return;
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
