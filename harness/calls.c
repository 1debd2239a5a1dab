/*
 * One function call of a run: the function is looked up under the policy (by tool name,
 * by id, or through the agent_trigger tool), its payload validated, and it is called over
 * HTTP or through the dispatch table, or answered from the case's tool_results when it is
 * a mocked tool (harness/mock.c); the result becomes a tool message, a transcript
 * entry and a span. Runs on the run's thread (harness/run.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/run.h"

#define MAX_TOOL_RESULT (256u << 10) /* bytes of a function result sent back to the model */

/* ---- function calls ------------------------------------------------------------------- */

static const struct evd_hx_function *find_fn(const struct evd_hx_run *r, const char *key,
                                             bool by_id, bool *allowed)
{
    for (size_t i = 0; i < r->nfns; i++) {
        const char *v = by_id ? r->fns[i].id : r->fns[i].tool_name;
        if (strcmp(v, key) == 0) {
            *allowed = r->allowed[i];
            return &r->fns[i];
        }
    }
    *allowed = false;
    return NULL;
}

/* A mocked tool by its wire name, else by its name; NULL when `name` is none. */
static const struct evd_hx_function *find_mock(const struct evd_hx_run *r, const char *name)
{
    for (int by_id = 0; by_id < 2; by_id++)
        for (size_t i = 0; i < r->nfns; i++)
            if (r->fns[i].mocked && strcmp(by_id ? r->fns[i].id : r->fns[i].tool_name, name) == 0)
                return &r->fns[i];
    return NULL;
}

/*
 * Runs one function call the model asked for and appends the tool message, the span and the
 * transcript entry. Returns EVD_ECANCELLED when the run was cancelled during the call.
 */
enum evd_code evd_hx_run_call(struct evd_hx_run *r, json_t *call, int64_t turn)
{
    const char *call_id = json_string_value(json_object_get(call, "id"));
    const char *name = json_string_value(json_object_get(call, "name"));
    json_t *args = json_object_get(call, "arguments");
    const char *function_id = name;
    json_t *payload = NULL;
    json_t *result = NULL;
    struct evd_err ferr = {EVD_OK, ""};
    const struct evd_hx_function *fn = NULL;
    bool allowed = false;
    int64_t t0 = evd_mono_ms(), w0 = evd_now_ms();

    if (args == NULL) {
        evd_err_set(&ferr, EVD_EINVAL, "arguments of %s are not valid JSON", name);
    } else if (r->agent_trigger && (fn = find_mock(r, name)) != NULL) {
        allowed = true; /* a mocked tool, offered natively beside agent_trigger */
        payload = args;
        function_id = fn->id;
    } else if (r->agent_trigger) {
        if (strcmp(name, EVD_HX_AGENT_TRIGGER) != 0) {
            evd_err_set(&ferr, EVD_EINVAL, "tool %s does not exist; call %s", name,
                        EVD_HX_AGENT_TRIGGER);
        } else if ((function_id = json_string_value(json_object_get(args, "function_id"))) ==
                   NULL) {
            function_id = name;
            evd_err_set(&ferr, EVD_EINVAL, "%s needs a string function_id", EVD_HX_AGENT_TRIGGER);
        } else {
            payload = json_object_get(args, "payload");
            fn = find_fn(r, function_id, true, &allowed);
        }
    } else {
        fn = find_fn(r, name, false, &allowed);
        if (fn == NULL) /* a model may also name a function by its id */
            fn = find_fn(r, name, true, &allowed);
        payload = args;
        if (fn != NULL)
            function_id = fn->id;
    }
    if (ferr.code == EVD_OK && fn == NULL && evd_hx_policy_allows(r->policy, function_id))
        evd_err_set(&ferr, EVD_ENOTFOUND, "function %s does not exist", function_id);
    else if (ferr.code == EVD_OK && !allowed)
        evd_err_set(&ferr, EVD_EINVAL, "function %s is not allowed by the function policy",
                    function_id);
    if (payload == NULL || json_is_null(payload))
        payload = NULL;
    json_t *empty = payload == NULL ? json_object() : NULL;
    if (payload == NULL)
        payload = empty;
    if (ferr.code == EVD_OK)
        evd_hx_validate_payload(fn->id, fn->request_schema, payload, &ferr);
    bool mocked = fn != NULL ? fn->mocked : name != NULL && find_mock(r, name) != NULL;
    char traceparent[56];
    struct evd_span *span = evd_hx_trace_tool_begin(r, function_id,
                                                    ferr.code == EVD_OK && fn->url != NULL,
                                                    traceparent);
    if (span != NULL && mocked)
        evd_span_set(span, "evald.tool.mocked", json_true());
    if (ferr.code == EVD_OK && fn->mocked) {
        /* answered from the case's tool_results: never the network */
        result = evd_hx_mock_answer(r, &r->fns[fn - r->fns], payload, &ferr);
    } else if (ferr.code == EVD_OK && fn->url != NULL) {
        result = evd_hx_call_http_tool(&r->http, fn, payload, r->in->session_id,
                                       traceparent[0] ? traceparent : NULL, r->deadline,
                                       r->cancel, &ferr);
    } else if (ferr.code == EVD_OK) {
        int64_t left = r->deadline - evd_mono_ms();
        int64_t to = fn->timeout_ms < left ? fn->timeout_ms : left;
        result = r->in->dispatch->call(r->in->dispatch->ctx, fn->id, payload, to, &ferr);
        if (result == NULL && ferr.code == EVD_OK)
            evd_err_set(&ferr, EVD_EUPSTREAM, "function %s returned nothing", fn->id);
    }
    bool is_error = result == NULL;
    int64_t dur = evd_mono_ms() - t0;
    evd_hx_trace_tool_end(span, function_id, name, call_id, payload, result,
                          is_error ? ferr.msg : NULL);
    r->function_calls++;
    if (is_error)
        r->function_call_errors++;

    char *content = NULL;
    if (is_error) {
        json_t *e = json_pack("{s:s}", "error", ferr.msg);
        content = e ? json_dumps(e, JSON_COMPACT) : NULL;
        json_decref(e);
    } else if (json_is_string(result)) {
        content = strdup(json_string_value(result));
    } else {
        content = json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY);
    }
    if (content != NULL && strlen(content) > MAX_TOOL_RESULT) {
        size_t cut = MAX_TOOL_RESULT - 16;
        while (cut > 0 && ((unsigned char)content[cut] & 0xC0) == 0x80)
            cut--; /* never split a UTF-8 sequence */
        strcpy(content + cut, "…[truncated]");
    }
    json_t *msg =
        json_pack("{s:s,s:s,s:s,s:s,s:b}", "role", "tool", "tool_call_id", call_id, "name", name,
                  "content", content ? content : "{}", "is_error", is_error);
    free(content);
    json_array_append_new(r->messages, msg);

    json_t *entry = json_pack(
        "{s:s,s:s,s:s,s:I,s:O,s:I,s:I,s:s}", "call_id", call_id, "function_id", function_id,
        "tool_name", name, "turn", (json_int_t)turn, "arguments", payload, "started_at_ms",
        (json_int_t)w0, "duration_ms", (json_int_t)dur, "status", is_error ? "error" : "ok");
    if (entry != NULL) {
        if (mocked)
            json_object_set_new(entry, "mocked", json_true());
        if (is_error)
            json_object_set_new(entry, "error", json_string(ferr.msg));
        else
            json_object_set(entry, "result", result);
        json_array_append_new(r->fcalls, entry);
    }
    char span_name[160];
    snprintf(span_name, sizeof(span_name), "function %s", function_id);
    json_t *attrs = json_pack("{s:s,s:s,s:I}", "function_id", function_id, "call_id", call_id,
                              "turn", (json_int_t)turn);
    if (attrs != NULL && mocked)
        json_object_set_new(attrs, "mocked", json_true());
    json_array_append_new(r->spans, evd_hx_span_new(span_name, "function", w0, w0 + dur,
                                                    is_error ? ferr.msg : NULL, attrs));
    json_decref(result);
    json_decref(empty);
    return ferr.code == EVD_ECANCELLED ? EVD_ECANCELLED : EVD_OK;
}
