/*
 * How the workers of a process wait for work and are woken: wake-ups announced for jobs
 * enqueued (the keeper's notifications, a process's own writes), the ready ring through
 * which a batch of starts hands the jobs it claimed to the idle workers it reserved, and
 * the fan-out of a backlog, one claim at a time. work_mu is a leaf lock (internal.h).
 */
#include <errno.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/internal.h"


/*
 * Waits until the keeper hands out a wake-up (a job was enqueued somewhere), a batch of
 * starts hands over a job it claimed (the ready queue), the timeout passes (a job may
 * have become due) or the engine stops. Only as many idle workers wake as jobs were
 * announced, instead of every LISTENing worker per NOTIFY. True when this worker took a
 * wake-up: it then owes claim_done its claim's end. A job handed over is left in the
 * ready queue for the caller to take (take_ready), with no wake-up taken for it.
 */
bool evd_engine_wait_for_work(struct evd_engine *e, int timeout_ms)
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
bool evd_engine_take_ready(struct evd_engine *e, struct evd_store_claimed *out)
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

void evd_engine_announce(struct evd_engine *e, long n)
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
        evd_engine_announce(e, n);
}

/*
 * The end of a claim of a worker that was idle (woken: it had taken a wake-up). When the
 * claim took a job and saw more due, one more worker wakes, but only when no wake-up is
 * still on its way to a claim: each job a start enqueues comes with a wake-up of its own,
 * and a claim that sees the next start's job while that job's worker is waking woke a
 * third, which found nothing (1,024 starts at once: 928 empty claims of 1,952). The last
 * claimer of a backlog always sees no other, so a backlog still fans out.
 */
void evd_engine_claim_done(struct evd_engine *e, bool woken, bool more)
{
    pthread_mutex_lock(&e->work_mu);
    if (woken)
        e->woken_claiming--;
    bool wake = more && e->work_tokens == 0 && e->woken_claiming == 0;
    pthread_mutex_unlock(&e->work_mu);
    if (wake)
        evd_engine_announce(e, 1);
}
