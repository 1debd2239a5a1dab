/*
 * Execution of one claimed session job (one turn of an ad-hoc session), in the three
 * phases of a run job (runner.c):
 *   1. in a transaction holding the session lock: skip a turn that is gone or already
 *      terminal, fail one whose attempts are exhausted, else mark it running with
 *      attempt+1 and commit;
 *   2. run the agent turn with no lock held, continuing the stored conversation, the job
 *      lease renewed by the keeper, a cancel token registered in-flight under the session
 *      id, and a metrics snapshot written after each generation and function call;
 *   3. write the outcome only if the turn is still running with this attempt, and fold it
 *      into the session (status, summed metrics, conversation, counters), in one
 *      transaction.
 * A shutdown hands the turn back (queued again, attempt not counted).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/trace.h"
#include "common/prometheus.h"
#include "common/util.h"
#include "domain/session.h"
#include "engine/internal.h"
#include "engine/lifecycle.h"
#include "store/db.h"
#include "store/sessions.h"
#include "store/tools.h"

/* Ends a turn without running it (attempts exhausted), and folds it into the session. */
static enum evd_code fail_turn(PGconn *c, const struct evd_store_session *s, int seq, int attempt,
                               const char *msg, int64_t now, struct evd_err *err)
{
    json_t *failures = json_pack("[{s:s, s:s}]", "phase", "setup", "message", msg);
    bool written = false;
    enum evd_code rc = evd_store_turn_start(c, s->id, seq, attempt, now, err);
    if (rc == EVD_OK)
        rc = evd_store_turn_finish(c, s->id, seq, attempt, "failed", NULL, failures, NULL, NULL,
                                   now, &written, err);
    if (rc == EVD_OK && written)
        rc = evd_store_session_after_turn(c, s->id, "error", NULL, NULL, 0, 0, now, err);
    json_decref(failures);
    return rc;
}

/* Phase 1 of a turn: the kind's statements of evd_attempt_start, with a->kind the
 * struct turn_start to fill. */
struct turn_start {
    struct evd_store_session *s;
    struct evd_store_turn *turn;
};

static enum evd_code turn_load(PGconn *c, struct evd_attempt *a, enum evd_unit_state *state,
                               int *used, struct evd_err *err)
{
    struct turn_start *t = a->kind;
    enum evd_code rc = evd_store_session_get(c, a->job->ref, true, t->s, err);
    if (rc == EVD_OK)
        rc = evd_store_turn_get(c, a->job->ref, a->position, t->turn, err);
    if (rc != EVD_OK)
        return rc;
    /* A turn deleted or finished meanwhile needs none. */
    *state = evd_engine_status_terminal(t->turn->status) ? EVD_UNIT_DONE : EVD_UNIT_OPEN;
    *used = t->turn->attempt;
    return EVD_OK;
}

static enum evd_code turn_settle(PGconn *c, struct evd_attempt *a, enum evd_unit_state state,
                                 struct evd_err *err)
{
    (void)state;
    return evd_store_job_delete(c, a->job->id, err);
}

static enum evd_code turn_exhaust(PGconn *c, struct evd_attempt *a, int used, const char *msg,
                                  struct evd_err *err)
{
    struct turn_start *t = a->kind;
    enum evd_code rc = fail_turn(c, t->s, a->position, used, msg, evd_now_ms(), err);
    if (rc == EVD_OK)
        rc = evd_store_job_delete(c, a->job->id, err);
    if (rc == EVD_OK)
        rc = evd_store_notify(c, EVD_CHANNEL_EVENTS, t->s->id, err);
    return rc;
}

static enum evd_code turn_begin(PGconn *c, struct evd_attempt *a, struct evd_err *err)
{
    struct turn_start *t = a->kind;
    enum evd_code rc = evd_store_turn_start(c, t->s->id, a->position, a->attempt, evd_now_ms(),
                                            err);
    if (rc == EVD_OK)
        rc = evd_store_notify(c, EVD_CHANNEL_EVENTS, t->s->id, err);
    return rc;
}

static const struct evd_attempt_start_ops TURN_START = {
    .load = turn_load,
    .settle = turn_settle,
    .exhaust = turn_exhaust,
    .begin = turn_begin,
};

static json_t *transcript_of(const struct evd_harness_outcome *out)
{
    json_t *t = out->transcript ? json_deep_copy(out->transcript) : json_object();
    if (t != NULL && out->spans != NULL)
        json_object_set(t, "spans", out->spans);
    return t;
}

/* Phase 3: the turn's outcome and the session's new figures, in one transaction. */
static void write_outcome(PGconn *c, const char *id, int seq, int attempt, const char *status,
                          const struct evd_harness_outcome *out, json_t *failures,
                          json_t *transcript, int64_t wall, int64_t job_id)
{
    struct evd_err err = {0};
    struct evd_store_session s = {0};
    json_t *merged = NULL;
    bool written = false;
    int64_t now = evd_now_ms();
    if (evd_db_begin(c, &err) != EVD_OK || evd_store_session_get(c, id, true, &s, &err) != EVD_OK)
        goto out;
    if (evd_store_turn_finish(c, id, seq, attempt, status, out->output, failures, out->metrics,
                              transcript, now, &written, &err) != EVD_OK ||
        !written)
        goto out;
    merged = out->metrics ? evd_session_metrics_add(s.metrics, out->metrics, id, true) : NULL;
    bool completed = strcmp(status, "completed") == 0;
    if (evd_store_session_after_turn(c, id, evd_session_status_for_turn(status), merged,
                                     completed ? out->conversation : NULL, wall,
                                     (int)evd_session_transcript_messages(transcript), now,
                                     &err) != EVD_OK ||
        evd_store_job_delete(c, job_id, &err) != EVD_OK ||
        evd_store_notify(c, EVD_CHANNEL_EVENTS, id, &err) != EVD_OK)
        goto out;
    if (evd_db_commit(c, &err) == EVD_OK) {
        evd_metrics_count("evald_session_turns_finished_total", "status", status, 1);
        evd_log(EVD_LOG_INFO, "session turn finished", "session_id", id, "status", status, NULL);
    }
out:
    evd_db_rollback(c);
    if (err.code != EVD_OK)
        evd_log(EVD_LOG_WARN, "could not record session turn", "session_id", id, "error", err.msg,
                NULL);
    json_decref(merged);
    evd_store_session_clear(&s);
}

/* A turn cancelled while it ran still leaves its transcript (once) for the record. */
static void write_late_transcript(PGconn *c, const char *id, int seq, int attempt,
                                  json_t *transcript)
{
    struct evd_err err = {0};
    bool written = false;
    if (evd_db_begin(c, &err) != EVD_OK)
        return;
    struct evd_store_session s = {0};
    if (evd_store_session_get(c, id, true, &s, &err) == EVD_OK &&
        evd_store_turn_late_transcript(c, id, seq, attempt, transcript, &written, &err) == EVD_OK &&
        (!written || (evd_store_session_after_turn(c, id, s.status, NULL, NULL, 0,
                                                   (int)evd_session_transcript_messages(transcript),
                                                   evd_now_ms(), &err) == EVD_OK &&
                      evd_store_notify(c, EVD_CHANNEL_EVENTS, id, &err) == EVD_OK)))
        evd_db_commit(c, &err);
    evd_db_rollback(c);
    evd_store_session_clear(&s);
}

/* What a turn's attempt is to the lifecycle (engine/lifecycle.h). */
struct turn_ctx {
    const struct evd_store_session *s;
    const struct evd_harness_input *in;
    const struct evd_trace_ctx *trace;
    struct evd_harness_outcome out;
    struct evd_err err;
    int64_t wall;
};

static void turn_execute(struct evd_attempt *a)
{
    struct turn_ctx *t = a->kind;
    /* The turn's trace (docs/otel.md): a root span like a run's, keyed by session and turn. */
    const char *title = t->s->title;
    char root_name[sizeof("invoke_agent ") + 4 * EVD_SESSION_TITLE_MAX];
    snprintf(root_name, sizeof(root_name), "invoke_agent %s", title ? title : "session");
    struct evd_span *root = evd_trace_enabled()
                                ? evd_span_new(t->trace, false, root_name, EVD_SPAN_INTERNAL,
                                               evd_now_ns())
                                : NULL;
    evd_span_set_str(root, "gen_ai.operation.name", "invoke_agent");
    evd_span_set_str(root, "gen_ai.agent.name", title ? title : "session");
    evd_span_set_str(root, "gen_ai.conversation.id", a->subject_id);
    evd_span_set_str(root, "evald.session_id", a->subject_id);
    evd_span_set_int(root, "evald.turn", a->position);
    evd_span_set_int(root, "evald.attempt", a->attempt);
    int64_t started = evd_now_ms();
    evd_harness_run(a->e->opts.providers, t->in, a->cancel, &t->out, &t->err);
    t->wall = evd_now_ms() - started;
    if (root != NULL) {
        root->end_ns = evd_now_ns();
        if (t->out.status != EVD_HARNESS_COMPLETED)
            evd_span_fail(root, t->out.phase ? t->out.phase : evd_harness_status_name(t->out.status),
                          t->out.result_error);
        evd_span_submit(root);
    }
    a->interrupted = t->out.status == EVD_HARNESS_CANCELLED;
}

static enum evd_code turn_progress(PGconn *c, const struct evd_attempt *a, json_t *metrics,
                                   struct evd_err *err)
{
    return evd_store_turn_progress(c, a->subject_id, a->position, a->attempt, metrics, err);
}

static enum evd_code turn_hand_back(PGconn *c, const struct evd_attempt *a, struct evd_err *err)
{
    return evd_store_turn_hand_back(c, a->subject_id, a->position, a->attempt, a->job->id,
                                    a->e->owner, err);
}

static const struct evd_attempt_ops TURN_OPS = {
    .what = "session turn",
    .id_key = "session_id",
    .execute = turn_execute,
    .progress = turn_progress,
    .hand_back = turn_hand_back,
};

void evd_engine_process_session(struct evd_engine *e, struct evd_wconn *w,
                                const struct evd_store_job *job)
{
    struct evd_err err = {0};
    struct evd_store_session s = {0};
    struct evd_store_turn turn = {0};
    struct turn_ctx t = {.s = &s};
    struct evd_attempt a = {.slot = -1};
    json_t *tools = NULL, *limits = NULL, *transcript = NULL, *failures = NULL;
    const int seq = job->run_position;

    PGconn *c = evd_wconn_get(w, &err);
    struct turn_start ts = {.s = &s, .turn = &turn};
    struct evd_attempt start = {.ops = &TURN_OPS, .e = e, .w = w, .job = job,
                                .subject_id = job->ref, .position = seq, .kind = &ts,
                                .slot = -1};
    int attempt = c != NULL ? evd_attempt_start(&start, c, &TURN_START, &err) : 0;
    if (attempt == 0) {
        if (err.code != EVD_OK)
            evd_log(EVD_LOG_WARN, "could not start session turn", "session_id", job->ref, "error",
                    err.msg, NULL);
        goto out;
    }
    tools = evd_store_tools_json(c, &err);
    limits = evd_session_harness_limits(s.config);
    if (tools == NULL || limits == NULL) {
        /* The attempt counts: the lease runs out and the turn is tried again, at most
         * EVD_MAX_ATTEMPTS times in all, like a run. */
        evd_log(EVD_LOG_WARN, "could not prepare session turn", "session_id", s.id, "error",
                err.msg, NULL);
        goto out;
    }
    json_int_t timeout_s = json_integer_value(
        json_object_get(json_object_get(s.config, "limits"), "scenario_timeout_seconds"));
    if (timeout_s <= 0)
        timeout_s = 600;
    char turn_id[24];
    snprintf(turn_id, sizeof(turn_id), "turn-%d", seq);
    struct evd_trace_ctx trace;
    evd_trace_for_run(s.id, turn_id, attempt, &trace);
    t.trace = &trace;
    a = (struct evd_attempt){
        .ops = &TURN_OPS,
        .e = e,
        .w = w,
        .job = job,
        .subject_id = s.id,
        .position = seq,
        .attempt = attempt,
        .timeout_ms = (int64_t)timeout_s * 1000,
        .trace = &trace,
        .kind = &t,
        .slot = -1,
    };
    json_t *sp = json_object_get(s.config, "system_prompt");
    const struct evd_harness_input in = {
        .session_id = s.id,
        .prompt = turn.prompt,
        .system_prompt = json_is_string(sp) ? json_string_value(sp) : NULL,
        .model = json_object_get(s.config, "model"),
        .limits = limits,
        .functions = json_object_get(s.config, "functions"),
        .output = json_object_get(s.config, "output"),
        .metadata = json_object_get(s.config, "metadata"),
        .tools = tools,
        .conversation = s.conversation,
        .progress = evd_attempt_progress,
        .progress_ctx = &a,
        .trace = &trace,
    };
    t.in = &in;
    enum evd_attempt_end end = evd_attempt_run(&a);
    if (end == EVD_ATTEMPT_HANDED_BACK || end == EVD_ATTEMPT_DROPPED)
        goto out;
    transcript = transcript_of(&t.out);
    if ((c = evd_wconn_get(w, &err)) == NULL) {
        evd_log(EVD_LOG_WARN, "could not record session turn; its lease runs out", "session_id",
                s.id, "error", err.msg, NULL);
        goto out;
    }
    if (end == EVD_ATTEMPT_CANCELLED) {
        /* Cancelled by the user (the turn is cancelled, keep its transcript), or the job was
         * taken over (a newer attempt owns the turn: nothing to write). */
        if (transcript != NULL)
            write_late_transcript(c, s.id, seq, attempt, transcript);
        goto out;
    }
    const char *status = "completed";
    if (end == EVD_ATTEMPT_TIMED_OUT) {
        char msg[128];
        snprintf(msg, sizeof(msg), "turn exceeded %llds wall-clock limit", (long long)timeout_s);
        failures = json_pack("[{s:s, s:s}]", "phase", "await", "message", msg);
        status = "failed";
    } else if (t.out.status != EVD_HARNESS_COMPLETED) {
        failures = json_pack("[{s:s, s:s}]", "phase", t.out.phase ? t.out.phase : "send", "message",
                             t.out.result_error ? t.out.result_error : "turn failed");
        status = t.out.status == EVD_HARNESS_CANCELLED ? "cancelled" : "failed";
    }
    write_outcome(c, s.id, seq, attempt, status, &t.out, failures, transcript, t.wall, job->id);
out:
    evd_attempt_clear(&a);
    evd_harness_outcome_clear(&t.out);
    json_decref(tools);
    json_decref(limits);
    json_decref(transcript);
    json_decref(failures);
    evd_store_turn_clear(&turn);
    evd_store_session_clear(&s);
}
