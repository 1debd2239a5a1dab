/*
 * Unit tests for domain/aggregate.h and domain/report.h: medians, pass rate, delta,
 * eligibility, order sensitivity, and the progress, report, result, status and
 * summary projections.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/util.h"
#include "domain/aggregate.h"
#include "domain/report.h"
#include "domain/request.h"
#include "domain/run.h"
#include "tests/support/domain_fixtures.h"
#include "tests/support/testutil.h"

struct u64_case {
    uint64_t v[5];
    size_t n;
    bool some;
    uint64_t median;
};

static const struct u64_case U64S[] = {
    {{10, 20}, 2, true, 15},
    {{1, 2}, 2, true, 1},
    {{3}, 1, true, 3},
    {{5, 1, 3}, 3, true, 3},
    {{30, 10, 20, 40}, 4, true, 25},
    {{7, 8, 9, 1}, 4, true, 7},
    {{0}, 0, false, 0},
    {{UINT64_MAX, UINT64_MAX}, 2, true, UINT64_MAX / 2}, /* saturating add */
};

START_TEST(integer_median)
{
    uint64_t v[5];
    memcpy(v, U64S[_i].v, sizeof(v));
    uint64_t m = 0;
    ck_assert_int_eq(evd_aggregate_median_u64(v, U64S[_i].n, &m), U64S[_i].some);
    if (U64S[_i].some)
        ck_assert_uint_eq(m, U64S[_i].median);
}
END_TEST

START_TEST(real_median)
{
    double a[] = {2.0, 1.0};
    double m;
    ck_assert(evd_aggregate_median_f64(a, 2, &m));
    ck_assert(m == 1.5);
    double b[] = {NAN, 2.0, INFINITY, 0.5, 1.0};
    ck_assert(evd_aggregate_median_f64(b, 5, &m));
    ck_assert(m == 1.0);
    double c[] = {NAN, -INFINITY};
    ck_assert(!evd_aggregate_median_f64(c, 2, &m));
    ck_assert(!evd_aggregate_median_f64(c, 0, &m));
}
END_TEST

/* A plan of `runs` per variant (control first) finished with per-run (passed, tokens). */
static json_t *finished_plan(uint32_t runs, const int *c_passed, const int64_t *c_tokens,
                             const int *t_passed, const int64_t *t_tokens)
{
    json_t *plan = evd_plan_build("eval_1", runs, EVD_ORDER_CONTROL_FIRST);
    size_t i;
    json_t *run;
    json_array_foreach(plan, i, run)
    {
        enum evd_role role;
        evd_run_get_role(run, &role);
        size_t it = (size_t)json_integer_value(json_object_get(run, "iteration")) - 1;
        if (role == EVD_ROLE_CONTROL)
            evd_dt_finish_run(run, c_passed[it], c_tokens[it], 100 + (int64_t)it);
        else
            evd_dt_finish_run(run, t_passed[it], t_tokens[it], 200 + (int64_t)it);
    }
    return plan;
}

START_TEST(delta_of_median_total_tokens)
{
    static const int pass[] = {1, 1, 1};
    static const int64_t c_tok[] = {10, 20, 30}, t_tok[] = {8, 12, 16};
    json_t *plan = finished_plan(3, pass, c_tok, pass, t_tok);
    json_t *c = evd_aggregate_variant(plan, EVD_ROLE_CONTROL);
    json_t *t = evd_aggregate_variant(plan, EVD_ROLE_TREATMENT);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "median_total_tokens")), 20);
    ck_assert_int_eq(json_integer_value(json_object_get(t, "median_total_tokens")), 12);
    json_t *d = evd_aggregate_delta(c, t);
    ck_assert(json_is_real(json_object_get(d, "median_total_tokens")));
    ck_assert(json_real_value(json_object_get(d, "median_total_tokens")) == -8.0);
    ck_assert(json_real_value(json_object_get(d, "median_wall_time_ms")) == 100.0);
    ck_assert(json_real_value(json_object_get(d, "pass_rate")) == 0.0);
    ck_assert(json_real_value(json_object_get(d, "median_cost_usd")) == 0.0);
    /* no delta for input/output token medians */
    ck_assert_ptr_null(json_object_get(d, "median_input_tokens"));
    ck_assert_ptr_null(json_object_get(d, "median_output_tokens"));
    json_decref(d);
    json_decref(c);
    json_decref(t);
    json_decref(plan);
}
END_TEST

START_TEST(delta_is_absent_when_either_side_is)
{
    json_t *c = evd_dt_parse("{\"pass_rate\":0.5,\"median_score\":0.5,\"median_total_tokens\":7,"
                             "\"median_cost_usd\":1e308}");
    json_t *t = evd_dt_parse("{\"pass_rate\":1.0,\"median_span_count\":3,"
                             "\"median_total_tokens\":9,\"median_cost_usd\":-1e308}");
    json_t *d = evd_aggregate_delta(c, t);
    ck_assert_str_eq(evd_dt_dump(d), "{\"median_total_tokens\":2.0,\"pass_rate\":0.5}");
    json_decref(d);
    json_decref(c);
    json_decref(t);
}
END_TEST

START_TEST(pass_rate_counts_evaluated_runs_only)
{
    /* control: pass, unevaluated, fail; treatment: pass, errored, pass */
    static const int c_pass[] = {1, -1, 0}, t_pass[] = {1, -2, 1};
    static const int64_t tok[] = {10, 10, 10};
    json_t *plan = finished_plan(3, c_pass, tok, t_pass, tok);
    json_t *c = evd_aggregate_variant(plan, EVD_ROLE_CONTROL);
    json_t *t = evd_aggregate_variant(plan, EVD_ROLE_TREATMENT);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "runs")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "evaluated_runs")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "passed")), 1);
    ck_assert(json_real_value(json_object_get(c, "pass_rate")) == 0.5);
    ck_assert(json_real_value(json_object_get(c, "median_score")) == 0.5);
    ck_assert_int_eq(json_integer_value(json_object_get(t, "evaluated_runs")), 2);
    ck_assert(json_real_value(json_object_get(t, "pass_rate")) == 1.0);
    ck_assert_int_eq(json_integer_value(json_object_get(t, "benchmarked_runs")), 3);
    /* a failed treatment run is not evaluated: not eligible */
    ck_assert_int_eq(evd_aggregate_eligible(c, t, true), 0);
    json_decref(c);
    json_decref(t);
    json_decref(plan);
}
END_TEST

START_TEST(nothing_evaluated_gives_zero_pass_rate_and_no_medians)
{
    json_t *plan = evd_plan_build("eval_1", 2, EVD_ORDER_CONTROL_FIRST);
    json_t *c = evd_aggregate_variant(plan, EVD_ROLE_CONTROL);
    ck_assert_str_eq(evd_dt_dump(c), "{\"benchmarked_runs\":0,\"evaluated_runs\":0,"
                                     "\"pass_rate\":0.0,\"passed\":0,\"runs\":0}");
    json_t *d = evd_aggregate_delta(c, c);
    ck_assert_str_eq(evd_dt_dump(d), "{\"pass_rate\":0.0}");
    json_decref(d);
    json_decref(c);
    json_decref(plan);
}
END_TEST

struct eligible_case {
    int c_pass[2];
    int t_pass[2];
    bool with_evaluator;
    int eligible;
};

static const struct eligible_case ELIGIBLE[] = {
    {{1, 1}, {1, 1}, true, 1},   {{0, 0}, {1, 1}, true, 1},
    {{1, 1}, {1, 0}, true, 0},   /* a treatment that fails one of two runs */
    {{0, 0}, {-1, -1}, true, 0}, /* null outputs: nothing evaluated */
    {{0, 0}, {1, -2}, true, 0},  /* a failed run has passed null */
    {{1, 1}, {1, 1}, false, -1}, /* no evaluator: no eligibility */
};

START_TEST(eligibility)
{
    const struct eligible_case *c = &ELIGIBLE[_i];
    static const int64_t tok[] = {10, 10};
    json_t *plan = finished_plan(2, c->c_pass, tok, c->t_pass, tok);
    json_t *ca = evd_aggregate_variant(plan, EVD_ROLE_CONTROL);
    json_t *ta = evd_aggregate_variant(plan, EVD_ROLE_TREATMENT);
    ck_assert_int_eq(evd_aggregate_eligible(ca, ta, c->with_evaluator), c->eligible);
    json_decref(ca);
    json_decref(ta);
    json_decref(plan);
}
END_TEST

START_TEST(treatment_with_no_terminal_run_is_not_eligible)
{
    json_t *plan = evd_plan_build("eval_1", 1, EVD_ORDER_CONTROL_FIRST);
    evd_dt_finish_run(json_array_get(plan, 0), 0, 1, 1);
    json_t *ca = evd_aggregate_variant(plan, EVD_ROLE_CONTROL);
    json_t *ta = evd_aggregate_variant(plan, EVD_ROLE_TREATMENT);
    ck_assert_int_eq(evd_aggregate_eligible(ca, ta, true), 0);
    json_decref(ca);
    json_decref(ta);
    json_decref(plan);
}
END_TEST

START_TEST(order_sensitivity)
{
    /* control-first, runs 2: C1 first, T1 second, T2 first, C2 second */
    static const int64_t tok[] = {1, 1};
    static const int c_pass[] = {1, 0}, t_pass[] = {1, 1};
    json_t *plan = finished_plan(2, c_pass, tok, t_pass, tok);
    json_t *o = evd_aggregate_order_sensitivity(plan);
    json_t *want =
        evd_dt_parse("{\"control\":{\"differs\":true,\"first_passed\":1,\"first_runs\":1,"
                     "\"second_passed\":0,\"second_runs\":1},\"detected\":true,"
                     "\"treatment\":{\"differs\":false,\"first_passed\":1,\"first_runs\":1,"
                     "\"second_passed\":1,\"second_runs\":1}}");
    ck_assert_msg(json_equal(o, want), "got %s", evd_dt_dump(o));
    json_decref(want);
    json_decref(o);
    json_decref(plan);

    /* control C1, C3 run first and C2 second: first 1/2 vs second 1/1 differs */
    static const int c3[] = {1, 1, 0}, t3[] = {1, 1, 1};
    static const int64_t tok4[] = {1, 1, 1, 1};
    plan = finished_plan(3, c3, tok4, t3, tok4);
    o = evd_aggregate_order_sensitivity(plan);
    ck_assert(json_is_true(json_object_get(json_object_get(o, "control"), "differs")));
    ck_assert(json_is_false(json_object_get(json_object_get(o, "treatment"), "differs")));
    json_decref(o);
    json_decref(plan);

    /* equal rates compared exactly: first 1/2 and second 1/2 do not differ */
    static const int c4[] = {1, 1, 0, 0}, t4[] = {1, 1, 1, 1};
    plan = finished_plan(4, c4, tok4, t4, tok4);
    o = evd_aggregate_order_sensitivity(plan);
    ck_assert_str_eq(evd_dt_dump(json_object_get(o, "control")),
                     "{\"differs\":false,\"first_passed\":1,\"first_runs\":2,"
                     "\"second_passed\":1,\"second_runs\":2}");
    ck_assert(json_is_false(json_object_get(o, "detected")));
    json_decref(o);
    json_decref(plan);

    plan = evd_plan_build("eval_1", 2, EVD_ORDER_CONTROL_FIRST);
    o = evd_aggregate_order_sensitivity(plan);
    ck_assert(json_is_false(json_object_get(o, "detected")));
    json_decref(o);
    json_decref(plan);
}
END_TEST

static struct evd_eval_record record(const json_t *req, const json_t *runs)
{
    return (struct evd_eval_record){
        .evaluation_id = "eval_1",
        .status = EVD_EVAL_RUNNING,
        .request = req,
        .runs = runs,
        .created_at = 1000,
        .updated_at = 2000,
    };
}

START_TEST(status_counts_and_active_run)
{
    json_t *req = evd_dt_normalized(2, EVD_ORDER_CONTROL_FIRST, true);
    json_t *plan = evd_plan_build("eval_1", 2, EVD_ORDER_CONTROL_FIRST);
    evd_dt_finish_run(json_array_get(plan, 0), 1, 10, 5);  /* passed */
    evd_dt_finish_run(json_array_get(plan, 1), -1, 10, 5); /* completed, unevaluated */
    evd_dt_finish_run(json_array_get(plan, 2), 0, 10, 5);  /* did not pass */
    evd_run_mark_running(json_array_get(plan, 3), 1500);
    evd_run_set_turn_id(json_array_get(plan, 3), "turn_9");
    struct evd_eval_record rec = record(req, plan);
    json_t *s = evd_report_status(&rec);
    json_t *want =
        evd_dt_parse("{\"evaluation_id\":\"eval_1\",\"status\":\"running\",\"total_runs\":4,"
                     "\"terminal_runs\":3,\"passed_runs\":1,\"failed_runs\":1,"
                     "\"active\":{\"run_id\":\"control-2\",\"role\":\"control\",\"iteration\":2,"
                     "\"session_id\":\"eval_1_c_2\",\"turn_id\":\"turn_9\",\"started_at\":1500},"
                     "\"created_at\":1000,\"updated_at\":2000}");
    ck_assert_msg(json_equal(s, want), "got %s", evd_dt_dump(s));
    json_decref(want);
    json_decref(s);

    rec.status = EVD_EVAL_CANCELLED;
    rec.completed_at = 3000;
    rec.error = "stored request could not be decoded";
    evd_runs_cancel_open(plan, 3000);
    s = evd_report_status(&rec);
    ck_assert_ptr_null(json_object_get(s, "active"));
    ck_assert_int_eq(json_integer_value(json_object_get(s, "completed_at")), 3000);
    ck_assert_str_eq(json_string_value(json_object_get(s, "error")),
                     "stored request could not be decoded");
    ck_assert_int_eq(json_integer_value(json_object_get(s, "terminal_runs")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "failed_runs")), 1);
    json_decref(s);
    json_decref(plan);
    json_decref(req);
}
END_TEST

START_TEST(completed_but_unevaluated_run_is_neither_passed_nor_failed)
{
    json_t *plan = evd_plan_build("eval_1", 1, EVD_ORDER_CONTROL_FIRST);
    evd_dt_finish_run(json_array_get(plan, 0), -1, 10, 5);
    struct evd_run_counts c;
    evd_report_count_runs(plan, &c);
    ck_assert_uint_eq(c.total, 2);
    ck_assert_uint_eq(c.terminal, 1);
    ck_assert_uint_eq(c.passed, 0);
    ck_assert_uint_eq(c.failed, 0);
    json_decref(plan);
}
END_TEST

START_TEST(summary_projection)
{
    json_t *req = evd_dt_normalized(1, EVD_ORDER_CONTROL_FIRST, false);
    json_t *plan = evd_plan_build("eval_1", 1, EVD_ORDER_CONTROL_FIRST);
    json_t *out = json_string("OK");
    evd_run_mark_running(json_array_get(plan, 0), 10);
    evd_run_record_outcome(json_array_get(plan, 0), out, NULL, 5, 15);
    json_t *ev = evd_dt_parse("{\"passed\":true}");
    struct evd_limits l;
    evd_limits_defaults(&l);
    evd_run_complete(json_array_get(plan, 0), &l, ev);
    struct evd_eval_record rec = record(req, plan);
    json_t *s = evd_report_summary(&rec);
    json_t *want = evd_dt_parse(
        "{\"evaluation_id\":\"eval_1\",\"status\":\"running\",\"dimension\":\"prompt\","
        "\"model\":\"gpt-test\",\"provider\":\"openai\",\"control_label\":\"baseline\","
        "\"treatment_label\":\"candidate\",\"total_runs\":2,\"terminal_runs\":1,"
        "\"passed_runs\":1,\"failed_runs\":0,\"created_at\":1000,\"updated_at\":2000}");
    ck_assert_msg(json_equal(s, want), "got %s", evd_dt_dump(s));
    json_decref(s);

    /* list queries may pass counts and eligibility instead of runs and report */
    struct evd_run_counts counts = {.total = 2, .terminal = 2, .passed = 2, .failed = 0};
    rec.runs = NULL;
    rec.counts = &counts;
    rec.has_eligible = true;
    rec.eligible = true;
    s = evd_report_summary(&rec);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "terminal_runs")), 2);
    ck_assert(json_is_true(json_object_get(s, "eligible")));
    json_decref(s);
    json_decref(want);
    json_decref(ev);
    json_decref(out);
    json_decref(plan);
    json_decref(req);
}
END_TEST

START_TEST(progress_counts_terminal_runs_only)
{
    json_t *req = evd_dt_normalized(2, EVD_ORDER_CONTROL_FIRST, true);
    json_t *plan = evd_plan_build("eval_1", 2, EVD_ORDER_CONTROL_FIRST);
    evd_dt_finish_run(json_array_get(plan, 0), 1, 40, 5);
    evd_run_mark_running(json_array_get(plan, 1), 50);
    json_t *p = evd_report_progress(req, plan);
    json_t *ca = json_object_get(p, "control_aggregate");
    json_t *ta = json_object_get(p, "treatment_aggregate");
    ck_assert_int_eq(json_integer_value(json_object_get(ca, "runs")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(ta, "runs")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(ca, "median_total_tokens")), 40);
    ck_assert_ptr_null(json_object_get(ta, "median_total_tokens"));
    ck_assert_ptr_null(json_object_get(json_object_get(p, "delta"), "median_total_tokens"));
    ck_assert(json_real_value(json_object_get(json_object_get(p, "delta"), "pass_rate")) == -1.0);
    ck_assert_uint_eq(json_array_size(json_object_get(p, "runs")), 4);
    ck_assert_str_eq(
        json_string_value(json_array_get(json_object_get(p, "effective_execution_order"), 2)),
        "3:treatment:2");
    ck_assert_ptr_nonnull(json_object_get(p, "order_sensitivity"));
    json_decref(p);
    json_decref(plan);
    json_decref(req);
}
END_TEST

START_TEST(report_and_result)
{
    json_t *src = evd_dt_normalized(2, EVD_ORDER_CONTROL_FIRST, true);
    json_t *req = evd_request_rerun(src, "eval_0", true);
    json_t *plan = evd_plan_build("eval_1", 2, EVD_ORDER_TREATMENT_FIRST);
    static const int pass[] = {1, 1, 1, 1};
    for (size_t i = 0; i < 4; i++)
        evd_dt_finish_run(json_array_get(plan, i), pass[i], 10, 5);
    struct evd_eval_record rec = record(req, plan);
    rec.status = EVD_EVAL_COMPLETED;
    rec.completed_at = 5000;

    json_t *r = evd_report_build(&rec);
    ck_assert_str_eq(json_string_value(json_object_get(r, "schema_version")), "1");
    ck_assert_str_eq(json_string_value(json_object_get(r, "evaluation_id")), "eval_1");
    ck_assert_str_eq(json_string_value(json_object_get(r, "source_evaluation_id")), "eval_0");
    ck_assert_str_eq(json_string_value(json_object_get(r, "execution_order_policy")),
                     "balanced_treatment_first");
    ck_assert(json_is_true(json_object_get(r, "eligible")));
    ck_assert_int_eq(evd_report_eligible(r), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(r, "created_at")), 1000);
    ck_assert_int_eq(json_integer_value(json_object_get(r, "completed_at")), 5000);
    ck_assert(json_equal(json_object_get(r, "limits"), json_object_get(req, "limits")));
    ck_assert(json_equal(json_object_get(r, "model"), json_object_get(req, "model")));
    char hex[65];
    evd_sha256_hex("Return exactly OK.", 18, hex);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(r, "treatment"), "prompt_sha256")), hex);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(r, "evaluator"), "function_id")),
        "eval::assert::exact");
    ck_assert_ptr_nonnull(json_object_get(json_object_get(r, "shared_artifacts"), "output_sha256"));

    json_t *res = evd_report_result(&rec);
    ck_assert_ptr_null(json_object_get(res, "report"));
    ck_assert_str_eq(json_string_value(json_object_get(res, "status")), "completed");
    ck_assert(json_equal(json_object_get(res, "request"), req));
    json_decref(res);
    rec.report = r;
    res = evd_report_result(&rec);
    ck_assert(json_equal(json_object_get(res, "report"), r));
    json_decref(res);

    /* without an evaluator the report has no eligibility and no evaluator artifact */
    json_object_del(req, "evaluator");
    rec.report = NULL;
    json_t *r2 = evd_report_build(&rec);
    ck_assert_ptr_null(json_object_get(r2, "eligible"));
    ck_assert_ptr_null(json_object_get(r2, "evaluator"));
    ck_assert_int_eq(evd_report_eligible(r2), -1);
    json_decref(r2);
    json_decref(r);
    json_decref(plan);
    json_decref(req);
    json_decref(src);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_report");
    TCase *agg = tcase_create("aggregates");
    tcase_add_loop_test(agg, integer_median, 0, sizeof(U64S) / sizeof(U64S[0]));
    tcase_add_test(agg, real_median);
    tcase_add_test(agg, delta_of_median_total_tokens);
    tcase_add_test(agg, delta_is_absent_when_either_side_is);
    tcase_add_test(agg, pass_rate_counts_evaluated_runs_only);
    tcase_add_test(agg, nothing_evaluated_gives_zero_pass_rate_and_no_medians);
    tcase_add_loop_test(agg, eligibility, 0, sizeof(ELIGIBLE) / sizeof(ELIGIBLE[0]));
    tcase_add_test(agg, treatment_with_no_terminal_run_is_not_eligible);
    tcase_add_test(agg, order_sensitivity);
    suite_add_tcase(s, agg);
    TCase *rep = tcase_create("projections");
    tcase_add_test(rep, status_counts_and_active_run);
    tcase_add_test(rep, completed_but_unevaluated_run_is_neither_passed_nor_failed);
    tcase_add_test(rep, summary_projection);
    tcase_add_test(rep, progress_counts_terminal_runs_only);
    tcase_add_test(rep, report_and_result);
    suite_add_tcase(s, rep);
    return evd_test_run_suite(s);
}
