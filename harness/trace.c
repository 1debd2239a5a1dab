/*
 * The OpenTelemetry spans of a run's generations and function calls (docs/otel.md): a
 * `chat <model>` CLIENT span per generation and an `execute_tool <function id>` span per
 * function call, children of the run's root span (in->trace), with the GenAI semantic
 * conventions' attributes. Message content goes in only when evd_trace_capture_content()
 * says so. Spans are built only when a sink is registered; traceparent goes out whether or
 * not, so a user's tool can join the trace id a run document shows. Runs on the run's
 * thread (harness/run.h).
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "harness/run.h"

/* `openai`, `anthropic`, or the configured provider's wire kind. */
static const char *provider_system(const struct evd_hx_run *r)
{
    const char *name = r->rm.provider ? evd_provider_name(r->rm.provider) : NULL;
    if (name != NULL && (strcmp(name, "openai") == 0 || strcmp(name, "anthropic") == 0))
        return name;
    if (r->kind == EVD_KIND_ANTHROPIC_MESSAGES)
        return "anthropic";
    return evd_provider_kind_name(r->kind);
}

/* server.address and server.port of the provider's base URL. */
static void server_of(struct evd_span *s, const char *base)
{
    CURLU *u = base ? curl_url() : NULL;
    char *host = NULL, *port = NULL;
    if (u == NULL)
        return;
    if (curl_url_set(u, CURLUPART_URL, base, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
        evd_span_set_str(s, "server.address", host);
        if (curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
            evd_span_set_int(s, "server.port", atoll(port));
    }
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
}

/* A text part of the conventions' message schema (new reference). */
static json_t *text_part(const char *text)
{
    return json_pack("{s:s,s:s}", "type", "text", "content", text ? text : "");
}

/*
 * The neutral conversation (harness/internal.h) as the conventions' input messages:
 * [{role, parts: [{type: text | tool_call | tool_call_response, …}]}]. New reference.
 */
static json_t *input_messages(json_t *messages)
{
    json_t *out = json_array();
    size_t i, j;
    json_t *m, *tc;
    json_array_foreach(messages, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *parts = json_array();
        if (role != NULL && strcmp(role, "tool") == 0) {
            json_array_append_new(
                parts, json_pack("{s:s,s:O?,s:O?}", "type", "tool_call_response", "id",
                                 json_object_get(m, "tool_call_id"), "response",
                                 json_object_get(m, "content")));
        } else {
            const char *text = json_string_value(json_object_get(m, "content"));
            if (text != NULL && text[0] != '\0')
                json_array_append_new(parts, text_part(text));
            json_array_foreach(json_object_get(m, "tool_calls"), j, tc)
                json_array_append_new(
                    parts, json_pack("{s:s,s:O?,s:O?,s:O?}", "type", "tool_call", "id",
                                     json_object_get(tc, "id"), "name", json_object_get(tc, "name"),
                                     "arguments", json_object_get(tc, "arguments")));
        }
        json_array_append_new(out, json_pack("{s:s,s:o}", "role", role ? role : "user", "parts",
                                             parts));
    }
    return out;
}

static void set_json_text(struct evd_span *s, const char *key, json_t *value /* stolen */)
{
    char *text = value ? json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    evd_span_set_str(s, key, text);
    free(text);
    json_decref(value);
}

void evd_hx_trace_chat(const struct evd_hx_run *r, const struct evd_hx_request *q,
                       const struct evd_hx_call *call, const struct evd_hx_reply *reply,
                       int64_t w0, int64_t w1)
{
    if (r->in->trace == NULL || !evd_trace_enabled())
        return;
    char name[192];
    snprintf(name, sizeof(name), "chat %s", q->model);
    /* The generation was appended to r->generations just before: the first is the root of
     * a run without a root span of its own (chat_root). */
    bool root = r->in->chat_root && json_array_size(r->generations) <= 1;
    struct evd_span *s = evd_span_new(r->in->trace, !root, name, EVD_SPAN_CLIENT, w0 * 1000000);
    if (s == NULL)
        return;
    s->end_ns = w1 * 1000000;
    if (json_is_object(r->in->span_attributes)) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)r->in->span_attributes, key, v)
            evd_span_set(s, key, json_incref(v));
    }
    evd_span_set_str(s, "gen_ai.operation.name", "chat");
    evd_span_set_str(s, "gen_ai.provider.name", provider_system(r));
    evd_span_set_str(s, "gen_ai.request.model", q->model);
    evd_span_set_int(s, "gen_ai.request.max_tokens", q->max_output_tokens);
    server_of(s, r->rm.provider ? evd_provider_base_url(r->rm.provider) : NULL);
    if (q->tools_disabled)
        evd_span_set(s, "evald.repair", json_true()); /* the structured-output repair turn */
    if (call->limiter_wait_ms > 0)
        evd_span_set_int(s, "evald.limiter_wait_ms", call->limiter_wait_ms);
    for (int i = 0; i < call->nretries; i++) {
        json_t *a = json_pack("{s:I,s:I,s:I}", "http.response.status_code",
                              (json_int_t)call->retries[i].status, "evald.retry.wait_ms",
                              (json_int_t)call->retries[i].wait_ms, "evald.retry.attempt",
                              (json_int_t)(i + 1));
        evd_span_event(s, "evald.retry", call->retries[i].at_ms * 1000000, a);
    }
    if (reply != NULL) {
        if (reply->model[0] != '\0')
            evd_span_set_str(s, "gen_ai.response.model", reply->model);
        if (reply->id[0] != '\0')
            evd_span_set_str(s, "gen_ai.response.id", reply->id);
        if (reply->stop_reason[0] != '\0')
            evd_span_set(s, "gen_ai.response.finish_reasons", json_pack("[s]", reply->stop_reason));
        const struct evd_hx_usage *u = &reply->usage;
        if (u->has_input)
            evd_span_set_int(s, "gen_ai.usage.input_tokens", u->input);
        if (u->has_output)
            evd_span_set_int(s, "gen_ai.usage.output_tokens", u->output);
        if (u->has_cache_read)
            evd_span_set_int(s, "gen_ai.usage.cache_read.input_tokens", u->cache_read);
        if (u->has_reasoning)
            evd_span_set_int(s, "gen_ai.usage.reasoning.output_tokens", u->reasoning);
    } else {
        char type[32];
        if (call->status > 0)
            snprintf(type, sizeof(type), "%ld", call->status);
        else
            snprintf(type, sizeof(type), "%s", call->code == EVD_ETIMEOUT     ? "timeout"
                                               : call->code == EVD_ECANCELLED ? "cancelled"
                                                                              : "_OTHER");
        evd_span_fail(s, type, call->error);
    }
    if (evd_trace_capture_content()) {
        if (q->system != NULL)
            set_json_text(s, "gen_ai.system_instructions", json_pack("[o]", text_part(q->system)));
        set_json_text(s, "gen_ai.input.messages", input_messages(q->messages));
        if (reply != NULL && reply->message != NULL) {
            json_t *one = json_pack("[O]", reply->message);
            json_t *out = input_messages(one);
            json_decref(one);
            json_t *first = json_array_get(out, 0);
            if (first != NULL && reply->stop_reason[0] != '\0')
                json_object_set_new(first, "finish_reason", json_string(reply->stop_reason));
            set_json_text(s, "gen_ai.output.messages", out);
        }
    }
    evd_span_submit(s);
}

struct evd_span *evd_hx_trace_tool_begin(const struct evd_hx_run *r, const char *function_id,
                                         bool http, char traceparent[EVD_TRACEPARENT_LEN + 1])
{
    traceparent[0] = '\0';
    if (r->in->trace == NULL)
        return NULL;
    char name[192];
    snprintf(name, sizeof(name), "execute_tool %s", function_id);
    struct evd_span *s = evd_span_new(r->in->trace, true, name,
                                      http ? EVD_SPAN_CLIENT : EVD_SPAN_INTERNAL, evd_now_ns());
    struct evd_trace_ctx ctx = *r->in->trace;
    if (s != NULL)
        evd_span_ctx(s, &ctx);
    else
        evd_trace_random_span_id(ctx.span_id); /* no span, but still a parent id for the callee */
    evd_traceparent(&ctx, traceparent);
    return s;
}

void evd_hx_trace_tool_end(struct evd_span *s, const char *function_id, const char *wire_name,
                           const char *call_id, json_t *arguments, json_t *result,
                           const char *error)
{
    if (s == NULL)
        return;
    if (!evd_trace_enabled()) {
        evd_span_free(s);
        return;
    }
    s->end_ns = evd_now_ns();
    evd_span_set_str(s, "gen_ai.operation.name", "execute_tool");
    evd_span_set_str(s, "gen_ai.tool.name", function_id);
    evd_span_set_str(s, "gen_ai.tool.call.id", call_id);
    if (wire_name != NULL && function_id != NULL && strcmp(wire_name, function_id) != 0)
        evd_span_set_str(s, "evald.tool.wire_name", wire_name);
    if (error != NULL)
        evd_span_fail(s, "tool_error", error);
    if (evd_trace_capture_content()) {
        if (arguments != NULL)
            set_json_text(s, "gen_ai.tool.call.arguments", json_incref(arguments));
        if (result != NULL)
            set_json_text(s, "gen_ai.tool.call.result", json_incref(result));
    }
    evd_span_submit(s);
}
