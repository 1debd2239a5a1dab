/*
 * The re-score of an evaluation end to end (POST /v1/evaluations/{id}/rescore): the real
 * evald and evald-stub over loopback against a throwaway PostgreSQL per test. The stub is
 * scripted per prompt and in arrival order, so every output, verdict and count below
 * follows from the script and is worked out by hand in the comments; its request counters
 * prove that a re-score calls no model for the target.
 */
#define _GNU_SOURCE
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char db_url[1024];
static char db_name[64];
static struct evd_t_proc stub;
static struct evd_t_proc evald;
static char *evald_env[8];

/*
 * Three runs a variant, one pair at a time, control first: positions 1 control-1,
 * 2 treatment-1, 3 treatment-2, 4 control-2, 5 control-3, 6 treatment-3. The answers in
 * arrival order:
 *   control    "OK", "ok.", "OK"
 *   treatment  "OK", "Ok!", then a 400 (treatment-3 fails before any verdict)
 * normalized_text "OK" passes every answer; exact "OK" fails "ok." and "Ok!".
 */
static const char SCRIPT[] =
    "{\"rules\":["
    "{\"when\":{\"prompt_contains\":\"control\"},\"times\":1,\"reply\":{\"text\":\"OK\"},"
    "\"usage\":{\"input_tokens\":10,\"output_tokens\":2}},"
    "{\"when\":{\"prompt_contains\":\"control\"},\"times\":1,\"reply\":{\"text\":\"ok.\"},"
    "\"usage\":{\"input_tokens\":11,\"output_tokens\":3}},"
    "{\"when\":{\"prompt_contains\":\"control\"},\"reply\":{\"text\":\"OK\"},"
    "\"usage\":{\"input_tokens\":12,\"output_tokens\":2}},"
    "{\"when\":{\"prompt_contains\":\"treatment\"},\"times\":1,\"reply\":{\"text\":\"OK\"},"
    "\"usage\":{\"input_tokens\":20,\"output_tokens\":2}},"
    "{\"when\":{\"prompt_contains\":\"treatment\"},\"times\":1,\"reply\":{\"text\":\"Ok!\"},"
    "\"usage\":{\"input_tokens\":21,\"output_tokens\":4}},"
    "{\"when\":{\"prompt_contains\":\"treatment\"},"
    "\"fault\":{\"status\":400,\"message\":\"scripted refusal\"}}"
    "]}";

#define START_BODY(evaluator)                                                                      \
    "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"     \
    "\"control\":{\"prompt\":\"control: say OK\"},"                                                \
    "\"treatment\":{\"prompt\":\"treatment: say OK\"},\"evaluator\":" evaluator                    \
    ",\"runs\":3}"

#define NORMALIZED_OK                                                                              \
    "{\"function_id\":\"eval::assert::normalized_text\",\"arguments\":{\"expected\":\"OK\"}}"
#define EXACT_OK "{\"function_id\":\"eval::assert::exact\",\"arguments\":{\"expected\":\"OK\"}}"

static void start_evald(void)
{
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, evald_env), 0);
}

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, SCRIPT, NULL), 0);
    static char base[300], anthropic[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", stub.base);
    snprintf(anthropic, sizeof(anthropic), "ANTHROPIC_BASE_URL=%s", stub.base);
    char *env[] = {base,
                   anthropic,
                   "OPENAI_API_KEY=stub-key",
                   "ANTHROPIC_API_KEY=stub-key",
                   "EVALD_SWEEP_INTERVAL_MS=300",
                   "EVALD_LEASE_MS=1500",
                   NULL};
    memcpy(evald_env, env, sizeof(env));
    start_evald();
}

static void teardown(void)
{
    evd_t_stop(&evald, SIGTERM, 10000);
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
}

/* ---- helpers ------------------------------------------------------------------------------- */

static json_t *call(const char *method, const char *path, const char *body, long *status)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    return evd_t_http_json(method, url, body, status);
}

static json_t *at(json_t *v, const char *dotted)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", dotted);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(k)) : json_object_get(v, k);
    return v;
}

#define ASSERT_INT(v, dotted, want)                                                                \
    do {                                                                                           \
        json_t *v_ = at((v), (dotted));                                                            \
        ck_assert_msg(json_is_integer(v_), "%s is not an integer", (dotted));                      \
        ck_assert_msg(json_integer_value(v_) == (want), "%s = %lld, want %lld", (dotted),          \
                      (long long)json_integer_value(v_), (long long)(want));                       \
    } while (0)

#define ASSERT_NEAR(v, dotted, want)                                                               \
    do {                                                                                           \
        json_t *v_ = at((v), (dotted));                                                            \
        ck_assert_msg(json_is_number(v_), "%s is not a number", (dotted));                         \
        double got_ = json_number_value(v_), want_ = (want);                                       \
        ck_assert_msg(fabs(got_ - want_) <= 1e-9, "%s = %.12g, want %.12g", (dotted), got_,        \
                      want_);                                                                      \
    } while (0)

#define ASSERT_STR(v, dotted, want)                                                                \
    do {                                                                                           \
        const char *s_ = json_string_value(at((v), (dotted)));                                     \
        ck_assert_msg(s_ != NULL && strcmp(s_, (want)) == 0, "%s = %s, want %s", (dotted),         \
                      s_ ? s_ : "(none)", (want));                                                 \
    } while (0)

static long count_rows(const char *table)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
    char *n = evd_t_sql(db_url, sql);
    ck_assert_ptr_nonnull(n);
    long v = atol(n);
    free(n);
    return v;
}

/* evaluations, runs and jobs rows together: what a refused request must leave alone */
static long written(void)
{
    return count_rows("evaluations") * 1000000 + count_rows("runs") * 1000 + count_rows("jobs");
}

static char *start(const char *body)
{
    long st = 0;
    json_t *r = call("POST", "/v1/evaluations", body, &st);
    if (st != 202)
        evd_t_dump_log(&evald);
    ck_assert_int_eq(st, 202);
    char *id = strdup(json_string_value(json_object_get(r, "evaluation_id")));
    json_decref(r);
    return id;
}

static json_t *get(const char *id)
{
    char path[160];
    snprintf(path, sizeof(path), "/v1/evaluations/%s", id);
    long st = 0;
    json_t *doc = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    return doc;
}

static json_t *wait_terminal(const char *id)
{
    const char *st = evd_t_wait_terminal(evald.base, id, 60000);
    if (strcmp(st, "timeout") == 0) {
        evd_t_dump_log(&evald);
        ck_abort_msg("evaluation %s not terminal", id);
    }
    return get(id);
}

/* POST /rescore; the status, the answer in *out (new reference) when out is not NULL. */
static long rescore(const char *id, const char *body, json_t **out)
{
    char path[160];
    snprintf(path, sizeof(path), "/v1/evaluations/%s/rescore", id);
    long st = 0;
    json_t *r = call("POST", path, body, &st);
    if (out != NULL)
        *out = r;
    else
        json_decref(r);
    return st;
}

/* The problem detail of a refused request, checked against `detail`. */
static void refused(const char *method, const char *path, const char *body, long status,
                    const char *detail)
{
    long st = 0;
    json_t *r = call(method, path, body, &st);
    ck_assert_msg(st == status, "%s %s answered %ld, want %ld", method, path, st, status);
    const char *d = json_string_value(json_object_get(r, "detail"));
    ck_assert_msg(d != NULL && strcmp(d, detail) == 0, "%s %s: detail %s, want %s", method, path,
                  d ? d : "(none)", detail);
    json_decref(r);
}

static long stub_api(const char *api)
{
    json_t *s = evd_t_stub_stats(&stub);
    long n = api == NULL ? (long)json_integer_value(json_object_get(s, "requests"))
                         : (long)json_integer_value(json_object_get(json_object_get(s, "by_api"),
                                                                    api));
    json_decref(s);
    return n;
}

/* The function mirror's answer for the new evaluation, checked against the seed. */
static json_t *mirror(const char *function, const char *id)
{
    char body[160];
    snprintf(body, sizeof(body), "{\"evaluation_id\":\"%s\"}", id);
    long st = 0;
    json_t *r = evd_t_call(evald.base, function, body, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_msg(evd_t_valid_response(function, r), "%s of %s does not match the seed",
                  function, id);
    return r;
}

/* ---- tests --------------------------------------------------------------------------------- */

START_TEST(rescore_calls_no_model_and_gives_the_new_verdicts)
{
    char *id = start(START_BODY(NORMALIZED_OK));
    json_t *src = wait_terminal(id);
    /* normalized_text passes all five answers; treatment-3 failed at the provider */
    ASSERT_STR(src, "status", "completed");
    ASSERT_INT(src, "report.control_aggregate.passed", 3);
    ASSERT_INT(src, "report.treatment_aggregate.passed", 2);
    ASSERT_INT(src, "report.treatment_aggregate.evaluated_runs", 2);
    ASSERT_NEAR(src, "report.delta.pass_rate", 0.0);
    long requests = stub_api(NULL);
    ck_assert_int_eq(requests, 6);

    json_t *r = NULL;
    ck_assert_int_eq(rescore(id, "{\"evaluator\":" EXACT_OK "}", &r), 202);
    ASSERT_STR(r, "status", "queued");
    ASSERT_STR(r, "source_evaluation_id", id);
    /* five runs reached their evaluator; treatment-3 keeps its failure */
    ASSERT_INT(r, "rescored_runs", 5);
    char *rid = strdup(json_string_value(json_object_get(r, "evaluation_id")));
    ck_assert_str_ne(rid, id);
    ck_assert_int_eq(strncmp(rid, "eval_", 5), 0);
    json_decref(r);

    json_t *doc = wait_terminal(rid);
    /* not one request reached the model */
    ck_assert_int_eq(stub_api(NULL), requests);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_STR(doc, "source_evaluation_id", id);
    ASSERT_STR(doc, "derivation", "rescore");
    ASSERT_STR(doc, "request.source_evaluation_id", id);
    ASSERT_STR(doc, "request.evaluator.function_id", "eval::assert::exact");
    ASSERT_STR(doc, "report.source_evaluation_id", id);
    ASSERT_STR(doc, "report.evaluator.function_id", "eval::assert::exact");
    ASSERT_STR(doc, "report.evaluation_id", rid);
    /* the rest of the request is the source's */
    json_t *req = json_deep_copy(json_object_get(doc, "request"));
    json_t *sreq = json_deep_copy(json_object_get(src, "request"));
    json_object_del(req, "evaluator");
    json_object_del(req, "source_evaluation_id");
    json_object_del(sreq, "evaluator");
    ck_assert(json_equal(req, sreq));
    json_decref(req);
    json_decref(sreq);

    /* exact "OK": control "OK", "ok.", "OK" pass 2 of 3; treatment "OK", "Ok!" pass 1 of the
     * 2 evaluated. pass rates 2/3 and 1/2: delta 1/2 − 2/3 = −1/6 (the source's was 0). */
    ASSERT_INT(doc, "report.control_aggregate.runs", 3);
    ASSERT_INT(doc, "report.control_aggregate.evaluated_runs", 3);
    ASSERT_INT(doc, "report.control_aggregate.passed", 2);
    ASSERT_NEAR(doc, "report.control_aggregate.pass_rate", 2.0 / 3.0);
    ASSERT_INT(doc, "report.treatment_aggregate.runs", 3);
    ASSERT_INT(doc, "report.treatment_aggregate.evaluated_runs", 2);
    ASSERT_INT(doc, "report.treatment_aggregate.passed", 1);
    ASSERT_NEAR(doc, "report.treatment_aggregate.pass_rate", 0.5);
    ASSERT_NEAR(doc, "report.delta.pass_rate", 0.5 - 2.0 / 3.0);
    ck_assert(json_is_false(at(doc, "report.eligible")));
    /* the target's figures are the stored ones, so their medians and deltas are the
     * source's */
    ASSERT_INT(doc, "report.control_aggregate.median_total_tokens",
               json_integer_value(at(src, "report.control_aggregate.median_total_tokens")));
    ck_assert(json_equal(at(doc, "report.delta.median_total_tokens"),
                         at(src, "report.delta.median_total_tokens")));

    /* Run by run: the stored output, metrics and benchmark; the new verdict. */
    static const struct {
        const char *run_id, *output, *status;
        int passed; /* -1: no verdict */
    } want[] = {{"control-1", "OK", "completed", 1},  {"treatment-1", "OK", "completed", 1},
                {"treatment-2", "Ok!", "completed", 0}, {"control-2", "ok.", "completed", 0},
                {"control-3", "OK", "completed", 1},  {"treatment-3", NULL, "failed", -1}};
    json_t *runs = at(doc, "progress.runs"), *sruns = at(src, "progress.runs");
    ck_assert_uint_eq(json_array_size(runs), 6);
    for (size_t i = 0; i < 6; i++) {
        json_t *run = json_array_get(runs, i), *old = json_array_get(sruns, i);
        ASSERT_STR(run, "run_id", want[i].run_id);
        ASSERT_STR(old, "run_id", want[i].run_id);
        ASSERT_STR(run, "status", want[i].status);
        ck_assert(json_equal(json_object_get(run, "output"), json_object_get(old, "output")));
        ck_assert(json_equal(json_object_get(run, "metrics"), json_object_get(old, "metrics")));
        ck_assert(
            json_equal(json_object_get(run, "benchmark"), json_object_get(old, "benchmark")));
        if (want[i].output != NULL) {
            ASSERT_STR(run, "output", want[i].output);
            ck_assert(json_is_object(json_object_get(run, "metrics")));
            ck_assert(json_is_true(json_object_get(old, "passed")));
            ck_assert_int_eq(json_is_true(json_object_get(run, "passed")), want[i].passed);
            ck_assert_int_eq(json_is_true(at(run, "evaluation.passed")), want[i].passed);
            /* the new evaluator's own answer, not the source's */
            ASSERT_STR(old, "evaluation.reason", "normalized output matched arguments.expected");
            if (want[i].passed) {
                ASSERT_STR(run, "evaluation.reason", "output exactly matched arguments.expected");
            } else {
                char reason[160];
                snprintf(reason, sizeof(reason),
                         "output did not exactly match arguments.expected (actual=\"%s\", "
                         "expected=\"OK\")",
                         want[i].output);
                ASSERT_STR(run, "evaluation.reason", reason);
            }
            ASSERT_INT(run, "attempt", 1);
        } else {
            /* failed before a verdict: kept as it was, failure and completion time */
            ck_assert(json_is_null(json_object_get(run, "passed")) ||
                      json_object_get(run, "passed") == NULL);
            ck_assert(json_equal(json_object_get(run, "failures"),
                                 json_object_get(old, "failures")));
            ck_assert(json_equal(json_object_get(run, "completed_at"),
                                 json_object_get(old, "completed_at")));
            ASSERT_STR(run, "failures.0.phase", "send");
        }
        /* a run of the new evaluation has the new evaluation's session */
        ck_assert(strstr(json_string_value(json_object_get(run, "session_id")), rid) != NULL);
    }

    /* Every function and route of an evaluation works on the new id, in the seed's shape. */
    json_t *res = mirror("eval::result", rid);
    ASSERT_STR(res, "status", "completed");
    ASSERT_STR(res, "report.source_evaluation_id", id);
    ck_assert(json_equal(at(res, "report.delta"), at(doc, "report.delta")));
    json_decref(res);
    json_t *status = mirror("eval::status", rid);
    ASSERT_INT(status, "total_runs", 6);
    ASSERT_INT(status, "terminal_runs", 6);
    ASSERT_INT(status, "passed_runs", 3);
    ASSERT_INT(status, "failed_runs", 2);
    json_decref(status);
    long st = 0;
    json_t *list = evd_t_call(evald.base, "eval::list", "{}", &st);
    ck_assert_int_eq(st, 200);
    ck_assert(evd_t_valid_response("eval::list", list));
    ASSERT_STR(list, "evaluations.0.evaluation_id", rid);
    ASSERT_INT(list, "evaluations.0.passed_runs", 3);
    json_decref(list);
    char path[200];
    snprintf(path, sizeof(path), "/v1/evaluations/%s/status", rid);
    status = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_INT(status, "failed_runs", 2);
    json_decref(status);
    snprintf(path, sizeof(path), "/v1/evaluations/%s/events", rid);
    struct evd_t_resp ev;
    char url[400];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    ck_assert_int_eq(evd_t_http("GET", url, NULL, NULL, 0, &ev), 0);
    ck_assert_int_eq(ev.status, 200);
    ck_assert_ptr_nonnull(strstr(ev.body, "\"status\":\"completed\""));
    evd_t_resp_free(&ev);

    /* A rerun of the re-score runs everything again (it is no re-score itself) */
    snprintf(path, sizeof(path), "/v1/evaluations/%s/rerun", rid);
    json_t *rr = call("POST", path, "{}", &st);
    ck_assert_int_eq(st, 202);
    const char *rrid = json_string_value(json_object_get(rr, "evaluation_id"));
    json_t *rdoc = wait_terminal(rrid);
    ASSERT_STR(rdoc, "derivation", "rerun");
    ASSERT_STR(rdoc, "source_evaluation_id", rid);
    ck_assert_int_eq(stub_api(NULL), requests + 6);
    json_decref(rdoc);
    json_decref(rr);

    /* The copy is the re-score's own: deleting the source changes nothing in it */
    snprintf(path, sizeof(path), "/v1/evaluations/%s", id);
    json_decref(call("DELETE", path, NULL, &st));
    ck_assert_int_eq(st, 200);
    json_t *again = get(rid);
    ck_assert(json_equal(json_object_get(again, "report"), json_object_get(doc, "report")));
    json_decref(again);

    json_decref(doc);
    json_decref(src);
    free(rid);
    free(id);
}
END_TEST

START_TEST(refusals_name_the_field_and_write_nothing)
{
    char *id = start(START_BODY(NORMALIZED_OK));
    json_decref(wait_terminal(id));
    char path[200];
    snprintf(path, sizeof(path), "/v1/evaluations/%s/rescore", id);
    long before = written();

    /* The body itself. */
    refused("POST", path, NULL, 400, "request body must be a JSON object");
    refused("POST", path, "[]", 400, "request body must be a JSON object");
    refused("POST", path, "{}", 400, "evaluator is required");
    refused("POST", path, "{\"evaluator\":null}", 400, "evaluator is required");
    refused("POST", path, "{\"evaluator\":" EXACT_OK ",\"runs\":3}", 400,
            "runs is not a known field");

    /* The evaluator: a start refuses each with the very same message. */
    static const struct {
        const char *evaluator, *detail;
    } cases[] = {
        {"\"exact\"", "evaluator must be an object"},
        {"{}", "evaluator.function_id is required"},
        {"{\"function_id\":7}", "evaluator.function_id must be a string"},
        {"{\"function_id\":\"  \"}", "evaluator.function_id cannot be empty"},
        {"{\"function_id\":\"eval::assert::exact\",\"colour\":1}",
         "evaluator.colour is not a known field"},
        {"{\"function_id\":\"no::such\"}",
         "evaluator.function_id no::such is neither a built-in evaluator (eval::assert::exact, "
         "eval::assert::normalized_text, eval::assert::trajectory, eval::assert::agent_review) "
         "nor a registered tool"},
        {"{\"function_id\":\"eval::assert::agent_review\",\"arguments\":{\"model\":7}}",
         "evaluator.arguments.model must be a string"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[1024];
        snprintf(body, sizeof(body), "{\"evaluator\":%s}", cases[i].evaluator);
        refused("POST", path, body, 400, cases[i].detail);
        snprintf(body, sizeof(body),
                 "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
                 "\"openai\"},\"control\":{\"prompt\":\"a\"},\"treatment\":{\"prompt\":\"b\"},"
                 "\"evaluator\":%s}",
                 cases[i].evaluator);
        refused("POST", "/v1/evaluations", body, 400, cases[i].detail);
    }

    /* An unknown id is 404, after the body's own checks. */
    refused("POST", "/v1/evaluations/eval_0123456789abcdef0123456789abcdef/rescore",
            "{\"evaluator\":" EXACT_OK "}", 404,
            "evaluation not found: eval_0123456789abcdef0123456789abcdef");
    refused("POST", "/v1/evaluations/eval_0123456789abcdef0123456789abcdef/rescore", "{}", 400,
            "evaluator is required");
    ck_assert_int_eq(written(), before);
    free(id);
}
END_TEST

START_TEST(a_live_source_conflicts_and_a_cancelled_one_is_rescored_at_once)
{
    /* Every answer stalls for 20 s: the source stays running. */
    ck_assert_int_eq(
        evd_t_stub_script(&stub, "{\"default\":{\"latency_ms\":20000,\"reply\":{\"text\":\"OK\"}}}"),
        200);
    char *id = start(START_BODY(NORMALIZED_OK));
    char path[200], detail[256];
    snprintf(detail, sizeof(detail),
             "evaluation %s has not finished; only a finished evaluation can be re-scored", id);
    snprintf(path, sizeof(path), "/v1/evaluations/%s/rescore", id);
    long before = written();
    refused("POST", path, "{\"evaluator\":" EXACT_OK "}", 409, detail);
    /* a bad body is still named first */
    refused("POST", path, "{\"evaluator\":{}}", 400, "evaluator.function_id is required");
    ck_assert_int_eq(written(), before);

    /* Cancelled, every run cancelled: nothing to score again; the re-score is terminal at
     * once, with the cancelled runs as they were and no model request. */
    snprintf(path, sizeof(path), "/v1/evaluations/%s/cancel", id);
    long st = 0;
    json_decref(call("POST", path, NULL, &st));
    ck_assert_int_eq(st, 200);
    json_t *src = wait_terminal(id);
    ASSERT_STR(src, "status", "cancelled");
    long requests = stub_api(NULL);
    json_t *r = NULL;
    ck_assert_int_eq(rescore(id, "{\"evaluator\":" EXACT_OK "}", &r), 202);
    ASSERT_INT(r, "rescored_runs", 0);
    const char *rid = json_string_value(json_object_get(r, "evaluation_id"));
    json_t *doc = wait_terminal(rid);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_INT(doc, "report.control_aggregate.evaluated_runs", 0);
    for (size_t i = 0; i < 6; i++) {
        json_t *run = json_array_get(at(doc, "progress.runs"), i);
        ASSERT_STR(run, "status", "cancelled");
        ASSERT_STR(run, "failures.0.phase", "cancel");
    }
    ck_assert_int_eq(stub_api(NULL), requests);
    json_decref(doc);
    json_decref(r);
    json_decref(src);
    free(id);
}
END_TEST

/* The reviewer (Anthropic Messages) answers GREEN with 100 + 20 tokens, after `latency`. */
static void script_reviewer(int latency_ms)
{
    char script[1024];
    snprintf(script, sizeof(script),
             "{\"rules\":[{\"when\":{\"api\":\"messages\"},\"latency_ms\":%d,\"reply\":{\"json\":"
             "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":{\"covered\":[\"answer\"]}}}},"
             "\"usage\":{\"input_tokens\":100,\"output_tokens\":20}}]}",
             latency_ms);
    ck_assert_int_eq(evd_t_stub_script(&stub, script), 200);
}

#define AGENT_REVIEW                                                                               \
    "{\"evaluator\":{\"function_id\":\"eval::assert::agent_review\",\"arguments\":{\"model\":"    \
    "\"claude-reviewer\",\"provider\":\"anthropic\",\"instructions\":\"The answer must be OK.\"," \
    "\"green_schema\":{\"properties\":{\"covered\":{\"type\":\"array\",\"items\":{\"type\":"     \
    "\"string\"}}},\"required\":[\"covered\"]},\"red_schema\":{\"properties\":{\"why\":"          \
    "{\"type\":\"string\"}},\"required\":[\"why\"]}}}}"

START_TEST(an_agent_review_makes_the_judge_calls_only_and_survives_a_crash)
{
    char *id = start(START_BODY(EXACT_OK));
    json_t *src = wait_terminal(id);
    /* exact: control-2 and treatment-2 fail */
    ASSERT_INT(src, "report.control_aggregate.passed", 2);
    long target = stub_api("responses") + stub_api("chat");
    ck_assert_int_eq(target, 6);
    ck_assert_int_eq(stub_api("messages"), 0);

    /* Each review takes 1.5 s; evald is killed while the first ones are in flight and
     * started again: the leases run out and the runs are scored by the new process. */
    script_reviewer(1500);
    json_t *r = NULL;
    long st = rescore(id, AGENT_REVIEW, &r);
    if (st != 202)
        evd_t_dump_log(&evald);
    ck_assert_int_eq(st, 202);
    ASSERT_INT(r, "rescored_runs", 5);
    char *rid = strdup(json_string_value(json_object_get(r, "evaluation_id")));
    json_decref(r);
    int64_t deadline = evd_mono_ms() + 20000;
    while (stub_api("messages") == 0 && evd_mono_ms() < deadline)
        usleep(50 * 1000);
    ck_assert_int_gt(stub_api("messages"), 0);
    evd_t_stop(&evald, SIGKILL, 5000);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM runs WHERE evaluation_id = '%s' AND status = 'completed'", rid);
    char *done = evd_t_sql(db_url, sql);
    ck_assert_ptr_nonnull(done);
    ck_assert_msg(atoi(done) < 5, "every run was scored before the kill (%s)", done);
    free(done);
    start_evald();

    json_t *doc = wait_terminal(rid);
    ASSERT_STR(doc, "status", "completed");
    /* GREEN every time: all five evaluated runs pass now; treatment-3 is still failed */
    ASSERT_INT(doc, "report.control_aggregate.passed", 3);
    ASSERT_INT(doc, "report.treatment_aggregate.passed", 2);
    ASSERT_INT(doc, "report.treatment_aggregate.evaluated_runs", 2);
    ASSERT_NEAR(doc, "report.delta.pass_rate", 0.0);
    json_t *runs = at(doc, "progress.runs");
    json_t *sruns = at(src, "progress.runs");
    for (size_t i = 0; i < 5; i++) {
        json_t *run = json_array_get(runs, i), *old = json_array_get(sruns, i);
        ck_assert(json_is_true(json_object_get(run, "passed")));
        ck_assert(json_is_true(at(run, "evaluation.passed")));
        ck_assert(!json_equal(json_object_get(run, "evaluation"),
                              json_object_get(old, "evaluation")));
        ck_assert(json_equal(json_object_get(run, "output"), json_object_get(old, "output")));
        /* the target's tokens, not the judge's: the stored benchmark is untouched */
        ck_assert_ptr_null(at(run, "benchmark.judge_total_tokens"));
        ck_assert_int_lt(json_integer_value(at(run, "benchmark.total_tokens")), 100);
    }
    /* the model behind the target saw nothing; the reviewer saw at least one call a run
     * (a review cut off by the kill is made again) */
    ck_assert_int_eq(stub_api("responses") + stub_api("chat"), target);
    ck_assert_int_ge(stub_api("messages"), 5);
    json_decref(doc);
    json_decref(src);
    free(rid);
    free(id);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("evaluation_rescore");
    TCase *tc = tcase_create("evaluation_rescore");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, rescore_calls_no_model_and_gives_the_new_verdicts);
    tcase_add_test(tc, refusals_name_the_field_and_write_nothing);
    tcase_add_test(tc, a_live_source_conflicts_and_a_cancelled_one_is_rescored_at_once);
    tcase_add_test(tc, an_agent_review_makes_the_judge_calls_only_and_survives_a_crash);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
