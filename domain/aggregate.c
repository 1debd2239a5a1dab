/*
 * Variant aggregates, medians, delta, eligibility and order sensitivity (see
 * aggregate.h). Pure; thread-safe; scratch arrays are allocated per call.
 */
#include "domain/aggregate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "domain/fields.h"
#include "domain/run.h"

static int cmp_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

/* Total order on finite reals: -0.0 sorts before +0.0. */
static int cmp_f64(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    if (a < b)
        return -1;
    if (a > b)
        return 1;
    return (int)(signbit(b) != 0) - (int)(signbit(a) != 0);
}

bool evd_aggregate_median_u64(uint64_t *v, size_t n, uint64_t *out)
{
    if (n == 0)
        return false;
    qsort(v, n, sizeof(*v), cmp_u64);
    if (n % 2 == 1) {
        *out = v[n / 2];
    } else {
        uint64_t a = v[n / 2 - 1], b = v[n / 2];
        uint64_t sum = a + b < a ? UINT64_MAX : a + b; /* saturating, as the contract says */
        *out = sum / 2;
    }
    return true;
}

bool evd_aggregate_median_f64(double *v, size_t n, double *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isfinite(v[i]))
            v[m++] = v[i];
    }
    if (m == 0)
        return false;
    qsort(v, m, sizeof(*v), cmp_f64);
    *out = m % 2 == 1 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2.0;
    return true;
}

/* The integer benchmark members that get a median, and whether every benchmark has it. */
static const struct {
    const char *bench;
    const char *median;
} INT_MEDIANS[] = {
    {"wall_time_ms", "median_wall_time_ms"},
    {"input_tokens", "median_input_tokens"},
    {"output_tokens", "median_output_tokens"},
    {"total_tokens", "median_total_tokens"},
    {"reasoning_tokens", "median_reasoning_tokens"},
    {"function_calls", "median_function_calls"},
    {"function_call_errors", "median_function_call_errors"},
    {"trace_count", "median_trace_count"},
    {"span_count", "median_span_count"},
    {"error_span_count", "median_error_span_count"},
    {"trace_duration_ms", "median_trace_duration_ms"},
};

static bool role_is(const json_t *run, enum evd_role role)
{
    enum evd_role r;
    return evd_run_get_role(run, &r) && r == role;
}

json_t *evd_aggregate_variant(const json_t *runs, enum evd_role role)
{
    size_t cap = json_array_size(runs);
    uint64_t *ints = malloc((cap ? cap : 1) * sizeof(*ints));
    double *reals = malloc((cap ? cap : 1) * sizeof(*reals));
    json_t *agg = json_object();
    uint32_t count = 0, evaluated = 0, passed = 0, benchmarked = 0;
    int rc = (ints == NULL || reals == NULL || agg == NULL) ? -1 : 0;
    size_t i;
    json_t *run;

    json_array_foreach(runs, i, run)
    {
        if (!role_is(run, role) || !evd_run_is_terminal(run))
            continue;
        count++;
        int p = evd_run_passed(run);
        evaluated += p >= 0;
        passed += p == 1;
        benchmarked += json_is_object(json_object_get(run, "benchmark"));
    }
    double rate = evaluated == 0 ? 0.0 : (double)passed / (double)evaluated;
    rc |= json_object_set_new(agg, "runs", json_integer(count));
    rc |= json_object_set_new(agg, "evaluated_runs", json_integer(evaluated));
    rc |= json_object_set_new(agg, "passed", json_integer(passed));
    rc |= json_object_set_new(agg, "pass_rate", json_real(rate));
    rc |= json_object_set_new(agg, "benchmarked_runs", json_integer(benchmarked));

    /* median_score over finite evaluation scores */
    size_t n = 0;
    json_array_foreach(runs, i, run)
    {
        if (rc != 0 || !role_is(run, role) || !evd_run_is_terminal(run))
            continue;
        json_t *score = json_object_get(json_object_get(run, "evaluation"), "score");
        if (json_is_number(score))
            reals[n++] = json_number_value(score);
    }
    double med;
    if (rc == 0 && evd_aggregate_median_f64(reals, n, &med))
        rc |= json_object_set_new(agg, "median_score", json_real(med));

    for (size_t k = 0; rc == 0 && k < sizeof(INT_MEDIANS) / sizeof(INT_MEDIANS[0]); k++) {
        n = 0;
        json_array_foreach(runs, i, run)
        {
            if (!role_is(run, role) || !evd_run_is_terminal(run))
                continue;
            json_t *v = json_object_get(json_object_get(run, "benchmark"), INT_MEDIANS[k].bench);
            if (json_is_integer(v) && json_integer_value(v) >= 0)
                ints[n++] = (uint64_t)json_integer_value(v);
        }
        uint64_t m;
        if (evd_aggregate_median_u64(ints, n, &m))
            rc |= json_object_set_new(
                agg, INT_MEDIANS[k].median,
                json_integer(m > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)m));
    }

    n = 0;
    json_array_foreach(runs, i, run)
    {
        if (rc != 0 || !role_is(run, role) || !evd_run_is_terminal(run))
            continue;
        json_t *cost = json_object_get(json_object_get(run, "benchmark"), "cost_usd");
        if (json_is_number(cost))
            reals[n++] = json_number_value(cost);
    }
    if (rc == 0 && evd_aggregate_median_f64(reals, n, &med))
        rc |= json_object_set_new(agg, "median_cost_usd", json_real(med));

    free(ints);
    free(reals);
    if (rc != 0) {
        json_decref(agg);
        return NULL;
    }
    return agg;
}

static const char *const DELTA_FIELDS[] = {
    "median_score",
    "median_wall_time_ms",
    "median_total_tokens",
    "median_reasoning_tokens",
    "median_function_calls",
    "median_function_call_errors",
    "median_cost_usd",
    "median_trace_count",
    "median_span_count",
    "median_error_span_count",
    "median_trace_duration_ms",
    NULL,
};

json_t *evd_aggregate_delta(const json_t *control, const json_t *treatment)
{
    json_t *d = json_object();
    int rc = 0;
    double rate = json_number_value(json_object_get(treatment, "pass_rate")) -
                  json_number_value(json_object_get(control, "pass_rate"));
    rc |= json_object_set_new(d, "pass_rate", json_real(isfinite(rate) ? rate : 0.0));
    for (const char *const *f = DELTA_FIELDS; *f != NULL; f++) {
        json_t *c = json_object_get(control, *f);
        json_t *t = json_object_get(treatment, *f);
        if (!json_is_number(c) || !json_is_number(t))
            continue;
        double diff = json_number_value(t) - json_number_value(c);
        if (isfinite(diff))
            rc |= json_object_set_new(d, *f, json_real(diff));
    }
    if (rc != 0) {
        json_decref(d);
        return NULL;
    }
    return d;
}

int evd_aggregate_eligible(const json_t *control, const json_t *treatment, bool has_evaluator)
{
    if (!has_evaluator)
        return -1;
    json_int_t t_runs = evd_fields_int(treatment, "runs", 0);
    json_int_t t_eval = evd_fields_int(treatment, "evaluated_runs", 0);
    json_int_t t_pass = evd_fields_int(treatment, "passed", 0);
    json_int_t c_pass = evd_fields_int(control, "passed", 0);
    return t_runs > 0 && t_eval == t_runs && t_pass == t_eval && t_pass >= c_pass;
}

static json_t *role_sensitivity(const json_t *runs, enum evd_role role, bool *differs)
{
    uint64_t first_runs = 0, first_passed = 0, second_runs = 0, second_passed = 0;
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        int p = evd_run_passed(run);
        if (!role_is(run, role) || p < 0)
            continue;
        json_int_t pos = evd_fields_int(run, "pair_position", 0);
        if (pos == 1) {
            first_runs++;
            first_passed += p == 1;
        } else if (pos == 2) {
            second_runs++;
            second_passed += p == 1;
        }
    }
    *differs = first_runs > 0 && second_runs > 0 &&
               first_passed * second_runs != second_passed * first_runs;
    return json_pack("{s:b, s:I, s:I, s:I, s:I}", "differs", (int)*differs, "first_runs",
                     (json_int_t)first_runs, "first_passed", (json_int_t)first_passed,
                     "second_runs", (json_int_t)second_runs, "second_passed",
                     (json_int_t)second_passed);
}

json_t *evd_aggregate_order_sensitivity(const json_t *runs)
{
    bool c_differs, t_differs;
    json_t *c = role_sensitivity(runs, EVD_ROLE_CONTROL, &c_differs);
    json_t *t = role_sensitivity(runs, EVD_ROLE_TREATMENT, &t_differs);
    if (c == NULL || t == NULL) {
        json_decref(c);
        json_decref(t);
        return NULL;
    }
    json_t *o = json_object();
    int rc = 0;
    rc |= json_object_set_new(o, "control", c);
    rc |= json_object_set_new(o, "detected", json_boolean(c_differs || t_differs));
    rc |= json_object_set_new(o, "treatment", t);
    if (rc != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}
