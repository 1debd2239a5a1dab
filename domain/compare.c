/*
 * Session comparison: request decoding, summary metrics and deltas (see compare.h).
 * Pure; thread-safe.
 */
#include "domain/compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "domain/fields.h"
#include "domain/metrics.h"
#include "domain/session.h"
#include "domain/text.h"

static const char *const REQUEST_FIELDS[] = {"session_ids", "baseline_session_id", NULL};

const char *const EVD_COMPARE_METRICS[] = {"generations",
                                           "input_tokens",
                                           "output_tokens",
                                           "total_tokens",
                                           "cache_read_tokens",
                                           "cache_write_tokens",
                                           "reasoning_tokens",
                                           "cost_usd",
                                           "tokens_per_generation",
                                           "cost_per_generation_usd",
                                           "function_calls",
                                           "function_call_errors",
                                           "function_error_rate",
                                           "trace_count",
                                           "span_count",
                                           "error_span_count",
                                           "trace_duration_ms",
                                           "wall_time_ms",
                                           "sessions",
                                           "descendants",
                                           "max_depth",
                                           NULL};

enum evd_code evd_compare_request_decode(const json_t *body, struct evd_compare_request *out,
                                         struct evd_err *err)
{
    json_t *ids, *baseline;
    memset(out, 0, sizeof(*out));
    if (!json_is_object(body))
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    enum evd_code rc = evd_fields_only(body, "", REQUEST_FIELDS, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "session_ids", EVD_F_ARRAY | EVD_F_REQUIRED, &ids, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "baseline_session_id", EVD_F_STRING | EVD_F_REQUIRED,
                            &baseline, err);
    if (rc != EVD_OK)
        return rc;
    size_t n = json_array_size(ids);
    for (size_t i = 0; i < n; i++)
        if (!json_is_string(json_array_get(ids, i)))
            return evd_err_set(err, EVD_EINVAL, "session_ids[%zu] must be a string", i);
    if (n < EVD_COMPARE_MIN || n > EVD_COMPARE_MAX)
        return evd_err_set(err, EVD_EINVAL, "session_ids must contain between %d and %d sessions",
                           EVD_COMPARE_MIN, EVD_COMPARE_MAX);
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(ids, i);
        if (evd_text_is_blank(json_string_value(s), json_string_length(s)))
            return evd_err_set(err, EVD_EINVAL, "session_ids cannot contain empty values");
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (json_equal(json_array_get(ids, i), json_array_get(ids, j)))
                return evd_err_set(err, EVD_EINVAL, "session_ids must be unique");
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        out->ids[i] = json_string_value(json_array_get(ids, i));
        if (!found && json_equal(json_array_get(ids, i), baseline)) {
            out->baseline = i;
            found = true;
        }
    }
    if (!found)
        return evd_err_set(err, EVD_EINVAL, "baseline_session_id must belong to session_ids");
    out->n = n;
    return EVD_OK;
}

/* ---- summary ---------------------------------------------------------------------------- */

/* A non-negative integer member as a new JSON integer, else JSON null. */
static json_t *count_or_null(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? json_integer(json_integer_value(v))
                                                            : json_null();
}

json_t *evd_compare_summary(const json_t *metrics, bool has_wall_time, int64_t wall_time_ms)
{
    json_t *s = json_object();
    if (s == NULL)
        return NULL;
    const json_t *totals = json_object_get(metrics, "totals");
    const json_t *traces = json_object_get(metrics, "traces");
    if (!json_is_object(traces))
        traces = NULL;
    int bad = 0;
    json_t *gen = metrics ? count_or_null(totals, "turns") : json_null();
    bad |= json_object_set_new(s, "generations", gen);
    static const char *const tokens[] = {"input_tokens", "output_tokens", NULL};
    for (const char *const *k = tokens; *k; k++)
        bad |= json_object_set_new(s, *k, count_or_null(totals, *k));
    json_t *in = json_object_get(s, "input_tokens"), *outp = json_object_get(s, "output_tokens");
    bool has_total = json_is_integer(in) && json_is_integer(outp);
    json_int_t total = has_total ? json_integer_value(in) + json_integer_value(outp) : 0;
    bad |= json_object_set_new(s, "total_tokens", has_total ? json_integer(total) : json_null());
    static const char *const more[] = {"cache_read_tokens", "cache_write_tokens",
                                       "reasoning_tokens", NULL};
    for (const char *const *k = more; *k; k++)
        bad |= json_object_set_new(s, *k, count_or_null(totals, *k));
    json_t *cost = json_object_get(totals, "cost_usd");
    bool has_cost = json_is_number(cost) && isfinite(json_number_value(cost));
    bad |= json_object_set_new(s, "cost_usd",
                               has_cost ? json_real(json_number_value(cost)) : json_null());
    json_int_t g = json_is_integer(gen) ? json_integer_value(gen) : 0;
    bad |= json_object_set_new(s, "tokens_per_generation",
                               has_total && g > 0 ? json_real((double)total / (double)g)
                                                  : json_null());
    bad |= json_object_set_new(s, "cost_per_generation_usd",
                               has_cost && g > 0 ? json_real(json_number_value(cost) / (double)g)
                                                 : json_null());
    json_t *calls = metrics ? count_or_null(totals, "function_calls") : json_null();
    json_t *errors = metrics ? count_or_null(totals, "function_call_errors") : json_null();
    bad |= json_object_set_new(s, "function_calls", calls);
    bad |= json_object_set_new(s, "function_call_errors", errors);
    json_int_t nc = json_is_integer(calls) ? json_integer_value(calls) : 0;
    bad |= json_object_set_new(s, "function_error_rate",
                               nc > 0 && json_is_integer(errors)
                                   ? json_real((double)json_integer_value(errors) / (double)nc)
                                   : json_null());
    bad |= json_object_set_new(s, "trace_count", count_or_null(traces, "trace_count"));
    bad |= json_object_set_new(s, "span_count", count_or_null(traces, "span_count"));
    bad |= json_object_set_new(s, "error_span_count", count_or_null(traces, "error_span_count"));
    bad |= json_object_set_new(s, "trace_duration_ms", count_or_null(traces, "duration_ms"));
    bad |= json_object_set_new(s, "wall_time_ms",
                               has_wall_time && wall_time_ms >= 0 ? json_integer(wall_time_ms)
                                                                  : json_null());
    json_t *sessions = metrics ? count_or_null(totals, "sessions") : json_null();
    bad |= json_object_set_new(s, "sessions", sessions);
    bad |= json_object_set_new(s, "descendants",
                               json_is_integer(sessions) && json_integer_value(sessions) > 0
                                   ? json_integer(json_integer_value(sessions) - 1)
                                   : json_null());
    json_t *by = json_object_get(metrics, "by_session");
    json_t *depth = json_null();
    if (json_is_array(by) && json_array_size(by) > 0) {
        json_int_t max = 0;
        size_t i;
        json_t *e;
        json_array_foreach(by, i, e)
        {
            json_int_t d = json_integer_value(json_object_get(e, "depth"));
            max = d > max ? d : max;
        }
        depth = json_integer(max);
    }
    bad |= json_object_set_new(s, "max_depth", depth);
    if (bad) {
        json_decref(s);
        return NULL;
    }
    return s;
}

json_t *evd_compare_deltas(const json_t *summary, const json_t *baseline)
{
    json_t *d = json_object();
    if (d == NULL)
        return NULL;
    int bad = 0;
    for (const char *const *k = EVD_COMPARE_METRICS; *k; k++) {
        json_t *v = json_object_get(summary, *k), *b = json_object_get(baseline, *k);
        json_t *abs = json_null(), *pct = json_null();
        if (json_is_number(v) && json_is_number(b)) {
            double dv = json_number_value(v), db = json_number_value(b);
            if (json_is_integer(v) && json_is_integer(b)) {
                json_decref(abs);
                abs = json_integer(json_integer_value(v) - json_integer_value(b));
            } else {
                json_decref(abs);
                abs = json_real(dv - db);
            }
            if (db != 0.0) {
                json_decref(pct);
                pct = json_real((dv - db) / db * 100.0);
            }
        }
        bad |= json_object_set_new(d, *k, json_pack("{s:o, s:o}", "absolute", abs, "percent", pct));
    }
    if (bad) {
        json_decref(d);
        return NULL;
    }
    return d;
}

/* ---- the comparison --------------------------------------------------------------------- */

/* Checks a stored metrics value; on failure adds "<what>: <message>" to errors. */
static bool usable(const json_t *m, const char *what, json_t *errors)
{
    if (m == NULL || json_is_null(m))
        return false;
    struct evd_err e = {0};
    if (evd_metrics_check(m, "metrics", &e) == EVD_OK)
        return true;
    char msg[EVD_ERR_MSG_MAX + 64];
    snprintf(msg, sizeof(msg), "%s cannot be read: %s", what, e.msg);
    json_array_append_new(errors, json_string(msg));
    return false;
}

/* The metrics to show for one source (new reference or NULL). */
static json_t *metrics_of(const struct evd_compare_source *src, json_t *errors)
{
    bool has_m = usable(src->metrics, "metrics", errors);
    bool has_p = !src->terminal && usable(src->progress, "progress", errors);
    json_t *out = NULL;
    if (has_p && strcmp(src->kind, "session") == 0)
        out = evd_session_metrics_add(has_m ? src->metrics : NULL, src->progress, src->session_id,
                                      false);
    else if (has_p)
        out = json_deep_copy(src->progress);
    else if (has_m)
        out = json_deep_copy(src->metrics);
    if (out != NULL)
        json_object_set_new(out, "complete", json_boolean(src->terminal));
    return out;
}

json_t *evd_compare_build(const struct evd_compare_source *sources, size_t n, size_t baseline,
                          int64_t captured_at)
{
    json_t *items = json_array();
    json_t *summaries[EVD_COMPARE_MAX] = {0};
    json_t *out = NULL;
    int bad = items == NULL || n > EVD_COMPARE_MAX || baseline >= n;
    for (size_t i = 0; !bad && i < n; i++) {
        const struct evd_compare_source *src = &sources[i];
        json_t *errors = json_array();
        if (src->error != NULL)
            json_array_append_new(errors, json_string(src->error));
        json_t *metrics = metrics_of(src, errors);
        bool complete =
            metrics ? json_is_true(json_object_get(metrics, "complete")) : src->terminal;
        summaries[i] = evd_compare_summary(metrics, src->has_wall_time, src->wall_time_ms);
        json_t *item =
            json_pack("{s:s, s:s, s:s?, s:O, s:{s:s?, s:b, s:b, s:b}, s:O, s:O, s:o}", "session_id",
                      src->session_id, "kind", src->kind, "title", src->title, "session",
                      src->session ? src->session : json_null(), "lifecycle", "turn_status",
                      src->turn_status, "terminal", src->terminal, "complete", complete, "partial",
                      !complete, "metrics", metrics ? metrics : json_null(), "summary",
                      summaries[i] ? summaries[i] : json_null(), "errors", errors);
        json_decref(metrics);
        if (item != NULL && src->title == NULL)
            json_object_set_new(item, "title", json_null());
        if (item != NULL && src->turn_status == NULL)
            json_object_set_new(json_object_get(item, "lifecycle"), "turn_status", json_null());
        bad |= item == NULL || summaries[i] == NULL || json_array_append_new(items, item);
    }
    for (size_t i = 0; !bad && i < n; i++) {
        const json_t *m = json_object_get(json_array_get(items, i), "metrics");
        const json_t *bm = json_object_get(json_array_get(items, baseline), "metrics");
        /* Items with no metrics (or a baseline without) get null deltas throughout. */
        json_t *d = evd_compare_deltas(json_is_null(m) ? NULL : summaries[i],
                                       json_is_null(bm) ? NULL : summaries[baseline]);
        bad |= d == NULL || json_object_set_new(json_array_get(items, i), "deltas", d);
    }
    if (!bad)
        out = json_pack("{s:s, s:I, s:s, s:O}", "schema_version", "1", "captured_at",
                        (json_int_t)captured_at, "baseline_session_id",
                        sources[baseline].session_id, "sessions", items);
    for (size_t i = 0; i < n && i < EVD_COMPARE_MAX; i++)
        json_decref(summaries[i]);
    json_decref(items);
    return out;
}
