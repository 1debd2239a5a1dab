/*
 * Mocked tools (../shared/spec/agent-cases.md, "Mocked tools"; docs/harness.md): tools an
 * experiment declares with a name, a description and a parameters schema, offered to the
 * model natively whatever the function policy says, and answered from the case's
 * tool_results without any network. The run's function list holds them (mocked set);
 * calls.c validates the payload and then asks evd_hx_mock_answer. Runs on the run's
 * thread; the input is borrowed, the counters belong to the run (harness/run.h).
 */
#include <stdio.h>
#include <string.h>

#include "harness/run.h"

/* A tool name every provider takes as is: 1-64 of [A-Za-z0-9_-]. */
static bool provider_safe(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* True when `id` is the id of an item of `arr` (HTTP tools or dispatch functions). */
static bool has_id(json_t *arr, const char *id)
{
    size_t i;
    json_t *t;
    json_array_foreach(arr, i, t)
    {
        const char *v = json_string_value(json_object_get(t, "id"));
        if (v != NULL && strcmp(v, id) == 0)
            return true;
    }
    return false;
}

enum evd_code evd_hx_mock_count(const struct evd_hx_run *r, size_t *n, struct evd_err *err)
{
    json_t *mocks = r->in->mock_tools;
    json_t *results = r->in->tool_results;
    json_t *extra = r->in->dispatch != NULL ? r->in->dispatch->functions : NULL;
    *n = 0;
    if (results != NULL && !json_is_null(results) && !json_is_object(results))
        return evd_err_set(err, EVD_EINVAL, "tool_results must be an object");
    if (mocks == NULL || json_is_null(mocks))
        return EVD_OK;
    if (!json_is_array(mocks))
        return evd_err_set(err, EVD_EINVAL, "mock_tools must be an array");
    size_t i;
    json_t *t;
    json_array_foreach(mocks, i, t)
    {
        const char *name = json_string_value(json_object_get(t, "name"));
        json_t *params = json_object_get(t, "parameters");
        json_t *desc = json_object_get(t, "description");
        if (name == NULL || name[0] == '\0')
            return evd_err_set(err, EVD_EINVAL, "mock_tools[%zu].name must be a non-empty string",
                               i);
        if (params != NULL && !json_is_null(params) && !json_is_object(params))
            return evd_err_set(err, EVD_EINVAL, "mock_tools[%zu].parameters must be an object", i);
        if (desc != NULL && !json_is_null(desc) && !json_is_string(desc))
            return evd_err_set(err, EVD_EINVAL, "mock_tools[%zu].description must be a string", i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(json_string_value(json_object_get(json_array_get(mocks, j), "name")),
                       name) == 0)
                return evd_err_set(err, EVD_EINVAL, "mock_tools[%zu].name \"%s\" is declared twice",
                                   i, name);
        if (has_id(r->in->tools, name) || has_id(extra, name))
            return evd_err_set(err, EVD_EINVAL, "tools[%zu]: %s is also a registered tool", i,
                               name);
    }
    *n = json_array_size(mocks);
    return EVD_OK;
}

void evd_hx_mock_load(struct evd_hx_run *r)
{
    size_t i;
    json_t *t;
    json_array_foreach(r->in->mock_tools, i, t)
    {
        struct evd_hx_function *f = &r->fns[r->nfns];
        json_t *params = json_object_get(t, "parameters");
        memset(f, 0, sizeof(*f));
        f->id = json_string_value(json_object_get(t, "name"));
        f->description = json_string_value(json_object_get(t, "description"));
        f->request_schema = json_is_object(params) ? params : NULL;
        f->mocked = true;
        f->mock_calls = json_integer_value(json_object_get(r->in->mock_counts, f->id));
        bool taken = strcmp(f->id, EVD_HX_AGENT_TRIGGER) == 0;
        for (size_t j = 0; j < r->nfns && !taken; j++)
            taken = strcmp(r->fns[j].tool_name, f->id) == 0;
        if (provider_safe(f->id) && !taken)
            snprintf(f->tool_name, sizeof(f->tool_name), "%s", f->id);
        else
            evd_hx_tool_name(f->id, f->tool_name, sizeof(f->tool_name), r->fns, r->nfns);
        r->allowed[r->nfns] = true; /* whatever the policy says */
        r->nfns++;
    }
}

/* Every member of `want` is in `have` with an equal value; objects compared member-wise
 * again, anything else by equality. */
static bool subset(json_t *want, json_t *have)
{
    if (!json_is_object(want))
        return json_equal(want, have);
    if (!json_is_object(have))
        return false;
    const char *key;
    json_t *v;
    json_object_foreach(want, key, v)
    {
        json_t *h = json_object_get(have, key);
        if (h == NULL || !subset(v, h))
            return false;
    }
    return true;
}

/* A non-empty array whose items are all objects with a "when" member. */
static bool when_list(json_t *value)
{
    size_t i;
    json_t *item;
    if (!json_is_array(value) || json_array_size(value) == 0)
        return false;
    json_array_foreach(value, i, item)
    {
        if (!json_is_object(item) || json_object_get(item, "when") == NULL)
            return false;
    }
    return true;
}

json_t *evd_hx_mock_answer(const struct evd_hx_run *r, struct evd_hx_function *fn, json_t *payload,
                           struct evd_err *err)
{
    json_t *v = json_object_get(r->in->tool_results, fn->id);
    json_t *answer = NULL;
    int64_t k = fn->mock_calls++; /* 0-based: this is call k + 1 of the tool */
    if (v == NULL) {
        /* no entry: nothing to answer with */
    } else if (when_list(v)) {
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item)
        {
            if (subset(json_object_get(item, "when"), payload)) {
                answer = json_object_get(item, "result");
                if (answer == NULL)
                    answer = json_null();
                break;
            }
        }
    } else if (json_is_array(v)) {
        size_t n = json_array_size(v);
        if (n > 0)
            answer = json_array_get(v, (size_t)k < n ? (size_t)k : n - 1);
    } else {
        answer = v;
    }
    if (answer == NULL) {
        evd_err_set(err, EVD_ENOTFOUND, "no mocked result for %s", fn->id);
        return NULL;
    }
    return json_incref(answer);
}
