/*
 * Integration tests of webhook delivery: the real evald and evald-stub over loopback, a
 * throwaway PostgreSQL database per test, and local receivers
 * (tests/support/webhooks_receiver.h) that record requests and fail or hang on demand:
 * signed attempts retried until acknowledged, a subscription's evaluation filter and the
 * paging of its deliveries, kill -9 before delivery and between attempts, a private
 * address refused at connect time, a silent receiver that delays no other, and the
 * store's cap on a subscription's attempts in flight. The subscription API, secrets, event
 * types and the outbox's constraints are in test_webhooks_subscriptions.c.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "store/db.h"
#include "store/webhooks.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"
#include "tests/support/webhooks_receiver.h"
#include "tests/support/webhooks_support.h"
#include "webhooks/seal.h"

/* ---- tests --------------------------------------------------------------------------- */

START_TEST(signed_and_retried_until_acknowledged)
{
    struct evd_t_proc stub;
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    struct evd_t_receiver *rx = evd_t_receiver_start(0);
    ck_assert_ptr_nonnull(rx);
    evd_t_receiver_fail(rx, 3, 500);
    struct wh_env e;
    wh_base_env(&e, &stub);
    struct evd_t_proc p;
    wh_start_evald(&p, &e);

    json_t *sub = wh_subscribe(&p, rx, "/hook", NULL);
    const char *sub_id = wh_jstr(sub, "subscription_id");
    char id[64];
    wh_start_eval(&p, id);
    ck_assert_str_eq(wh_wait_terminal(&p, id, 30000), "completed");
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
        wh_assert_event_body(&h, id);
        /* Same event on every attempt; a signature any receiver can recompute. */
        if (i == 0)
            snprintf(event_id, sizeof(event_id), "%s", h.event_id);
        ck_assert_str_eq(h.event_id, event_id);
        ck_assert_msg(evd_t_hook_signature_ok(&h, WH_SECRET), "signature %s", h.signature);
        ck_assert(!evd_t_hook_signature_ok(&h, "whsec-not-the-secret-000"));
        long long t = atoll(h.timestamp);
        ck_assert_int_le(llabs(t - evd_now_ms() / 1000), 120);
        evd_t_hook_free(&h);
    }
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM completion_events WHERE event_id = '%s'",
             event_id);
    ck_assert_int_eq(wh_sql_count(sql), 1);

    /* The delivery record: four attempts, the first three failed with 500. */
    json_t *list = wh_deliveries(&p, sub_id);
    ck_assert_uint_eq(json_array_size(list), 1);
    json_t *d = json_array_get(list, 0);
    ck_assert_str_eq(wh_jstr(d, "status"), "delivered");
    ck_assert_str_eq(wh_jstr(d, "event_id"), event_id);
    ck_assert_str_eq(wh_jstr(d, "evaluation_id"), id);
    ck_assert_str_eq(wh_jstr(d, "subscription_id"), sub_id);
    ck_assert_int_eq(wh_jint(d, "attempts"), 4);
    ck_assert_int_eq(wh_jint(d, "last_status_code"), 204);
    ck_assert(json_is_null(json_object_get(d, "last_error")));
    ck_assert(json_is_null(json_object_get(d, "next_attempt_at")));
    ck_assert_int_ge(wh_jint(d, "delivered_at"), wh_jint(d, "created_at"));
    json_t *log = json_object_get(d, "attempt_log");
    ck_assert_uint_eq(json_array_size(log), 4);
    for (size_t i = 0; i < 4; i++) {
        json_t *a = json_array_get(log, i);
        ck_assert_int_eq(wh_jint(a, "attempt"), (long long)i + 1);
        ck_assert_int_eq(wh_jint(a, "status_code"), i < 3 ? 500 : 204);
        ck_assert_int_ge(wh_jint(a, "duration_ms"), 0);
        ck_assert_int_ge(wh_jint(a, "started_at"), wh_jint(d, "created_at"));
        if (i < 3)
            ck_assert_str_eq(wh_jstr(a, "error"), "receiver answered 500");
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
    struct wh_env e;
    wh_base_env(&e, &stub);
    struct evd_t_proc p;
    wh_start_evald(&p, &e);

    json_t *all = wh_subscribe(&p, rx, "/all", NULL);
    char x[64], y[64];
    wh_start_eval(&p, x);
    wh_start_eval(&p, y);
    json_t *only = wh_subscribe(&p, rx, "/only", x);
    ck_assert_str_eq(wh_jstr(only, "evaluation_id"), x);
    ck_assert(json_is_null(json_object_get(all, "evaluation_id")));
    wh_wait_terminal(&p, x, 30000);
    wh_wait_terminal(&p, y, 30000);
    ck_assert_msg(evd_t_receiver_wait_acked(rx, 3, 30000), "expected 3 deliveries, got %zu",
                  evd_t_receiver_acked(rx));

    /* A subscription made after both events gets neither. */
    json_t *late = wh_subscribe(&p, rx, "/late", NULL);
    usleep(2500 * 1000); /* longer than the fallback poll */
    ck_assert_uint_eq(evd_t_receiver_count(rx), 3);

    int only_x = 0, all_x = 0, all_y = 0;
    for (size_t i = 0; i < 3; i++) {
        struct evd_t_hook h;
        ck_assert(evd_t_receiver_get(rx, i, &h));
        json_t *b = json_loads(h.body, 0, NULL);
        const char *ev = wh_jstr(b, "evaluation_id");
        ck_assert(evd_t_hook_signature_ok(&h, WH_SECRET));
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

    json_t *l = wh_deliveries(&p, wh_jstr(only, "subscription_id"));
    ck_assert_uint_eq(json_array_size(l), 1);
    ck_assert_str_eq(wh_jstr(json_array_get(l, 0), "evaluation_id"), x);
    json_decref(l);
    l = wh_deliveries(&p, wh_jstr(all, "subscription_id"));
    ck_assert_uint_eq(json_array_size(l), 2);
    json_decref(l);
    l = wh_deliveries(&p, wh_jstr(late, "subscription_id"));
    ck_assert_uint_eq(json_array_size(l), 0);
    json_decref(l);

    /* Paging: one per page, newest first, then the cursor runs out. */
    char path[256];
    snprintf(path, sizeof(path), "/v1/subscriptions/%s/deliveries?limit=1",
             wh_jstr(all, "subscription_id"));
    long status = 0;
    json_t *page = wh_call(&p, "GET", path, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(page, "deliveries")), 1);
    const char *cursor = wh_jstr(page, "next_cursor");
    ck_assert_ptr_nonnull(cursor);
    char path2[512];
    snprintf(path2, sizeof(path2), "%s&before=%s", path, cursor);
    json_t *page2 = wh_call(&p, "GET", path2, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(page2, "deliveries")), 1);
    ck_assert_ptr_null(json_object_get(page2, "next_cursor"));
    ck_assert_str_ne(
        wh_jstr(json_array_get(json_object_get(page, "deliveries"), 0), "delivery_id"),
        wh_jstr(json_array_get(json_object_get(page2, "deliveries"), 0), "delivery_id"));
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
            strcmp(wh_jstr(b, "evaluation_id"), evaluation_id) == 0)
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
    struct wh_env e0;
    wh_base_env(&e0, &stub);
    wh_env_add(&e0, "EVALD_WEBHOOK_WORKERS=0");
    struct evd_t_proc p0;
    wh_start_evald(&p0, &e0);
    json_t *sub = wh_subscribe(&p0, rx, "/k", NULL);
    char a[64];
    wh_start_eval(&p0, a);
    wh_wait_terminal(&p0, a, 30000);
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM completion_events WHERE evaluation_id = '%s'",
             a);
    ck_assert_int_eq(wh_sql_count(sql), 1);
    ck_assert_int_eq(evd_t_stop(&p0, SIGKILL, 5000), 128 + SIGKILL);
    ck_assert_uint_eq(evd_t_receiver_count(rx), 0);

    /* 2. After a restart it is delivered. */
    struct wh_env e;
    wh_base_env(&e, &stub);
    struct evd_t_proc p1;
    wh_start_evald(&p1, &e);
    ck_assert_msg(evd_t_receiver_wait_acked(rx, 1, 30000), "not delivered after the restart");
    ck_assert_int_eq(acked_for(rx, a), 1);

    /* 3. The receiver fails; evald is killed between failed attempts; after a restart
     * the retries go on and succeed. */
    evd_t_receiver_fail(rx, -1, 503);
    char b[64];
    wh_start_eval(&p1, b);
    wh_wait_terminal(&p1, b, 30000);
    size_t before = evd_t_receiver_count(rx);
    ck_assert_msg(evd_t_receiver_wait_count(rx, before + 2, 30000), "no failed attempts");
    ck_assert_int_eq(evd_t_stop(&p1, SIGKILL, 5000), 128 + SIGKILL);
    ck_assert_int_eq(acked_for(rx, b), 0);
    evd_t_receiver_fail(rx, 0, 0);
    struct evd_t_proc p2;
    wh_start_evald(&p2, &e);
    /* A lease left by the killed process expires within 15 s. */
    ck_assert_msg(evd_t_receiver_wait_acked(rx, 2, 40000),
                  "not delivered after the second restart");
    usleep(1000 * 1000);
    ck_assert_int_eq(acked_for(rx, a), 1);
    ck_assert_int_eq(acked_for(rx, b), 1);

    json_t *list = wh_deliveries(&p2, wh_jstr(sub, "subscription_id"));
    ck_assert_uint_eq(json_array_size(list), 2);
    json_t *d;
    size_t i;
    json_array_foreach(list, i, d)
    {
        ck_assert_str_eq(wh_jstr(d, "status"), "delivered");
        json_t *log = json_object_get(d, "attempt_log");
        ck_assert_int_eq(wh_jint(json_array_get(log, json_array_size(log) - 1), "status_code"),
                         204);
        if (strcmp(wh_jstr(d, "evaluation_id"), b) == 0) {
            ck_assert_int_ge(wh_jint(d, "attempts"), 3);
            ck_assert_int_eq(wh_jint(json_array_get(log, 0), "status_code"), 503);
            ck_assert_str_eq(wh_jstr(json_array_get(log, 0), "error"), "receiver answered 503");
        } else {
            ck_assert_str_eq(wh_jstr(d, "evaluation_id"), a);
            ck_assert_int_eq(wh_jint(d, "attempts"), 1);
        }
    }
    json_decref(list);
    json_decref(sub);
    ck_assert_int_eq(evd_t_stop(&p2, SIGTERM, 15000), 0);
    evd_t_receiver_stop(rx);
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
    struct wh_env e;
    wh_base_env(&e, &stub);
    e.n = 3;
    e.v[3] = NULL;
    wh_env_add(&e, "EVALD_SECRET_KEY=" WH_KEY_HEX);
    wh_env_add(&e, "EVALD_WEBHOOK_BACKOFF_MS=100");
    struct evd_t_proc p;
    wh_start_evald(&p, &e);

    unsigned char key[EVD_WEBHOOK_KEY_LEN];
    ck_assert(evd_webhook_key_parse(WH_KEY_HEX, key));
    const char *sub_id = "sub_00000000000000000000000000000001";
    char *sealed = evd_webhook_seal(key, sub_id, WH_SECRET, strlen(WH_SECRET));
    ck_assert_ptr_nonnull(sealed);
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "INSERT INTO subscriptions (id, url, secret_sealed, seq, created_at)"
             " VALUES ('%s', 'http://localhost:%u/rebound', '%s', nextval('webhook_seq'), 0)",
             sub_id, evd_t_receiver_port(rx), sealed);
    free(sealed);
    char *ins = evd_t_sql(wh_db_url, sql);
    ck_assert_ptr_nonnull(ins);
    free(ins);

    char id[64];
    wh_start_eval(&p, id);
    wh_wait_terminal(&p, id, 30000);
    const char *err = NULL;
    json_t *list = NULL;
    int64_t deadline = evd_mono_ms() + 20000;
    while (evd_mono_ms() < deadline) {
        json_decref(list);
        list = wh_deliveries(&p, sub_id);
        json_t *d = json_array_get(list, 0);
        if (d && wh_jint(d, "attempts") >= 2 && (err = wh_jstr(d, "last_error")) != NULL)
            break;
        usleep(100 * 1000);
    }
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(err, "is not allowed") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "127.0.0.1") != NULL || strstr(err, "::1") != NULL, "%s", err);
    ck_assert_str_eq(wh_jstr(json_array_get(list, 0), "status"), "pending");
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
    struct wh_env e;
    wh_base_env(&e, &stub);
    struct evd_t_proc p;
    wh_start_evald(&p, &e);
    json_t *ssub = wh_subscribe(&p, silent, "/silent", NULL);
    json_t *subs[HEALTHY];
    for (int i = 0; i < HEALTHY; i++)
        subs[i] = wh_subscribe(&p, ok[i], "/ok", NULL);

    char ids[EVALS][64];
    for (int i = 0; i < EVALS; i++) {
        wh_start_eval(&p, ids[i]);
        ck_assert_str_eq(wh_wait_terminal(&p, ids[i], 30000), "completed");
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
    json_t *list = wh_deliveries(&p, wh_jstr(ssub, "subscription_id"));
    ck_assert_uint_eq(json_array_size(list), EVALS);
    size_t i;
    json_t *d;
    json_array_foreach(list, i, d)
    {
        ck_assert_str_eq(wh_jstr(d, "status"), "pending");
        json_t *first = json_array_get(json_object_get(d, "attempt_log"), 0);
        ck_assert_ptr_nonnull(first);
        ck_assert_str_eq(wh_jstr(first, "error"), "no answer within 10000 ms");
        ck_assert(json_is_null(json_object_get(first, "status_code")));
        ck_assert_int_ge(wh_jint(first, "duration_ms"), 9000);
    }
    json_decref(list);
    for (int k = 0; k < HEALTHY; k++) {
        list = wh_deliveries(&p, wh_jstr(subs[k], "subscription_id"));
        ck_assert_uint_eq(json_array_size(list), EVALS);
        json_array_foreach(list, i, d)
        {
            ck_assert_str_eq(wh_jstr(d, "status"), "delivered");
            ck_assert_int_eq(wh_jint(d, "attempts"), 1);
        }
        json_decref(list);
        ck_assert_uint_eq(evd_t_receiver_count(ok[k]), EVALS);
    }

    /* SIGTERM while attempts hang: they are handed back uncounted, no lease is left. */
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 15000), 0);
    ck_assert_int_eq(wh_sql_count("SELECT count(*) FROM webhook_deliveries d"
                                  " WHERE lease_owner IS NOT NULL OR attempts <>"
                                  " (SELECT count(*) FROM webhook_attempts a"
                                  "  WHERE a.delivery_id = d.id)"),
                     0);

    /* Once the receiver answers again, every event reaches it, each once. */
    evd_t_receiver_hang(silent, false);
    wh_start_evald(&p, &e);
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

START_TEST(claims_cap_each_subscription)
{
    /* The store alone: a subscription with 4 attempts in flight gets no fifth slot, the
     * idle query does not call its waiting deliveries due (no busy loop while they
     * wait), and an attempt that ends frees its slot. */
    struct evd_err err = {0};
    ck_assert_msg(evd_db_migrate(wh_db_url, &err) == EVD_OK, "%s", err.msg);
    PGconn *c = evd_db_connect(wh_db_url, &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    free(evd_t_sql(wh_db_url, "INSERT INTO subscriptions (id, url, secret_sealed, seq, created_at)"
                              " VALUES ('sub_a', 'http://127.0.0.1:9/a', 'v1:x',"
                              " nextval('webhook_seq'), 0), ('sub_b', 'http://127.0.0.1:9/b',"
                              " 'v1:x', nextval('webhook_seq'), 0)"));
    free(evd_t_sql(wh_db_url, "INSERT INTO completion_events (event_id, evaluation_id, payload,"
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
    tcase_add_checked_fixture(tc, wh_setup, wh_teardown);
    tcase_add_test(tc, signed_and_retried_until_acknowledged);
    tcase_add_test(tc, filter_delivers_only_its_evaluation);
    tcase_add_test(tc, kill_9_before_delivery_still_delivers);
    tcase_add_test(tc, private_address_refused_at_connect_time);
    tcase_add_test(tc, silent_receiver_delays_no_other);
    tcase_add_test(tc, claims_cap_each_subscription);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
