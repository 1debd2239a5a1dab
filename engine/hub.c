/*
 * The change hub of a process: subscriptions (SSE streams, the live comparison) to
 * evaluation, session and experiment ids, moved when the keeper hears a change of one of
 * their ids from any process (EVD_CHANNEL_EVENTS). hub_mu is a leaf lock (internal.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "engine/internal.h"

/* Wakes the waiters only when a subscription moved: every run's start and finish is
 * published, and waking the SSE hub's thread for each of a thousand evaluations nobody
 * watched cost it a context switch apiece. */
void evd_engine_publish(struct evd_engine *e, const char *evaluation_id)
{
    bool moved = false;
    pthread_mutex_lock(&e->hub_mu);
    for (struct evd_subscription *s = e->subs; s; s = s->next)
        for (size_t i = 0; i < s->nids; i++)
            if (strcmp(s->ids[i], evaluation_id) == 0) {
                s->version++;
                moved = true;
                break;
            }
    if (moved) {
        e->hub_gen++;
        pthread_cond_broadcast(&e->hub_cv);
    }
    pthread_mutex_unlock(&e->hub_mu);
}

struct evd_subscription *evd_engine_subscribe(struct evd_engine *e, const char *evaluation_id)
{
    return evd_engine_subscribe_many(e, &evaluation_id, 1);
}

struct evd_subscription *evd_engine_subscribe_many(struct evd_engine *e, const char *const *ids,
                                                   size_t n)
{
    struct evd_subscription *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    for (size_t i = 0; i < n && s->nids < EVD_SUB_IDS_MAX; i++)
        snprintf(s->ids[s->nids++], sizeof(s->ids[0]), "%s", ids[i]);
    pthread_mutex_lock(&e->hub_mu);
    s->next = e->subs;
    e->subs = s;
    pthread_mutex_unlock(&e->hub_mu);
    return s;
}

int evd_engine_wait(struct evd_engine *e, struct evd_subscription *s, int timeout_ms)
{
    struct timespec until;
    evd_clock_after(CLOCK_REALTIME, timeout_ms, &until);
    int rc = 0;
    pthread_mutex_lock(&e->hub_mu);
    while (s->version == s->seen && !atomic_load(&e->stopping))
        if (pthread_cond_timedwait(&e->hub_cv, &e->hub_mu, &until) == ETIMEDOUT)
            break;
    if (atomic_load(&e->stopping))
        rc = -1;
    else if (s->version != s->seen)
        rc = 1;
    s->seen = s->version;
    pthread_mutex_unlock(&e->hub_mu);
    return rc;
}

int evd_engine_wait_any(struct evd_engine *e, uint64_t *gen, int timeout_ms)
{
    struct timespec until;
    evd_clock_after(CLOCK_REALTIME, timeout_ms, &until);
    int rc = 0;
    pthread_mutex_lock(&e->hub_mu);
    while (e->hub_gen == *gen && !atomic_load(&e->stopping))
        if (pthread_cond_timedwait(&e->hub_cv, &e->hub_mu, &until) == ETIMEDOUT)
            break;
    if (atomic_load(&e->stopping))
        rc = -1;
    else if (e->hub_gen != *gen)
        rc = 1;
    *gen = e->hub_gen;
    pthread_mutex_unlock(&e->hub_mu);
    return rc;
}

void evd_engine_nudge(struct evd_engine *e)
{
    pthread_mutex_lock(&e->hub_mu);
    e->hub_gen++;
    pthread_cond_broadcast(&e->hub_cv);
    pthread_mutex_unlock(&e->hub_mu);
}

void evd_engine_unsubscribe(struct evd_engine *e, struct evd_subscription *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&e->hub_mu);
    for (struct evd_subscription **p = &e->subs; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    pthread_mutex_unlock(&e->hub_mu);
    free(s);
}

