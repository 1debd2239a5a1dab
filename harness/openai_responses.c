/*
 * OpenAI Responses wire format (POST {base}/responses), kind "openai-responses": request
 * building from the neutral conversation and reply parsing. Requests are stateless
 * (store:false, the whole history replayed) and ask for encrypted reasoning so reasoning
 * items can be replayed with function-call outputs. Pure; thread-safe.
 */
#include "harness/internal.h"

#include <stdlib.h>
#include <string.h>

/* Appends the input items of one neutral assistant message. */
static int add_assistant(json_t *input, json_t *msg)
{
    json_t *state = json_object_get(msg, "provider_state");
    const char *kind = json_string_value(json_object_get(state, "kind"));
    if (kind != NULL && strcmp(kind, "openai-responses") == 0) {
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(state, "items"), i, it)
        {
            const char *type = json_string_value(json_object_get(it, "type"));
            if (type == NULL)
                continue;
            if (strcmp(type, "reasoning") == 0) {
                if (json_array_append(input, it) != 0)
                    return -1;
            } else if (strcmp(type, "function_call") == 0) {
                json_t *fc =
                    json_pack("{s:s,s:O*,s:O*,s:O*}", "type", "function_call", "call_id",
                              json_object_get(it, "call_id"), "name", json_object_get(it, "name"),
                              "arguments", json_object_get(it, "arguments"));
                if (fc == NULL || json_array_append_new(input, fc) != 0)
                    return -1;
            } else if (strcmp(type, "message") == 0) {
                /* Replayed as plain assistant text: ids are not persisted with store:false. */
                struct evd_buf t = {0};
                size_t j;
                json_t *part;
                json_array_foreach(json_object_get(it, "content"), j, part)
                {
                    const char *pt = json_string_value(json_object_get(part, "text"));
                    if (pt == NULL)
                        pt = json_string_value(json_object_get(part, "refusal"));
                    if (pt != NULL && evd_buf_append(&t, pt, strlen(pt)) != 0) {
                        evd_buf_free(&t);
                        return -1;
                    }
                }
                json_t *m = t.data == NULL
                                ? NULL
                                : json_pack("{s:s,s:s}", "role", "assistant", "content", t.data);
                evd_buf_free(&t);
                if (m != NULL && json_array_append_new(input, m) != 0)
                    return -1;
            }
        }
        return 0;
    }
    const char *text = json_string_value(json_object_get(msg, "content"));
    if (text != NULL && text[0] != '\0') {
        json_t *m = json_pack("{s:s,s:s}", "role", "assistant", "content", text);
        if (m == NULL || json_array_append_new(input, m) != 0)
            return -1;
    }
    size_t i;
    json_t *tc;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, tc)
    {
        char *args = evd_hx_tool_call_args_text(tc);
        json_t *fc = args == NULL ? NULL
                                  : json_pack("{s:s,s:O,s:O,s:s}", "type", "function_call",
                                              "call_id", json_object_get(tc, "id"), "name",
                                              json_object_get(tc, "name"), "arguments", args);
        free(args);
        if (fc == NULL || json_array_append_new(input, fc) != 0)
            return -1;
    }
    return 0;
}

/* A neutral tool as a Responses function tool (new reference). */
static json_t *responses_tool(json_t *t)
{
    return json_pack("{s:s,s:O,s:O,s:O,s:b}", "type", "function", "name",
                     json_object_get(t, "name"), "description", json_object_get(t, "description"),
                     "parameters", json_object_get(t, "parameters"), "strict", 0);
}

json_t *evd_hx_responses_build(const struct evd_hx_request *r, struct evd_err *err)
{
    json_t *input = json_array();
    json_t *body = json_pack("{s:s,s:o,s:I,s:b,s:[s]}", "model", r->model, "input", input,
                             "max_output_tokens", (json_int_t)r->max_output_tokens, "store", 0,
                             "include", "reasoning.encrypted_content");
    if (body == NULL)
        goto nomem;
    if (r->system != NULL && json_object_set_new(body, "instructions", json_string(r->system)))
        goto nomem;
    size_t i;
    json_t *m;
    json_array_foreach(r->messages, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *item = NULL;
        if (role == NULL)
            continue;
        if (strcmp(role, "user") == 0) {
            item =
                json_pack("{s:s,s:s,s:[{s:s,s:O}]}", "type", "message", "role", "user", "content",
                          "type", "input_text", "text", json_object_get(m, "content"));
        } else if (strcmp(role, "tool") == 0) {
            item = json_pack("{s:s,s:O,s:O}", "type", "function_call_output", "call_id",
                             json_object_get(m, "tool_call_id"), "output",
                             json_object_get(m, "content"));
        } else if (strcmp(role, "assistant") == 0) {
            if (add_assistant(input, m) != 0)
                goto nomem;
            continue;
        } else {
            continue;
        }
        if (item == NULL || json_array_append_new(input, item) != 0)
            goto nomem;
    }
    if (json_array_size(r->tools) > 0 && !r->tools_disabled &&
        !evd_hx_put_each(body, "tools", r->tools, responses_tool))
        goto nomem;
    if (r->thinking_level != NULL &&
        json_object_set_new(body, "reasoning", json_pack("{s:s}", "effort", r->thinking_level)))
        goto nomem;
    if (r->output_format != NULL && json_object_set(body, "text", r->output_format) != 0)
        goto nomem;
    return body;
nomem:
    json_decref(body);
    evd_err_set(err, EVD_ENOMEM, "out of memory building the openai-responses request");
    return NULL;
}

static void usage_of(json_t *u, struct evd_hx_usage *out)
{
    out->has_input = evd_hx_get_count(u, "input_tokens", &out->input);
    out->has_output = evd_hx_get_count(u, "output_tokens", &out->output);
    out->has_cache_read =
        evd_hx_get_count(u, "input_tokens_details.cached_tokens", &out->cache_read);
    out->has_cache_write =
        evd_hx_get_count(u, "input_tokens_details.cache_write_tokens", &out->cache_write);
    out->has_reasoning =
        evd_hx_get_count(u, "output_tokens_details.reasoning_tokens", &out->reasoning);
}

enum evd_code evd_hx_responses_parse(json_t *body, struct evd_hx_reply *out, struct evd_err *err)
{
    struct evd_buf text = {0};
    const char *status = json_string_value(json_object_get(body, "status"));
    json_t *output = json_object_get(body, "output");
    if (status != NULL && (strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0)) {
        const char *msg =
            json_string_value(json_object_get(json_object_get(body, "error"), "message"));
        return evd_err_set(err, EVD_EUPSTREAM, "response %s: %.200s", status,
                           msg ? msg : "no error message");
    }
    if (!json_is_array(output))
        return evd_err_set(err, EVD_EUPSTREAM, "response has no output array");
    out->tool_calls = json_array();
    if (out->tool_calls == NULL)
        goto nomem;
    snprintf(out->stop_reason, sizeof(out->stop_reason), "%s", status ? status : "completed");
    if (status != NULL && strcmp(status, "incomplete") == 0) {
        const char *why = json_string_value(
            json_object_get(json_object_get(body, "incomplete_details"), "reason"));
        if (why != NULL)
            snprintf(out->stop_reason, sizeof(out->stop_reason), "%s", why);
    }
    snprintf(out->model, sizeof(out->model), "%s",
             json_string_value(json_object_get(body, "model")) ?: "");
    snprintf(out->id, sizeof(out->id), "%s", json_string_value(json_object_get(body, "id")) ?: "");
    size_t i;
    json_t *it;
    json_array_foreach(output, i, it)
    {
        const char *type = json_string_value(json_object_get(it, "type"));
        if (type == NULL)
            continue;
        if (strcmp(type, "message") == 0) {
            size_t j;
            json_t *part;
            json_array_foreach(json_object_get(it, "content"), j, part)
            {
                const char *pt = json_string_value(json_object_get(part, "type"));
                const char *t = NULL;
                if (pt != NULL && strcmp(pt, "output_text") == 0)
                    t = json_string_value(json_object_get(part, "text"));
                else if (pt != NULL && strcmp(pt, "refusal") == 0) {
                    t = json_string_value(json_object_get(part, "refusal"));
                    snprintf(out->stop_reason, sizeof(out->stop_reason), "refusal");
                }
                if (t != NULL && evd_buf_append(&text, t, strlen(t)) != 0)
                    goto nomem;
            }
        } else if (strcmp(type, "function_call") == 0) {
            json_t *c =
                evd_hx_tool_call_from_text(json_string_value(json_object_get(it, "call_id")),
                                           json_string_value(json_object_get(it, "name")),
                                           json_string_value(json_object_get(it, "arguments")));
            if (c == NULL || json_array_append_new(out->tool_calls, c) != 0)
                goto nomem;
        }
    }
    usage_of(json_object_get(body, "usage"), &out->usage);
    if (!evd_hx_reply_finish(out, &text, "openai-responses", output))
        goto nomem;
    return EVD_OK;
nomem:
    evd_buf_free(&text);
    return evd_err_set(err, EVD_ENOMEM, "out of memory parsing the openai-responses reply");
}
