/*
 * The handler pool; see pool.h. One mutex guards the queue (a singly linked list with a
 * tail, and the end of its urgent prefix) and the counters; the threads wait on one
 * condition variable. A job runs with no lock held.
 */
#include "server/pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/prometheus.h"

struct evd_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct evd_pool_job *head, *tail;
    struct evd_pool_job *urgent_tail; /* the last urgent job queued, or NULL */
    size_t queued, running;
    /* The gauges of queued and running jobs ("" for none); set under mu, so that they
     * follow the counts in order. */
    char queued_gauge[96], busy_gauge[96];
    bool stopping;
    unsigned nthreads;
    pthread_t *threads;
};

/* Publishes the counts (under mu). */
static void gauges(struct evd_pool *p)
{
    if (p->queued_gauge[0] == '\0')
        return;
    evd_metrics_gauge(p->queued_gauge, (double)p->queued);
    evd_metrics_gauge(p->busy_gauge, (double)p->running);
}

static void *pool_main(void *arg)
{
    struct evd_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->head == NULL && !p->stopping)
            pthread_cond_wait(&p->cv, &p->mu);
        struct evd_pool_job *job = p->head;
        if (job == NULL)
            break; /* stopping, and nothing left */
        p->head = job->next;
        if (p->head == NULL)
            p->tail = NULL;
        if (p->urgent_tail == job)
            p->urgent_tail = NULL;
        p->queued--;
        p->running++;
        gauges(p);
        pthread_mutex_unlock(&p->mu);
        job->next = NULL;
        job->run(job);
        pthread_mutex_lock(&p->mu);
        p->running--;
        gauges(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct evd_pool *evd_pool_start(unsigned threads, const char *metrics, struct evd_err *err)
{
    struct evd_pool *p = calloc(1, sizeof(*p));
    if (threads == 0)
        threads = 1;
    if (p != NULL)
        p->threads = calloc(threads, sizeof(*p->threads));
    if (p == NULL || p->threads == NULL) {
        free(p);
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    if (metrics != NULL) {
        snprintf(p->queued_gauge, sizeof(p->queued_gauge), "%s_queued", metrics);
        snprintf(p->busy_gauge, sizeof(p->busy_gauge), "%s_busy", metrics);
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    gauges(p);
    for (unsigned i = 0; i < threads; i++) {
        if (pthread_create(&p->threads[i], NULL, pool_main, p) != 0)
            break;
        p->nthreads++;
    }
    if (p->nthreads == 0) {
        evd_pool_stop(p);
        evd_err_set(err, EVD_EINTERNAL, "could not start the handler threads");
        return NULL;
    }
    if (p->nthreads < threads) {
        char want[16], got[16];
        snprintf(want, sizeof(want), "%u", threads);
        snprintf(got, sizeof(got), "%u", p->nthreads);
        evd_log(EVD_LOG_WARN, "started fewer handler threads than configured", "configured", want,
                "started", got, NULL);
    }
    return p;
}

void evd_pool_submit(struct evd_pool *p, struct evd_pool_job *job, bool urgent)
{
    pthread_mutex_lock(&p->mu);
    if (urgent) {
        /* After the urgent jobs already queued, before every other. */
        struct evd_pool_job *after = p->urgent_tail;
        job->next = after != NULL ? after->next : p->head;
        if (after != NULL)
            after->next = job;
        else
            p->head = job;
        if (job->next == NULL)
            p->tail = job;
        p->urgent_tail = job;
    } else {
        job->next = NULL;
        if (p->tail != NULL)
            p->tail->next = job;
        else
            p->head = job;
        p->tail = job;
    }
    p->queued++;
    gauges(p);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void evd_pool_stats(struct evd_pool *p, size_t *queued, size_t *running)
{
    pthread_mutex_lock(&p->mu);
    *queued = p->queued;
    *running = p->running;
    pthread_mutex_unlock(&p->mu);
}

void evd_pool_stop(struct evd_pool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p);
}
