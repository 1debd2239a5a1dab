/*
 * HTTP tools end to end: the /v1/tools API, an evaluation whose agent calls a
 * registered tool (through the engine, the harness and evald-stub's scripted tool
 * call), and an HTTP evaluator registered as a tool. Real evald, evald-stub,
 * PostgreSQL and a local tool server, all on loopback.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/harness_support.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char db_url[1024];
static char db_name[64];
static struct evd_t_proc stub, evald;

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    ck_assert(hs_tools_start());
    static char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", stub.base);
    char *env[] = {base, "OPENAI_API_KEY=stub-key", NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
}

static void teardown(void)
{
    evd_t_stop(&evald, SIGTERM, 10000);
    hs_tools_stop();
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
}

static json_t *call(const char *method, const char *path, const char *body, long *status)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    return evd_t_http_json(method, url, body, status);
}

static void put_tool(const char *id, const char *path, long want)
{
    char *body = NULL;
    ck_assert(asprintf(&body,
                       "{\"description\":\"Adds a and b\",\"url\":\"%s%s\",\"timeout_ms\":5000,"
                       "\"request_schema\":{\"type\":\"object\",\"required\":[\"a\",\"b\"],"
                       "\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"}}}}",
                       hs_tools_base(), path) > 0);
    char p[128];
    snprintf(p, sizeof(p), "/v1/tools/%s", id);
    long status = 0;
    json_t *r = call("PUT", p, body, &status);
    ck_assert_msg(status == want, "PUT %s answered %ld", id, status);
    ck_assert_str_eq(json_string_value(json_object_get(r, "tool_id")), id);
    json_decref(r);
    free(body);
}

START_TEST(tools_api_validates_and_stores)
{
    put_tool("calc.add", "/add", 201);
    put_tool("calc.add", "/add", 200); /* replaced */
    long status;
    json_t *list = call("GET", "/v1/tools", NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(json_array_size(json_object_get(list, "tools")), 1);
    json_decref(list);
    json_t *one = call("GET", "/v1/tools/calc.add", NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(one, "timeout_ms")), 5000);
    json_decref(one);

    static const struct {
        const char *body;
        const char *detail;
    } bad[] = {
        {"{\"url\":\"http://127.0.0.1:1/x\",\"request_schema\":{}}",
         "description must be a non-empty string"},
        {"{\"description\":\"d\",\"url\":\"ftp://127.0.0.1/x\",\"request_schema\":{}}",
         "url must be an http or https URL"},
        {"{\"description\":\"d\",\"url\":\"http://127.0.0.1:1/x\",\"request_schema\":[]}",
         "request_schema must be a JSON Schema object"},
        {"{\"description\":\"d\",\"url\":\"http://127.0.0.1:1/x\",\"request_schema\":{},"
         "\"timeout_ms\":0}",
         "timeout_ms must be an integer between 1 and 600000"},
        {"{\"description\":\"d\",\"url\":\"http://127.0.0.1:1/x\",\"request_schema\":{},"
         "\"colour\":1}",
         "colour is not a known field"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *r = call("PUT", "/v1/tools/other", bad[i].body, &status);
        ck_assert_int_eq(status, 400);
        ck_assert_str_eq(json_string_value(json_object_get(r, "detail")), bad[i].detail);
        json_decref(r);
    }
    json_t *r = call("PUT", "/v1/tools/other",
                     "{\"description\":\"d\",\"url\":\"http://127.0.0.1:1/x\",\"request_schema\":{"
                     "\"type\":\"nope\"}}",
                     &status);
    ck_assert_int_eq(status, 400);
    ck_assert(strncmp(json_string_value(json_object_get(r, "detail")),
                      "request_schema is not a valid JSON Schema", 41) == 0);
    json_decref(r);
    r = call("PUT", "/v1/tools/bad%20id", "{}", &status);
    ck_assert_int_eq(status, 400);
    json_decref(r);
    char *n = evd_t_sql(db_url, "SELECT count(*) FROM tools");
    ck_assert_str_eq(n, "1"); /* refused definitions wrote nothing */
    free(n);

    r = call("DELETE", "/v1/tools/calc.add", NULL, &status);
    ck_assert_int_eq(status, 200);
    json_decref(r);
    r = call("DELETE", "/v1/tools/calc.add", NULL, &status);
    ck_assert_int_eq(status, 404);
    json_decref(r);
    r = call("GET", "/v1/tools/calc.add", NULL, &status);
    ck_assert_int_eq(status, 404);
    json_decref(r);
}
END_TEST

START_TEST(agent_calls_a_registered_tool_and_an_http_evaluator_scores)
{
    put_tool("calc.add", "/add", 201);
    /* The HTTP evaluator: /echo answers {"echo": <EvaluatorInputV1>}, which is not an
     * EvaluatorResponseV1, so the run fails at phase evaluate with a clear message. */
    put_tool("judge.echo", "/echo", 201);
    /* First generation calls the tool through agent_trigger; after the result, answer. */
    ck_assert_int_eq(
        evd_t_stub_script(
            &stub,
            "{\"rules\":[{\"when\":{\"has_tool_result\":false,\"prompt_contains\":\"add\"},"
            "\"reply\":{\"tool_calls\":[{\"name\":\"agent_trigger\",\"arguments\":{"
            "\"function_id\":\"calc.add\",\"payload\":{\"a\":2,\"b\":3}}}]},\"usage\":{"
            "\"input_tokens\":20,\"output_tokens\":5}},{\"when\":{\"has_tool_result\":true},"
            "\"reply\":{\"text\":\"5\"},\"usage\":{\"input_tokens\":30,\"output_tokens\":1}}],"
            "\"default\":{\"reply\":{\"text\":\"OK\"}}}"),
        200);
    static const char REQ[] =
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
        "\"control\":{\"prompt\":\"Please add 2 and 3.\"},\"treatment\":{\"prompt\":\"Kindly add "
        "2 and 3.\"},\"runs\":1,\"functions\":{\"allow\":[\"calc.*\"],\"deny\":[],\"expose\":"
        "\"agent_trigger\"},\"evaluator\":{\"function_id\":\"eval::assert::exact\","
        "\"arguments\":{\"expected\":\"5\"}}}";
    long status;
    json_t *started = call("POST", "/v1/evaluations", REQ, &status);
    ck_assert_int_eq(status, 202);
    const char *id = json_string_value(json_object_get(started, "evaluation_id"));
    ck_assert_str_eq(evd_t_wait_terminal(evald.base, id, 30000), "completed");
    ck_assert_int_eq(hs_tools_calls("/add"), 2); /* once per run */
    json_t *payload = hs_tools_last("/add");
    ck_assert_int_eq(json_integer_value(json_object_get(payload, "a")), 2);
    json_decref(payload);
    char path[128];
    snprintf(path, sizeof(path), "/v1/evaluations/%s", id);
    json_t *res = call("GET", path, NULL, &status);
    json_t *report = json_object_get(res, "report");
    ck_assert(json_real_value(json_object_get(json_object_get(report, "control_aggregate"),
                                              "pass_rate")) == 1.0);
    json_t *run = json_array_get(json_object_get(json_object_get(res, "progress"), "runs"), 0);
    json_t *bench = json_object_get(run, "benchmark");
    ck_assert_int_eq(json_integer_value(json_object_get(bench, "function_calls")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(bench, "turns")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(bench, "input_tokens")), 50);
    ck_assert_int_eq(json_integer_value(json_object_get(bench, "output_tokens")), 6);
    ck_assert_int_eq(json_array_size(json_object_get(run, "function_calls")), 1);
    ck_assert_int_eq(json_array_size(json_object_get(run, "generations")), 2);
    json_decref(res);
    json_decref(started);

    /* An evaluator registered as a tool receives the EvaluatorInputV1. */
    static const char REQ2[] =
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
        "\"control\":{\"prompt\":\"Say hi.\"},\"treatment\":{\"prompt\":\"Say hello.\"},"
        "\"runs\":1,\"evaluator\":{\"function_id\":\"judge.echo\",\"arguments\":{\"k\":1}}}";
    started = call("POST", "/v1/evaluations", REQ2, &status);
    ck_assert_int_eq(status, 202);
    id = json_string_value(json_object_get(started, "evaluation_id"));
    ck_assert_str_eq(evd_t_wait_terminal(evald.base, id, 30000), "completed");
    json_t *input = hs_tools_last("/echo");
    ck_assert_str_eq(json_string_value(json_object_get(input, "evaluation_id")), id);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(input, "arguments"), "k")),
                     1);
    ck_assert(json_is_object(json_object_get(input, "metrics")));
    json_decref(input);
    snprintf(path, sizeof(path), "/v1/evaluations/%s", id);
    res = call("GET", path, NULL, &status);
    run = json_array_get(json_object_get(json_object_get(res, "progress"), "runs"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(run, "status")), "failed");
    json_t *f = json_array_get(json_object_get(run, "failures"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(f, "phase")), "evaluate");
    ck_assert_str_eq(json_string_value(json_object_get(f, "function_id")), "judge.echo");
    json_decref(res);
    json_decref(started);

    /* An evaluator that nothing can run is refused at start, writing nothing. */
    json_t *r = call("POST", "/v1/evaluations",
                     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
                     "\"openai\"},\"control\":{\"prompt\":\"a\"},\"treatment\":{\"prompt\":\"b\"},"
                     "\"evaluator\":{\"function_id\":\"judge.missing\"}}",
                     &status);
    ck_assert_int_eq(status, 400);
    json_decref(r);
    char *n = evd_t_sql(db_url, "SELECT count(*) FROM evaluations");
    ck_assert_str_eq(n, "2");
    free(n);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tools");
    TCase *tc = tcase_create("tools");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, tools_api_validates_and_stores);
    tcase_add_test(tc, agent_calls_a_registered_tool_and_an_http_evaluator_scores);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
