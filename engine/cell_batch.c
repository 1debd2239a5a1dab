/*
 * The steps of case jobs written together (evd_engine_cell_step). A case job's step
 * writes the cell it finished and starts its next one; alone it is a transaction of about
 * 16 statements, most of which (the job locks, the spend, the analysis's mark, the
 * transaction itself) need not be paid a cell. The workers that step at the same moment
 * therefore hand their steps to one of them, the leader, which writes them all in one
 * statement (evd_store_cell_steps) on its own connection, then hands each its answer;
 * the steps that arrive meanwhile wait for the next leader. No thread waits for work and
 * a lone step goes at once: a batch is whatever arrived while the last one was written.
 * A batch that fails wrote nothing; its steps are then written one by one as before.
 */
#include "common/log.h"
#include "common/prometheus.h"
#include "common/util.h"
#include "engine/internal.h"
#include "store/db.h"
#include "store/experiments.h"

/* Steps in one statement at most. */
#define CELL_BATCH_MAX 64

/* A worker's step waiting for (or in) a batch, on its stack. */
struct cell_step {
    struct evd_store_cell_step_item item;
    enum evd_code rc;
    struct evd_err err;
    bool answered;
    struct cell_step *next;
};

/* Writes the steps of batch[0..n) on the leader's connection; each gets its answer. */
static void lead(struct evd_engine *e, struct evd_wconn *w, struct cell_step **batch, size_t n)
{
    struct evd_err err = {0};
    struct evd_store_cell_step_item items[CELL_BATCH_MAX];
    for (size_t i = 0; i < n; i++)
        items[i] = batch[i]->item;
    enum evd_code rc = EVD_EDB;
    PGconn *c = evd_wconn_get(w, &err);
    if (c != NULL) {
        evd_db_ensure(c); /* a restart of PostgreSQL during the last cell broke it */
        rc = evd_store_cell_steps(c, e->owner, e->opts.lease_ms, evd_now_ms(), EVD_MAX_ATTEMPTS,
                                  items, n, &err);
    }
    if (rc == EVD_OK) {
        evd_metrics_count("evald_experiment_step_batches_total", NULL, NULL, 1);
        for (size_t i = 0; i < n; i++) {
            batch[i]->item.next = items[i].next;
            batch[i]->rc = EVD_OK;
        }
        return;
    }
    if (c == NULL) {
        for (size_t i = 0; i < n; i++) {
            batch[i]->rc = rc;
            batch[i]->err = err;
        }
        return;
    }
    /* Nothing of the batch was written: each step alone, as a step of a judged experiment
     * goes (a deadlock with a finalization, say, is then at most one step's). */
    if (n > 1)
        evd_log(EVD_LOG_INFO, "a batch of experiment steps failed; writing them one by one",
                "error", err.msg, NULL);
    for (size_t i = 0; i < n; i++) {
        struct cell_step *s = batch[i];
        evd_db_ensure(c);
        s->rc = evd_store_cell_step(c, s->item.job_id, e->owner, e->opts.lease_ms, evd_now_ms(),
                                    EVD_MAX_ATTEMPTS, s->item.done, &s->item.next, &s->err);
    }
}

enum evd_code evd_engine_cell_step(struct evd_engine *e, struct evd_wconn *w, int64_t job_id,
                                   const struct evd_store_cell_done *done,
                                   struct evd_store_cell_next *next, struct evd_err *err)
{
    struct cell_step me = {.item = {.job_id = job_id, .done = done}};
    /* A waiting step holds no connection; the leader takes its own. */
    evd_wconn_put(w);
    pthread_mutex_lock(&e->cells_mu);
    *e->cells_tail = &me;
    e->cells_tail = &me.next;
    while (!me.answered) {
        if (e->cells_busy) {
            pthread_cond_wait(&e->cells_cv, &e->cells_mu);
            continue;
        }
        /* This worker leads: it takes what waits, its own step among the first 64. */
        struct cell_step *batch[CELL_BATCH_MAX];
        size_t n = 0;
        while (e->cells_head != NULL && n < CELL_BATCH_MAX) {
            batch[n++] = e->cells_head;
            e->cells_head = e->cells_head->next;
        }
        if (e->cells_head == NULL)
            e->cells_tail = &e->cells_head;
        e->cells_busy = true;
        pthread_mutex_unlock(&e->cells_mu);
        lead(e, w, batch, n);
        pthread_mutex_lock(&e->cells_mu);
        e->cells_busy = false;
        for (size_t i = 0; i < n; i++)
            batch[i]->answered = true;
        pthread_cond_broadcast(&e->cells_cv);
    }
    pthread_mutex_unlock(&e->cells_mu);
    *next = me.item.next;
    if (me.rc != EVD_OK && err != NULL)
        *err = me.err;
    return me.rc;
}
