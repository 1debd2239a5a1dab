/*
 * OpenAI Chat Completions wire format (POST {base}/chat/completions), kind "openai-chat",
 * for OpenAI-compatible servers (llama.cpp, vLLM, Ollama). Uses the fields those servers
 * share: max_tokens for the per-call cap and reasoning_effort for the thinking level.
 * Pure; thread-safe.
 */
#include "harness/internal.h"

#include <stdlib.h>
#include <string.h>

/* A neutral tool call as a Chat Completions tool call (new reference). */
static json_t *chat_call(json_t *tc)
{
    char *args = evd_hx_tool_call_args_text(tc);
    json_t *w = args == NULL ? NULL
                             : json_pack("{s:O,s:s,s:{s:O,s:s}}", "id", json_object_get(tc, "id"),
                                         "type", "function", "function", "name",
                                         json_object_get(tc, "name"), "arguments", args);
    free(args);
    return w;
}

static json_t *assistant_message(json_t *msg)
{
    json_t *content = json_object_get(msg, "content");
    const char *text = json_string_value(content);
    json_t *m = json_pack("{s:s,s:o}", "role", "assistant", "content",
                          text != NULL && text[0] != '\0' ? json_string(text) : json_null());
    json_t *calls = json_object_get(msg, "tool_calls");
    if (m == NULL || json_array_size(calls) == 0)
        return m;
    if (!evd_hx_put_each(m, "tool_calls", calls, chat_call)) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* A neutral tool as a Chat Completions function tool (new reference). */
static json_t *chat_tool(json_t *t)
{
    return json_pack("{s:s,s:{s:O,s:O,s:O}}", "type", "function", "function", "name",
                     json_object_get(t, "name"), "description", json_object_get(t, "description"),
                     "parameters", json_object_get(t, "parameters"));
}

json_t *evd_hx_chat_build(const struct evd_hx_request *r, struct evd_err *err)
{
    json_t *messages = json_array();
    json_t *body = json_pack("{s:s,s:o,s:I,s:b}", "model", r->model, "messages", messages,
                             "max_tokens", (json_int_t)r->max_output_tokens, "stream", 0);
    if (body == NULL)
        goto nomem;
    if (r->system != NULL &&
        json_array_append_new(messages,
                              json_pack("{s:s,s:s}", "role", "system", "content", r->system)) != 0)
        goto nomem;
    size_t i;
    json_t *m;
    json_array_foreach(r->messages, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *w = NULL;
        if (role == NULL)
            continue;
        if (strcmp(role, "user") == 0)
            w = json_pack("{s:s,s:O}", "role", "user", "content", json_object_get(m, "content"));
        else if (strcmp(role, "tool") == 0)
            w = json_pack("{s:s,s:O,s:O}", "role", "tool", "tool_call_id",
                          json_object_get(m, "tool_call_id"), "content",
                          json_object_get(m, "content"));
        else if (strcmp(role, "assistant") == 0)
            w = assistant_message(m);
        else
            continue;
        if (w == NULL || json_array_append_new(messages, w) != 0)
            goto nomem;
    }
    if (json_array_size(r->tools) > 0 && !r->tools_disabled &&
        !evd_hx_put_each(body, "tools", r->tools, chat_tool))
        goto nomem;
    if (r->thinking_level != NULL &&
        json_object_set_new(body, "reasoning_effort", json_string(r->thinking_level)))
        goto nomem;
    if (r->output_format != NULL && json_object_set(body, "response_format", r->output_format) != 0)
        goto nomem;
    return body;
nomem:
    json_decref(body);
    evd_err_set(err, EVD_ENOMEM, "out of memory building the openai-chat request");
    return NULL;
}

enum evd_code evd_hx_chat_parse(json_t *body, struct evd_hx_reply *out, struct evd_err *err)
{
    json_t *choice = json_array_get(json_object_get(body, "choices"), 0);
    json_t *msg = json_object_get(choice, "message");
    if (!json_is_object(msg))
        return evd_err_set(err, EVD_EUPSTREAM, "completion has no choices[0].message");
    out->tool_calls = json_array();
    if (out->tool_calls == NULL)
        goto nomem;
    snprintf(out->stop_reason, sizeof(out->stop_reason), "%s",
             json_string_value(json_object_get(choice, "finish_reason")) ?: "");
    snprintf(out->model, sizeof(out->model), "%s",
             json_string_value(json_object_get(body, "model")) ?: "");
    snprintf(out->id, sizeof(out->id), "%s", json_string_value(json_object_get(body, "id")) ?: "");
    const char *text = json_string_value(json_object_get(msg, "content"));
    const char *refusal = json_string_value(json_object_get(msg, "refusal"));
    if (text == NULL && refusal != NULL) {
        text = refusal;
        snprintf(out->stop_reason, sizeof(out->stop_reason), "refusal");
    }
    out->text = strdup(text ? text : "");
    if (out->text == NULL)
        goto nomem;
    size_t i;
    json_t *tc;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, tc)
    {
        json_t *fn = json_object_get(tc, "function");
        json_t *c = evd_hx_tool_call_from_text(json_string_value(json_object_get(tc, "id")),
                                               json_string_value(json_object_get(fn, "name")),
                                               json_string_value(json_object_get(fn, "arguments")));
        if (c == NULL || json_array_append_new(out->tool_calls, c) != 0)
            goto nomem;
    }
    json_t *u = json_object_get(body, "usage");
    struct evd_hx_usage *us = &out->usage;
    us->has_input = evd_hx_get_count(u, "prompt_tokens", &us->input);
    us->has_output = evd_hx_get_count(u, "completion_tokens", &us->output);
    us->has_cache_read =
        evd_hx_get_count(u, "prompt_tokens_details.cached_tokens", &us->cache_read);
    us->has_cache_write =
        evd_hx_get_count(u, "prompt_tokens_details.cache_write_tokens", &us->cache_write);
    us->has_reasoning =
        evd_hx_get_count(u, "completion_tokens_details.reasoning_tokens", &us->reasoning);
    out->message = json_pack("{s:s,s:s,s:O}", "role", "assistant", "content", out->text,
                             "tool_calls", out->tool_calls);
    if (out->message == NULL)
        goto nomem;
    return EVD_OK;
nomem:
    return evd_err_set(err, EVD_ENOMEM, "out of memory parsing the openai-chat reply");
}
