/*
 * Allocation-failure tests of the domain's JSON builders: jansson's allocator fails
 * the n-th allocation for n = 0, 1, 2, ... and every builder must then either report
 * the failure (NULL / EVD_ENOMEM) or return exactly what it returns with memory to
 * spare — never a silently incomplete object. Leaks show under the sanitizer build.
 */
#include <check.h>
#include <stdlib.h>

#include "domain/evaluators.h"
#include "domain/plan.h"
#include "domain/report.h"
#include "domain/request.h"
#include "domain/run.h"
#include "domain/trajectory.h"
#include "tests/support/domain_fixtures.h"
#include "tests/support/testutil.h"

static bool failing;
static size_t budget;

static void *chaos_malloc(size_t n)
{
    if (failing) {
        if (budget == 0)
            return NULL;
        budget--;
    }
    return malloc(n);
}

static void chaos_free(void *p)
{
    free(p);
}

/* One builder under test: returns a new reference or NULL. */
struct fixture {
    json_t *request;
    json_t *runs;
    json_t *body;
};

typedef json_t *(*builder_fn)(const struct fixture *f);

static json_t *build_start(const struct fixture *f)
{
    json_t *n = NULL;
    struct evd_err err;
    enum evd_code rc = evd_request_start(f->body, 100, &n, NULL, &err);
    ck_assert(rc == EVD_OK || rc == EVD_ENOMEM);
    return rc == EVD_OK ? n : NULL;
}

static struct evd_eval_record rec_of(const struct fixture *f)
{
    return (struct evd_eval_record){.evaluation_id = "eval_1",
                                    .status = EVD_EVAL_COMPLETED,
                                    .request = f->request,
                                    .runs = f->runs,
                                    .created_at = 1,
                                    .updated_at = 2,
                                    .completed_at = 3};
}

static json_t *build_report(const struct fixture *f)
{
    struct evd_eval_record rec = rec_of(f);
    return evd_report_build(&rec);
}

static json_t *build_result(const struct fixture *f)
{
    struct evd_eval_record rec = rec_of(f);
    return evd_report_result(&rec);
}

static json_t *build_status(const struct fixture *f)
{
    struct evd_eval_record rec = rec_of(f);
    return evd_report_status(&rec);
}

static json_t *build_summary(const struct fixture *f)
{
    struct evd_eval_record rec = rec_of(f);
    return evd_report_summary(&rec);
}

static json_t *build_plan(const struct fixture *f)
{
    (void)f;
    return evd_plan_build("eval_1", 3, EVD_ORDER_TREATMENT_FIRST);
}

static json_t *build_rerun(const struct fixture *f)
{
    return evd_request_rerun(f->request, "eval_0", true);
}

static json_t *build_verdict(const struct fixture *f)
{
    (void)f;
    json_t *body = NULL, *resp = NULL;
    bool was = failing;
    failing = false;
    body = evd_dt_parse("{\"evaluation_id\":\"e\",\"run_id\":\"r\",\"role\":\"control\","
                        "\"session_id\":\"s\",\"output\":{\"a\":[1,2]},"
                        "\"arguments\":{\"expected\":{\"a\":[2,1]}}}");
    json_object_set_new(body, "metrics", evd_dt_metrics("s", true, 1, 0, 0, 1, 1, 0.5, 0));
    failing = was;
    struct evd_evaluator_input in;
    struct evd_err err;
    ck_assert_int_eq(evd_request_evaluator_input(body, &in, &err), EVD_OK);
    enum evd_code rc = evd_evaluator_run(EVD_EVALUATOR_EXACT, &in, &resp, &err);
    ck_assert(rc == EVD_OK || rc == EVD_ENOMEM);
    failing = false;
    json_decref(body);
    failing = was;
    return resp;
}

/* The trajectory evaluator over a two-entry transcript, unordered with subset arguments. */
static json_t *build_trajectory(const struct fixture *f)
{
    (void)f;
    json_t *body = NULL, *resp = NULL;
    bool was = failing;
    failing = false;
    body = evd_dt_parse(
        "{\"evaluation_id\":\"e\",\"run_id\":\"r\",\"role\":\"control\",\"session_id\":\"s\","
        "\"output\":\"ok\",\"transcript\":[{\"role\":\"user\",\"content\":\"q\"},"
        "{\"role\":\"assistant\",\"content\":\"ok\",\"function_calls\":["
        "{\"name\":\"a\",\"arguments\":{\"x\":1}},{\"name\":\"b\",\"arguments\":{}}]}],"
        "\"arguments\":{\"expected\":[{\"name\":\"b\"},{\"name\":\"a\",\"arguments\":{\"x\":2}}],"
        "\"mode\":\"unordered\",\"match_arguments\":\"subset\"}}");
    json_object_set_new(body, "metrics", evd_dt_metrics("s", true, 1, 0, 0, 1, 1, 0.5, 0));
    failing = was;
    struct evd_evaluator_input in;
    struct evd_err err;
    ck_assert_int_eq(evd_request_evaluator_input(body, &in, &err), EVD_OK);
    enum evd_code rc = evd_evaluator_run(EVD_EVALUATOR_TRAJECTORY, &in, &resp, &err);
    ck_assert(rc == EVD_OK || rc == EVD_ENOMEM);
    failing = false;
    json_decref(body);
    failing = was;
    return resp;
}

/* The transcript an agent turn gives the evaluator input. */
static json_t *build_transcript(const struct fixture *f)
{
    (void)f;
    bool was = failing;
    failing = false;
    json_t *harness = evd_dt_parse(
        "{\"function_calls\":[{\"function_id\":\"a\",\"arguments\":{\"x\":1},\"result\":[1]},"
        "{\"function_id\":\"b\",\"arguments\":{},\"error\":\"boom\"}]}");
    json_t *output = evd_dt_parse("{\"k\":true}");
    failing = was;
    json_t *t = evd_trajectory_transcript(NULL, "q", output, harness);
    failing = false;
    json_decref(harness);
    json_decref(output);
    failing = was;
    return t;
}

/* Completes a copy of a recorded run; the copy is made with memory to spare. */
static json_t *build_completed_run(const struct fixture *f)
{
    bool was = failing;
    failing = false;
    json_t *run = json_deep_copy(json_array_get(f->runs, 0));
    json_t *lj = evd_dt_parse("{\"evaluation\":{\"max_function_call_errors\":0}}");
    json_t *ev = evd_dt_parse("{\"passed\":true,\"score\":1.0}");
    struct evd_limits limits;
    evd_limits_decode(lj, &limits, NULL);
    json_object_del(run, "evaluation");
    json_object_set_new(run, "failures", json_array());
    failing = was;
    int rc = evd_run_complete(run, &limits, ev);
    failing = false;
    json_decref(lj);
    json_decref(ev);
    failing = was;
    if (rc != 0) {
        json_decref(run);
        return NULL;
    }
    return run;
}

static const struct {
    const char *name;
    builder_fn fn;
} BUILDERS[] = {
    {"start", build_start},   {"report", build_report},   {"result", build_result},
    {"status", build_status}, {"summary", build_summary}, {"plan", build_plan},
    {"rerun", build_rerun},   {"verdict", build_verdict}, {"complete", build_completed_run},
    {"trajectory", build_trajectory},
    {"transcript", build_transcript},
};

START_TEST(builders_fail_cleanly)
{
    struct fixture f;
    f.body = evd_dt_start_body();
    f.request = evd_dt_normalized(2, EVD_ORDER_CONTROL_FIRST, true);
    f.runs = evd_plan_build("eval_1", 2, EVD_ORDER_CONTROL_FIRST);
    static const int outcome[] = {1, 0, -1, -2};
    for (size_t i = 0; i < 4; i++)
        evd_dt_finish_run(json_array_get(f.runs, i), outcome[i], 100 * (int64_t)i, 10);
    evd_run_set_turn_id(json_array_get(f.runs, 0), "turn");

    json_t *want = BUILDERS[_i].fn(&f);
    ck_assert_ptr_nonnull(want);
    size_t n;
    for (n = 0; n < 100000; n++) {
        budget = n;
        failing = true;
        json_t *got = BUILDERS[_i].fn(&f);
        failing = false;
        if (got != NULL) {
            ck_assert_msg(json_equal(got, want), "%s: incomplete result after %zu allocations",
                          BUILDERS[_i].name, n);
            json_decref(got);
            break;
        }
    }
    ck_assert_msg(n > 0, "%s allocated nothing", BUILDERS[_i].name);
    json_decref(want);
    json_decref(f.body);
    json_decref(f.request);
    json_decref(f.runs);
}
END_TEST

int main(void)
{
    json_set_alloc_funcs(chaos_malloc, chaos_free);
    Suite *s = suite_create("domain_alloc");
    TCase *tc = tcase_create("chaos");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, builders_fail_cleanly, 0, sizeof(BUILDERS) / sizeof(BUILDERS[0]));
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
