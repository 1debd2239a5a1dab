/*
 * Execution of one claimed run job, in three phases:
 *   1. start the attempt: in a transaction holding the evaluation lock, skip a job
 *      whose run or evaluation is already terminal, fail a run whose attempts are
 *      exhausted, else mark it running with attempt+1 and commit;
 *   2. run the agent turn (harness) and the evaluator with no lock held, the job
 *      lease renewed by the keeper and a cancel token registered in-flight (a run of a
 *      re-scored evaluation runs only the evaluator, on its stored agent turn:
 *      engine/rescore.c);
 *   3. write the outcome only if the run is still running with this attempt (a
 *      worker whose lease was taken over, or whose evaluation was cancelled, writes
 *      nothing), and advance the evaluation, in one transaction.
 * A shutdown hands the run back instead: pending again, attempt not counted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/trace.h"
#include "common/util.h"
#include "domain/plan.h"
#include "domain/request.h"
#include "domain/run.h"
#include "engine/internal.h"
#include "engine/lifecycle.h"
#include "engine/scenario.h"
#include "store/db.h"
#include "store/jobs.h"

/* Phase 1 of a run the claim did not start (someone held it): the kind's statements of
 * evd_attempt_start, with a->kind the struct evd_store_eval to fill. */
static enum evd_code run_load(PGconn *c, struct evd_attempt *a, enum evd_unit_state *state,
                              int *used, struct evd_err *err)
{
    struct evd_store_eval *ev = a->kind;
    enum evd_code rc = evd_store_eval_get(c, a->job->evaluation_id, true, ev, err);
    if (rc != EVD_OK)
        return rc;
    if (evd_engine_status_terminal(ev->status)) {
        *state = EVD_UNIT_GONE; /* deleted or finished meanwhile */
        return EVD_OK;
    }
    struct evd_store_run_state st;
    if (evd_store_run_state(c, a->job->evaluation_id, a->position, &st, err) != EVD_OK)
        return evd_db_code(err);
    *state = evd_engine_status_terminal(st.status) ? EVD_UNIT_DONE : EVD_UNIT_OPEN;
    *used = st.attempt;
    return EVD_OK;
}

static enum evd_code run_settle(PGconn *c, struct evd_attempt *a, enum evd_unit_state state,
                                struct evd_err *err)
{
    enum evd_code rc = evd_store_job_delete(c, a->job->id, err);
    if (rc == EVD_OK && state == EVD_UNIT_DONE)
        rc = evd_engine_advance(c, a->job->evaluation_id, evd_now_ms(), err);
    return rc;
}

static enum evd_code run_exhaust(PGconn *c, struct evd_attempt *a, int used, const char *msg,
                                 struct evd_err *err)
{
    const char *id = a->job->evaluation_id;
    int64_t now = evd_now_ms();
    json_t *runs = evd_store_runs(c, id, false, err);
    json_t *run = json_array_get(runs, (size_t)a->position - 1);
    bool written = false, finalize = false;
    enum evd_code rc = EVD_OK;
    if (run == NULL)
        rc = err->code != EVD_OK ? err->code
                                 : evd_err_set(err, EVD_EINTERNAL, "run %d of %s not found",
                                               a->position, id);
    else if ((rc = evd_store_run_start(c, id, a->position, used, now, err)) == EVD_OK) {
        if (evd_run_fail(run, EVD_PHASE_SETUP, NULL, msg, now) != 0)
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        else if ((rc = evd_engine_write_run(c, id, a->position, used, run, NULL, &written,
                                            &finalize, now, err)) == EVD_OK &&
                 finalize)
            rc = evd_engine_advance(c, id, now, err);
    }
    json_decref(runs);
    return rc;
}

static enum evd_code run_begin(PGconn *c, struct evd_attempt *a, struct evd_err *err)
{
    return evd_store_run_start(c, a->job->evaluation_id, a->position, a->attempt, evd_now_ms(),
                               err);
}

static const struct evd_attempt_start_ops RUN_START = {
    .load = run_load,
    .settle = run_settle,
    .exhaust = run_exhaust,
    .begin = run_begin,
};

/* What a run's attempt is to the lifecycle (engine/lifecycle.h). */
struct run_ctx {
    const struct evd_scenario *scenario;
    json_t *run;
    bool rescore;
    int64_t started_at;
    struct evd_scenario_outcome out;
};

static void run_execute(struct evd_attempt *a)
{
    struct run_ctx *r = a->kind;
    char att[16];
    snprintf(att, sizeof(att), "%d", a->attempt);
    evd_log(EVD_LOG_DEBUG, "run started", "evaluation_id", a->subject_id, "run_id",
            json_string_value(json_object_get(r->run, "run_id")), "attempt", att, NULL);
    if (r->rescore)
        evd_engine_rescore_run(a->e, a->w, r->scenario, a->position, r->run, a->cancel, &r->out);
    else
        evd_scenario_run(a->e, a->w, r->scenario, r->run, a->cancel, r->started_at, &r->out);
    a->not_started = r->out.not_started;
    a->interrupted = r->out.interrupted;
}

static enum evd_code run_progress(PGconn *c, const struct evd_attempt *a, json_t *metrics,
                                  struct evd_err *err)
{
    return evd_store_run_progress(c, a->subject_id, a->position, a->attempt, metrics, err);
}

static enum evd_code run_hand_back(PGconn *c, const struct evd_attempt *a, struct evd_err *err)
{
    return evd_store_job_hand_back(c, a->job->id, a->e->owner, a->subject_id, a->position,
                                   a->attempt, err);
}

static const struct evd_attempt_ops RUN_OPS = {
    .what = "run",
    .id_key = "evaluation_id",
    .execute = run_execute,
    .progress = run_progress,
    .hand_back = run_hand_back,
};

/*
 * The stored request of a claimed run's evaluation, decoded (new reference): the claim
 * brought its text (migrations/0019), so a run reads nothing to start, and each run
 * decodes a private copy.
 */
static json_t *request_of(const struct evd_store_job *job, struct evd_err *err)
{
    json_error_t jerr;
    json_t *request = NULL;
    if (job->request == NULL)
        evd_err_set(err, EVD_EINTERNAL, "the claim of a run of %s brought no request",
                    job->evaluation_id);
    else if ((request = json_loads(job->request, 0, &jerr)) == NULL)
        evd_err_set(err, EVD_EINTERNAL, "stored request of %s cannot be decoded",
                    job->evaluation_id);
    return request;
}

static bool execute(struct evd_engine *e, struct evd_wconn *w, const struct evd_store_job *job,
                    int attempt, const struct evd_store_eval *evp, struct evd_handover *h,
                    struct evd_ahead_run *pre);
static void give_back_ahead(struct evd_engine *e, struct evd_wconn *w,
                            struct evd_ahead_run *pre);

/*
 * A run job and, after it, the runs that the batches writing its chain start ahead for
 * this worker (engine/internal.h), one after another, on the head's decoded request. Once
 * a run of the chain is not written (cancelled, given back, dropped), the runs after it
 * are given back without a call: none may go before it.
 */
static void execute_chain(struct evd_engine *e, struct evd_wconn *w,
                          const struct evd_store_job *head, int attempt,
                          const struct evd_store_eval *ev, struct evd_handover *h)
{
    evd_engine_chain(e, h, head->evaluation_id, head->run_position);
    bool go_on = execute(e, w, head, attempt, ev, h, NULL);
    struct evd_ahead_run next;
    while (evd_engine_next_ahead(e, h, &next)) {
        next.job.rescore = head->rescore;
        if (go_on)
            go_on = execute(e, w, &next.job, next.attempt, ev, h, &next);
        else
            give_back_ahead(e, w, &next);
    }
    evd_engine_chain(e, h, NULL, 0);
}

void evd_engine_process_job(struct evd_engine *e, struct evd_wconn *w,
                            const struct evd_store_job *job, struct evd_handover *h)
{
    struct evd_err err = {0};
    struct evd_store_eval ev = {0};
    PGconn *c = evd_wconn_get(w, &err);
    struct evd_attempt start = {.ops = &RUN_OPS, .e = e, .w = w, .job = job,
                                .subject_id = job->evaluation_id,
                                .position = job->run_position, .kind = &ev, .slot = -1};
    int attempt = c != NULL ? evd_attempt_start(&start, c, &RUN_START, &err) : 0;
    if (attempt > 0)
        execute_chain(e, w, job, attempt, &ev, h);
    else if (err.code != EVD_OK)
        evd_log(EVD_LOG_WARN, "could not start run", "evaluation_id", job->evaluation_id,
                "error", err.msg, NULL);
    evd_store_eval_clear(&ev);
}

void evd_engine_process_started(struct evd_engine *e, struct evd_wconn *w,
                                const struct evd_store_job *job, int attempt,
                                struct evd_handover *h)
{
    struct evd_err err = {0};
    struct evd_store_eval ev = {0};
    snprintf(ev.id, sizeof(ev.id), "%s", job->evaluation_id);
    ev.rescore = job->rescore;
    if ((ev.request = request_of(job, &err)) == NULL) {
        evd_log(EVD_LOG_WARN, "could not start run", "evaluation_id", job->evaluation_id,
                "error", err.msg, NULL);
        struct evd_attempt a = {.ops = &RUN_OPS, .e = e, .w = w, .job = job,
                                .subject_id = job->evaluation_id,
                                .position = job->run_position, .attempt = attempt};
        evd_attempt_hand_back(&a);
        return;
    }
    execute_chain(e, w, job, attempt, &ev, h);
    evd_store_eval_clear(&ev);
}

/* Gives back a run started ahead that is not executed after all (pending again, the
 * attempt not counted, its job free: the claim that finds it puts it back in its turn,
 * migrations/0027) and ends its registration. NULL: nothing. */
static void give_back_ahead(struct evd_engine *e, struct evd_wconn *w, struct evd_ahead_run *pre)
{
    if (pre == NULL)
        return;
    struct evd_attempt a = {.ops = &RUN_OPS, .e = e, .w = w, .job = &pre->job,
                            .subject_id = pre->job.evaluation_id,
                            .position = pre->job.run_position, .attempt = pre->attempt};
    evd_attempt_hand_back(&a);
    evd_engine_inflight_remove(e, pre->slot);
    evd_cancel_free(pre->cancel);
}

/* Phases 2 and 3 of a run whose attempt `attempt` has started; `evp` has its evaluation's
 * id and request; `pre`: a run started ahead, registered in flight by its batch (NULL:
 * registered here). The outcome goes to the writer thread; false when there was none to
 * write (the chain stops there). */
static bool execute(struct evd_engine *e, struct evd_wconn *w, const struct evd_store_job *job,
                    int attempt, const struct evd_store_eval *evp, struct evd_handover *h,
                    struct evd_ahead_run *pre)
{
    struct evd_err err = {0};
    const struct evd_store_eval ev = *evp;
    struct evd_request_view view;
    struct run_ctx r = {.rescore = ev.rescore};
    bool written = false;

    if (evd_request_view_trusted(ev.request, &view, &err) != EVD_OK) {
        evd_log(EVD_LOG_ERROR, "stored request cannot be decoded", "evaluation_id", ev.id, "error",
                err.msg, NULL);
        give_back_ahead(e, w, pre);
        return false;
    }
    struct evd_plan_entry entry = evd_plan_entry_at(view.order, (size_t)job->run_position - 1);
    if ((r.run = evd_run_new(ev.id, &entry)) == NULL) {
        give_back_ahead(e, w, pre); /* a head's lease runs out and it is tried again */
        return false;
    }
    const json_t *variant = entry.role == EVD_ROLE_CONTROL ? view.control : view.treatment;
    json_t *sp = json_object_get(variant, "system_prompt");
    r.started_at = evd_now_ms();
    evd_run_mark_running(r.run, r.started_at);

    const char *run_id = json_string_value(json_object_get(r.run, "run_id"));
    struct evd_scenario_trace trace = {
        .owner_key = "evald.evaluation_id",
        .owner_id = ev.id,
        .run_id = run_id,
        .label = json_string_value(json_object_get(variant, "label")),
        .role = entry.role == EVD_ROLE_CONTROL ? "control" : "treatment",
        .repeat = (int)entry.iteration,
        .attempt = attempt,
    };
    evd_trace_for_run(ev.id, run_id, attempt, &trace.ctx);
    struct evd_attempt a = {
        .ops = &RUN_OPS,
        .e = e,
        .w = w,
        .job = job,
        .subject_id = ev.id,
        .position = job->run_position,
        .attempt = attempt,
        .timeout_ms = (int64_t)view.limits.scenario_timeout_seconds * 1000,
        .trace = &trace.ctx,
        .keep_slot = true, /* the keeper renews the lease until the writer has written it */
        .kind = &r,
        .slot = pre != NULL ? pre->slot : -1,
        .cancel = pre != NULL ? pre->cancel : NULL,
        .registered = pre != NULL,
    };
    const struct evd_scenario scenario = {
        .subject_id = ev.id,
        .session_id = json_string_value(json_object_get(r.run, "session_id")),
        .prompt = json_string_value(json_object_get(variant, "prompt")),
        .system_prompt = json_is_string(sp) ? json_string_value(sp) : NULL,
        .model = view.model,
        .limits_json = json_object_get(ev.request, "limits"),
        .limits = &view.limits,
        .functions = view.functions,
        .output = view.output,
        .metadata = view.metadata,
        .evaluator_function_id = view.evaluator_function_id,
        .evaluator_arguments = view.evaluator_arguments,
        .progress = evd_attempt_progress,
        .progress_ctx = &a,
        .trace = &trace,
    };
    r.scenario = &scenario;

    switch (evd_attempt_run(&a)) {
    case EVD_ATTEMPT_FINISHED:
        break;
    case EVD_ATTEMPT_TIMED_OUT: {
        int64_t now = evd_now_ms();
        char msg[128];
        snprintf(msg, sizeof(msg), "run exceeded %llus wall-clock limit",
                 (unsigned long long)view.limits.scenario_timeout_seconds);
        json_t *fresh = evd_run_new(ev.id, &entry);
        if (fresh == NULL)
            goto out;
        evd_run_mark_running(fresh, r.started_at);
        evd_run_record_outcome(fresh, NULL, r.out.metrics, (uint64_t)(now - r.started_at), now);
        evd_run_fail(fresh, EVD_PHASE_AWAIT, NULL, msg, now);
        json_decref(r.run);
        r.run = fresh;
        break;
    }
    case EVD_ATTEMPT_CANCELLED:   /* the run was cancelled, or the job taken away */
    case EVD_ATTEMPT_HANDED_BACK: /* another attempt runs it */
    case EVD_ATTEMPT_DROPPED:     /* the lease runs out and the run is tried again */
        goto out;
    }
    /* The writer thread writes it, with other workers' runs, in one transaction; this
     * worker claims its next run meanwhile. */
    char *record =
        evd_store_finish_record(ev.id, job->run_position, attempt, r.run, r.out.transcript);
    if (record != NULL) {
        written = true;
        bool quick = evd_now_ms() - r.started_at < EVD_AHEAD_QUICK_MS;
        evd_engine_write_later(e, record, ev.id,
                               json_string_value(json_object_get(r.run, "status")), a.slot,
                               quick, h);
        a.slot = -1; /* the writer's now */
    } else
        evd_log(EVD_LOG_WARN, "could not record run", "evaluation_id", ev.id, "error",
                "out of memory", NULL);
out:
    evd_attempt_clear(&a);
    evd_scenario_outcome_clear(&r.out);
    json_decref(r.run);
    return written;
}
