/*
 * Wire encoders: the non-streaming response bodies of OpenAI Responses, Chat
 * Completions and Anthropic Messages, their error bodies and model lists, and the
 * mapping of the script's usage numbers onto each wire's usage object. Pure; every
 * returned json_t is a new reference owned by the caller.
 */
#include "stub/stub.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define MODEL_CREATED_S 1735689600 /* 2025-01-01T00:00:00Z, a fixed listing date */
#define MODEL_CREATED_AT "2025-01-01T00:00:00Z"

static json_t *id_string(const char *prefix)
{
    char id[64];
    evd_new_id(prefix, id, sizeof(id));
    return json_string(id);
}

/* Appends `item` (stolen) to `arr`; false on failure, with `item` released. */
static bool push(json_t *arr, json_t *item)
{
    if (item == NULL)
        return false;
    return json_array_append_new(arr, item) == 0;
}

/* OpenAI counts every input token in input_tokens, cache reads and writes included. */
static json_int_t openai_input(const struct stub_usage *u)
{
    return (json_int_t)(u->input + u->cached + u->cache_write);
}

static json_t *responses_usage(const struct stub_usage *u)
{
    json_t *in_details = json_pack("{s:I}", "cached_tokens", (json_int_t)u->cached);
    if (in_details != NULL && u->cache_write > 0)
        json_object_set_new(in_details, "cache_write_tokens", json_integer(u->cache_write));
    return json_pack("{s:I,s:o,s:I,s:{s:I},s:I}", "input_tokens", openai_input(u),
                     "input_tokens_details", in_details, "output_tokens", (json_int_t)u->output,
                     "output_tokens_details", "reasoning_tokens", (json_int_t)u->reasoning,
                     "total_tokens", openai_input(u) + (json_int_t)u->output);
}

static json_t *chat_usage(const struct stub_usage *u)
{
    json_t *in_details = json_pack("{s:I}", "cached_tokens", (json_int_t)u->cached);
    if (in_details != NULL && u->cache_write > 0)
        json_object_set_new(in_details, "cache_write_tokens", json_integer(u->cache_write));
    return json_pack("{s:I,s:I,s:I,s:o,s:{s:I}}", "prompt_tokens", openai_input(u),
                     "completion_tokens", (json_int_t)u->output, "total_tokens",
                     openai_input(u) + (json_int_t)u->output, "prompt_tokens_details", in_details,
                     "completion_tokens_details", "reasoning_tokens", (json_int_t)u->reasoning);
}

/* Anthropic's input_tokens exclude the cache counters, which are reported apart. */
static json_t *messages_usage(const struct stub_usage *u)
{
    return json_pack("{s:I,s:I,s:I,s:{s:I,s:I},s:I,s:s}", "input_tokens", (json_int_t)u->input,
                     "cache_creation_input_tokens", (json_int_t)u->cache_write,
                     "cache_read_input_tokens", (json_int_t)u->cached, "cache_creation",
                     "ephemeral_5m_input_tokens", (json_int_t)u->cache_write,
                     "ephemeral_1h_input_tokens", (json_int_t)0, "output_tokens",
                     (json_int_t)u->output, "service_tier", "standard");
}

static json_t *responses_reply(const struct stub_view *v, const struct stub_out *o)
{
    json_t *output = json_array();
    const char *status = o->incomplete ? "incomplete" : "completed";
    if (output == NULL)
        return NULL;
    if (o->usage.reasoning > 0 && !push(output, json_pack("{s:s,s:o,s:[]}", "type", "reasoning",
                                                          "id", id_string("rs_"), "summary")))
        goto fail;
    if (o->text != NULL || o->refusal != NULL) {
        json_t *part = o->refusal != NULL
                           ? json_pack("{s:s,s:s}", "type", "refusal", "refusal", o->refusal)
                           : json_pack("{s:s,s:s,s:[],s:[]}", "type", "output_text", "text",
                                       o->text, "annotations", "logprobs");
        if (!push(output,
                  json_pack("{s:s,s:o,s:s,s:s,s:[o]}", "type", "message", "id", id_string("msg_"),
                            "status", status, "role", "assistant", "content", part)))
            goto fail;
    }
    for (size_t i = 0; i < o->ncalls; i++)
        if (!push(output, json_pack("{s:s,s:o,s:o,s:s,s:s,s:s}", "type", "function_call", "id",
                                    id_string("fc_"), "call_id", id_string("call_"), "name",
                                    o->calls[i].name, "arguments", o->calls[i].arguments, "status",
                                    "completed")))
            goto fail;
    json_t *incomplete =
        o->incomplete ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null();
    return json_pack("{s:o,s:s,s:I,s:s,s:n,s:o,s:s,s:o,s:b,s:o,s:n,s:s,s:{s:{s:s}},s:[],s:{}}",
                     "id", id_string("resp_"), "object", "response", "created_at",
                     (json_int_t)(evd_now_ms() / 1000), "status", status, "error",
                     "incomplete_details", incomplete, "model", v->model, "output", output,
                     "parallel_tool_calls", 1, "usage", responses_usage(&o->usage),
                     "previous_response_id", "tool_choice", "auto", "text", "format", "type",
                     "text", "tools", "metadata");
fail:
    json_decref(output);
    return NULL;
}

static json_t *chat_reply(const struct stub_view *v, const struct stub_out *o)
{
    json_t *msg = json_pack("{s:s,s:o,s:o}", "role", "assistant", "content",
                            o->text != NULL ? json_string(o->text) : json_null(), "refusal",
                            o->refusal != NULL ? json_string(o->refusal) : json_null());
    if (msg == NULL)
        return NULL;
    if (o->ncalls > 0) {
        json_t *calls = json_array();
        if (json_object_set_new(msg, "tool_calls", calls) != 0)
            goto fail;
        for (size_t i = 0; i < o->ncalls; i++)
            if (!push(calls, json_pack("{s:o,s:s,s:{s:s,s:s}}", "id", id_string("call_"), "type",
                                       "function", "function", "name", o->calls[i].name,
                                       "arguments", o->calls[i].arguments)))
                goto fail;
    }
    const char *finish = o->incomplete ? "length" : o->ncalls > 0 ? "tool_calls" : "stop";
    return json_pack("{s:o,s:s,s:I,s:s,s:[{s:i,s:o,s:n,s:s}],s:o,s:n}", "id",
                     id_string("chatcmpl-"), "object", "chat.completion", "created",
                     (json_int_t)(evd_now_ms() / 1000), "model", v->model, "choices", "index", 0,
                     "message", msg, "logprobs", "finish_reason", finish, "usage",
                     chat_usage(&o->usage), "system_fingerprint");
fail:
    json_decref(msg);
    return NULL;
}

static json_t *messages_reply(const struct stub_view *v, const struct stub_out *o)
{
    json_t *content = json_array();
    if (content == NULL)
        return NULL;
    const char *text = o->refusal != NULL ? o->refusal : o->text;
    if (text != NULL && !push(content, json_pack("{s:s,s:s}", "type", "text", "text", text)))
        goto fail;
    for (size_t i = 0; i < o->ncalls; i++) {
        json_t *input = json_loads(o->calls[i].arguments, 0, NULL);
        if (!json_is_object(input)) {
            json_decref(input);
            input = json_object();
        }
        if (!push(content,
                  json_pack("{s:s,s:o,s:s,s:o}", "type", "tool_use", "id", id_string("toolu_"),
                            "name", o->calls[i].name, "input", input)))
            goto fail;
    }
    const char *stop = o->refusal != NULL ? "refusal"
                       : o->incomplete    ? "max_tokens"
                       : o->ncalls > 0    ? "tool_use"
                                          : "end_turn";
    return json_pack("{s:o,s:s,s:s,s:s,s:o,s:s,s:n,s:o}", "id", id_string("msg_"), "type",
                     "message", "role", "assistant", "model", v->model, "content", content,
                     "stop_reason", stop, "stop_sequence", "usage", messages_usage(&o->usage));
fail:
    json_decref(content);
    return NULL;
}

json_t *stub_wire_reply(const struct stub_view *v, const struct stub_out *o)
{
    switch (v->api) {
    case STUB_API_RESPONSES:
        return responses_reply(v, o);
    case STUB_API_CHAT:
        return chat_reply(v, o);
    case STUB_API_MESSAGES:
        return messages_reply(v, o);
    default:
        return NULL;
    }
}

static const char *anthropic_type(int status)
{
    switch (status) {
    case 401:
        return "authentication_error";
    case 402:
        return "billing_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 413:
        return "request_too_large";
    case 429:
        return "rate_limit_error";
    case 504:
        return "timeout_error";
    case 529:
        return "overloaded_error";
    default:
        return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

json_t *stub_wire_error(enum stub_api api, bool anthropic, int status, const char *message)
{
    if (api == STUB_API_MESSAGES || anthropic) {
        return json_pack("{s:s,s:{s:s,s:s},s:o}", "type", "error", "error", "type",
                         anthropic_type(status), "message", message, "request_id",
                         id_string("req_"));
    }
    const char *type = status >= 500 ? "server_error" : "invalid_request_error";
    const char *code = NULL;
    switch (status) {
    case 401:
        code = "invalid_api_key";
        break;
    case 403:
        type = "permission_error";
        break;
    case 404:
        code = "not_found";
        break;
    case 405:
        code = "method_not_allowed";
        break;
    case 413:
        code = "request_too_large";
        break;
    case 429:
        type = "requests";
        code = "rate_limit_exceeded";
        break;
    default:
        break;
    }
    return json_pack("{s:{s:s,s:s,s:n,s:o}}", "error", "message", message, "type", type, "param",
                     "code", code != NULL ? json_string(code) : json_null());
}

json_t *stub_wire_model(bool anthropic, const char *name)
{
    if (anthropic)
        return json_pack("{s:s,s:s,s:s,s:s}", "type", "model", "id", name, "display_name", name,
                         "created_at", MODEL_CREATED_AT);
    return json_pack("{s:s,s:s,s:I,s:s}", "id", name, "object", "model", "created",
                     (json_int_t)MODEL_CREATED_S, "owned_by", "evald-stub");
}

json_t *stub_wire_models(bool anthropic, char *const *names, size_t n)
{
    json_t *data = json_array();
    if (data == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (!push(data, stub_wire_model(anthropic, names[i]))) {
            json_decref(data);
            return NULL;
        }
    if (!anthropic)
        return json_pack("{s:s,s:o}", "object", "list", "data", data);
    return json_pack("{s:o,s:b,s:s?,s:s?}", "data", data, "has_more", 0, "first_id",
                     n > 0 ? names[0] : NULL, "last_id", n > 0 ? names[n - 1] : NULL);
}
