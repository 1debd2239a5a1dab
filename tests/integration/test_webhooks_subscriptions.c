/*
 * Integration tests of webhook subscriptions and event types: the real evald and
 * evald-stub over loopback, a throwaway PostgreSQL database per test, and a local
 * receiver (tests/support/webhooks_receiver.h) that records requests: the secret never
 * leaves the request (no response, log line or table shows it, another key cannot open
 * it), bad input and a missing or malformed key or allowlist are refused and write
 * nothing, the `events` filter routes evaluation and experiment events, and the outbox's
 * rows name exactly one subject. Delivery itself (retries, restarts, timeouts, caps) is in
 * test_webhooks.c.
 */
#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "store/db.h"
#include "store/events.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"
#include "tests/support/webhooks_receiver.h"
#include "tests/support/webhooks_support.h"
#include "webhooks/seal.h"

/* ---- helpers ------------------------------------------------------------------------- */

/* A subscription for every evaluation with `events` (JSON text). */
static json_t *subscribe_events(const struct evd_t_proc *p, struct evd_t_receiver *r,
                                const char *path, const char *events)
{
    char body[512];
    snprintf(body, sizeof(body),
             "{\"url\":\"http://127.0.0.1:%u%s\",\"secret\":\"" WH_SECRET "\",\"events\":%s}",
             evd_t_receiver_port(r), path, events);
    long status = 0;
    json_t *sub = wh_call(p, "POST", "/v1/subscriptions", body, &status);
    ck_assert_msg(status == 201, "subscribe: %ld", status);
    json_t *want = json_loads(events, 0, NULL);
    ck_assert(json_equal(json_object_get(sub, "events"), want));
    json_decref(want);
    return sub;
}

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

/* ---- tests --------------------------------------------------------------------------- */

START_TEST(secret_never_leaves_the_request)
{
    struct evd_t_proc stub;
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    struct evd_t_receiver *rx = evd_t_receiver_start(0);
    ck_assert_ptr_nonnull(rx);
    struct wh_env e;
    wh_base_env(&e, &stub);
    wh_env_add(&e, "EVALD_LOG_LEVEL=debug");
    struct evd_t_proc p;
    wh_start_evald(&p, &e);

    /* Every answer that shows a subscription, and every error about one. */
    char body[512];
    snprintf(body, sizeof(body), "{\"url\":\"http://127.0.0.1:%u/s\",\"secret\":\"" WH_SECRET "\"}",
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
    snprintf(loc, sizeof(loc), "Location: /v1/subscriptions/%s", wh_jstr(sub, "subscription_id"));
    ck_assert_ptr_nonnull(strstr(r.headers, loc));
    evd_t_resp_free(&r);

    char id[64];
    wh_start_eval(&p, id);
    wh_wait_terminal(&p, id, 30000);
    ck_assert(evd_t_receiver_wait_acked(rx, 1, 30000));

    char paths[3][200];
    snprintf(paths[0], sizeof(paths[0]), "%s/v1/subscriptions", p.base);
    snprintf(paths[1], sizeof(paths[1]), "%s/v1/subscriptions/%s", p.base,
             wh_jstr(sub, "subscription_id"));
    snprintf(paths[2], sizeof(paths[2]), "%s/v1/subscriptions/%s/deliveries", p.base,
             wh_jstr(sub, "subscription_id"));
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(evd_t_http("GET", paths[i], NULL, NULL, 0, &r), 0);
        ck_assert_int_eq(r.status, 200);
        ck_assert_msg(strstr(r.body, "Canary") == NULL, "%s shows the secret", paths[i]);
        ck_assert(strstr(r.body, "secret") == NULL);
        evd_t_resp_free(&r);
    }
    /* A refused request with the secret in it does not echo it either. */
    const char *bad = "{\"url\":\"ftp://x\",\"secret\":\"" WH_SECRET "\"}";
    ck_assert_int_eq(evd_t_http("POST", url, NULL, bad, strlen(bad), &r), 0);
    ck_assert_int_eq(r.status, 400);
    ck_assert_ptr_null(strstr(r.body, "Canary"));
    evd_t_resp_free(&r);

    /* The database holds it sealed: no table has it in plain text or in hex. */
    char hex[2 * sizeof(WH_SECRET) + 1];
    for (size_t i = 0; i < strlen(WH_SECRET); i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)WH_SECRET[i]);
    char *tables = evd_t_sql(wh_db_url, "SELECT string_agg(quote_ident(table_name), ',')"
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
        ck_assert_msg(wh_sql_count(sql) == 0, "table %s holds the secret", t);
    }
    free(tables);
    ck_assert_int_eq(
        wh_sql_count("SELECT count(*) FROM subscriptions WHERE secret_sealed LIKE 'v1:%'"), 1);

    /* Nor is it in any log line (debug level included). */
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 15000), 0);
    ck_assert_msg(!file_contains(p.log_path, "Canary"), "the secret was logged");
    ck_assert(file_contains(p.log_path, "webhook delivered"));

    /* A process with another key cannot open it: the attempt fails, nothing is sent. */
    evd_t_receiver_fail(rx, 0, 0);
    struct wh_env e2;
    wh_base_env(&e2, &stub);
    snprintf(e2.store[5], sizeof(e2.store[5]),
             "EVALD_SECRET_KEY=ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff");
    struct evd_t_proc p2;
    wh_start_evald(&p2, &e2);
    size_t sent = evd_t_receiver_count(rx);
    char id2[64];
    wh_start_eval(&p2, id2);
    wh_wait_terminal(&p2, id2, 30000);
    int64_t deadline = evd_mono_ms() + 20000;
    const char *last_error = NULL;
    json_t *list = NULL;
    while (evd_mono_ms() < deadline) {
        json_decref(list);
        list = wh_deliveries(&p2, wh_jstr(sub, "subscription_id"));
        json_t *d = json_array_get(list, 0); /* newest first */
        if (d && strcmp(wh_jstr(d, "evaluation_id"), id2) == 0 && wh_jint(d, "attempts") >= 2 &&
            (last_error = wh_jstr(d, "last_error")) != NULL)
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
    {"{\"secret\":\"" WH_SECRET "\"}", "url is required"},
    {"{\"url\":5,\"secret\":\"" WH_SECRET "\"}", "url must be a string"},
    {"{\"url\":\"ftp://127.0.0.1/x\",\"secret\":\"" WH_SECRET "\"}",
     "url must be an http or https"},
    {"{\"url\":\"http://10.0.0.7/x\",\"secret\":\"" WH_SECRET "\"}", "url host 10.0.0.7"},
    {"{\"url\":\"http://169.254.169.254/latest\",\"secret\":\"" WH_SECRET "\"}", "url host"},
    {"{\"url\":\"http://u:p@127.0.0.1/x\",\"secret\":\"" WH_SECRET "\"}", "url must not contain"},
    {"{\"url\":\"http://127.0.0.1:9/x\"}", "secret is required"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":12}", "secret must be a string"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"short\"}", "secret must be 16 to 256"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" WH_SECRET "\",\"evaluation_id\":7}",
     "evaluation_id must be a string or null"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" WH_SECRET "\",\"evaluation_id\":\"a b\"}",
     "evaluation_id must be"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" WH_SECRET "\",\"event\":[\"x\"]}",
     "event is not a known field"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" WH_SECRET "\",\"events\":[]}",
     "events must be a non-empty array of event types"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" WH_SECRET "\",\"events\":null}",
     "events must be a non-empty array of event types"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" WH_SECRET
     "\",\"events\":\"experiment.completed\"}",
     "events must be a non-empty array of event types"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" WH_SECRET
     "\",\"events\":[\"evaluation.completed\",\"foo\"]}",
     "events[1] is not a known event type: foo"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" WH_SECRET "\",\"events\":[7]}",
     "events[0] must be a string"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" WH_SECRET
     "\",\"events\":[\"experiment.completed\",\"experiment.completed\"]}",
     "events[1] repeats experiment.completed"},
    {"{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" WH_SECRET
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
    ck_assert_str_eq(wh_jstr(j, "code"), "invalid_request");
    ck_assert_msg(strstr(wh_jstr(j, "detail"), want) != NULL, "%s: detail %s", body,
                  wh_jstr(j, "detail"));
    ck_assert_ptr_null(strstr(r.body, "Canary"));
    json_decref(j);
    evd_t_resp_free(&r);
}

START_TEST(bad_input_is_refused_and_writes_nothing)
{
    struct evd_t_proc stub;
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    struct wh_env e;
    wh_base_env(&e, &stub);
    struct evd_t_proc p;
    wh_start_evald(&p, &e);
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++)
        assert_400(&p, bad_cases[i].body, bad_cases[i].field);
    ck_assert_int_eq(wh_sql_count("SELECT count(*) FROM subscriptions"), 0);

    /* Unknown ids and bad paging. */
    long status = 0;
    json_t *j = wh_call(&p, "GET", "/v1/subscriptions/sub_nope", NULL, &status);
    ck_assert_int_eq(status, 404);
    json_decref(j);
    j = wh_call(&p, "DELETE", "/v1/subscriptions/sub_nope", NULL, &status);
    ck_assert_int_eq(status, 404);
    json_decref(j);
    j = wh_call(&p, "GET", "/v1/subscriptions/sub_nope/deliveries", NULL, &status);
    ck_assert_int_eq(status, 404);
    json_decref(j);
    j = wh_call(&p, "GET", "/v1/subscriptions", NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "subscriptions")), 0);
    json_decref(j);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 15000), 0);

    /* Without an allowlist: loopback, private and link-local are refused, public names
     * are accepted (their addresses are checked at every delivery). */
    struct wh_env open;
    wh_base_env(&open, &stub);
    open.n = 3; /* drop the allowlist, the backoff and the key ... */
    open.v[3] = NULL;
    wh_env_add(&open, "EVALD_SECRET_KEY=" WH_KEY_HEX); /* ... and keep the key */
    struct evd_t_proc q;
    wh_start_evald(&q, &open);
    const char *refused[] = {"http://127.0.0.1:9/x", "http://[::1]/x", "http://localhost/x",
                             "http://192.168.1.1/x", "http://169.254.169.254/"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"url\":\"%s\",\"secret\":\"" WH_SECRET "\"}", refused[i]);
        assert_400(&q, body, "url host");
    }
    ck_assert_int_eq(wh_sql_count("SELECT count(*) FROM subscriptions"), 0);
    json_t *ok =
        wh_call(&q, "POST", "/v1/subscriptions",
                "{\"url\":\"https://hooks.example.com/evald\",\"secret\":\"" WH_SECRET "\","
                "\"evaluation_id\":null}",
                &status);
    ck_assert_int_eq(status, 201);
    ck_assert_str_eq(wh_jstr(ok, "url"), "https://hooks.example.com/evald");
    ck_assert(json_is_null(json_object_get(ok, "evaluation_id")));
    ck_assert(json_is_integer(json_object_get(ok, "created_at")));
    json_t *want_events = json_pack("[s]", "evaluation.completed");
    ck_assert(json_equal(json_object_get(ok, "events"), want_events));
    json_decref(want_events);
    ck_assert_uint_eq(json_object_size(ok), 5);
    char path[160];
    snprintf(path, sizeof(path), "/v1/subscriptions/%s", wh_jstr(ok, "subscription_id"));
    j = wh_call(&q, "GET", path, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(json_equal(j, ok));
    json_decref(j);
    j = wh_call(&q, "GET", "/v1/subscriptions", NULL, &status);
    ck_assert(json_equal(json_array_get(json_object_get(j, "subscriptions"), 0), ok));
    json_decref(j);
    j = wh_call(&q, "DELETE", path, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(json_is_true(json_object_get(j, "deleted")));
    json_decref(j);
    j = wh_call(&q, "GET", path, NULL, &status);
    ck_assert_int_eq(status, 404);
    json_decref(j);
    json_decref(ok);
    ck_assert_int_eq(evd_t_stop(&q, SIGTERM, 15000), 0);

    /* Without EVALD_SECRET_KEY subscriptions cannot be sealed: 503, nothing written. */
    struct wh_env nokey;
    wh_base_env(&nokey, &stub);
    nokey.n = 5;
    nokey.v[5] = NULL;
    struct evd_t_proc k;
    wh_start_evald(&k, &nokey);
    char body[256];
    snprintf(body, sizeof(body), "{\"url\":\"http://127.0.0.1:9/x\",\"secret\":\"" WH_SECRET "\"}");
    j = wh_call(&k, "POST", "/v1/subscriptions", body, &status);
    ck_assert_int_eq(status, 503);
    ck_assert_str_eq(wh_jstr(j, "code"), "unavailable");
    ck_assert_ptr_nonnull(strstr(wh_jstr(j, "detail"), "EVALD_SECRET_KEY"));
    json_decref(j);
    ck_assert_int_eq(wh_sql_count("SELECT count(*) FROM subscriptions"), 0);
    ck_assert_int_eq(evd_t_stop(&k, SIGTERM, 15000), 0);

    /* A malformed key or allowlist stops evald at start-up (exit 2). */
    struct wh_env badkey;
    wh_base_env(&badkey, &stub);
    snprintf(badkey.store[5], sizeof(badkey.store[5]), "EVALD_SECRET_KEY=not-hex");
    ck_assert_int_ne(evd_t_evald_start(&k, wh_db_url, badkey.v), 0);
    ck_assert(file_contains(k.log_path, "EVALD_SECRET_KEY must be 64 hexadecimal"));
    struct wh_env badallow;
    wh_base_env(&badallow, &stub);
    snprintf(badallow.store[3], sizeof(badallow.store[3]),
             "EVALD_WEBHOOK_ALLOW_HOSTS=http://x.example.com/");
    ck_assert_int_ne(evd_t_evald_start(&k, wh_db_url, badallow.v), 0);
    ck_assert(file_contains(k.log_path, "EVALD_WEBHOOK_ALLOW_HOSTS"));
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
    struct wh_env e;
    wh_base_env(&e, &stub);
    struct evd_t_proc p;
    wh_start_evald(&p, &e);

    json_t *def = wh_subscribe(&p, rx, "/default", NULL);
    json_t *want = json_pack("[s]", "evaluation.completed");
    ck_assert(json_equal(json_object_get(def, "events"), want));
    json_decref(want);
    json_t *exp = subscribe_events(&p, rx, "/exp", "[\"experiment.completed\"]");
    json_t *both =
        subscribe_events(&p, rx, "/both", "[\"experiment.completed\",\"evaluation.completed\"]");
    json_t *scoped = wh_subscribe(&p, rx, "/scoped", "eval_not_this_one");
    /* The API refuses an evaluation filter with experiment events; a row written
     * directly shows the fan-out would not match them either. */
    unsigned char key[EVD_WEBHOOK_KEY_LEN];
    ck_assert(evd_webhook_key_parse(WH_KEY_HEX, key));
    const char *raw_id = "sub_00000000000000000000000000000002";
    char *sealed = evd_webhook_seal(key, raw_id, WH_SECRET, strlen(WH_SECRET));
    ck_assert_ptr_nonnull(sealed);
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "INSERT INTO subscriptions (id, url, evaluation_id, events, secret_sealed, seq,"
             " created_at) VALUES ('%s', 'http://127.0.0.1:%u/scoped', 'eval_not_this_one',"
             " '{experiment.completed}', '%s', nextval('webhook_seq'), 0)",
             raw_id, evd_t_receiver_port(rx), sealed);
    free(sealed);
    free(evd_t_sql(wh_db_url, sql));
    ck_assert_int_eq(wh_sql_count("SELECT count(*) FROM subscriptions"), 5);
    /* What was returned at creation is what a read returns. */
    char path[160];
    snprintf(path, sizeof(path), "/v1/subscriptions/%s", wh_jstr(both, "subscription_id"));
    long status = 0;
    json_t *read = wh_call(&p, "GET", path, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(json_equal(read, both));
    json_decref(read);

    /* 1. An evaluation: the default and the both subscriptions, not the experiment one. */
    char id[64];
    wh_start_eval(&p, id);
    ck_assert_str_eq(wh_wait_terminal(&p, id, 30000), "completed");
    ck_assert_msg(evd_t_receiver_wait_acked(rx, 2, 30000), "evaluation event: %zu deliveries",
                  evd_t_receiver_acked(rx));

    /* 2. An experiment event as the engine records it: in the terminal transaction,
     * exactly once even when the transition is repeated. A payload that is not an
     * experiment.completed body is refused and writes nothing. */
    struct evd_err err = {0};
    PGconn *c = evd_db_connect(wh_db_url, &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    json_t *payload = experiment_payload("exp_hooks_1");
    json_t *running = json_pack("{s:s, s:s, s:I, s:[]}", "experiment_id", "exp_hooks_1", "status",
                                "running", "timestamp", (json_int_t)1, "verdicts");
    ck_assert_int_eq(evd_store_experiment_event(c, "exp_hooks_1", running, 1, &err), EVD_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "status"));
    ck_assert_int_eq(evd_store_experiment_event(c, "exp_other", payload, 1, &err), EVD_EINVAL);
    ck_assert_int_eq(wh_sql_count("SELECT count(*) FROM completion_events"
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
    ck_assert_int_eq(wh_sql_count("SELECT count(*) FROM completion_events"
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
        ck_assert_msg(evd_t_hook_signature_ok(&h, WH_SECRET), "%s: signature", h.path);
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
            wh_assert_event_body(&h, id);
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
    json_t *list = wh_deliveries(&p, wh_jstr(exp, "subscription_id"));
    ck_assert_uint_eq(json_array_size(list), 1);
    json_t *d = json_array_get(list, 0);
    ck_assert_str_eq(wh_jstr(d, "event_type"), "experiment.completed");
    ck_assert_str_eq(wh_jstr(d, "experiment_id"), "exp_hooks_1");
    ck_assert(json_is_null(json_object_get(d, "evaluation_id")));
    ck_assert_str_eq(wh_jstr(d, "event_id"), exp_event_id);
    ck_assert_str_eq(wh_jstr(d, "status"), "delivered");
    json_decref(list);
    list = wh_deliveries(&p, wh_jstr(def, "subscription_id"));
    ck_assert_uint_eq(json_array_size(list), 1);
    d = json_array_get(list, 0);
    ck_assert_str_eq(wh_jstr(d, "event_type"), "evaluation.completed");
    ck_assert_str_eq(wh_jstr(d, "evaluation_id"), id);
    ck_assert(json_is_null(json_object_get(d, "experiment_id")));
    json_decref(list);
    list = wh_deliveries(&p, wh_jstr(scoped, "subscription_id"));
    ck_assert_uint_eq(json_array_size(list), 0);
    json_decref(list);
    list = wh_deliveries(&p, raw_id);
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
    ck_assert_msg(evd_db_migrate(wh_db_url, &err) == EVD_OK, "%s", err.msg);
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
        char *r = evd_t_sql(wh_db_url, refused[i]);
        ck_assert_msg(r == NULL, "accepted: %s", refused[i]);
    }
    ck_assert_int_eq(wh_sql_count("SELECT count(*) FROM completion_events"), 0);
    ck_assert_int_eq(wh_sql_count("SELECT count(*) FROM subscriptions"), 0);
    /* Rows written before the migration keep their meaning: the defaults. */
    free(evd_t_sql(wh_db_url, "INSERT INTO completion_events (event_id, evaluation_id, payload,"
                              " created_at) VALUES ('evt_old', 'eval_old', '{}', 0)"));
    ck_assert_int_eq(
        wh_sql_count("SELECT count(*) FROM completion_events"
                     " WHERE event_type = 'evaluation.completed' AND webhooks_pending"),
        1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("webhooks_subscriptions");
    TCase *tc = tcase_create("subscriptions");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, wh_setup, wh_teardown);
    tcase_add_test(tc, secret_never_leaves_the_request);
    tcase_add_test(tc, bad_input_is_refused_and_writes_nothing);
    tcase_add_test(tc, events_filter_routes_each_type);
    tcase_add_test(tc, outbox_rows_name_exactly_one_subject);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
