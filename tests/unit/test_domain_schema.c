/*
 * Every object the domain emits validates against the seed schema of its type
 * (../shared/spec/seed/eval-api-reference.json) with the draft-07 validator of
 * schema/jsonschema.h: normalized requests, results (with and without report),
 * statuses, list responses, evaluator inputs and answers, and each sub-definition.
 * Start requests the domain accepts are also valid seed start requests.
 * Prints SKIPPED and passes when ../shared is absent.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/aggregate.h"
#include "domain/artifacts.h"
#include "domain/evaluators.h"
#include "domain/metrics.h"
#include "domain/report.h"
#include "domain/request.h"
#include "domain/run.h"
#include "schema/jsonschema.h"
#include "tests/support/domain_fixtures.h"
#include "tests/support/testutil.h"

#define RANDOM_EVALUATIONS 150

/* Validators built during the run; the wrapping schemas they borrow live alongside. */
struct holder {
    struct evd_jsonschema *v;
    json_t *schema;
};
static struct holder held[64];
static size_t nheld;

static struct evd_jsonschema *compile(json_t *schema_new_ref)
{
    struct evd_err err = {0};
    struct evd_jsonschema *v = evd_jsonschema_new(schema_new_ref, &err);
    ck_assert_msg(v != NULL, "seed schema does not compile: %s", err.msg);
    ck_assert_uint_lt(nheld, sizeof(held) / sizeof(held[0]));
    held[nheld++] = (struct holder){v, schema_new_ref};
    return v;
}

/* The request or response schema of a seed function. */
static struct evd_jsonschema *function_schema(const char *fn, const char *which)
{
    json_t *f = evd_test_seed_function(fn);
    ck_assert_msg(f != NULL, "seed has no function %s", fn);
    return compile(json_incref(json_object_get(f, which)));
}

/* {"$ref":"#/definitions/<def>","definitions":<definitions of fn's schema>}. */
static struct evd_jsonschema *definition(const char *fn, const char *which, const char *def)
{
    json_t *f = evd_test_seed_function(fn);
    json_t *defs = json_object_get(json_object_get(f, which), "definitions");
    ck_assert_msg(json_object_get(defs, def) != NULL, "%s %s has no definition %s", fn, which, def);
    char ref[128];
    snprintf(ref, sizeof(ref), "#/definitions/%s", def);
    return compile(json_pack("{s:s, s:O}", "$ref", ref, "definitions", defs));
}

static void release_all(void)
{
    for (size_t i = 0; i < nheld; i++) {
        evd_jsonschema_free(held[i].v);
        json_decref(held[i].schema);
    }
    nheld = 0;
}

static void assert_valid(const struct evd_jsonschema *v, const json_t *instance, const char *what)
{
    struct evd_schema_error errs[5];
    size_t n = evd_jsonschema_validate(v, instance, errs, 5);
    if (n != 0) {
        for (size_t i = 0; i < n && i < 5; i++)
            fprintf(stderr, "  %s: at \"%s\" (%s): %s\n", what, errs[i].instance_path,
                    errs[i].keyword, errs[i].message);
        fprintf(stderr, "  instance: %s\n", evd_dt_dump(instance));
    }
    ck_assert_msg(n == 0, "%s does not validate against the seed (%zu errors)", what, n);
}

static bool have_seed(void)
{
    if (evd_test_seed_reference() != NULL)
        return true;
    evd_test_skip_note("domain schema conformance");
    return false;
}

START_TEST(validator_catches_a_wrong_object)
{
    if (!have_seed())
        return;
    /* the check is real: a summary without its model does not validate */
    struct evd_jsonschema *v = definition("eval::list", "response_schema", "EvalSummaryV1");
    json_t *bad = evd_dt_parse("{\"evaluation_id\":\"e\",\"status\":\"queued\",\"dimension\":"
                               "\"prompt\",\"total_runs\":2,\"terminal_runs\":0,\"passed_runs\":0,"
                               "\"failed_runs\":0,\"created_at\":1,\"updated_at\":1}");
    ck_assert_uint_gt(evd_jsonschema_validate(v, bad, NULL, 0), 0);
    json_decref(bad);
    release_all();
}
END_TEST

START_TEST(accepted_start_requests_and_normalized_requests)
{
    if (!have_seed())
        return;
    struct evd_jsonschema *start = function_schema("eval::start", "request_schema");
    struct evd_jsonschema *norm =
        definition("eval::result", "response_schema", "NormalizedEvalRequestV1");
    struct evd_jsonschema *limits = definition("eval::result", "response_schema", "EvalLimitsV1");
    uint64_t rng = 5;
    for (int k = 0; k < RANDOM_EVALUATIONS; k++) {
        struct evd_dt_eval e;
        evd_dt_random_eval(&rng, 6, &e);
        assert_valid(norm, e.request, "NormalizedEvalRequestV1");
        assert_valid(start, e.request, "normalized request as EvalStartRequestV1");
        assert_valid(limits, json_object_get(e.request, "limits"), "EvalLimitsV1");
        json_t *rerun = evd_request_rerun(e.request, "eval_src", true);
        assert_valid(norm, rerun, "rerun NormalizedEvalRequestV1");
        json_decref(rerun);
        evd_dt_eval_release(&e);
    }
    json_t *body = evd_dt_start_body();
    assert_valid(start, body, "fixture start request");
    evd_dt_set(body, "concurrency", "3");
    evd_dt_set(body, "_caller_worker_id", "\"w\"");
    assert_valid(start, body, "start request with concurrency");
    json_t *n = NULL;
    ck_assert_int_eq(evd_request_start(body, 100, &n, NULL, NULL), EVD_OK);
    assert_valid(norm, n, "normalized request of a start with concurrency");
    json_decref(n);
    json_decref(body);
    release_all();
}
END_TEST

START_TEST(results_statuses_and_summaries)
{
    if (!have_seed())
        return;
    struct evd_jsonschema *result = function_schema("eval::result", "response_schema");
    struct evd_jsonschema *status = function_schema("eval::status", "response_schema");
    struct evd_jsonschema *list = function_schema("eval::list", "response_schema");
    struct evd_jsonschema *report = definition("eval::result", "response_schema", "EvalReportV1");
    struct evd_jsonschema *progress =
        definition("eval::result", "response_schema", "EvalProgressV1");
    uint64_t rng = 11;
    json_t *summaries = json_array();
    for (int k = 0; k < RANDOM_EVALUATIONS; k++) {
        struct evd_dt_eval e;
        evd_dt_random_eval(&rng, 6, &e);
        struct evd_eval_record rec = {
            .evaluation_id = "eval_0123456789abcdef0123456789abcdef",
            .status = e.cancelled ? EVD_EVAL_CANCELLED : EVD_EVAL_RUNNING,
            .request = e.request,
            .runs = e.runs,
            .created_at = 1700000000000,
            .updated_at = 1700000005000,
        };
        if (k % 7 == 0)
            rec.error = "stored request could not be decoded";
        json_t *p = evd_report_progress(e.request, e.runs);
        assert_valid(progress, p, "EvalProgressV1");
        json_decref(p);

        json_t *r = evd_report_result(&rec);
        assert_valid(result, r, "EvalResultResponseV1 before completion");
        json_decref(r);
        json_t *s = evd_report_status(&rec);
        assert_valid(status, s, "EvalStatusResponseV1");
        json_decref(s);

        rec.status = e.cancelled ? EVD_EVAL_CANCELLED : EVD_EVAL_COMPLETED;
        rec.completed_at = 1700000009000;
        json_t *rep = evd_report_build(&rec);
        assert_valid(report, rep, "EvalReportV1");
        rec.report = rep;
        r = evd_report_result(&rec);
        assert_valid(result, r, "EvalResultResponseV1 with report");
        json_decref(r);
        s = evd_report_status(&rec);
        assert_valid(status, s, "terminal EvalStatusResponseV1");
        json_decref(s);
        json_array_append_new(summaries, evd_report_summary(&rec));
        json_decref(rep);
        evd_dt_eval_release(&e);
    }
    json_t *resp = json_pack("{s:o}", "evaluations", summaries);
    assert_valid(list, resp, "EvalListResponseV1");
    json_decref(resp);
    release_all();
}
END_TEST

START_TEST(run_level_objects)
{
    if (!have_seed())
        return;
    struct evd_jsonschema *run = definition("eval::result", "response_schema", "EvalRunReportV1");
    struct evd_jsonschema *bench = definition("eval::result", "response_schema", "EvalBenchmarkV1");
    struct evd_jsonschema *failure = definition("eval::result", "response_schema", "EvalFailureV1");
    struct evd_jsonschema *agg =
        definition("eval::result", "response_schema", "VariantAggregateV1");
    struct evd_jsonschema *delta =
        definition("eval::result", "response_schema", "AggregateDeltaV1");
    struct evd_jsonschema *order =
        definition("eval::result", "response_schema", "OrderSensitivityV1");
    struct evd_jsonschema *shared =
        definition("eval::result", "response_schema", "SharedArtifactsV1");
    struct evd_jsonschema *variant =
        definition("eval::result", "response_schema", "VariantArtifactV1");
    struct evd_jsonschema *evart =
        definition("eval::result", "response_schema", "EvaluatorArtifactV1");
    struct evd_jsonschema *input = function_schema("eval::assert::exact", "request_schema");
    uint64_t rng = 77;
    for (int k = 0; k < RANDOM_EVALUATIONS; k++) {
        struct evd_dt_eval e;
        evd_dt_random_eval(&rng, 4, &e);
        size_t i;
        json_t *r;
        json_array_foreach(e.runs, i, r)
        {
            json_t *projected = evd_run_project(r);
            assert_valid(run, projected, "EvalRunReportV1");
            json_decref(projected);
            json_t *b = json_object_get(r, "benchmark");
            if (b != NULL)
                assert_valid(bench, b, "EvalBenchmarkV1");
            size_t j;
            json_t *f;
            json_array_foreach(json_object_get(r, "failures"), j, f)
            {
                assert_valid(failure, f, "EvalFailureV1");
            }
            json_t *in = evd_run_evaluator_input(
                "eval_1", r, json_object_get(json_object_get(e.request, "evaluator"), "arguments"));
            assert_valid(input, in, "EvaluatorInputV1");
            json_decref(in);
        }
        json_t *c = evd_aggregate_variant(e.runs, EVD_ROLE_CONTROL);
        json_t *t = evd_aggregate_variant(e.runs, EVD_ROLE_TREATMENT);
        json_t *d = evd_aggregate_delta(c, t);
        json_t *o = evd_aggregate_order_sensitivity(e.runs);
        assert_valid(agg, c, "VariantAggregateV1");
        assert_valid(agg, t, "VariantAggregateV1");
        assert_valid(delta, d, "AggregateDeltaV1");
        assert_valid(order, o, "OrderSensitivityV1");
        json_t *sa = evd_artifacts_shared(e.request);
        json_t *va = evd_artifacts_variant(json_object_get(e.request, "control"));
        assert_valid(shared, sa, "SharedArtifactsV1");
        assert_valid(variant, va, "VariantArtifactV1");
        json_t *ev = json_object_get(e.request, "evaluator");
        if (ev != NULL) {
            json_t *ea = evd_artifacts_evaluator(ev);
            assert_valid(evart, ea, "EvaluatorArtifactV1");
            json_decref(ea);
        }
        json_decref(sa);
        json_decref(va);
        json_decref(c);
        json_decref(t);
        json_decref(d);
        json_decref(o);
        evd_dt_eval_release(&e);
    }
    release_all();
}
END_TEST

START_TEST(evaluator_answers)
{
    if (!have_seed())
        return;
    struct evd_jsonschema *exact = function_schema("eval::assert::exact", "response_schema");
    struct evd_jsonschema *norm =
        function_schema("eval::assert::normalized_text", "response_schema");
    struct evd_jsonschema *input = function_schema("eval::assert::exact", "request_schema");
    static const char *const CASES[][3] = {
        {EVD_EVALUATOR_EXACT, "\"OK\"", "{\"expected\":\"OK\"}"},
        {EVD_EVALUATOR_EXACT, "{\"a\":[1,2]}", "{\"expected\":{\"a\":[2,1]}}"},
        {EVD_EVALUATOR_NORMALIZED_TEXT, "\"  OK! \"", "{\"expected\":\"ok\"}"},
        {EVD_EVALUATOR_NORMALIZED_TEXT, "\"OK !\"", "{\"expected\":\"ok\"}"},
        {EVD_EVALUATOR_NORMALIZED_TEXT, "17", "{\"expected\":\"17\"}"},
    };
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) {
        json_t *body = evd_dt_parse("{\"evaluation_id\":\"e\",\"run_id\":\"control-1\","
                                    "\"role\":\"control\",\"session_id\":\"e_c_1\"}");
        json_object_set_new(body, "output", evd_dt_parse(CASES[i][1]));
        json_object_set_new(body, "arguments", evd_dt_parse(CASES[i][2]));
        json_object_set_new(body, "metrics", evd_dt_metrics("e_c_1", true, 1, 0, 0, 1, 1, 0.5, 0));
        assert_valid(input, body, "EvaluatorInputV1 fixture");
        struct evd_evaluator_input in;
        ck_assert_int_eq(evd_request_evaluator_input(body, &in, NULL), EVD_OK);
        json_t *resp = NULL;
        ck_assert_int_eq(evd_evaluator_run(CASES[i][0], &in, &resp, NULL), EVD_OK);
        assert_valid(strcmp(CASES[i][0], EVD_EVALUATOR_EXACT) == 0 ? exact : norm, resp,
                     "EvaluatorResponseV1");
        json_decref(resp);
        json_decref(body);
    }
    json_t *answer = evd_dt_parse("{\"passed\":false,\"score\":1,\"reason\":null,"
                                  "\"details\":{\"why\":[\"x\"]}}");
    json_t *checked = NULL;
    ck_assert_int_eq(evd_evaluator_check_response(answer, &checked, NULL), EVD_OK);
    assert_valid(exact, checked, "checked EvaluatorResponseV1");
    json_decref(checked);
    json_decref(answer);
    release_all();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_schema");
    TCase *tc = tcase_create("seed");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, validator_catches_a_wrong_object);
    tcase_add_test(tc, accepted_start_requests_and_normalized_requests);
    tcase_add_test(tc, results_statuses_and_summaries);
    tcase_add_test(tc, run_level_objects);
    tcase_add_test(tc, evaluator_answers);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
