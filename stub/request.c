/*
 * Reads one Responses, Chat Completions or Messages request body into a stub_view:
 * the latest user text, the system text, tool results after the latest user message,
 * offered functions and a requested output schema. Pure; one request thread owns a view.
 */
#include "stub/stub.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

const char *stub_api_name(enum stub_api api)
{
    static const char *names[STUB_API_COUNT] = {"responses", "chat", "messages", "models", "other"};
    return (unsigned)api < STUB_API_COUNT ? names[api] : "other";
}

struct acc {
    struct evd_buf prompt, system, results;
    size_t chars;
    bool has_result;
    bool oom;
};

static void put(struct evd_buf *b, const char *s, struct acc *a)
{
    if (b->len > 0 && evd_buf_append(b, "\n", 1) != 0)
        a->oom = true;
    if (evd_buf_append(b, s, strlen(s)) != 0)
        a->oom = true;
}

/* True when `type` (may be NULL) names a text part in any of the three wires. */
static bool text_part(const char *type)
{
    return type == NULL || strcmp(type, "text") == 0 || strcmp(type, "input_text") == 0 ||
           strcmp(type, "output_text") == 0;
}

/*
 * Appends the text of a content value (a string, or an array of parts with "text")
 * to b (when not NULL); returns the number of characters seen.
 */
static size_t content_text(json_t *content, struct evd_buf *b, struct acc *a)
{
    if (json_is_string(content)) {
        if (b != NULL)
            put(b, json_string_value(content), a);
        return json_string_length(content);
    }
    size_t n = 0, i;
    json_t *part;
    json_array_foreach(content, i, part)
    {
        if (json_is_string(part)) {
            if (b != NULL)
                put(b, json_string_value(part), a);
            n += json_string_length(part);
            continue;
        }
        json_t *text = json_object_get(part, "text");
        if (!json_is_string(text) || !text_part(json_string_value(json_object_get(part, "type"))))
            continue;
        if (b != NULL)
            put(b, json_string_value(text), a);
        n += json_string_length(text);
    }
    return n;
}

static void user_text(json_t *content, struct acc *a)
{
    a->prompt.len = 0;
    if (a->prompt.data != NULL)
        a->prompt.data[0] = '\0';
    a->results.len = 0;
    if (a->results.data != NULL)
        a->results.data[0] = '\0';
    a->has_result = false;
    a->chars += content_text(content, &a->prompt, a);
}

static void tool_result(json_t *content, struct acc *a)
{
    a->has_result = true;
    a->chars += content_text(content, &a->results, a);
}

static enum evd_code add_tool(json_t *tools, json_t *name, json_t *schema)
{
    if (!json_is_string(name))
        return EVD_OK;
    json_t *t = json_pack("{s:O,s:O}", "name", name, "schema",
                          json_is_object(schema) ? schema : json_null());
    if (t == NULL || json_array_append_new(tools, t) != 0)
        return EVD_ENOMEM;
    return EVD_OK;
}

static enum evd_code parse_responses(json_t *body, struct stub_view *v, struct acc *a,
                                     struct evd_err *err)
{
    json_t *instr = json_object_get(body, "instructions");
    if (instr != NULL && !json_is_string(instr) && !json_is_null(instr))
        return evd_err_set(err, EVD_EINVAL, "instructions must be a string");
    if (json_is_string(instr)) {
        put(&a->system, json_string_value(instr), a);
        a->chars += json_string_length(instr);
    }
    json_t *input = json_object_get(body, "input");
    if (json_is_string(input)) {
        user_text(input, a);
    } else if (json_is_array(input)) {
        size_t i;
        json_t *item;
        json_array_foreach(input, i, item)
        {
            if (!json_is_object(item))
                return evd_err_set(err, EVD_EINVAL, "input[%zu] must be an object", i);
            const char *type = json_string_value(json_object_get(item, "type"));
            const char *role = json_string_value(json_object_get(item, "role"));
            if (type != NULL && strcmp(type, "function_call_output") == 0) {
                tool_result(json_object_get(item, "output"), a);
            } else if (type != NULL && strcmp(type, "function_call") == 0) {
                const char *args = json_string_value(json_object_get(item, "arguments"));
                a->chars += args != NULL ? strlen(args) : 0;
            } else if (role != NULL && (type == NULL || strcmp(type, "message") == 0)) {
                json_t *content = json_object_get(item, "content");
                if (strcmp(role, "user") == 0)
                    user_text(content, a);
                else if (strcmp(role, "system") == 0 || strcmp(role, "developer") == 0)
                    a->chars += content_text(content, &a->system, a);
                else
                    a->chars += content_text(content, NULL, a);
            }
        }
    } else if (input != NULL && !json_is_null(input)) {
        return evd_err_set(err, EVD_EINVAL, "input must be a string or an array");
    }
    json_t *format = json_object_get(json_object_get(body, "text"), "format");
    const char *ftype = json_string_value(json_object_get(format, "type"));
    if (ftype != NULL && strcmp(ftype, "json_schema") == 0) {
        v->schema = json_object_get(format, "schema");
        if (!json_is_object(v->schema))
            return evd_err_set(err, EVD_EINVAL, "text.format.schema must be an object");
    }
    size_t i;
    json_t *tool;
    json_array_foreach(json_object_get(body, "tools"), i, tool)
    {
        const char *ttype = json_string_value(json_object_get(tool, "type"));
        if (ttype == NULL || strcmp(ttype, "function") != 0)
            continue;
        if (add_tool(v->tools, json_object_get(tool, "name"),
                     json_object_get(tool, "parameters")) != EVD_OK)
            return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    return EVD_OK;
}

static enum evd_code parse_chat(json_t *body, struct stub_view *v, struct acc *a,
                                struct evd_err *err)
{
    json_t *messages = json_object_get(body, "messages");
    if (!json_is_array(messages))
        return evd_err_set(err, EVD_EINVAL, "messages must be an array");
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role == NULL)
            return evd_err_set(err, EVD_EINVAL, "messages[%zu].role must be a string", i);
        json_t *content = json_object_get(m, "content");
        if (strcmp(role, "user") == 0) {
            user_text(content, a);
        } else if (strcmp(role, "system") == 0 || strcmp(role, "developer") == 0) {
            a->chars += content_text(content, &a->system, a);
        } else if (strcmp(role, "tool") == 0) {
            tool_result(content, a);
        } else {
            a->chars += content_text(content, NULL, a);
            size_t j;
            json_t *call;
            json_array_foreach(json_object_get(m, "tool_calls"), j, call)
            {
                json_t *fargs = json_object_get(json_object_get(call, "function"), "arguments");
                a->chars += json_is_string(fargs) ? json_string_length(fargs) : 0;
            }
        }
    }
    json_t *rf = json_object_get(body, "response_format");
    const char *rtype = json_string_value(json_object_get(rf, "type"));
    if (rtype != NULL && strcmp(rtype, "json_schema") == 0) {
        v->schema = json_object_get(json_object_get(rf, "json_schema"), "schema");
        if (!json_is_object(v->schema))
            return evd_err_set(err, EVD_EINVAL,
                               "response_format.json_schema.schema must be an object");
    }
    json_t *tool;
    json_array_foreach(json_object_get(body, "tools"), i, tool)
    {
        json_t *fn = json_object_get(tool, "function");
        if (add_tool(v->tools, json_object_get(fn, "name"), json_object_get(fn, "parameters")) !=
            EVD_OK)
            return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    return EVD_OK;
}

static bool has_tool_result_block(json_t *content)
{
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b)
    {
        const char *type = json_string_value(json_object_get(b, "type"));
        if (type != NULL && strcmp(type, "tool_result") == 0)
            return true;
    }
    return false;
}

static enum evd_code parse_messages(json_t *body, struct stub_view *v, struct acc *a,
                                    struct evd_err *err)
{
    json_t *max_tokens = json_object_get(body, "max_tokens");
    if (!json_is_integer(max_tokens) || json_integer_value(max_tokens) < 1)
        return evd_err_set(err, EVD_EINVAL, "max_tokens: field required (a positive integer)");
    json_t *system = json_object_get(body, "system");
    if (system != NULL && !json_is_string(system) && !json_is_array(system))
        return evd_err_set(err, EVD_EINVAL, "system must be a string or an array of blocks");
    a->chars += content_text(system, &a->system, a);
    json_t *messages = json_object_get(body, "messages");
    if (!json_is_array(messages))
        return evd_err_set(err, EVD_EINVAL, "messages: field required (an array)");
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role == NULL || (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0))
            return evd_err_set(err, EVD_EINVAL,
                               "messages.%zu.role: must be \"user\" or \"assistant\"", i);
        json_t *content = json_object_get(m, "content");
        if (!json_is_string(content) && !json_is_array(content))
            return evd_err_set(err, EVD_EINVAL,
                               "messages.%zu.content: must be a string or an array", i);
        if (strcmp(role, "user") != 0) {
            a->chars += content_text(content, NULL, a);
            size_t j;
            json_t *b;
            json_array_foreach(content, j, b)
            {
                json_t *input = json_object_get(b, "input");
                if (input != NULL) {
                    char *s = json_dumps(input, JSON_COMPACT);
                    a->chars += s != NULL ? strlen(s) : 0;
                    free(s);
                }
            }
        } else if (has_tool_result_block(content)) {
            size_t j;
            json_t *b;
            json_array_foreach(content, j, b)
            {
                const char *type = json_string_value(json_object_get(b, "type"));
                if (type != NULL && strcmp(type, "tool_result") == 0)
                    tool_result(json_object_get(b, "content"), a);
            }
        } else {
            user_text(content, a);
        }
    }
    json_t *format = json_object_get(json_object_get(body, "output_config"), "format");
    if (format == NULL)
        format = json_object_get(body, "output_format");
    const char *ftype = json_string_value(json_object_get(format, "type"));
    if (ftype != NULL && strcmp(ftype, "json_schema") == 0) {
        v->schema = json_object_get(format, "schema");
        if (!json_is_object(v->schema))
            return evd_err_set(err, EVD_EINVAL, "output_config.format.schema must be an object");
    }
    json_t *tool;
    json_array_foreach(json_object_get(body, "tools"), i, tool)
    {
        json_t *schema = json_object_get(tool, "input_schema");
        if (schema == NULL)
            continue; /* a server tool, not a function the client runs */
        if (add_tool(v->tools, json_object_get(tool, "name"), schema) != EVD_OK)
            return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    return EVD_OK;
}

static char *take(struct evd_buf *b)
{
    char *s = b->data != NULL ? b->data : strdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

enum evd_code stub_view_parse(enum stub_api api, json_t *body, struct stub_view *v,
                              struct evd_err *err)
{
    enum evd_code rc = EVD_OK;
    struct acc a = {.oom = false};
    const char *session = v->session;
    memset(v, 0, sizeof(*v));
    v->api = api;
    v->session = session;
    if (!json_is_object(body)) {
        rc = evd_err_set(err, EVD_EINVAL, "the request body must be a JSON object");
        goto out;
    }
    v->model = json_string_value(json_object_get(body, "model"));
    if (v->model == NULL || v->model[0] == '\0') {
        rc = evd_err_set(err, EVD_EINVAL, "model: field required (a non-empty string)");
        goto out;
    }
    json_t *stream = json_object_get(body, "stream");
    v->stream = json_is_true(stream);
    v->tools = json_array();
    if (v->tools == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    if (api == STUB_API_RESPONSES)
        rc = parse_responses(body, v, &a, err);
    else if (api == STUB_API_CHAT)
        rc = parse_chat(body, v, &a, err);
    else
        rc = parse_messages(body, v, &a, err);
    if (rc != EVD_OK)
        goto out;
    if (a.oom) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    v->prompt = take(&a.prompt);
    v->system = take(&a.system);
    v->tool_results = take(&a.results);
    v->has_tool_result = a.has_result;
    v->input_chars = a.chars;
    if (v->prompt == NULL || v->system == NULL || v->tool_results == NULL)
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
out:
    evd_buf_free(&a.prompt);
    evd_buf_free(&a.system);
    evd_buf_free(&a.results);
    return rc;
}

void stub_view_free(struct stub_view *v)
{
    if (v == NULL)
        return;
    free(v->prompt);
    free(v->system);
    free(v->tool_results);
    json_decref(v->tools);
    v->prompt = v->system = v->tool_results = NULL;
    v->tools = NULL;
}
