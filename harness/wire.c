/*
 * What the three wire formats share: dispatch by kind, provider_options merging, wire
 * lists (tools, replayed calls), tool-call entries, the end of a reply parse and usage counters.
 * Pure functions over jansson values; thread-safe.
 */
#include "harness/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *evd_hx_endpoint(enum evd_provider_kind kind)
{
    switch (kind) {
    case EVD_KIND_OPENAI_RESPONSES:
        return "/responses";
    case EVD_KIND_ANTHROPIC_MESSAGES:
        return "/v1/messages";
    case EVD_KIND_OPENAI_CHAT:
        return "/chat/completions";
    }
    return "/";
}

/* Keys a provider_options object may not replace: the harness owns them. */
static bool protected_key(const char *k)
{
    static const char *keys[] = {"model",  "input", "messages", "instructions",
                                 "system", "tools", "stream",   "previous_response_id"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strcmp(k, keys[i]) == 0)
            return true;
    return false;
}

json_t *evd_hx_build_request(enum evd_provider_kind kind, const struct evd_hx_request *r,
                             struct evd_err *err)
{
    json_t *body = NULL;
    switch (kind) {
    case EVD_KIND_OPENAI_RESPONSES:
        body = evd_hx_responses_build(r, err);
        break;
    case EVD_KIND_ANTHROPIC_MESSAGES:
        body = evd_hx_anthropic_build(r, err);
        break;
    case EVD_KIND_OPENAI_CHAT:
        body = evd_hx_chat_build(r, err);
        break;
    }
    if (body == NULL || !json_is_object(r->provider_options))
        return body;
    /* provider_options[<provider>] goes into the body last, object values merged deeply. */
    const char *k;
    json_t *v;
    json_object_foreach(r->provider_options, k, v)
    {
        if (protected_key(k) || (r->tools_disabled && strcmp(k, "tool_choice") == 0))
            continue;
        json_t *cur = json_object_get(body, k);
        json_t *copy = json_deep_copy(v);
        if (copy == NULL)
            goto nomem;
        if (json_is_object(cur) && json_is_object(copy)) {
            int rc = json_object_update_recursive(cur, copy);
            json_decref(copy);
            if (rc != 0)
                goto nomem;
        } else if (json_is_null(copy)) {
            json_decref(copy);
            json_object_del(body, k); /* null removes a harness default */
        } else if (json_object_set_new(body, k, copy) != 0) {
            goto nomem;
        }
    }
    return body;
nomem:
    json_decref(body);
    evd_err_set(err, EVD_ENOMEM, "out of memory building the request");
    return NULL;
}

enum evd_code evd_hx_parse_reply(enum evd_provider_kind kind, json_t *body,
                                 struct evd_hx_reply *out, struct evd_err *err)
{
    memset(out, 0, sizeof(*out));
    enum evd_code rc = EVD_EINTERNAL;
    switch (kind) {
    case EVD_KIND_OPENAI_RESPONSES:
        rc = evd_hx_responses_parse(body, out, err);
        break;
    case EVD_KIND_ANTHROPIC_MESSAGES:
        rc = evd_hx_anthropic_parse(body, out, err);
        break;
    case EVD_KIND_OPENAI_CHAT:
        rc = evd_hx_chat_parse(body, out, err);
        break;
    }
    if (rc != EVD_OK)
        evd_hx_reply_clear(out);
    return rc;
}

void evd_hx_reply_clear(struct evd_hx_reply *r)
{
    free(r->text);
    json_decref(r->tool_calls);
    json_decref(r->message);
    memset(r, 0, sizeof(*r));
}

json_t *evd_hx_tool_call(const char *id, const char *name, const char *arguments_text,
                         json_t *arguments)
{
    json_t *c = json_pack("{s:s,s:s,s:s}", "id", id ? id : "", "name", name ? name : "",
                          "arguments_text", arguments_text ? arguments_text : "{}");
    if (c == NULL)
        return NULL;
    if (arguments != NULL && json_object_set(c, "arguments", arguments) != 0) {
        json_decref(c);
        return NULL;
    }
    return c;
}

json_t *evd_hx_tool_call_from_text(const char *id, const char *name, const char *arguments_text)
{
    json_t *parsed = arguments_text ? json_loads(arguments_text, JSON_DECODE_ANY, NULL) : NULL;
    json_t *c = evd_hx_tool_call(id, name, arguments_text, parsed);
    json_decref(parsed);
    return c;
}

bool evd_hx_reply_finish(struct evd_hx_reply *out, struct evd_buf *text, const char *kind,
                         json_t *items)
{
    out->text = text->data != NULL ? text->data : strdup("");
    text->data = NULL;
    text->len = text->cap = 0;
    if (out->text == NULL)
        return false;
    out->message =
        json_pack("{s:s,s:s,s:O,s:{s:s,s:O}}", "role", "assistant", "content", out->text,
                  "tool_calls", out->tool_calls, "provider_state", "kind", kind, "items", items);
    return out->message != NULL;
}

char *evd_hx_tool_call_args_text(json_t *call)
{
    const char *t = json_string_value(json_object_get(call, "arguments_text"));
    if (t != NULL)
        return strdup(t);
    json_t *a = json_object_get(call, "arguments");
    return a != NULL ? json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
}

bool evd_hx_get_count(json_t *obj, const char *path, int64_t *out)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    json_t *cur = obj;
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok != NULL;
         tok = strtok_r(NULL, ".", &save))
        cur = json_object_get(cur, tok);
    if (!json_is_integer(cur) || json_integer_value(cur) < 0)
        return false;
    *out = (int64_t)json_integer_value(cur);
    return true;
}

double evd_hx_usage_tokens(enum evd_provider_kind kind, json_t *body)
{
    json_t *u = json_object_get(body, "usage");
    int64_t in = 0, out = 0, cache_read = 0, cache_write = 0;
    switch (kind) {
    case EVD_KIND_OPENAI_RESPONSES:
        if (!evd_hx_get_count(u, "input_tokens", &in) ||
            !evd_hx_get_count(u, "output_tokens", &out))
            return -1;
        break;
    case EVD_KIND_OPENAI_CHAT:
        if (!evd_hx_get_count(u, "prompt_tokens", &in) ||
            !evd_hx_get_count(u, "completion_tokens", &out))
            return -1;
        break;
    case EVD_KIND_ANTHROPIC_MESSAGES:
        /* Anthropic's input_tokens leaves out the cache's reads and writes. */
        if (!evd_hx_get_count(u, "input_tokens", &in) ||
            !evd_hx_get_count(u, "output_tokens", &out))
            return -1;
        evd_hx_get_count(u, "cache_read_input_tokens", &cache_read);
        evd_hx_get_count(u, "cache_creation_input_tokens", &cache_write);
        break;
    default:
        return -1;
    }
    return (double)in + (double)out + (double)cache_read + (double)cache_write;
}

bool evd_hx_put_each(json_t *obj, const char *key, json_t *items, json_t *(*shape)(json_t *item))
{
    json_t *list = json_array();
    if (list == NULL || json_object_set_new(obj, key, list) != 0)
        return false;
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        json_t *w = shape(item);
        if (w == NULL || json_array_append_new(list, w) != 0)
            return false;
    }
    return true;
}
