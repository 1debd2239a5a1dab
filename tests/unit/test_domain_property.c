/*
 * Property tests of the domain over random plans and run outcomes (fixed-seed
 * splitmix64, so every failure reproduces): plan balance, pass-rate bounds, delta
 * antisymmetry under swapping roles, and consistency between counts, aggregates and
 * order sensitivity.
 */
#include <check.h>
#include <math.h>
#include <string.h>

#include "domain/aggregate.h"
#include "domain/plan.h"
#include "domain/report.h"
#include "domain/run.h"
#include "tests/support/domain_fixtures.h"
#include "tests/support/testutil.h"

#define ITERATIONS 400

START_TEST(each_variant_runs_first_in_half_the_pairs)
{
    uint64_t rng = 42;
    for (int k = 0; k < ITERATIONS; k++) {
        uint32_t runs = 1 + (uint32_t)(evd_dt_rand(&rng) % 100);
        enum evd_order order =
            evd_dt_rand(&rng) % 2 ? EVD_ORDER_CONTROL_FIRST : EVD_ORDER_TREATMENT_FIRST;
        json_t *plan = evd_plan_build("eval_p", runs, order);
        uint32_t first[2] = {0, 0}, count[2] = {0, 0};
        size_t i;
        json_t *run;
        json_array_foreach(plan, i, run)
        {
            enum evd_role role;
            ck_assert(evd_run_get_role(run, &role));
            count[role]++;
            if (json_integer_value(json_object_get(run, "pair_position")) == 1)
                first[role]++;
            /* each pair holds one run of each variant with the same iteration */
            if (i % 2 == 1) {
                json_t *prev = json_array_get(plan, i - 1);
                ck_assert(!json_equal(json_object_get(prev, "role"), json_object_get(run, "role")));
                ck_assert(json_equal(json_object_get(prev, "iteration"),
                                     json_object_get(run, "iteration")));
            }
        }
        ck_assert_uint_eq(count[0], runs);
        ck_assert_uint_eq(count[1], runs);
        ck_assert_uint_eq(first[0] + first[1], runs);
        uint32_t ceil_half = (runs + 1) / 2, floor_half = runs / 2;
        enum evd_role leader =
            order == EVD_ORDER_CONTROL_FIRST ? EVD_ROLE_CONTROL : EVD_ROLE_TREATMENT;
        ck_assert_uint_eq(first[leader], ceil_half);
        ck_assert_uint_eq(first[1 - leader], floor_half);
        json_decref(plan);
    }
}
END_TEST

static double num(const json_t *obj, const char *key)
{
    return json_number_value(json_object_get(obj, key));
}

START_TEST(pass_rates_stay_in_the_unit_interval)
{
    uint64_t rng = 7;
    for (int k = 0; k < ITERATIONS; k++) {
        struct evd_dt_eval e;
        evd_dt_random_eval(&rng, 8, &e);
        json_t *p = evd_report_progress(e.request, e.runs);
        ck_assert_ptr_nonnull(p);
        for (int r = 0; r < 2; r++) {
            json_t *agg = json_object_get(p, r ? "treatment_aggregate" : "control_aggregate");
            double rate = num(agg, "pass_rate");
            ck_assert(rate >= 0.0 && rate <= 1.0);
            ck_assert_int_le(num(agg, "passed"), num(agg, "evaluated_runs"));
            ck_assert_int_le(num(agg, "evaluated_runs"), num(agg, "runs"));
            ck_assert_int_le(num(agg, "benchmarked_runs"), num(agg, "runs"));
            json_t *score = json_object_get(agg, "median_score");
            if (score != NULL)
                ck_assert(num(agg, "median_score") >= 0.0 && num(agg, "median_score") <= 1.0);
        }
        double d = num(json_object_get(p, "delta"), "pass_rate");
        ck_assert(d >= -1.0 && d <= 1.0);
        json_decref(p);
        evd_dt_eval_release(&e);
    }
}
END_TEST

START_TEST(delta_is_antisymmetric_under_swapping_roles)
{
    uint64_t rng = 1234;
    for (int k = 0; k < ITERATIONS; k++) {
        struct evd_dt_eval e;
        evd_dt_random_eval(&rng, 8, &e);
        json_t *c = evd_aggregate_variant(e.runs, EVD_ROLE_CONTROL);
        json_t *t = evd_aggregate_variant(e.runs, EVD_ROLE_TREATMENT);
        json_t *d = evd_aggregate_delta(c, t);
        evd_dt_swap_roles(e.runs);
        json_t *c2 = evd_aggregate_variant(e.runs, EVD_ROLE_CONTROL);
        json_t *t2 = evd_aggregate_variant(e.runs, EVD_ROLE_TREATMENT);
        json_t *d2 = evd_aggregate_delta(c2, t2);
        /* swapping roles swaps the aggregates ... */
        ck_assert(json_equal(c, t2));
        ck_assert(json_equal(t, c2));
        /* ... and negates every delta member, with the same members present */
        ck_assert_uint_eq(json_object_size(d), json_object_size(d2));
        const char *key;
        json_t *v;
        json_object_foreach(d, key, v)
        {
            json_t *w = json_object_get(d2, key);
            ck_assert_msg(w != NULL, "%s missing after the swap", key);
            ck_assert_msg(json_real_value(v) == -json_real_value(w), "%s: %g vs %g", key,
                          json_real_value(v), json_real_value(w));
        }
        json_decref(c);
        json_decref(t);
        json_decref(d);
        json_decref(c2);
        json_decref(t2);
        json_decref(d2);
        evd_dt_eval_release(&e);
    }
}
END_TEST

START_TEST(counts_aggregates_and_order_sensitivity_agree)
{
    uint64_t rng = 99;
    for (int k = 0; k < ITERATIONS; k++) {
        struct evd_dt_eval e;
        evd_dt_random_eval(&rng, 8, &e);
        json_t *c = evd_aggregate_variant(e.runs, EVD_ROLE_CONTROL);
        json_t *t = evd_aggregate_variant(e.runs, EVD_ROLE_TREATMENT);
        json_t *o = evd_aggregate_order_sensitivity(e.runs);
        struct evd_run_counts n;
        evd_report_count_runs(e.runs, &n);
        ck_assert_uint_eq(n.total, json_array_size(e.runs));
        ck_assert_uint_eq(n.terminal, num(c, "runs") + num(t, "runs"));
        ck_assert_uint_eq(n.passed, num(c, "passed") + num(t, "passed"));
        ck_assert_uint_le(n.passed + n.failed, n.terminal);
        for (int r = 0; r < 2; r++) {
            json_t *agg = r ? t : c;
            json_t *os = json_object_get(o, r ? "treatment" : "control");
            ck_assert_uint_eq(num(os, "first_runs") + num(os, "second_runs"),
                              num(agg, "evaluated_runs"));
            ck_assert_uint_eq(num(os, "first_passed") + num(os, "second_passed"),
                              num(agg, "passed"));
        }
        ck_assert_int_eq(
            json_is_true(json_object_get(o, "detected")),
            json_is_true(json_object_get(json_object_get(o, "control"), "differs")) ||
                json_is_true(json_object_get(json_object_get(o, "treatment"), "differs")));
        bool evaluator = json_is_object(json_object_get(e.request, "evaluator"));
        int eligible = evd_aggregate_eligible(c, t, evaluator);
        if (!evaluator)
            ck_assert_int_eq(eligible, -1);
        if (eligible == 1) {
            ck_assert_int_gt(num(t, "runs"), 0);
            ck_assert(num(t, "pass_rate") == 1.0);
            ck_assert_int_ge(num(t, "passed"), num(c, "passed"));
        }
        if (e.cancelled)
            ck_assert_uint_eq(n.terminal, n.total);
        json_decref(c);
        json_decref(t);
        json_decref(o);
        evd_dt_eval_release(&e);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_property");
    TCase *tc = tcase_create("properties");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, each_variant_runs_first_in_half_the_pairs);
    tcase_add_test(tc, pass_rates_stay_in_the_unit_interval);
    tcase_add_test(tc, delta_is_antisymmetric_under_swapping_roles);
    tcase_add_test(tc, counts_aggregates_and_order_sensitivity_agree);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
