/*
 * Execution of one claimed run job, in three phases:
 *   1. start the attempt: in a transaction holding the evaluation lock, skip a job
 *      whose run or evaluation is already terminal, fail a run whose attempts are
 *      exhausted, else mark it running with attempt+1 and commit;
 *   2. run the agent turn (harness) and the evaluator with no lock held, the job
 *      lease renewed by the keeper and a cancel token registered in-flight;
 *   3. write the outcome only if the run is still running with this attempt (a
 *      worker whose lease was taken over, or whose evaluation was cancelled, writes
 *      nothing), and advance the evaluation, in one transaction.
 * A shutdown hands the run back instead: pending again, attempt not counted.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "domain/evaluators.h"
#include "domain/plan.h"
#include "domain/request.h"
#include "domain/run.h"
#include "engine/internal.h"
#include "store/db.h"
#include "store/jobs.h"
#include "store/tools.h"

static size_t collect(char *ptr, size_t size, size_t nmemb, void *ud)
{
    return evd_buf_append(ud, ptr, size * nmemb) == 0 ? size * nmemb : 0;
}

/* POSTs `body` to an HTTP evaluator and returns its JSON answer (new reference). */
/* Aborts the evaluator call once the run is cancelled (checked about once a second). */
static int abort_when_cancelled(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut,
                                curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    return evd_cancel_is_set(ud) ? 1 : 0;
}

static json_t *post_json(const char *url, const json_t *body, long timeout_ms,
                         struct evd_cancel *cancel, struct evd_err *err)
{
    char *text = json_dumps(body, JSON_COMPACT);
    struct evd_buf out = {.limit = 4 * 1024 * 1024};
    CURL *h = curl_easy_init();
    json_t *answer = NULL;
    if (text == NULL || h == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    struct curl_slist *hl = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, abort_when_cancelled);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, cancel);
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hl);
    if (cc == CURLE_ABORTED_BY_CALLBACK) {
        evd_err_set(err, EVD_ECANCELLED, "evaluator call cancelled");
    } else if (cc == CURLE_OPERATION_TIMEDOUT) {
        evd_err_set(err, EVD_ETIMEOUT, "evaluator exceeded its %ld ms timeout", timeout_ms);
    } else if (cc != CURLE_OK) {
        evd_err_set(err, EVD_EUPSTREAM, "could not call the evaluator: %s", curl_easy_strerror(cc));
    } else if (status < 200 || status > 299) {
        evd_err_set(err, EVD_EUPSTREAM, "evaluator returned HTTP %ld", status);
    } else {
        json_error_t jerr;
        answer = json_loadb(out.data ? out.data : "", out.len, JSON_DECODE_ANY, &jerr);
        if (answer == NULL)
            evd_err_set(err, EVD_EUPSTREAM, "evaluator answered invalid JSON: %s", jerr.text);
    }
out:
    if (h)
        curl_easy_cleanup(h);
    free(text);
    evd_buf_free(&out);
    return answer;
}

/*
 * Scores a run with its evaluator: a built-in, the agent review, an HTTP tool of that
 * id, or else a function of the iii engine when the adapter is configured (at least
 * once, within invocation_timeout_seconds). On success *evaluation is the validated
 * EvaluatorResponseV1 (new reference). The agent review also leaves its reviewer's turns
 * in *review (new reference or NULL).
 */
static enum evd_code evaluate(struct evd_engine *e, PGconn *c, const char *evaluation_id,
                              const struct evd_request_view *view, const json_t *run, json_t *tools,
                              struct evd_cancel *cancel, json_t **evaluation, json_t **review,
                              struct evd_err *err)
{
    enum evd_code rc = EVD_OK;
    json_t *input = evd_run_evaluator_input(evaluation_id, run, view->evaluator_arguments);
    json_t *answer = NULL;
    if (input == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    if (evd_evaluator_is_agent_review(view->evaluator_function_id)) {
        rc = evd_engine_review(e->opts.providers, input, &view->limits, tools, cancel, &answer,
                               review, err);
    } else if (evd_evaluator_is_builtin(view->evaluator_function_id)) {
        struct evd_evaluator_input in;
        if ((rc = evd_request_evaluator_input(input, &in, err)) == EVD_OK)
            rc = evd_evaluator_run(view->evaluator_function_id, &in, &answer, err);
    } else {
        struct evd_tool tool;
        evd_db_ensure(c); /* a restart of PostgreSQL during the run broke it */
        rc = evd_store_tool_get(c, view->evaluator_function_id, &tool, err);
        const struct evd_engine_remote *remote = e->opts.remote;
        if (rc == EVD_ENOTFOUND && remote != NULL) {
            int64_t timeout = (int64_t)view->limits.invocation_timeout_seconds * 1000;
            evd_err_clear(err);
            answer = remote->call(remote->ctx, view->evaluator_function_id, input, timeout, cancel,
                                  true, err);
            rc = answer ? EVD_OK : (err ? err->code : EVD_EUPSTREAM);
        } else if (rc == EVD_ENOTFOUND) {
            rc = evd_err_set(err, EVD_ENOTFOUND, "no evaluator function %s is registered",
                             view->evaluator_function_id);
        } else if (rc == EVD_OK) {
            long timeout = tool.timeout_ms;
            long cap = (long)view->limits.invocation_timeout_seconds * 1000;
            answer = post_json(tool.url, input, timeout < cap ? timeout : cap, cancel, err);
            rc = answer ? EVD_OK : (err ? err->code : EVD_EUPSTREAM);
            evd_store_tool_clear(&tool);
        }
    }
    if (rc == EVD_OK)
        rc = evd_evaluator_check_response(answer, evaluation, err);
    json_decref(answer);
    json_decref(input);
    return rc;
}

/* How long a run waits for the list of the iii engine's functions. */
#define REMOTE_LIST_TIMEOUT_MS 5000

/* The remote functions as a harness function source, bound to the run's cancel token. */
struct remote_source {
    const struct evd_engine_remote *remote;
    struct evd_cancel *cancel;
};

static json_t *remote_source_call(void *ctx, const char *function_id, json_t *payload,
                                  int64_t timeout_ms, struct evd_err *err)
{
    const struct remote_source *s = ctx;
    /* A tool call may have effects: it is never repeated behind the model's back. */
    return s->remote->call(s->remote->ctx, function_id, payload, timeout_ms, s->cancel, false, err);
}

/* True when a function policy could allow anything (a non-empty allow list). */
static bool policy_may_allow(const json_t *policy)
{
    return json_is_object(policy) && json_array_size(json_object_get(policy, "allow")) > 0;
}

/* Phase 1. Returns the attempt to run, 0 when there is nothing to run. */
static int start_attempt(struct evd_engine *e, PGconn *c, const struct evd_store_job *job,
                         struct evd_store_eval *ev, struct evd_err *err)
{
    (void)e;
    int attempt = 0;
    int64_t now = evd_now_ms();
    if (evd_db_begin(c, err) != EVD_OK)
        return 0;
    enum evd_code rc = evd_store_eval_get(c, job->evaluation_id, true, ev, err);
    if (rc == EVD_ENOTFOUND || (rc == EVD_OK && evd_engine_status_terminal(ev->status))) {
        /* Deleted or finished meanwhile: the job is obsolete. */
        evd_store_job_delete(c, job->id, err);
        goto commit;
    }
    if (rc != EVD_OK)
        goto rollback;
    struct evd_store_run_state st;
    if (evd_store_run_state(c, job->evaluation_id, job->run_position, &st, err) != EVD_OK)
        goto rollback;
    if (evd_engine_status_terminal(st.status)) {
        evd_store_job_delete(c, job->id, err);
        evd_engine_advance(c, job->evaluation_id, now, err);
        goto commit;
    }
    if (st.attempt >= EVD_MAX_ATTEMPTS) {
        /* Every attempt was lost to an interruption (a crash loop, most likely: attempts
         * given back do not count): fail the run, phase setup. */
        json_t *runs = evd_store_runs(c, job->evaluation_id, false, err);
        json_t *run = json_array_get(runs, (size_t)job->run_position - 1);
        bool written = false, finalize = false;
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "run was interrupted %d times (its process crashed, or was stopped or cut off "
                 "from the database past its lease); attempts exhausted",
                 st.attempt);
        if (run == NULL ||
            evd_store_run_start(c, job->evaluation_id, job->run_position, st.attempt, now, err) ||
            evd_run_fail(run, EVD_PHASE_SETUP, NULL, msg, now) != 0 ||
            evd_engine_write_run(c, job->evaluation_id, job->run_position, st.attempt, run, NULL,
                                 &written, &finalize, now, err) != EVD_OK ||
            (finalize && evd_engine_advance(c, job->evaluation_id, now, err) != EVD_OK)) {
            json_decref(runs);
            goto rollback;
        }
        json_decref(runs);
        goto commit;
    }
    attempt = st.attempt + 1;
    if (evd_store_run_start(c, job->evaluation_id, job->run_position, attempt, now, err)) {
        attempt = 0;
        goto rollback;
    }
commit:
    if (evd_db_commit(c, err) == EVD_OK)
        return attempt;
rollback:
    evd_db_rollback(c);
    return 0;
}

/*
 * Gives the run back (at shutdown, or when its lease could not be renewed in time):
 * pending again, this attempt not counted, the job free for anyone at once. Only while
 * this process still holds the lease and the run this attempt: a run taken over is left
 * to its new owner.
 */
static void hand_back(struct evd_engine *e, PGconn *c, const struct evd_store_job *job,
                      int attempt)
{
    struct evd_err err = {0};
    if (!evd_db_ensure(c)) {
        evd_log(EVD_LOG_WARN, "could not hand a run back; its lease runs out", "evaluation_id",
                job->evaluation_id, NULL);
        return;
    }
    if (evd_store_job_hand_back(c, job->id, e->owner, job->evaluation_id, job->run_position,
                                attempt, &err) != EVD_OK)
        evd_log(EVD_LOG_WARN, "could not hand a run back; its lease runs out", "evaluation_id",
                job->evaluation_id, "error", err.msg, NULL);
}

struct run_progress {
    PGconn *c;
    const char *evaluation_id;
    int position;
    int attempt;
};

/* Harness progress callback: keeps the running run's metrics snapshot for comparisons. */
static void on_progress(void *ctx, json_t *metrics)
{
    struct run_progress *p = ctx;
    struct evd_err err = {0};
    if (evd_store_run_progress(p->c, p->evaluation_id, p->position, p->attempt, metrics, &err) !=
        EVD_OK)
        evd_log(EVD_LOG_DEBUG, "could not record run progress", "evaluation_id", p->evaluation_id,
                "error", err.msg, NULL);
}

static json_t *transcript_of(const struct evd_harness_outcome *out, json_t *review)
{
    json_t *t = out->transcript ? json_deep_copy(out->transcript) : json_object();
    if (t != NULL && out->spans != NULL)
        json_object_set(t, "spans", out->spans);
    if (t != NULL && review != NULL)
        json_object_set(t, "evaluator", review);
    return t;
}

/*
 * The stored request of an evaluation, decoded (new reference). Requests never change, so
 * each process keeps the text of the last EVD_REQUEST_CACHE it ran (a run of a known
 * evaluation reads nothing), and decodes a private copy for every run.
 */
static json_t *request_of(struct evd_engine *e, PGconn *c, const char *id, struct evd_err *err)
{
    json_t *request = NULL;
    json_error_t jerr;
    pthread_mutex_lock(&e->requests_mu);
    for (size_t i = 0; i < EVD_REQUEST_CACHE; i++) {
        struct cached_request *q = &e->requests[i];
        if (q->text != NULL && strcmp(q->id, id) == 0) {
            q->used = ++e->requests_tick;
            request = json_loads(q->text, 0, &jerr);
            break;
        }
    }
    pthread_mutex_unlock(&e->requests_mu);
    if (request != NULL)
        return request;
    char *text = NULL;
    if (evd_store_eval_request_text(c, id, &text, err) != EVD_OK)
        return NULL;
    if ((request = json_loads(text, 0, &jerr)) == NULL) {
        evd_err_set(err, EVD_EINTERNAL, "stored request of %s cannot be decoded", id);
        free(text);
        return NULL;
    }
    pthread_mutex_lock(&e->requests_mu);
    struct cached_request *oldest = &e->requests[0];
    for (size_t i = 1; i < EVD_REQUEST_CACHE; i++)
        if (e->requests[i].used < oldest->used)
            oldest = &e->requests[i];
    free(oldest->text);
    snprintf(oldest->id, sizeof(oldest->id), "%s", id);
    oldest->text = text;
    oldest->used = ++e->requests_tick;
    pthread_mutex_unlock(&e->requests_mu);
    return request;
}

static void execute(struct evd_engine *e, PGconn *c, const struct evd_store_job *job,
                    int attempt, const struct evd_store_eval *evp, bool *outstanding);

void evd_engine_process_job(struct evd_engine *e, PGconn *c, const struct evd_store_job *job,
                            bool *outstanding)
{
    struct evd_err err = {0};
    struct evd_store_eval ev = {0};
    int attempt = start_attempt(e, c, job, &ev, &err);
    if (attempt > 0)
        execute(e, c, job, attempt, &ev, outstanding);
    else if (err.code != EVD_OK)
        evd_log(EVD_LOG_WARN, "could not start run", "evaluation_id", job->evaluation_id,
                "error", err.msg, NULL);
    evd_store_eval_clear(&ev);
}

void evd_engine_process_started(struct evd_engine *e, PGconn *c, const struct evd_store_job *job,
                                int attempt, bool *outstanding)
{
    struct evd_err err = {0};
    struct evd_store_eval ev = {0};
    snprintf(ev.id, sizeof(ev.id), "%s", job->evaluation_id);
    if ((ev.request = request_of(e, c, job->evaluation_id, &err)) == NULL) {
        evd_log(EVD_LOG_WARN, "could not start run", "evaluation_id", job->evaluation_id,
                "error", err.msg, NULL);
        hand_back(e, c, job, attempt);
        return;
    }
    execute(e, c, job, attempt, &ev, outstanding);
    evd_store_eval_clear(&ev);
}

/* Phases 2 and 3 of a run whose attempt `attempt` has started; `evp` has its evaluation's
 * id and request. The outcome goes to the writer thread. */
static void execute(struct evd_engine *e, PGconn *c, const struct evd_store_job *job,
                    int attempt, const struct evd_store_eval *evp, bool *outstanding)
{
    struct evd_err err = {0};
    const struct evd_store_eval ev = *evp;
    struct evd_harness_outcome out = {0};
    struct evd_request_view view;
    json_t *run = NULL, *tools = NULL, *transcript = NULL, *evaluation = NULL, *review = NULL;
    json_t *remote_fns = NULL;
    struct remote_source source = {e->opts.remote, NULL};
    struct evd_harness_dispatch dispatch = {0};
    struct evd_cancel *cancel = NULL;
    int slot = -1;

    if (evd_request_view(ev.request, &view, &err) != EVD_OK) {
        evd_log(EVD_LOG_ERROR, "stored request cannot be decoded", "evaluation_id", ev.id, "error",
                err.msg, NULL);
        goto out;
    }
    struct evd_plan_entry entry = evd_plan_entry_at(view.order, (size_t)job->run_position - 1);
    run = evd_run_new(ev.id, &entry);
    const json_t *variant = entry.role == EVD_ROLE_CONTROL ? view.control : view.treatment;
    json_t *sp = json_object_get(variant, "system_prompt");
    /* Registered HTTP tools matter only to a policy that may allow one, and to the agent
     * review (whose reviewer has a policy of its own). */
    if (policy_may_allow(view.functions) ||
        evd_evaluator_is_agent_review(view.evaluator_function_id))
        tools = evd_store_tools_json(c, &err);
    else
        tools = json_array();
    cancel = evd_cancel_new();
    if (run == NULL || tools == NULL || cancel == NULL)
        goto out;
    int64_t started_at = evd_now_ms();
    evd_run_mark_running(run, started_at);
    int64_t deadline = evd_mono_ms() + (int64_t)view.limits.scenario_timeout_seconds * 1000;
    slot = evd_engine_inflight_add(e, job, attempt, cancel, deadline);

    struct run_progress pctx = {c, ev.id, job->run_position, attempt};
    struct evd_harness_input in = {
        .session_id = json_string_value(json_object_get(run, "session_id")),
        .prompt = json_string_value(json_object_get(variant, "prompt")),
        .system_prompt = json_is_string(sp) ? json_string_value(sp) : NULL,
        .model = (json_t *)view.model,
        .limits = json_object_get(ev.request, "limits"),
        .functions = (json_t *)view.functions,
        .output = (json_t *)view.output,
        .metadata = (json_t *)view.metadata,
        .tools = tools,
        .progress = on_progress,
        .progress_ctx = &pctx,
    };
    if (e->opts.remote != NULL && policy_may_allow(view.functions)) {
        struct evd_err lerr = {0};
        remote_fns = e->opts.remote->functions(e->opts.remote->ctx, (json_t *)view.functions,
                                               REMOTE_LIST_TIMEOUT_MS, &lerr);
        if (remote_fns == NULL) {
            evd_log(EVD_LOG_WARN,
                    "could not list the iii engine's functions; the run sees "
                    "HTTP tools only",
                    "evaluation_id", ev.id, "error", lerr.msg, NULL);
        } else {
            source.cancel = cancel;
            dispatch = (struct evd_harness_dispatch){remote_fns, remote_source_call, &source};
            in.dispatch = &dispatch;
        }
    }
    char att[16];
    snprintf(att, sizeof(att), "%d", attempt);
    evd_log(EVD_LOG_DEBUG, "run started", "evaluation_id", ev.id, "run_id",
            json_string_value(json_object_get(run, "run_id")), "attempt", att, NULL);
    evd_harness_run(e->opts.providers, &in, cancel, &out, &err);

    enum inflight_reason reason = REASON_NONE;
    bool interrupted = out.status == EVD_HARNESS_CANCELLED; /* the token stopped a call */
    int64_t now = evd_now_ms();
    if (out.status == EVD_HARNESS_COMPLETED && out.output != NULL &&
        evd_run_record_outcome(run, out.output, out.metrics, (uint64_t)out.wall_time_ms, now) ==
            0 &&
        evd_run_needs_evaluation(ev.request, run)) {
        /* The harness does not snapshot its final generation (the outcome follows at
         * once); an evaluator that calls out may take a while, so snapshot it here. */
        if (!evd_evaluator_is_builtin(view.evaluator_function_id) && out.metrics != NULL) {
            json_t *snap = json_deep_copy(out.metrics);
            if (snap != NULL && json_object_set_new(snap, "complete", json_false()) == 0)
                on_progress(&pctx, snap);
            json_decref(snap);
        }
        int64_t t0 = evd_now_ms();
        struct evd_err everr = {0};
        if (evaluate(e, c, ev.id, &view, run, tools, cancel, &evaluation, &review, &everr) !=
            EVD_OK) {
            interrupted = evd_cancel_is_set(cancel); /* a failure the token may have caused */
            evd_run_fail(run, EVD_PHASE_EVALUATE, view.evaluator_function_id, everr.msg,
                         evd_now_ms());
        } else {
            /* The evaluator call is a span of the run's trace too. */
            int64_t t1 = evd_now_ms();
            if (out.spans && json_is_array(out.spans)) {
                json_array_append_new(out.spans,
                                      json_pack("{s:s, s:s, s:I, s:I, s:s, s:{s:s}}", "name",
                                                view.evaluator_function_id, "kind", "evaluator",
                                                "start_ms", (json_int_t)t0, "end_ms",
                                                (json_int_t)t1, "status", "ok", "attributes",
                                                "function_id", view.evaluator_function_id));
                json_t *traces = evd_harness_traces_from_spans(in.session_id, out.spans);
                if (traces && out.metrics)
                    json_object_set_new(out.metrics, "traces", traces);
                else
                    json_decref(traces);
            }
            now = evd_now_ms();
            evd_run_record_outcome(run, out.output, out.metrics, (uint64_t)(now - started_at), now);
            evd_run_complete(run, &view.limits, evaluation);
        }
    } else if (out.status == EVD_HARNESS_COMPLETED) {
        evd_run_record_outcome(run, out.output, out.metrics, (uint64_t)out.wall_time_ms, now);
        evd_run_complete(run, &view.limits, NULL);
    } else {
        enum evd_phase phase = EVD_PHASE_SEND;
        if (out.phase == NULL || !evd_phase_parse(out.phase, &phase))
            phase = EVD_PHASE_SEND;
        evd_run_record_outcome(run, out.output, out.metrics, (uint64_t)out.wall_time_ms, now);
        evd_run_fail(run, phase, NULL, out.result_error ? out.result_error : "run failed", now);
    }
    /* The slot stays registered, so that the keeper renews the lease until the writer
     * has written the outcome. */
    reason = evd_engine_inflight_hold(e, slot);
    if (reason == REASON_LEASE && !interrupted)
        reason = REASON_NONE; /* finished before its deadline stopped anything: write it */

    if (reason == REASON_SHUTDOWN || reason == REASON_LEASE) {
        if (reason == REASON_LEASE)
            evd_log(EVD_LOG_WARN, "lease not renewed in time; run handed back", "evaluation_id",
                    ev.id, NULL);
        hand_back(e, c, job, attempt);
        goto out;
    }
    if (reason == REASON_CANCELLED)
        goto out; /* the run was cancelled, or the job taken away: nothing to write */
    if (reason == REASON_DEADLINE) {
        char msg[128];
        snprintf(msg, sizeof(msg), "run exceeded %llus wall-clock limit",
                 (unsigned long long)view.limits.scenario_timeout_seconds);
        json_t *fresh = evd_run_new(ev.id, &entry);
        if (fresh == NULL)
            goto out;
        evd_run_mark_running(fresh, started_at);
        evd_run_record_outcome(fresh, NULL, out.metrics, (uint64_t)(now - started_at), now);
        evd_run_fail(fresh, EVD_PHASE_AWAIT, NULL, msg, now);
        json_decref(run);
        run = fresh;
    }
    transcript = transcript_of(&out, review);
    /* The writer thread writes it, with other workers' runs, in one transaction; this
     * worker claims its next run meanwhile. */
    char *record = evd_store_finish_record(ev.id, job->run_position, attempt, run, transcript);
    if (record != NULL) {
        evd_engine_write_later(e, record, ev.id, json_string_value(json_object_get(run, "status")),
                               slot, outstanding);
        slot = -1; /* the writer's now */
    } else
        evd_log(EVD_LOG_WARN, "could not record run", "evaluation_id", ev.id, "error",
                "out of memory", NULL);
out:
    if (slot >= 0)
        evd_engine_inflight_remove(e, slot);
    evd_harness_outcome_clear(&out);
    evd_cancel_free(cancel);
    json_decref(run);
    json_decref(tools);
    json_decref(remote_fns);
    json_decref(transcript);
    json_decref(evaluation);
    json_decref(review);
}
