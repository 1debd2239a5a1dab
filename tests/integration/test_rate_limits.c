/*
 * Provider rate limits end to end: real PostgreSQL, the real evald and evald-stub over
 * loopback. A limit configured in the providers file spaces the calls to that provider;
 * a call that waits for the limiter longer than its invocation timeout still passes (the
 * wait is not part of it), and /metrics shows the limiter.
 */
#include <check.h>
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
static char providers_path[64];

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    snprintf(providers_path, sizeof(providers_path), "/tmp/evald-providers-XXXXXX");
    int fd = mkstemp(providers_path);
    ck_assert_int_ge(fd, 0);
    char text[600];
    /* 20 requests a minute: the limiter paces them about 3.1 s apart, two at once. */
    int n = snprintf(text, sizeof(text),
                     "{\"providers\":[{\"name\":\"limited\",\"kind\":\"openai-chat\","
                     "\"base_url\":\"%s/v1\",\"models\":[{\"id\":\"stub-model\",\"rpm\":20}]}]}",
                     stub.base);
    ck_assert_int_eq(write(fd, text, (size_t)n), n);
    close(fd);
}

static void teardown(void)
{
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
    unlink(providers_path);
}

static const char REQUEST[] =
    "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"limited\"},"
    "\"control\":{\"prompt\":\"Reply with exactly OK.\"},\"treatment\":{\"prompt\":"
    "\"Return exactly the text OK.\"},\"evaluator\":{\"function_id\":"
    "\"eval::assert::normalized_text\",\"arguments\":{\"expected\":\"OK\"}},\"runs\":2,"
    "\"limits\":{\"execution\":{\"invocation_timeout_seconds\":1}}}";

/* The value of the series `name{labels}` in a Prometheus text, or -1. */
static double metric(const char *text, const char *series)
{
    const char *p = text;
    size_t n = strlen(series);
    while ((p = strstr(p, series)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p += n;
    }
    return -1;
}

START_TEST(waiting_for_the_limiter_is_not_the_invocation_timeout)
{
    char pf[128];
    snprintf(pf, sizeof(pf), "EVALD_PROVIDERS_FILE=%s", providers_path);
    char *env[] = {pf, "EVALD_WORKERS=4", NULL};
    struct evd_t_proc p;
    ck_assert_int_eq(evd_t_evald_start(&p, db_url, env), 0);
    char url[300];
    snprintf(url, sizeof(url), "%s/v1/evaluations", p.base);
    long status = 0;
    int64_t t0 = evd_mono_ms();
    json_t *started = evd_t_http_json("POST", url, REQUEST, &status);
    ck_assert_int_eq(status, 202);
    char id[64];
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(started, "evaluation_id")));
    json_decref(started);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    int64_t took = evd_mono_ms() - t0;

    snprintf(url, sizeof(url), "%s/v1/evaluations/%s", p.base, id);
    json_t *res = evd_t_http_json("GET", url, NULL, &status);
    ck_assert_int_eq(status, 200);
    json_t *runs = json_object_get(json_object_get(res, "progress"), "runs");
    ck_assert_int_eq(json_array_size(runs), 4);
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r)
    {
        ck_assert_msg(strcmp(json_string_value(json_object_get(r, "status")), "completed") == 0,
                      "run %zu: %s", i, json_dumps(r, JSON_COMPACT));
        /* The stub answers the control's wording with OK. */
        if (strcmp(json_string_value(json_object_get(r, "role")), "control") == 0)
            ck_assert(json_is_true(json_object_get(r, "passed")));
    }
    json_decref(res);
    /* Four calls, two at once, then one each 3.1 s: the last two waited longer than the
     * 1 s invocation timeout. */
    ck_assert_msg(took >= 5500, "four calls at 20 a minute took only %lld ms", (long long)took);

    snprintf(url, sizeof(url), "%s/metrics", p.base);
    struct evd_t_resp m;
    evd_t_http("GET", url, NULL, NULL, 0, &m);
    ck_assert_int_eq(m.status, 200);
    ck_assert_msg(
        metric(m.body, "evald_provider_calls_total{provider=\"limited\",model=\"stub-model\"}") ==
            4,
        "%s", m.body);
    ck_assert(metric(m.body, "evald_provider_limit_rpm{provider=\"limited\",model=\"stub-model\"}") ==
              20);
    ck_assert(metric(m.body, "evald_provider_inflight{provider=\"limited\",model=\"stub-model\"}") ==
              0);
    ck_assert(metric(m.body, "evald_provider_throttled_total{provider=\"limited\",model="
                             "\"stub-model\"}") == 0);
    evd_t_resp_free(&m);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* The stub allows 4 requests a second per key; 6 evaluations of 2 runs a side (24 calls)
 * started at once on 8 workers exceed that at once. Every run completes, few calls are
 * answered 429, and the runs that waited longer than their 1 s invocation timeout pass. */
START_TEST(a_provider_rate_limit_fails_no_run)
{
    ck_assert_int_eq(evd_t_stub_script(&stub, "{\"rate_limit\":{\"requests\":4,\"window_ms\":"
                                              "1000},\"default\":{\"latency_ms\":100}}"),
                     200);
    char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", stub.base);
    char *env[] = {base, "OPENAI_API_KEY=stub-key", "EVALD_WORKERS=8", NULL};
    struct evd_t_proc p;
    ck_assert_int_eq(evd_t_evald_start(&p, db_url, env), 0);
    char url[300];
    snprintf(url, sizeof(url), "%s/v1/evaluations", p.base);
    enum { EVALS = 6 };
    char ids[EVALS][64];
    char request[sizeof(REQUEST) + 16];
    snprintf(request, sizeof(request), "%s", REQUEST);
    char *at = strstr(request, "\"provider\":\"limited\"");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "\"provider\":\"openai\" ", 20); /* same length as the limited one */
    int64_t t0 = evd_mono_ms();
    for (int i = 0; i < EVALS; i++) {
        long status = 0;
        json_t *started = evd_t_http_json("POST", url, request, &status);
        ck_assert_int_eq(status, 202);
        snprintf(ids[i], sizeof(ids[i]), "%s",
                 json_string_value(json_object_get(started, "evaluation_id")));
        json_decref(started);
    }
    int calls = 0;
    for (int i = 0; i < EVALS; i++) {
        ck_assert_str_eq(evd_t_wait_terminal(p.base, ids[i], 120000), "completed");
        snprintf(url, sizeof(url), "%s/v1/evaluations/%s", p.base, ids[i]);
        long status = 0;
        json_t *res = evd_t_http_json("GET", url, NULL, &status);
        ck_assert_int_eq(status, 200);
        size_t k;
        json_t *r;
        json_array_foreach(json_object_get(json_object_get(res, "progress"), "runs"), k, r)
        {
            ck_assert_msg(strcmp(json_string_value(json_object_get(r, "status")), "completed") ==
                              0,
                          "evaluation %d run %zu: %s", i, k, json_dumps(r, JSON_COMPACT));
            calls++;
        }
        json_decref(res);
    }
    int64_t took = evd_mono_ms() - t0;
    ck_assert_int_eq(calls, EVALS * 4);
    json_t *st = evd_t_stub_stats(&stub);
    ck_assert_ptr_nonnull(st);
    json_int_t refused = json_integer_value(json_object_get(json_object_get(st, "by_status"), "429"));
    json_int_t answered = json_integer_value(json_object_get(json_object_get(st, "by_status"), "200"));
    json_decref(st);
    fprintf(stderr, "%d calls at 4 a second: %lld ms, %lld answers of 429\n", calls,
            (long long)took, (long long)refused);
    ck_assert_int_eq(answered, calls);
    /* The first burst meets the limit before evald knows it; afterwards few do. */
    ck_assert_msg(refused <= calls / 4, "%lld of %d calls were answered 429", (long long)refused,
                  calls);
    /* 24 calls at 4 a second need 5 s at least: the stub's limit held. */
    ck_assert_int_ge(took, 5000);

    snprintf(url, sizeof(url), "%s/metrics", p.base);
    struct evd_t_resp m;
    evd_t_http("GET", url, NULL, NULL, 0, &m);
    ck_assert_int_eq(m.status, 200);
    ck_assert(metric(m.body, "evald_provider_throttled_total{provider=\"openai\",model="
                             "\"stub-model\"}") == (double)refused);
    /* 4 a second is 240 a minute, learnt from the stub's headers. */
    ck_assert(metric(m.body, "evald_provider_limit_rpm{provider=\"openai\",model="
                             "\"stub-model\"}") == 240);
    evd_t_resp_free(&m);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rate_limits");
    TCase *tc = tcase_create("rate_limits");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, waiting_for_the_limiter_is_not_the_invocation_timeout);
    tcase_add_test(tc, a_provider_rate_limit_fails_no_run);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
