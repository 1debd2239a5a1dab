/*
 * Unit tests for domain/limits.h, domain/metrics.h and domain/run.h: limit defaults
 * and post-hoc failures, the per-run benchmark, and the run transitions the engine
 * applies (complete with and without evaluation, fail, cancel).
 */
#include <check.h>
#include <string.h>

#include "domain/limits.h"
#include "domain/metrics.h"
#include "domain/request.h"
#include "domain/run.h"
#include "tests/support/domain_fixtures.h"
#include "tests/support/testutil.h"

START_TEST(limit_defaults)
{
    struct evd_limits l;
    struct evd_err err;
    ck_assert_int_eq(evd_limits_decode(NULL, &l, &err), EVD_OK);
    ck_assert_uint_eq(l.invocation_timeout_seconds, 120);
    ck_assert_uint_eq(l.scenario_timeout_seconds, 600);
    ck_assert_uint_eq(l.max_turns, 1000);
    ck_assert_uint_eq(l.max_output_tokens_per_call, 8192);
    ck_assert(!l.has_max_total_tokens && !l.has_max_cost_usd);
    ck_assert(!l.has_max_function_call_errors && !l.has_max_error_spans);
    ck_assert_int_eq(evd_limits_validate(&l, &err), EVD_OK);
}
END_TEST

struct failure_case {
    const char *limits;
    /* metrics: input, output (-1 = absent), cost (< 0 = absent), errors, error spans (-1 = no
     * traces) */
    int64_t in, out;
    double cost;
    int64_t fn_errors, error_spans;
    const char *failures; /* expected JSON array */
};

static const struct failure_case FAILURES[] = {
    {"{}", 10, 20, 0.5, 7, 9, "[]"},
    {"{\"evaluation\":{\"max_function_call_errors\":0}}", 10, 20, 0.5, 3, 0,
     "[{\"phase\":\"limit\",\"message\":\"function call errors 3 exceeded limit 0\"}]"},
    {"{\"evaluation\":{\"max_function_call_errors\":3}}", 10, 20, 0.5, 3, 0, "[]"},
    {"{\"execution\":{\"max_total_tokens\":100}}", 60, 50, 0.5, 0, 0,
     "[{\"phase\":\"limit\",\"message\":\"total tokens 110 exceeded limit 100\"}]"},
    {"{\"execution\":{\"max_total_tokens\":110}}", 60, 50, 0.5, 0, 0, "[]"},
    {"{\"execution\":{\"max_total_tokens\":100}}", 60, -1, 0.5, 0, 0,
     "[{\"phase\":\"collect\",\"function_id\":\"harness::metrics\",\"message\":"
     "\"total-token validation requires input_tokens and output_tokens\"}]"},
    {"{\"execution\":{\"max_cost_usd\":0.01}}", 1, 1, 0.0123456, 0, 0,
     "[{\"phase\":\"limit\",\"message\":\"cost $0.012346 exceeded limit $0.010000\"}]"},
    {"{\"execution\":{\"max_cost_usd\":0.5}}", 1, 1, 0.5, 0, 0, "[]"},
    {"{\"execution\":{\"max_cost_usd\":0.5}}", 1, 1, -1, 0, 0,
     "[{\"phase\":\"collect\",\"function_id\":\"harness::metrics\",\"message\":"
     "\"cost validation requires cost_usd from every model generation\"}]"},
    {"{\"evaluation\":{\"max_error_spans\":0}}", 1, 1, 0.1, 0, 2,
     "[{\"phase\":\"limit\",\"message\":\"error spans 2 exceeded limit 0\"}]"},
    {"{\"evaluation\":{\"max_error_spans\":0}}", 1, 1, 0.1, 0, -1,
     "[{\"phase\":\"collect\",\"function_id\":\"harness::metrics\",\"message\":"
     "\"error-span validation requires in-memory observability metrics\"}]"},
    {"{\"execution\":{\"max_total_tokens\":1,\"max_cost_usd\":0},"
     "\"evaluation\":{\"max_function_call_errors\":0,\"max_error_spans\":0}}",
     5, 5, 1.0, 1, 1,
     "[{\"phase\":\"limit\",\"message\":\"total tokens 10 exceeded limit 1\"},"
     "{\"phase\":\"limit\",\"message\":\"cost $1.000000 exceeded limit $0.000000\"},"
     "{\"phase\":\"limit\",\"message\":\"function call errors 1 exceeded limit 0\"},"
     "{\"phase\":\"limit\",\"message\":\"error spans 1 exceeded limit 0\"}]"},
};

START_TEST(limit_failures_from_metrics)
{
    const struct failure_case *c = &FAILURES[_i];
    json_t *lj = evd_dt_parse(c->limits);
    struct evd_limits l;
    struct evd_err err;
    ck_assert_int_eq(evd_limits_decode(lj, &l, &err), EVD_OK);
    json_t *m =
        evd_dt_metrics("s", true, 3, 5, c->fn_errors, c->in, c->out, c->cost, c->error_spans);
    json_t *f = evd_limits_failures(&l, m);
    json_t *want = evd_dt_parse(c->failures);
    ck_assert_msg(json_equal(f, want), "case %d: got %s", _i, evd_dt_dump(f));
    json_decref(want);
    json_decref(f);
    json_decref(m);
    json_decref(lj);
}
END_TEST

START_TEST(limits_json_round_trips)
{
    json_t *lj = evd_dt_parse("{\"execution\":{\"max_cost_usd\":1,\"max_turns\":7},"
                              "\"evaluation\":{\"max_error_spans\":2}}");
    struct evd_limits l, again;
    struct evd_err err;
    ck_assert_int_eq(evd_limits_decode(lj, &l, &err), EVD_OK);
    json_t *n = evd_limits_to_json(&l);
    ck_assert(json_is_real(json_object_get(json_object_get(n, "execution"), "max_cost_usd")));
    ck_assert_int_eq(evd_limits_decode(n, &again, &err), EVD_OK);
    ck_assert_mem_eq(&l, &again, sizeof(l));
    json_decref(n);
    json_decref(lj);
}
END_TEST

START_TEST(benchmark_from_complete_metrics)
{
    json_t *m = evd_dt_metrics("s", true, 4, 3, 1, 100, 20, 0.125, 2);
    json_t *b = NULL;
    ck_assert_int_eq(evd_metrics_benchmark(m, 1234, &b), EVD_OK);
    json_t *want =
        evd_dt_parse("{\"wall_time_ms\":1234,\"sessions\":1,\"turns\":4,\"function_calls\":3,"
                     "\"function_call_errors\":1,\"input_tokens\":100,\"output_tokens\":20,"
                     "\"total_tokens\":120,\"cost_usd\":0.125,\"trace_count\":1,\"span_count\":9,"
                     "\"error_span_count\":2,\"trace_duration_ms\":1500}");
    ck_assert_msg(json_equal(b, want), "got %s", evd_dt_dump(b));
    json_decref(want);
    json_decref(b);
    json_decref(m);

    /* total_tokens only when both counts are present; no traces, no trace fields */
    m = evd_dt_metrics("s", true, 1, 0, 0, 100, -1, -1, -1);
    ck_assert_int_eq(evd_metrics_benchmark(m, 5, &b), EVD_OK);
    ck_assert_ptr_null(json_object_get(b, "total_tokens"));
    ck_assert_ptr_null(json_object_get(b, "output_tokens"));
    ck_assert_ptr_null(json_object_get(b, "cost_usd"));
    ck_assert_ptr_null(json_object_get(b, "trace_count"));
    ck_assert_int_eq(json_integer_value(json_object_get(b, "input_tokens")), 100);
    json_decref(b);
    json_decref(m);

    /* incomplete metrics give no benchmark */
    m = evd_dt_metrics("s", false, 1, 0, 0, 1, 1, 0.1, 0);
    ck_assert_int_eq(evd_metrics_benchmark(m, 5, &b), EVD_OK);
    ck_assert_ptr_null(b);
    json_decref(m);
    ck_assert_int_eq(evd_metrics_benchmark(NULL, 5, &b), EVD_OK);
    ck_assert_ptr_null(b);
}
END_TEST

static json_t *first_run(void)
{
    json_t *plan = evd_plan_build("eval_1", 1, EVD_ORDER_CONTROL_FIRST);
    json_t *run = json_incref(json_array_get(plan, 0));
    json_decref(plan);
    return run;
}

START_TEST(completed_and_evaluated_run)
{
    json_t *run = first_run();
    struct evd_limits l;
    evd_limits_defaults(&l);
    json_t *req = evd_dt_normalized(1, EVD_ORDER_CONTROL_FIRST, true);
    json_t *m = evd_dt_metrics("eval_1_c_1", true, 2, 0, 0, 10, 5, 0.01, 0);
    json_t *out = json_string("OK");
    ck_assert_int_eq(evd_run_mark_running(run, 1000), 0);
    ck_assert_int_eq(evd_run_set_turn_id(run, "turn_1"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(run, "status")), "running");
    ck_assert_int_eq(evd_run_record_outcome(run, out, m, 250, 1250), 0);
    ck_assert(evd_run_needs_evaluation(req, run));
    json_t *ev = evd_dt_parse("{\"passed\":true,\"score\":1.0}");
    ck_assert_int_eq(evd_run_complete(run, &l, ev), 0);
    ck_assert_str_eq(json_string_value(json_object_get(run, "status")), "completed");
    ck_assert_int_eq(evd_run_passed(run), 1);
    ck_assert(json_equal(json_object_get(run, "evaluation"), ev));
    ck_assert_int_eq(json_integer_value(json_object_get(run, "completed_at")), 1250);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(run, "benchmark"), "wall_time_ms")),
        250);
    ck_assert_uint_eq(json_array_size(json_object_get(run, "failures")), 0);
    json_decref(ev);
    json_decref(out);
    json_decref(m);
    json_decref(req);
    json_decref(run);
}
END_TEST

START_TEST(limit_failure_forces_passed_false)
{
    json_t *run = first_run();
    json_t *lj = evd_dt_parse("{\"evaluation\":{\"max_function_call_errors\":0}}");
    struct evd_limits l;
    evd_limits_decode(lj, &l, NULL);
    json_t *m = evd_dt_metrics("eval_1_c_1", true, 2, 3, 3, 10, 5, 0.01, 0);
    json_t *out = json_string("OK");
    evd_run_mark_running(run, 1000);
    evd_run_record_outcome(run, out, m, 250, 1250);
    json_t *ev = evd_dt_parse("{\"passed\":true,\"score\":1.0}");
    ck_assert_int_eq(evd_run_complete(run, &l, ev), 0);
    ck_assert_int_eq(evd_run_passed(run), 0);
    ck_assert_str_eq(json_string_value(json_object_get(run, "status")), "completed");
    ck_assert_str_eq(evd_dt_dump(json_object_get(run, "failures")),
                     "[{\"message\":\"function call errors 3 exceeded limit 0\","
                     "\"phase\":\"limit\"}]");
    json_decref(ev);
    json_decref(out);
    json_decref(m);
    json_decref(lj);
    json_decref(run);
}
END_TEST

START_TEST(completed_but_unevaluated_run_records_limit_failures)
{
    json_t *run = first_run();
    json_t *lj = evd_dt_parse("{\"evaluation\":{\"max_function_call_errors\":0}}");
    struct evd_limits l;
    evd_limits_decode(lj, &l, NULL);
    json_t *m = evd_dt_metrics("eval_1_c_1", true, 2, 3, 3, 10, 5, 0.01, 0);
    json_t *req = evd_dt_normalized(1, EVD_ORDER_CONTROL_FIRST, false);
    evd_run_mark_running(run, 1000);
    evd_run_record_outcome(run, NULL, m, 250, 1250); /* a null output */
    ck_assert(!evd_run_needs_evaluation(req, run));
    ck_assert_int_eq(evd_run_complete(run, &l, NULL), 0);
    ck_assert_int_eq(evd_run_passed(run), -1);
    ck_assert(json_is_null(json_object_get(run, "passed")));
    ck_assert(json_is_null(json_object_get(run, "output")));
    ck_assert_uint_eq(json_array_size(json_object_get(run, "failures")), 1);
    json_decref(req);
    json_decref(m);
    json_decref(lj);
    json_decref(run);
}
END_TEST

START_TEST(evaluator_failure_fails_the_run_and_keeps_metrics)
{
    json_t *run = first_run();
    json_t *m = evd_dt_metrics("eval_1_c_1", true, 2, 0, 0, 10, 5, 0.01, 0);
    json_t *out = json_string("OK");
    evd_run_mark_running(run, 1000);
    evd_run_record_outcome(run, out, m, 250, 1250);
    ck_assert_int_eq(evd_run_fail(run, EVD_PHASE_EVALUATE, "my::judge",
                                  "evaluator score must be a finite number between 0 and 1", 1300),
                     0);
    ck_assert_str_eq(json_string_value(json_object_get(run, "status")), "failed");
    ck_assert(json_is_null(json_object_get(run, "passed")));
    ck_assert_int_eq(json_integer_value(json_object_get(run, "completed_at")), 1300);
    ck_assert_ptr_nonnull(json_object_get(run, "metrics"));
    ck_assert_ptr_nonnull(json_object_get(run, "benchmark"));
    ck_assert_str_eq(evd_dt_dump(json_object_get(run, "failures")),
                     "[{\"function_id\":\"my::judge\",\"message\":\"evaluator score must be a "
                     "finite number between 0 and 1\",\"phase\":\"evaluate\"}]");
    json_decref(out);
    json_decref(m);
    json_decref(run);
}
END_TEST

START_TEST(cancel_closes_every_open_run)
{
    json_t *plan = evd_plan_build("eval_1", 2, EVD_ORDER_CONTROL_FIRST);
    evd_dt_finish_run(json_array_get(plan, 0), 1, 10, 100);
    evd_run_mark_running(json_array_get(plan, 1), 2000);
    ck_assert_int_eq(evd_runs_cancel_open(plan, 3000), 0);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(plan, 0), "status")),
                     "completed");
    for (size_t i = 1; i < 4; i++) {
        json_t *run = json_array_get(plan, i);
        ck_assert_str_eq(json_string_value(json_object_get(run, "status")), "cancelled");
        ck_assert_int_eq(json_integer_value(json_object_get(run, "completed_at")), 3000);
        ck_assert_str_eq(evd_dt_dump(json_object_get(run, "failures")),
                         "[{\"message\":\"evaluation cancelled\",\"phase\":\"cancel\"}]");
    }
    json_decref(plan);
}
END_TEST

START_TEST(failure_record_and_projection)
{
    json_t *f = evd_run_failure_new(EVD_PHASE_SEND, NULL, "provider answered 401");
    ck_assert_str_eq(evd_dt_dump(f), "{\"message\":\"provider answered 401\",\"phase\":\"send\"}");
    json_decref(f);
    f = evd_run_failure_new(EVD_PHASE_SETUP, "harness", "run attempts exhausted");
    ck_assert_str_eq(evd_dt_dump(f), "{\"function_id\":\"harness\",\"message\":\"run attempts "
                                     "exhausted\",\"phase\":\"setup\"}");
    json_decref(f);

    json_t *run = first_run();
    json_object_set_new(run, "attempt", json_integer(2));
    json_t *p = evd_run_project(run);
    ck_assert_ptr_null(json_object_get(p, "attempt"));
    ck_assert_str_eq(json_string_value(json_object_get(p, "run_id")), "control-1");
    json_decref(p);
    json_decref(run);
}
END_TEST

START_TEST(evaluator_input_for_a_run)
{
    json_t *run = first_run();
    json_t *out = json_string("OK");
    evd_run_mark_running(run, 1);
    evd_run_record_outcome(run, out, NULL, 5, 6);
    json_t *args = evd_dt_parse("{\"expected\":\"OK\"}");
    json_t *in = evd_run_evaluator_input("eval_1", run, args);
    struct evd_evaluator_input dec;
    struct evd_err err;
    ck_assert_msg(evd_request_evaluator_input(in, &dec, &err) == EVD_OK, "%s", err.msg);
    ck_assert_str_eq(dec.session_id, "eval_1_c_1");
    ck_assert_int_eq(dec.role, EVD_ROLE_CONTROL);
    ck_assert(json_is_false(json_object_get(dec.metrics, "complete")));
    ck_assert(json_equal(dec.arguments, args));
    json_decref(in);
    json_decref(args);
    json_decref(out);
    json_decref(run);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_runs");
    TCase *lim = tcase_create("limits");
    tcase_add_test(lim, limit_defaults);
    tcase_add_loop_test(lim, limit_failures_from_metrics, 0,
                        sizeof(FAILURES) / sizeof(FAILURES[0]));
    tcase_add_test(lim, limits_json_round_trips);
    tcase_add_test(lim, benchmark_from_complete_metrics);
    suite_add_tcase(s, lim);
    TCase *run = tcase_create("runs");
    tcase_add_test(run, completed_and_evaluated_run);
    tcase_add_test(run, limit_failure_forces_passed_false);
    tcase_add_test(run, completed_but_unevaluated_run_records_limit_failures);
    tcase_add_test(run, evaluator_failure_fails_the_run_and_keeps_metrics);
    tcase_add_test(run, cancel_closes_every_open_run);
    tcase_add_test(run, failure_record_and_projection);
    tcase_add_test(run, evaluator_input_for_a_run);
    suite_add_tcase(s, run);
    return evd_test_run_suite(s);
}
