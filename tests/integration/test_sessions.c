/*
 * End-to-end tests of ad-hoc sessions and of eval::compare-sessions: the real evald and
 * evald-stub binaries over loopback and a throwaway PostgreSQL database per test. The stub
 * is scripted per prompt with fixed usage and latency, and a priced provider (openai-chat
 * kind, input $1 and output $2 per million tokens) points at it, so every token count,
 * cost, delta and percentage below is computed from the script's numbers.
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "schema/jsonschema.h"
#include "tests/support/itest.h"

static char db_url[1024];
static char db_name[64];
static char providers_path[64];
static struct evd_t_proc stub;
static struct evd_t_proc evald;

/* ALPHA and BRAVO answer at once; CHARLIE first calls a function (denied by the default
 * policy, so one function-call error), then answers after 4 s; SLOW answers after 30 s. */
static const char SCRIPT[] =
    "{\"rules\":["
    "{\"when\":{\"prompt_contains\":\"ALPHA\"},\"reply\":{\"text\":\"alpha\"},"
    " \"usage\":{\"input_tokens\":100,\"output_tokens\":20}},"
    "{\"when\":{\"prompt_contains\":\"BRAVO\"},\"reply\":{\"text\":\"bravo\"},"
    " \"usage\":{\"input_tokens\":300,\"output_tokens\":40}},"
    "{\"when\":{\"prompt_contains\":\"CHARLIE\",\"has_tool_result\":false},"
    " \"reply\":{\"tool_calls\":[{\"name\":\"agent_trigger\",\"arguments\":"
    "{\"function_id\":\"weather::now\",\"payload\":{}}}]},"
    " \"usage\":{\"input_tokens\":50,\"output_tokens\":10}},"
    "{\"when\":{\"prompt_contains\":\"CHARLIE\",\"has_tool_result\":true},\"latency_ms\":4000,"
    " \"reply\":{\"text\":\"charlie\"},\"usage\":{\"input_tokens\":70,\"output_tokens\":15}},"
    "{\"when\":{\"prompt_contains\":\"SLOW\"},\"latency_ms\":30000,\"reply\":{\"text\":\"late\"},"
    " \"usage\":{\"input_tokens\":5,\"output_tokens\":5}}"
    "],\"default\":{\"reply\":{\"text\":\"ok\"},\"usage\":{\"input_tokens\":10,\"output_tokens\":2}"
    "}}";

#define MODEL "{\"model\":\"stub-model\",\"provider\":\"stubp\"}"

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, SCRIPT, NULL), 0);
    snprintf(providers_path, sizeof(providers_path), "/tmp/evald-providers-XXXXXX");
    int fd = mkstemp(providers_path);
    ck_assert_int_ge(fd, 0);
    char doc[1024];
    int n = snprintf(doc, sizeof(doc),
                     "{\"providers\":[{\"name\":\"stubp\",\"kind\":\"openai-chat\","
                     "\"base_url\":\"%s/v1\",\"models\":[{\"id\":\"stub-model\","
                     "\"input_usd_per_mtok\":1.0,\"cached_input_usd_per_mtok\":0.1,"
                     "\"output_usd_per_mtok\":2.0}]}]}",
                     stub.base);
    ck_assert_int_eq(write(fd, doc, (size_t)n), n);
    close(fd);
    static char env_file[128];
    snprintf(env_file, sizeof(env_file), "EVALD_PROVIDERS_FILE=%s", providers_path);
    char *env[] = {env_file, "EVALD_WORKERS=6", "EVALD_LOG_LEVEL=warn", NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
}

static void teardown(void)
{
    /* evald must stop cleanly: under the sanitizers a leak or an error makes it exit non-zero. */
    int rc = evd_t_stop(&evald, SIGTERM, 15000);
    if (rc != 0)
        evd_t_dump_log(&evald);
    evd_t_stop(&stub, SIGTERM, 5000);
    unlink(providers_path);
    evd_t_db_drop(db_name);
    ck_assert_msg(rc == 0, "evald exited with status %d", rc);
}

/* ---- helpers --------------------------------------------------------------------------- */

static json_t *call(const char *method, const char *path, const char *body, long *status)
{
    char url[2048];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    long st = 0;
    json_t *j = evd_t_http_json(method, url, body, &st);
    if (status != NULL)
        *status = st;
    return j;
}

/* Creates a session and returns its id (static buffer per call site is the caller's). */
static void create(const char *body, long want, char *id, size_t n)
{
    long st = 0;
    json_t *j = call("POST", "/v1/sessions", body, &st);
    ck_assert_msg(st == want, "POST /v1/sessions answered %ld: %s", st,
                  j ? json_dumps(j, 0) : "(no body)");
    const char *sid = json_string_value(json_object_get(j, "session_id"));
    ck_assert_ptr_nonnull(sid);
    ck_assert_int_eq(strlen(sid), 36);
    ck_assert(strncmp(sid, "ses_", 4) == 0);
    snprintf(id, n, "%s", sid);
    json_decref(j);
}

static json_t *get_session(const char *id)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/sessions/%s", id);
    long st = 0;
    json_t *j = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    return j;
}

/* Waits until the session's status is `status`. */
static void wait_status(const char *id, const char *status, int timeout_ms)
{
    int64_t deadline = evd_mono_ms() + timeout_ms;
    for (;;) {
        json_t *j = get_session(id);
        const char *st = json_string_value(json_object_get(j, "status"));
        bool ok = st != NULL && strcmp(st, status) == 0;
        char seen[32];
        snprintf(seen, sizeof(seen), "%s", st ? st : "?");
        json_decref(j);
        if (ok)
            return;
        if (evd_mono_ms() > deadline) {
            evd_t_dump_log(&evald);
            ck_abort_msg("session %s is %s, not %s, after %d ms", id, seen, status, timeout_ms);
        }
        usleep(50 * 1000);
    }
}

static json_t *compare(const char *ids, const char *baseline, long *status)
{
    char path[1024];
    if (baseline != NULL)
        snprintf(path, sizeof(path), "/v1/sessions/compare?ids=%s&baseline=%s", ids, baseline);
    else
        snprintf(path, sizeof(path), "/v1/sessions/compare?ids=%s", ids);
    return call("GET", path, NULL, status);
}

static json_t *item(json_t *cmp, size_t i)
{
    return json_array_get(json_object_get(cmp, "sessions"), i);
}

static json_t *summary(json_t *cmp, size_t i, const char *metric)
{
    return json_object_get(json_object_get(item(cmp, i), "summary"), metric);
}

static json_t *delta(json_t *cmp, size_t i, const char *metric, const char *which)
{
    return json_object_get(json_object_get(json_object_get(item(cmp, i), "deltas"), metric), which);
}

static bool lifecycle(json_t *cmp, size_t i, const char *what)
{
    return json_is_true(json_object_get(json_object_get(item(cmp, i), "lifecycle"), what));
}

#define ASSERT_INT(v, want)                                                                        \
    do {                                                                                           \
        json_t *v_ = (v);                                                                          \
        ck_assert_msg(json_is_integer(v_), "%s is not an integer", #v);                            \
        ck_assert_int_eq(json_integer_value(v_), (want));                                          \
    } while (0)

#define ASSERT_NEAR(v, want)                                                                       \
    do {                                                                                           \
        json_t *v_ = (v);                                                                          \
        ck_assert_msg(json_is_number(v_), "%s is not a number", #v);                               \
        double got_ = json_number_value(v_), want_ = (want);                                       \
        ck_assert_msg(fabs(got_ - want_) <= 1e-9 + 1e-9 * fabs(want_), "%s = %.12g, want %.12g",   \
                      #v, got_, want_);                                                            \
    } while (0)

/* Checks a comparison against the contract's SessionComparisonV1 schema. */
static void assert_contract(json_t *cmp)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/contract/functions.json", evd_t_source_dir());
    json_t *doc = json_load_file(path, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    json_t *schema = NULL;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(doc, "functions"), i, f)
    {
        if (strcmp(json_string_value(json_object_get(f, "name")), "eval::compare-sessions") == 0)
            schema = json_object_get(f, "response_schema");
    }
    ck_assert_ptr_nonnull(schema);
    struct evd_err err = {0};
    struct evd_jsonschema *v = evd_jsonschema_new(schema, &err);
    ck_assert_msg(v != NULL, "schema: %s", err.msg);
    struct evd_schema_error errs[4];
    size_t n = evd_jsonschema_validate(v, cmp, errs, 4);
    ck_assert_msg(n == 0, "comparison does not match the contract: %s %s",
                  n ? errs[0].instance_path : "", n ? errs[0].message : "");
    evd_jsonschema_free(v);
    json_decref(doc);
}

/* The events of a finished text/event-stream body: [{event, data}] (new reference). */
static json_t *parse_events(const char *body)
{
    json_t *out = json_array();
    const char *p = body;
    while (p && *p) {
        const char *end = strstr(p, "\n\n");
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *block = strndup(p, len);
        char *ev = strstr(block, "event: "), *data = strstr(block, "data: ");
        if (ev && data) {
            char *nl = strchr(ev, '\n');
            if (nl)
                *nl = '\0';
            json_array_append_new(out, json_pack("{s:s, s:o}", "event", ev + 7, "data",
                                                 json_loads(data + 6, 0, NULL)));
        }
        free(block);
        p = end ? end + 2 : NULL;
    }
    return out;
}

/* ---- tests ------------------------------------------------------------------------------- */

START_TEST(three_sessions_compared_live)
{
    char a[64], b[64], c[64], ids[256], path[1024];
    create("{\"title\":\"alpha\","
           "\"model\":" MODEL ",\"prompt\":\"ALPHA: say hi\"}",
           202, a, sizeof(a));
    create("{\"title\":\"bravo\",\"model\":" MODEL ",\"prompt\":\"BRAVO: say hi\"}", 202, b,
           sizeof(b));
    create("{\"title\":\"charlie\",\"model\":" MODEL ",\"prompt\":\"CHARLIE: say hi\","
           "\"metadata\":{\"team\":\"c\"}}",
           202, c, sizeof(c));
    snprintf(ids, sizeof(ids), "%s,%s,%s", a, b, c);
    wait_status(a, "done", 15000);
    wait_status(b, "done", 15000);

    /* The comparison stream, opened while CHARLIE runs, ends with final figures. */
    struct evd_t_resp stream;
    snprintf(path, sizeof(path), "%s/v1/sessions/compare/events?ids=%s&baseline=%s", evald.base,
             ids, a);

    /* CHARLIE has run its first generation and function call: partial figures. (A
     * snapshot is also taken after the generation, before the call: wait past it.) */
    json_t *cmp = NULL;
    int64_t deadline = evd_mono_ms() + 10000;
    for (;;) {
        long st = 0;
        cmp = compare(ids, a, &st);
        ck_assert_int_eq(st, 200);
        if (json_is_object(json_object_get(item(cmp, 2), "metrics")) &&
            json_integer_value(summary(cmp, 2, "function_calls")) == 1)
            break;
        json_decref(cmp);
        ck_assert_msg(evd_mono_ms() < deadline, "no partial metrics for CHARLIE");
        usleep(50 * 1000);
    }
    assert_contract(cmp);
    ck_assert_str_eq(json_string_value(json_object_get(cmp, "schema_version")), "1");
    ck_assert_str_eq(json_string_value(json_object_get(cmp, "baseline_session_id")), a);
    ck_assert_str_eq(json_string_value(json_object_get(item(cmp, 0), "session_id")), a);
    ck_assert_str_eq(json_string_value(json_object_get(item(cmp, 2), "session_id")), c);
    ck_assert_str_eq(json_string_value(json_object_get(item(cmp, 2), "kind")), "session");
    ck_assert_str_eq(json_string_value(json_object_get(item(cmp, 2), "title")), "charlie");
    ck_assert_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(item(cmp, 2), "session"), "metadata"), "team")),
        "c");
    ck_assert(!lifecycle(cmp, 2, "terminal"));
    ck_assert(!lifecycle(cmp, 2, "complete"));
    ck_assert(lifecycle(cmp, 2, "partial"));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(item(cmp, 2), "lifecycle"),
                                                       "turn_status")),
                     "running");
    ck_assert(json_is_false(json_object_get(json_object_get(item(cmp, 2), "metrics"), "complete")));
    ck_assert(lifecycle(cmp, 0, "terminal") && lifecycle(cmp, 0, "complete"));
    ck_assert(!lifecycle(cmp, 0, "partial"));
    ASSERT_INT(summary(cmp, 2, "generations"), 1);
    ASSERT_INT(summary(cmp, 2, "input_tokens"), 50);
    ASSERT_INT(summary(cmp, 2, "total_tokens"), 60);
    ASSERT_INT(summary(cmp, 2, "function_calls"), 1);
    ASSERT_INT(summary(cmp, 2, "function_call_errors"), 1);
    ASSERT_NEAR(summary(cmp, 2, "function_error_rate"), 1.0);
    ASSERT_INT(delta(cmp, 2, "total_tokens", "absolute"), 60 - 120);
    ASSERT_NEAR(delta(cmp, 2, "total_tokens", "percent"), -50.0);
    /* Wall time of a running turn counts up to now. */
    ck_assert_int_gt(json_integer_value(summary(cmp, 2, "wall_time_ms")), 0);
    json_decref(cmp);

    ck_assert_int_eq(evd_t_http("GET", path, NULL, NULL, 0, &stream), 0);
    ck_assert_int_eq(stream.status, 200);
    ck_assert_str_eq(stream.content_type, "text/event-stream");
    json_t *events = parse_events(stream.body);
    evd_t_resp_free(&stream);
    ck_assert_int_ge(json_array_size(events), 2);
    json_t *first = json_object_get(json_array_get(events, 0), "data");
    json_t *last = json_object_get(json_array_get(events, json_array_size(events) - 1), "data");
    ck_assert(lifecycle(first, 2, "partial"));
    ck_assert(!lifecycle(last, 2, "partial"));
    ck_assert(lifecycle(last, 2, "terminal"));
    json_decref(events);

    /* Final figures. */
    long st = 0;
    cmp = compare(ids, a, &st);
    ck_assert_int_eq(st, 200);
    assert_contract(cmp);
    for (size_t i = 0; i < 3; i++) {
        ck_assert(lifecycle(cmp, i, "terminal") && lifecycle(cmp, i, "complete"));
        ck_assert(!lifecycle(cmp, i, "partial"));
        ck_assert_int_eq(json_array_size(json_object_get(item(cmp, i), "errors")), 0);
    }
    /* ALPHA: 100 in, 20 out, $0.00014. BRAVO: 300/40, $0.00038. CHARLIE: 120/25, 1 call. */
    ASSERT_INT(summary(cmp, 0, "total_tokens"), 120);
    ASSERT_INT(summary(cmp, 1, "total_tokens"), 340);
    ASSERT_INT(summary(cmp, 2, "generations"), 2);
    ASSERT_INT(summary(cmp, 2, "input_tokens"), 120);
    ASSERT_INT(summary(cmp, 2, "output_tokens"), 25);
    ASSERT_INT(summary(cmp, 2, "total_tokens"), 145);
    ASSERT_NEAR(summary(cmp, 2, "tokens_per_generation"), 72.5);
    ASSERT_NEAR(summary(cmp, 0, "cost_usd"), 140e-6);
    ASSERT_NEAR(summary(cmp, 1, "cost_usd"), 380e-6);
    ASSERT_NEAR(summary(cmp, 2, "cost_usd"), 170e-6);
    ASSERT_NEAR(summary(cmp, 2, "cost_per_generation_usd"), 85e-6);
    ASSERT_INT(summary(cmp, 2, "trace_count"), 1);
    ASSERT_INT(summary(cmp, 2, "span_count"), 4); /* run, 2 generations, 1 function */
    ASSERT_INT(summary(cmp, 2, "error_span_count"), 1);
    ck_assert_int_ge(json_integer_value(summary(cmp, 2, "wall_time_ms")), 4000);
    ck_assert_int_ge(json_integer_value(summary(cmp, 2, "trace_duration_ms")), 4000);
    ASSERT_INT(summary(cmp, 0, "sessions"), 1);
    ASSERT_INT(summary(cmp, 0, "descendants"), 0);
    ASSERT_INT(summary(cmp, 0, "max_depth"), 0);
    /* The baseline against itself: 0 and 0 %, or null percent where it is 0. */
    ASSERT_INT(delta(cmp, 0, "total_tokens", "absolute"), 0);
    ASSERT_NEAR(delta(cmp, 0, "total_tokens", "percent"), 0.0);
    ASSERT_INT(delta(cmp, 0, "function_calls", "absolute"), 0);
    ck_assert(json_is_null(delta(cmp, 0, "function_calls", "percent")));
    /* BRAVO − ALPHA. */
    ASSERT_INT(delta(cmp, 1, "total_tokens", "absolute"), 220);
    ASSERT_NEAR(delta(cmp, 1, "total_tokens", "percent"), 220.0 / 120.0 * 100.0);
    ASSERT_INT(delta(cmp, 1, "input_tokens", "absolute"), 200);
    ASSERT_NEAR(delta(cmp, 1, "input_tokens", "percent"), 200.0);
    ASSERT_NEAR(delta(cmp, 1, "cost_usd", "absolute"), 240e-6);
    ASSERT_NEAR(delta(cmp, 1, "cost_usd", "percent"), 240.0 / 140.0 * 100.0);
    /* CHARLIE − ALPHA. */
    ASSERT_INT(delta(cmp, 2, "total_tokens", "absolute"), 25);
    ASSERT_NEAR(delta(cmp, 2, "total_tokens", "percent"), 25.0 / 120.0 * 100.0);
    ASSERT_INT(delta(cmp, 2, "generations", "absolute"), 1);
    ASSERT_NEAR(delta(cmp, 2, "generations", "percent"), 100.0);
    ASSERT_NEAR(delta(cmp, 2, "tokens_per_generation", "absolute"), 72.5 - 120.0);
    ASSERT_INT(delta(cmp, 2, "function_calls", "absolute"), 1);
    ck_assert(json_is_null(delta(cmp, 2, "function_calls", "percent"))); /* baseline 0 */
    /* ALPHA made no call: its error rate is null, so is the delta. */
    ck_assert(json_is_null(summary(cmp, 0, "function_error_rate")));
    ck_assert(json_is_null(delta(cmp, 2, "function_error_rate", "absolute")));
    ck_assert(json_is_null(delta(cmp, 2, "function_error_rate", "percent")));
    /* cache writes are not reported by the chat wire: null, and so are their deltas. */
    ck_assert(json_is_null(summary(cmp, 1, "cache_write_tokens")));
    ck_assert(json_is_null(delta(cmp, 1, "cache_write_tokens", "absolute")));
    json_decref(cmp);

    /* Another baseline, and the same answer through the function mirror. */
    cmp = compare(ids, b, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_INT(delta(cmp, 0, "total_tokens", "absolute"), -220);
    ASSERT_NEAR(delta(cmp, 0, "total_tokens", "percent"), -220.0 / 340.0 * 100.0);
    json_decref(cmp);
    char body[512];
    snprintf(body, sizeof(body),
             "{\"session_ids\":[\"%s\",\"%s\",\"%s\"],\"baseline_session_id\":\"%s\"}", c, a, b, c);
    cmp = call("POST", "/v1/functions/eval::compare-sessions", body, &st);
    ck_assert_int_eq(st, 200);
    assert_contract(cmp);
    ck_assert_str_eq(json_string_value(json_object_get(item(cmp, 0), "session_id")), c);
    ck_assert_str_eq(json_string_value(json_object_get(item(cmp, 1), "session_id")), a);
    ASSERT_INT(delta(cmp, 1, "total_tokens", "absolute"), -25);
    ASSERT_NEAR(delta(cmp, 1, "total_tokens", "percent"), -25.0 / 145.0 * 100.0);
    json_decref(cmp);

    /* The session detail: transcript of generations and function calls, and metrics. */
    json_t *s = get_session(c);
    ck_assert_str_eq(json_string_value(json_object_get(s, "status")), "done");
    json_t *msgs = json_object_get(s, "messages");
    ck_assert_int_eq(json_array_size(msgs), 4); /* user, assistant(call), function, assistant */
    ASSERT_INT(json_object_get(s, "message_count"), 4);
    static const char *roles[] = {"user", "assistant", "function", "assistant"};
    for (size_t i = 0; i < 4; i++) {
        json_t *m = json_array_get(msgs, i);
        ck_assert_str_eq(json_string_value(json_object_get(m, "role")), roles[i]);
        ASSERT_INT(json_object_get(m, "index"), (json_int_t)i);
    }
    json_t *fc = json_array_get(json_object_get(json_array_get(msgs, 1), "function_calls"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(fc, "function_id")), "weather::now");
    ck_assert_ptr_nonnull(json_string_value(json_object_get(json_array_get(msgs, 2), "error")));
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 3), "content")),
                     "charlie");
    ASSERT_INT(json_object_get(json_object_get(json_array_get(msgs, 3), "usage"), "input_tokens"),
               70);
    json_t *totals = json_object_get(json_object_get(s, "metrics"), "totals");
    ASSERT_INT(json_object_get(totals, "turns"), 2);
    ASSERT_INT(json_object_get(totals, "function_call_errors"), 1);
    ck_assert(json_is_true(json_object_get(json_object_get(s, "metrics"), "complete")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(s, "last_turn"), "output")),
                     "charlie");
    json_decref(s);
}
END_TEST

/* Posts a comparison request to the mirror and checks the 400/404 message. */
static void expect_compare_error(const char *body, long status, const char *detail)
{
    long st = 0;
    json_t *j = call("POST", "/v1/functions/eval::compare-sessions", body, &st);
    ck_assert_msg(st == status, "%s: status %ld", body, st);
    ck_assert_msg(strcmp(json_string_value(json_object_get(j, "detail")) ?: "", detail) == 0,
                  "%s: detail \"%s\", want \"%s\"", body,
                  json_string_value(json_object_get(j, "detail")), detail);
    json_decref(j);
}

static void expect_query_error(const char *query, long status, const char *detail)
{
    char path[512];
    snprintf(path, sizeof(path), "/v1/sessions/compare?%s", query);
    long st = 0;
    json_t *j = call("GET", path, NULL, &st);
    ck_assert_msg(st == status, "%s: status %ld", query, st);
    ck_assert_msg(strcmp(json_string_value(json_object_get(j, "detail")) ?: "", detail) == 0,
                  "%s: detail \"%s\", want \"%s\"", query,
                  json_string_value(json_object_get(j, "detail")), detail);
    json_decref(j);
}

static void expect_create_error(const char *body, const char *detail)
{
    long st = 0;
    json_t *j = call("POST", "/v1/sessions", body, &st);
    ck_assert_msg(st == 400, "%s: status %ld", body, st);
    ck_assert_msg(strcmp(json_string_value(json_object_get(j, "detail")) ?: "", detail) == 0,
                  "%s: detail \"%s\", want \"%s\"", body,
                  json_string_value(json_object_get(j, "detail")), detail);
    json_decref(j);
}

START_TEST(validation_messages)
{
    char a[64], b[64], body[512], q[512];
    create("{\"model\":" MODEL ",\"prompt\":\"ALPHA\"}", 202, a, sizeof(a));
    create("{\"model\":" MODEL "}", 201, b, sizeof(b)); /* idle: no prompt */

    /* The catalogue lists the function with its schemas. */
    long cst = 0;
    json_t *cat = call("GET", "/v1/functions", NULL, &cst);
    ck_assert_int_eq(cst, 200);
    json_t *entry = NULL;
    size_t ci;
    json_t *f;
    json_array_foreach(json_object_get(cat, "functions"), ci, f)
    {
        if (strcmp(json_string_value(json_object_get(f, "name")), "eval::compare-sessions") == 0)
            entry = f;
    }
    ck_assert_ptr_nonnull(entry);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(entry, "request_schema"), "title")),
        "CompareSessionsRequestV1");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(entry, "response_schema"), "title")),
        "SessionComparisonV1");
    json_decref(cat);

    static const char COUNT[] = "session_ids must contain between 2 and 5 sessions";
    expect_compare_error("{\"session_ids\":[\"x\"],\"baseline_session_id\":\"x\"}", 400, COUNT);
    expect_compare_error("{\"session_ids\":[],\"baseline_session_id\":\"x\"}", 400, COUNT);
    expect_compare_error("{\"session_ids\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\"],"
                         "\"baseline_session_id\":\"a\"}",
                         400, COUNT);
    expect_compare_error("{\"session_ids\":[\"a\",\"\"],\"baseline_session_id\":\"a\"}", 400,
                         "session_ids cannot contain empty values");
    expect_compare_error("{\"session_ids\":[\"a\",\" \\t\"],\"baseline_session_id\":\"a\"}", 400,
                         "session_ids cannot contain empty values");
    expect_compare_error("{\"session_ids\":[\"a\",\"b\",\"a\"],\"baseline_session_id\":\"a\"}", 400,
                         "session_ids must be unique");
    expect_compare_error("{\"session_ids\":[\"a\",\"b\"],\"baseline_session_id\":\"c\"}", 400,
                         "baseline_session_id must belong to session_ids");
    expect_compare_error("{\"session_ids\":[\"a\",\"b\"],\"baseline_session_id\":\"a\","
                         "\"extra\":1}",
                         400, "extra is not a known field");
    expect_compare_error("{\"session_ids\":[\"a\",\"b\"]}", 400, "baseline_session_id is required");
    expect_compare_error("{\"baseline_session_id\":\"a\"}", 400, "session_ids is required");
    expect_compare_error("{\"session_ids\":\"a,b\",\"baseline_session_id\":\"a\"}", 400,
                         "session_ids must be an array");
    expect_compare_error("{\"session_ids\":[\"a\",7],\"baseline_session_id\":\"a\"}", 400,
                         "session_ids[1] must be a string");
    /* Unknown ids: not found, naming the first unknown one. */
    snprintf(body, sizeof(body),
             "{\"session_ids\":[\"%s\",\"ses_00000000000000000000000000000000\"],"
             "\"baseline_session_id\":\"%s\"}",
             a, a);
    expect_compare_error(body, 404, "session not found: ses_00000000000000000000000000000000");

    /* The same rules on the query string. */
    expect_query_error("ids=a", 400, COUNT);
    expect_query_error("baseline=a", 400, COUNT);
    expect_query_error("ids=a,,b", 400, "session_ids cannot contain empty values");
    expect_query_error("ids=a,b,a", 400, "session_ids must be unique");
    expect_query_error("ids=a,b&baseline=c", 400, "baseline_session_id must belong to session_ids");
    snprintf(q, sizeof(q), "ids=%s,eval_0_c_1", a);
    expect_query_error(q, 404, "session not found: eval_0_c_1");
    snprintf(q, sizeof(q), "ids=%s,%s,%s,%s,%s,%s", a, b, a, b, a, b);
    expect_query_error(q, 400, COUNT);
    /* An idle session compares fine: terminal, nothing to show. */
    wait_status(a, "done", 15000);
    snprintf(q, sizeof(q), "%s,%s", a, b);
    long st = 0;
    json_t *cmp = compare(q, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_str_eq(json_string_value(json_object_get(cmp, "baseline_session_id")), a);
    ck_assert(json_is_null(json_object_get(item(cmp, 1), "metrics")));
    ck_assert(
        json_is_null(json_object_get(json_object_get(item(cmp, 1), "lifecycle"), "turn_status")));
    ck_assert(lifecycle(cmp, 1, "terminal"));
    ck_assert(json_is_null(summary(cmp, 1, "total_tokens")));
    ck_assert(json_is_null(delta(cmp, 1, "total_tokens", "absolute")));
    ck_assert(json_is_null(delta(cmp, 0, "total_tokens", "absolute")) == false);
    assert_contract(cmp);
    json_decref(cmp);

    /* Session requests name the field; nothing is written for a refused one. */
    expect_create_error("{}", "model is required");
    expect_create_error("{\"model\":{\"model\":\"  \"}}", "model.model cannot be empty");
    expect_create_error("{\"model\":{\"model\":\"m\",\"colour\":1}}",
                        "model.colour is not a known field");
    expect_create_error("{\"model\":" MODEL ",\"colour\":1}", "colour is not a known field");
    expect_create_error("{\"model\":" MODEL ",\"prompt\":\" \"}", "prompt cannot be empty");
    expect_create_error("{\"model\":" MODEL ",\"prompt\":7}", "prompt must be a string");
    expect_create_error("{\"model\":" MODEL ",\"system_prompt\":[]}",
                        "system_prompt must be a string");
    expect_create_error("{\"model\":" MODEL ",\"limits\":{\"max_turns\":0}}",
                        "limits.max_turns must be greater than zero");
    expect_create_error("{\"model\":" MODEL ",\"limits\":{\"max_turns\":-1}}",
                        "limits.max_turns must be a non-negative integer");
    expect_create_error("{\"model\":" MODEL ",\"limits\":{\"execution\":{}}}",
                        "limits.execution is not a known field");
    expect_create_error("{\"model\":" MODEL ",\"limits\":{\"max_cost_usd\":\"1\"}}",
                        "limits.max_cost_usd must be a number");
    expect_create_error("{\"model\":" MODEL ",\"functions\":{\"expose\":\"all\"}}",
                        "functions.expose must be one of agent_trigger, native");
    expect_create_error("{\"model\":" MODEL ",\"output\":{\"type\":\"xml\"}}",
                        "output.type must be one of text, json");
    json_t *j = call("POST", "/v1/sessions",
                     "{\"model\":{\"model\":\"stub-model\",\"provider\":\"nowhere\"}}", &st);
    ck_assert_int_eq(st, 400);
    ck_assert(strncmp(json_string_value(json_object_get(j, "detail")),
                      "model.provider \"nowhere\" is not a configured provider", 52) == 0);
    json_decref(j);
    char title[260];
    memset(title, 'x', 201);
    title[201] = '\0';
    snprintf(body, sizeof(body), "{\"model\":" MODEL ",\"title\":\"%s\"}", title);
    expect_create_error(body, "title must be at most 200 characters");

    json_t *list = call("GET", "/v1/sessions", NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_int_eq(json_array_size(json_object_get(list, "sessions")), 2);
    json_decref(list);

    /* Follow-up message requests. */
    snprintf(q, sizeof(q), "/v1/sessions/%s/messages", a);
    j = call("POST", q, "{}", &st);
    ck_assert_int_eq(st, 400);
    ck_assert_str_eq(json_string_value(json_object_get(j, "detail")), "content is required");
    json_decref(j);
    j = call("POST", q, "{\"content\":\"  \"}", &st);
    ck_assert_int_eq(st, 400);
    ck_assert_str_eq(json_string_value(json_object_get(j, "detail")), "content cannot be empty");
    json_decref(j);
    j = call("POST", "/v1/sessions/ses_00000000000000000000000000000000/messages",
             "{\"content\":\"x\"}", &st);
    ck_assert_int_eq(st, 404);
    json_decref(j);
}
END_TEST

START_TEST(follow_up_cancel_delete_list)
{
    char a[64], slow[64], path[256];
    create("{\"title\":\"chat\",\"model\":" MODEL ",\"prompt\":\"ALPHA one\"}", 202, a, sizeof(a));
    wait_status(a, "done", 15000);
    long st = 0;
    snprintf(path, sizeof(path), "/v1/sessions/%s/messages", a);
    json_t *turn = call("POST", path, "{\"content\":\"BRAVO two\"}", &st);
    ck_assert_int_eq(st, 202);
    ck_assert_str_eq(json_string_value(json_object_get(turn, "status")), "queued");
    ck_assert(strncmp(json_string_value(json_object_get(turn, "turn_id")), "turn_", 5) == 0);
    json_decref(turn);
    wait_status(a, "done", 15000);

    /* Metrics accumulate over the turns; the follow-up continued the conversation. */
    json_t *s = get_session(a);
    json_t *totals = json_object_get(json_object_get(s, "metrics"), "totals");
    ASSERT_INT(json_object_get(totals, "turns"), 2);
    ASSERT_INT(json_object_get(totals, "input_tokens"), 400);
    ASSERT_INT(json_object_get(totals, "output_tokens"), 60);
    ASSERT_NEAR(json_object_get(totals, "cost_usd"), 520e-6);
    ASSERT_INT(
        json_object_get(json_object_get(json_object_get(s, "metrics"), "traces"), "trace_count"),
        2);
    json_t *msgs = json_object_get(s, "messages");
    ck_assert_int_eq(json_array_size(msgs), 4);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 2), "content")),
                     "BRAVO two");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 3), "content")),
                     "bravo");
    json_decref(s);
    /* The provider saw the first exchange again with the second message. */
    json_t *reqs = evd_t_stub_requests(&stub, 0);
    json_t *reqlist = json_object_get(reqs, "requests");
    json_t *lastreq = json_array_get(reqlist, json_array_size(reqlist) - 1);
    json_t *sent = json_object_get(json_object_get(lastreq, "body"), "messages");
    char *text = json_dumps(sent, 0);
    ck_assert_ptr_nonnull(strstr(text, "ALPHA one"));
    ck_assert_ptr_nonnull(strstr(text, "alpha"));
    ck_assert_ptr_nonnull(strstr(text, "BRAVO two"));
    free(text);
    json_decref(reqs);

    /* A slow turn: 409 for messages and delete while it works; cancel within a second. */
    create("{\"model\":" MODEL ",\"prompt\":\"SLOW\"}", 202, slow, sizeof(slow));
    wait_status(slow, "working", 5000);
    snprintf(path, sizeof(path), "/v1/sessions/%s/messages", slow);
    json_t *j = call("POST", path, "{\"content\":\"again\"}", &st);
    ck_assert_int_eq(st, 409);
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/sessions/%s", slow);
    j = call("DELETE", path, NULL, &st);
    ck_assert_int_eq(st, 409);
    json_decref(j);
    usleep(300 * 1000); /* let the worker start the provider call */
    snprintf(path, sizeof(path), "/v1/sessions/%s/cancel", slow);
    int64_t t0 = evd_mono_ms();
    j = call("POST", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert(json_is_true(json_object_get(j, "cancelled")));
    ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "cancelled");
    json_decref(j);
    j = call("POST", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert(json_is_false(json_object_get(j, "cancelled")));
    json_decref(j);
    /* The provider call was interrupted: the stub sees no request in flight soon after. */
    for (;;) {
        json_t *stats = evd_t_stub_stats(&stub);
        json_int_t inflight = json_integer_value(json_object_get(stats, "in_flight"));
        json_decref(stats);
        if (inflight == 0)
            break;
        ck_assert_msg(evd_mono_ms() - t0 < 2000, "the provider call was not interrupted");
        usleep(20 * 1000);
    }
    s = get_session(slow);
    ck_assert_str_eq(json_string_value(json_object_get(s, "status")), "cancelled");
    json_t *lt = json_object_get(s, "last_turn");
    ck_assert_str_eq(json_string_value(json_object_get(lt, "status")), "cancelled");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(lt, "failures"), 0), "phase")),
                     "cancel");
    json_decref(s);
    /* A cancelled session takes a new message. */
    snprintf(path, sizeof(path), "/v1/sessions/%s/messages", slow);
    j = call("POST", path, "{\"content\":\"ALPHA after cancel\"}", &st);
    ck_assert_int_eq(st, 202);
    json_decref(j);
    wait_status(slow, "done", 15000);

    /* Delete once terminal; then it is gone. */
    snprintf(path, sizeof(path), "/v1/sessions/%s", slow);
    j = call("DELETE", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert(json_is_true(json_object_get(j, "deleted")));
    json_decref(j);
    j = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 404);
    ck_assert_str_eq(json_string_value(json_object_get(j, "code")), "not_found");
    json_decref(j);
    j = call("DELETE", path, NULL, &st);
    ck_assert_int_eq(st, 404);
    json_decref(j);

    /* List: newest first, cursor pagination. */
    char more[3][64];
    for (int i = 0; i < 3; i++) {
        create("{\"model\":" MODEL "}", 201, more[i], sizeof(more[i]));
        usleep(5 * 1000);
    }
    json_t *page = call("GET", "/v1/sessions?limit=2", NULL, &st);
    ck_assert_int_eq(st, 200);
    json_t *items = json_object_get(page, "sessions");
    ck_assert_int_eq(json_array_size(items), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 0), "session_id")),
                     more[2]);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 1), "session_id")),
                     more[1]);
    const char *cursor = json_string_value(json_object_get(page, "next_cursor"));
    ck_assert_ptr_nonnull(cursor);
    snprintf(path, sizeof(path), "/v1/sessions?limit=2&before=%s", cursor);
    json_t *page2 = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    items = json_object_get(page2, "sessions");
    ck_assert_int_eq(json_array_size(items), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 0), "session_id")),
                     more[0]);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 1), "session_id")), a);
    ck_assert_ptr_null(json_object_get(page2, "next_cursor"));
    json_decref(page);
    json_decref(page2);
    j = call("GET", "/v1/sessions?limit=0", NULL, &st);
    ck_assert_int_eq(st, 400);
    json_decref(j);
}
END_TEST

START_TEST(evaluation_runs_compared_with_a_session)
{
    /* The control run answers like ALPHA; the treatment run, second in the balanced order,
     * like CHARLIE (a function call, then a 4 s answer), so it is compared while it runs. */
    long st = 0;
    json_t *ev = call("POST", "/v1/evaluations",
                      "{\"dimension\":\"prompt\",\"model\":" MODEL ",\"runs\":1,"
                      "\"control\":{\"label\":\"terse\",\"prompt\":\"ALPHA: tell me\"},"
                      "\"treatment\":{\"label\":\"tooled\",\"prompt\":\"CHARLIE: tell me\"}}",
                      &st);
    ck_assert_msg(st == 202, "start answered %ld", st);
    char eval_id[64], path[256];
    snprintf(eval_id, sizeof(eval_id), "%s",
             json_string_value(json_object_get(ev, "evaluation_id")));
    json_decref(ev);
    char a[64];
    create("{\"title\":\"ad hoc\",\"model\":" MODEL ",\"prompt\":\"ALPHA: tell me\"}", 202, a,
           sizeof(a));
    /* Run session ids are <evaluation_id>_c_1 and _t_1. */
    char control[128], treatment[128], ids[512];
    snprintf(control, sizeof(control), "%s_c_1", eval_id);
    snprintf(treatment, sizeof(treatment), "%s_t_1", eval_id);
    snprintf(ids, sizeof(ids), "%s,%s,%s", a, control, treatment);
    wait_status(a, "done", 15000);

    json_t *cmp = NULL;
    int64_t deadline = evd_mono_ms() + 15000;
    for (;;) {
        cmp = compare(ids, a, &st);
        ck_assert_int_eq(st, 200);
        if (json_is_object(json_object_get(item(cmp, 2), "metrics")))
            break;
        json_decref(cmp);
        ck_assert_msg(evd_mono_ms() < deadline, "no partial metrics for the treatment run");
        usleep(50 * 1000);
    }
    assert_contract(cmp);
    ck_assert_str_eq(json_string_value(json_object_get(item(cmp, 2), "kind")), "evaluation_run");
    ck_assert(lifecycle(cmp, 2, "partial") && !lifecycle(cmp, 2, "terminal"));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(item(cmp, 2), "lifecycle"),
                                                       "turn_status")),
                     "running");
    ck_assert(json_is_false(json_object_get(json_object_get(item(cmp, 2), "metrics"), "complete")));
    ASSERT_INT(summary(cmp, 2, "generations"), 1);
    ASSERT_INT(summary(cmp, 2, "total_tokens"), 60);
    ASSERT_INT(delta(cmp, 2, "total_tokens", "absolute"), -60);
    ck_assert(lifecycle(cmp, 1, "terminal") && !lifecycle(cmp, 1, "partial"));
    json_decref(cmp);

    snprintf(path, sizeof(path), "/v1/evaluations/%s", eval_id);
    deadline = evd_mono_ms() + 20000;
    for (;;) {
        json_t *res = call("GET", path, NULL, &st);
        bool done =
            strcmp(json_string_value(json_object_get(res, "status")) ?: "", "completed") == 0;
        json_decref(res);
        if (done)
            break;
        ck_assert_msg(evd_mono_ms() < deadline, "evaluation did not complete");
        usleep(100 * 1000);
    }

    cmp = compare(ids, a, &st);
    ck_assert_int_eq(st, 200);
    assert_contract(cmp);
    ck_assert_str_eq(json_string_value(json_object_get(item(cmp, 0), "kind")), "session");
    for (size_t k = 1; k < 3; k++) {
        json_t *it = item(cmp, k);
        ck_assert_str_eq(json_string_value(json_object_get(it, "kind")), "evaluation_run");
        ck_assert_str_eq(
            json_string_value(json_object_get(json_object_get(it, "session"), "evaluation_id")),
            eval_id);
        ck_assert(lifecycle(cmp, k, "terminal") && !lifecycle(cmp, k, "partial"));
        ck_assert_str_eq(
            json_string_value(json_object_get(json_object_get(it, "lifecycle"), "turn_status")),
            "completed");
        ck_assert_str_eq(
            json_string_value(json_object_get(json_object_get(it, "metrics"), "root_session_id")),
            k == 1 ? control : treatment);
    }
    ck_assert_str_eq(json_string_value(json_object_get(item(cmp, 1), "title")), "terse · run 1");
    ck_assert_str_eq(json_string_value(json_object_get(item(cmp, 2), "title")), "tooled · run 1");
    /* The control run had the same script as the ad-hoc session: no difference in usage. */
    ASSERT_INT(summary(cmp, 1, "total_tokens"), 120);
    ASSERT_INT(delta(cmp, 1, "total_tokens", "absolute"), 0);
    ASSERT_NEAR(delta(cmp, 1, "cost_usd", "absolute"), 0.0);
    ASSERT_INT(summary(cmp, 2, "total_tokens"), 145);
    ASSERT_INT(summary(cmp, 2, "function_call_errors"), 1);
    ASSERT_INT(delta(cmp, 2, "total_tokens", "absolute"), 25);
    ASSERT_NEAR(delta(cmp, 2, "total_tokens", "percent"), 25.0 / 120.0 * 100.0);
    ASSERT_NEAR(delta(cmp, 2, "cost_usd", "absolute"), 30e-6);
    ck_assert_int_ge(json_integer_value(summary(cmp, 2, "wall_time_ms")), 4000);
    json_decref(cmp);

    /* A run as the baseline. */
    cmp = compare(ids, treatment, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_str_eq(json_string_value(json_object_get(cmp, "baseline_session_id")), treatment);
    ASSERT_INT(delta(cmp, 0, "input_tokens", "absolute"), -20);
    ASSERT_NEAR(delta(cmp, 0, "input_tokens", "percent"), -20.0 / 120.0 * 100.0);
    json_decref(cmp);
}
END_TEST

START_TEST(an_unreadable_session_is_reported_in_its_item)
{
    char a[64], b[64], ids[160];
    create("{\"model\":" MODEL ",\"prompt\":\"ALPHA\"}", 202, a, sizeof(a));
    create("{\"model\":" MODEL ",\"prompt\":\"BRAVO\"}", 202, b, sizeof(b));
    wait_status(a, "done", 15000);
    wait_status(b, "done", 15000);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "UPDATE sessions SET metrics = '{\"totals\":\"broken\"}' WHERE id = '%s' "
             "RETURNING id",
             b);
    free(evd_t_sql(db_url, sql));
    snprintf(ids, sizeof(ids), "%s,%s", a, b);
    long st = 0;
    json_t *cmp = compare(ids, NULL, &st);
    ck_assert_int_eq(st, 200);
    assert_contract(cmp);
    json_t *errors = json_object_get(item(cmp, 1), "errors");
    ck_assert_int_eq(json_array_size(errors), 1);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_array_get(errors, 0)), "metrics"));
    ck_assert(json_is_null(json_object_get(item(cmp, 1), "metrics")));
    ck_assert(json_is_null(delta(cmp, 1, "total_tokens", "absolute")));
    ck_assert_int_eq(json_array_size(json_object_get(item(cmp, 0), "errors")), 0);
    ASSERT_INT(summary(cmp, 0, "total_tokens"), 120);
    json_decref(cmp);
}
END_TEST

/*
 * Five sessions of 100 generations each (99 function calls, then an answer), compared
 * repeatedly: the time docs/sessions.md reports. Each session gets its own stub rule, so the
 * generation counts are exact whatever the interleaving.
 */
START_TEST(five_sessions_of_100_generations)
{
    char ids[5][64], list[512] = "";
    struct evd_buf script = {0};
    evd_buf_printf(&script, "{\"rules\":[");
    for (int i = 0; i < 5; i++) {
        create("{\"model\":" MODEL ",\"limits\":{\"max_turns\":200}}", 201, ids[i], sizeof(ids[i]));
        evd_buf_printf(&script,
                       "%s{\"when\":{\"session\":\"%s\"},\"times\":99,\"reply\":{\"tool_calls\":"
                       "[{\"name\":\"agent_trigger\",\"arguments\":{\"function_id\":\"noop\","
                       "\"payload\":{}}}]},\"usage\":{\"input_tokens\":%d,\"output_tokens\":5}}",
                       i ? "," : "", ids[i], 100 + i);
        size_t used = strlen(list);
        snprintf(list + used, sizeof(list) - used, "%s%s", i ? "," : "", ids[i]);
    }
    evd_buf_printf(&script, "],\"default\":{\"reply\":{\"text\":\"done\"},"
                            "\"usage\":{\"input_tokens\":10,\"output_tokens\":2}}}");
    char path[512];
    ck_assert_int_eq(evd_t_stub_script(&stub, script.data), 200);
    evd_buf_free(&script);
    for (int i = 0; i < 5; i++) {
        long st = 0;
        snprintf(path, sizeof(path), "/v1/sessions/%s/messages", ids[i]);
        json_t *j = call("POST", path, "{\"content\":\"work hard\"}", &st);
        ck_assert_int_eq(st, 202);
        json_decref(j);
    }
    for (int i = 0; i < 5; i++)
        wait_status(ids[i], "done", 120000);

    enum { N = 40 };
    int64_t t[N];
    json_t *cmp = NULL;
    for (int k = 0; k < N; k++) {
        long st = 0;
        int64_t t0 = evd_mono_ms();
        json_decref(cmp);
        cmp = compare(list, NULL, &st);
        t[k] = evd_mono_ms() - t0;
        ck_assert_int_eq(st, 200);
    }
    for (int i = 0; i < 5; i++) {
        ASSERT_INT(summary(cmp, (size_t)i, "generations"), 100);
        ASSERT_INT(summary(cmp, (size_t)i, "function_calls"), 99);
        ASSERT_INT(summary(cmp, (size_t)i, "input_tokens"), 99 * (100 + i) + 10);
    }
    ASSERT_INT(delta(cmp, 4, "input_tokens", "absolute"), 99 * 4);
    assert_contract(cmp);
    json_decref(cmp);
    for (int x = 0; x < N; x++)
        for (int y = x + 1; y < N; y++)
            if (t[y] < t[x]) {
                int64_t tmp = t[x];
                t[x] = t[y];
                t[y] = tmp;
            }
    printf("BENCH compare 5 sessions x 100 generations over HTTP: median %lld ms, p95 %lld ms, "
           "max %lld ms (%d calls)\n",
           (long long)t[N / 2], (long long)t[(N * 95) / 100], (long long)t[N - 1], N);
    fflush(stdout);
    ck_assert_int_lt(t[N / 2], 250);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sessions");
    TCase *tc = tcase_create("e2e");
    tcase_set_timeout(tc, 240);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, three_sessions_compared_live);
    tcase_add_test(tc, validation_messages);
    tcase_add_test(tc, follow_up_cancel_delete_list);
    tcase_add_test(tc, evaluation_runs_compared_with_a_session);
    tcase_add_test(tc, an_unreadable_session_is_reported_in_its_item);
    tcase_add_test(tc, five_sessions_of_100_generations);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
