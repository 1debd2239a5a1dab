/*
 * The agent loop (DESIGN): validate the run description, resolve the provider, build the
 * system prompt and the tool list from the function policy, then alternate generations and
 * function calls until the model answers without calling a function, max_turns is used up,
 * a budget is exceeded, the scenario deadline passes, a provider call fails for good, or
 * the cancel token fires. Every generation and function call becomes a span and a
 * transcript entry; the metrics are summed from them at the end.
 * One run lives on one thread and owns everything in `struct evd_hx_run` (harness/run.h);
 * inputs are borrowed. The setup, the metrics and the function calls have files of their own.
 */
#include "harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "harness/run.h"

/* ---- the loop ------------------------------------------------------------------------- */

struct verdict {
    enum evd_harness_status status;
    const char *phase;
    enum evd_code code;
    bool output_invalid;
    char error[EVD_ERR_MSG_MAX];
    json_t *output;
};

static void fail(struct verdict *v, enum evd_harness_status st, const char *phase,
                 enum evd_code code, const char *msg)
{
    v->status = st;
    v->phase = phase;
    v->code = code;
    snprintf(v->error, sizeof(v->error), "%s", msg);
}

/* The code of a final answer sent in reply to the repair turn with function calls in it. */
static const char CODE_REPAIR_TOOLS[] =
    "tools_disabled: the repair turn must answer without calling functions";

static json_t *request_summary(const struct evd_hx_run *r, const struct evd_hx_request *q)
{
    json_t *names = json_array();
    size_t i;
    json_t *t;
    bool sent = !q->tools_disabled || r->kind == EVD_KIND_ANTHROPIC_MESSAGES;
    if (sent)
        json_array_foreach(q->tools, i, t) json_array_append(names, json_object_get(t, "name"));
    json_t *s = json_pack("{s:s,s:s,s:I,s:o,s:I,s:s?,s:b}", "endpoint", evd_hx_endpoint(r->kind),
                          "model", q->model, "messages", (json_int_t)json_array_size(q->messages),
                          "tools", names, "max_output_tokens", (json_int_t)q->max_output_tokens,
                          "thinking_level", q->thinking_level, "system_prompt", q->system != NULL);
    if (s != NULL && q->output_format != NULL)
        json_object_set_new(s, "output_format", json_string("json_schema"));
    if (s != NULL && q->tools_disabled)
        json_object_set_new(s, "tool_choice", json_string("none"));
    return s;
}

/* Gives calls without an id (some local servers) a stable one. */
static void ensure_call_ids(json_t *calls, int64_t turn)
{
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c)
    {
        const char *id = json_string_value(json_object_get(c, "id"));
        if (id == NULL || id[0] == '\0') {
            char buf[48];
            snprintf(buf, sizeof(buf), "call_%lld_%zu", (long long)turn, i + 1);
            json_object_set_new(c, "id", json_string(buf));
        }
    }
}

/*
 * A final answer that broke its contract is never kept: its transcript entry loses the text
 * (and any function calls it asked for) and names the failure code instead.
 */
static void withhold_answer(struct evd_hx_run *r, const char *code)
{
    json_t *gen = json_array_get(r->generations, json_array_size(r->generations) - 1);
    if (gen == NULL)
        return;
    json_object_set_new(gen, "text", json_null());
    json_object_set_new(gen, "tool_calls", json_array());
    json_object_set_new(gen, "output_error", json_string(code));
}

enum answer { ANSWER_DONE, ANSWER_REPAIR };

/*
 * Handles a final answer (a generation without function calls, or any generation of the
 * repair turn): decodes it against the output contract; on the first failure queues the
 * one tools-disabled repair turn (ANSWER_REPAIR), otherwise ends the run (ANSWER_DONE).
 */
static enum answer final_answer(struct evd_hx_run *r, struct verdict *v,
                                const struct evd_hx_reply *reply, int64_t turn, bool repairing)
{
    json_t *value = NULL;
    struct evd_so_failure f;
    enum evd_so_result dr;
    char msg[EVD_ERR_MSG_MAX];
    if (json_array_size(reply->tool_calls) > 0) {
        /* Unsolicited calls in the repair turn are never run. */
        memset(&f, 0, sizeof(f));
        snprintf(f.code, sizeof(f.code), "%s", CODE_REPAIR_TOOLS);
        dr = EVD_SO_INVALID;
    } else {
        dr = evd_hx_output_decode(&r->output, reply->text, &value, &f);
    }
    if (dr == EVD_SO_VALID) {
        v->output = value;
        v->status = EVD_HARNESS_COMPLETED;
        if (repairing)
            json_object_set_new(json_array_get(r->generations, json_array_size(r->generations) - 1),
                                "repair", json_true());
        return ANSWER_DONE;
    }
    if (dr == EVD_SO_NOMEM) {
        fail(v, EVD_HARNESS_FAILED, "await", EVD_ENOMEM, "out of memory decoding the final answer");
        return ANSWER_DONE;
    }
    withhold_answer(r, f.code);
    if (repairing) {
        json_object_set_new(json_array_get(r->generations, json_array_size(r->generations) - 1),
                            "repair", json_true());
        fail(v, EVD_HARNESS_FAILED, "await", EVD_EINVAL, f.code);
        v->output_invalid = true;
        return ANSWER_DONE;
    }
    if (turn >= r->max_turns) {
        snprintf(msg, sizeof(msg), "max_turns %lld reached before a valid final answer: %s",
                 (long long)r->max_turns, f.code);
        fail(v, EVD_HARNESS_FAILED, "limit", EVD_ECONFLICT, msg);
        return ANSWER_DONE;
    }
    char *repair = evd_so_repair_message(&f);
    json_t *m = repair ? json_pack("{s:s,s:s}", "role", "user", "content", repair) : NULL;
    free(repair);
    if (m == NULL || json_array_append_new(r->messages, m) != 0) {
        fail(v, EVD_HARNESS_FAILED, "await", EVD_ENOMEM, "out of memory building the repair turn");
        return ANSWER_DONE;
    }
    return ANSWER_REPAIR;
}

/*
 * The loop. The one repair turn shares every deadline of the run (each call's invocation
 * timeout, the scenario deadline): nothing is extended for it.
 */
static void loop(struct evd_hx_run *r, struct verdict *v)
{
    char msg[EVD_ERR_MSG_MAX];
    bool repairing = false;

    for (int64_t turn = 1;; turn++) {
        if (evd_cancel_is_set(r->cancel)) {
            fail(v, EVD_HARNESS_CANCELLED, "cancel", EVD_ECANCELLED, "run was cancelled");
            break;
        }
        if (evd_mono_ms() >= r->deadline) {
            snprintf(msg, sizeof(msg), "run exceeded %llds scenario timeout",
                     (long long)r->scenario_timeout_s);
            fail(v, EVD_HARNESS_FAILED, "await", EVD_ETIMEOUT, msg);
            break;
        }
        struct evd_hx_request q = {r->rm.model,         r->system,        r->messages,
                                   r->wire_tools,       r->max_out,       r->thinking,
                                   r->provider_options, r->output.format, repairing};
        struct evd_err berr = {EVD_OK, ""};
        json_t *body = evd_hx_build_request(r->kind, &q, &berr);
        if (body == NULL) {
            fail(v, EVD_HARNESS_FAILED, "send", berr.code, berr.msg);
            break;
        }
        int64_t w0 = evd_now_ms();
        struct evd_hx_call call;
        evd_hx_provider_call(&r->http, r->rm.provider, r->rm.model, body, r->in->session_id,
                             r->deadline, (int)r->invocation_timeout_s, r->cancel, &call);
        json_decref(body);
        struct evd_hx_reply reply;
        memset(&reply, 0, sizeof(reply));
        struct evd_err perr = {EVD_OK, ""};
        if (call.code == EVD_OK &&
            evd_hx_parse_reply(r->kind, call.body, &reply, &perr) != EVD_OK) {
            call.code = perr.code == EVD_ENOMEM ? EVD_ENOMEM : EVD_EUPSTREAM;
            snprintf(call.error, sizeof(call.error), "%s returned an unusable reply: %.400s",
                     evd_provider_name(r->rm.provider), perr.msg);
        }
        json_decref(call.body);
        int64_t w1 = w0 + call.latency_ms;
        const char *pname = evd_provider_name(r->rm.provider);

        json_t *gen = json_pack(
            "{s:I,s:s,s:s,s:s,s:o,s:I,s:I,s:i,s:I,s:s}", "turn", (json_int_t)turn, "provider",
            pname, "kind", evd_provider_kind_name(r->kind), "model", r->rm.model, "request",
            request_summary(r, &q), "started_at_ms", (json_int_t)w0, "latency_ms",
            (json_int_t)call.latency_ms, "attempts", call.attempts, "http_status",
            (json_int_t)call.status, "status", call.code == EVD_OK ? "ok" : "error");
        r->limiter_wait_ms += call.limiter_wait_ms;
        json_t *attrs = json_pack("{s:I,s:s,s:s,s:i,s:I,s:I}", "turn", (json_int_t)turn,
                                  "provider", pname, "model", r->rm.model, "attempts",
                                  call.attempts, "http_status", (json_int_t)call.status,
                                  "limiter_wait_ms", (json_int_t)call.limiter_wait_ms);
        if (attrs != NULL && repairing)
            json_object_set_new(attrs, "repair", json_true());
        if (call.code != EVD_OK) {
            if (gen != NULL) {
                json_object_set_new(gen, "error", json_string(call.error));
                if (repairing)
                    json_object_set_new(gen, "repair", json_true());
                json_array_append_new(r->generations, gen);
            }
            json_array_append_new(
                r->spans, evd_hx_span_new("generation", "generation", w0, w1, call.error, attrs));
            evd_hx_trace_chat(r, &q, &call, NULL, w0, w1);
            if (call.code == EVD_ECANCELLED) {
                fail(v, EVD_HARNESS_CANCELLED, "cancel", EVD_ECANCELLED, "run was cancelled");
            } else if (call.code == EVD_ETIMEOUT && call.scenario_timeout) {
                snprintf(msg, sizeof(msg), "run exceeded %llds scenario timeout",
                         (long long)r->scenario_timeout_s);
                fail(v, EVD_HARNESS_FAILED, "await", EVD_ETIMEOUT, msg);
            } else
                fail(v, EVD_HARNESS_FAILED, "send", call.code, call.error);
            break;
        }
        ensure_call_ids(reply.tool_calls, turn);
        r->turns++;
        evd_hx_run_add_usage(r, &reply.usage);
        double cost = evd_hx_run_generation_cost(r, r->rm.model, &reply.usage);
        if (cost < 0)
            r->all_priced = false;
        else
            r->cost_usd += cost;
        if (gen != NULL) {
            json_object_set_new(gen, "stop_reason", json_string(reply.stop_reason));
            json_object_set_new(gen, "response_model", json_string(reply.model));
            json_object_set_new(gen, "text", json_string(reply.text));
            json_object_set(gen, "tool_calls", reply.tool_calls);
            json_object_set_new(gen, "usage", evd_hx_usage_json(&reply.usage));
            if (cost >= 0)
                json_object_set_new(gen, "cost_usd", json_real(cost));
            json_array_append_new(r->generations, gen);
        }
        json_array_append_new(r->spans,
                              evd_hx_span_new("generation", "generation", w0, w1, NULL, attrs));
        evd_hx_trace_chat(r, &q, &call, &reply, w0, w1);
        json_array_append(r->messages, reply.message);

        /* A snapshot of the figures so far goes out before anything that takes time (the
         * repair's generation, function calls); the final answer's figures arrive with the
         * outcome, one write later, so they are not snapshotted. */
        size_t ncalls = json_array_size(reply.tool_calls);
        if (ncalls == 0 || repairing) {
            enum answer a = final_answer(r, v, &reply, turn, repairing);
            evd_hx_reply_clear(&reply);
            if (a == ANSWER_REPAIR) {
                evd_hx_run_progress(r);
                repairing = true;
                continue;
            }
            break;
        }
        evd_hx_run_progress(r);
        /* Budgets are checked after each generation, before any function of it runs. */
        int64_t used = r->tot.input + r->tot.output;
        if (r->has_max_total && used > r->max_total_tokens) {
            snprintf(msg, sizeof(msg),
                     "total tokens %lld exceeded max_total_tokens %lld before running %zu "
                     "function call(s)",
                     (long long)used, (long long)r->max_total_tokens, ncalls);
            fail(v, EVD_HARNESS_FAILED, "limit", EVD_ECONFLICT, msg);
        } else if (r->has_max_cost && r->all_priced && r->cost_usd > r->max_cost_usd) {
            snprintf(msg, sizeof(msg),
                     "cost $%.6f exceeded max_cost_usd $%.6f before running %zu function "
                     "call(s)",
                     r->cost_usd, r->max_cost_usd, ncalls);
            fail(v, EVD_HARNESS_FAILED, "limit", EVD_ECONFLICT, msg);
        } else if (turn >= r->max_turns) {
            snprintf(msg, sizeof(msg), "max_turns %lld reached before a final answer",
                     (long long)r->max_turns);
            fail(v, EVD_HARNESS_FAILED, "limit", EVD_ECONFLICT, msg);
        }
        if (v->phase != NULL) {
            evd_hx_reply_clear(&reply);
            break;
        }
        enum evd_code crc = EVD_OK;
        for (size_t i = 0; i < ncalls && crc == EVD_OK; i++) {
            if (evd_cancel_is_set(r->cancel)) {
                crc = EVD_ECANCELLED;
                break;
            }
            /* max_tool_calls is checked before each further call executes. */
            if (r->in->has_max_tool_calls && r->function_calls >= r->in->max_tool_calls) {
                snprintf(msg, sizeof(msg),
                         "function call %lld would exceed max_tool_calls %lld; %zu call(s) not "
                         "run",
                         (long long)r->function_calls + 1, (long long)r->in->max_tool_calls,
                         ncalls - i);
                fail(v, EVD_HARNESS_FAILED, "limit", EVD_ECONFLICT, msg);
                crc = EVD_ECONFLICT;
                break;
            }
            crc = evd_hx_run_call(r, json_array_get(reply.tool_calls, i), turn);
            evd_hx_run_progress(r);
        }
        evd_hx_reply_clear(&reply);
        if (crc == EVD_ECANCELLED) {
            fail(v, EVD_HARNESS_CANCELLED, "cancel", EVD_ECANCELLED, "run was cancelled");
            break;
        }
        if (crc != EVD_OK)
            break;
    }
}

static void run_free(struct evd_hx_run *r)
{
    evd_hx_output_close(&r->output);
    free(r->system);
    free(r->fns);
    free(r->allowed);
    json_decref(r->wire_tools);
    json_decref(r->messages);
    json_decref(r->spans);
    json_decref(r->generations);
    json_decref(r->fcalls);
    evd_hx_client_close(&r->http);
}

const char *evd_harness_status_name(enum evd_harness_status s)
{
    switch (s) {
    case EVD_HARNESS_COMPLETED:
        return "completed";
    case EVD_HARNESS_FAILED:
        return "failed";
    case EVD_HARNESS_CANCELLED:
        return "cancelled";
    }
    return "failed";
}

void evd_harness_outcome_clear(struct evd_harness_outcome *o)
{
    if (o == NULL)
        return;
    json_decref(o->output);
    free(o->result_error);
    json_decref(o->metrics);
    json_decref(o->spans);
    json_decref(o->transcript);
    json_decref(o->conversation);
    memset(o, 0, sizeof(*o));
}

enum evd_code evd_harness_run(const struct evd_providers *providers,
                              const struct evd_harness_input *in, struct evd_cancel *cancel,
                              struct evd_harness_outcome *out, struct evd_err *err)
{
    struct evd_hx_run r;
    struct verdict v;
    struct evd_err serr = {EVD_OK, ""};
    memset(&r, 0, sizeof(r));
    memset(&v, 0, sizeof(v));
    memset(out, 0, sizeof(*out));
    r.providers = providers;
    r.in = in;
    r.cancel = cancel;
    r.all_input = r.all_output = r.all_cache_read = r.all_cache_write = r.all_reasoning =
        r.all_priced = true;
    r.start_wall = evd_now_ms();
    r.start_mono = evd_mono_ms();
    r.spans = json_array();
    r.generations = json_array();
    r.fcalls = json_array();
    v.status = EVD_HARNESS_FAILED;

    if (r.spans == NULL || r.generations == NULL || r.fcalls == NULL) {
        run_free(&r);
        return evd_err_set(err, EVD_ENOMEM, "out of memory starting a run");
    }
    if (evd_hx_run_setup(&r, &serr) != EVD_OK) {
        fail(&v, EVD_HARNESS_FAILED, "setup", serr.code, serr.msg);
    } else {
        r.deadline = r.start_mono + r.scenario_timeout_s * 1000;
        loop(&r, &v);
    }
    int64_t end_wall = r.start_wall + (evd_mono_ms() - r.start_mono);
    json_t *run_span = evd_hx_span_new(
        "run", "run", r.start_wall, end_wall, v.status == EVD_HARNESS_COMPLETED ? NULL : v.error,
        json_pack("{s:s,s:s?,s:s?}", "session_id", in->session_id ? in->session_id : "", "provider",
                  r.rm.provider ? evd_provider_name(r.rm.provider) : NULL, "model", r.rm.model));
    if (run_span != NULL)
        json_array_insert_new(r.spans, 0, run_span);

    out->status = v.status;
    out->phase = v.status == EVD_HARNESS_COMPLETED ? NULL : v.phase;
    out->code = v.status == EVD_HARNESS_COMPLETED ? EVD_OK : v.code;
    out->output_invalid = v.status == EVD_HARNESS_FAILED && v.output_invalid;
    out->output = v.output;
    out->result_error = v.status == EVD_HARNESS_COMPLETED ? NULL : strdup(v.error);
    out->started_at_ms = r.start_wall;
    out->wall_time_ms = end_wall - r.start_wall;
    out->limiter_wait_ms = r.limiter_wait_ms;
    out->metrics = in->session_id != NULL ? evd_hx_run_metrics(&r) : NULL;
    out->spans = json_incref(r.spans);
    out->transcript =
        json_pack("{s:O,s:O}", "generations", r.generations, "function_calls", r.fcalls);
    out->conversation = json_incref(r.messages);
    if (out->conversation == NULL)
        out->conversation = json_array();

    char dur[24];
    snprintf(dur, sizeof(dur), "%lld", (long long)out->wall_time_ms);
    evd_log(v.status == EVD_HARNESS_COMPLETED ? EVD_LOG_INFO : EVD_LOG_WARN, "harness run ended",
            "session_id", in->session_id, "status", evd_harness_status_name(v.status), "phase",
            out->phase, "code", out->code != EVD_OK ? evd_code_name(out->code) : NULL, "dur_ms",
            dur, (char *)NULL);
    run_free(&r);
    if (out->metrics == NULL && in->session_id != NULL) {
        evd_harness_outcome_clear(out);
        return evd_err_set(err, EVD_ENOMEM, "out of memory building the outcome");
    }
    return EVD_OK;
}
