/*
 * Limits: decode with defaults, validate, normalize, and post-hoc failures (see
 * limits.h). Pure; thread-safe.
 */
#include "domain/limits.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "domain/fields.h"
#include "domain/run.h"

static const char *const LIMITS_FIELDS[] = {"evaluation", "execution", NULL};
static const char *const EXECUTION_FIELDS[] = {"invocation_timeout_seconds",
                                               "scenario_timeout_seconds",
                                               "max_turns",
                                               "max_output_tokens_per_call",
                                               "max_total_tokens",
                                               "max_cost_usd",
                                               NULL};
static const char *const EVALUATION_FIELDS[] = {"max_function_call_errors", "max_error_spans",
                                                NULL};

void evd_limits_defaults(struct evd_limits *out)
{
    *out = (struct evd_limits){
        .invocation_timeout_seconds = EVD_LIMITS_DEFAULT_INVOCATION_TIMEOUT_S,
        .scenario_timeout_seconds = EVD_LIMITS_DEFAULT_SCENARIO_TIMEOUT_S,
        .max_turns = EVD_LIMITS_DEFAULT_MAX_TURNS,
        .max_output_tokens_per_call = EVD_LIMITS_DEFAULT_MAX_OUTPUT_TOKENS,
    };
}

/* An optional unsigned member that keeps *value (its default) when absent. */
static enum evd_code read_u64(const json_t *obj, const char *parent, const char *key,
                              unsigned flags, uint64_t max, bool *has, uint64_t *value,
                              struct evd_err *err)
{
    bool present;
    uint64_t v;
    enum evd_code rc = evd_fields_uint(obj, parent, key, flags, max, &present, &v, err);
    if (rc != EVD_OK)
        return rc;
    if (present)
        *value = v;
    if (has != NULL)
        *has = present;
    return EVD_OK;
}

static enum evd_code decode_execution(const json_t *ex, const char *p, struct evd_limits *out,
                                      struct evd_err *err)
{
    enum evd_code rc = evd_fields_only(ex, p, EXECUTION_FIELDS, err);
    if (rc == EVD_OK)
        rc = read_u64(ex, p, "invocation_timeout_seconds", 0, INT64_MAX, NULL,
                      &out->invocation_timeout_seconds, err);
    if (rc == EVD_OK)
        rc = read_u64(ex, p, "scenario_timeout_seconds", 0, INT64_MAX, NULL,
                      &out->scenario_timeout_seconds, err);
    if (rc == EVD_OK) {
        uint64_t turns = out->max_turns;
        rc = read_u64(ex, p, "max_turns", 0, UINT32_MAX, NULL, &turns, err);
        out->max_turns = (uint32_t)turns;
    }
    if (rc == EVD_OK)
        rc = read_u64(ex, p, "max_output_tokens_per_call", 0, INT64_MAX, NULL,
                      &out->max_output_tokens_per_call, err);
    if (rc == EVD_OK)
        rc = read_u64(ex, p, "max_total_tokens", EVD_F_NULLABLE, INT64_MAX,
                      &out->has_max_total_tokens, &out->max_total_tokens, err);
    if (rc == EVD_OK) {
        json_t *cost;
        rc = evd_fields_get(ex, p, "max_cost_usd", EVD_F_NUMBER | EVD_F_NULLABLE, &cost, err);
        if (rc == EVD_OK && cost != NULL) {
            out->has_max_cost_usd = true;
            out->max_cost_usd = json_number_value(cost);
        }
    }
    return rc;
}

static enum evd_code decode_evaluation(const json_t *ev, struct evd_limits *out,
                                       struct evd_err *err)
{
    const char *p = "limits.evaluation";
    enum evd_code rc = evd_fields_only(ev, p, EVALUATION_FIELDS, err);
    if (rc == EVD_OK)
        rc = read_u64(ev, p, "max_function_call_errors", EVD_F_NULLABLE, INT64_MAX,
                      &out->has_max_function_call_errors, &out->max_function_call_errors, err);
    if (rc == EVD_OK)
        rc = read_u64(ev, p, "max_error_spans", EVD_F_NULLABLE, INT64_MAX,
                      &out->has_max_error_spans, &out->max_error_spans, err);
    return rc;
}

enum evd_code evd_limits_decode(const json_t *limits, struct evd_limits *out, struct evd_err *err)
{
    evd_limits_defaults(out);
    if (limits == NULL)
        return EVD_OK;
    if (!json_is_object(limits))
        return evd_err_set(err, EVD_EINVAL, "limits must be an object");
    enum evd_code rc = evd_fields_only(limits, "limits", LIMITS_FIELDS, err);
    json_t *ex = NULL, *ev = NULL;
    if (rc == EVD_OK)
        rc = evd_fields_get(limits, "limits", "execution", EVD_F_OBJECT, &ex, err);
    if (rc == EVD_OK && ex != NULL)
        rc = decode_execution(ex, "limits.execution", out, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(limits, "limits", "evaluation", EVD_F_OBJECT, &ev, err);
    if (rc == EVD_OK && ev != NULL)
        rc = decode_evaluation(ev, out, err);
    return rc;
}

enum evd_code evd_limits_decode_execution(const json_t *execution, const char *path,
                                          struct evd_limits *out, struct evd_err *err)
{
    evd_limits_defaults(out);
    if (execution == NULL)
        return EVD_OK;
    if (!json_is_object(execution))
        return evd_err_set(err, EVD_EINVAL, "%s must be an object", path);
    return decode_execution(execution, path, out, err);
}

enum evd_code evd_limits_validate_at(const struct evd_limits *l, const char *p, struct evd_err *err)
{
    if (l->invocation_timeout_seconds == 0)
        return evd_err_set(err, EVD_EINVAL,
                           "%s.invocation_timeout_seconds must be greater than zero", p);
    if (l->scenario_timeout_seconds == 0)
        return evd_err_set(err, EVD_EINVAL, "%s.scenario_timeout_seconds must be greater than zero",
                           p);
    if (l->max_turns == 0)
        return evd_err_set(err, EVD_EINVAL, "%s.max_turns must be greater than zero", p);
    if (l->max_output_tokens_per_call == 0)
        return evd_err_set(err, EVD_EINVAL,
                           "%s.max_output_tokens_per_call must be greater than zero", p);
    if (l->has_max_total_tokens && l->max_total_tokens == 0)
        return evd_err_set(err, EVD_EINVAL,
                           "%s.max_total_tokens must be greater than zero when supplied", p);
    if (l->has_max_cost_usd && (!isfinite(l->max_cost_usd) || l->max_cost_usd < 0.0))
        return evd_err_set(err, EVD_EINVAL, "%s.max_cost_usd must be a finite non-negative number",
                           p);
    return EVD_OK;
}

enum evd_code evd_limits_validate(const struct evd_limits *l, struct evd_err *err)
{
    return evd_limits_validate_at(l, "limits.execution", err);
}

json_t *evd_limits_to_json(const struct evd_limits *l)
{
    json_t *out = json_object();
    json_t *ex = json_object();
    json_t *ev = json_object();
    int rc = 0;
    rc |= json_object_set_new(ex, "invocation_timeout_seconds",
                              json_integer((json_int_t)l->invocation_timeout_seconds));
    rc |= json_object_set_new(ex, "scenario_timeout_seconds",
                              json_integer((json_int_t)l->scenario_timeout_seconds));
    rc |= json_object_set_new(ex, "max_turns", json_integer((json_int_t)l->max_turns));
    rc |= json_object_set_new(ex, "max_output_tokens_per_call",
                              json_integer((json_int_t)l->max_output_tokens_per_call));
    if (l->has_max_total_tokens)
        rc |= json_object_set_new(ex, "max_total_tokens",
                                  json_integer((json_int_t)l->max_total_tokens));
    if (l->has_max_cost_usd)
        rc |= json_object_set_new(ex, "max_cost_usd", json_real(l->max_cost_usd));
    if (l->has_max_function_call_errors)
        rc |= json_object_set_new(ev, "max_function_call_errors",
                                  json_integer((json_int_t)l->max_function_call_errors));
    if (l->has_max_error_spans)
        rc |= json_object_set_new(ev, "max_error_spans",
                                  json_integer((json_int_t)l->max_error_spans));
    rc |= json_object_set_new(out, "evaluation", ev);
    rc |= json_object_set_new(out, "execution", ex);
    if (rc != 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* A present, non-null unsigned integer member of obj. */
static bool get_count(const json_t *obj, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static int add_failure(json_t *failures, enum evd_phase phase, const char *function_id,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int add_failure(json_t *failures, enum evd_phase phase, const char *function_id,
                       const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return json_array_append_new(failures, evd_run_failure_new(phase, function_id, msg));
}

json_t *evd_limits_failures(const struct evd_limits *l, const json_t *metrics)
{
    static const char METRICS_FN[] = "harness::metrics";
    json_t *failures = json_array();
    json_t *totals = json_object_get(metrics, "totals");
    int rc = 0;
    if (failures == NULL)
        return NULL;

    if (l->has_max_total_tokens) {
        uint64_t in, out;
        if (get_count(totals, "input_tokens", &in) && get_count(totals, "output_tokens", &out)) {
            uint64_t total = in + out < in ? UINT64_MAX : in + out;
            if (total > l->max_total_tokens)
                rc |= add_failure(failures, EVD_PHASE_LIMIT, NULL,
                                  "total tokens %" PRIu64 " exceeded limit %" PRIu64, total,
                                  l->max_total_tokens);
        } else {
            rc |= add_failure(failures, EVD_PHASE_COLLECT, METRICS_FN, "%s",
                              "total-token validation requires input_tokens and output_tokens");
        }
    }
    if (l->has_max_cost_usd) {
        json_t *cost = json_object_get(totals, "cost_usd");
        if (json_is_number(cost)) {
            double c = json_number_value(cost);
            if (c > l->max_cost_usd)
                rc |= add_failure(failures, EVD_PHASE_LIMIT, NULL,
                                  "cost $%.6f exceeded limit $%.6f", c, l->max_cost_usd);
        } else {
            rc |= add_failure(failures, EVD_PHASE_COLLECT, METRICS_FN, "%s",
                              "cost validation requires cost_usd from every model generation");
        }
    }
    if (l->has_max_function_call_errors) {
        uint64_t errors = 0;
        (void)get_count(totals, "function_call_errors", &errors);
        if (errors > l->max_function_call_errors)
            rc |= add_failure(failures, EVD_PHASE_LIMIT, NULL,
                              "function call errors %" PRIu64 " exceeded limit %" PRIu64, errors,
                              l->max_function_call_errors);
    }
    if (l->has_max_error_spans) {
        json_t *traces = json_object_get(metrics, "traces");
        uint64_t spans;
        if (json_is_object(traces) && get_count(traces, "error_span_count", &spans)) {
            if (spans > l->max_error_spans)
                rc |= add_failure(failures, EVD_PHASE_LIMIT, NULL,
                                  "error spans %" PRIu64 " exceeded limit %" PRIu64, spans,
                                  l->max_error_spans);
        } else {
            rc |= add_failure(failures, EVD_PHASE_COLLECT, METRICS_FN, "%s",
                              "error-span validation requires in-memory observability metrics");
        }
    }
    if (rc != 0) {
        json_decref(failures);
        return NULL;
    }
    return failures;
}
