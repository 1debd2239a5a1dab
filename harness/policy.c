/*
 * Function policy: allow/deny glob patterns over function ids (fnmatch(3); deny wins; an
 * absent policy denies everything) and provider-safe tool names for native exposure.
 * Pure; thread-safe.
 */
#include "harness/internal.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

static bool any_match(json_t *patterns, const char *id)
{
    size_t i;
    json_t *p;
    json_array_foreach(patterns, i, p)
    {
        const char *s = json_string_value(p);
        if (s != NULL && fnmatch(s, id, 0) == 0)
            return true;
    }
    return false;
}

bool evd_hx_policy_allows(json_t *policy, const char *function_id)
{
    if (!json_is_object(policy) || function_id == NULL)
        return false;
    if (any_match(json_object_get(policy, "deny"), function_id))
        return false;
    return any_match(json_object_get(policy, "allow"), function_id);
}

enum evd_code evd_hx_policy_check(json_t *policy, struct evd_err *err)
{
    if (policy == NULL || json_is_null(policy))
        return EVD_OK;
    if (!json_is_object(policy))
        return evd_err_set(err, EVD_EINVAL, "functions must be an object");
    static const char *lists[] = {"allow", "deny"};
    for (int k = 0; k < 2; k++) {
        json_t *a = json_object_get(policy, lists[k]);
        if (a == NULL || json_is_null(a))
            continue;
        if (!json_is_array(a))
            return evd_err_set(err, EVD_EINVAL, "functions.%s must be an array of strings",
                               lists[k]);
        size_t i;
        json_t *p;
        json_array_foreach(a, i, p)
        {
            if (!json_is_string(p) || json_string_length(p) == 0)
                return evd_err_set(err, EVD_EINVAL, "functions.%s[%zu] must be a non-empty string",
                                   lists[k], i);
        }
    }
    json_t *ex = json_object_get(policy, "expose");
    const char *e = json_string_value(ex);
    if (ex != NULL && !json_is_null(ex) &&
        (e == NULL || (strcmp(e, "native") != 0 && strcmp(e, "agent_trigger") != 0)))
        return evd_err_set(err, EVD_EINVAL,
                           "functions.expose must be \"native\" or \"agent_trigger\"");
    return EVD_OK;
}

void evd_hx_tool_name(const char *function_id, char *out, size_t outsz,
                      const struct evd_hx_function *taken, size_t ntaken)
{
    char base[65];
    size_t n = 0;
    for (const char *p = function_id; *p != '\0' && n < 56; p++) {
        unsigned char c = (unsigned char)*p;
        char w = (isalnum(c) || c == '_' || c == '-') ? (char)c : '_';
        if (w == '_' && n > 0 && base[n - 1] == '_')
            continue; /* "a::b" → "a_b" */
        base[n++] = w;
    }
    while (n > 0 && base[n - 1] == '_')
        n--;
    base[n] = '\0';
    if (n == 0)
        snprintf(base, sizeof(base), "fn");
    if (strcmp(base, EVD_HX_AGENT_TRIGGER) == 0)
        snprintf(base, sizeof(base), "fn_%s", EVD_HX_AGENT_TRIGGER);
    for (int suffix = 1;; suffix++) {
        if (suffix == 1)
            snprintf(out, outsz, "%s", base);
        else
            snprintf(out, outsz, "%s_%d", base, suffix);
        bool clash = false;
        for (size_t i = 0; i < ntaken && !clash; i++)
            clash = strcmp(taken[i].tool_name, out) == 0;
        if (!clash)
            return;
    }
}
