/*
 * Integration tests of evald-stub's faults and controls: starts the real binary
 * (EVALD_STUB_BIN) on a free loopback port for each test and drives it over HTTP:
 * scripted rate limits and fault statuses, stalls, truncated, malformed and oversized
 * answers, latency and concurrency statistics, the required key and the request log's
 * redaction, bad requests, reset and the log's bounds, and process behaviour. The wire
 * formats and scripts are in test_stub_wire.c; the shared client is
 * tests/support/stub_client.h.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>
#include <time.h>

#include "common/util.h"
#include "tests/support/itest.h"
#include "tests/support/stub_client.h"
#include "tests/support/testutil.h"

/* ---------------------------------------------------------------- faults */

/* Two requests per key in any 2 s: the third is refused until the oldest leaves. */
START_TEST(scripted_rate_limit_per_key)
{
    sc_put_script("{\"rate_limit\":{\"requests\":2,\"window_ms\":2000}}");
    static const char body[] = "{\"model\":\"m\",\"input\":\"Reply with exactly OK.\"}";
    const char *const key_a[] = {"Authorization: Bearer key-a", NULL};
    const char *const key_b[] = {"Authorization: Bearer key-b", NULL};
    struct evd_t_resp r;
    char v[64];
    int64_t t0 = evd_mono_ms();
    for (int i = 0; i < 2; i++) {
        sc_req(&r, "POST", "/v1/responses", body, key_a);
        ck_assert_int_eq(r.status, 200);
        ck_assert(evd_t_resp_header(&r, "x-ratelimit-limit-requests", v, sizeof(v)));
        ck_assert_str_eq(v, "60"); /* 2 in 2 s, as a minute's limit */
        ck_assert(evd_t_resp_header(&r, "x-ratelimit-remaining-requests", v, sizeof(v)));
        ck_assert_int_eq(atoi(v), 1 - i);
        ck_assert(evd_t_resp_header(&r, "x-ratelimit-reset-requests", v, sizeof(v)));
        ck_assert_msg(strlen(v) > 2 && strcmp(v + strlen(v) - 2, "ms") == 0, "reset %s", v);
        ck_assert_int_le(atoi(v), 2000);
        evd_t_resp_free(&r);
    }
    sc_req(&r, "POST", "/v1/responses", body, key_a);
    ck_assert_int_eq(r.status, 429);
    ck_assert_str_eq(sc_js(r.json, "error.code"), "rate_limit_exceeded");
    ck_assert(evd_t_resp_header(&r, "x-ratelimit-remaining-requests", v, sizeof(v)));
    ck_assert_str_eq(v, "0");
    ck_assert(evd_t_resp_header(&r, "retry-after-ms", v, sizeof(v)));
    int64_t wait = atoll(v);
    ck_assert_int_gt(wait, 0);
    ck_assert_int_le(wait, 2000);
    ck_assert(evd_t_resp_header(&r, "retry-after", v, sizeof(v)));
    ck_assert_int_eq(atoll(v), (wait + 999) / 1000);
    evd_t_resp_free(&r);
    /* Another key has a window of its own. */
    sc_req(&r, "POST", "/v1/responses", body, key_b);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);
    /* Once the oldest left the window, key a is served again. */
    int64_t until = t0 + 2100 - evd_mono_ms();
    if (until > 0)
        usleep((useconds_t)until * 1000);
    sc_req(&r, "POST", "/v1/responses", body, key_a);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);
    json_t *st = sc_stats();
    ck_assert_int_eq(sc_ji(st, "by_status.429"), 1);
    ck_assert_int_eq(sc_ji(st, "by_status.200"), 4);
    json_decref(st);
    /* A limit without its window is refused, naming what is missing. */
    sc_req(&r, "PUT", "/_stub/script", "{\"rate_limit\":{\"requests\":2}}", NULL);
    ck_assert_int_eq(r.status, 400);
    ck_assert_msg(strstr(r.body, "rate_limit needs requests and window_ms") != NULL, "%s", r.body);
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(fault_429_with_retry_after)
{
    sc_put_script("{\"rules\":[{\"times\":2,\"fault\":{\"status\":429,\"retry_after_s\":1,"
                  "\"retry_after_ms\":1000}}]}");
    struct evd_t_resp r;
    sc_post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"q\"}", 429);
    char ra[32];
    ck_assert(evd_t_resp_header(&r, "retry-after", ra, sizeof(ra)));
    ck_assert_str_eq(ra, "1");
    ck_assert(evd_t_resp_header(&r, "retry-after-ms", ra, sizeof(ra)));
    ck_assert_str_eq(ra, "1000");
    ck_assert_str_eq(sc_js(r.json, "error.type"), "requests");
    ck_assert_str_eq(sc_js(r.json, "error.code"), "rate_limit_exceeded");
    ck_assert_ptr_nonnull(sc_js(r.json, "error.message"));
    evd_t_resp_free(&r);

    sc_post(&r, "/v1/messages", "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}", 429);
    ck_assert_str_eq(sc_js(r.json, "type"), "error");
    ck_assert_str_eq(sc_js(r.json, "error.type"), "rate_limit_error");
    evd_t_resp_free(&r);

    /* `times` is spent: the built-in reply answers. */
    sc_post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"Reply with exactly OK.\"}", 200);
    ck_assert_str_eq(sc_reply_text(r.json), "OK");
    evd_t_resp_free(&r);
    json_t *st = sc_stats();
    ck_assert_int_eq(sc_ji(st, "by_status.429"), 2);
    ck_assert_int_eq(sc_ji(st, "by_status.200"), 1);
    json_decref(st);
}
END_TEST

static const struct {
    int status;
    const char *openai_type;
    const char *anthropic_type;
} status_faults[] = {
    {500, "server_error", "api_error"},
    {401, "invalid_request_error", "authentication_error"},
    {529, "server_error", "overloaded_error"},
    {400, "invalid_request_error", "invalid_request_error"},
};

START_TEST(fault_status_shapes)
{
    char script[256];
    snprintf(script, sizeof(script),
             "{\"rules\":[{\"fault\":{\"status\":%d,\"message\":\"boom\"}}]}",
             status_faults[_i].status);
    sc_put_script(script);
    struct evd_t_resp r;
    sc_post(&r, "/v1/chat/completions", "{\"model\":\"m\",\"messages\":[]}",
            status_faults[_i].status);
    ck_assert_str_eq(sc_js(r.json, "error.type"), status_faults[_i].openai_type);
    ck_assert_str_eq(sc_js(r.json, "error.message"), "boom");
    ck_assert(json_is_null(sc_jp(r.json, "error.param")));
    evd_t_resp_free(&r);
    sc_post(&r, "/v1/messages", "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}",
            status_faults[_i].status);
    ck_assert_str_eq(sc_js(r.json, "type"), "error");
    ck_assert_str_eq(sc_js(r.json, "error.type"), status_faults[_i].anthropic_type);
    ck_assert_str_eq(sc_js(r.json, "error.message"), "boom");
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(fault_stall)
{
    sc_put_script("{\"rules\":[{\"when\":{\"prompt_contains\":\"hang\"},\"fault\":{\"stall\":"
                  "true}}]}");
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/responses", sc_stub.base);
    struct evd_t_resp r;
    const char *hang = "{\"model\":\"m\",\"input\":\"hang\"}";
    evd_t_http_timed("POST", url, NULL, hang, strlen(hang), 700, &r);
    ck_assert_int_eq(r.curl_code, 28); /* CURLE_OPERATION_TIMEDOUT */
    ck_assert_int_eq(r.status, 0);
    ck_assert(r.elapsed_ms >= 650);
    evd_t_resp_free(&r);

    /* The stub noticed the disconnect and is free again. */
    json_t *st = NULL;
    for (int i = 0; i < 100; i++) {
        json_decref(st);
        st = sc_stats();
        if (sc_ji(st, "in_flight") == 0)
            break;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(sc_ji(st, "in_flight"), 0);
    ck_assert_int_eq(sc_ji(st, "stalls"), 1);
    ck_assert_ptr_null(sc_jp(st, "by_status.200"));
    json_decref(st);
    json_t *log = sc_request_log("");
    ck_assert(json_is_null(sc_jp(log, "0.status")));
    json_decref(log);
    sc_post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"Reply with exactly up.\"}", 200);
    ck_assert_str_eq(sc_reply_text(r.json), "up");
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(fault_truncate)
{
    sc_put_script("{\"rules\":[{\"fault\":{\"truncate\":true},\"reply\":{\"text\":\"a reply long "
                  "enough to be cut in half\"}}]}");
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/chat/completions", sc_stub.base);
    struct evd_t_resp r;
    const char *body = "{\"model\":\"m\",\"messages\":[]}";
    evd_t_http_timed("POST", url, NULL, body, strlen(body), 5000, &r);
    ck_assert_int_eq(r.curl_code, 18); /* CURLE_PARTIAL_FILE */
    ck_assert_int_eq(r.status, 200);
    char cl[32];
    ck_assert(evd_t_resp_header(&r, "content-length", cl, sizeof(cl)));
    long declared = strtol(cl, NULL, 10);
    ck_assert_int_eq((long)r.len, declared / 2);
    ck_assert_ptr_null(r.json);
    ck_assert(strncmp(r.body, "{\"id\":\"chatcmpl-", 16) == 0);
    evd_t_resp_free(&r);
    json_t *st = sc_stats();
    ck_assert_int_eq(sc_ji(st, "truncations"), 1);
    json_decref(st);
}
END_TEST

START_TEST(fault_malformed)
{
    sc_put_script("{\"rules\":[{\"fault\":{\"malformed\":true},\"reply\":{\"text\":\"a reply "
                  "long enough to be cut in half\"}}]}");
    struct evd_t_resp r;
    sc_req(&r, "POST", "/v1/messages", "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}", NULL);
    ck_assert_int_eq(r.status, 200);
    char cl[32];
    ck_assert(evd_t_resp_header(&r, "content-length", cl, sizeof(cl)));
    ck_assert_int_eq(strtol(cl, NULL, 10), (long)r.len); /* complete at the HTTP level */
    ck_assert_ptr_null(r.json);
    ck_assert(strncmp(r.body, "{\"id\":\"msg_", 11) == 0);
    evd_t_resp_free(&r);
    json_t *st = sc_stats();
    ck_assert_int_eq(sc_ji(st, "malformed"), 1);
    json_decref(st);
}
END_TEST

START_TEST(fault_header_bytes)
{
    /* A header the client can read: its value is exactly the scripted length and the
     * body is the normal reply. */
    sc_put_script(
        "{\"rules\":[{\"fault\":{\"header_bytes\":5000},\"reply\":{\"text\":\"padded\"}}]}");
    struct evd_t_resp r;
    sc_req(&r, "POST", "/v1/chat/completions", "{\"model\":\"m\",\"messages\":[]}", NULL);
    ck_assert_int_eq(r.curl_code, 0);
    ck_assert_int_eq(r.status, 200);
    char *pad = strstr(r.headers, "X-Stub-Padding: ");
    ck_assert_ptr_nonnull(pad);
    pad += strlen("X-Stub-Padding: ");
    ck_assert_int_eq((long)strspn(pad, "a"), 5000);
    ck_assert_ptr_nonnull(r.json);
    ck_assert_ptr_nonnull(strstr(r.body, "padded"));
    evd_t_resp_free(&r);
    /* 1 MiB: more than libcurl reads in one header line, so the client gives up. */
    sc_put_script("{\"rules\":[{\"fault\":{\"header_bytes\":1048576}}]}");
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/responses", sc_stub.base);
    const char *body = "{\"model\":\"m\",\"input\":\"q\"}";
    evd_t_http_timed("POST", url, NULL, body, strlen(body), 5000, &r);
    ck_assert_int_ne(r.curl_code, 0);
    ck_assert_int_ne(r.curl_code, 28); /* refused at once, not a timeout */
    evd_t_resp_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- latency, concurrency */

struct worker {
    char url[256];
    const char *session;
    struct evd_t_resp r;
};

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    char h[128];
    snprintf(h, sizeof(h), "X-Evald-Session: %s", w->session);
    const char *headers[] = {h, NULL};
    const char *body = "{\"model\":\"m\",\"input\":\"slow\"}";
    evd_t_http_timed("POST", w->url, headers, body, strlen(body), 10000, &w->r);
    return NULL;
}

static long run_parallel(int n, const char *const *sessions)
{
    pthread_t th[8];
    struct worker w[8];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) {
        snprintf(w[i].url, sizeof(w[i].url), "%s/v1/responses", sc_stub.base);
        w[i].session = sessions[i];
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_run, &w[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(w[i].r.curl_code, 0);
        ck_assert_int_eq(w[i].r.status, 200);
        ck_assert_msg(w[i].r.elapsed_ms >= 300, "answered after %ld ms", w[i].r.elapsed_ms);
        evd_t_resp_free(&w[i].r);
    }
    return (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
}

START_TEST(latency_and_concurrency)
{
    sc_put_script("{\"rules\":[{\"latency_ms\":300,\"reply\":{\"text\":\"late\"}}]}");
    const char *same[] = {"run-a", "run-a", "run-a", "run-a"};
    long wall = run_parallel(4, same);
    ck_assert_msg(wall < 1000, "4 requests of 300 ms took %ld ms: not concurrent", wall);
    /* The stub counts a request done after its last byte is sent, which may be a
     * moment after the client has read it: let the counter settle. */
    json_t *st = sc_stats();
    for (int i = 0; i < 100 && sc_ji(st, "in_flight") != 0; i++) {
        json_decref(st);
        usleep(20000);
        st = sc_stats();
    }
    ck_assert_int_eq(sc_ji(st, "max_in_flight"), 4);
    ck_assert_int_eq(sc_ji(st, "max_in_flight_per_session"), 4);
    ck_assert_int_eq(sc_ji(st, "in_flight"), 0);
    ck_assert_int_eq(sc_ji(st, "by_api.responses"), 4);
    /* Which session was in flight more than once, and how often a request overlapped. */
    ck_assert_int_eq(sc_ji(st, "overlaps"), 3);
    json_t *twice = json_object_get(st, "sessions_in_flight_twice");
    ck_assert_int_eq(json_array_size(twice), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(twice, 0), "session")),
                     "run-a");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(twice, 0), "max")), 4);
    json_decref(st);

    struct evd_t_resp r;
    sc_post(&r, "/_stub/reset", NULL, 200);
    evd_t_resp_free(&r);
    const char *distinct[] = {"run-1", "run-2", "run-3"};
    run_parallel(3, distinct);
    st = sc_stats();
    ck_assert_int_eq(sc_ji(st, "max_in_flight"), 3);
    ck_assert_int_eq(sc_ji(st, "max_in_flight_per_session"), 1);
    ck_assert_int_eq(sc_ji(st, "requests"), 3);
    ck_assert_int_eq(sc_ji(st, "overlaps"), 0);
    ck_assert_int_eq(json_array_size(json_object_get(st, "sessions_in_flight_twice")), 0);
    json_decref(st);
}
END_TEST

/* ---------------------------------------------------------------- auth, log, limits */

START_TEST(require_key_and_redaction)
{
    ck_assert_int_eq(evd_t_stop(&sc_stub, SIGTERM, 5000), 0);
    ck_assert_int_eq(evd_t_stub_start(&sc_stub, NULL, "sk-test-secret-123"), 0);
    struct evd_t_resp r;
    const char *body = "{\"model\":\"m\",\"input\":\"q\"}";
    const char *mbody = "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}";

    sc_req(&r, "POST", "/v1/responses", body, NULL);
    ck_assert_int_eq(r.status, 401);
    ck_assert_str_eq(sc_js(r.json, "error.code"), "invalid_api_key");
    ck_assert_ptr_null(strstr(r.body, "sk-test"));
    evd_t_resp_free(&r);
    const char *wrong[] = {"Authorization: Bearer sk-test-secret-124", NULL};
    sc_req(&r, "POST", "/v1/responses", body, wrong);
    ck_assert_int_eq(r.status, 401);
    ck_assert_ptr_null(strstr(r.body, "sk-test"));
    evd_t_resp_free(&r);
    const char *good[] = {"Authorization: Bearer sk-test-secret-123", NULL};
    sc_req(&r, "POST", "/v1/responses", body, good);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);

    /* Anthropic takes x-api-key or a bearer token; a wrong x-api-key is refused. */
    const char *wrong_x[] = {"x-api-key: sk-test-secret-124", NULL};
    sc_req(&r, "POST", "/v1/messages", mbody, wrong_x);
    ck_assert_int_eq(r.status, 401);
    ck_assert_str_eq(sc_js(r.json, "error.type"), "authentication_error");
    ck_assert_ptr_null(strstr(r.body, "sk-test"));
    evd_t_resp_free(&r);
    sc_req(&r, "POST", "/v1/messages", mbody, good);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);
    const char *xkey[] = {"x-api-key: sk-test-secret-123", "anthropic-version: 2023-06-01", NULL};
    sc_req(&r, "POST", "/v1/messages", mbody, xkey);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);
    sc_req(&r, "GET", "/v1/models", NULL, xkey);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(sc_js(r.json, "data.0.type"), "model");
    evd_t_resp_free(&r);

    sc_req(&r, "GET", "/_stub/requests", NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_null(strstr(r.body, "sk-test-secret"));
    json_t *log = sc_jp(r.json, "requests");
    ck_assert_int_eq(json_array_size(log), 7);
    ck_assert_str_eq(sc_js(log, "2.headers.authorization"), "REDACTED");
    ck_assert_str_eq(sc_js(log, "5.headers.x-api-key"), "REDACTED");
    ck_assert_str_eq(sc_js(log, "5.headers.anthropic-version"), "2023-06-01");
    ck_assert_str_eq(sc_js(log, "5.headers.content-type"), "application/json");
    ck_assert_str_eq(sc_js(log, "5.api"), "messages");
    ck_assert_str_eq(sc_js(log, "5.path"), "/v1/messages");
    ck_assert_str_eq(sc_js(log, "5.method"), "POST");
    ck_assert_int_eq(sc_ji(log, "5.status"), 200);
    ck_assert_int_eq(sc_ji(log, "0.status"), 401);
    ck_assert_int_eq(sc_ji(log, "5.body.max_tokens"), 5);
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(bad_requests)
{
    struct evd_t_resp r;
    sc_post(&r, "/v1/responses", "{\"model\":", 400);
    ck_assert_str_eq(sc_js(r.json, "error.type"), "invalid_request_error");
    evd_t_resp_free(&r);
    sc_post(&r, "/v1/responses", "{\"input\":\"x\"}", 400);
    ck_assert_ptr_nonnull(strstr(sc_js(r.json, "error.message"), "model"));
    evd_t_resp_free(&r);
    sc_post(&r, "/v1/chat/completions", "{\"model\":\"m\"}", 400);
    ck_assert_ptr_nonnull(strstr(sc_js(r.json, "error.message"), "messages"));
    evd_t_resp_free(&r);
    sc_post(&r, "/v1/messages", "{\"model\":\"m\",\"messages\":[]}", 400);
    ck_assert_str_eq(sc_js(r.json, "error.type"), "invalid_request_error");
    ck_assert_ptr_nonnull(strstr(sc_js(r.json, "error.message"), "max_tokens"));
    evd_t_resp_free(&r);

    sc_post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"x\",\"stream\":true}", 400);
    ck_assert_ptr_nonnull(strstr(sc_js(r.json, "error.message"), "stream"));
    evd_t_resp_free(&r);
    sc_post(&r, "/v1/messages",
            "{\"model\":\"m\",\"max_tokens\":3,\"messages\":[],\"stream\":true}", 400);
    ck_assert_str_eq(sc_js(r.json, "type"), "error");
    ck_assert_ptr_nonnull(strstr(sc_js(r.json, "error.message"), "stream"));
    evd_t_resp_free(&r);

    sc_req(&r, "GET", "/v1/responses", NULL, NULL);
    ck_assert_int_eq(r.status, 405);
    evd_t_resp_free(&r);
    sc_post(&r, "/v1/embeddings", "{}", 404);
    ck_assert_ptr_nonnull(sc_js(r.json, "error.message"));
    evd_t_resp_free(&r);
    sc_req(&r, "GET", "/_stub/nothing", NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    evd_t_resp_free(&r);
    sc_req(&r, "GET", "/_stub/healthz", NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);

    /* 9 MiB body: over the 8 MiB limit. */
    size_t n = 9u * 1024u * 1024u;
    char *big = malloc(n + 64);
    int off = snprintf(big, 64, "{\"model\":\"m\",\"input\":\"");
    memset(big + off, 'a', n);
    strcpy(big + off + n, "\"}");
    sc_post(&r, "/v1/responses", big, 413);
    free(big);
    ck_assert_str_eq(sc_js(r.json, "error.type"), "invalid_request_error");
    evd_t_resp_free(&r);

    json_t *st = sc_stats();
    ck_assert_int_eq(sc_ji(st, "by_status.400"), 6);
    ck_assert_int_eq(sc_ji(st, "by_status.413"), 1);
    ck_assert_int_eq(sc_ji(st, "by_api.other"), 1);
    json_decref(st);
}
END_TEST

START_TEST(reset_and_log_limit)
{
    sc_put_script("{\"rules\":[{\"times\":1,\"reply\":{\"text\":\"once\"}}]}");
    struct evd_t_resp r;
    const char *prompts[] = {"p0", "p1", "p2"};
    for (int i = 0; i < 3; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"input\":\"%s\"}", prompts[i]);
        sc_post(&r, "/v1/responses", body, 200);
        evd_t_resp_free(&r);
    }
    json_t *log = sc_request_log("?limit=2");
    ck_assert_int_eq(json_array_size(log), 2);
    ck_assert_str_eq(sc_js(log, "0.body.input"), "p1");
    ck_assert_str_eq(sc_js(log, "1.body.input"), "p2");
    json_decref(log);
    sc_req(&r, "GET", "/_stub/requests?limit=x", NULL, NULL);
    ck_assert_int_eq(r.status, 400);
    evd_t_resp_free(&r);

    sc_post(&r, "/_stub/reset", NULL, 200);
    evd_t_resp_free(&r);
    json_t *st = sc_stats();
    ck_assert_int_eq(sc_ji(st, "requests"), 0);
    ck_assert_int_eq(sc_ji(st, "rules.0.hits"), 0);
    ck_assert_int_eq(json_object_size(sc_jp(st, "by_status")), 0);
    json_decref(st);
    log = sc_request_log("");
    ck_assert_int_eq(json_array_size(log), 0);
    json_decref(log);
    /* The script is kept and `times` is re-armed. */
    sc_post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"q\"}", 200);
    ck_assert_str_eq(sc_reply_text(r.json), "once");
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(request_log_is_bounded)
{
    sc_put_script("{\"default\":{\"reply\":{\"text\":\"x\"}}}");
    struct evd_t_resp r;
    for (int i = 0; i < 505; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"input\":\"n%d\"}", i);
        sc_post(&r, "/v1/responses", body, 200);
        evd_t_resp_free(&r);
    }
    json_t *log = sc_request_log("");
    ck_assert_int_eq(json_array_size(log), 500);
    ck_assert_str_eq(sc_js(log, "0.body.input"), "n5");
    ck_assert_str_eq(sc_js(log, "499.body.input"), "n504");
    json_decref(log);
}
END_TEST

/* ---------------------------------------------------------------- process */

static int run_status(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "\"%s\" %s >/dev/null 2>&1", getenv("EVALD_STUB_BIN"), args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(process_options)
{
    ck_assert_int_eq(run_status("--help"), 0);
    ck_assert_int_eq(run_status("--bogus"), 2);
    ck_assert_int_eq(run_status("--listen"), 2);
    ck_assert_int_eq(run_status("--listen nonsense"), 1);
    ck_assert_int_eq(run_status("--listen 127.0.0.1:0 --script /nonexistent/script.json"), 1);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "\"%s\" --help", getenv("EVALD_STUB_BIN"));
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    pclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "--listen"));
    ck_assert_ptr_nonnull(strstr(buf, "EVALD_STUB_LISTEN"));
    ck_assert_ptr_nonnull(strstr(buf, "--require-key"));
    /* The fixture's stub exits 0 on SIGTERM (checked in the teardown). */
}
END_TEST

int main(void)
{
    if (getenv("EVALD_STUB_BIN") == NULL) {
        fprintf(stderr, "EVALD_STUB_BIN is not set; run this test through ctest\n");
        return 1;
    }
    Suite *s = suite_create("stub_control");
    TCase *faults = tcase_create("faults");
    TCase *control = tcase_create("control");
    TCase *all[] = {faults, control};
    for (int i = 0; i < 2; i++) {
        tcase_add_checked_fixture(all[i], sc_setup, sc_teardown);
        tcase_set_timeout(all[i], 60);
        suite_add_tcase(s, all[i]);
    }
    tcase_add_test(faults, fault_429_with_retry_after);
    tcase_add_test(faults, scripted_rate_limit_per_key);
    tcase_add_loop_test(faults, fault_status_shapes, 0,
                        (int)(sizeof(status_faults) / sizeof(status_faults[0])));
    tcase_add_test(faults, fault_stall);
    tcase_add_test(faults, fault_truncate);
    tcase_add_test(faults, fault_malformed);
    tcase_add_test(faults, fault_header_bytes);
    tcase_add_test(control, latency_and_concurrency);
    tcase_add_test(control, require_key_and_redaction);
    tcase_add_test(control, bad_requests);
    tcase_add_test(control, reset_and_log_limit);
    tcase_add_test(control, request_log_is_bounded);
    tcase_add_test(control, process_options);
    return evd_test_run_suite(s);
}
