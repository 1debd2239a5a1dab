/*
 * SessionMetricsResponseV1 checking and the per-run benchmark (see metrics.h).
 * The check is table-driven: one row per member of each seed definition.
 * Pure; thread-safe.
 */
#include "domain/metrics.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "domain/fields.h"

enum kind { K_U64, K_U32, K_STRING, K_NUMBER, K_BOOL };

struct member_spec {
    const char *name;
    enum kind kind;
    bool required; /* required members are never null; optional ones may be */
};

static const struct member_spec TOTALS[] = {
    {"sessions", K_U64, true},
    {"turns", K_U64, true},
    {"function_calls", K_U64, true},
    {"function_call_errors", K_U64, true},
    {"input_tokens", K_U64, false},
    {"output_tokens", K_U64, false},
    {"cache_read_tokens", K_U64, false},
    {"cache_write_tokens", K_U64, false},
    {"reasoning_tokens", K_U64, false},
    {"cost_usd", K_NUMBER, false},
    {NULL, K_U64, false},
};

static const struct member_spec USAGE[] = {
    {"session_id", K_STRING, true},
    {"parent_session_id", K_STRING, false},
    {"depth", K_U32, true},
    {"turns", K_U64, true},
    {"function_calls", K_U64, true},
    {"function_call_errors", K_U64, true},
    {"input_tokens", K_U64, false},
    {"output_tokens", K_U64, false},
    {"cache_read_tokens", K_U64, false},
    {"cache_write_tokens", K_U64, false},
    {"reasoning_tokens", K_U64, false},
    {"cost_usd", K_NUMBER, false},
    {NULL, K_U64, false},
};

static const struct member_spec TRACES[] = {
    {"trace_count", K_U64, true}, {"span_count", K_U64, true}, {"error_span_count", K_U64, true},
    {"duration_ms", K_U64, true}, {NULL, K_U64, false},
};

static const struct member_spec TRACE_USAGE[] = {
    {"session_id", K_STRING, true}, {"parent_session_id", K_STRING, false},
    {"depth", K_U32, true},         {"trace_count", K_U64, true},
    {"span_count", K_U64, true},    {"error_span_count", K_U64, true},
    {"duration_ms", K_U64, true},   {NULL, K_U64, false},
};

/* Checks the members of obj against specs; extra names are allowed in `extra`. */
static enum evd_code check_members(const json_t *obj, const char *path,
                                   const struct member_spec *specs, const char *const *extra,
                                   struct evd_err *err)
{
    const char *allowed[24];
    size_t n = 0;
    if (!json_is_object(obj))
        return evd_err_set(err, EVD_EINVAL, "%s must be an object", path);
    for (const struct member_spec *s = specs; s->name != NULL; s++)
        allowed[n++] = s->name;
    for (const char *const *e = extra; e != NULL && *e != NULL; e++)
        allowed[n++] = *e;
    allowed[n] = NULL;
    enum evd_code rc = evd_fields_only(obj, path, allowed, err);
    for (const struct member_spec *s = specs; rc == EVD_OK && s->name != NULL; s++) {
        unsigned flags = s->required ? EVD_F_REQUIRED : EVD_F_NULLABLE;
        bool present;
        uint64_t u;
        json_t *v;
        switch (s->kind) {
        case K_U64:
            rc = evd_fields_uint(obj, path, s->name, flags, INT64_MAX, &present, &u, err);
            break;
        case K_U32:
            rc = evd_fields_uint(obj, path, s->name, flags, UINT32_MAX, &present, &u, err);
            break;
        case K_STRING:
            rc = evd_fields_get(obj, path, s->name, flags | EVD_F_STRING, &v, err);
            break;
        case K_NUMBER:
            rc = evd_fields_get(obj, path, s->name, flags | EVD_F_NUMBER, &v, err);
            break;
        case K_BOOL:
            rc = evd_fields_get(obj, path, s->name, flags | EVD_F_BOOL, &v, err);
            break;
        }
    }
    return rc;
}

static enum evd_code check_array(const json_t *obj, const char *path, const char *key,
                                 const struct member_spec *item_specs, struct evd_err *err)
{
    json_t *arr;
    char apath[EVD_FIELDS_PATH_MAX], ipath[EVD_FIELDS_PATH_MAX + 24];
    enum evd_code rc = evd_fields_get(obj, path, key, EVD_F_ARRAY | EVD_F_REQUIRED, &arr, err);
    if (rc != EVD_OK)
        return rc;
    evd_fields_path(apath, sizeof(apath), path, key);
    for (size_t i = 0; rc == EVD_OK && i < json_array_size(arr); i++) {
        snprintf(ipath, sizeof(ipath), "%s[%zu]", apath, i);
        rc = check_members(json_array_get(arr, i), ipath, item_specs, NULL, err);
    }
    return rc;
}

enum evd_code evd_metrics_check(const json_t *metrics, const char *path, struct evd_err *err)
{
    static const char *const TOP[] = {"root_session_id", "complete", "totals",
                                      "by_session",      "traces",   NULL};
    char sub[EVD_FIELDS_PATH_MAX];
    json_t *v;
    if (!json_is_object(metrics))
        return evd_err_set(err, EVD_EINVAL, "%s must be an object", path);
    enum evd_code rc = evd_fields_only(metrics, path, TOP, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(metrics, path, "root_session_id", EVD_F_STRING | EVD_F_REQUIRED, &v,
                            err);
    if (rc == EVD_OK)
        rc = evd_fields_get(metrics, path, "complete", EVD_F_BOOL | EVD_F_REQUIRED, &v, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(metrics, path, "totals", EVD_F_OBJECT | EVD_F_REQUIRED, &v, err);
    if (rc == EVD_OK) {
        evd_fields_path(sub, sizeof(sub), path, "totals");
        rc = check_members(v, sub, TOTALS, NULL, err);
    }
    if (rc == EVD_OK)
        rc = check_array(metrics, path, "by_session", USAGE, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(metrics, path, "traces", EVD_F_OBJECT | EVD_F_NULLABLE, &v, err);
    if (rc == EVD_OK && v != NULL) {
        static const char *const EXTRA[] = {"by_session", NULL};
        evd_fields_path(sub, sizeof(sub), path, "traces");
        rc = check_members(v, sub, TRACES, EXTRA, err);
        if (rc == EVD_OK)
            rc = check_array(v, sub, "by_session", TRACE_USAGE, err);
    }
    return rc;
}

/* Copies obj[key] into bench[as] when it is a non-negative integer; true when copied. */
static bool copy_count(json_t *bench, const char *as, const json_t *obj, const char *key, int *rc)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *rc |= json_object_set_new(bench, as, json_integer(json_integer_value(v)));
    return true;
}

enum evd_code evd_metrics_benchmark(const json_t *metrics, uint64_t wall_time_ms, json_t **out)
{
    *out = NULL;
    if (!json_is_true(json_object_get(metrics, "complete")))
        return EVD_OK;
    const json_t *totals = json_object_get(metrics, "totals");
    const json_t *traces = json_object_get(metrics, "traces");
    json_t *b = json_object();
    int rc = 0;
    json_int_t wall = wall_time_ms > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)wall_time_ms;
    rc |= json_object_set_new(b, "wall_time_ms", json_integer(wall));
    rc |= json_object_set_new(
        b, "sessions",
        json_integer((json_int_t)json_array_size(json_object_get(metrics, "by_session"))));
    if (!copy_count(b, "turns", totals, "turns", &rc))
        rc |= json_object_set_new(b, "turns", json_integer(0));
    if (!copy_count(b, "function_calls", totals, "function_calls", &rc))
        rc |= json_object_set_new(b, "function_calls", json_integer(0));
    if (!copy_count(b, "function_call_errors", totals, "function_call_errors", &rc))
        rc |= json_object_set_new(b, "function_call_errors", json_integer(0));
    bool has_in = copy_count(b, "input_tokens", totals, "input_tokens", &rc);
    bool has_out = copy_count(b, "output_tokens", totals, "output_tokens", &rc);
    if (has_in && has_out) {
        uint64_t in = (uint64_t)json_integer_value(json_object_get(totals, "input_tokens"));
        uint64_t o = (uint64_t)json_integer_value(json_object_get(totals, "output_tokens"));
        uint64_t t = in + o;
        json_int_t total = t > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)t;
        rc |= json_object_set_new(b, "total_tokens", json_integer(total));
    }
    copy_count(b, "cache_read_tokens", totals, "cache_read_tokens", &rc);
    copy_count(b, "cache_write_tokens", totals, "cache_write_tokens", &rc);
    copy_count(b, "reasoning_tokens", totals, "reasoning_tokens", &rc);
    json_t *cost = json_object_get(totals, "cost_usd");
    if (json_is_number(cost))
        rc |= json_object_set_new(b, "cost_usd", json_real(json_number_value(cost)));
    if (json_is_object(traces)) {
        copy_count(b, "trace_count", traces, "trace_count", &rc);
        copy_count(b, "span_count", traces, "span_count", &rc);
        copy_count(b, "error_span_count", traces, "error_span_count", &rc);
        copy_count(b, "trace_duration_ms", traces, "duration_ms", &rc);
    }
    if (rc != 0 || b == NULL) {
        json_decref(b);
        return EVD_ENOMEM;
    }
    *out = b;
    return EVD_OK;
}
