/*
 * The output contract hook: how a run's final text becomes its output. The structured
 * output layer (provider formats, parse and one repair) plugs in here; until it does, json
 * output is the final text decoded as one JSON value. Pure; thread-safe.
 */
#include "harness/internal.h"

#include <string.h>

static bool wants_json(json_t *output)
{
    const char *type = json_string_value(json_object_get(output, "type"));
    return type != NULL && strcmp(type, "json") == 0;
}

json_t *evd_hx_output_format(enum evd_provider_kind kind, json_t *output)
{
    (void)kind;
    (void)output;
    return NULL;
}

json_t *evd_hx_output_decode(json_t *output, const char *text, struct evd_err *err)
{
    if (!wants_json(output)) {
        json_t *s = json_string(text);
        if (s == NULL)
            evd_err_set(err, EVD_EINVAL, "final answer is not valid UTF-8");
        return s;
    }
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
    if (v == NULL)
        evd_err_set(err, EVD_EINVAL, "final answer is not valid JSON: %s", je.text);
    return v;
}
