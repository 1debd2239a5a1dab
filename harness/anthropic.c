/*
 * Anthropic Messages wire format (POST {base}/v1/messages), kind "anthropic-messages".
 * Consecutive neutral messages of one role are merged into one Messages turn (tool results
 * first, as the API requires); assistant turns from Anthropic are replayed verbatim so
 * thinking blocks keep their signatures; a conversation that opens with the assistant gets
 * a user's opening line before it (EVD_HX_ANTHROPIC_OPENING), as the API requires the user
 * first. Pure; thread-safe.
 */
#include "harness/internal.h"

#include <stdlib.h>
#include <string.h>

/* Appends blocks to the last message when it has `role`, else starts a new message. */
static int push_blocks(json_t *messages, const char *role, json_t *blocks /* steals */)
{
    size_t n = json_array_size(messages);
    json_t *last = n > 0 ? json_array_get(messages, n - 1) : NULL;
    if (blocks == NULL)
        return -1;
    if (json_array_size(blocks) == 0) {
        json_decref(blocks);
        return 0;
    }
    if (last != NULL && strcmp(json_string_value(json_object_get(last, "role")) ?: "", role) == 0) {
        int rc = json_array_extend(json_object_get(last, "content"), blocks);
        json_decref(blocks);
        return rc;
    }
    return json_array_append_new(messages, json_pack("{s:s,s:o}", "role", role, "content", blocks));
}

static json_t *assistant_blocks(json_t *msg)
{
    json_t *state = json_object_get(msg, "provider_state");
    const char *kind = json_string_value(json_object_get(state, "kind"));
    if (kind != NULL && strcmp(kind, "anthropic-messages") == 0 &&
        json_is_array(json_object_get(state, "items")))
        return json_deep_copy(json_object_get(state, "items"));
    json_t *blocks = json_array();
    if (blocks == NULL)
        return NULL;
    const char *text = json_string_value(json_object_get(msg, "content"));
    if (text != NULL && text[0] != '\0' &&
        json_array_append_new(blocks, json_pack("{s:s,s:s}", "type", "text", "text", text)))
        goto fail;
    size_t i;
    json_t *tc;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, tc)
    {
        json_t *args = json_object_get(tc, "arguments");
        json_t *input = json_is_object(args) ? json_incref(args) : json_object();
        json_t *b =
            json_pack("{s:s,s:O,s:O,s:o}", "type", "tool_use", "id", json_object_get(tc, "id"),
                      "name", json_object_get(tc, "name"), "input", input);
        if (b == NULL || json_array_append_new(blocks, b) != 0)
            goto fail;
    }
    return blocks;
fail:
    json_decref(blocks);
    return NULL;
}

static const char *effort_of(const char *level)
{
    if (strcmp(level, "minimal") == 0)
        return "low";
    return level; /* low, medium, high, xhigh */
}

/* A neutral tool as an Anthropic Messages tool (new reference). */
static json_t *anthropic_tool(json_t *t)
{
    return json_pack("{s:O,s:O,s:O}", "name", json_object_get(t, "name"), "description",
                     json_object_get(t, "description"), "input_schema",
                     json_object_get(t, "parameters"));
}

json_t *evd_hx_anthropic_build(const struct evd_hx_request *r, struct evd_err *err)
{
    json_t *messages = json_array();
    json_t *body = json_pack("{s:s,s:I,s:o}", "model", r->model, "max_tokens",
                             (json_int_t)r->max_output_tokens, "messages", messages);
    if (body == NULL)
        goto nomem;
    if (r->system != NULL && json_object_set_new(body, "system", json_string(r->system)))
        goto nomem;
    size_t i;
    json_t *m;
    /* The API wants the user first; a conversation that opens with the assistant (a case's
     * greeting, or a simulated user's view with the roles swapped) gets an opening line. */
    const char *first = json_string_value(json_object_get(json_array_get(r->messages, 0), "role"));
    if (first != NULL && strcmp(first, "assistant") == 0 &&
        push_blocks(messages, "user",
                    json_pack("[{s:s,s:s}]", "type", "text", "text", EVD_HX_ANTHROPIC_OPENING)) !=
            0)
        goto nomem;
    json_array_foreach(r->messages, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        int rc = 0;
        if (role == NULL)
            continue;
        if (strcmp(role, "user") == 0) {
            rc = push_blocks(
                messages, "user",
                json_pack("[{s:s,s:O}]", "type", "text", "text", json_object_get(m, "content")));
        } else if (strcmp(role, "tool") == 0) {
            json_t *b = json_pack("{s:s,s:O,s:O}", "type", "tool_result", "tool_use_id",
                                  json_object_get(m, "tool_call_id"), "content",
                                  json_object_get(m, "content"));
            if (b != NULL && json_is_true(json_object_get(m, "is_error")))
                json_object_set_new(b, "is_error", json_true());
            rc = push_blocks(messages, "user", b ? json_pack("[o]", b) : NULL);
        } else if (strcmp(role, "assistant") == 0) {
            rc = push_blocks(messages, "assistant", assistant_blocks(m));
        }
        if (rc != 0)
            goto nomem;
    }
    if (json_array_size(r->tools) > 0) {
        if (!evd_hx_put_each(body, "tools", r->tools, anthropic_tool))
            goto nomem;
        /* A history with tool_use blocks needs `tools`: the repair keeps them, unusable. */
        if (r->tools_disabled &&
            json_object_set_new(body, "tool_choice", json_pack("{s:s}", "type", "none")) != 0)
            goto nomem;
    }
    if (r->thinking_level != NULL || r->output_format != NULL) {
        json_t *oc = json_object();
        if (oc == NULL || json_object_set_new(body, "output_config", oc) != 0)
            goto nomem;
        if (r->thinking_level != NULL &&
            (json_object_set_new(body, "thinking", json_pack("{s:s}", "type", "adaptive")) ||
             json_object_set_new(oc, "effort", json_string(effort_of(r->thinking_level)))))
            goto nomem;
        if (r->output_format != NULL && json_object_set(oc, "format", r->output_format) != 0)
            goto nomem;
    }
    return body;
nomem:
    json_decref(body);
    evd_err_set(err, EVD_ENOMEM, "out of memory building the anthropic-messages request");
    return NULL;
}

enum evd_code evd_hx_anthropic_parse(json_t *body, struct evd_hx_reply *out, struct evd_err *err)
{
    struct evd_buf text = {0};
    json_t *content = json_object_get(body, "content");
    const char *type = json_string_value(json_object_get(body, "type"));
    if (type != NULL && strcmp(type, "error") == 0) {
        const char *msg =
            json_string_value(json_object_get(json_object_get(body, "error"), "message"));
        return evd_err_set(err, EVD_EUPSTREAM, "error reply: %.200s", msg ? msg : "unknown");
    }
    if (!json_is_array(content))
        return evd_err_set(err, EVD_EUPSTREAM, "message has no content array");
    out->tool_calls = json_array();
    if (out->tool_calls == NULL)
        goto nomem;
    snprintf(out->stop_reason, sizeof(out->stop_reason), "%s",
             json_string_value(json_object_get(body, "stop_reason")) ?: "");
    snprintf(out->model, sizeof(out->model), "%s",
             json_string_value(json_object_get(body, "model")) ?: "");
    snprintf(out->id, sizeof(out->id), "%s", json_string_value(json_object_get(body, "id")) ?: "");
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b)
    {
        const char *bt = json_string_value(json_object_get(b, "type"));
        if (bt == NULL)
            continue;
        if (strcmp(bt, "text") == 0) {
            const char *t = json_string_value(json_object_get(b, "text"));
            if (t != NULL && evd_buf_append(&text, t, strlen(t)) != 0)
                goto nomem;
        } else if (strcmp(bt, "tool_use") == 0) {
            json_t *input = json_object_get(b, "input");
            char *args = input ? json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
            json_t *c = evd_hx_tool_call(json_string_value(json_object_get(b, "id")),
                                         json_string_value(json_object_get(b, "name")),
                                         args ? args : "{}", input);
            free(args);
            if (c == NULL || json_array_append_new(out->tool_calls, c) != 0)
                goto nomem;
        }
    }
    json_t *u = json_object_get(body, "usage");
    struct evd_hx_usage *us = &out->usage;
    us->has_input = evd_hx_get_count(u, "input_tokens", &us->input);
    us->has_output = evd_hx_get_count(u, "output_tokens", &us->output);
    us->has_cache_read = evd_hx_get_count(u, "cache_read_input_tokens", &us->cache_read);
    us->has_cache_write = evd_hx_get_count(u, "cache_creation_input_tokens", &us->cache_write);
    us->has_reasoning =
        evd_hx_get_count(u, "output_tokens_details.reasoning_tokens", &us->reasoning) ||
        evd_hx_get_count(u, "output_tokens_details.thinking_tokens", &us->reasoning);
    /* Anthropic's input_tokens excludes cache reads and writes; evald's input counts all. */
    if (us->has_input) {
        if (us->has_cache_read)
            us->input += us->cache_read;
        if (us->has_cache_write)
            us->input += us->cache_write;
    }
    if (!evd_hx_reply_finish(out, &text, "anthropic-messages", content))
        goto nomem;
    return EVD_OK;
nomem:
    evd_buf_free(&text);
    return evd_err_set(err, EVD_ENOMEM, "out of memory parsing the anthropic-messages reply");
}
