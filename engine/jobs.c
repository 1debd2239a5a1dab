/*
 * The kinds of job the workers execute: one table, one entry a kind (internal.h). The
 * claim (evald_claim) is the same for every kind; what differs is the execution, and
 * where its outcome is written.
 */
#include <string.h>

#include "engine/internal.h"

static void process_run(struct evd_engine *e, struct evd_wconn *w, const struct evd_store_job *job,
                        int attempt, struct evd_handover *h)
{
    if (attempt > 0)
        evd_engine_process_started(e, w, job, attempt, h);
    else
        evd_engine_process_job(e, w, job, h);
}

static void process_session(struct evd_engine *e, struct evd_wconn *w, const struct evd_store_job *job,
                            int attempt, struct evd_handover *h)
{
    (void)attempt, (void)h;
    evd_engine_process_session(e, w, job);
}

static void process_cell(struct evd_engine *e, struct evd_wconn *w, const struct evd_store_job *job,
                         int attempt, struct evd_handover *h)
{
    (void)attempt, (void)h;
    evd_engine_process_cell(e, w, job);
}

const struct evd_job_kind evd_engine_kinds[] = {
    {"run", process_run},         /* an evaluation run (engine/runner.c) */
    {"session", process_session}, /* a session turn (engine/session_runner.c) */
    {"cell", process_cell},       /* an experiment case (engine/cells.c) */
};
const size_t evd_engine_nkinds = sizeof(evd_engine_kinds) / sizeof(evd_engine_kinds[0]);
