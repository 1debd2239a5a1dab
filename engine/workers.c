/*
 * The workers: each claims due jobs (FOR UPDATE SKIP LOCKED + lease) and hands every job
 * it claims to the entry of its kind in the table the engine was started with
 * (e->kinds, engine/jobs.c); an idle worker sleeps until work is announced
 * (engine/wake.c). A worker knows no kind by name: kinds plug into the run lifecycle
 * (engine/lifecycle.h), not into this loop.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/internal.h"
#include "store/jobs.h"

/* A few workers look for due work every second (leases that ran out, retries that came
 * due); the others sleep until jobs are announced or another worker claimed one. */
#define EVD_POLLERS 4

/* The entry of kind `name`, or NULL (a newer evald's kind: the job is left alone). */
static const struct evd_job_kind *kind_of(const struct evd_engine *e, const char *name)
{
    for (size_t i = 0; i < e->nkinds; i++)
        if (strcmp(e->kinds[i].name, name) == 0)
            return &e->kinds[i];
    return NULL;
}

void *evd_engine_worker_main(void *arg)
{
    struct worker_arg *me = arg;
    struct evd_engine *e = me->e;
    struct evd_wconn w = {e, NULL};
    /* This worker's finished run with the writer, and what the writer's batch claimed for
     * it. At the start only the first worker looks for due work (a restart finds the jobs
     * a crash left behind; a claim that sees more wakes the next worker, and so on): a
     * thousand workers each claiming at once found nothing and held up start-up. */
    struct evd_handover h = {.next = me->index == 0 ? EVD_NEXT_UNKNOWN : EVD_NEXT_NOTHING};
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
        } else if (!atomic_load(&e->stopping) && evd_engine_take_ready(e, &ready)) {
            /* Claimed by a batch of starts for an idle worker. (One that waited in the
             * queue past its lease's margin stops at once and is handed back: its
             * deadline counts from the claim.) */
            if (woken)
                evd_engine_claim_done(e, true, false);
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
                woken = evd_engine_wait_for_work(e, idle_ms);
                idle = true;
                continue;
            }
            PGconn *c = evd_wconn_get(&w, &err);
            if (c == NULL) {
                if (woken)
                    evd_engine_claim_done(e, true, false);
                woken = evd_engine_wait_for_work(e, 500); /* the database is away: try again */
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
                evd_engine_claim_done(e, woken, took && idle && job.more);
            woken = false;
        }
        if (took) {
            idle = false;
            /* One path for every kind: claimed, then executed by its entry, which holds
             * the connection only while it talks to the database. */
            const struct evd_job_kind *kind = kind_of(e, job.kind);
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
            woken = evd_engine_wait_for_work(e, 500);
            continue;
        }
        /* Nothing due: sleep until a job is announced, or (a poller) look again in a
         * second. */
        woken = evd_engine_wait_for_work(e, idle_ms);
        idle = true;
    }
    evd_wconn_put(&w);
    evd_engine_worker_done(e, &h);
    return NULL;
}
