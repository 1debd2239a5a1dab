/*
 * End-to-end tests of the durable engine: real PostgreSQL, real evald processes and
 * evald-stub over loopback. Covers the balanced plan and the report, pairs in flight with
 * concurrency, the function mirror against the seed contract, refused input that writes
 * nothing, cancel, delete, rerun, and SSE: the streams that follow progress, end at SIGTERM,
 * read again after a failed read and find a change that came without its notification.
 * Crash recovery, scale-out, graceful hand-back and batched finalization are in
 * test_engine_recovery.c; the fixture is tests/support/engine_fixtures.c.
 */
#include <check.h>
#include <curl/curl.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/support/engine_fixtures.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static const char PROMPT_REQUEST[] =
    "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
    "\"control\":{\"label\":\"reply\",\"prompt\":\"Reply with exactly OK.\",\"system_prompt\":"
    "\"Follow the user request exactly.\"},\"treatment\":{\"label\":\"return\",\"prompt\":"
    "\"Return exactly the text OK.\",\"system_prompt\":\"Follow the user request exactly.\"},"
    "\"evaluator\":{\"function_id\":\"eval::assert::normalized_text\",\"arguments\":{"
    "\"expected\":\"OK\"}},\"runs\":3}";

static void sha256_of(const char *s, char out[65])
{
    evd_sha256_hex(s, strlen(s), out);
}

START_TEST(balanced_prompt_comparison_end_to_end)
{
    struct evd_t_proc p;
    et_start_evald(&p, NULL, NULL);
    char *id = et_start_eval(p.base, PROMPT_REQUEST);
    ck_assert(strncmp(id, "eval_", 5) == 0 && strlen(id) == 37);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 30000), "completed");

    json_t *res = et_result_of(p.base, id);
    ck_assert_str_eq(json_string_value(json_object_get(res, "status")), "completed");
    json_t *report = json_object_get(res, "report");
    ck_assert_ptr_nonnull(report);
    /* Balanced order C,T,T,C,C,T with pair positions 1,2,1,2,1,2. */
    json_t *runs = json_object_get(json_object_get(res, "progress"), "runs");
    ck_assert_int_eq(json_array_size(runs), 6);
    static const char *roles[] = {"control", "treatment", "treatment", "control", "control",
                                  "treatment"};
    static const char *ids[] = {"control-1", "treatment-1", "treatment-2",
                                "control-2", "control-3",   "treatment-3"};
    for (size_t i = 0; i < 6; i++) {
        json_t *r = json_array_get(runs, i);
        ck_assert_str_eq(json_string_value(json_object_get(r, "role")), roles[i]);
        ck_assert_str_eq(json_string_value(json_object_get(r, "run_id")), ids[i]);
        ck_assert_int_eq(json_integer_value(json_object_get(r, "execution_position")), i + 1);
        ck_assert_int_eq(json_integer_value(json_object_get(r, "pair_position")), i % 2 + 1);
        ck_assert_str_eq(json_string_value(json_object_get(r, "status")), "completed");
        char sid[80];
        snprintf(sid, sizeof(sid), "%s_%c_%s", id, roles[i][0], ids[i] + strlen(roles[i]) + 1);
        ck_assert_str_eq(json_string_value(json_object_get(r, "session_id")), sid);
        /* The stub answers "Reply with exactly OK." with OK, the other wording not. */
        ck_assert_int_eq(json_is_true(json_object_get(r, "passed")), roles[i][0] == 'c');
        ck_assert_ptr_nonnull(json_object_get(r, "benchmark"));
    }
    json_t *eo = json_object_get(report, "effective_execution_order");
    ck_assert_str_eq(json_string_value(json_array_get(eo, 0)), "1:control:1");
    ck_assert_str_eq(json_string_value(json_array_get(eo, 2)), "3:treatment:2");
    /* Aggregates, delta, eligibility. */
    json_t *ca = json_object_get(report, "control_aggregate");
    json_t *ta = json_object_get(report, "treatment_aggregate");
    ck_assert_int_eq(json_integer_value(json_object_get(ca, "runs")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(ca, "passed")), 3);
    ck_assert(json_real_value(json_object_get(ca, "pass_rate")) == 1.0);
    ck_assert(json_real_value(json_object_get(ta, "pass_rate")) == 0.0);
    ck_assert(json_real_value(json_object_get(json_object_get(report, "delta"), "pass_rate")) ==
              -1.0);
    ck_assert(json_is_false(json_object_get(report, "eligible")));
    /* Hashes: raw prompt bytes, and the system prompt when present. */
    char hex[65];
    sha256_of("Reply with exactly OK.", hex);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(report, "control"), "prompt_sha256")),
        hex);
    sha256_of("Return exactly the text OK.", hex);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(report, "treatment"), "prompt_sha256")),
        hex);
    sha256_of("Follow the user request exactly.", hex);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(report, "control"),
                                                       "system_prompt_sha256")),
                     hex);
    /* arguments_sha256 is the hash of the canonical arguments {"expected":"OK"}. */
    sha256_of("{\"expected\":\"OK\"}", hex);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(report, "evaluator"),
                                                       "arguments_sha256")),
                     hex);
    json_t *shared = json_object_get(report, "shared_artifacts");
    ck_assert_uint_eq(strlen(json_string_value(json_object_get(shared, "model_sha256"))), 64);
    ck_assert_uint_eq(strlen(json_string_value(json_object_get(shared, "limits_sha256"))), 64);
    json_decref(res);

    /* status and list through the mirror, valid against the contract. */
    char body[128];
    long code;
    snprintf(body, sizeof(body), "{\"evaluation_id\":\"%s\"}", id);
    json_t *st = evd_t_call(p.base, "eval::status", body, &code);
    ck_assert(evd_t_valid_response("eval::status", st));
    ck_assert_int_eq(json_integer_value(json_object_get(st, "terminal_runs")), 6);
    ck_assert_int_eq(json_integer_value(json_object_get(st, "passed_runs")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(st, "failed_runs")), 3);
    json_decref(st);
    json_t *list = evd_t_call(p.base, "eval::list", "{\"limit\":5,\"_caller_worker_id\":\"w\"}",
                              &code);
    ck_assert(evd_t_valid_response("eval::list", list));
    json_t *first = json_array_get(json_object_get(list, "evaluations"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(first, "evaluation_id")), id);
    ck_assert_str_eq(json_string_value(json_object_get(first, "control_label")), "reply");
    ck_assert(json_is_false(json_object_get(first, "eligible")));
    json_decref(list);
    free(id);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

struct bad_case {
    const char *function;
    const char *body;
    long status;
    const char *detail;
};

static const struct bad_case bad_cases[] = {
    {"eval::start", "[]", 400, NULL},
    {"eval::start", "{\"dimension\":\"prompt\"}", 400, NULL},
    {"eval::start",
     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"  \"},\"control\":{\"prompt\":\"a\"},"
     "\"treatment\":{\"prompt\":\"b\"}}",
     400, "model.model cannot be empty"},
    {"eval::start",
     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"m\",\"provider\":\" \"},\"control\":{"
     "\"prompt\":\"a\"},\"treatment\":{\"prompt\":\"b\"}}",
     400, "model.provider cannot be empty when supplied"},
    {"eval::start",
     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"m\"},\"control\":{\"prompt\":\"\"},"
     "\"treatment\":{\"prompt\":\"b\"}}",
     400, "control.prompt cannot be empty"},
    {"eval::start",
     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"m\"},\"control\":{\"prompt\":\"a\"},"
     "\"treatment\":{\"prompt\":\"a\"}}",
     400, "prompt comparison requires different prompts"},
    {"eval::start",
     "{\"dimension\":\"system_prompt\",\"model\":{\"model\":\"m\"},\"control\":{\"prompt\":\"a\","
     "\"system_prompt\":\"x\"},\"treatment\":{\"prompt\":\"b\",\"system_prompt\":\"y\"}}",
     400, "system_prompt comparison requires identical prompts"},
    {"eval::start",
     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
     "\"control\":{\"prompt\":\"a\"},\"treatment\":{\"prompt\":\"b\"},\"runs\":1000}",
     400, "runs must be between 1 and 100"},
    {"eval::start",
     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\"},\"control\":{\"prompt\":\"a\"},"
     "\"treatment\":{\"prompt\":\"b\"},\"runs\":\"3\"}",
     400, "runs must be an integer"},
    {"eval::start",
     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"colour\":1},\"control\":{"
     "\"prompt\":\"a\"},\"treatment\":{\"prompt\":\"b\"}}",
     400, "model.colour is not a known field"},
    {"eval::start",
     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
     "\"control\":{\"prompt\":\"a\"},\"treatment\":{\"prompt\":\"b\"},\"limits\":{\"execution\":"
     "{\"max_turns\":0}}}",
     400, "limits.execution.max_turns must be greater than zero"},
    {"eval::start",
     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
     "\"control\":{\"prompt\":\"a\"},\"treatment\":{\"prompt\":\"b\"},\"concurrency\":17}",
     400, "concurrency must be between 1 and 16"},
    {"eval::start",
     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"nope\"},"
     "\"control\":{\"prompt\":\"a\"},\"treatment\":{\"prompt\":\"b\"}}",
     400, NULL},
    {"eval::start",
     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
     "\"control\":{\"prompt\":\"a\"},\"treatment\":{\"prompt\":\"b\"},\"evaluator\":{"
     "\"function_id\":\"no::such\"}}",
     400, NULL},
    {"eval::list", "{\"limit\":0}", 400, "limit must be between 1 and 100"},
    {"eval::list", "{\"limit\":101}", 400, "limit must be between 1 and 100"},
    {"eval::status", "{}", 400, "evaluation_id is required"},
    {"eval::status", "{\"evaluation_id\":7}", 400, "evaluation_id must be a string"},
    {"eval::cancel", "{\"evaluation_id\":\"eval_unknown\"}", 404, NULL},
    {"eval::rerun", "{\"evaluation_id\":\"eval_unknown\"}", 404, NULL},
    {"eval::rerun", "{\"evaluation_id\":\"eval_unknown\",\"reverse_order\":\"yes\"}", 400,
     "reverse_order must be a boolean"},
    {"eval::assert::exact",
     "{\"evaluation_id\":\"e\",\"run_id\":\"r\",\"role\":\"control\",\"session_id\":\"s\","
     "\"output\":1,\"metrics\":{\"root_session_id\":\"s\",\"complete\":true,\"by_session\":[],"
     "\"totals\":{\"sessions\":1,\"turns\":1,\"function_calls\":0,\"function_call_errors\":0}},"
     "\"arguments\":{}}",
     400, "eval::assert::exact requires evaluator arguments.expected"},
};

START_TEST(refused_input_writes_nothing)
{
    struct evd_t_proc p;
    et_start_evald(&p, NULL, NULL);
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *c = &bad_cases[i];
        long status = 0;
        json_t *r = evd_t_call(p.base, c->function, c->body, &status);
        ck_assert_msg(status == c->status, "case %zu (%s): status %ld, want %ld", i, c->function,
                      status, c->status);
        ck_assert_str_eq(json_string_value(json_object_get(r, "code")),
                         c->status == 404 ? "not_found" : "invalid_request");
        if (c->detail)
            ck_assert_str_eq(json_string_value(json_object_get(r, "detail")), c->detail);
        else
            ck_assert(json_string_length(json_object_get(r, "detail")) > 0);
        json_decref(r);
    }
    /* Unknown ids: null from status/result, deleted:false from delete. */
    long status;
    json_t *r = evd_t_call(p.base, "eval::status", "{\"evaluation_id\":\"eval_x\"}", &status);
    ck_assert(json_is_null(r) && status == 200);
    ck_assert(evd_t_valid_response("eval::status", r));
    json_decref(r);
    r = evd_t_call(p.base, "eval::result", "{\"evaluation_id\":\"eval_x\"}", &status);
    ck_assert(json_is_null(r) && status == 200);
    json_decref(r);
    r = evd_t_call(p.base, "eval::delete", "{\"evaluation_id\":\"eval_x\"}", &status);
    ck_assert(json_is_false(json_object_get(r, "deleted")));
    ck_assert(evd_t_valid_response("eval::delete", r));
    json_decref(r);
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/evaluations/eval_x", p.base);
    json_decref(evd_t_http_json("GET", url, NULL, &status));
    ck_assert_int_eq(status, 404);
    char *n = evd_t_sql(et_db_url, "SELECT (SELECT count(*) FROM evaluations) + (SELECT count(*)"
                                   " FROM runs) + (SELECT count(*) FROM jobs)");
    ck_assert_str_eq(n, "0");
    free(n);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(builtin_evaluators_behind_the_mirror)
{
    struct evd_t_proc p;
    et_start_evald(&p, NULL, NULL);
    static const char METRICS[] = "\"metrics\":{\"root_session_id\":\"s\",\"complete\":true,"
                                  "\"by_session\":[],\"totals\":{\"sessions\":1,\"turns\":1,"
                                  "\"function_calls\":0,\"function_call_errors\":0}}";
    char body[1024];
    long status;
    snprintf(body, sizeof(body),
             "{\"evaluation_id\":\"e\",\"run_id\":\"r\",\"role\":\"control\",\"session_id\":\"s\","
             "\"output\":\"  Olá,   mundo!  \",%s,\"arguments\":{\"expected\":\"olá, mundo\"}}",
             METRICS);
    json_t *r = evd_t_call(p.base, "eval::assert::normalized_text", body, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(evd_t_valid_response("eval::assert::normalized_text", r));
    ck_assert(json_is_true(json_object_get(r, "passed")));
    json_decref(r);
    snprintf(body, sizeof(body),
             "{\"evaluation_id\":\"e\",\"run_id\":\"r\",\"role\":\"control\",\"session_id\":\"s\","
             "\"output\":1,%s,\"arguments\":{\"expected\":1.0}}",
             METRICS);
    r = evd_t_call(p.base, "eval::assert::exact", body, &status);
    ck_assert(evd_t_valid_response("eval::assert::exact", r));
    ck_assert(json_is_false(json_object_get(r, "passed")));
    json_decref(r);
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/evaluators/exact", p.base);
    snprintf(body, sizeof(body),
             "{\"evaluation_id\":\"e\",\"run_id\":\"r\",\"role\":\"control\",\"session_id\":\"s\","
             "\"output\":{\"a\":[1,2]},%s,\"arguments\":{\"expected\":{\"a\":[1,2]}}}",
             METRICS);
    r = evd_t_http_json("POST", url, body, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(json_is_true(json_object_get(r, "passed")));
    json_decref(r);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

static const char SLOW_SCRIPT[] =
    "{\"rules\":[{\"when\":{\"prompt_contains\":\"SLOW\"},\"latency_ms\":20000,\"reply\":{"
    "\"text\":\"late\"}}],\"default\":{\"reply\":{\"text\":\"OK\"},\"usage\":{\"input_tokens\":"
    "10,\"output_tokens\":2}}}";

START_TEST(cancel_delete_and_rerun)
{
    ck_assert_int_eq(evd_t_stub_script(&et_stub, SLOW_SCRIPT), 200);
    struct evd_t_proc p;
    et_start_evald(&p, NULL, NULL);
    char *body = et_small_request("SLOW", 2, 1);
    char *id = et_start_eval(p.base, body);
    free(body);
    et_wait_active(p.base, id);

    /* Delete of a live evaluation: 409, nothing changes. */
    char url[256], req[128];
    snprintf(url, sizeof(url), "%s/v1/evaluations/%s", p.base, id);
    long status;
    json_t *r = evd_t_http_json("DELETE", url, NULL, &status);
    ck_assert_int_eq(status, 409);
    ck_assert(strstr(json_string_value(json_object_get(r, "detail")), "is still Running") != NULL);
    json_decref(r);

    /* Cancel during the slow provider call returns promptly. */
    snprintf(req, sizeof(req), "{\"evaluation_id\":\"%s\"}", id);
    int64_t t0 = evd_mono_ms();
    r = evd_t_call(p.base, "eval::cancel", req, &status);
    int64_t took = evd_mono_ms() - t0;
    ck_assert_int_eq(status, 200);
    ck_assert(evd_t_valid_response("eval::cancel", r));
    ck_assert(json_is_true(json_object_get(r, "cancelled")));
    json_decref(r);
    ck_assert_msg(took < 1000, "cancel took %lld ms", (long long)took);
    r = evd_t_call(p.base, "eval::cancel", req, &status); /* idempotent */
    ck_assert(json_is_false(json_object_get(r, "cancelled")));
    ck_assert_str_eq(json_string_value(json_object_get(r, "status")), "cancelled");
    json_decref(r);

    json_t *res = et_result_of(p.base, id);
    ck_assert_str_eq(json_string_value(json_object_get(res, "status")), "cancelled");
    ck_assert_ptr_nonnull(json_object_get(res, "report"));
    json_t *run0 = json_array_get(json_object_get(json_object_get(res, "progress"), "runs"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(run0, "status")), "cancelled");
    json_t *f = json_array_get(json_object_get(run0, "failures"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(f, "phase")), "cancel");
    json_decref(res);
    /* The in-flight provider call was abandoned: its late answer changed nothing. */
    usleep(300000);
    res = et_result_of(p.base, id);
    run0 = json_array_get(json_object_get(json_object_get(res, "progress"), "runs"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(run0, "status")), "cancelled");
    json_decref(res);
    char *events = evd_t_sql(et_db_url, "SELECT count(*) FROM completion_events");
    ck_assert_str_eq(events, "1");
    free(events);

    /* Rerun reversed: a new id whose plan starts with treatment. */
    ck_assert_int_eq(evd_t_stub_script(&et_stub, "{\"rules\":[]}"), 200);
    snprintf(req, sizeof(req), "{\"evaluation_id\":\"%s\",\"reverse_order\":true}", id);
    r = evd_t_call(p.base, "eval::rerun", req, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(evd_t_valid_response("eval::rerun", r));
    const char *rid = json_string_value(json_object_get(r, "evaluation_id"));
    ck_assert_str_ne(rid, id);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, rid, 30000), "completed");
    res = et_result_of(p.base, rid);
    json_t *rreq = json_object_get(res, "request");
    ck_assert_str_eq(json_string_value(json_object_get(rreq, "execution_order")),
                     "balanced_treatment_first");
    ck_assert_str_eq(json_string_value(json_object_get(rreq, "source_evaluation_id")), id);
    json_t *rruns = json_object_get(json_object_get(res, "progress"), "runs");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(rruns, 0), "role")),
                     "treatment");
    json_decref(res);
    json_decref(r);

    /* Delete of a terminal evaluation. */
    r = evd_t_http_json("DELETE", url, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(json_is_true(json_object_get(r, "deleted")));
    json_decref(r);
    json_decref(evd_t_http_json("GET", url, NULL, &status));
    ck_assert_int_eq(status, 404);
    free(id);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* Whether the last `status` event of a stream's text has "status":"<want>". */
static bool last_status_is(const char *body, const char *want)
{
    const char *last = NULL;
    for (const char *s = strstr(body, "event: status"); s; s = strstr(s + 1, "event: status"))
        last = s;
    char field[64];
    snprintf(field, sizeof(field), "\"status\":\"%s\"", want);
    return last != NULL && strstr(last, field) != NULL;
}

START_TEST(server_sent_events_follow_progress)
{
    struct evd_t_proc p;
    et_start_evald(&p, NULL, NULL);
    char *id = et_start_eval(p.base, PROMPT_REQUEST);
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/evaluations/%s/events", p.base, id);
    struct evd_t_resp r;
    ck_assert_int_eq(evd_t_http("GET", url, NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "text/event-stream");
    /* The stream ends by itself with the terminal status. */
    ck_assert_msg(last_status_is(r.body, "completed"), "%s", r.body);
    ck_assert(strstr(r.body, "event: run") != NULL);
    evd_t_resp_free(&r);
    snprintf(url, sizeof(url), "%s/v1/evaluations/eval_nope/events", p.base);
    evd_t_http("GET", url, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 404);
    evd_t_resp_free(&r);
    free(id);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(pairs_in_flight_with_concurrency)
{
    ck_assert_int_eq(evd_t_stub_script(&et_stub, "{\"rules\":[],\"default\":{\"latency_ms\":1000,"
                                                 "\"reply\":{\"text\":\"OK\"}}}"),
                     200);
    ck_assert_int_eq(evd_t_stub_reset(&et_stub), 200);
    struct evd_t_proc p;
    et_start_evald(&p, NULL, NULL);
    char *body = et_small_request("conc", 4, 4);
    char *id = et_start_eval(p.base, body);
    free(body);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 30000), "completed");
    /* Four pairs at once, each pair's runs one after the other: the stub saw four calls in
     * flight together, never more (counted at the stub, not timed: a 1 s call leaves room
     * for a slow claim on a loaded machine). */
    json_t *stats = evd_t_stub_stats(&et_stub);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "max_in_flight")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "requests")), 8);
    json_decref(stats);
    json_t *res = et_result_of(p.base, id);
    json_t *runs = json_object_get(json_object_get(res, "report"), "runs");
    /* Inside each pair the planned order held: the second started after the first ended. */
    for (size_t k = 0; k < json_array_size(runs); k += 2) {
        json_t *a = json_array_get(runs, k), *b = json_array_get(runs, k + 1);
        ck_assert_int_ge(json_integer_value(json_object_get(b, "started_at")),
                         json_integer_value(json_object_get(a, "completed_at")));
    }
    json_decref(res);
    free(id);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

struct stream_arg {
    char url[512];
    struct evd_t_resp resp;
    int rc;
};

static void *read_stream(void *arg)
{
    struct stream_arg *a = arg;
    a->rc = evd_t_http("GET", a->url, NULL, NULL, 0, &a->resp);
    return NULL;
}

START_TEST(sigterm_ends_open_streams_and_exits_cleanly)
{
    ck_assert_int_eq(evd_t_stub_script(&et_stub, SLOW_SCRIPT), 200);
    struct evd_t_proc p;
    et_start_evald(&p, "EVALD_API_TOKEN=stream-token-0123456789", NULL);
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/functions/eval::start", p.base);
    char *body = et_small_request("SLOW", 1, 1);
    const char *auth[] = {"Authorization: Bearer stream-token-0123456789", NULL};
    struct evd_t_resp r;
    evd_t_http("POST", url, auth, body, strlen(body), &r);
    free(body);
    ck_assert_int_eq(r.status, 200);
    json_t *started = json_loads(r.body, 0, NULL);
    evd_t_resp_free(&r);
    const char *id = json_string_value(json_object_get(started, "evaluation_id"));
    /* EventSource cannot send headers: the stream takes the token as a query argument. */
    struct stream_arg a = {.rc = -1};
    snprintf(a.url, sizeof(a.url), "%s/v1/evaluations/%s/events?access_token=stream-token-0123456789",
             p.base, id);
    pthread_t t;
    pthread_create(&t, NULL, read_stream, &a);
    usleep(500000);
    int64_t t0 = evd_mono_ms();
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
    pthread_join(t, NULL);
    ck_assert_msg(evd_mono_ms() - t0 < 5000, "shutdown took too long");
    ck_assert_int_eq(a.rc, 0);
    ck_assert_int_eq(a.resp.status, 200);
    ck_assert(strstr(a.resp.body, "event: status") != NULL);
    evd_t_resp_free(&a.resp);
    /* Without the token the stream is refused. */
    et_start_evald(&p, "EVALD_API_TOKEN=stream-token-0123456789", NULL);
    snprintf(url, sizeof(url), "%s/v1/evaluations/%s/events", p.base, id);
    evd_t_http("GET", url, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 401);
    evd_t_resp_free(&r);
    json_decref(started);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* A stream read as it arrives: whether any of it came in a window the test opens. */
struct live_stream {
    char url[512];
    pthread_mutex_t mu;
    struct evd_buf body;
    bool window_open, got_in_window;
    CURLcode rc;
};

static size_t live_write(char *data, size_t size, size_t n, void *arg)
{
    struct live_stream *l = arg;
    pthread_mutex_lock(&l->mu);
    evd_buf_append(&l->body, data, size * n);
    l->got_in_window = l->got_in_window || l->window_open;
    pthread_mutex_unlock(&l->mu);
    return size * n;
}

static void *read_live(void *arg)
{
    struct live_stream *l = arg;
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, l->url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, live_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, l);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 60000L);
    l->rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    return NULL;
}

/*
 * One try of a_stream_reads_again_after_a_failed_read; false when it proved nothing: the
 * stream and the request that holds the pool were served by the same HTTP thread (one of
 * EVALD_HTTP_THREADS, as the connections are accepted), so the stream could not read at
 * all while that request waited, and nothing of it arrived meanwhile.
 */
static bool stream_retry_try(void)
{
    struct evd_t_proc p;
    et_start_evald(&p, "EVALD_DB_POOL_SIZE=1", NULL);
    char *body = et_small_request("RETRY", 1, 1);
    char *id = et_start_eval(p.base, body);
    free(body);
    struct live_stream st = {.rc = CURLE_OK};
    pthread_mutex_init(&st.mu, NULL);
    struct stream_arg ds = {.rc = -1};
    snprintf(st.url, sizeof(st.url), "%s/v1/evaluations/%s/events", p.base, id);
    snprintf(ds.url, sizeof(ds.url), "%s/v1/datasets", p.base);
    pthread_t ts, td;
    pthread_create(&ts, NULL, read_live, &st);
    usleep(300 * 1000);
    /* The listing of datasets waits for a lock the test holds, on the pool's connection. */
    PGconn *lock = PQconnectdb(et_db_url);
    ck_assert_int_eq(PQstatus(lock), CONNECTION_OK);
    PGresult *lr = PQexec(lock, "BEGIN; LOCK TABLE datasets IN ACCESS EXCLUSIVE MODE");
    ck_assert_msg(PQresultStatus(lr) == PGRES_COMMAND_OK, "%s", PQerrorMessage(lock));
    PQclear(lr);
    pthread_create(&td, NULL, read_stream, &ds); /* a GET, read to its end */
    /* The evaluation ends meanwhile (its two calls take 3 s). The stream's read of the
     * first run's end waits 5 s for the pool and fails; the read of the changes that came
     * meanwhile, the evaluation's last, fails 5 s later, and no change comes after it. */
    char q[200];
    snprintf(q, sizeof(q), "SELECT status FROM evaluations WHERE id = '%s'", id);
    char *status = NULL;
    for (int64_t t0 = evd_mono_ms(); evd_mono_ms() - t0 < 20000; usleep(100 * 1000)) {
        free(status);
        status = evd_t_sql(et_db_url, q);
        if (status != NULL && strcmp(status, "completed") == 0)
            break;
    }
    ck_assert_str_eq(status, "completed");
    free(status);
    pthread_mutex_lock(&st.mu);
    st.window_open = true;
    pthread_mutex_unlock(&st.mu);
    usleep(11000 * 1000);
    pthread_mutex_lock(&st.mu);
    st.window_open = false;
    bool shared_thread = !st.got_in_window;
    pthread_mutex_unlock(&st.mu);
    PQclear(PQexec(lock, "COMMIT"));
    PQfinish(lock);
    pthread_join(td, NULL);
    ck_assert_int_eq(ds.resp.status, 200);
    ck_assert_msg(ds.resp.elapsed_ms > 13000, "the listing took %ld ms", ds.resp.elapsed_ms);
    evd_t_resp_free(&ds.resp);
    /* Read again within a second or so: the stream ends with the terminal status. */
    int64_t t1 = evd_mono_ms();
    pthread_join(ts, NULL);
    evd_buf_append(&st.body, "", 1);
    if (!shared_thread) {
        ck_assert_msg(evd_mono_ms() - t1 < 5000,
                      "the stream ended %lld ms after the pool was free",
                      (long long)(evd_mono_ms() - t1));
        ck_assert_int_eq(st.rc, CURLE_OK);
        ck_assert_msg(strstr(st.body.data, ": database unavailable, retrying") != NULL, "%s",
                      st.body.data);
        ck_assert_msg(last_status_is(st.body.data, "completed"), "%s", st.body.data);
    }
    evd_buf_free(&st.body);
    pthread_mutex_destroy(&st.mu);
    free(id);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
    return !shared_thread;
}

/*
 * A stream whose read of the state fails reads it again a second later, instead of
 * waiting for another change: the evaluation's last change, whose read found the
 * handlers' one pool connection held (by a request that waits for a lock) for the 5 s a
 * read waits, still reaches the stream, which ends with the terminal status.
 */
START_TEST(a_stream_reads_again_after_a_failed_read)
{
    ck_assert_int_eq(evd_t_stub_script(&et_stub, "{\"rules\":[{\"when\":{\"prompt_contains\":"
                                                 "\"RETRY\"},\"latency_ms\":1500,\"reply\":{"
                                                 "\"text\":\"OK\"}}],\"default\":{\"reply\":"
                                                 "{\"text\":\"OK\"}}}"),
                     200);
    /* With 8 HTTP threads, three tries that all prove nothing come once in 512 runs. */
    int tries = 0;
    while (!stream_retry_try()) {
        fprintf(stderr, "a_stream_reads_again_after_a_failed_read: the stream shared the "
                        "blocked request's HTTP thread; trying again\n");
        ck_assert_msg(++tries < 3, "three tries in a row shared the HTTP thread");
    }
}
END_TEST

/*
 * A change that comes without its notification (as when the keeper's LISTEN connection
 * was reconnecting) still reaches an open stream: its keep-alive reads the state again.
 * The test ends the evaluation behind evald's back, with an UPDATE and no NOTIFY.
 */
START_TEST(a_change_without_its_notification_reaches_a_stream_at_its_keepalive)
{
    ck_assert_int_eq(evd_t_stub_script(&et_stub, "{\"rules\":[{\"when\":{\"prompt_contains\":"
                                                 "\"LOST\"},\"latency_ms\":40000,\"reply\":{"
                                                 "\"text\":\"late\"}}]}"),
                     200);
    struct evd_t_proc p;
    et_start_evald(&p, NULL, NULL);
    char *body = et_small_request("LOST", 1, 1);
    char *id = et_start_eval(p.base, body);
    free(body);
    et_wait_active(p.base, id);
    struct stream_arg st = {.rc = -1};
    snprintf(st.url, sizeof(st.url), "%s/v1/evaluations/%s/events", p.base, id);
    pthread_t t;
    pthread_create(&t, NULL, read_stream, &st);
    usleep(500 * 1000);
    char q[300];
    snprintf(q, sizeof(q),
             "UPDATE evaluations SET status = 'cancelled', updated_at = updated_at + 1"
             " WHERE id = '%s' RETURNING status",
             id);
    char *status = evd_t_sql(et_db_url, q);
    ck_assert_str_eq(status, "cancelled");
    free(status);
    int64_t t0 = evd_mono_ms();
    pthread_join(t, NULL);
    int64_t took = evd_mono_ms() - t0;
    /* At the keep-alive, 15 s after the stream's last event; the call ends at 40 s. */
    ck_assert_msg(took > 10000 && took < 25000, "the stream ended after %lld ms",
                  (long long)took);
    ck_assert_int_eq(st.rc, 0);
    ck_assert_msg(last_status_is(st.resp.body, "cancelled"), "%s", st.resp.body);
    ck_assert_msg(strstr(st.resp.body, ": keep-alive") == NULL, "%s", st.resp.body);
    evd_t_resp_free(&st.resp);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
    ck_assert_int_ge(
        evd_t_log_count(&p, "an event stream found a change no notification announced"), 1);
    free(id);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, et_setup, et_teardown);
    tcase_add_test(tc, balanced_prompt_comparison_end_to_end);
    tcase_add_test(tc, refused_input_writes_nothing);
    tcase_add_test(tc, builtin_evaluators_behind_the_mirror);
    tcase_add_test(tc, cancel_delete_and_rerun);
    tcase_add_test(tc, server_sent_events_follow_progress);
    tcase_add_test(tc, pairs_in_flight_with_concurrency);
    tcase_add_test(tc, sigterm_ends_open_streams_and_exits_cleanly);
    tcase_add_test(tc, a_stream_reads_again_after_a_failed_read);
    tcase_add_test(tc, a_change_without_its_notification_reaches_a_stream_at_its_keepalive);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
