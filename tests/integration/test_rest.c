/*
 * The REST surface walked end to end: every route evald serves, with its documented
 * success and error statuses, against a real PostgreSQL, evald and evald-stub. Each test
 * checks what it relies on itself; when run under CTest its exchanges are also recorded
 * (tests/support/contract_record.c) and the contract/openapi check validates every one
 * of them against openapi/openapi.json, so this suite is what gives that check its reach.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char db_url[1024];
static char db_name[64];
static struct evd_t_proc stub;
static struct evd_t_proc evald;
static char env_base[300], env_key[] = "OPENAI_API_KEY=stub-key";

/* Prompts that contain "slow" take 8 s at the stub: long enough to act on a live run. */
static const char STUB_SCRIPT[] =
    "{\"rules\":[{\"when\":{\"prompt_contains\":\"slow\"},\"latency_ms\":8000,"
    "\"reply\":{\"text\":\"late\"}}]}";

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, STUB_SCRIPT, NULL), 0);
    snprintf(env_base, sizeof(env_base), "OPENAI_BASE_URL=%s/v1", stub.base);
}

static void teardown(void)
{
    evd_t_stop(&evald, SIGTERM, 10000);
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
}

static void start(const char *extra)
{
    char *env[] = {env_base, env_key, "EVALD_SWEEP_INTERVAL_MS=300", (char *)extra, NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
}

/* One request to evald; the response is in *r (free it). Returns the status. */
static long call(const char *method, const char *path, const char *const *headers, const char *body,
                 struct evd_t_resp *r)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    ck_assert_int_eq(evd_t_http(method, url, headers, body, body ? strlen(body) : 0, r), 0);
    return r->status;
}

/* A request whose JSON answer is returned (new reference); asserts the status. */
static json_t *call_json(const char *method, const char *path, const char *body, long want)
{
    struct evd_t_resp r;
    long got = call(method, path, NULL, body, &r);
    ck_assert_msg(got == want, "%s %s answered %ld, not %ld: %s", method, path, got, want, r.body);
    json_t *j = json_loads(r.body, JSON_DECODE_ANY, NULL);
    evd_t_resp_free(&r);
    ck_assert_ptr_nonnull(j);
    return j;
}

static void expect_problem(const char *method, const char *path, const char *const *headers,
                           const char *body, long want, const char *code)
{
    struct evd_t_resp r;
    long got = call(method, path, headers, body, &r);
    ck_assert_msg(got == want, "%s %s answered %ld, not %ld: %s", method, path, got, want, r.body);
    ck_assert_str_eq(r.content_type, "application/problem+json");
    json_t *j = json_loads(r.body, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(j, "code")), code);
    json_decref(j);
    evd_t_resp_free(&r);
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static char *new_evaluation(const char *prompt_tag, const char *extra_fields)
{
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
             "\"openai\"},\"control\":{\"prompt\":\"%s Reply with exactly OK.\"},"
             "\"treatment\":{\"prompt\":\"%s Return exactly the text OK.\"},\"evaluator\":"
             "{\"function_id\":\"eval::assert::normalized_text\",\"arguments\":{\"expected\":"
             "\"OK\"}},\"runs\":1%s}",
             prompt_tag, prompt_tag, extra_fields ? extra_fields : "");
    struct evd_t_resp r;
    ck_assert_int_eq(call("POST", "/v1/evaluations", NULL, body, &r), 202);
    json_t *j = json_loads(r.body, 0, NULL);
    char *id = strdup(str(j, "evaluation_id"));
    char loc[160];
    snprintf(loc, sizeof(loc), "/v1/evaluations/%s", id);
    ck_assert_str_eq(r.location, loc);
    ck_assert_str_eq(str(j, "status"), "queued");
    json_decref(j);
    evd_t_resp_free(&r);
    return id;
}

START_TEST(probes_document_and_console)
{
    start(NULL);
    struct evd_t_resp r;
    json_t *j = call_json("GET", "/healthz", NULL, 200);
    ck_assert_str_eq(str(j, "status"), "ok");
    ck_assert(json_is_integer(json_object_get(j, "uptime_ms")));
    json_decref(j);
    ck_assert_int_eq(call("HEAD", "/healthz", NULL, NULL, &r), 200);
    ck_assert_int_eq(r.len, 0);
    evd_t_resp_free(&r);
    j = call_json("GET", "/readyz", NULL, 200);
    ck_assert_str_eq(str(j, "migrations"), "ok");
    json_decref(j);
    ck_assert_int_eq(call("GET", "/metrics", NULL, NULL, &r), 200);
    evd_t_resp_free(&r);

    /* The document, the page and an asset: 200 with an ETag, then 304 for that tag. */
    static const char *const cached[] = {"/openapi.json", "/", "/console/app.js"};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(call("GET", cached[i], NULL, NULL, &r), 200);
        char etag[128] = "";
        const char *e = strstr(r.headers, "ETag: ");
        ck_assert_ptr_nonnull(e);
        snprintf(etag, sizeof(etag), "If-None-Match: %.*s", (int)strcspn(e + 6, "\r\n"), e + 6);
        evd_t_resp_free(&r);
        const char *h[] = {etag, NULL};
        ck_assert_int_eq(call("GET", cached[i], h, NULL, &r), 304);
        ck_assert_int_eq(r.len, 0);
        evd_t_resp_free(&r);
    }
    expect_problem("GET", "/console/no-such-asset.js", NULL, NULL, 404, "not_found");

    /* The catalogue lists every seed function, the four internal ones marked. */
    static const char *const seed[] = {
        "eval::start",     "eval::rerun",         "eval::list",
        "eval::status",    "eval::result",        "eval::cancel",
        "eval::delete",    "eval::assert::exact", "eval::assert::normalized_text",
        "eval::step",      "eval::sweep",         "eval::on-turn-completed",
        "eval::ui-content"};
    j = call_json("GET", "/v1/functions", NULL, 200);
    json_t *fns = json_object_get(j, "functions");
    size_t i, internal = 0, found = 0;
    json_t *f;
    json_array_foreach(fns, i, f)
    {
        internal += json_is_true(json_object_get(json_object_get(f, "metadata"), "internal"));
        for (size_t k = 0; k < sizeof(seed) / sizeof(seed[0]); k++)
            found += strcmp(str(f, "name"), seed[k]) == 0;
    }
    ck_assert_int_eq(found, 13);
    ck_assert_int_eq(internal, 4);
    json_decref(j);

    j = call_json("GET", "/v1/models", NULL, 200);
    json_t *m = json_array_get(json_object_get(j, "models"), 0);
    ck_assert_ptr_nonnull(str(m, "id"));
    ck_assert_ptr_null(json_object_get(m, "model"));
    json_decref(j);

    expect_problem("GET", "/v1/nothing/here", NULL, NULL, 404, "not_found");
    expect_problem("DELETE", "/v1/models", NULL, NULL, 404, "not_found");
}
END_TEST

static const char TOOL[] =
    "{\"description\":\"Runs one sweep of evald itself.\",\"request_schema\":{\"type\":"
    "\"object\"},\"url\":\"%s/v1/functions/eval::sweep\",\"timeout_ms\":5000}";

START_TEST(tools_lifecycle)
{
    start(NULL);
    char body[512];
    snprintf(body, sizeof(body), TOOL, evald.base);
    struct evd_t_resp r;
    ck_assert_int_eq(call("PUT", "/v1/tools/ops.sweep", NULL, body, &r), 201);
    ck_assert_str_eq(r.location, "/v1/tools/ops.sweep");
    json_t *t = json_loads(r.body, 0, NULL);
    ck_assert_str_eq(str(t, "tool_id"), "ops.sweep");
    ck_assert_int_eq(json_integer_value(json_object_get(t, "timeout_ms")), 5000);
    json_decref(t);
    evd_t_resp_free(&r);
    ck_assert_int_eq(call("PUT", "/v1/tools/ops.sweep", NULL, body, &r), 200);
    ck_assert_str_eq(r.location, "");
    evd_t_resp_free(&r);

    t = call_json("GET", "/v1/tools/ops.sweep", NULL, 200);
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/functions/eval::sweep", evald.base);
    ck_assert_str_eq(str(t, "url"), url);
    json_decref(t);
    t = call_json("GET", "/v1/tools", NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(t, "tools")), 1);
    json_decref(t);

    expect_problem("PUT", "/v1/tools/eval::mine", NULL, body, 400, "invalid_request");
    expect_problem("PUT", "/v1/tools/-dash", NULL, body, 400, "invalid_request");
    expect_problem("PUT", "/v1/tools/x", NULL, "{\"description\":\"d\"}", 400, "invalid_request");
    expect_problem("PUT", "/v1/tools/x", NULL,
                   "{\"description\":\"d\",\"request_schema\":{\"type\":7},\"url\":\"http://h\"}",
                   400, "invalid_request");
    const char *text[] = {"Content-Type: text/plain", NULL};
    expect_problem("PUT", "/v1/tools/x", text, "hello", 415, "unsupported_media_type");
    expect_problem("GET", "/v1/tools/nope", NULL, NULL, 404, "not_found");
    expect_problem("DELETE", "/v1/tools/nope", NULL, NULL, 404, "not_found");
    t = call_json("DELETE", "/v1/tools/ops.sweep", NULL, 200);
    ck_assert(json_is_true(json_object_get(t, "deleted")));
    json_decref(t);
    expect_problem("GET", "/v1/tools/ops.sweep", NULL, NULL, 404, "not_found");
}
END_TEST

START_TEST(evaluation_resources)
{
    start(NULL);
    /* A tool the model calls (the stub calls a function whose name is in the prompt), so
     * that the run's transcript has a function call. */
    char body[512];
    snprintf(body, sizeof(body), TOOL, evald.base);
    struct evd_t_resp r;
    ck_assert_int_eq(call("PUT", "/v1/tools/sweeper", NULL, body, &r), 201);
    evd_t_resp_free(&r);
    char *id = new_evaluation("Call sweeper first.", ",\"functions\":{\"allow\":[\"sweeper\"],"
                                                     "\"expose\":\"native\"}");
    ck_assert_str_eq(evd_t_wait_terminal(evald.base, id, 30000), "completed");

    char path[256];
    snprintf(path, sizeof(path), "/v1/evaluations/%s", id);
    json_t *ev = call_json("GET", path, NULL, 200);
    ck_assert_str_eq(str(ev, "evaluation_id"), id);
    ck_assert_int_eq(json_integer_value(json_object_get(ev, "concurrency")), 1);
    ck_assert(json_is_integer(json_object_get(ev, "completed_at")));
    json_t *run = json_array_get(json_object_get(json_object_get(ev, "progress"), "runs"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(run, "attempt")), 1);
    ck_assert_int_ge(json_array_size(json_object_get(run, "generations")), 2);
    json_t *fc = json_array_get(json_object_get(run, "function_calls"), 0);
    ck_assert_str_eq(str(fc, "function_id"), "sweeper");
    ck_assert_str_eq(str(fc, "status"), "ok");
    ck_assert_ptr_nonnull(json_object_get(ev, "report"));
    json_decref(ev);

    snprintf(path, sizeof(path), "/v1/evaluations/%s/status", id);
    ev = call_json("GET", path, NULL, 200);
    ck_assert_str_eq(str(ev, "status"), "completed");
    json_decref(ev);

    /* A terminal evaluation's stream is its snapshot: a run event per run, then the
     * terminal status event, and the end. */
    snprintf(path, sizeof(path), "/v1/evaluations/%s/events", id);
    ck_assert_int_eq(call("GET", path, NULL, NULL, &r), 200);
    const char *st = strstr(r.body, "event: status\n");
    ck_assert_ptr_nonnull(st);
    ck_assert_ptr_null(strstr(st + 1, "event:"));
    int nrun = 0;
    for (const char *e = strstr(r.body, "event: run\n"); e; e = strstr(e + 1, "event: run\n"))
        nrun++;
    ck_assert_int_eq(nrun, 2);
    evd_t_resp_free(&r);
    expect_problem("GET", "/v1/evaluations/eval_nope/events", NULL, NULL, 404, "not_found");

    /* Rerun, reversed: a new evaluation that names its source. */
    snprintf(path, sizeof(path), "/v1/evaluations/%s/rerun", id);
    ck_assert_int_eq(call("POST", path, NULL, "{\"reverse_order\":true}", &r), 202);
    json_t *re = json_loads(r.body, 0, NULL);
    char *id2 = strdup(str(re, "evaluation_id"));
    json_decref(re);
    evd_t_resp_free(&r);
    ck_assert_str_eq(evd_t_wait_terminal(evald.base, id2, 30000), "completed");
    snprintf(path, sizeof(path), "/v1/evaluations/%s", id2);
    ev = call_json("GET", path, NULL, 200);
    ck_assert_str_eq(str(ev, "source_evaluation_id"), id);
    ck_assert_str_eq(str(json_object_get(ev, "request"), "execution_order"),
                     "balanced_treatment_first");
    json_decref(ev);
    snprintf(path, sizeof(path), "/v1/evaluations/%s/rerun", id);
    expect_problem("POST", path, NULL, "{\"surprise\":1}", 400, "invalid_request");

    /* The list pages by cursor, newest first. */
    json_t *page = call_json("GET", "/v1/evaluations?limit=1", NULL, 200);
    ck_assert_str_eq(str(json_array_get(json_object_get(page, "evaluations"), 0), "evaluation_id"),
                     id2);
    const char *cursor = str(page, "next_cursor");
    ck_assert_ptr_nonnull(cursor);
    snprintf(path, sizeof(path), "/v1/evaluations?limit=1&before=%s", cursor);
    json_decref(page);
    page = call_json("GET", path, NULL, 200);
    ck_assert_str_eq(str(json_array_get(json_object_get(page, "evaluations"), 0), "evaluation_id"),
                     id);
    json_decref(page);
    expect_problem("GET", "/v1/evaluations?limit=abc", NULL, NULL, 400, "invalid_request");
    expect_problem("GET", "/v1/evaluations?limit=0", NULL, NULL, 400, "invalid_request");
    expect_problem("GET", "/v1/evaluations?before=not-a-cursor", NULL, NULL, 400,
                   "invalid_request");

    /* Refused starts write nothing and name the field. */
    expect_problem("POST", "/v1/evaluations", NULL, "[1]", 400, "invalid_request");
    expect_problem("POST", "/v1/evaluations", NULL, "{\"runs\":0}", 400, "invalid_request");
    const char *text[] = {"Content-Type: text/plain", NULL};
    expect_problem("POST", "/v1/evaluations", text, "{}", 415, "unsupported_media_type");

    /* The built-in evaluators take the seed's EvaluatorInputV1. */
#define EVALUATOR_INPUT(output)                                                                    \
    "{\"evaluation_id\":\"eval_x\",\"run_id\":\"control-1\",\"role\":\"control\",\"session_id\":"  \
    "\"eval_x_c_1\",\"output\":" output ",\"arguments\":{\"expected\":\"OK\"},\"metrics\":"        \
    "{\"root_session_id\":\"eval_x_c_1\",\"complete\":true,\"totals\":{\"sessions\":1,\"turns\":"  \
    "1,"                                                                                           \
    "\"function_calls\":0,\"function_call_errors\":0},\"by_session\":[]}}"
    json_t *v = call_json("POST", "/v1/evaluators/exact", EVALUATOR_INPUT("\"OK\""), 200);
    ck_assert(json_is_true(json_object_get(v, "passed")));
    json_decref(v);
    v = call_json("POST", "/v1/evaluators/normalized_text", EVALUATOR_INPUT("\" ok. \""), 200);
    ck_assert(json_is_true(json_object_get(v, "passed")));
    json_decref(v);
    expect_problem("POST", "/v1/evaluators/exact", NULL, "{\"output\":1}", 400, "invalid_request");

    /* Delete: 200, then 404 for the same id and for the resource. */
    snprintf(path, sizeof(path), "/v1/evaluations/%s", id);
    v = call_json("DELETE", path, NULL, 200);
    ck_assert(json_is_true(json_object_get(v, "deleted")));
    json_decref(v);
    expect_problem("DELETE", path, NULL, NULL, 404, "not_found");
    expect_problem("GET", path, NULL, NULL, 404, "not_found");
    snprintf(path, sizeof(path), "/v1/evaluations/%s/status", id);
    expect_problem("GET", path, NULL, NULL, 404, "not_found");
    free(id);
    free(id2);
}
END_TEST

START_TEST(live_evaluation_conflicts_and_cancel)
{
    start(NULL);
    char *id = new_evaluation("slow", NULL);
    char path[256], body[256];
    snprintf(path, sizeof(path), "/v1/evaluations/%s/rerun", id);
    expect_problem("POST", path, NULL, NULL, 409, "conflict");
    snprintf(path, sizeof(path), "/v1/evaluations/%s", id);
    expect_problem("DELETE", path, NULL, NULL, 409, "conflict");
    snprintf(body, sizeof(body), "{\"evaluation_id\":\"%s\"}", id);
    json_t *j = call_json("POST", "/v1/functions/eval::delete", body, 409);
    json_decref(j);

    snprintf(path, sizeof(path), "/v1/evaluations/%s/cancel", id);
    j = call_json("POST", path, NULL, 200);
    ck_assert(json_is_true(json_object_get(j, "cancelled")));
    ck_assert_str_eq(str(j, "status"), "cancelled");
    json_decref(j);
    j = call_json("POST", path, NULL, 200);
    ck_assert(json_is_false(json_object_get(j, "cancelled")));
    json_decref(j);
    expect_problem("POST", "/v1/evaluations/eval_nope/cancel", NULL, NULL, 404, "not_found");
    expect_problem("POST", "/v1/evaluations/eval_nope/rerun", NULL, NULL, 404, "not_found");

    /* The mirror: null and {deleted:false} for unknown ids, 404 where the seed errs. */
    static const char unknown[] = "{\"evaluation_id\":\"eval_nope\"}";
    j = call_json("POST", "/v1/functions/eval::status", unknown, 200);
    ck_assert(json_is_null(j));
    json_decref(j);
    j = call_json("POST", "/v1/functions/eval::result", unknown, 200);
    ck_assert(json_is_null(j));
    json_decref(j);
    j = call_json("POST", "/v1/functions/eval::delete", unknown, 200);
    ck_assert(json_is_false(json_object_get(j, "deleted")));
    json_decref(j);
    json_decref(call_json("POST", "/v1/functions/eval::cancel", unknown, 404));
    json_decref(call_json("POST", "/v1/functions/eval::rerun", unknown, 404));
    json_decref(call_json("POST", "/v1/functions/eval::status", "{}", 400));
    j = call_json("POST", "/v1/functions/eval::list", "{\"limit\":5}", 200);
    ck_assert_int_eq(json_array_size(json_object_get(j, "evaluations")), 1);
    json_decref(j);

    /* The internal functions behind the mirror. */
    snprintf(body, sizeof(body), "{\"evaluation_id\":\"%s\",\"step\":0}", id);
    j = call_json("POST", "/v1/functions/eval::step", body, 200);
    ck_assert(json_is_true(json_object_get(j, "skipped")));
    ck_assert_str_eq(str(j, "status"), "cancelled");
    json_decref(j);
    j = call_json("POST", "/v1/functions/eval::sweep", "{}", 200);
    ck_assert(json_is_integer(json_object_get(j, "swept")));
    json_decref(j);
    j = call_json("POST", "/v1/functions/eval::on-turn-completed",
                  "{\"session_id\":\"ses_x\",\"terminal\":true}", 200);
    ck_assert(json_is_false(json_object_get(j, "woke")));
    json_decref(j);
    j = call_json("POST", "/v1/functions/eval::ui-content", "{\"path\":\"app.js\"}", 200);
    ck_assert_str_eq(str(j, "content_type"), "text/javascript; charset=utf-8");
    json_decref(j);
    json_decref(call_json("POST", "/v1/functions/eval::ui-content", "{\"path\":\"nope\"}", 404));
    json_decref(call_json("POST", "/v1/functions/eval::ui-content", "{\"path\":1}", 400));
    free(id);
}
END_TEST

START_TEST(session_event_stream)
{
    start(NULL);
    json_t *ses = call_json("POST", "/v1/sessions",
                            "{\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
                            "\"prompt\":\"Reply with exactly OK.\"}",
                            202);
    char path[256];
    snprintf(path, sizeof(path), "/v1/sessions/%s/events", str(ses, "session_id"));
    json_decref(ses);
    /* The stream follows the turn and ends by itself once nothing is in flight. */
    struct evd_t_resp r;
    ck_assert_int_eq(call("GET", path, NULL, NULL, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.body, "event: session\n"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"status\":\"done\""));
    evd_t_resp_free(&r);
    expect_problem("GET", "/v1/sessions/ses_nope/events", NULL, NULL, 404, "not_found");
}
END_TEST

START_TEST(bearer_token_and_query_token)
{
    start("EVALD_API_TOKEN=rest-token-0123456789");
    struct evd_t_resp r;
    expect_problem("GET", "/v1/models", NULL, NULL, 401, "unauthorized");
    const char *auth[] = {"Authorization: Bearer rest-token-0123456789", NULL};
    ck_assert_int_eq(call("GET", "/v1/models", auth, NULL, &r), 200);
    evd_t_resp_free(&r);
    static const char start_body[] =
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
        "\"control\":{\"prompt\":\"Reply with exactly OK.\"},\"treatment\":{\"prompt\":"
        "\"Please reply with exactly OK.\"},\"evaluator\":{\"function_id\":\"eval::assert::exact\","
        "\"arguments\":{\"expected\":\"OK\"}},\"runs\":1}";
    ck_assert_msg(call("POST", "/v1/functions/eval::start", auth, start_body, &r) == 200, "%s",
                  r.body);
    json_t *j = json_loads(r.body, 0, NULL);
    char path[256];
    snprintf(path, sizeof(path), "/v1/evaluations/%s/events", str(j, "evaluation_id"));
    json_decref(j);
    evd_t_resp_free(&r);
    expect_problem("GET", path, NULL, NULL, 401, "unauthorized");
    /* EventSource cannot send headers: the stream alone takes ?access_token=. */
    strcat(path, "?access_token=rest-token-0123456789");
    ck_assert_int_eq(call("GET", path, NULL, NULL, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"status\":\"completed\""));
    evd_t_resp_free(&r);
    expect_problem("GET", "/v1/models?access_token=rest-token-0123456789", NULL, NULL, 401,
                   "unauthorized");
    ck_assert_int_eq(call("GET", "/healthz", NULL, NULL, &r), 200);
    evd_t_resp_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rest");
    TCase *tc = tcase_create("rest");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, probes_document_and_console);
    tcase_add_test(tc, tools_lifecycle);
    tcase_add_test(tc, evaluation_resources);
    tcase_add_test(tc, live_evaluation_conflicts_and_cancel);
    tcase_add_test(tc, session_event_stream);
    tcase_add_test(tc, bearer_token_and_query_token);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
