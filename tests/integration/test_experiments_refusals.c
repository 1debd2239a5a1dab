/*
 * What a start of an experiment (/v1/experiments) is refused with, and the 404s of unknown
 * ids: the real evald and evald-stub over loopback against a throwaway PostgreSQL per test.
 * Every validation message of the spec with nothing written, a malformed case of a streamed
 * start told where a parse of the whole body finds it, the body limit of the start route
 * (EVALD_MAX_DATASET_BYTES, not 1 MiB), the token, and 404 on every route of an unknown
 * experiment. Experiments that run are in test_experiments.c; the fixture and its script
 * are in tests/support/experiments_fixtures.c.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tests/support/experiments_fixtures.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

/* ---- unknown ids --------------------------------------------------------------------------------
 */

static const char *const UNKNOWN[][2] = {
    {"GET", ""},        {"DELETE", ""},     {"GET", "/cases"},   {"GET", "/runs"},
    {"GET", "/events"}, {"GET", "/export"}, {"POST", "/cancel"},
};

START_TEST(unknown_experiments_are_404)
{
    const char *id = "exp_00000000000000000000000000000000";
    char path[256];
    snprintf(path, sizeof(path), "/v1/experiments/%s%s", id, UNKNOWN[_i][1]);
    struct evd_t_resp r;
    xt_request(UNKNOWN[_i][0], path, NULL, NULL, 0, &r);
    ck_assert_msg(r.status == 404, "%s %s answered %ld: %s", UNKNOWN[_i][0], path, r.status,
                  r.body);
    ck_assert_str_eq(r.content_type, "application/problem+json");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(r.json, "detail")), id));
    evd_t_resp_free(&r);
}
END_TEST

/* ---- refusals -----------------------------------------------------------------------------------
 */

#define BASE_START "{\"dimension\":\"prompt\"," MODEL "," EXACT ","
#define ONE_CASE "\"cases\":[" CASE("q1") "]"

struct refusal {
    const char *ct;
    const char *body;
    long status;
    const char *detail; /* exact; with a leading '~' a substring */
};

static const struct refusal REFUSALS[] = {
    {NULL, BASE_START ARMS "}", 400, "exactly one of dataset_id and cases must be given"},
    {NULL, BASE_START ARMS ",\"dataset_id\":\"DS\"," ONE_CASE "}", 400,
     "exactly one of dataset_id and cases must be given"},
    {NULL, BASE_START "\"control\":{\"prompt\":\"a {{tag}}\"},\"treatments\":[]," ONE_CASE "}", 400,
     "treatments must contain between 1 and 4 variants"},
    {NULL,
     BASE_START "\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"prompt\":\"b\"},{\"prompt\":"
                "\"c\"},{\"prompt\":\"d\"},{\"prompt\":\"e\"},{\"prompt\":\"f\"}]," ONE_CASE "}",
     400, "treatments must contain between 1 and 4 variants"},
    {NULL,
     BASE_START "\"control\":{\"label\":\"x\",\"prompt\":\"a\"},\"treatments\":[{\"label\":"
                "\"x\",\"prompt\":\"b\"}]," ONE_CASE "}",
     400, "variant labels must be unique"},
    /* The control's default label is A. */
    {NULL,
     BASE_START "\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"label\":\"A\",\"prompt\":"
                "\"b\"}]," ONE_CASE "}",
     400, "variant labels must be unique"},
    {NULL,
     BASE_START "\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"prompt\":\"a\"}]," ONE_CASE "}",
     400, "prompt comparison requires different prompts"},
    {NULL,
     BASE_START "\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"prompt\":\"b\"},{\"prompt\":"
                "\"b\"}]," ONE_CASE "}",
     400, "prompt comparison requires different prompts"},
    {NULL,
     BASE_START "\"control\":{\"prompt\":\"a\",\"system_prompt\":\"s\"},\"treatments\":[{"
                "\"prompt\":\"b\",\"system_prompt\":\"t\"}]," ONE_CASE "}",
     400, "prompt comparison requires identical system prompts"},
    {NULL, BASE_START ARMS ",\"repeats\":0," ONE_CASE "}", 400, "repeats must be between 1 and 5"},
    {NULL, BASE_START ARMS ",\"repeats\":6," ONE_CASE "}", 400, "repeats must be between 1 and 5"},
    {NULL, BASE_START ARMS ",\"concurrency\":0," ONE_CASE "}", 400,
     "concurrency must be between 1 and 256"},
    {NULL, BASE_START ARMS ",\"concurrency\":257," ONE_CASE "}", 400,
     "concurrency must be between 1 and 256"},
    {NULL, BASE_START ARMS ",\"analysis\":{\"alpha\":0}," ONE_CASE "}", 400,
     "analysis.alpha must be greater than 0 and less than 0.5"},
    {NULL, BASE_START ARMS ",\"analysis\":{\"alpha\":0.5}," ONE_CASE "}", 400,
     "analysis.alpha must be greater than 0 and less than 0.5"},
    {NULL,
     BASE_START ARMS ",\"analysis\":{\"cluster_by\":\"topic\"},\"cases\":[{\"id\":\"q1\","
                     "\"vars\":{\"tag\":\"q1\",\"question\":\"a\",\"topic\":\"t\"}},{\"vars\":{"
                     "\"tag\":\"q2\",\"question\":\"b\"}}]}",
     400, "case c2: cluster_by variable topic is not defined"},
    {NULL, BASE_START ARMS ",\"cases\":[" CASE("q1") ",{\"id\":\"q2\",\"vars\":{\"tag\":\"q2\"}}]}",
     400, "case q2: template variable question is not defined"},
    /* A variable of an evaluator argument is checked too. */
    {NULL,
     "{\"dimension\":\"prompt\"," MODEL "," ARMS ",\"evaluator\":{\"function_id\":"
     "\"eval::assert::exact\",\"arguments\":{\"expected\":\"{{answer}}\"}}," ONE_CASE "}",
     400, "case q1: template variable answer is not defined"},
    {NULL, BASE_START ARMS ",\"dataset_id\":\"ds_00000000000000000000000000000000\"}", 400,
     "dataset_id names no dataset: ds_00000000000000000000000000000000"},
    /* 16 cases × 2 arms × 2 repeats = 64 > EVALD_MAX_EXPERIMENT_RUNS = 60. */
    {NULL,
     BASE_START ARMS
     ",\"repeats\":2,\"cases\":[" CASE("a") "," CASE("b") "," CASE("c") "," CASE("d") "," CASE("e") "," CASE("f") "," CASE("g") "," CASE(
         "h") "," CASE("i") "," CASE("j") "," CASE("k") "," CASE("l") "," CASE("m") "," CASE("n") "," CASE("o") "," CASE("p") "]}",
     400, "an experiment may plan at most 60 runs (cases × arms × repeats = 64)"},
    {NULL, BASE_START ARMS ",\"cases\":[{\"vars\":3}]}", 400, "~vars must be an object"},
    {NULL, "{\"name\":", 400,
     "malformed JSON: unexpected token near end of file at line 1 column 8"},
    {NULL, "[1]", 400, "request body must be a JSON object"},
    {NULL, " \n ", 400, "request body must be a JSON object"},
    /* The request's fields are refused before its cases, as a whole parse would. */
    {NULL, BASE_START ARMS ",\"cases\":[{\"vars\":3}],\"repeats\":9}", 400,
     "repeats must be between 1 and 5"},
    /* The first case refused is told, by its index. */
    {NULL, BASE_START ARMS ",\"cases\":[" CASE("q1") ",{\"vars\":[]},{\"vars\":3}]}", 400,
     "~cases[1]: vars must be an object"},
    {NULL, BASE_START ARMS ",\"cases\":[]}", 400, "cases must contain between 1 and 50 cases"},
    {NULL, BASE_START ARMS ",\"cases\":[" CASE("q1") ",]}", 400, "~malformed JSON: "},
    {NULL, BASE_START ARMS ",\"cases\":[" CASE("q1") "],\"cases\":[" CASE("q2") "]}", 400,
     "~malformed JSON: duplicate object key"},
    {"text/plain", BASE_START ARMS "," ONE_CASE "}", 415, "request body must be application/json"},
    /* Sequential experiments and budgets (../shared/spec/sequential.md, "Request"). */
    {NULL, BASE_START ARMS "," ONE_CASE ",\"stopping\":{\"rule\":\"early\"}}", 400,
     "stopping.rule must be fixed or anytime"},
    {NULL, BASE_START ARMS "," ONE_CASE ",\"stopping\":{\"rule\":\"anytime\",\"min_cases\":1}}",
     400, "stopping.min_cases must be between 2 and 100000"},
    {NULL, BASE_START ARMS "," ONE_CASE ",\"stopping\":{\"min_cases\":100001}}", 400,
     "stopping.min_cases must be between 2 and 100000"},
    {NULL, BASE_START ARMS "," ONE_CASE ",\"stopping\":{\"seed\":-1}}", 400,
     "stopping.seed must be a non-negative integer"},
    {NULL, BASE_START ARMS "," ONE_CASE ",\"stopping\":{\"seed\":1.5}}", 400,
     "stopping.seed must be a non-negative integer"},
    {NULL, BASE_START ARMS "," ONE_CASE ",\"stopping\":{\"after\":3}}", 400,
     "stopping.after is not a known field"},
    {NULL, BASE_START ARMS "," ONE_CASE ",\"budget\":{\"max_calls\":0}}", 400,
     "budget.max_calls must be a positive integer"},
    {NULL, BASE_START ARMS "," ONE_CASE ",\"budget\":{\"max_tokens\":\"many\"}}", 400,
     "budget.max_tokens must be a positive integer"},
    {NULL, BASE_START ARMS "," ONE_CASE ",\"budget\":{\"max_cost_usd\":-2}}", 400,
     "budget.max_cost_usd must be a positive number"},
    {NULL, BASE_START ARMS "," ONE_CASE ",\"budget\":{\"max_cost_usd\":5}}", 400,
     "budget.max_cost_usd needs a price for model stub-model"},
    {NULL, BASE_START ARMS "," ONE_CASE ",\"budget\":{\"max_runs\":5}}", 400,
     "budget.max_runs is not a known field"},
    {NULL, BASE_START ARMS "," ONE_CASE ",\"plan\":{\"effect\":2}}", 400,
     "plan.effect must be between 0 and 1"},
    {NULL, BASE_START ARMS "," ONE_CASE ",\"plan\":{\"sd\":0}}", 400,
     "plan.sd must be a positive number"},
};

START_TEST(refusals_name_the_field_and_write_nothing)
{
    const struct refusal *t = &REFUSALS[_i];
    /* One dataset exists, so that dataset_id refusals are about the request. */
    struct evd_t_resp r;
    static const char CSV[] = "id,tag,question,expected\nq1,q1,a,yes\n";
    xt_request("POST", "/v1/datasets?name=base", "text/csv", CSV, strlen(CSV), &r);
    ck_assert_int_eq(r.status, 201);
    char body[8192];
    snprintf(body, sizeof(body), "%s", t->body);
    char *ds = strstr(body, "\"DS\"");
    if (ds != NULL) {
        /* The placeholder DS becomes that real dataset's id. */
        char rest[8192];
        snprintf(rest, sizeof(rest), "%s", ds + 4);
        snprintf(ds, sizeof(body) - (size_t)(ds - body), "\"%s\"%s",
                 json_string_value(json_object_get(r.json, "dataset_id")), rest);
    }
    evd_t_resp_free(&r);
    xt_request("POST", "/v1/experiments", t->ct, body, strlen(body), &r);
    ck_assert_msg(r.status == t->status, "case %d: %ld %s", _i, r.status, r.body);
    ck_assert_str_eq(r.content_type, "application/problem+json");
    const char *detail = json_string_value(json_object_get(r.json, "detail"));
    ck_assert_ptr_nonnull(detail);
    if (t->detail[0] == '~')
        ck_assert_msg(strstr(detail, t->detail + 1) != NULL, "case %d: %s", _i, detail);
    else
        ck_assert_str_eq(detail, t->detail);
    evd_t_resp_free(&r);
    ck_assert_uint_eq(xt_list_size("/v1/experiments", "experiments"), 0);
    ck_assert_int_eq(xt_count_rows("datasets"), 1);
}
END_TEST

/* The start's body streams: a case that is not JSON is told where a parse of the whole body
 * finds it, and cases under an escaped member name ("cas\u0065s", which the splitter
 * leaves in the request) start as well. */
START_TEST(a_streamed_start_tells_a_malformed_case_where_it_is)
{
    static const char BAD[] = BASE_START ARMS ",\n\"cases\": [\n  " CASE("q1") ",\n  "
                                                "{\"id\": \"q2\", \"vars\": {\"tag\": }}\n]}";
    json_error_t whole;
    ck_assert_ptr_null(json_loads(BAD, 0, &whole));
    char want[512];
    snprintf(want, sizeof(want), "malformed JSON: %s at line %d column %d", whole.text, whole.line,
             whole.column);
    struct evd_t_resp r;
    xt_request("POST", "/v1/experiments", NULL, BAD, strlen(BAD), &r);
    ck_assert_int_eq(r.status, 400);
    ck_assert_str_eq(json_string_value(json_object_get(r.json, "detail")), want);
    evd_t_resp_free(&r);
    ck_assert_int_eq(xt_count_rows("datasets"), 0);

    static const char ESCAPED[] =
        BASE_START ARMS ",\"cas\\u0065s\":[" CASE("q1") "," CASE("q2") "]}";
    xt_request("POST", "/v1/experiments", NULL, ESCAPED, strlen(ESCAPED), &r);
    ck_assert_msg(r.status == 202, "%ld %s", r.status, r.body);
    evd_t_resp_free(&r);
    char *n = evd_t_sql(xt_db_url, "SELECT case_count FROM datasets");
    ck_assert_str_eq(n, "2");
    free(n);
}
END_TEST

/* Inline cases are bounded by EVALD_MAX_DATASET_BYTES (64 KiB here), not by the 1 MiB limit
 * of other routes: over it is 413; a body over 1 MiB is taken under a larger limit. */
START_TEST(the_start_route_has_the_dataset_body_limit)
{
    struct evd_buf body = {0};
    char pad[4001];
    memset(pad, 'x', 4000);
    pad[4000] = '\0';
    evd_buf_printf(&body, BASE_START ARMS ",\"repeats\":1,\"cases\":[");
    for (int i = 0; body.len <= 65536; i++)
        evd_buf_printf(&body, "%s{\"vars\":{\"tag\":\"t\",\"question\":\"q\",\"pad\":\"%s\"}}",
                       i ? "," : "", pad);
    evd_buf_printf(&body, "]}");
    struct evd_t_resp r;
    xt_request("POST", "/v1/experiments", NULL, body.data, body.len, &r);
    ck_assert_int_eq(r.status, 413);
    ck_assert_str_eq(json_string_value(json_object_get(r.json, "detail")),
                     "request body exceeds the 65536 byte limit");
    evd_t_resp_free(&r);
    ck_assert_int_eq(xt_count_rows("datasets"), 0);
    evd_buf_free(&body);

    evd_t_stop(&xt_evald, SIGTERM, 10000);
    char *env[] = {"EVALD_MAX_DATASET_BYTES=4194304", NULL};
    xt_start_evald(env); /* later settings win over the defaults of xt_start_evald */
    struct evd_buf big = {0};
    char wide[80001];
    memset(wide, 'y', 80000);
    wide[80000] = '\0';
    evd_buf_printf(&big, BASE_START ARMS ",\"repeats\":1,\"cases\":[");
    for (int i = 0; i < 20; i++) /* 20 cases of 80 kB: 1.6 MB, 40 runs */
        evd_buf_printf(&big, "%s{\"vars\":{\"tag\":\"w%d\",\"question\":\"q\",\"pad\":\"%s\"}}",
                       i ? "," : "", i, wide);
    evd_buf_printf(&big, "]}");
    ck_assert_uint_gt(big.len, 1u << 20);
    char *id = xt_start(big.data);
    long st = 0;
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    json_t *doc = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_INT(doc, "dataset.case_count", 20);
    json_decref(doc);
    ck_assert_int_eq(xt_count_rows("datasets"), 1);
    snprintf(path, sizeof(path), "/v1/experiments/%s/cancel", id);
    json_decref(xt_call("POST", path, NULL, &st));
    free(id);
    evd_buf_free(&big);
}
END_TEST

/* With a token, a start without it is refused before its body is read; events take
 * ?access_token= as the other streams do. */
START_TEST(experiments_need_the_token)
{
    evd_t_stop(&xt_evald, SIGTERM, 10000);
    char *env[] = {"EVALD_API_TOKEN=experiments-test-token-0123456789", NULL};
    xt_start_evald(env);
    struct evd_t_resp r;
    xt_request("POST", "/v1/experiments", NULL, xt_full, strlen(xt_full), &r);
    ck_assert_int_eq(r.status, 401);
    evd_t_resp_free(&r);
    xt_request("GET", "/v1/experiments", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 401);
    evd_t_resp_free(&r);
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/experiments", xt_evald.base);
    const char *headers[] = {"Content-Type: application/json",
                             "Authorization: Bearer experiments-test-token-0123456789", NULL};
    evd_t_http("POST", url, headers, xt_full, strlen(xt_full), &r);
    ck_assert_msg(r.status == 202, "%ld %s", r.status, r.body);
    char id[64];
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(r.json, "experiment_id")));
    evd_t_resp_free(&r);
    snprintf(url, sizeof(url),
             "%s/v1/experiments/%s/events?access_token=experiments-test-token-0123456789",
             xt_evald.base, id);
    evd_t_http_timed("GET", url, NULL, NULL, 0, 60000, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "event: status"));
    evd_t_resp_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("experiments_refusals");
    TCase *tc = tcase_create("experiments_refusals");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, xt_setup, xt_teardown);
    tcase_add_loop_test(tc, unknown_experiments_are_404, 0, sizeof(UNKNOWN) / sizeof(UNKNOWN[0]));
    tcase_add_test(tc, a_streamed_start_tells_a_malformed_case_where_it_is);
    tcase_add_loop_test(tc, refusals_name_the_field_and_write_nothing, 0,
                        sizeof(REFUSALS) / sizeof(REFUSALS[0]));
    tcase_add_test(tc, the_start_route_has_the_dataset_body_limit);
    tcase_add_test(tc, experiments_need_the_token);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
