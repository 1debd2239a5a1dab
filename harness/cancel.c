/*
 * Cancel token: an atomic flag plus a mutex/condvar so that a trigger from another thread
 * also wakes a run sleeping in a retry backoff. The token outlives every run that uses it;
 * the caller frees it. Lock order: only `mu`, never held while calling out.
 */
#include "harness/harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

struct evd_cancel {
    atomic_bool set;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
};

struct evd_cancel *evd_cancel_new(void)
{
    struct evd_cancel *c = calloc(1, sizeof(*c));
    pthread_condattr_t ca;
    if (c == NULL)
        return NULL;
    atomic_init(&c->set, false);
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
    pthread_mutex_unlock(&c->mu);
}

bool evd_cancel_is_set(const struct evd_cancel *c)
{
    return c != NULL && atomic_load(&((struct evd_cancel *)c)->set);
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
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&c->mu);
    while (!atomic_load(&c->set)) {
        if (pthread_cond_timedwait(&c->cv, &c->mu, &until) != 0)
            break; /* ETIMEDOUT */
    }
    bool set = atomic_load(&c->set);
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
