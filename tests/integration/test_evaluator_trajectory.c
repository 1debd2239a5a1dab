/*
 * eval::assert::trajectory end to end (../shared/spec/agent-cases.md, "Trajectory
 * evaluator"): the REST route and the function mirror on hand-made inputs, and an
 * experiment whose arms make the stub's model call registered HTTP tools, scored by the
 * trajectory evaluator from the run's transcript. Real evald, evald-stub, a throwaway
 * PostgreSQL and the tool server of harness_support.h, all on loopback.
 *
 * The script: the treatment's model calls search {"query":"Oslo"}, then book
 * {"room":"R42"}, then answers; the control's calls search, then lookup {"room":"R42"}.
 * The tools search, book and lookup are the tool server's /echo.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/harness_support.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char db_url[1024];
static char db_name[64];
static struct evd_t_proc stub, evald;

#define TOOL_CALL(name, args) "{\"tool_calls\":[{\"name\":\"" name "\",\"arguments\":" args "}]}"
#define USAGE "\"usage\":{\"input_tokens\":20,\"output_tokens\":5}"

static const char SCRIPT[] =
    "{\"rules\":["
    "{\"when\":{\"prompt_contains\":\"treatment \",\"tool_result_contains\":\"room\"},"
    "\"reply\":{\"text\":\"Booked R42.\"}," USAGE "},"
    "{\"when\":{\"prompt_contains\":\"treatment \",\"tool_result_contains\":\"Oslo\"},"
    "\"reply\":" TOOL_CALL(
        "book",
        "{\"room\":\"R42\"}") "," USAGE "},"
                              "{\"when\":{\"prompt_contains\":\"treatment "
                              "\",\"has_tool_result\":false},"
                              "\"reply\":" TOOL_CALL(
                                  "search",
                                  "{\"query\":\"Oslo\"}") "," USAGE "},"
                                                          "{\"when\":{\"prompt_contains\":"
                                                          "\"control "
                                                          "\",\"tool_result_contains\":\"room\"},"
                                                          "\"reply\":{\"text\":\"R42 is "
                                                          "free.\"}," USAGE "},"
                                                          "{\"when\":{\"prompt_contains\":"
                                                          "\"control "
                                                          "\",\"tool_result_contains\":\"Oslo\"},"
                                                          "\"reply\":" TOOL_CALL(
                                                              "lookup",
                                                              "{\"room\":\"R42\"}") "," USAGE "},"
                                                                                    "{\"when\":{"
                                                                                    "\"prompt_"
                                                                                    "contains\":"
                                                                                    "\"control "
                                                                                    "\",\"has_tool_"
                                                                                    "result\":"
                                                                                    "false},"
                                                                                    "\"reply\""
                                                                                    ":" TOOL_CALL(
                                                                                        "search",
                                                                                        "{\"query\""
                                                                                        ":\"Oslo\""
                                                                                        "}") "," USAGE
                                                                                             "}"
                                                                                             "],"
                                                                                             "\"def"
                                                                                             "ault"
                                                                                             "\":{"
                                                                                             "\"rep"
                                                                                             "ly\":"
                                                                                             "{\"te"
                                                                                             "xt\":"
                                                                                             "\"OK"
                                                                                             "\"}}"
                                                                                             "}";

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, SCRIPT, NULL), 0);
    ck_assert(hs_tools_start());
    static char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", stub.base);
    char *env[] = {base, "OPENAI_API_KEY=stub-key", "EVALD_SWEEP_INTERVAL_MS=300", NULL};
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

/* The value at a dotted path ("runs.0.verdict.reason"), borrowed, or NULL. */
static json_t *at(json_t *v, const char *dotted)
{
    char part[64];
    const char *p = dotted;
    while (v != NULL && *p != '\0') {
        size_t n = strcspn(p, ".");
        snprintf(part, sizeof(part), "%.*s", (int)n, p);
        if (json_is_array(v)) {
            char *end = NULL;
            long i = strtol(part, &end, 10);
            v = end != NULL && *end == '\0' ? json_array_get(v, (size_t)i) : NULL;
        } else {
            v = json_object_get(v, part);
        }
        p += n + (p[n] == '.');
    }
    return v;
}

static const char *str_at(json_t *v, const char *dotted)
{
    const char *s = json_string_value(at(v, dotted));
    return s != NULL ? s : "(none)";
}

static void put_tool(const char *id)
{
    char *body = NULL;
    ck_assert(asprintf(&body,
                       "{\"description\":\"The %s tool\",\"url\":\"%s/echo\",\"timeout_ms\":5000,"
                       "\"request_schema\":{\"type\":\"object\"}}",
                       id, hs_tools_base()) > 0);
    char path[128];
    snprintf(path, sizeof(path), "/v1/tools/%s", id);
    long status = 0;
    json_t *r = call("PUT", path, body, &status);
    ck_assert_msg(status == 201, "PUT %s answered %ld", id, status);
    json_decref(r);
    free(body);
}

/* Starts an experiment (202); its id (malloc'd). */
static char *start_experiment(const char *body)
{
    long status = 0;
    json_t *r = call("POST", "/v1/experiments", body, &status);
    if (status != 202)
        evd_t_dump_log(&evald);
    ck_assert_msg(status == 202, "start answered %ld: %s", status, str_at(r, "detail"));
    char *id = strdup(str_at(r, "experiment_id"));
    json_decref(r);
    return id;
}

/* GET of experiment `id` until it is terminal (new reference). */
static json_t *wait_done(const char *id, int timeout_ms)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    for (int waited = 0;; waited += 100) {
        long st = 0;
        json_t *doc = call("GET", path, NULL, &st);
        ck_assert_int_eq(st, 200);
        const char *s = str_at(doc, "status");
        if (strcmp(s, "completed") == 0 || strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0)
            return doc;
        json_decref(doc);
        if (waited > timeout_ms) {
            evd_t_dump_log(&evald);
            ck_abort_msg("experiment %s still %s", id, s);
        }
        usleep(100 * 1000);
    }
}

/* The runs of experiment `id` (new reference), in case then position order. */
static json_t *runs_of(const char *id)
{
    char path[160];
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=100", id);
    long st = 0;
    json_t *page = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    json_t *runs = json_incref(json_object_get(page, "runs"));
    json_decref(page);
    return runs;
}

/* ---- (a) the REST route and the mirror on hand-made inputs ------------------------------ */

#define METRICS                                                                                    \
    "\"metrics\":{\"root_session_id\":\"eval_x_c_1\",\"complete\":true,\"totals\":{"               \
    "\"sessions\":1,\"turns\":1,\"function_calls\":2,\"function_call_errors\":0},"                 \
    "\"by_session\":[]}"
#define TRANSCRIPT(second)                                                                         \
    "\"transcript\":[{\"role\":\"user\",\"content\":\"Book a room in Oslo.\"},"                    \
    "{\"role\":\"assistant\",\"content\":\"done\",\"function_calls\":["                            \
    "{\"name\":\"search\",\"arguments\":{\"query\":\"Oslo\"},\"result\":{\"n\":1}},"               \
    "{\"name\":\"" second "\",\"arguments\":{\"room\":\"R42\"}}]}]"
#define EXPECTED                                                                                   \
    "\"expected\":[{\"name\":\"search\",\"arguments\":{\"query\":\"Oslo\"}},"                      \
    "{\"name\":\"book\",\"arguments\":{\"room\":\"R42\"}}]"
#define INPUT(second, arguments)                                                                   \
    "{\"evaluation_id\":\"eval_x\",\"run_id\":\"control-1\",\"role\":\"control\","                 \
    "\"session_id\":\"eval_x_c_1\",\"output\":\"done\"," METRICS                                   \
    "," TRANSCRIPT(second) ","                                                                     \
                           "\"arguments\":" arguments "}"

START_TEST(rest_route_and_mirror_score_hand_made_inputs)
{
    struct {
        const char *body;
        bool passed;
        double score;
        const char *reason;
    } cases[] = {
        {INPUT("book", "{" EXPECTED "}"), true, 1.0, "2 calls matched the expected calls in order"},
        {INPUT("lookup", "{" EXPECTED "}"), false, 0.5, "call 2: expected book, got lookup"},
        {INPUT("lookup", "{" EXPECTED ",\"mode\":\"superset\"}"), false, 0.5,
         "expected call 2: book was not made"},
        {INPUT("lookup", "{" EXPECTED ",\"mode\":\"subset\"}"), false, 0.5,
         "call 2: unexpected lookup"},
        {INPUT("lookup", "{" EXPECTED ",\"mode\":\"unordered\",\"match_arguments\":\"ignore\"}"),
         false, 0.5, "call 2: unexpected lookup; expected call 2: book was not made"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long status = 0;
        json_t *v = call("POST", "/v1/evaluators/trajectory", cases[i].body, &status);
        ck_assert_msg(status == 200, "case %zu answered %ld: %s", i, status, str_at(v, "detail"));
        ck_assert_int_eq(json_is_true(json_object_get(v, "passed")), cases[i].passed);
        ck_assert(json_real_value(json_object_get(v, "score")) == cases[i].score);
        ck_assert_str_eq(str_at(v, "reason"), cases[i].reason);
        /* EvaluatorResponseV1, as the seed's built-ins answer */
        ck_assert(evd_t_valid_response("eval::assert::exact", v));
        /* The function mirror answers the same. */
        json_t *m = evd_t_call(evald.base, "eval::assert::trajectory", cases[i].body, &status);
        ck_assert_int_eq(status, 200);
        ck_assert(json_equal(m, v));
        json_decref(m);
        json_decref(v);
    }

    /* Refusals name the field. */
    struct {
        const char *body;
        const char *detail;
    } bad[] = {
        {INPUT("book", "{" EXPECTED ",\"mode\":\"ordered\"}"),
         "evaluator arguments.mode must be one of strict, unordered, subset, superset"},
        {INPUT("book", "{" EXPECTED ",\"match_arguments\":true}"),
         "evaluator arguments.match_arguments must be a string"},
        {INPUT("book", "{\"mode\":\"strict\"}"),
         "eval::assert::trajectory requires evaluator arguments.expected"},
        {INPUT("book", "{\"expected\":[{\"arguments\":{}}]}"),
         "evaluator arguments.expected[0].name is required"},
        {"{\"evaluation_id\":\"eval_x\",\"run_id\":\"control-1\",\"role\":\"control\","
         "\"session_id\":\"eval_x_c_1\",\"output\":\"done\"," METRICS ",\"transcript\":"
         "[{\"role\":\"assistant\",\"content\":\"\",\"function_calls\":{}}],\"arguments\":"
         "{\"expected\":[]}}",
         "transcript[0].function_calls must be an array"},
        {"{\"evaluation_id\":\"eval_x\",\"run_id\":\"control-1\",\"role\":\"control\","
         "\"session_id\":\"eval_x_c_1\",\"output\":\"done\"," METRICS ",\"transcript\":"
         "\"none\",\"arguments\":{\"expected\":[]}}",
         "transcript must be an array"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long status = 0;
        json_t *v = call("POST", "/v1/evaluators/trajectory", bad[i].body, &status);
        ck_assert_int_eq(status, 400);
        ck_assert_str_eq(str_at(v, "detail"), bad[i].detail);
        json_decref(v);
    }

    /* The catalogue lists it. */
    long status = 0;
    json_t *cat = call("GET", "/v1/functions", NULL, &status);
    ck_assert_int_eq(status, 200);
    bool listed = false;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(cat, "functions"), i, f)
    {
        listed |= strcmp(str_at(f, "name"), "eval::assert::trajectory") == 0;
    }
    ck_assert(listed);
    json_decref(cat);
}
END_TEST

/* ---- (b) an experiment over registered HTTP tools -------------------------------------- */

/* One case per mode; the arguments match as subsets, so extra call arguments would pass. */
#define TCASE(mode)                                                                                \
    "{\"id\":\"" mode "\",\"vars\":{\"mode\":\"" mode "\"},\"expected\":["                         \
    "{\"name\":\"search\",\"arguments\":{\"query\":\"Oslo\"}},"                                    \
    "{\"name\":\"book\",\"arguments\":{\"room\":\"R42\"}}]}"

static const char EXPERIMENT[] =
    "{\"name\":\"trajectory\",\"dimension\":\"prompt\","
    "\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
    "\"control\":{\"label\":\"lookup\",\"prompt\":\"control {{mode}}: Book a room in Oslo.\"},"
    "\"treatments\":[{\"label\":\"book\",\"prompt\":\"treatment {{mode}}: Search, then book a "
    "room in Oslo.\"}],"
    "\"functions\":{\"allow\":[\"search\",\"book\",\"lookup\"],\"deny\":[],\"expose\":\"native\"},"
    "\"evaluator\":{\"function_id\":\"eval::assert::trajectory\",\"arguments\":{"
    "\"expected\":\"{{expected}}\",\"mode\":\"{{mode}}\",\"match_arguments\":\"subset\"}},"
    "\"repeats\":1,\"concurrency\":2,"
    "\"cases\":[" TCASE("strict") "," TCASE("unordered") "," TCASE("subset") "," TCASE(
        "superset") "]}";

START_TEST(experiment_scores_the_trajectory_of_each_arm)
{
    put_tool("search");
    put_tool("book");
    put_tool("lookup");
    char *id = start_experiment(EXPERIMENT);
    json_t *doc = wait_done(id, 60000);
    ck_assert_str_eq(str_at(doc, "status"), "completed");
    json_decref(doc);

    /* The control's documented reason per mode (case order: strict, unordered, subset,
     * superset). */
    static const char *const CONTROL_REASON[] = {
        "call 2: expected book, got lookup",
        "call 2: unexpected lookup; expected call 2: book was not made",
        "call 2: unexpected lookup",
        "expected call 2: book was not made",
    };
    static const char *const TREATMENT_REASON[] = {
        "2 calls matched the expected calls in order",
        "2 calls matched the expected calls in some order",
        "every call was expected (2 of 2 expected calls made)",
        "every expected call was made (2 calls, 2 expected)",
    };
    json_t *runs = runs_of(id);
    ck_assert_uint_eq(json_array_size(runs), 8);
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r)
    {
        size_t c = (size_t)json_integer_value(at(r, "case_index")) - 1;
        ck_assert_uint_lt(c, 4);
        bool treatment = json_integer_value(at(r, "arm")) == 1;
        ck_assert_msg(strcmp(str_at(r, "status"), "completed") == 0, "run %zu: %s", i,
                      str_at(r, "failures.0.message"));
        ck_assert_str_eq(str_at(r, "verdict.reason"),
                         treatment ? TREATMENT_REASON[c] : CONTROL_REASON[c]);
        ck_assert_int_eq(json_is_true(at(r, "passed")), treatment);
        ck_assert_int_eq(json_is_true(at(r, "verdict.passed")), treatment);
        /* One of the two expected calls was made by the control. */
        ck_assert(json_real_value(at(r, "verdict.score")) == (treatment ? 1.0 : 0.5));
        ck_assert_str_eq(str_at(r, "verdict.details.calls.0"), "search");
        ck_assert_str_eq(str_at(r, "verdict.details.calls.1"), treatment ? "book" : "lookup");
        ck_assert_str_eq(str_at(r, "output"), treatment ? "Booked R42." : "R42 is free.");
    }
    json_decref(runs);
    /* Every run called two tools, each on the tool server. */
    ck_assert_int_eq(hs_tools_calls("/echo"), 16);
    free(id);
}
END_TEST

/* ---- (c) what an HTTP evaluator receives ---------------------------------------------- */

START_TEST(http_evaluator_receives_the_transcript_and_case)
{
    put_tool("search");
    put_tool("book");
    put_tool("lookup");
    put_tool("judge.echo"); /* answers {"echo": <input>}: not a verdict, the run fails */
    static const char BODY[] =
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
        "\"control\":{\"prompt\":\"control x: Book a room in Oslo.\"},"
        "\"treatments\":[{\"prompt\":\"control y: Book a room in Oslo.\"}],"
        "\"functions\":{\"allow\":[\"search\",\"book\",\"lookup\"],\"deny\":[],"
        "\"expose\":\"native\"},"
        "\"evaluator\":{\"function_id\":\"judge.echo\"},\"repeats\":1,\"concurrency\":1,"
        "\"cases\":[{\"id\":\"oslo\"}]}";
    char *id = start_experiment(BODY);
    json_t *doc = wait_done(id, 60000);
    json_decref(doc);
    json_t *input = hs_tools_last("/echo");
    ck_assert_ptr_nonnull(input);
    ck_assert_str_eq(str_at(input, "case_id"), "oslo");
    ck_assert_str_eq(str_at(input, "transcript.0.role"), "user");
    ck_assert(strstr(str_at(input, "transcript.0.content"), "Book a room in Oslo.") != NULL);
    ck_assert_str_eq(str_at(input, "transcript.1.role"), "assistant");
    ck_assert_str_eq(str_at(input, "transcript.1.content"), "R42 is free.");
    ck_assert_str_eq(str_at(input, "transcript.1.function_calls.0.name"), "search");
    ck_assert_str_eq(str_at(input, "transcript.1.function_calls.0.arguments.query"), "Oslo");
    ck_assert_str_eq(str_at(input, "transcript.1.function_calls.0.result.echo.query"), "Oslo");
    ck_assert_str_eq(str_at(input, "transcript.1.function_calls.1.name"), "lookup");
    ck_assert_uint_eq(json_array_size(at(input, "transcript")), 2);
    json_decref(input);
    free(id);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("evaluator_trajectory");
    TCase *tc = tcase_create("trajectory");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rest_route_and_mirror_score_hand_made_inputs);
    tcase_add_test(tc, experiment_scores_the_trajectory_of_each_arm);
    tcase_add_test(tc, http_evaluator_receives_the_transcript_and_case);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
