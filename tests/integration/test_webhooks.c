/*
 * Integration tests of eval::completed webhooks: the real evald and evald-stub over
 * loopback, a throwaway PostgreSQL database per test, and a local receiver
 * (tests/support/webhooks_receiver.h) that records requests and fails on demand.
 */
#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "store/db.h"
#include "store/events.h"
#include "store/webhooks.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"
#include "tests/support/webhooks_receiver.h"
#include "webhooks/seal.h"

#define KEY_HEX "8d1f0c2b3a4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8"
#define SECRET "whsec-Canary-9f8e7d6c5b4a3210"

static char db_url[1024];
static char db_name[64];

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
}

static void teardown(void)
{
    evd_t_db_drop(db_name);
}

/* ---- helpers ------------------------------------------------------------------------- */

struct env {
    char *v[24];
    char store[24][1200];
    size_t n;
};

static void env_add(struct env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void env_add(struct env *e, const char *fmt, ...)
{
    ck_assert(e->n + 1 < sizeof(e->v) / sizeof(e->v[0]));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->store[e->n], sizeof(e->store[0]), fmt, ap);
    va_end(ap);
    e->v[e->n] = e->store[e->n];
    e->v[++e->n] = NULL;
}

/* The environment of an evald that talks to `stub` and may call the receiver. */
static void base_env(struct env *e, const struct evd_t_proc *stub)
{
    memset(e, 0, sizeof(*e));
    env_add(e, "OPENAI_BASE_URL=%s/v1", stub->base);
    env_add(e, "OPENAI_API_KEY=stub-key");
    env_add(e, "EVALD_WORKERS=2");
    env_add(e, "EVALD_WEBHOOK_ALLOW_HOSTS=127.0.0.1");
    env_add(e, "EVALD_WEBHOOK_BACKOFF_MS=100");
    env_add(e, "EVALD_SECRET_KEY=" KEY_HEX);
}

static void start_evald(struct evd_t_proc *p, struct env *e)
{
    int rc = evd_t_evald_start(p, db_url, e->v);
    if (rc != 0)
        evd_t_dump_log(p);
    ck_assert_int_eq(rc, 0);
}

static json_t *call(const struct evd_t_proc *p, const char *method, const char *path,
                    const char *body, long *status)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s%s", p->base, path);
    return evd_t_http_json(method, url, body, status);
}

static json_t *subscribe(const struct evd_t_proc *p, struct evd_t_receiver *r, const char *path,
                         const char *evaluation_id)
{
    char body[512];
    if (evaluation_id)
        snprintf(body, sizeof(body),
                 "{\"url\":\"http://127.0.0.1:%u%s\",\"secret\":\"" SECRET "\","
                 "\"evaluation_id\":\"%s\"}",
                 evd_t_receiver_port(r), path, evaluation_id);
    else
        snprintf(body, sizeof(body),
                 "{\"url\":\"http://127.0.0.1:%u%s\",\"secret\":\"" SECRET "\"}",
                 evd_t_receiver_port(r), path);
    long status = 0;
    json_t *sub = call(p, "POST", "/v1/subscriptions", body, &status);
    ck_assert_msg(status == 201, "subscribe: %ld", status);
    ck_assert(strncmp(json_string_value(json_object_get(sub, "subscription_id")), "sub_", 4) == 0);
    return sub;
}

/* A subscription for every evaluation with `events` (JSON text). */
static json_t *subscribe_events(const struct evd_t_proc *p, struct evd_t_receiver *r,
                                const char *path, const char *events)
{
    char body[512];
    snprintf(body, sizeof(body),
             "{\"url\":\"http://127.0.0.1:%u%s\",\"secret\":\"" SECRET "\",\"events\":%s}",
             evd_t_receiver_port(r), path, events);
    long status = 0;
    json_t *sub = call(p, "POST", "/v1/subscriptions", body, &status);
    ck_assert_msg(status == 201, "subscribe: %ld", status);
    json_t *want = json_loads(events, 0, NULL);
    ck_assert(json_equal(json_object_get(sub, "events"), want));
    json_decref(want);
    return sub;
}

static const char EVAL_REQUEST[] =
    "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
    "\"control\":{\"label\":\"reply\",\"prompt\":\"Reply with exactly OK.\","
    "\"system_prompt\":\"Follow the user request exactly.\"},"
    "\"treatment\":{\"label\":\"return\",\"prompt\":\"Return exactly the text OK.\","
    "\"system_prompt\":\"Follow the user request exactly.\"},"
    "\"evaluator\":{\"function_id\":\"eval::assert::normalized_text\","
    "\"arguments\":{\"expected\":\"OK\"}},\"runs\":1}";

/* Starts an evaluation; writes its id into id[64]. */
static void start_eval(const struct evd_t_proc *p, char *id)
{
    long status = 0;
    json_t *out = call(p, "POST", "/v1/evaluations", EVAL_REQUEST, &status);
    ck_assert_msg(status == 202, "start: %ld", status);
    snprintf(id, 64, "%s", json_string_value(json_object_get(out, "evaluation_id")));
    json_decref(out);
    ck_assert(strncmp(id, "eval_", 5) == 0);
}

/* Waits until the evaluation is terminal; returns its status (static buffer). */
static const char *wait_terminal(const struct evd_t_proc *p, const char *id, int timeout_ms)
{
    static char st[32];
    char path[160];
    snprintf(path, sizeof(path), "/v1/evaluations/%s/status", id);
    int64_t deadline = evd_mono_ms() + timeout_ms;
    while (evd_mono_ms() < deadline) {
        long status = 0;
        json_t *s = call(p, "GET", path, NULL, &status);
        snprintf(st, sizeof(st), "%s", json_string_value(json_object_get(s, "status")) ?: "");
        json_decref(s);
        if (strcmp(st, "completed") == 0 || strcmp(st, "failed") == 0 ||
            strcmp(st, "cancelled") == 0)
            return st;
        usleep(50 * 1000);
    }
    evd_t_dump_log(p);
    ck_abort_msg("evaluation %s did not finish (last status %s)", id, st);
    return NULL;
}

/* GET /v1/subscriptions/{id}/deliveries (new reference to the deliveries array). */
static json_t *deliveries(const struct evd_t_proc *p, const char *sub_id)
{
    char path[160];
    snprintf(path, sizeof(path), "/v1/subscriptions/%s/deliveries", sub_id);
    long status = 0;
    json_t *out = call(p, "GET", path, NULL, &status);
    ck_assert_int_eq(status, 200);
    json_t *list = json_incref(json_object_get(out, "deliveries"));
    json_decref(out);
    ck_assert(json_is_array(list));
    return list;
}

static long long sql_count(const char *sql)
{
    char *v = evd_t_sql(db_url, sql);
    ck_assert_ptr_nonnull(v);
    long long n = atoll(v);
    free(v);
    return n;
}

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static long long jint(json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

/* Checks the body is the eval::completed payload of `evaluation_id`. */
static void assert_event_body(const struct evd_t_hook *h, const char *evaluation_id)
{
    json_error_t jerr;
    json_t *b = json_loads(h->body, 0, &jerr);
    ck_assert_msg(b != NULL, "body is not JSON: %s", h->body);
    ck_assert_str_eq(jstr(b, "evaluation_id"), evaluation_id);
    ck_assert_str_eq(jstr(b, "status"), "completed");
    ck_assert(json_is_integer(json_object_get(b, "timestamp")));
    ck_assert_int_gt(jint(b, "timestamp"), 1700000000000LL);
    ck_assert(json_is_boolean(json_object_get(b, "eligible")));
    ck_assert_uint_le(json_object_size(b), 4);
    json_decref(b);
    ck_assert_str_eq(h->method, "POST");
    ck_assert_str_eq(h->content_type, "application/json");
    ck_assert(strncmp(h->event_id, "evt_", 4) == 0 && strlen(h->event_id) == 36);
    ck_assert(strncmp(h->delivery_id, "dlv_", 4) == 0 && strlen(h->delivery_id) == 36);
    ck_assert_str_eq(h->event_type, "evaluation.completed");
}

/* ---- tests --------------------------------------------------------------------------- */

START_TEST(signed_and_retried_until_acknowledged)
{
    struct evd_t_proc stub;
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    struct evd_t_receiver *rx = evd_t_receiver_start(0);
    ck_assert_ptr_nonnull(rx);
    evd_t_receiver_fail(rx, 3, 500);
    struct env e;
    base_env(&e, &stub);
    struct evd_t_proc p;
    start_evald(&p, &e);

    json_t *sub = subscribe(&p, rx, "/hook", NULL);
    const char *sub_id = jstr(sub, "subscription_id");
    char id[64];
    start_eval(&p, id);
    ck_assert_str_eq(wait_terminal(&p, id, 30000), "completed");
    ck_assert_msg(evd_t_receiver_wait_acked(rx, 1, 30000), "no acknowledged delivery");
    usleep(1000 * 1000); /* anything sent after the 2xx would be a duplicate */
    ck_assert_uint_eq(evd_t_receiver_count(rx), 4);
    ck_assert_uint_eq(evd_t_receiver_acked(rx), 1);

    char event_id[96] = "";
    for (size_t i = 0; i < 4; i++) {
        struct evd_t_hook h;
        ck_assert(evd_t_receiver_get(rx, i, &h));
        ck_assert_int_eq(h.answered, i < 3 ? 500 : 204);
        ck_assert_str_eq(h.path, "/hook");
        assert_event_body(&h, id);
        /* Same event on every attempt; a signature any receiver can recompute. */
        if (i == 0)
            snprintf(event_id, sizeof(event_id), "%s", h.event_id);
        ck_assert_str_eq(h.event_id, event_id);
        ck_assert_msg(evd_t_hook_signature_ok(&h, SECRET), "signature %s", h.signature);
        ck_assert(!evd_t_hook_signature_ok(&h, "whsec-not-the-secret-000"));
        long long t = atoll(h.timestamp);
        ck_assert_int_le(llabs(t - evd_now_ms() / 1000), 120);
        evd_t_hook_free(&h);
    }
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM completion_events WHERE event_id = '%s'",
             event_id);
    ck_assert_int_eq(sql_count(sql), 1);

    /* The delivery record: four attempts, the first three failed with 500. */
    json_t *list = deliveries(&p, sub_id);
    ck_assert_uint_eq(json_array_size(list), 1);
    json_t *d = json_array_get(list, 0);
    ck_assert_str_eq(jstr(d, "status"), "delivered");
    ck_assert_str_eq(jstr(d, "event_id"), event_id);
    ck_assert_str_eq(jstr(d, "evaluation_id"), id);
    ck_assert_str_eq(jstr(d, "subscription_id"), sub_id);
    ck_assert_int_eq(jint(d, "attempts"), 4);
    ck_assert_int_eq(jint(d, "last_status_code"), 204);
    ck_assert(json_is_null(json_object_get(d, "last_error")));
    ck_assert(json_is_null(json_object_get(d, "next_attempt_at")));
    ck_assert_int_ge(jint(d, "delivered_at"), jint(d, "created_at"));
    json_t *log = json_object_get(d, "attempt_log");
    ck_assert_uint_eq(json_array_size(log), 4);
    for (size_t i = 0; i < 4; i++) {
        json_t *a = json_array_get(log, i);
        ck_assert_int_eq(jint(a, "attempt"), (long long)i + 1);
        ck_assert_int_eq(jint(a, "status_code"), i < 3 ? 500 : 204);
        ck_assert_int_ge(jint(a, "duration_ms"), 0);
        ck_assert_int_ge(jint(a, "started_at"), jint(d, "created_at"));
        if (i < 3)
            ck_assert_str_eq(jstr(a, "error"), "receiver answered 500");
        else
            ck_assert(json_is_null(json_object_get(a, "error")));
    }
    json_decref(list);
    json_decref(sub);

    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 15000), 0);
    evd_t_receiver_stop(rx);
    evd_t_stop(&stub, SIGTERM, 5000);
}
END_TEST

START_TEST(filter_delivers_only_its_evaluation)
{
    /* Slow replies keep the evaluations running while the filtered subscription is made. */
    struct evd_t_proc stub;
    ck_assert_int_eq(evd_t_stub_start(&stub, "{\"default\":{\"latency_ms\":600}}", NULL), 0);
    struct evd_t_receiver *rx = evd_t_receiver_start(0);
    ck_assert_ptr_nonnull(rx);
    struct env e;
    base_env(&e, &stub);
    struct evd_t_proc p;
    start_evald(&p, &e);

    json_t *all = subscribe(&p, rx, "/all", NULL);
    char x[64], y[64];
    start_eval(&p, x);
    start_eval(&p, y);
    json_t *only = subscribe(&p, rx, "/only", x);
    ck_assert_str_eq(jstr(only, "evaluation_id"), x);
    ck_assert(json_is_null(json_object_get(all, "evaluation_id")));
    wait_terminal(&p, x, 30000);
    wait_terminal(&p, y, 30000);
    ck_assert_msg(evd_t_receiver_wait_acked(rx, 3, 30000), "expected 3 deliveries, got %zu",
                  evd_t_receiver_acked(rx));

    /* A subscription made after both events gets neither. */
    json_t *late = subscribe(&p, rx, "/late", NULL);
    usleep(2500 * 1000); /* longer than the fallback poll */
    ck_assert_uint_eq(evd_t_receiver_count(rx), 3);

    int only_x = 0, all_x = 0, all_y = 0;
    for (size_t i = 0; i < 3; i++) {
        struct evd_t_hook h;
        ck_assert(evd_t_receiver_get(rx, i, &h));
        json_t *b = json_loads(h.body, 0, NULL);
        const char *ev = jstr(b, "evaluation_id");
        ck_assert(evd_t_hook_signature_ok(&h, SECRET));
        if (strcmp(h.path, "/only") == 0) {
            ck_assert_str_eq(ev, x);
            only_x++;
        } else {
            ck_assert_str_eq(h.path, "/all");
            all_x += strcmp(ev, x) == 0;
            all_y += strcmp(ev, y) == 0;
        }
        json_decref(b);
        evd_t_hook_free(&h);
    }
    ck_assert_int_eq(only_x, 1);
    ck_assert_int_eq(all_x, 1);
    ck_assert_int_eq(all_y, 1);

    json_t *l = deliveries(&p, jstr(only, "subscription_id"));
    ck_assert_uint_eq(json_array_size(l), 1);
    ck_assert_str_eq(jstr(json_array_get(l, 0), "evaluation_id"), x);
    json_decref(l);
    l = deliveries(&p, jstr(all, "subscription_id"));
    ck_assert_uint_eq(json_array_size(l), 2);
    json_decref(l);
    l = deliveries(&p, jstr(late, "subscription_id"));
    ck_assert_uint_eq(json_array_size(l), 0);
    json_decref(l);

    /* Paging: one per page, newest first, then the cursor runs out. */
    char path[256];
    snprintf(path, sizeof(path), "/v1/subscriptions/%s/deliveries?limit=1",
             jstr(all, "subscription_id"));
    long status = 0;
    json_t *page = call(&p, "GET", path, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(page, "deliveries")), 1);
    const char *cursor = jstr(page, "next_cursor");
    ck_assert_ptr_nonnull(cursor);
    char path2[512];
    snprintf(path2, sizeof(path2), "%s&before=%s", path, cursor);
    json_t *page2 = call(&p, "GET", path2, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(page2, "deliveries")), 1);
    ck_assert_ptr_null(json_object_get(page2, "next_cursor"));
    ck_assert_str_ne(jstr(json_array_get(json_object_get(page, "deliveries"), 0), "delivery_id"),
                     jstr(json_array_get(json_object_get(page2, "deliveries"), 0), "delivery_id"));
    json_decref(page);
    json_decref(page2);

    json_decref(all);
    json_decref(only);
    json_decref(late);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 15000), 0);
    evd_t_receiver_stop(rx);
    evd_t_stop(&stub, SIGTERM, 5000);
}
END_TEST

/* Counts the acknowledged requests that carried `event_id`. */
static int acked_for(struct evd_t_receiver *rx, const char *evaluation_id)
{
    int n = 0;
    size_t total = evd_t_receiver_count(rx);
    for (size_t i = 0; i < total; i++) {
        struct evd_t_hook h;
        ck_assert(evd_t_receiver_get(rx, i, &h));
        json_t *b = json_loads(h.body, 0, NULL);
        if (h.answered >= 200 && h.answered < 300 &&
            strcmp(jstr(b, "evaluation_id"), evaluation_id) == 0)
            n++;
        json_decref(b);
        evd_t_hook_free(&h);
    }
    return n;
}

START_TEST(kill_9_before_delivery_still_delivers)
{
    struct evd_t_proc stub;
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    struct evd_t_receiver *rx = evd_t_receiver_start(0);
    ck_assert_ptr_nonnull(rx);

    /* 1. This process records the event but delivers nothing, then dies. */
    struct env e0;
    base_env(&e0, &stub);
    env_add(&e0, "EVALD_WEBHOOK_WORKERS=0");
    struct evd_t_proc p0;
    start_evald(&p0, &e0);
    json_t *sub = subscribe(&p0, rx, "/k", NULL);
    char a[64];
    start_eval(&p0, a);
    wait_terminal(&p0, a, 30000);
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM completion_events WHERE evaluation_id = '%s'",
             a);
    ck_assert_int_eq(sql_count(sql), 1);
    ck_assert_int_eq(evd_t_stop(&p0, SIGKILL, 5000), 128 + SIGKILL);
    ck_assert_uint_eq(evd_t_receiver_count(rx), 0);

    /* 2. After a restart it is delivered. */
    struct env e;
    base_env(&e, &stub);
    struct evd_t_proc p1;
    start_evald(&p1, &e);
    ck_assert_msg(evd_t_receiver_wait_acked(rx, 1, 30000), "not delivered after the restart");
    ck_assert_int_eq(acked_for(rx, a), 1);

    /* 3. The receiver fails; evald is killed between failed attempts; after a restart
     * the retries go on and succeed. */
    evd_t_receiver_fail(rx, -1, 503);
    char b[64];
    start_eval(&p1, b);
    wait_terminal(&p1, b, 30000);
    size_t before = evd_t_receiver_count(rx);
    ck_assert_msg(evd_t_receiver_wait_count(rx, before + 2, 30000), "no failed attempts");
    ck_assert_int_eq(evd_t_stop(&p1, SIGKILL, 5000), 128 + SIGKILL);
    ck_assert_int_eq(acked_for(rx, b), 0);
    evd_t_receiver_fail(rx, 0, 0);
    struct evd_t_proc p2;
    start_evald(&p2, &e);
    /* A lease left by the killed process expires within 15 s. */
    ck_assert_msg(evd_t_receiver_wait_acked(rx, 2, 40000),
                  "not delivered after the second restart");
    usleep(1000 * 1000);
    ck_assert_int_eq(acked_for(rx, a), 1);
    ck_assert_int_eq(acked_for(rx, b), 1);

    json_t *list = deliveries(&p2, jstr(sub, "subscription_id"));
    ck_assert_uint_eq(json_array_size(list), 2);
    json_t *d;
    size_t i;
    json_array_foreach(list, i, d)
    {
        ck_assert_str_eq(jstr(d, "status"), "delivered");
        json_t *log = json_object_get(d, "attempt_log");
        ck_assert_int_eq(jint(json_array_get(log, json_array_size(log) - 1), "status_code"), 204);
        if (strcmp(jstr(d, "evaluation_id"), b) == 0) {
            ck_assert_int_ge(jint(d, "attempts"), 3);
            ck_assert_int_eq(jint(json_array_get(log, 0), "status_code"), 503);
            ck_assert_str_eq(jstr(json_array_get(log, 0), "error"), "receiver answered 503");
        } else {
            ck_assert_str_eq(jstr(d, "evaluation_id"), a);
            ck_assert_int_eq(jint(d, "attempts"), 1);
        }
    }
    json_decref(list);
    json_decref(sub);
    ck_assert_int_eq(evd_t_stop(&p2, SIGTERM, 15000), 0);
    evd_t_receiver_stop(rx);
    evd_t_stop(&stub, SIGTERM, 5000);
}
END_TEST

/* True when `needle` occurs in the file at `path`. */
static bool file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

START_TEST(secret_never_leaves_the_request)
{
    struct evd_t_proc stub;
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    struct evd_t_receiver *rx = evd_t_receiver_start(0);
    ck_assert_ptr_nonnull(rx);
    struct env e;
    base_env(&e, &stub);
    env_add(&e, "EVALD_LOG_LEVEL=debug");
    struct evd_t_proc p;
    start_evald(&p, &e);

    /* Every answer that shows a subscription, and every error about one. */
    char body[512];
    snprintf(body, sizeof(body), "{\"url\":\"http://127.0.0.1:%u/s\",\"secret\":\"" SECRET "\"}",
             evd_t_receiver_port(rx));
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/subscriptions", p.base);
    struct evd_t_resp r;
    ck_assert_int_eq(evd_t_http("POST", url, NULL, body, strlen(body), &r), 0);
    ck_assert_int_eq(r.status, 201);
    ck_assert_ptr_null(strstr(r.body, "Canary"));
    ck_assert_ptr_null(strstr(r.headers, "Canary"));
    json_t *sub = json_loads(r.body, 0, NULL);
    ck_assert_ptr_null(json_object_get(sub, "secret"));
    char loc[300];
    snprintf(loc, sizeof(loc), "Location: /v1/subscriptions/%s", jstr(sub, "subscription_id"));
    ck_assert_ptr_nonnull(strstr(r.headers, loc));
    evd_t_resp_free(&r);

    char id[64];
    start_eval(&p, id);
    wait_terminal(&p, id, 30000);
    ck_assert(evd_t_receiver_wait_acked(rx, 1, 30000));

    char paths[3][200];
    snprintf(paths[0], sizeof(paths[0]), "%s/v1/subscriptions", p.base);
    snprintf(paths[1], sizeof(paths[1]), "%s/v1/subscriptions/%s", p.base,
             jstr(sub, "subscription_id"));
    snprintf(paths[2], sizeof(paths[2]), "%s/v1/subscriptions/%s/deliveries", p.base,
             jstr(sub, "subscription_id"));
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(evd_t_http("GET", paths[i], NULL, NULL, 0, &r), 0);
        ck_assert_int_eq(r.status, 200);
        ck_assert_msg(strstr(r.body, "Canary") == NULL, "%s shows the secret", paths[i]);
        ck_assert(strstr(r.body, "secret") == NULL);
        evd_t_resp_free(&r);
    }
    /* A refused request with the secret in it does not echo it either. */
    const char *bad = "{\"url\":\"ftp://x\",\"secret\":\"" SECRET "\"}";
    ck_assert_int_eq(evd_t_http("POST", url, NULL, bad, strlen(bad), &r), 0);
    ck_assert_int_eq(r.status, 400);
    ck_assert_ptr_null(strstr(r.body, "Canary"));
    evd_t_resp_free(&r);

    /* The database holds it sealed: no table has it in plain text or in hex. */
    char hex[2 * sizeof(SECRET) + 1];
    for (size_t i = 0; i < strlen(SECRET); i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)SECRET[i]);
    char *tables = evd_t_sql(db_url, "SELECT string_agg(quote_ident(table_name), ',')"
                                     " FROM information_schema.tables"
                                     " WHERE table_schema = 'public'");
    ck_assert_ptr_nonnull(tables);
    ck_assert_ptr_nonnull(strstr(tables, "subscriptions"));
    char *save = NULL;
    for (char *t = strtok_r(tables, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char sql[512];
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM %s x WHERE x::text ILIKE '%%Canary%%'"
                 " OR x::text ILIKE '%%%s%%'",
                 t, hex);
        ck_assert_msg(sql_count(sql) == 0, "table %s holds the secret", t);
    }
    free(tables);
    ck_assert_int_eq(
        sql_count("SELECT count(*) FROM subscriptions WHERE secret_sealed LIKE 'v1:%'"), 1);

    /* Nor is it in any log line (debug level included). */
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 15000), 0);
    ck_assert_msg(!file_contains(p.log_path, "Canary"), "the secret was logged");
    ck_assert(file_contains(p.log_path, "webhook delivered"));

    /* A process with another key cannot open it: the attempt fails, nothing is sent. */
    evd_t_receiver_fail(rx, 0, 0);
    struct env e2;
    base_env(&e2, &stub);
    snprintf(e2.store[5], sizeof(e2.store[5]),
             "EVALD_SECRET_KEY=ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff");
    struct evd_t_proc p2;
    start_evald(&p2, &e2);
    size_t sent = evd_t_receiver_count(rx);
    char id2[64];
    start_eval(&p2, id2);
    wait_terminal(&p2, id2, 30000);
    int64_t deadline = evd_mono_ms() + 20000;
    const char *last_error = NULL;
    json_t *list = NULL;
    while (evd_mono_ms() < deadline) {
        json_decref(list);
        list = deliveries(&p2, jstr(sub, "subscription_id"));
        json_t *d = json_array_get(list, 0); /* newest first */
        if (d && strcmp(jstr(d, "evaluation_id"), id2) == 0 && jint(d, "attempts") >= 2 &&
            (last_error = jstr(d, "last_error")) != NULL)
            break;
        usleep(100 * 1000);
    }
    ck_assert_ptr_nonnull(last_error);
    ck_assert_msg(strstr(last_error, "EVALD_SECRET_KEY") != NULL, "%s", last_error);
    json_decref(list);
    ck_assert_uint_eq(evd_t_receiver_count(rx), sent);
    ck_assert_int_eq(evd_t_stop(&p2, SIGTERM, 15000), 0);
    ck_assert(!file_contains(p2.log_path, "Canary"));

    json_decref(sub);
    evd_t_receiver_stop(rx);
    evd_t_stop(&stub, SIGTERM, 5000);
}
END_TEST

struct bad_case {
    const char *body;
    const char *field; /* the detail names it */
};

static const struct bad_case bad_cases[] = {
    {"{}", "url is required"},
    {"{\"secret\":\"" SECRET "\"}", "url is required"},
    {"{\"url\":5,\"secret\":\"" SECRET "\"}", "url must be a string"},
    {"{\"url\":\"ftp://127.0.0.1/x\",\"secret\":\"" SECRET "\"}", "url must be an http or https"},
    {"{\"url\":\"http://10.0.0.7/x\",\"secret\":\"" SECRET "\"}", "url host 10.0.0.7"},
    {"{\"url\":\"http://169.254.169.254/latest\",\"secret\":\"" SECRET "\"}", "url host"},
    {"{\"url\":\"http://u:p@127.0.0.1/x\",\"secret\":\"" SECRET "\"}", "url must not contain"},
    {"{\"url\":\"http://127.0.0.1:9/x\"}", "secret is required"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":12}", "secret must be a string"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"short\"}", "secret must be 16 to 256"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" SECRET "\",\"evaluation_id\":7}",
     "evaluation_id must be a string or null"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" SECRET "\",\"evaluation_id\":\"a b\"}",
     "evaluation_id must be"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" SECRET "\",\"event\":[\"x\"]}",
     "event is not a known field"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" SECRET "\",\"events\":[]}",
     "events must be a non-empty array of event types"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" SECRET "\",\"events\":null}",
     "events must be a non-empty array of event types"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" SECRET
     "\",\"events\":\"experiment.completed\"}",
     "events must be a non-empty array of event types"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" SECRET
     "\",\"events\":[\"evaluation.completed\",\"foo\"]}",
     "events[1] is not a known event type: foo"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" SECRET "\",\"events\":[7]}",
     "events[0] must be a string"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" SECRET
     "\",\"events\":[\"experiment.completed\",\"experiment.completed\"]}",
     "events[1] repeats experiment.completed"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" SECRET
     "\",\"evaluation_id\":\"eval_1\",\"events\":[\"experiment.completed\"]}",
     "events cannot include experiment.completed when evaluation_id is set"},
    {"[]", "request body must be a JSON object"},
    {"{\"url\":\"http://127.0.0.1:9/x\",", "malformed JSON"},
};

static void assert_400(const struct evd_t_proc *p, const char *body, const char *want)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/subscriptions", p->base);
    struct evd_t_resp r;
    ck_assert_int_eq(evd_t_http("POST", url, NULL, body, strlen(body), &r), 0);
    ck_assert_msg(r.status == 400, "%s: %ld %s", body, r.status, r.body);
    ck_assert_str_eq(r.content_type, "application/problem+json");
    json_t *j = json_loads(r.body, 0, NULL);
    ck_assert_str_eq(jstr(j, "code"), "invalid_request");
    ck_assert_msg(strstr(jstr(j, "detail"), want) != NULL, "%s: detail %s", body,
                  jstr(j, "detail"));
    ck_assert_ptr_null(strstr(r.body, "Canary"));
    json_decref(j);
    evd_t_resp_free(&r);
}

START_TEST(bad_input_is_refused_and_writes_nothing)
{
    struct evd_t_proc stub;
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    struct env e;
    base_env(&e, &stub);
    struct evd_t_proc p;
    start_evald(&p, &e);
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++)
        assert_400(&p, bad_cases[i].body, bad_cases[i].field);
    ck_assert_int_eq(sql_count("SELECT count(*) FROM subscriptions"), 0);

    /* Unknown ids and bad paging. */
    long status = 0;
    json_t *j = call(&p, "GET", "/v1/subscriptions/sub_nope", NULL, &status);
    ck_assert_int_eq(status, 404);
    json_decref(j);
    j = call(&p, "DELETE", "/v1/subscriptions/sub_nope", NULL, &status);
    ck_assert_int_eq(status, 404);
    json_decref(j);
    j = call(&p, "GET", "/v1/subscriptions/sub_nope/deliveries", NULL, &status);
    ck_assert_int_eq(status, 404);
    json_decref(j);
    j = call(&p, "GET", "/v1/subscriptions", NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "subscriptions")), 0);
    json_decref(j);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 15000), 0);

    /* Without an allowlist: loopback, private and link-local are refused, public names
     * are accepted (their addresses are checked at every delivery). */
    struct env open;
    base_env(&open, &stub);
    open.n = 3; /* drop the allowlist, the backoff and the key ... */
    open.v[3] = NULL;
    env_add(&open, "EVALD_SECRET_KEY=" KEY_HEX); /* ... and keep the key */
    struct evd_t_proc q;
    start_evald(&q, &open);
    const char *refused[] = {"http://127.0.0.1:9/x", "http://[::1]/x", "http://localhost/x",
                             "http://192.168.1.1/x", "http://169.254.169.254/"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"url\":\"%s\",\"secret\":\"" SECRET "\"}", refused[i]);
        assert_400(&q, body, "url host");
    }
    ck_assert_int_eq(sql_count("SELECT count(*) FROM subscriptions"), 0);
    json_t *ok = call(&q, "POST", "/v1/subscriptions",
                      "{\"url\":\"https://hooks.example.com/evald\",\"secret\":\"" SECRET "\","
                      "\"evaluation_id\":null}",
                      &status);
    ck_assert_int_eq(status, 201);
    ck_assert_str_eq(jstr(ok, "url"), "https://hooks.example.com/evald");
    ck_assert(json_is_null(json_object_get(ok, "evaluation_id")));
    ck_assert(json_is_integer(json_object_get(ok, "created_at")));
    json_t *want_events = json_pack("[s]", "evaluation.completed");
    ck_assert(json_equal(json_object_get(ok, "events"), want_events));
    json_decref(want_events);
    ck_assert_uint_eq(json_object_size(ok), 5);
    char path[160];
    snprintf(path, sizeof(path), "/v1/subscriptions/%s", jstr(ok, "subscription_id"));
    j = call(&q, "GET", path, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(json_equal(j, ok));
    json_decref(j);
    j = call(&q, "GET", "/v1/subscriptions", NULL, &status);
    ck_assert(json_equal(json_array_get(json_object_get(j, "subscriptions"), 0), ok));
    json_decref(j);
    j = call(&q, "DELETE", path, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(json_is_true(json_object_get(j, "deleted")));
    json_decref(j);
    j = call(&q, "GET", path, NULL, &status);
    ck_assert_int_eq(status, 404);
    json_decref(j);
    json_decref(ok);
    ck_assert_int_eq(evd_t_stop(&q, SIGTERM, 15000), 0);

    /* Without EVALD_SECRET_KEY subscriptions cannot be sealed: 503, nothing written. */
    struct env nokey;
    base_env(&nokey, &stub);
    nokey.n = 5;
    nokey.v[5] = NULL;
    struct evd_t_proc k;
    start_evald(&k, &nokey);
    char body[256];
    snprintf(body, sizeof(body), "{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" SECRET "\"}");
    j = call(&k, "POST", "/v1/subscriptions", body, &status);
    ck_assert_int_eq(status, 503);
    ck_assert_str_eq(jstr(j, "code"), "unavailable");
    ck_assert_ptr_nonnull(strstr(jstr(j, "detail"), "EVALD_SECRET_KEY"));
    json_decref(j);
    ck_assert_int_eq(sql_count("SELECT count(*) FROM subscriptions"), 0);
    ck_assert_int_eq(evd_t_stop(&k, SIGTERM, 15000), 0);

    /* A malformed key or allowlist stops evald at start-up (exit 2). */
    struct env badkey;
    base_env(&badkey, &stub);
    snprintf(badkey.store[5], sizeof(badkey.store[5]), "EVALD_SECRET_KEY=not-hex");
    ck_assert_int_ne(evd_t_evald_start(&k, db_url, badkey.v), 0);
    ck_assert(file_contains(k.log_path, "EVALD_SECRET_KEY must be 64 hexadecimal"));
    struct env badallow;
    base_env(&badallow, &stub);
    snprintf(badallow.store[3], sizeof(badallow.store[3]),
             "EVALD_WEBHOOK_ALLOW_HOSTS=http://x.example.com/");
    ck_assert_int_ne(evd_t_evald_start(&k, db_url, badallow.v), 0);
    ck_assert(file_contains(k.log_path, "EVALD_WEBHOOK_ALLOW_HOSTS"));
    evd_t_stop(&stub, SIGTERM, 5000);
}
END_TEST

START_TEST(private_address_refused_at_connect_time)
{
    /* A subscription whose name resolves (now) to a loopback address: here the row is
     * written directly, as if DNS had changed since it was made. Without an allowlist
     * the connection is refused and the attempt records why. */
    struct evd_t_proc stub;
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    struct evd_t_receiver *rx = evd_t_receiver_start(0);
    ck_assert_ptr_nonnull(rx);
    struct env e;
    base_env(&e, &stub);
    e.n = 3;
    e.v[3] = NULL;
    env_add(&e, "EVALD_SECRET_KEY=" KEY_HEX);
    env_add(&e, "EVALD_WEBHOOK_BACKOFF_MS=100");
    struct evd_t_proc p;
    start_evald(&p, &e);

    unsigned char key[EVD_WEBHOOK_KEY_LEN];
    ck_assert(evd_webhook_key_parse(KEY_HEX, key));
    const char *sub_id = "sub_00000000000000000000000000000001";
    char *sealed = evd_webhook_seal(key, sub_id, SECRET, strlen(SECRET));
    ck_assert_ptr_nonnull(sealed);
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "INSERT INTO subscriptions (id, url, secret_sealed, seq, created_at)"
             " VALUES ('%s', 'http://localhost:%u/rebound', '%s', nextval('webhook_seq'), 0)",
             sub_id, evd_t_receiver_port(rx), sealed);
    free(sealed);
    char *ins = evd_t_sql(db_url, sql);
    ck_assert_ptr_nonnull(ins);
    free(ins);

    char id[64];
    start_eval(&p, id);
    wait_terminal(&p, id, 30000);
    const char *err = NULL;
    json_t *list = NULL;
    int64_t deadline = evd_mono_ms() + 20000;
    while (evd_mono_ms() < deadline) {
        json_decref(list);
        list = deliveries(&p, sub_id);
        json_t *d = json_array_get(list, 0);
        if (d && jint(d, "attempts") >= 2 && (err = jstr(d, "last_error")) != NULL)
            break;
        usleep(100 * 1000);
    }
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(err, "is not allowed") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "127.0.0.1") != NULL || strstr(err, "::1") != NULL, "%s", err);
    ck_assert_str_eq(jstr(json_array_get(list, 0), "status"), "pending");
    json_decref(list);
    ck_assert_uint_eq(evd_t_receiver_count(rx), 0);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 15000), 0);
    evd_t_receiver_stop(rx);
    evd_t_stop(&stub, SIGTERM, 5000);
}
END_TEST

START_TEST(silent_receiver_delays_no_other)
{
    /* One receiver accepts the connection and never answers; three answer at once. The
     * healthy ones get every event well inside the silent one's 10 s timeout, while the
     * silent one's deliveries are attempted side by side, time out and are retried. */
    enum { EVALS = 3, HEALTHY = 3 };
    struct evd_t_proc stub;
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    struct evd_t_receiver *silent = evd_t_receiver_start(0);
    ck_assert_ptr_nonnull(silent);
    evd_t_receiver_hang(silent, true);
    struct evd_t_receiver *ok[HEALTHY];
    for (int i = 0; i < HEALTHY; i++) {
        ok[i] = evd_t_receiver_start(0);
        ck_assert_ptr_nonnull(ok[i]);
    }
    struct env e;
    base_env(&e, &stub);
    struct evd_t_proc p;
    start_evald(&p, &e);
    json_t *ssub = subscribe(&p, silent, "/silent", NULL);
    json_t *subs[HEALTHY];
    for (int i = 0; i < HEALTHY; i++)
        subs[i] = subscribe(&p, ok[i], "/ok", NULL);

    char ids[EVALS][64];
    for (int i = 0; i < EVALS; i++) {
        start_eval(&p, ids[i]);
        ck_assert_str_eq(wait_terminal(&p, ids[i], 30000), "completed");
    }
    int64_t t0 = evd_mono_ms();
    for (int i = 0; i < HEALTHY; i++)
        ck_assert_msg(evd_t_receiver_wait_acked(ok[i], EVALS, 5000),
                      "healthy receiver %d got %zu of %d events within 5 s", i,
                      evd_t_receiver_acked(ok[i]), EVALS);
    long long healthy_ms = (long long)(evd_mono_ms() - t0);
    /* The silent receiver's deliveries are in flight together, not one after another. */
    ck_assert_msg(evd_t_receiver_wait_count(silent, EVALS, 5000), "silent receiver saw %zu",
                  evd_t_receiver_count(silent));
    fprintf(stderr, "healthy receivers done %lld ms after the last evaluation\n", healthy_ms);

    /* Each silent delivery times out (10 s) and is tried again. */
    ck_assert_msg(evd_t_receiver_wait_count(silent, 2 * EVALS, 30000),
                  "silent receiver saw %zu requests, want retries", evd_t_receiver_count(silent));
    ck_assert_uint_eq(evd_t_receiver_acked(silent), 0);
    json_t *list = deliveries(&p, jstr(ssub, "subscription_id"));
    ck_assert_uint_eq(json_array_size(list), EVALS);
    size_t i;
    json_t *d;
    json_array_foreach(list, i, d)
    {
        ck_assert_str_eq(jstr(d, "status"), "pending");
        json_t *first = json_array_get(json_object_get(d, "attempt_log"), 0);
        ck_assert_ptr_nonnull(first);
        ck_assert_str_eq(jstr(first, "error"), "no answer within 10000 ms");
        ck_assert(json_is_null(json_object_get(first, "status_code")));
        ck_assert_int_ge(jint(first, "duration_ms"), 9000);
    }
    json_decref(list);
    for (int k = 0; k < HEALTHY; k++) {
        list = deliveries(&p, jstr(subs[k], "subscription_id"));
        ck_assert_uint_eq(json_array_size(list), EVALS);
        json_array_foreach(list, i, d)
        {
            ck_assert_str_eq(jstr(d, "status"), "delivered");
            ck_assert_int_eq(jint(d, "attempts"), 1);
        }
        json_decref(list);
        ck_assert_uint_eq(evd_t_receiver_count(ok[k]), EVALS);
    }

    /* SIGTERM while attempts hang: they are handed back uncounted, no lease is left. */
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 15000), 0);
    ck_assert_int_eq(sql_count("SELECT count(*) FROM webhook_deliveries d"
                               " WHERE lease_owner IS NOT NULL OR attempts <>"
                               " (SELECT count(*) FROM webhook_attempts a"
                               "  WHERE a.delivery_id = d.id)"),
                     0);

    /* Once the receiver answers again, every event reaches it, each once. */
    evd_t_receiver_hang(silent, false);
    start_evald(&p, &e);
    ck_assert_msg(evd_t_receiver_wait_acked(silent, EVALS, 30000), "silent receiver acked %zu",
                  evd_t_receiver_acked(silent));
    usleep(500 * 1000);
    ck_assert_uint_eq(evd_t_receiver_acked(silent), EVALS);
    for (int k = 0; k < EVALS; k++)
        ck_assert_int_eq(acked_for(silent, ids[k]), 1);
    for (int k = 0; k < HEALTHY; k++) {
        ck_assert_uint_eq(evd_t_receiver_count(ok[k]), EVALS);
        json_decref(subs[k]);
    }
    json_decref(ssub);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 15000), 0);
    evd_t_receiver_stop(silent);
    for (int k = 0; k < HEALTHY; k++)
        evd_t_receiver_stop(ok[k]);
    evd_t_stop(&stub, SIGTERM, 5000);
}
END_TEST

/* The experiment.completed body the engine records, keys deliberately out of order: the
 * delivered body puts them in the documented order. */
static json_t *experiment_payload(const char *id)
{
    return json_pack("{s:[{s:s, s:s, s:i}, {s:s, s:i, s:s}], s:I, s:s, s:s}", "verdicts", "verdict",
                     "better", "label", "shorter", "treatment", 1, "label", "longer", "treatment",
                     2, "verdict", "inconclusive", "timestamp", (json_int_t)1767225603900LL,
                     "status", "completed", "experiment_id", id);
}

static const char EXPERIMENT_BODY[] =
    "{\"experiment_id\":\"exp_hooks_1\",\"status\":\"completed\",\"timestamp\":1767225603900,"
    "\"verdicts\":[{\"treatment\":1,\"label\":\"shorter\",\"verdict\":\"better\"},"
    "{\"treatment\":2,\"label\":\"longer\",\"verdict\":\"inconclusive\"}]}";

START_TEST(events_filter_routes_each_type)
{
    struct evd_t_proc stub;
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    struct evd_t_receiver *rx = evd_t_receiver_start(0);
    ck_assert_ptr_nonnull(rx);
    struct env e;
    base_env(&e, &stub);
    struct evd_t_proc p;
    start_evald(&p, &e);

    json_t *def = subscribe(&p, rx, "/default", NULL);
    json_t *want = json_pack("[s]", "evaluation.completed");
    ck_assert(json_equal(json_object_get(def, "events"), want));
    json_decref(want);
    json_t *exp = subscribe_events(&p, rx, "/exp", "[\"experiment.completed\"]");
    json_t *both =
        subscribe_events(&p, rx, "/both", "[\"experiment.completed\",\"evaluation.completed\"]");
    json_t *scoped = subscribe(&p, rx, "/scoped", "eval_not_this_one");
    /* The API refuses an evaluation filter with experiment events; a row written
     * directly shows the fan-out would not match them either. */
    unsigned char key[EVD_WEBHOOK_KEY_LEN];
    ck_assert(evd_webhook_key_parse(KEY_HEX, key));
    const char *raw_id = "sub_00000000000000000000000000000002";
    char *sealed = evd_webhook_seal(key, raw_id, SECRET, strlen(SECRET));
    ck_assert_ptr_nonnull(sealed);
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "INSERT INTO subscriptions (id, url, evaluation_id, events, secret_sealed, seq,"
             " created_at) VALUES ('%s', 'http://127.0.0.1:%u/scoped', 'eval_not_this_one',"
             " '{experiment.completed}', '%s', nextval('webhook_seq'), 0)",
             raw_id, evd_t_receiver_port(rx), sealed);
    free(sealed);
    free(evd_t_sql(db_url, sql));
    ck_assert_int_eq(sql_count("SELECT count(*) FROM subscriptions"), 5);
    /* What was returned at creation is what a read returns. */
    char path[160];
    snprintf(path, sizeof(path), "/v1/subscriptions/%s", jstr(both, "subscription_id"));
    long status = 0;
    json_t *read = call(&p, "GET", path, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(json_equal(read, both));
    json_decref(read);

    /* 1. An evaluation: the default and the both subscriptions, not the experiment one. */
    char id[64];
    start_eval(&p, id);
    ck_assert_str_eq(wait_terminal(&p, id, 30000), "completed");
    ck_assert_msg(evd_t_receiver_wait_acked(rx, 2, 30000), "evaluation event: %zu deliveries",
                  evd_t_receiver_acked(rx));

    /* 2. An experiment event as the engine records it: in the terminal transaction,
     * exactly once even when the transition is repeated. A payload that is not an
     * experiment.completed body is refused and writes nothing. */
    struct evd_err err = {0};
    PGconn *c = evd_db_connect(db_url, &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    json_t *payload = experiment_payload("exp_hooks_1");
    json_t *running = json_pack("{s:s, s:s, s:I, s:[]}", "experiment_id", "exp_hooks_1", "status",
                                "running", "timestamp", (json_int_t)1, "verdicts");
    ck_assert_int_eq(evd_store_experiment_event(c, "exp_hooks_1", running, 1, &err), EVD_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "status"));
    ck_assert_int_eq(evd_store_experiment_event(c, "exp_other", payload, 1, &err), EVD_EINVAL);
    ck_assert_int_eq(sql_count("SELECT count(*) FROM completion_events"
                               " WHERE event_type = 'experiment.completed'"),
                     0);
    ck_assert_int_eq(evd_db_begin(c, &err), EVD_OK);
    ck_assert_int_eq(evd_store_experiment_event(c, "exp_hooks_1", payload, evd_now_ms(), &err),
                     EVD_OK);
    ck_assert_int_eq(evd_store_experiment_event(c, "exp_hooks_1", payload, evd_now_ms(), &err),
                     EVD_OK);
    ck_assert_int_eq(evd_db_commit(c, &err), EVD_OK);
    ck_assert_int_eq(evd_store_experiment_event(c, "exp_hooks_1", payload, evd_now_ms(), &err),
                     EVD_OK);
    ck_assert_int_eq(sql_count("SELECT count(*) FROM completion_events"
                               " WHERE experiment_id = 'exp_hooks_1'"
                               " AND event_type = 'experiment.completed'"
                               " AND evaluation_id IS NULL"),
                     1);
    PQfinish(c);
    json_decref(payload);
    json_decref(running);
    ck_assert_msg(evd_t_receiver_wait_acked(rx, 4, 30000), "experiment event: %zu deliveries",
                  evd_t_receiver_acked(rx));
    usleep(2500 * 1000); /* longer than the fallback poll: nothing else arrives */
    ck_assert_uint_eq(evd_t_receiver_count(rx), 4);

    int def_eval = 0, exp_exp = 0, both_eval = 0, both_exp = 0;
    char exp_event_id[96] = "";
    for (size_t i = 0; i < 4; i++) {
        struct evd_t_hook h;
        ck_assert(evd_t_receiver_get(rx, i, &h));
        ck_assert_msg(evd_t_hook_signature_ok(&h, SECRET), "%s: signature", h.path);
        ck_assert_msg(strcmp(h.path, "/scoped") != 0, "the evaluation-scoped subscription got %s",
                      h.body);
        bool experiment = strcmp(h.event_type, "experiment.completed") == 0;
        if (experiment) {
            ck_assert_str_eq(h.body, EXPERIMENT_BODY);
            ck_assert_str_eq(h.content_type, "application/json");
            ck_assert(strncmp(h.delivery_id, "dlv_", 4) == 0);
            if (exp_event_id[0] == '\0')
                snprintf(exp_event_id, sizeof(exp_event_id), "%s", h.event_id);
            ck_assert_str_eq(h.event_id, exp_event_id); /* one event, two subscriptions */
        } else {
            assert_event_body(&h, id);
        }
        if (strcmp(h.path, "/default") == 0) {
            ck_assert_msg(!experiment, "the default subscription got an experiment event");
            def_eval++;
        } else if (strcmp(h.path, "/exp") == 0) {
            ck_assert_msg(experiment, "the experiment subscription got %s", h.body);
            exp_exp++;
        } else {
            ck_assert_str_eq(h.path, "/both");
            both_eval += !experiment;
            both_exp += experiment;
        }
        evd_t_hook_free(&h);
    }
    ck_assert_int_eq(def_eval, 1);
    ck_assert_int_eq(exp_exp, 1);
    ck_assert_int_eq(both_eval, 1);
    ck_assert_int_eq(both_exp, 1);

    /* The delivery records name the event's type and subject. */
    json_t *list = deliveries(&p, jstr(exp, "subscription_id"));
    ck_assert_uint_eq(json_array_size(list), 1);
    json_t *d = json_array_get(list, 0);
    ck_assert_str_eq(jstr(d, "event_type"), "experiment.completed");
    ck_assert_str_eq(jstr(d, "experiment_id"), "exp_hooks_1");
    ck_assert(json_is_null(json_object_get(d, "evaluation_id")));
    ck_assert_str_eq(jstr(d, "event_id"), exp_event_id);
    ck_assert_str_eq(jstr(d, "status"), "delivered");
    json_decref(list);
    list = deliveries(&p, jstr(def, "subscription_id"));
    ck_assert_uint_eq(json_array_size(list), 1);
    d = json_array_get(list, 0);
    ck_assert_str_eq(jstr(d, "event_type"), "evaluation.completed");
    ck_assert_str_eq(jstr(d, "evaluation_id"), id);
    ck_assert(json_is_null(json_object_get(d, "experiment_id")));
    json_decref(list);
    list = deliveries(&p, jstr(scoped, "subscription_id"));
    ck_assert_uint_eq(json_array_size(list), 0);
    json_decref(list);
    list = deliveries(&p, raw_id);
    ck_assert_uint_eq(json_array_size(list), 0);
    json_decref(list);

    json_decref(def);
    json_decref(exp);
    json_decref(both);
    json_decref(scoped);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 15000), 0);
    evd_t_receiver_stop(rx);
    evd_t_stop(&stub, SIGTERM, 5000);
}
END_TEST

START_TEST(outbox_rows_name_exactly_one_subject)
{
    /* migrations/0011: an event names an evaluation or an experiment, matching its type;
     * a subscription's events are a non-empty set of known types. */
    struct evd_err err = {0};
    ck_assert_msg(evd_db_migrate(db_url, &err) == EVD_OK, "%s", err.msg);
    static const char *const refused[] = {
        "INSERT INTO completion_events (event_id, payload, created_at) VALUES ('evt_a', '{}', 0)",
        "INSERT INTO completion_events (event_id, evaluation_id, experiment_id, payload,"
        " created_at) VALUES ('evt_b', 'eval_1', 'exp_1', '{}', 0)",
        "INSERT INTO completion_events (event_id, event_type, evaluation_id, payload,"
        " created_at) VALUES ('evt_c', 'experiment.completed', 'eval_1', '{}', 0)",
        "INSERT INTO completion_events (event_id, experiment_id, payload, created_at)"
        " VALUES ('evt_d', 'exp_1', '{}', 0)",
        "INSERT INTO completion_events (event_id, event_type, experiment_id, payload,"
        " created_at) VALUES ('evt_e', 'run.completed', 'exp_1', '{}', 0)",
        "INSERT INTO subscriptions (id, url, events, secret_sealed, seq, created_at)"
        " VALUES ('sub_a', 'http://127.0.0.1:9/a', '{}', 'v1:x', 1, 0)",
        "INSERT INTO subscriptions (id, url, events, secret_sealed, seq, created_at)"
        " VALUES ('sub_b', 'http://127.0.0.1:9/b', '{session.completed}', 'v1:x', 1, 0)",
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        char *r = evd_t_sql(db_url, refused[i]);
        ck_assert_msg(r == NULL, "accepted: %s", refused[i]);
    }
    ck_assert_int_eq(sql_count("SELECT count(*) FROM completion_events"), 0);
    ck_assert_int_eq(sql_count("SELECT count(*) FROM subscriptions"), 0);
    /* Rows written before the migration keep their meaning: the defaults. */
    free(evd_t_sql(db_url, "INSERT INTO completion_events (event_id, evaluation_id, payload,"
                           " created_at) VALUES ('evt_old', 'eval_old', '{}', 0)"));
    ck_assert_int_eq(sql_count("SELECT count(*) FROM completion_events"
                               " WHERE event_type = 'evaluation.completed' AND webhooks_pending"),
                     1);
}
END_TEST

START_TEST(claims_cap_each_subscription)
{
    /* The store alone: a subscription with 4 attempts in flight gets no fifth slot, the
     * idle query does not call its waiting deliveries due (no busy loop while they
     * wait), and an attempt that ends frees its slot. */
    struct evd_err err = {0};
    ck_assert_msg(evd_db_migrate(db_url, &err) == EVD_OK, "%s", err.msg);
    PGconn *c = evd_db_connect(db_url, &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    free(evd_t_sql(db_url, "INSERT INTO subscriptions (id, url, secret_sealed, seq, created_at)"
                           " VALUES ('sub_a', 'http://127.0.0.1:9/a', 'v1:x',"
                           " nextval('webhook_seq'), 0), ('sub_b', 'http://127.0.0.1:9/b',"
                           " 'v1:x', nextval('webhook_seq'), 0)"));
    free(evd_t_sql(db_url, "INSERT INTO completion_events (event_id, evaluation_id, payload,"
                           " created_at) SELECT 'evt_' || i, 'eval_' || i, '{}', 0"
                           " FROM generate_series(1, 6) i"));
    long events = 0, made = 0;
    ck_assert_int_eq(evd_db_begin(c, &err), EVD_OK);
    ck_assert_int_eq(evd_store_webhook_fanout(c, 100, evd_now_ms(), &events, &made, &err), EVD_OK);
    ck_assert_int_eq(evd_db_commit(c, &err), EVD_OK);
    ck_assert_int_eq(events, 6);
    ck_assert_int_eq(made, 12);

    struct evd_store_delivery held[16];
    int n = 0, per_a = 0;
    bool found = true;
    while (n < 16) {
        ck_assert_int_eq(evd_store_delivery_claim(c, "o1", 15000, 4, &held[n], &found, &err),
                         EVD_OK);
        if (!found)
            break;
        per_a += strcmp(held[n].subscription_id, "sub_a") == 0;
        n++;
    }
    ck_assert_int_eq(n, 8);
    ck_assert_int_eq(per_a, 4);
    bool pending = true;
    long due = -1;
    ck_assert_int_eq(evd_store_webhook_idle(c, 4, &pending, &due, &err), EVD_OK);
    ck_assert(!pending);
    ck_assert_msg(due > 10000, "next due in %ld ms: the capped deliveries count as due", due);

    /* One of sub_a's attempts ends: sub_a may take one more, sub_b none. */
    int i = 0;
    while (strcmp(held[i].subscription_id, "sub_a") != 0)
        i++;
    struct evd_store_attempt a = {.status = "delivered",
                                  .started_at = evd_now_ms(),
                                  .finished_at = evd_now_ms(),
                                  .status_code = 204};
    ck_assert_int_eq(evd_store_delivery_record(c, &held[i], "o1", &a, &err), EVD_OK);
    ck_assert_int_eq(evd_store_webhook_idle(c, 4, &pending, &due, &err), EVD_OK);
    ck_assert_int_eq(due, 0);
    struct evd_store_delivery more;
    ck_assert_int_eq(evd_store_delivery_claim(c, "o1", 15000, 4, &more, &found, &err), EVD_OK);
    ck_assert(found);
    ck_assert_str_eq(more.subscription_id, "sub_a");
    evd_store_delivery_clear(&more);
    ck_assert_int_eq(evd_store_delivery_claim(c, "o1", 15000, 4, &more, &found, &err), EVD_OK);
    ck_assert(!found);
    for (int k = 0; k < n; k++)
        evd_store_delivery_clear(&held[k]);
    PQfinish(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("webhooks");
    TCase *tc = tcase_create("webhooks");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, signed_and_retried_until_acknowledged);
    tcase_add_test(tc, filter_delivers_only_its_evaluation);
    tcase_add_test(tc, kill_9_before_delivery_still_delivers);
    tcase_add_test(tc, secret_never_leaves_the_request);
    tcase_add_test(tc, bad_input_is_refused_and_writes_nothing);
    tcase_add_test(tc, private_address_refused_at_connect_time);
    tcase_add_test(tc, silent_receiver_delays_no_other);
    tcase_add_test(tc, claims_cap_each_subscription);
    tcase_add_test(tc, events_filter_routes_each_type);
    tcase_add_test(tc, outbox_rows_name_exactly_one_subject);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
