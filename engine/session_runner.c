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
#include "store/db.h"
#include "store/sessions.h"
#include "store/tools.h"

struct progress_ctx {
    struct evd_wconn *w;
    const char *session_id;
    int seq;
    int attempt;
};

/* Harness progress callback: keeps the running snapshot (autocommit, one statement). */
static void on_progress(void *ctx, json_t *metrics)
{
    struct progress_ctx *p = ctx;
    struct evd_err err = {0};
    bool had;
    PGconn *c = evd_wconn_borrow(p->w, &had, &err);
    if (c == NULL ||
        evd_store_turn_progress(c, p->session_id, p->seq, p->attempt, metrics, &err) != EVD_OK)
        evd_log(EVD_LOG_DEBUG, "could not record turn progress", "session_id", p->session_id,
                "error", err.msg, NULL);
    evd_wconn_return(p->w, had);
}

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

/* Phase 1. Returns the attempt to run (0: nothing to run); fills *s and *turn. */
static int start_attempt(PGconn *c, const struct evd_store_job *job, struct evd_store_session *s,
                         struct evd_store_turn *turn, struct evd_err *err)
{
    int attempt = 0;
    int64_t now = evd_now_ms();
    if (evd_db_begin(c, err) != EVD_OK)
        return 0;
    enum evd_code rc = evd_store_session_get(c, job->ref, true, s, err);
    if (rc == EVD_OK)
        rc = evd_store_turn_get(c, job->ref, job->run_position, turn, err);
    if (rc == EVD_ENOTFOUND || (rc == EVD_OK && evd_engine_status_terminal(turn->status))) {
        evd_store_job_delete(c, job->id, err); /* deleted or finished meanwhile */
        goto commit;
    }
    if (rc != EVD_OK)
        goto rollback;
    if (turn->attempt >= EVD_MAX_ATTEMPTS) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "turn was interrupted %d times (lost lease or stopped process); attempts "
                 "exhausted",
                 turn->attempt);
        if (fail_turn(c, s, job->run_position, turn->attempt, msg, now, err) != EVD_OK ||
            evd_store_job_delete(c, job->id, err) != EVD_OK ||
            evd_store_notify(c, EVD_CHANNEL_EVENTS, s->id, err) != EVD_OK)
            goto rollback;
        goto commit;
    }
    attempt = turn->attempt + 1;
    if (evd_store_turn_start(c, s->id, job->run_position, attempt, now, err) != EVD_OK ||
        evd_store_notify(c, EVD_CHANNEL_EVENTS, s->id, err) != EVD_OK) {
        attempt = 0;
        goto rollback;
    }
commit:
    if (evd_db_commit(c, err) == EVD_OK)
        return attempt;
    attempt = 0;
rollback:
    evd_db_rollback(c);
    return 0;
}

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

void evd_engine_process_session(struct evd_engine *e, struct evd_wconn *w,
                                const struct evd_store_job *job)
{
    struct evd_err err = {0};
    struct evd_store_session s = {0};
    struct evd_store_turn turn = {0};
    struct evd_harness_outcome out = {0};
    json_t *tools = NULL, *limits = NULL, *transcript = NULL, *failures = NULL;
    struct evd_cancel *cancel = NULL;
    int slot = -1;
    const int seq = job->run_position;

    PGconn *c = evd_wconn_get(w, &err);
    int attempt = c != NULL ? start_attempt(c, job, &s, &turn, &err) : 0;
    if (attempt == 0) {
        if (err.code != EVD_OK)
            evd_log(EVD_LOG_WARN, "could not start session turn", "session_id", job->ref, "error",
                    err.msg, NULL);
        goto out;
    }
    tools = evd_store_tools_json(c, &err);
    limits = evd_session_harness_limits(s.config);
    cancel = evd_cancel_new();
    if (tools == NULL || limits == NULL || cancel == NULL) {
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
    /* The in-flight registry knows jobs by subject id: here the session's. */
    struct evd_store_job reg = *job;
    snprintf(reg.evaluation_id, sizeof(reg.evaluation_id), "%s", s.id);
    slot = evd_engine_inflight_add(e, &reg, attempt, cancel, evd_mono_ms() + timeout_s * 1000);

    struct progress_ctx pctx = {w, s.id, seq, attempt};
    json_t *sp = json_object_get(s.config, "system_prompt");
    struct evd_harness_input in = {
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
        .progress = on_progress,
        .progress_ctx = &pctx,
    };
    /* The turn's trace (docs/otel.md): a root span like a run's, keyed by session and turn. */
    char turn_id[24], th[33], sh[17];
    snprintf(turn_id, sizeof(turn_id), "turn-%d", seq);
    struct evd_trace_ctx trace;
    evd_trace_for_run(s.id, turn_id, attempt, &trace);
    evd_trace_hex(&trace, th, sh);
    evd_log_set_trace(th, sh);
    in.trace = &trace;
    const char *title = s.title;
    char root_name[sizeof("invoke_agent ") + 4 * EVD_SESSION_TITLE_MAX];
    snprintf(root_name, sizeof(root_name), "invoke_agent %s", title ? title : "session");
    struct evd_span *root = evd_trace_enabled()
                                ? evd_span_new(&trace, false, root_name, EVD_SPAN_INTERNAL,
                                               evd_now_ns())
                                : NULL;
    evd_span_set_str(root, "gen_ai.operation.name", "invoke_agent");
    evd_span_set_str(root, "gen_ai.agent.name", title ? title : "session");
    evd_span_set_str(root, "gen_ai.conversation.id", s.id);
    evd_span_set_str(root, "evald.session_id", s.id);
    evd_span_set_int(root, "evald.turn", seq);
    evd_span_set_int(root, "evald.attempt", attempt);
    int64_t started = evd_now_ms();
    evd_wconn_put(w); /* none held while the provider works */
    evd_harness_run(e->opts.providers, &in, cancel, &out, &err);
    if (root != NULL) {
        root->end_ns = evd_now_ns();
        if (out.status != EVD_HARNESS_COMPLETED)
            evd_span_fail(root, out.phase ? out.phase : evd_harness_status_name(out.status),
                          out.result_error);
        evd_span_submit(root);
    }
    enum inflight_reason reason = evd_engine_inflight_remove(e, slot);
    slot = -1;
    if (reason == REASON_LEASE && out.status != EVD_HARNESS_CANCELLED)
        reason = REASON_NONE; /* finished before its deadline stopped anything: write it */
    int64_t wall = evd_now_ms() - started;
    transcript = transcript_of(&out);

    if ((c = evd_wconn_get(w, &err)) == NULL) {
        evd_log(EVD_LOG_WARN, "could not record session turn; its lease runs out", "session_id",
                s.id, "error", err.msg, NULL);
        goto out;
    }
    if (reason == REASON_SHUTDOWN || reason == REASON_LEASE) {
        if (evd_db_ensure(c))
            evd_store_turn_hand_back(c, s.id, seq, attempt, job->id, e->owner, &err);
        goto out;
    }
    if (reason == REASON_CANCELLED) {
        /* Cancelled by the user (the turn is cancelled, keep its transcript), or the job was
         * taken over (a newer attempt owns the turn: nothing to write). */
        if (transcript != NULL)
            write_late_transcript(c, s.id, seq, attempt, transcript);
        goto out;
    }
    const char *status = "completed";
    if (reason == REASON_DEADLINE) {
        char msg[128];
        snprintf(msg, sizeof(msg), "turn exceeded %llds wall-clock limit", (long long)timeout_s);
        failures = json_pack("[{s:s, s:s}]", "phase", "await", "message", msg);
        status = "failed";
    } else if (out.status != EVD_HARNESS_COMPLETED) {
        failures = json_pack("[{s:s, s:s}]", "phase", out.phase ? out.phase : "send", "message",
                             out.result_error ? out.result_error : "turn failed");
        status = out.status == EVD_HARNESS_CANCELLED ? "cancelled" : "failed";
    }
    write_outcome(c, s.id, seq, attempt, status, &out, failures, transcript, wall, job->id);
out:
    evd_log_set_trace(NULL, NULL);
    if (slot >= 0)
        evd_engine_inflight_remove(e, slot);
    evd_harness_outcome_clear(&out);
    evd_cancel_free(cancel);
    json_decref(tools);
    json_decref(limits);
    json_decref(transcript);
    json_decref(failures);
    evd_store_turn_clear(&turn);
    evd_store_session_clear(&s);
}
