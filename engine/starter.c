/*
 * The starter thread: it creates the evaluations that starts hand it, several in one
 * transaction (evald_create_many, migrations/0016), and in the same transaction claims
 * their first runs for idle workers of this process, whom it reserved beforehand and to
 * whom it then hands the jobs (the ready queue, engine/wake.c). A start costs one
 * share of a transaction instead of a transaction for the evaluation and one for each
 * first run's claim (docs/engine.md, "Starts").
 *
 * A start is answered when its batch has committed, with the batch's outcome for it: the
 * caller's `done` runs on the starter's thread (a REST start holds no HTTP thread
 * meanwhile: handlers/api.h, evd_req_defer), or the caller waits (evd_engine_create). A
 * batch that fails as a whole (an item PostgreSQL refuses) is written again one start at
 * a time, without claims, so that one refusal fails only its own start; a lost
 * connection fails the starts of its batch, as it failed one start before (the pool finds
 * the dead connection at its next use). The starter borrows a connection of the handlers'
 * pool for each batch, as the starts did before, so it adds none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/internal.h"
#include "store/db.h"

/* Starts written in one transaction at most. */
#define START_BATCH_MAX 64

struct pending_start {
    char id[48];
    char source_id[64];
    json_t *request; /* owned */
    json_t *runs;    /* owned */
    int concurrency;
    evd_engine_created_fn done;
    void *arg;
    int enqueued;
    enum evd_code rc;
    struct evd_err err;
};

static struct evd_store_new_eval item_of(const struct pending_start *p)
{
    return (struct evd_store_new_eval){p->id, p->request, p->concurrency, p->runs,
                                       p->source_id[0] != '\0' ? p->source_id : NULL};
}

/* The first runs a new evaluation may enqueue: one per open pair. */
static int first_runs(const struct pending_start *p)
{
    int pairs = (int)(json_array_size(p->runs) / 2);
    return p->concurrency < pairs ? p->concurrency : pairs;
}

/* Writes one start on the caller's connection, with no claims. */
static enum evd_code create_alone(struct evd_engine *e, PGconn *c, struct pending_start *p)
{
    const struct evd_store_new_eval item = item_of(p);
    p->rc = evd_store_evals_create(c, &item, 1, evd_now_ms(), e->owner, &p->enqueued, NULL,
                                   &p->err);
    return p->rc;
}

/* Answers a start and frees it. */
static void answer(struct pending_start *p)
{
    p->done(p->arg, p->rc, p->enqueued, &p->err);
    json_decref(p->request);
    json_decref(p->runs);
    free(p);
}

static void start_batch(struct evd_engine *e, struct pending_start **batch, size_t n)
{
    struct evd_store_new_eval items[START_BATCH_MAX];
    int enqueued[START_BATCH_MAX];
    struct evd_store_claimed claimed[START_BATCH_MAX];
    int want = 0;
    for (size_t i = 0; i < n; i++) {
        items[i] = item_of(batch[i]);
        want += first_runs(batch[i]);
    }
    if (want > START_BATCH_MAX)
        want = START_BATCH_MAX;
    struct evd_err err = {0};
    PGconn *c = evd_db_acquire(e->opts.db, &err);
    if (c == NULL) {
        for (size_t i = 0; i < n; i++) {
            batch[i]->rc = err.code != EVD_OK ? err.code : EVD_EDB;
            batch[i]->err = err;
        }
        return;
    }
    int reserved = evd_engine_reserve_idle(e, want);
    struct evd_store_claims claims = {.n = reserved,
                                      .lease_ms = e->opts.lease_ms,
                                      .max_attempts = EVD_MAX_ATTEMPTS,
                                      .out = claimed};
    enum evd_code rc =
        evd_store_evals_create(c, items, n, evd_now_ms(), e->owner, enqueued, &claims, &err);
    long announced = 0;
    if (rc == EVD_OK) {
        for (size_t i = 0; i < n; i++) {
            batch[i]->rc = EVD_OK;
            batch[i]->enqueued = enqueued[i];
            announced += enqueued[i];
        }
        announced -= (long)claims.got;
    } else if (n == 1) {
        batch[0]->rc = rc;
        batch[0]->err = err;
    } else {
        evd_log(EVD_LOG_WARN, "could not start a batch of evaluations; starting them one by one",
                "error", err.msg, NULL);
        claims.got = 0;
        for (size_t i = 0; i < n; i++)
            if (create_alone(e, c, batch[i]) == EVD_OK)
                announced += batch[i]->enqueued;
    }
    evd_db_release(e->opts.db, c);
    /* The claimed first runs go to the workers reserved for them; the jobs nobody
     * claimed are announced to the others, without the keeper's round trip. */
    evd_engine_hand_ready(e, reserved, claimed, claims.got);
    evd_engine_wake(e, announced);
}

void *evd_engine_starter_main(void *arg)
{
    struct evd_engine *e = arg;
    struct pending_start *batch[START_BATCH_MAX];
    for (;;) {
        /* Until the engine's stop closes the queue: the server answers the starts it
         * still has while the engine stops. */
        struct pending_start *p = evd_queue_pop_wait(&e->starts, NULL);
        if (p == NULL)
            break;
        size_t n = 0;
        batch[n++] = p;
        while (n < START_BATCH_MAX && (p = evd_queue_try_pop(&e->starts)) != NULL)
            batch[n++] = p;
        start_batch(e, batch, n);
        for (size_t i = 0; i < n; i++)
            answer(batch[i]);
    }
    return NULL;
}

void evd_engine_create_later(struct evd_engine *e, const struct evd_store_new_eval *item,
                             evd_engine_created_fn done, void *arg)
{
    struct pending_start *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        struct evd_err err = {0};
        evd_err_set(&err, EVD_ENOMEM, "out of memory");
        json_decref((json_t *)item->request);
        json_decref((json_t *)item->runs);
        done(arg, EVD_ENOMEM, 0, &err);
        return;
    }
    snprintf(p->id, sizeof(p->id), "%s", item->id);
    snprintf(p->source_id, sizeof(p->source_id), "%s", item->source_id ? item->source_id : "");
    p->request = (json_t *)item->request; /* stolen */
    p->runs = (json_t *)item->runs;
    p->concurrency = item->concurrency;
    p->done = done;
    p->arg = arg;
    if (e->threads_started && evd_queue_push(&e->starts, p))
        return;
    /* No starter (an engine without threads), or it has left: write it here. */
    PGconn *c = evd_db_acquire(e->opts.db, &p->err);
    if (c == NULL)
        p->rc = p->err.code != EVD_OK ? p->err.code : EVD_EDB;
    else if (create_alone(e, c, p) == EVD_OK)
        evd_engine_wake(e, p->enqueued);
    evd_db_release(e->opts.db, c);
    answer(p);
}
