/* One scenario: the agent turn, then the evaluator; see scenario.h. */
#include "engine/scenario.h"
#include "engine/simulate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/trace.h"
#include "common/util.h"
#include "domain/evaluators.h"
#include "domain/metrics.h"
#include "domain/request.h"
#include "domain/run.h"
#include "domain/trajectory.h"
#include "store/db.h"
#include "store/tools.h"

/*
 * Scores a run with its evaluator: a built-in, the agent review, an HTTP tool of that
 * id, or else a function of the iii engine when the adapter is configured (at least
 * once, within invocation_timeout_seconds). On success *evaluation is the validated
 * EvaluatorResponseV1 (new reference). The agent review also leaves its reviewer's turns
 * in *review (new reference or NULL). The input carries the turn as its `transcript`
 * (domain/trajectory.h; from `turn`, the harness's {generations, function_calls},
 * borrowed or NULL) for every evaluator that may read it (evd_evaluator_reads_transcript)
 * and an experiment run's `case_id`.
 */
static enum evd_code evaluate(struct evd_engine *e, struct evd_wconn *w, const struct evd_scenario *view,
                              const json_t *run, const json_t *turn, json_t *tools,
                              struct evd_cancel *cancel, const char *traceparent,
                              json_t **evaluation, json_t **review, struct evd_err *err)
{
    enum evd_code rc = EVD_OK;
    json_t *input = evd_run_evaluator_input(view->subject_id, run, view->evaluator_arguments);
    json_t *answer = NULL;
    if (input == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *case_id = view->trace != NULL ? view->trace->case_id : NULL;
    /* A conversation kept with the turn (conversation_of) is the transcript as it is. */
    const json_t *kept = json_object_get(turn, "conversation");
    if ((evd_evaluator_reads_transcript(view->evaluator_function_id) &&
         json_object_set_new(input, "transcript",
                             kept != NULL ? json_incref((json_t *)kept)
                                          : evd_trajectory_transcript(
                                                view->messages, view->prompt,
                                                json_object_get(run, "output"), turn)) != 0) ||
        (case_id != NULL && json_object_set_new(input, "case_id", json_string(case_id)) != 0)) {
        json_decref(input);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    if (evd_evaluator_is_agent_review(view->evaluator_function_id)) {
        rc = evd_engine_review(e->opts.providers, input, view->limits, tools, cancel, &answer,
                               review, err);
    } else if (evd_evaluator_is_builtin(view->evaluator_function_id)) {
        struct evd_evaluator_input in;
        if ((rc = evd_request_evaluator_input(input, &in, err)) == EVD_OK)
            rc = evd_evaluator_run(view->evaluator_function_id, &in, &answer, err);
    } else {
        struct evd_tool tool;
        /* The connection only for the lookup: the call itself holds none. */
        PGconn *c = evd_wconn_get(w, err);
        rc = c != NULL ? evd_store_tool_get(c, view->evaluator_function_id, &tool, err)
                       : evd_db_code(err);
        evd_wconn_put(w);
        const struct evd_engine_remote *remote = e->opts.remote;
        if (rc == EVD_ENOTFOUND && remote != NULL) {
            int64_t timeout = (int64_t)view->limits->invocation_timeout_seconds * 1000;
            evd_err_clear(err);
            answer = remote->call(remote->ctx, view->evaluator_function_id, input, timeout, cancel,
                                  true, err);
            rc = answer ? EVD_OK : (err ? err->code : EVD_EUPSTREAM);
        } else if (rc == EVD_ENOTFOUND) {
            rc = evd_err_set(err, EVD_ENOTFOUND, "no evaluator function %s is registered",
                             view->evaluator_function_id);
        } else if (rc == EVD_OK) {
            long timeout = tool.timeout_ms;
            long cap = (long)view->limits->invocation_timeout_seconds * 1000;
            answer = evd_harness_post_json(tool.url, input, timeout < cap ? timeout : cap,
                                           view->session_id, traceparent, cancel, err);
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
 * A run over a case's conversation keeps it, in conversation order with this turn (the
 * transcript of agent-cases.md), as its transcript's `conversation`: what run documents
 * and exports show and what its evaluators read, now and when scored again. Other runs'
 * conversations are their prompt and output, read from the turn when needed. 0, or -1
 * without memory.
 */
static int conversation_of(const struct evd_scenario *s, const struct evd_harness_outcome *out)
{
    if (s->messages == NULL || out->transcript == NULL ||
        json_object_get(out->transcript, "conversation") != NULL)
        return 0;
    json_t *conv = evd_trajectory_transcript(s->messages, s->prompt, out->output,
                                             out->transcript);
    return conv == NULL ? -1 : json_object_set_new(out->transcript, "conversation", conv);
}

/*
 * The agent review's own model use, beside the target's: judge_total_tokens and
 * judge_cost_usd in the run's benchmark, from the reviewer's metrics in `review` (its
 * transcript, borrowed). Nothing when there was no review or it reported nothing.
 */
static void judge_metrics(json_t *run, const json_t *review)
{
    json_t *bench = json_object_get(run, "benchmark");
    json_t *jb = NULL;
    if (!json_is_object(bench) || review == NULL ||
        evd_metrics_benchmark(json_object_get(review, "metrics"), 0, &jb) != EVD_OK || jb == NULL)
        return;
    json_t *tokens = json_object_get(jb, "total_tokens");
    json_t *cost = json_object_get(jb, "cost_usd");
    if (json_is_integer(tokens))
        json_object_set(bench, "judge_total_tokens", tokens);
    if (json_is_number(cost))
        json_object_set(bench, "judge_cost_usd", cost);
    json_decref(jb);
}

/*
 * How long the run's provider calls waited for the process's rate limiter, as
 * limiter_wait_ms in the run's benchmark (an experiment's ExperimentBenchmarkV1; the
 * seed's EvalBenchmarkV1 of an evaluation run has no place for it). Nothing when the run
 * has no benchmark.
 */
static void limiter_metrics(json_t *run, int64_t waited_ms)
{
    json_t *bench = json_object_get(run, "benchmark");
    if (json_is_object(bench))
        json_object_set_new(bench, "limiter_wait_ms",
                            json_integer(waited_ms > 0 ? (json_int_t)waited_ms : 0));
}

/*
 * A simulated conversation's figures in the run's benchmark (agent-cases.md): `turns` the
 * agent's answers, and the simulator's calls, tokens and cost apart from the agent's
 * (simulator_cost_usd only when every call was priced).
 */
static void simulator_metrics(json_t *run, const struct evd_sim_use *u)
{
    json_t *bench = json_object_get(run, "benchmark");
    if (!json_is_object(bench))
        return;
    json_object_set_new(bench, "turns", json_integer(u->answers));
    json_object_set_new(bench, "simulator_calls", json_integer(u->calls));
    json_object_set_new(bench, "simulator_input_tokens", json_integer(u->input_tokens));
    json_object_set_new(bench, "simulator_output_tokens", json_integer(u->output_tokens));
    json_object_set_new(bench, "simulator_total_tokens",
                        json_integer(u->input_tokens + u->output_tokens));
    if (u->priced)
        json_object_set_new(bench, "simulator_cost_usd", json_real(u->cost_usd));
}

/* ---- the run's trace (docs/otel.md) -------------------------------------------------- */

/* The root span `invoke_agent <label>` of the run attempt, or NULL (no trace, nothing
 * exported, or no memory). Also names the run in this thread's log lines. */
static struct evd_span *root_open(const struct evd_scenario *s)
{
    const struct evd_scenario_trace *t = s->trace;
    if (t == NULL)
        return NULL;
    char th[33], sh[17];
    evd_trace_hex(&t->ctx, th, sh);
    evd_log_set_trace(th, sh);
    if (!evd_trace_enabled())
        return NULL;
    const char *agent = t->label ? t->label : t->role;
    char name[192];
    snprintf(name, sizeof(name), "invoke_agent %s", agent ? agent : "agent");
    struct evd_span *root = evd_span_new(&t->ctx, false, name, EVD_SPAN_INTERNAL, evd_now_ns());
    if (root == NULL)
        return NULL;
    evd_span_set_str(root, "gen_ai.operation.name", "invoke_agent");
    evd_span_set_str(root, "gen_ai.agent.name", agent);
    evd_span_set_str(root, "gen_ai.conversation.id", s->session_id);
    evd_span_set_str(root, t->owner_key, t->owner_id);
    evd_span_set_str(root, "evald.run_id", t->run_id);
    evd_span_set_str(root, "evald.role", t->role);
    evd_span_set_int(root, "evald.repeat", t->repeat);
    evd_span_set_int(root, "evald.attempt", t->attempt);
    evd_span_set_str(root, "evald.case_id", t->case_id);
    if (json_is_object(s->model))
        evd_span_set_str(root, "gen_ai.request.model",
                         json_string_value(json_object_get(s->model, "model")));
    return root;
}

/* The evaluator's verdict as the event gen_ai.evaluation.result on the root span. */
static void root_evaluation(struct evd_span *root, const char *function_id,
                            const json_t *evaluation)
{
    if (root == NULL || function_id == NULL || !json_is_object(evaluation))
        return;
    bool passed = json_is_true(json_object_get(evaluation, "passed"));
    const json_t *score = json_object_get(evaluation, "score");
    json_t *a = json_pack("{s:s,s:f,s:s}", "gen_ai.evaluation.name", function_id,
                          "gen_ai.evaluation.score.value",
                          json_is_number(score) ? json_number_value(score) : (passed ? 1.0 : 0.0),
                          "gen_ai.evaluation.score.label", passed ? "pass" : "fail");
    const char *reason = json_string_value(json_object_get(evaluation, "reason"));
    if (a != NULL && reason != NULL && evd_trace_capture_content())
        json_object_set_new(a, "gen_ai.evaluation.explanation", json_string(reason));
    evd_span_event(root, "gen_ai.evaluation.result", evd_now_ns(), a);
}

/* Ends the root span with the run's outcome and submits it. The log lines of the thread
 * go on naming the run until the caller, which opened the run, clears them. */
static void root_close(struct evd_span *root, const json_t *run)
{
    if (root == NULL)
        return;
    root->end_ns = evd_now_ns();
    const char *status = json_string_value(json_object_get(run, "status"));
    if (status != NULL && strcmp(status, "completed") != 0) {
        const json_t *failures = json_object_get(run, "failures");
        const json_t *last = json_array_get(failures, json_array_size(failures) - 1);
        const char *phase = json_string_value(json_object_get(last, "phase"));
        evd_span_fail(root, phase ? phase : status,
                      json_string_value(json_object_get(last, "message")));
    }
    evd_span_submit(root);
}

/* A child span for the evaluator call (CLIENT when it goes over HTTP), and the traceparent
 * the evaluator gets; NULL span when none is exported. */
static struct evd_span *evaluator_open(const struct evd_scenario *s, char tp[56])
{
    tp[0] = '\0';
    if (s->trace == NULL)
        return NULL;
    char name[192];
    snprintf(name, sizeof(name), "evaluate %s", s->evaluator_function_id);
    bool builtin = evd_evaluator_is_builtin(s->evaluator_function_id);
    struct evd_span *sp =
        evd_trace_enabled()
            ? evd_span_new(&s->trace->ctx, true, name,
                           builtin ? EVD_SPAN_INTERNAL : EVD_SPAN_CLIENT, evd_now_ns())
            : NULL;
    struct evd_trace_ctx ctx = s->trace->ctx;
    if (sp != NULL)
        evd_span_ctx(sp, &ctx);
    else
        evd_trace_random_span_id(ctx.span_id);
    evd_traceparent(&ctx, tp);
    evd_span_set_str(sp, "gen_ai.operation.name", "evaluate");
    evd_span_set_str(sp, "gen_ai.evaluation.name", s->evaluator_function_id);
    return sp;
}

static void evaluator_close(struct evd_span *sp, const char *error)
{
    if (sp == NULL)
        return;
    sp->end_ns = evd_now_ns();
    if (error != NULL)
        evd_span_fail(sp, "evaluator_error", error);
    evd_span_submit(sp);
}

void evd_scenario_run(struct evd_engine *e, struct evd_wconn *w, const struct evd_scenario *s, json_t *run,
                      struct evd_cancel *cancel, int64_t started_at,
                      struct evd_scenario_outcome *res)
{
    struct evd_err err = {0};
    struct evd_harness_outcome out = {0};
    json_t *tools = NULL, *evaluation = NULL, *review = NULL, *remote_fns = NULL;
    struct remote_source source = {e->opts.remote, cancel};
    struct evd_harness_dispatch dispatch = {0};
    memset(res, 0, sizeof(*res));
    struct evd_span *root = root_open(s);

    /* Registered HTTP tools matter only to a policy that may allow one, and to the agent
     * review (whose reviewer has a policy of its own). */
    bool review_eval = s->evaluator_function_id != NULL &&
                       evd_evaluator_is_agent_review(s->evaluator_function_id);
    if (policy_may_allow(s->functions) || review_eval)
    {
        PGconn *c = evd_wconn_get(w, &err);
        tools = c != NULL ? evd_store_tools_json(c, &err) : NULL;
    }
    else
        tools = json_array();
    if (tools == NULL) {
        evd_log(EVD_LOG_WARN, "could not prepare run", "subject_id", s->subject_id, "error",
                err.msg, NULL);
        res->not_started = true;
        goto out;
    }
    struct evd_harness_input in = {
        .session_id = s->session_id,
        .prompt = s->prompt,
        .system_prompt = s->system_prompt,
        .conversation = (json_t *)s->messages,
        .mock_tools = (json_t *)s->mock_tools,
        .tool_results = (json_t *)s->tool_results,
        .model = (json_t *)s->model,
        .limits = (json_t *)s->limits_json,
        .functions = (json_t *)s->functions,
        .output = (json_t *)s->output,
        .metadata = (json_t *)s->metadata,
        .tools = tools,
        .progress = s->progress,
        .progress_ctx = s->progress_ctx,
        .trace = s->trace ? &s->trace->ctx : NULL,
    };
    if (e->opts.remote != NULL && policy_may_allow(s->functions)) {
        struct evd_err lerr = {0};
        remote_fns = e->opts.remote->functions(e->opts.remote->ctx, (json_t *)s->functions,
                                               REMOTE_LIST_TIMEOUT_MS, &lerr);
        if (remote_fns == NULL) {
            evd_log(EVD_LOG_WARN,
                    "could not list the iii engine's functions; the run sees "
                    "HTTP tools only",
                    "subject_id", s->subject_id, "error", lerr.msg, NULL);
        } else {
            dispatch = (struct evd_harness_dispatch){remote_fns, remote_source_call, &source};
            in.dispatch = &dispatch;
        }
    }
    /* No database connection is held while the provider works (a progress snapshot takes
     * one for its statement): thousands of calls in flight need few connections. */
    evd_wconn_put(w);
    struct evd_sim_use sim = {0};
    if (s->simulator != NULL) {
        /* Checkpoints go through the progress callback's context: the run's attempt. */
        const struct evd_sim_resume resume = {s->checkpoint, s->save, s->progress_ctx};
        evd_simulate(e->opts.providers, &in, s->simulator, s->simulator_instructions, &resume,
                     cancel, &out, &sim, &err);
    }
    else
        evd_harness_run(e->opts.providers, &in, cancel, &out, &err);

    res->interrupted = out.status == EVD_HARNESS_CANCELLED; /* the token stopped a call */
    if (out.status == EVD_HARNESS_COMPLETED && conversation_of(s, &out) != 0)
        evd_log(EVD_LOG_WARN, "could not keep the run's conversation", "subject_id",
                s->subject_id, "error", "out of memory", NULL);
    int64_t now = evd_now_ms();
    bool needs_evaluation = s->evaluator_function_id != NULL && out.output != NULL &&
                            !json_is_null(out.output);
    if (out.status == EVD_HARNESS_COMPLETED && out.output != NULL &&
        evd_run_record_outcome(run, out.output, out.metrics, (uint64_t)out.wall_time_ms, now) ==
            0 &&
        needs_evaluation) {
        /* The harness does not snapshot its final generation (the outcome follows at
         * once); an evaluator that calls out may take a while, so snapshot it here. */
        if (!evd_evaluator_is_builtin(s->evaluator_function_id) && out.metrics != NULL &&
            s->progress != NULL) {
            json_t *snap = json_deep_copy(out.metrics);
            if (snap != NULL && json_object_set_new(snap, "complete", json_false()) == 0)
                s->progress(s->progress_ctx, snap);
            json_decref(snap);
        }
        int64_t t0 = evd_now_ms();
        struct evd_err everr = {0};
        char tp[56];
        struct evd_span *esp = evaluator_open(s, tp);
        enum evd_code erc = evaluate(e, w, s, run, out.transcript, tools, cancel,
                                     tp[0] ? tp : NULL, &evaluation, &review, &everr);
        evaluator_close(esp, erc != EVD_OK ? everr.msg : NULL);
        root_evaluation(root, s->evaluator_function_id, evaluation);
        if (erc != EVD_OK) {
            res->interrupted = evd_cancel_is_set(cancel); /* a failure the token may cause */
            evd_run_fail(run, EVD_PHASE_EVALUATE, s->evaluator_function_id, everr.msg,
                         evd_now_ms());
        } else {
            /* The evaluator call is a span of the run's trace too. */
            int64_t t1 = evd_now_ms();
            if (out.spans && json_is_array(out.spans)) {
                json_array_append_new(out.spans,
                                      json_pack("{s:s, s:s, s:I, s:I, s:s, s:{s:s}}", "name",
                                                s->evaluator_function_id, "kind", "evaluator",
                                                "start_ms", (json_int_t)t0, "end_ms",
                                                (json_int_t)t1, "status", "ok", "attributes",
                                                "function_id", s->evaluator_function_id));
                json_t *traces = evd_harness_traces_from_spans(in.session_id, out.spans);
                if (traces && out.metrics)
                    json_object_set_new(out.metrics, "traces", traces);
                else
                    json_decref(traces);
            }
            now = evd_now_ms();
            evd_run_record_outcome(run, out.output, out.metrics, (uint64_t)(now - started_at), now);
            evd_run_complete(run, s->limits, evaluation);
            if (s->judge_metrics)
                judge_metrics(run, review);
        }
    } else if (out.status == EVD_HARNESS_COMPLETED) {
        evd_run_record_outcome(run, out.output, out.metrics, (uint64_t)out.wall_time_ms, now);
        evd_run_complete(run, s->limits, NULL);
    } else {
        enum evd_phase phase = EVD_PHASE_SEND;
        if (out.phase == NULL || !evd_phase_parse(out.phase, &phase))
            phase = EVD_PHASE_SEND;
        evd_run_record_outcome(run, out.output, out.metrics, (uint64_t)out.wall_time_ms, now);
        evd_run_fail(run, phase, NULL, out.result_error ? out.result_error : "run failed", now);
    }
    if (s->judge_metrics)
        limiter_metrics(run, out.limiter_wait_ms);
    if (s->simulator != NULL)
        simulator_metrics(run, &sim);
    res->transcript = transcript_of(&out, review);
    res->metrics = out.metrics ? json_incref(out.metrics) : NULL;
out:
    root_close(root, run);
    evd_wconn_put(w);
    evd_harness_outcome_clear(&out);
    json_decref(tools);
    json_decref(remote_fns);
    json_decref(evaluation);
    json_decref(review);
}

void evd_scenario_rescore(struct evd_engine *e, struct evd_wconn *w, const struct evd_scenario *s,
                          json_t *run, const struct evd_scenario_stored *stored,
                          struct evd_cancel *cancel, struct evd_scenario_outcome *res)
{
    struct evd_err err = {0};
    json_t *tools = NULL, *evaluation = NULL, *review = NULL;
    memset(res, 0, sizeof(*res));
    /* A re-score is an attempt of its run too: its trace holds the root span and the new
     * evaluator's verdict (no generation: the model is not called). */
    struct evd_span *root = root_open(s);
    bool review_eval = s->evaluator_function_id != NULL &&
                       evd_evaluator_is_agent_review(s->evaluator_function_id);
    if (review_eval) {
        PGconn *c = evd_wconn_get(w, &err);
        tools = c != NULL ? evd_store_tools_json(c, &err) : NULL;
    } else {
        tools = json_array();
    }
    /* The evaluator may call out: no connection is held during it. */
    evd_wconn_put(w);
    if (tools == NULL) {
        evd_log(EVD_LOG_WARN, "could not prepare run", "subject_id", s->subject_id, "error",
                err.msg, NULL);
        res->not_started = true;
        evd_span_free(root);
        return;
    }
    /* The agent turn as it was: its output, metrics and benchmark (wall time included). */
    int rc = json_object_set_new(run, "output", stored->output ? json_deep_copy(stored->output)
                                                                : json_null());
    if (stored->metrics != NULL)
        rc |= json_object_set_new(run, "metrics", json_deep_copy(stored->metrics));
    if (stored->benchmark != NULL) {
        /* the earlier evaluator's own use is not this one's */
        json_t *bench = json_deep_copy(stored->benchmark);
        json_object_del(bench, "judge_total_tokens");
        json_object_del(bench, "judge_cost_usd");
        rc |= json_object_set_new(run, "benchmark", bench);
    }
    struct evd_err everr = {0};
    enum evd_code erc = EVD_OK;
    if (rc == 0 && s->evaluator_function_id != NULL) {
        erc = evaluate(e, w, s, run, stored->transcript, tools, cancel, NULL, &evaluation,
                       &review, &everr);
        root_evaluation(root, s->evaluator_function_id, evaluation);
    }
    if (rc != 0) {
        evd_run_fail(run, EVD_PHASE_SETUP, NULL, "out of memory", evd_now_ms());
    } else if (s->evaluator_function_id == NULL) {
        json_object_set_new(run, "completed_at", json_integer(evd_now_ms()));
        evd_run_complete(run, s->limits, NULL);
    } else if (erc != EVD_OK) {
        res->interrupted = evd_cancel_is_set(cancel);
        evd_run_fail(run, EVD_PHASE_EVALUATE, s->evaluator_function_id, everr.msg,
                     evd_now_ms());
    } else {
        json_object_set_new(run, "completed_at", json_integer(evd_now_ms()));
        evd_run_complete(run, s->limits, evaluation);
        if (s->judge_metrics)
            judge_metrics(run, review);
    }
    /* The transcript of the agent turn, with this evaluator's reviewer in place of the
     * earlier one's. */
    res->transcript = stored->transcript ? json_deep_copy(stored->transcript) : json_object();
    if (res->transcript != NULL) {
        json_object_del(res->transcript, "evaluator");
        if (review != NULL)
            json_object_set(res->transcript, "evaluator", review);
    }
    res->metrics = stored->metrics ? json_incref((json_t *)stored->metrics) : NULL;
    root_close(root, run);
    json_decref(tools);
    json_decref(evaluation);
    json_decref(review);
}

void evd_scenario_outcome_clear(struct evd_scenario_outcome *out)
{
    json_decref(out->metrics);
    json_decref(out->transcript);
    out->metrics = out->transcript = NULL;
}
