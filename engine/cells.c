/*
 * Execution of one claimed case job of an experiment (kind 'cell'): the case's cells, one
 * after another in the planned order (domain/plan.h), then the next case's, each in three
 * phases like an evaluation run (runner.c):
 *   1. evald_cell_next starts the next open cell with attempt+1 and renews the job's
 *      lease; when the case is done, the job moves on to the next case to dispatch and
 *      starts its first cell, or ends when none is left (the experiment is finished when
 *      nothing is left to run);
 *   2. the scenario (scenario.h) with no lock held, the cell's templates rendered for the
 *      case, a cancel token registered in flight under the experiment id;
 *   3. evald_cell_finish writes the run if it still runs with this attempt, with the
 *      case's analysis cells recomputed from its runs, and marks the analysis out of date.
 * A shutdown or a lost lease hands the running cell back (attempt not counted).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/trace.h"
#include "common/prometheus.h"
#include "common/util.h"
#include "domain/analysis.h"
#include "domain/experiment.h"
#include "domain/limits.h"
#include "domain/plan.h"
#include "domain/run.h"
#include "domain/simulator.h"
#include "engine/internal.h"
#include "engine/lifecycle.h"
#include "engine/scenario.h"
#include "store/db.h"
#include "store/experiments.h"
#include "store/reviews.h"

/* What a case job keeps while it runs its cells. */
struct case_ctx {
    const char *experiment_id;
    int case_index;
    unsigned arms;
    uint32_t repeats;
    json_t *request; /* normalized */
    json_t *body;    /* the case {id, vars, expected, metadata} */
    json_t *done;    /* terminal runs of the case [{position, arm, repeat, status, passed,
                        benchmark}] */
    bool rescore;    /* a re-score: the cells score their stored outputs again (rescore.c) */
    bool judged;     /* the experiment has a judge: a finished run readies its pairs */
    bool batched;    /* its steps go with other workers' (engine/cell_batch.c): no judge,
                        no budget, no anytime stopping rule */
    struct evd_limits limits;
};

/* A running cell's run object: the API's fields, and the seed's for the evaluator input. */
static json_t *cell_run_new(const struct case_ctx *x, int position, unsigned arm,
                            uint32_t repeat, int64_t started_at)
{
    char session[160], run_id[64];
    evd_plan_experiment_session_id(x->experiment_id, (uint32_t)x->case_index, arm, repeat,
                                   session, sizeof(session));
    snprintf(run_id, sizeof(run_id), "case%d-arm%u-rep%u", x->case_index, arm, (unsigned)repeat);
    return json_pack("{s:s, s:s, s:s, s:O, s:i, s:i, s:i, s:i, s:s, s:I, s:[]}", "run_id", run_id,
                     "session_id", session, "role", arm == 0 ? "control" : "treatment",
                     "case_id", json_object_get(x->body, "id"), "case_index", x->case_index,
                     "arm", (int)arm, "repeat", (int)repeat, "position", position, "status",
                     "running", "started_at", (json_int_t)started_at, "failures");
}

/* The analysis run of a terminal run row {position, arm, status, passed, benchmark}. */
static void analysis_run(unsigned arms, const json_t *r, struct evd_analysis_run *out)
{
    memset(out, 0, sizeof(*out));
    const json_t *passed = json_object_get(r, "passed");
    out->evaluated = json_is_boolean(passed);
    out->passed = json_is_true(passed);
    int position = (int)json_integer_value(json_object_get(r, "position"));
    /* First in its repeat: the repeat's first position (plan.h). */
    out->first = (position - 1) % (int)arms == 0;
    const json_t *bench = json_object_get(r, "benchmark");
    for (unsigned m = 0; m < EVD_ANALYSIS_METRICS; m++) {
        const json_t *v = json_object_get(bench, evd_analysis_metric_names[m]);
        if (json_is_number(v)) {
            out->metric_mask |= 1u << m;
            out->metric[m] = json_number_value(v);
        }
    }
}

json_t *evd_engine_case_cells(unsigned arms, uint32_t repeats, const json_t *done, bool *flaky,
                              bool *disagree)
{
    json_t *cells = json_array();
    struct evd_analysis_run *runs = calloc(repeats + 1, sizeof(*runs));
    double *scratch = calloc(repeats + 1, sizeof(double));
    double rate0 = -1;
    *flaky = *disagree = false;
    for (unsigned arm = 0; cells && runs && scratch && arm < arms; arm++) {
        size_t n = 0;
        uint32_t failed = 0;
        size_t i;
        const json_t *r;
        json_array_foreach(done, i, r)
        {
            if (json_integer_value(json_object_get(r, "arm")) != (json_int_t)arm ||
                n >= repeats + 1)
                continue;
            failed += strcmp(json_string_value(json_object_get(r, "status")), "failed") == 0;
            analysis_run(arms, r, &runs[n++]);
        }
        struct evd_analysis_cell cell;
        evd_analysis_cell_from_runs(runs, n, scratch, &cell);
        if (cell.evaluated > 0) {
            *flaky |= cell.passed > 0 && cell.passed < cell.evaluated;
            double rate = (double)cell.passed / cell.evaluated;
            if (rate0 < 0)
                rate0 = rate;
            else if (rate != rate0)
                *disagree = true;
        }
        json_array_append_new(cells, evd_engine_cell_json(&cell, failed));
    }
    if (runs == NULL || scratch == NULL || json_array_size(cells) != arms) {
        json_decref(cells);
        cells = NULL;
    }
    free(runs);
    free(scratch);
    return cells;
}

/* A terminal cell, or an answered judgement, waiting to be written by the next step
 * (evd_store_cell_step). */
struct pending {
    bool set;
    int position, attempt;
    json_t *run, *transcript, *cells;
    bool flaky, disagree;
    json_t *judgement, *judged; /* a judgement (engine/judgements.c) instead of a run */
};

static void pending_clear(struct pending *p)
{
    json_decref(p->run);
    json_decref(p->transcript);
    json_decref(p->cells);
    json_decref(p->judgement);
    json_decref(p->judged);
    memset(p, 0, sizeof(*p));
}

static void pending_done(const struct case_ctx *x, const struct pending *p,
                         struct evd_store_cell_done *d)
{
    *d = (struct evd_store_cell_done){
        .experiment_id = x->experiment_id,
        .case_index = x->case_index,
        .position = p->position,
        .attempt = p->attempt,
        .run = p->run,
        .transcript = p->transcript,
        .cells = p->cells,
        .flaky = p->flaky,
        .disagree = p->disagree,
        .judgement = p->judgement,
        .judged = p->judged,
    };
}

/*
 * What a run spent, for the experiment's spend and budget (migrations/0024): its provider
 * calls (the generations, `turns`), input and output tokens, and cost (null when a call
 * could not be priced). A run that made no call spent nothing.
 */
static json_t *run_spend(const json_t *run)
{
    const json_t *m = json_object_get(json_object_get(run, "metrics"), "totals");
    const json_t *b = json_object_get(run, "benchmark");
    json_int_t calls = json_integer_value(json_object_get(m, "turns"));
    const json_t *cost = json_object_get(m, "cost_usd");
    /* A simulated user's calls are the experiment's too (agent-cases.md). */
    json_int_t sim_calls = json_integer_value(json_object_get(b, "simulator_calls"));
    const json_t *sim_cost = json_object_get(b, "simulator_cost_usd");
    bool priced = (calls == 0 || json_is_number(cost)) && (sim_calls == 0 || json_is_number(sim_cost));
    return json_pack("{s:I, s:I, s:I, s:o}", "calls", calls + sim_calls, "input_tokens",
                     json_integer_value(json_object_get(m, "input_tokens")) +
                         json_integer_value(json_object_get(b, "simulator_input_tokens")),
                     "output_tokens",
                     json_integer_value(json_object_get(m, "output_tokens")) +
                         json_integer_value(json_object_get(b, "simulator_output_tokens")),
                     "cost_usd",
                     priced ? json_real((calls ? json_number_value(cost) : 0) +
                                        (sim_calls ? json_number_value(sim_cost) : 0))
                            : json_null());
}

/* Folds a terminal cell into the case and keeps it for the next write (steals run and
 * transcript); false on ENOMEM (nothing kept). */
static bool finish_cell(struct case_ctx *x, struct pending *p, int position, int attempt,
                        json_t *run, json_t *transcript)
{
    if (json_object_set_new(run, "spend", run_spend(run)) != 0 ||
        (x->judged && json_object_set_new(run, "judge_pairs", json_true()) != 0)) {
        json_decref(run);
        json_decref(transcript);
        return false;
    }
    json_t *row = json_pack("{s:i, s:O, s:O, s:O, s:O}", "position", position, "arm",
                            json_object_get(run, "arm"), "repeat", json_object_get(run, "repeat"),
                            "status", json_object_get(run, "status"), "passed",
                            json_object_get(run, "passed") ? json_object_get(run, "passed")
                                                           : json_null());
    json_t *bench = json_object_get(run, "benchmark");
    if (row != NULL && bench != NULL)
        json_object_set(row, "benchmark", bench);
    if (row == NULL || json_array_append_new(x->done, row) != 0) {
        json_decref(run);
        json_decref(transcript);
        return false;
    }
    bool flaky, disagree;
    json_t *cells = evd_engine_case_cells(x->arms, x->repeats, x->done, &flaky, &disagree);
    if (cells == NULL) {
        json_array_remove(x->done, json_array_size(x->done) - 1);
        json_decref(run);
        json_decref(transcript);
        evd_log(EVD_LOG_WARN, "could not record experiment run", "experiment_id",
                x->experiment_id, "error", "out of memory", NULL);
        return false;
    }
    *p = (struct pending){true, position, attempt, run, transcript, cells, flaky, disagree,
                          NULL, NULL};
    return true;
}

/* Fails a cell whose attempts were all interrupted (phase setup). */
static bool fail_exhausted(struct case_ctx *x, struct pending *p, int position, int attempt)
{
    uint32_t repeat;
    unsigned arm;
    evd_plan_cell_at(x->arms, (uint32_t)position, &repeat, &arm);
    int64_t now = evd_now_ms();
    json_t *run = cell_run_new(x, position, arm, repeat, now);
    char msg[160];
    evd_attempt_exhausted_message(msg, sizeof(msg), attempt);
    if (run == NULL || evd_run_fail(run, EVD_PHASE_SETUP, NULL, msg, now) != 0) {
        json_decref(run);
        return false;
    }
    return finish_cell(x, p, position, attempt, run, NULL);
}

/* What a cell's attempt is to the lifecycle (engine/lifecycle.h). */
struct cell_ctx {
    const struct case_ctx *x;
    const struct evd_scenario *scenario;
    json_t *run;
    int64_t started_at;
    struct evd_scenario_outcome out;
};

static void cell_execute(struct evd_attempt *a)
{
    struct cell_ctx *k = a->kind;
    if (k->x->rescore)
        evd_engine_rescore_cell(a->e, a->w, k->scenario, k->x->case_index, a->position, k->run,
                                a->cancel, &k->out);
    else
        evd_scenario_run(a->e, a->w, k->scenario, k->run, a->cancel, k->started_at, &k->out);
    a->not_started = k->out.not_started;
    a->interrupted = k->out.interrupted;
}

static enum evd_code cell_progress(PGconn *c, const struct evd_attempt *a, json_t *metrics,
                                   struct evd_err *err)
{
    const struct cell_ctx *k = a->kind;
    return evd_store_cell_progress(c, a->subject_id, k->x->case_index, a->position, a->attempt,
                                   metrics, err);
}

static enum evd_code cell_checkpoint(PGconn *c, const struct evd_attempt *a, const json_t *cp,
                                     struct evd_err *err)
{
    const struct cell_ctx *k = a->kind;
    return evd_store_cell_checkpoint(c, a->subject_id, k->x->case_index, a->position, a->attempt,
                                     cp, err);
}

static enum evd_code cell_hand_back(PGconn *c, const struct evd_attempt *a, struct evd_err *err)
{
    const struct cell_ctx *k = a->kind;
    return evd_store_cell_hand_back(c, a->job->id, a->e->owner, a->subject_id, k->x->case_index,
                                    a->position, a->attempt, err);
}

static const struct evd_attempt_ops CELL_OPS = {
    .what = "experiment run",
    .id_key = "experiment_id",
    .execute = cell_execute,
    .progress = cell_progress,
    .checkpoint = cell_checkpoint,
    .hand_back = cell_hand_back,
};

enum cell_end { CELL_FINISHED, CELL_STOP };

/* Phases 2 and 3 of cell `position`, started with `attempt`. */
static enum cell_end run_cell(struct evd_engine *e, struct evd_wconn *w,
                              const struct evd_store_job *job,
                              struct case_ctx *x, int position, int attempt, struct pending *p)
{
    struct evd_err err = {0};
    uint32_t repeat;
    unsigned arm;
    evd_plan_cell_at(x->arms, (uint32_t)position, &repeat, &arm);
    json_t *variant = NULL, *evaluator = NULL, *checkpoint = NULL;
    char *instructions = NULL;
    struct cell_ctx k = {.x = x, .started_at = evd_now_ms()};
    struct evd_attempt a = {.slot = -1};
    enum cell_end end = CELL_STOP;
    struct evd_limits limits = x->limits;
    if (evd_experiment_cell(x->request, x->body, arm, &variant, &evaluator, &err) != EVD_OK ||
        (json_object_get(variant, "limits") != NULL &&
         evd_limits_decode(json_object_get(variant, "limits"), &limits, &err) != EVD_OK)) {
        /* Checked at the start for every case: only a change of the rules gets here. */
        json_t *run = cell_run_new(x, position, arm, repeat, k.started_at);
        if (run != NULL && evd_run_fail(run, EVD_PHASE_SETUP, NULL, err.msg, evd_now_ms()) == 0)
            end = finish_cell(x, p, position, attempt, run, NULL) ? CELL_FINISHED : CELL_STOP;
        else
            json_decref(run);
        goto out;
    }
    if ((k.run = cell_run_new(x, position, arm, repeat, k.started_at)) == NULL)
        goto out;
    const json_t *sp = json_object_get(variant, "system_prompt");
    /* A simulated user talks to the agent with instructions rendered for the case. */
    const json_t *sim = json_object_get(x->request, "simulator");
    if (json_is_object(sim) &&
        evd_simulator_instructions(sim, x->body, &instructions, &err) != EVD_OK) {
        json_t *run = k.run; /* checked at the start: only a change of the rules gets here */
        k.run = NULL;
        if (evd_run_fail(run, EVD_PHASE_SETUP, NULL, err.msg, evd_now_ms()) == 0)
            end = finish_cell(x, p, position, attempt, run, NULL) ? CELL_FINISHED : CELL_STOP;
        else
            json_decref(run);
        goto out;
    }
    /* A simulated conversation an earlier attempt began goes on where it stopped. */
    if (json_is_object(sim) && attempt > 1 && !x->rescore) {
        PGconn *c = evd_wconn_get(w, &err);
        checkpoint = c != NULL ? evd_store_cell_checkpoint_get(c, x->experiment_id, x->case_index,
                                                               position, &err)
                               : NULL;
        if (checkpoint == NULL) { /* not read: the attempt counts, the lease runs out */
            evd_log(EVD_LOG_WARN, "could not read a conversation's checkpoint; the run is tried "
                    "again after its lease", "experiment_id", x->experiment_id, "error",
                    err.msg, NULL);
            goto out;
        }
    }
    /* A model experiment's arm calls its own model, with its own output cap. */
    const json_t *arm_model = json_object_get(variant, "model");
    const json_t *arm_limits = json_object_get(variant, "limits");
    const char *run_id = json_string_value(json_object_get(k.run, "run_id"));
    struct evd_scenario_trace trace = {
        .owner_key = "evald.experiment_id",
        .owner_id = x->experiment_id,
        .run_id = run_id,
        .label = json_string_value(json_object_get(variant, "label")),
        .role = arm == 0 ? "control" : "treatment",
        .repeat = (int)repeat,
        .attempt = attempt,
        .case_id = json_string_value(json_object_get(x->body, "id")),
    };
    evd_trace_for_run(x->experiment_id, run_id, attempt, &trace.ctx);
    a = (struct evd_attempt){
        .ops = &CELL_OPS,
        .e = e,
        .w = w,
        .job = job,
        .subject_id = x->experiment_id,
        .position = position,
        .attempt = attempt,
        .timeout_ms = (int64_t)x->limits.scenario_timeout_seconds * 1000,
        .trace = &trace.ctx,
        .kind = &k,
        .slot = -1,
    };
    const struct evd_scenario scenario = {
        .subject_id = x->experiment_id,
        .session_id = json_string_value(json_object_get(k.run, "session_id")),
        .prompt = json_string_value(json_object_get(variant, "prompt")),
        .system_prompt = json_is_string(sp) ? json_string_value(sp) : NULL,
        .messages = json_object_get(variant, "messages"),
        .simulator = json_is_object(sim) ? sim : NULL,
        .simulator_instructions = instructions,
        .checkpoint = checkpoint,
        .save = evd_attempt_checkpoint,
        .mock_tools = json_object_get(x->request, "tools"),
        .tool_results = json_object_get(variant, "tool_results"),
        .model = arm_model != NULL ? arm_model : json_object_get(x->request, "model"),
        .limits_json = arm_limits != NULL ? arm_limits : json_object_get(x->request, "limits"),
        .limits = &limits,
        .functions = json_object_get(x->request, "functions"),
        .output = json_object_get(x->request, "output"),
        .metadata = json_object_get(x->request, "metadata"),
        .evaluator_function_id = json_string_value(json_object_get(evaluator, "function_id")),
        .evaluator_arguments = json_object_get(evaluator, "arguments"),
        .progress = evd_attempt_progress,
        .progress_ctx = &a,
        .judge_metrics = true,
        .trace = &trace,
    };
    k.scenario = &scenario;
    switch (evd_attempt_run(&a)) {
    case EVD_ATTEMPT_FINISHED:
        break;
    case EVD_ATTEMPT_TIMED_OUT: {
        int64_t now = evd_now_ms();
        char msg[128];
        snprintf(msg, sizeof(msg), "run exceeded %llus wall-clock limit",
                 (unsigned long long)x->limits.scenario_timeout_seconds);
        json_t *fresh = cell_run_new(x, position, arm, repeat, k.started_at);
        if (fresh == NULL)
            goto out;
        evd_run_record_outcome(fresh, NULL, k.out.metrics, (uint64_t)(now - k.started_at), now);
        evd_run_fail(fresh, EVD_PHASE_AWAIT, NULL, msg, now);
        json_decref(k.run);
        k.run = fresh;
        break;
    }
    case EVD_ATTEMPT_CANCELLED:   /* cancelled, or the job taken away: nothing to write */
    case EVD_ATTEMPT_HANDED_BACK: /* another attempt runs it */
    case EVD_ATTEMPT_DROPPED:     /* the lease runs out and the cell is tried again */
        goto out;
    }
    end = finish_cell(x, p, position, attempt, k.run, json_incref(k.out.transcript))
              ? CELL_FINISHED
              : CELL_STOP;
    k.run = NULL; /* finish_cell's */
out:
    evd_attempt_clear(&a);
    evd_scenario_outcome_clear(&k.out);
    json_decref(k.run);
    json_decref(variant);
    json_decref(evaluator);
    free(instructions);
    json_decref(checkpoint);
    return end;
}

/* Reads the experiment's request and the case; false (logged) when they cannot be read. */
static bool load_case(PGconn *c, const struct evd_store_job *job, struct case_ctx *x)
{
    struct evd_err err = {0};
    struct evd_store_experiment_shape shape = {0};
    x->experiment_id = job->ref;
    x->case_index = job->run_position;
    if (evd_store_experiment_shape(c, job->ref, &shape, &err) != EVD_OK)
        goto fail;
    x->arms = (unsigned)shape.arms;
    x->repeats = (uint32_t)shape.repeats;
    x->rescore = shape.rescore;
    x->request = json_loads(shape.request, 0, NULL);
    x->judged = x->request != NULL && json_is_object(json_object_get(x->request, "judge"));
    const char *rule =
        json_string_value(json_object_get(json_object_get(x->request, "stopping"), "rule"));
    const json_t *budget = json_object_get(x->request, "budget");
    x->batched = x->request != NULL && !x->judged && (budget == NULL || json_is_null(budget)) &&
                 (rule == NULL || strcmp(rule, "fixed") == 0);
    evd_store_experiment_shape_clear(&shape);
    if (x->request == NULL) {
        evd_err_set(&err, EVD_EINTERNAL, "stored request cannot be decoded");
        goto fail;
    }
    if (evd_limits_decode(json_object_get(x->request, "limits"), &x->limits, &err) != EVD_OK ||
        evd_store_cell_case(c, job->ref, job->run_position, &x->body, &x->done, &err) != EVD_OK)
        goto fail;
    return true;
fail:
    if (err.code != EVD_ENOTFOUND) /* a deleted experiment: its job goes at the next claim */
        evd_log(EVD_LOG_WARN, "could not start an experiment case", "experiment_id", job->ref,
                "error", err.msg, NULL);
    return false;
}

void evd_engine_process_cell(struct evd_engine *e, struct evd_wconn *w,
                             const struct evd_store_job *job)
{
    struct case_ctx x = {0};
    struct pending pend = {0};
    struct evd_err lerr = {0};
    PGconn *c = evd_wconn_get(w, &lerr);
    if (c == NULL || !load_case(c, job, &x))
        goto out;
    for (;;) {
        struct evd_err err = {0};
        struct evd_store_cell_done done;
        if (pend.set)
            pending_done(&x, &pend, &done);
        if (atomic_load(&e->stopping)) {
            /* The last finished cell is written; the next one stays for whoever comes. */
            bool written;
            if (pend.set && (c = evd_wconn_get(w, &err)) != NULL && evd_db_ensure(c) &&
                evd_store_cell_finish(c, &done, evd_now_ms(), &written, &err) != EVD_OK)
                evd_log(EVD_LOG_WARN, "could not record experiment run", "experiment_id",
                        job->ref, "error", err.msg, NULL);
            break;
        }
        struct evd_store_cell_next next;
        struct evd_store_job cur = *job;
        int64_t sent = evd_mono_ms();
        enum evd_code rc;
        if (x.batched) {
            rc = evd_engine_cell_step(e, w, job->id, pend.set ? &done : NULL, &next, &err);
        } else if ((c = evd_wconn_get(w, &err)) == NULL) {
            /* The connection the last cell gave back before its provider call. */
            rc = err.code ? err.code : EVD_EDB;
        } else {
            evd_db_ensure(c); /* a restart of PostgreSQL during the last cell broke it */
            rc = evd_store_cell_step(c, job->id, e->owner, e->opts.lease_ms, evd_now_ms(),
                                     EVD_MAX_ATTEMPTS, pend.set ? &done : NULL, &next, &err);
        }
        if (rc == EVD_OK && pend.set && next.outcome != EVD_CELL_LOST)
            evd_metrics_count(pend.judgement != NULL ? "evald_experiment_judgements_finished_total"
                                                     : "evald_experiment_runs_finished_total",
                              "status",
                              json_string_value(json_object_get(
                                  pend.judgement != NULL ? pend.judgement : pend.run, "status")),
                              1);
        pending_clear(&pend);
        if (rc != EVD_OK) {
            /* A finished cell not written is run again once the lease runs out. */
            evd_log(EVD_LOG_WARN, "could not step an experiment case", "experiment_id",
                    job->ref, "error", err.msg, NULL);
            break;
        }
        if (next.outcome == EVD_CELL_LOST || next.outcome == EVD_CELL_GONE)
            break;
        if (next.outcome == EVD_CELL_DONE) {
            if (next.schedule > 0)
                evd_engine_wake(e, next.schedule);
            if (next.schedule == -1 &&
                ((c = evd_wconn_get(w, &err)) == NULL ||
                 evd_engine_experiment_finalize(e, c, job->ref, &err) != EVD_OK))
                evd_log(EVD_LOG_WARN, "could not finish an experiment; the analyst retries",
                        "experiment_id", job->ref, "error", err.msg, NULL);
            break;
        }
        if (next.body != NULL) {
            /* The job moved on to the next case to dispatch (migrations/0023). */
            json_decref(x.body);
            json_decref(x.done);
            x.case_index = next.case_index;
            x.body = next.body;
            x.done = next.done;
        }
        cur.run_position = x.case_index;
        if (next.outcome == EVD_CELL_JUDGE || next.outcome == EVD_CELL_JUDGE_EXHAUSTED) {
            const struct evd_judge_case jc = {
                .experiment_id = x.experiment_id,
                .case_index = x.case_index,
                .arms = x.arms,
                .repeats = x.repeats,
                .request = x.request,
                .body = x.body,
                .limits = &x.limits,
            };
            cur.claimed_mono = sent - (e->opts.lease_ms - next.lease_left_ms);
            json_t *judgement, *judged;
            if (!evd_engine_judge(e, w, &cur, &jc, next.position, next.attempt,
                                  next.outcome == EVD_CELL_JUDGE_EXHAUSTED, &judgement,
                                  &judged))
                break;
            pend = (struct pending){.set = true,
                                    .position = next.position,
                                    .attempt = next.attempt,
                                    .judgement = judgement,
                                    .judged = judged};
            continue;
        }
        if (next.outcome == EVD_CELL_EXHAUSTED) {
            if (!fail_exhausted(&x, &pend, next.position, next.attempt))
                break;
            continue;
        }
        /* No call may outlast the lease as it stood when the step was sent. */
        cur.claimed_mono = sent - (e->opts.lease_ms - next.lease_left_ms);
        if (run_cell(e, w, &cur, &x, next.position, next.attempt, &pend) != CELL_FINISHED)
            break;
    }
out:
    pending_clear(&pend);
    json_decref(x.request);
    json_decref(x.body);
    json_decref(x.done);
}
