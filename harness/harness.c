/*
 * The agent loop (DESIGN): validate the run description, resolve the provider, build the
 * system prompt and the tool list from the function policy, then alternate generations and
 * function calls until the model answers without calling a function, max_turns is used up,
 * a budget is exceeded, the scenario deadline passes, a provider call fails for good, or
 * the cancel token fires. Every generation and function call becomes a span and a
 * transcript entry; the metrics are summed from them at the end.
 * One run lives on one thread and owns everything in `struct run`; inputs are borrowed.
 */
#include "harness/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "harness/internal.h"

const char EVD_HARNESS_IDENTITY_PROMPT[] =
    "You are an AI agent run by evald. Follow the user's instructions exactly, use the "
    "functions offered to you when they help, and finish with your final answer.";
const char EVD_HARNESS_MODE_ASK[] =
    "Mode: ask. Answer the question directly from what you know; do not call functions or "
    "take actions.";
const char EVD_HARNESS_MODE_AGENT[] =
    "Mode: agent. Work autonomously: call the available functions as needed, then give the "
    "final answer.";

#define MAX_TOOL_RESULT (256u << 10) /* bytes of a function result sent back to the model */
#define MAX_TRIGGER_DESC 8000

struct run {
    const struct evd_providers *providers;
    const struct evd_harness_input *in;
    struct evd_cancel *cancel;
    struct evd_resolved_model rm;
    enum evd_provider_kind kind;
    struct evd_hx_client http;

    int64_t invocation_timeout_s, scenario_timeout_s, max_turns, max_out;
    bool has_max_total, has_max_cost;
    int64_t max_total_tokens;
    double max_cost_usd;
    const char *thinking;
    bool agent_trigger;
    json_t *policy;              /* borrowed; NULL = deny all */
    json_t *provider_options;    /* borrowed */
    struct evd_hx_output output; /* the final answer's contract and request format */
    char *system;

    struct evd_hx_function *fns; /* every known function; `allowed` marks the exposed ones */
    bool *allowed;
    size_t nfns;
    json_t *wire_tools;

    json_t *messages;
    json_t *spans;
    json_t *generations;
    json_t *fcalls;

    int64_t turns, function_calls, function_call_errors;
    struct evd_hx_usage tot;
    bool all_input, all_output, all_cache_read, all_cache_write, all_reasoning, all_priced;
    double cost_usd;

    int64_t start_wall, start_mono, deadline;
};

/* ---- small helpers -------------------------------------------------------------------- */

static enum evd_code read_limit(json_t *exec, const char *name, int64_t def, int64_t *out,
                                bool *present, struct evd_err *err)
{
    json_t *v = json_object_get(exec, name);
    if (present != NULL)
        *present = false;
    if (v == NULL || json_is_null(v)) {
        *out = def;
        return EVD_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return evd_err_set(err, EVD_EINVAL,
                           "limits.execution.%s must be an integer greater than zero", name);
    *out = (int64_t)json_integer_value(v);
    if (present != NULL)
        *present = true;
    return EVD_OK;
}

static const char *opt_string(json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static bool one_of(const char *s, const char *const *set)
{
    for (; *set != NULL; set++)
        if (strcmp(s, *set) == 0)
            return true;
    return false;
}

enum evd_code evd_harness_system_prompt(const char *system_prompt, const char *strategy,
                                        const char *mode, char **out, struct evd_err *err)
{
    static const char *const strategies[] = {"override", "enrich", "disabled", NULL};
    static const char *const modes[] = {"ask", "agent", NULL};
    struct evd_buf b = {0};
    *out = NULL;
    if (strategy == NULL)
        strategy = "enrich";
    if (!one_of(strategy, strategies))
        return evd_err_set(err, EVD_EINVAL,
                           "model.system_prompt_strategy must be override, enrich or disabled");
    if (mode != NULL && !one_of(mode, modes))
        return evd_err_set(err, EVD_EINVAL, "model.mode must be ask or agent");
    if (system_prompt == NULL || strcmp(strategy, "disabled") == 0)
        return EVD_OK;
    const char *para = mode == NULL               ? NULL
                       : strcmp(mode, "ask") == 0 ? EVD_HARNESS_MODE_ASK
                                                  : EVD_HARNESS_MODE_AGENT;
    int rc = 0;
    if (para != NULL)
        rc |= evd_buf_printf(&b, "%s\n\n", para);
    if (system_prompt[0] == '\0')
        rc |= evd_buf_printf(&b, "%s", EVD_HARNESS_IDENTITY_PROMPT);
    else if (strcmp(strategy, "override") == 0)
        rc |= evd_buf_printf(&b, "%s", system_prompt);
    else
        rc |= evd_buf_printf(&b, "%s\n\n%s", EVD_HARNESS_IDENTITY_PROMPT, system_prompt);
    if (rc != 0) {
        evd_buf_free(&b);
        return evd_err_set(err, EVD_ENOMEM, "out of memory building the system prompt");
    }
    *out = b.data;
    return EVD_OK;
}

/* Checks one neutral message of a prior conversation. */
static enum evd_code check_message(json_t *m, size_t i, struct evd_err *err)
{
    const char *role = opt_string(m, "role");
    if (!json_is_object(m) || role == NULL)
        return evd_err_set(err, EVD_EINVAL, "conversation[%zu].role must be a string", i);
    if (strcmp(role, "user") == 0) {
        if (!json_is_string(json_object_get(m, "content")))
            return evd_err_set(err, EVD_EINVAL, "conversation[%zu].content must be a string", i);
    } else if (strcmp(role, "tool") == 0) {
        if (!json_is_string(json_object_get(m, "tool_call_id")) ||
            !json_is_string(json_object_get(m, "content")))
            return evd_err_set(err, EVD_EINVAL,
                               "conversation[%zu] needs string tool_call_id and content", i);
    } else if (strcmp(role, "assistant") == 0) {
        json_t *c = json_object_get(m, "content");
        json_t *tc = json_object_get(m, "tool_calls");
        if (c != NULL && !json_is_null(c) && !json_is_string(c))
            return evd_err_set(err, EVD_EINVAL,
                               "conversation[%zu].content must be a string or null", i);
        if (tc != NULL && !json_is_array(tc))
            return evd_err_set(err, EVD_EINVAL, "conversation[%zu].tool_calls must be an array", i);
        size_t j;
        json_t *call;
        json_array_foreach(tc, j, call)
        {
            if (!json_is_string(json_object_get(call, "id")) ||
                !json_is_string(json_object_get(call, "name")))
                return evd_err_set(err, EVD_EINVAL,
                                   "conversation[%zu].tool_calls[%zu] needs string id and name", i,
                                   j);
        }
    } else {
        return evd_err_set(err, EVD_EINVAL,
                           "conversation[%zu].role must be user, assistant or tool", i);
    }
    return EVD_OK;
}

static enum evd_code add_function(struct run *r, const char *id, const char *description,
                                  json_t *schema, const char *url, int64_t timeout_ms)
{
    struct evd_hx_function *f = &r->fns[r->nfns];
    memset(f, 0, sizeof(*f));
    f->id = id;
    f->description = description;
    f->request_schema = schema;
    f->url = url;
    f->timeout_ms = timeout_ms;
    evd_hx_tool_name(id, f->tool_name, sizeof(f->tool_name), r->fns, r->nfns);
    r->allowed[r->nfns] = evd_hx_policy_allows(r->policy, id);
    r->nfns++;
    return EVD_OK;
}

static enum evd_code load_functions(struct run *r, struct evd_err *err)
{
    json_t *tools = r->in->tools;
    json_t *extra = r->in->dispatch != NULL ? r->in->dispatch->functions : NULL;
    if (tools != NULL && !json_is_null(tools) && !json_is_array(tools))
        return evd_err_set(err, EVD_EINVAL, "tools must be an array");
    if (extra != NULL && !json_is_array(extra))
        return evd_err_set(err, EVD_EINVAL, "dispatch.functions must be an array");
    size_t n = json_array_size(tools) + json_array_size(extra);
    r->fns = calloc(n + 1, sizeof(*r->fns));
    r->allowed = calloc(n + 1, sizeof(*r->allowed));
    if (r->fns == NULL || r->allowed == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory loading functions");
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        const char *id = opt_string(t, "id");
        const char *url = opt_string(t, "url");
        json_t *to = json_object_get(t, "timeout_ms");
        json_t *schema = json_object_get(t, "request_schema");
        if (id == NULL || id[0] == '\0')
            return evd_err_set(err, EVD_EINVAL, "tools[%zu].id must be a non-empty string", i);
        if (url == NULL || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0))
            return evd_err_set(err, EVD_EINVAL, "tools[%zu].url must be an http(s) URL", i);
        if (to != NULL && !json_is_null(to) &&
            (!json_is_integer(to) || json_integer_value(to) <= 0))
            return evd_err_set(err, EVD_EINVAL, "tools[%zu].timeout_ms must be a positive integer",
                               i);
        if (schema != NULL && !json_is_object(schema) && !json_is_boolean(schema) &&
            !json_is_null(schema))
            return evd_err_set(err, EVD_EINVAL, "tools[%zu].request_schema must be an object", i);
        add_function(r, id, opt_string(t, "description"), json_is_object(schema) ? schema : NULL,
                     url, to ? (int64_t)json_integer_value(to) : 30000);
    }
    json_array_foreach(extra, i, t)
    {
        const char *id = opt_string(t, "id");
        if (id == NULL || id[0] == '\0')
            return evd_err_set(err, EVD_EINVAL,
                               "dispatch.functions[%zu].id must be a non-empty string", i);
        json_t *schema = json_object_get(t, "request_schema");
        add_function(r, id, opt_string(t, "description"), json_is_object(schema) ? schema : NULL,
                     NULL, r->invocation_timeout_s * 1000);
    }
    return EVD_OK;
}

/* The tools offered to the model: one per allowed function, or the agent_trigger tool. */
static enum evd_code build_wire_tools(struct run *r, struct evd_err *err)
{
    r->wire_tools = json_array();
    if (r->wire_tools == NULL)
        goto nomem;
    size_t nallowed = 0;
    for (size_t i = 0; i < r->nfns; i++)
        nallowed += r->allowed[i];
    if (nallowed == 0)
        return EVD_OK;
    if (!r->agent_trigger) {
        for (size_t i = 0; i < r->nfns; i++) {
            const struct evd_hx_function *f = &r->fns[i];
            if (!r->allowed[i])
                continue;
            json_t *params = f->request_schema ? json_incref(f->request_schema)
                                               : json_pack("{s:s}", "type", "object");
            json_t *w = json_pack("{s:s,s:s,s:o}", "name", f->tool_name, "description",
                                  f->description && f->description[0] ? f->description : f->id,
                                  "parameters", params);
            if (w == NULL || json_array_append_new(r->wire_tools, w) != 0)
                goto nomem;
        }
        return EVD_OK;
    }
    struct evd_buf d = {0};
    d.limit = MAX_TRIGGER_DESC;
    evd_buf_printf(&d, "Calls one of the available functions by id with a JSON payload and "
                       "returns its result. Available functions:");
    for (size_t i = 0; i < r->nfns; i++) {
        const struct evd_hx_function *f = &r->fns[i];
        if (!r->allowed[i])
            continue;
        char *schema = f->request_schema ? json_dumps(f->request_schema, JSON_COMPACT) : NULL;
        if (evd_buf_printf(&d, "\n- %s: %s%s%.1500s", f->id, f->description ? f->description : "",
                           schema ? " Payload schema: " : "", schema ? schema : "") != 0) {
            free(schema);
            break; /* description full: the remaining functions stay callable by id */
        }
        free(schema);
    }
    json_t *w = json_pack("{s:s,s:s,s:{s:s,s:{s:{s:s,s:s},s:{s:s,s:s}},s:[s,s],s:b}}", "name",
                          EVD_HX_AGENT_TRIGGER, "description", d.data ? d.data : "", "parameters",
                          "type", "object", "properties", "function_id", "type", "string",
                          "description", "Id of the function to call", "payload", "type", "object",
                          "description", "The function's payload", "required", "function_id",
                          "payload", "additionalProperties", 0);
    evd_buf_free(&d);
    if (w == NULL || json_array_append_new(r->wire_tools, w) != 0)
        goto nomem;
    return EVD_OK;
nomem:
    return evd_err_set(err, EVD_ENOMEM, "out of memory building tools");
}

static enum evd_code setup(struct run *r, struct evd_err *err)
{
    const struct evd_harness_input *in = r->in;
    enum evd_code rc;
    static const char *const levels[] = {"minimal", "low", "medium", "high", "xhigh", NULL};

    if (in->session_id == NULL || in->session_id[0] == '\0')
        return evd_err_set(err, EVD_EINVAL, "session_id cannot be empty");
    if (in->prompt == NULL || in->prompt[0] == '\0')
        return evd_err_set(err, EVD_EINVAL, "prompt cannot be empty");
    if (!json_is_object(in->model))
        return evd_err_set(err, EVD_EINVAL, "model must be an object");
    if ((rc = evd_providers_resolve(r->providers, in->model, &r->rm, err)) != EVD_OK)
        return rc;
    r->kind = evd_provider_kind(r->rm.provider);

    json_t *exec = json_object_get(in->limits, "execution");
    if (in->limits != NULL && !json_is_null(in->limits) && !json_is_object(in->limits))
        return evd_err_set(err, EVD_EINVAL, "limits must be an object");
    if ((rc = read_limit(exec, "invocation_timeout_seconds", 120, &r->invocation_timeout_s, NULL,
                         err)) != EVD_OK ||
        (rc = read_limit(exec, "scenario_timeout_seconds", 600, &r->scenario_timeout_s, NULL,
                         err)) != EVD_OK ||
        (rc = read_limit(exec, "max_turns", 1000, &r->max_turns, NULL, err)) != EVD_OK ||
        (rc = read_limit(exec, "max_output_tokens_per_call", 8192, &r->max_out, NULL, err)) !=
            EVD_OK ||
        (rc = read_limit(exec, "max_total_tokens", 0, &r->max_total_tokens, &r->has_max_total,
                         err)) != EVD_OK)
        return rc;
    json_t *mc = json_object_get(exec, "max_cost_usd");
    if (mc != NULL && !json_is_null(mc)) {
        if (!json_is_number(mc) || !isfinite(json_number_value(mc)) || json_number_value(mc) < 0)
            return evd_err_set(err, EVD_EINVAL,
                               "limits.execution.max_cost_usd must be a finite non-negative "
                               "number");
        r->has_max_cost = true;
        r->max_cost_usd = json_number_value(mc);
    }

    const char *mode = opt_string(in->model, "mode");
    r->thinking = opt_string(in->model, "thinking_level");
    if (r->thinking != NULL && !one_of(r->thinking, levels))
        return evd_err_set(err, EVD_EINVAL,
                           "model.thinking_level must be minimal, low, medium, high or xhigh");
    if ((rc = evd_harness_system_prompt(in->system_prompt,
                                        opt_string(in->model, "system_prompt_strategy"), mode,
                                        &r->system, err)) != EVD_OK)
        return rc;
    json_t *po = json_object_get(in->model, "provider_options");
    if (po != NULL && !json_is_null(po) && !json_is_object(po))
        return evd_err_set(err, EVD_EINVAL, "model.provider_options must be an object");
    r->provider_options = json_object_get(po, evd_provider_name(r->rm.provider));
    if (r->provider_options != NULL && !json_is_object(r->provider_options))
        return evd_err_set(err, EVD_EINVAL, "model.provider_options.%s must be an object",
                           evd_provider_name(r->rm.provider));

    if ((rc = evd_hx_policy_check(in->functions, err)) != EVD_OK)
        return rc;
    /* ask mode caps the policy at deny-all; an absent policy denies everything. */
    r->policy = (mode != NULL && strcmp(mode, "ask") == 0) ? NULL : in->functions;
    if (json_is_null(r->policy))
        r->policy = NULL;
    const char *expose = opt_string(in->functions, "expose");
    r->agent_trigger = expose == NULL || strcmp(expose, "agent_trigger") == 0;

    json_t *out = in->output;
    if (out != NULL && !json_is_null(out)) {
        const char *type = opt_string(out, "type");
        if (!json_is_object(out) || type == NULL ||
            (strcmp(type, "text") != 0 && strcmp(type, "json") != 0))
            return evd_err_set(err, EVD_EINVAL, "output.type must be text or json");
    }
    if (in->has_max_tool_calls && in->max_tool_calls < 0)
        return evd_err_set(err, EVD_EINVAL, "max_tool_calls must be a non-negative integer");
    if ((rc = evd_hx_output_open(&r->output, r->rm.provider, in->contract ? NULL : out,
                                 in->contract, err)) != EVD_OK)
        return rc;
    if ((rc = load_functions(r, err)) != EVD_OK || (rc = build_wire_tools(r, err)) != EVD_OK)
        return rc;

    json_t *conv = in->conversation;
    if (conv != NULL && !json_is_null(conv)) {
        if (!json_is_array(conv))
            return evd_err_set(err, EVD_EINVAL, "conversation must be an array");
        size_t i;
        json_t *m;
        json_array_foreach(conv, i, m)
        {
            if ((rc = check_message(m, i, err)) != EVD_OK)
                return rc;
        }
        r->messages = json_deep_copy(conv);
    } else {
        r->messages = json_array();
    }
    if (r->messages == NULL ||
        json_array_append_new(r->messages,
                              json_pack("{s:s,s:s}", "role", "user", "content", in->prompt)) != 0)
        return evd_err_set(err, EVD_ENOMEM, "out of memory building the conversation");
    if (!evd_hx_client_open(&r->http))
        return evd_err_set(err, EVD_ENOMEM, "could not create a curl handle");
    return EVD_OK;
}

/* ---- spans, transcript, metrics ------------------------------------------------------- */

static json_t *new_span(const char *name, const char *kind, int64_t start, int64_t end,
                        const char *error, json_t *attrs /* steals */)
{
    json_t *s = json_pack("{s:s,s:s,s:I,s:I,s:s,s:o}", "name", name, "kind", kind, "start_ms",
                          (json_int_t)start, "end_ms", (json_int_t)end, "status",
                          error ? "error" : "ok", "attributes", attrs ? attrs : json_object());
    if (s != NULL && error != NULL)
        json_object_set_new(s, "error", json_string(error));
    return s;
}

static void add_usage(struct run *r, const struct evd_hx_usage *u)
{
    r->all_input &= u->has_input;
    r->all_output &= u->has_output;
    r->all_cache_read &= u->has_cache_read;
    r->all_cache_write &= u->has_cache_write;
    r->all_reasoning &= u->has_reasoning;
    r->tot.input += u->has_input ? u->input : 0;
    r->tot.output += u->has_output ? u->output : 0;
    r->tot.cache_read += u->has_cache_read ? u->cache_read : 0;
    r->tot.cache_write += u->has_cache_write ? u->cache_write : 0;
    r->tot.reasoning += u->has_reasoning ? u->reasoning : 0;
}

/* Cost of one generation, or a negative number when it cannot be priced. */
static double generation_cost(const struct run *r, const char *model, const struct evd_hx_usage *u)
{
    struct evd_price p;
    if (!u->has_input || !u->has_output ||
        !evd_providers_price(r->providers, r->rm.provider, model, &p))
        return -1;
    int64_t cr = u->has_cache_read ? u->cache_read : 0;
    int64_t cw = u->has_cache_write ? u->cache_write : 0;
    int64_t uncached = u->input - cr - cw;
    if (uncached < 0)
        uncached = 0;
    return ((double)uncached * p.input_usd_per_mtok + (double)cr * p.cached_input_usd_per_mtok +
            (double)cw * p.cache_write_usd_per_mtok + (double)u->output * p.output_usd_per_mtok) /
           1e6;
}

static json_t *usage_json(const struct evd_hx_usage *u)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    if (u->has_input)
        json_object_set_new(o, "input_tokens", json_integer(u->input));
    if (u->has_output)
        json_object_set_new(o, "output_tokens", json_integer(u->output));
    if (u->has_cache_read)
        json_object_set_new(o, "cache_read_tokens", json_integer(u->cache_read));
    if (u->has_cache_write)
        json_object_set_new(o, "cache_write_tokens", json_integer(u->cache_write));
    if (u->has_reasoning)
        json_object_set_new(o, "reasoning_tokens", json_integer(u->reasoning));
    return o;
}

/* Usage fields shared by totals and by_session entries. */
static void put_totals(const struct run *r, json_t *o)
{
    bool any = r->turns > 0;
    json_object_set_new(o, "turns", json_integer(r->turns));
    json_object_set_new(o, "function_calls", json_integer(r->function_calls));
    json_object_set_new(o, "function_call_errors", json_integer(r->function_call_errors));
    if (any && r->all_input)
        json_object_set_new(o, "input_tokens", json_integer(r->tot.input));
    if (any && r->all_output)
        json_object_set_new(o, "output_tokens", json_integer(r->tot.output));
    if (any && r->all_cache_read)
        json_object_set_new(o, "cache_read_tokens", json_integer(r->tot.cache_read));
    if (any && r->all_cache_write)
        json_object_set_new(o, "cache_write_tokens", json_integer(r->tot.cache_write));
    if (any && r->all_reasoning)
        json_object_set_new(o, "reasoning_tokens", json_integer(r->tot.reasoning));
    if (any && r->all_priced)
        json_object_set_new(o, "cost_usd", json_real(r->cost_usd));
}

json_t *evd_harness_traces_from_spans(const char *session_id, json_t *spans)
{
    int64_t first = INT64_MAX, last = INT64_MIN, errors = 0;
    size_t i;
    json_t *s;
    json_array_foreach(spans, i, s)
    {
        int64_t a = (int64_t)json_integer_value(json_object_get(s, "start_ms"));
        int64_t b = (int64_t)json_integer_value(json_object_get(s, "end_ms"));
        const char *st = json_string_value(json_object_get(s, "status"));
        first = a < first ? a : first;
        last = b > last ? b : last;
        errors += st != NULL && strcmp(st, "error") == 0;
    }
    size_t n = json_array_size(spans);
    json_int_t dur = n > 0 && last > first ? (json_int_t)(last - first) : 0;
    return json_pack("{s:I,s:I,s:I,s:I,s:[{s:s,s:n,s:i,s:I,s:I,s:I,s:I}]}", "trace_count",
                     (json_int_t)(n > 0), "span_count", (json_int_t)n, "error_span_count",
                     (json_int_t)errors, "duration_ms", dur, "by_session", "session_id", session_id,
                     "parent_session_id", "depth", 0, "trace_count", (json_int_t)(n > 0),
                     "span_count", (json_int_t)n, "error_span_count", (json_int_t)errors,
                     "duration_ms", dur);
}

static json_t *build_metrics(const struct run *r)
{
    json_t *totals = json_pack("{s:i}", "sessions", 1);
    json_t *entry = json_pack("{s:s,s:n,s:i}", "session_id", r->in->session_id, "parent_session_id",
                              "depth", 0);
    json_t *traces = evd_harness_traces_from_spans(r->in->session_id, r->spans);
    if (totals == NULL || entry == NULL || traces == NULL) {
        json_decref(totals);
        json_decref(entry);
        json_decref(traces);
        return NULL;
    }
    put_totals(r, totals);
    put_totals(r, entry);
    return json_pack("{s:s,s:b,s:o,s:[o],s:o}", "root_session_id", r->in->session_id, "complete", 1,
                     "totals", totals, "by_session", entry, "traces", traces);
}

/* Hands a snapshot of the metrics so far to the input's progress callback, if any. */
static void report_progress(const struct run *r)
{
    if (r->in->progress == NULL || r->in->session_id == NULL)
        return;
    json_t *m = build_metrics(r);
    if (m == NULL)
        return; /* out of memory: skip this report, the final metrics still come */
    json_object_set_new(m, "complete", json_false());
    r->in->progress(r->in->progress_ctx, m);
    json_decref(m);
}

/* ---- function calls ------------------------------------------------------------------- */

static const struct evd_hx_function *find_fn(const struct run *r, const char *key, bool by_id,
                                             bool *allowed)
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

/*
 * Runs one function call the model asked for and appends the tool message, the span and the
 * transcript entry. Returns EVD_ECANCELLED when the run was cancelled during the call.
 */
static enum evd_code run_call(struct run *r, json_t *call, int64_t turn)
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
    if (ferr.code == EVD_OK && fn->url != NULL) {
        result = evd_hx_call_http_tool(&r->http, fn, payload, r->in->session_id, r->deadline,
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
        if (is_error)
            json_object_set_new(entry, "error", json_string(ferr.msg));
        else
            json_object_set(entry, "result", result);
        json_array_append_new(r->fcalls, entry);
    }
    char span_name[160];
    snprintf(span_name, sizeof(span_name), "function %s", function_id);
    json_array_append_new(r->spans,
                          new_span(span_name, "function", w0, w0 + dur, is_error ? ferr.msg : NULL,
                                   json_pack("{s:s,s:s,s:I}", "function_id", function_id, "call_id",
                                             call_id, "turn", (json_int_t)turn)));
    json_decref(result);
    json_decref(empty);
    return ferr.code == EVD_ECANCELLED ? EVD_ECANCELLED : EVD_OK;
}

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

static json_t *request_summary(const struct run *r, const struct evd_hx_request *q)
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
static void withhold_answer(struct run *r, const char *code)
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
static enum answer final_answer(struct run *r, struct verdict *v, const struct evd_hx_reply *reply,
                                int64_t turn, bool repairing)
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
static void loop(struct run *r, struct verdict *v)
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
        json_t *attrs = json_pack("{s:I,s:s,s:s,s:i,s:I}", "turn", (json_int_t)turn, "provider",
                                  pname, "model", r->rm.model, "attempts", call.attempts,
                                  "http_status", (json_int_t)call.status);
        if (attrs != NULL && repairing)
            json_object_set_new(attrs, "repair", json_true());
        if (call.code != EVD_OK) {
            if (gen != NULL) {
                json_object_set_new(gen, "error", json_string(call.error));
                if (repairing)
                    json_object_set_new(gen, "repair", json_true());
                json_array_append_new(r->generations, gen);
            }
            json_array_append_new(r->spans,
                                  new_span("generation", "generation", w0, w1, call.error, attrs));
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
        add_usage(r, &reply.usage);
        double cost = generation_cost(r, r->rm.model, &reply.usage);
        if (cost < 0)
            r->all_priced = false;
        else
            r->cost_usd += cost;
        if (gen != NULL) {
            json_object_set_new(gen, "stop_reason", json_string(reply.stop_reason));
            json_object_set_new(gen, "response_model", json_string(reply.model));
            json_object_set_new(gen, "text", json_string(reply.text));
            json_object_set(gen, "tool_calls", reply.tool_calls);
            json_object_set_new(gen, "usage", usage_json(&reply.usage));
            if (cost >= 0)
                json_object_set_new(gen, "cost_usd", json_real(cost));
            json_array_append_new(r->generations, gen);
        }
        json_array_append_new(r->spans, new_span("generation", "generation", w0, w1, NULL, attrs));
        json_array_append(r->messages, reply.message);

        /* A snapshot of the figures so far goes out before anything that takes time (the
         * repair's generation, function calls); the final answer's figures arrive with the
         * outcome, one write later, so they are not snapshotted. */
        size_t ncalls = json_array_size(reply.tool_calls);
        if (ncalls == 0 || repairing) {
            enum answer a = final_answer(r, v, &reply, turn, repairing);
            evd_hx_reply_clear(&reply);
            if (a == ANSWER_REPAIR) {
                report_progress(r);
                repairing = true;
                continue;
            }
            break;
        }
        report_progress(r);
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
            crc = run_call(r, json_array_get(reply.tool_calls, i), turn);
            report_progress(r);
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

static void run_free(struct run *r)
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
    struct run r;
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
    if (setup(&r, &serr) != EVD_OK) {
        fail(&v, EVD_HARNESS_FAILED, "setup", serr.code, serr.msg);
    } else {
        r.deadline = r.start_mono + r.scenario_timeout_s * 1000;
        loop(&r, &v);
    }
    int64_t end_wall = r.start_wall + (evd_mono_ms() - r.start_mono);
    json_t *run_span = new_span(
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
    out->metrics = in->session_id != NULL ? build_metrics(&r) : NULL;
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
