/*
 * The setup of an agent-loop run: the checks of the run description (limits, model
 * options, function policy, output contract, prior conversation), the system prompt, and
 * the functions and tools offered to the model. Runs on the run's thread; the input is
 * borrowed, what it builds belongs to the run (harness/run.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/run.h"

const char EVD_HARNESS_IDENTITY_PROMPT[] =
    "You are an AI agent run by evald. Follow the user's instructions exactly, use the "
    "functions offered to you when they help, and finish with your final answer.";
const char EVD_HARNESS_MODE_ASK[] =
    "Mode: ask. Answer the question directly from what you know; do not call functions or "
    "take actions.";
const char EVD_HARNESS_MODE_AGENT[] =
    "Mode: agent. Work autonomously: call the available functions as needed, then give the "
    "final answer.";

#define MAX_TRIGGER_DESC 8000

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

static enum evd_code add_function(struct evd_hx_run *r, const char *id, const char *description,
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

static enum evd_code load_functions(struct evd_hx_run *r, struct evd_err *err)
{
    json_t *tools = r->in->tools;
    json_t *extra = r->in->dispatch != NULL ? r->in->dispatch->functions : NULL;
    if (tools != NULL && !json_is_null(tools) && !json_is_array(tools))
        return evd_err_set(err, EVD_EINVAL, "tools must be an array");
    if (extra != NULL && !json_is_array(extra))
        return evd_err_set(err, EVD_EINVAL, "dispatch.functions must be an array");
    size_t nmock = 0;
    enum evd_code rc = evd_hx_mock_count(r, &nmock, err);
    if (rc != EVD_OK)
        return rc;
    size_t n = json_array_size(tools) + json_array_size(extra) + nmock;
    r->fns = calloc(n + 1, sizeof(*r->fns));
    r->allowed = calloc(n + 1, sizeof(*r->allowed));
    if (r->fns == NULL || r->allowed == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory loading functions");
    /* Mocked tools first: they keep their own names on the wire (harness/mock.c). */
    evd_hx_mock_load(r);
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

/* The tools offered to the model: one per allowed function, or the agent_trigger tool;
 * mocked tools are always offered natively (harness/mock.c). */
static enum evd_code build_wire_tools(struct evd_hx_run *r, struct evd_err *err)
{
    r->wire_tools = json_array();
    if (r->wire_tools == NULL)
        goto nomem;
    size_t nallowed = 0; /* allowed functions the agent_trigger tool would reach */
    for (size_t i = 0; i < r->nfns; i++)
        nallowed += r->allowed[i] && !r->fns[i].mocked;
    /* Native tools: every allowed function, or with agent_trigger the mocked tools only. */
    for (size_t i = 0; i < r->nfns; i++) {
        const struct evd_hx_function *f = &r->fns[i];
        if (!r->allowed[i] || (r->agent_trigger && !f->mocked))
            continue;
        json_t *params = f->request_schema ? json_incref(f->request_schema)
                                           : json_pack("{s:s}", "type", "object");
        json_t *w = json_pack("{s:s,s:s,s:o}", "name", f->tool_name, "description",
                              f->description && f->description[0] ? f->description : f->id,
                              "parameters", params);
        if (w == NULL || json_array_append_new(r->wire_tools, w) != 0)
            goto nomem;
    }
    if (!r->agent_trigger || nallowed == 0)
        return EVD_OK;
    struct evd_buf d = {0};
    d.limit = MAX_TRIGGER_DESC;
    evd_buf_printf(&d, "Calls one of the available functions by id with a JSON payload and "
                       "returns its result. Available functions:");
    for (size_t i = 0; i < r->nfns; i++) {
        const struct evd_hx_function *f = &r->fns[i];
        if (!r->allowed[i] || f->mocked)
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

enum evd_code evd_hx_run_setup(struct evd_hx_run *r, struct evd_err *err)
{
    const struct evd_harness_input *in = r->in;
    enum evd_code rc;
    static const char *const levels[] = {"minimal", "low", "medium", "high", "xhigh", NULL};

    if (in->session_id == NULL || in->session_id[0] == '\0')
        return evd_err_set(err, EVD_EINVAL, "session_id cannot be empty");
    /* An empty prompt sends the prior conversation as it is: it must end with the user. */
    json_t *last = json_array_get(in->conversation, json_array_size(in->conversation) - 1);
    const char *last_role = json_string_value(json_object_get(last, "role"));
    bool bare = in->prompt != NULL && in->prompt[0] == '\0' && last_role != NULL &&
                strcmp(last_role, "user") == 0;
    if (in->prompt == NULL || (in->prompt[0] == '\0' && !bare))
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
        (!bare && json_array_append_new(r->messages, json_pack("{s:s,s:s}", "role", "user",
                                                               "content", in->prompt)) != 0))
        return evd_err_set(err, EVD_ENOMEM, "out of memory building the conversation");
    if (!evd_hx_client_open(&r->http))
        return evd_err_set(err, EVD_ENOMEM, "could not create a curl handle");
    return EVD_OK;
}
