/*
 * A database that restarted under evald: PostgreSQL of this test's own (a private cluster
 * it crashes with an immediate shutdown and starts again), the real evald and evald-stub.
 * Once /readyz answers 200 again, every request must be served: the pool replaces the
 * connections the restart killed instead of failing the first statement on each. A
 * database that fails (read-only, stopped) is told to clients in their terms, with the
 * request's id, and in the log with the database's own message.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "common/util.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

#define READERS 32

static const char REQUEST[] =
    "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
    "\"control\":{\"prompt\":\"Reply with exactly OK.\"},\"treatment\":{\"prompt\":"
    "\"Return exactly the text OK.\"},\"evaluator\":{\"function_id\":"
    "\"eval::assert::normalized_text\",\"arguments\":{\"expected\":\"OK\"}},\"runs\":1}";

struct call {
    char url[512];
    const char *body; /* NULL: GET */
    long status;
    char answer[200];
};

/* Calls of perform that have their answer (the test reads it while they run). */
static atomic_int answered_calls;

static void *perform(void *arg)
{
    struct call *c = arg;
    struct evd_t_resp r;
    evd_t_http(c->body ? "POST" : "GET", c->url, NULL, c->body, c->body ? strlen(c->body) : 0,
               &r);
    c->status = r.status;
    snprintf(c->answer, sizeof(c->answer), "%s", r.body);
    evd_t_resp_free(&r);
    atomic_fetch_add(&answered_calls, 1);
    return NULL;
}

/* 32 reads of the evaluation, its status and the list, and one start, all at once; the
 * number of them that were not answered 200 (reads) or 202 (the start). */
static int burst(const char *base, const char *id)
{
    static const char *const suffix[] = {"", "/status", ""};
    struct call calls[READERS + 1];
    pthread_t t[READERS + 1];
    memset(calls, 0, sizeof(calls));
    for (int i = 0; i < READERS; i++) {
        if (i % 4 == 3)
            snprintf(calls[i].url, sizeof(calls[i].url), "%s/v1/evaluations?limit=5", base);
        else
            snprintf(calls[i].url, sizeof(calls[i].url), "%s/v1/evaluations/%s%s", base, id,
                     suffix[i % 4]);
    }
    snprintf(calls[READERS].url, sizeof(calls[READERS].url), "%s/v1/evaluations", base);
    calls[READERS].body = REQUEST;
    for (int i = 0; i <= READERS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, perform, &calls[i]), 0);
    int failed = 0;
    for (int i = 0; i <= READERS; i++) {
        pthread_join(t[i], NULL);
        long want = i == READERS ? 202 : 200;
        if (calls[i].status != want) {
            failed++;
            fprintf(stderr, "%s answered %ld: %s\n", calls[i].url, calls[i].status,
                    calls[i].answer);
        }
    }
    return failed;
}

static void pg(const char *what, const char *dir, unsigned port)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/scripts/pg.sh %s %s %u >/dev/null", evd_t_source_dir(), what,
             dir, port);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

/* A private cluster of the test's own, evald-stub (with `script`, NULL: its default) and
 * evald on them; `pool` sets EVALD_DB_POOL_SIZE when non-NULL. */
struct stack {
    char dir[32];
    unsigned port;
    char url[256];
    char env_base[300];
    struct evd_t_proc stub, evald;
};

static void stack_start(struct stack *s, const char *script, const char *pool)
{
    snprintf(s->dir, sizeof(s->dir), "/tmp/evald-pg-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s->dir));
    evd_t_pg_cleanup_at_exit(s->dir);
    s->port = evd_t_free_port();
    pg("start", s->dir, s->port);
    snprintf(s->url, sizeof(s->url), "postgresql://evald@127.0.0.1:%u/evald", s->port);
    ck_assert_int_eq(evd_t_stub_start(&s->stub, script, NULL), 0);
    snprintf(s->env_base, sizeof(s->env_base), "OPENAI_BASE_URL=%s/v1", s->stub.base);
    char *env[] = {s->env_base, "OPENAI_API_KEY=stub-key", (char *)pool, NULL};
    ck_assert_int_eq(evd_t_evald_start(&s->evald, s->url, env), 0);
}

/* Stops evald (it must exit 0), the stub and the cluster, and removes the cluster. */
static void stack_stop(struct stack *s)
{
    ck_assert_int_eq(evd_t_stop(&s->evald, SIGTERM, 15000), 0);
    evd_t_stop(&s->stub, SIGTERM, 5000);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/scripts/pg.sh stop %s; rm -rf %s", evd_t_source_dir(),
             s->dir, s->dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(pool_survives_an_immediate_restart)
{
    struct stack s;
    stack_start(&s, NULL, "EVALD_DB_POOL_SIZE=16");
    const struct evd_t_proc *p = &s.evald;
    char ready[300];
    snprintf(ready, sizeof(ready), "%s/readyz", p->base);
    ck_assert(evd_t_wait_status(ready, 200, 10000));

    char url[300];
    snprintf(url, sizeof(url), "%s/v1/evaluations", p->base);
    long status = 0;
    json_t *started = evd_t_http_json("POST", url, REQUEST, &status);
    ck_assert_int_eq(status, 202);
    char id[64];
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(started, "evaluation_id")));
    json_decref(started);
    ck_assert_str_eq(evd_t_wait_terminal(p->base, id, 30000), "completed");
    /* Every pool connection opened and idle, as on a service that has been serving. */
    ck_assert_int_eq(burst(p->base, id), 0);

    for (int round = 0; round < 2; round++) {
        pg("kill", s.dir, s.port);
        pg("start", s.dir, s.port);
        ck_assert_msg(evd_t_wait_status(ready, 200, 30000), "readyz did not recover");
        int failed = burst(p->base, id);
        ck_assert_msg(failed == 0, "round %d: %d of %d requests failed after the restart", round,
                      failed, READERS + 1);
    }
    stack_stop(&s);
}
END_TEST

/* The cheap routes, and one console asset, that must answer whatever the database does. */
static const char *const CHEAP[] = {"/healthz", "/metrics", "/console/app.js"};
#define WAITERS 16

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/*
 * A database that answers nothing for 5 s (mode 0: every PostgreSQL process stopped with
 * SIGSTOP; mode 1: a table evald reads locked by another session) while 16 requests wait
 * on it: /healthz, /metrics and the console's assets still answer, each within 50 ms at
 * the median and none later than a second (with every HTTP thread waiting on the
 * database, as before the handler pool, none of them answered before the database did),
 * and the 16 requests are answered once it is back.
 */
START_TEST(cheap_routes_answer_while_the_database_waits)
{
    const bool frozen = _i == 0;
    struct stack s;
    /* A connection for each of the 16: none of them times out waiting for the pool. */
    stack_start(&s, NULL, "EVALD_DB_POOL_SIZE=16");
    const struct evd_t_proc *p = &s.evald;
    char ready[300], url[300];
    snprintf(ready, sizeof(ready), "%s/readyz", p->base);
    ck_assert(evd_t_wait_status(ready, 200, 10000));
    snprintf(url, sizeof(url), "%s/v1/evaluations", p->base);
    long status = 0;
    json_t *started = evd_t_http_json("POST", url, REQUEST, &status);
    ck_assert_int_eq(status, 202);
    char id[64];
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(started, "evaluation_id")));
    json_decref(started);
    ck_assert_str_eq(evd_t_wait_terminal(p->base, id, 30000), "completed");

    PGconn *lock = NULL;
    if (frozen) {
        pg("freeze", s.dir, s.port);
    } else {
        lock = PQconnectdb(s.url);
        ck_assert_int_eq(PQstatus(lock), CONNECTION_OK);
        PGresult *r = PQexec(lock, "BEGIN; LOCK TABLE evaluations IN ACCESS EXCLUSIVE MODE");
        ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
        PQclear(r);
    }
    struct call waiting[WAITERS];
    pthread_t t[WAITERS];
    memset(waiting, 0, sizeof(waiting));
    atomic_store(&answered_calls, 0);
    for (int i = 0; i < WAITERS; i++) {
        snprintf(waiting[i].url, sizeof(waiting[i].url), "%s/v1/evaluations/%s", p->base, id);
        ck_assert_int_eq(pthread_create(&t[i], NULL, perform, &waiting[i]), 0);
    }
    usleep(300 * 1000); /* the 16 reach their handlers and wait */

    enum { PROBES = 3 * 40 };
    int64_t took[PROBES];
    int n = 0, handlers_busy = -1;
    int64_t until = evd_mono_ms() + 4700;
    while (n < PROBES && evd_mono_ms() < until) {
        snprintf(url, sizeof(url), "%s%s", p->base, CHEAP[n % 3]);
        struct evd_t_resp r;
        int64_t t0 = evd_mono_ms();
        evd_t_http_timed("GET", url, NULL, NULL, 0, 3000, &r);
        took[n] = evd_mono_ms() - t0;
        ck_assert_msg(r.status == 200, "%s answered %ld after %lld ms while the database %s", url,
                      r.status, (long long)took[n], frozen ? "was frozen" : "was locked");
        /* The metrics show where the 16 wait: on every handler thread, none on an HTTP one. */
        const char *busy = strstr(r.body, "\nevald_http_handlers_busy ");
        if (busy != NULL)
            handlers_busy = atoi(busy + strlen("\nevald_http_handlers_busy "));
        evd_t_resp_free(&r);
        n++;
        usleep(100 * 1000);
    }
    /* The 16 are still waiting: the database really held them all along. */
    int answered = atomic_load(&answered_calls);
    if (frozen) {
        pg("thaw", s.dir, s.port);
    } else {
        PQclear(PQexec(lock, "COMMIT"));
        PQfinish(lock);
    }
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(waiting[i].status == 200, "a read waiting on the database answered %ld: %s",
                      waiting[i].status, waiting[i].answer);
    }
    qsort(took, (size_t)n, sizeof(took[0]), cmp_i64);
    fprintf(stderr, "database %s: %d answers of the cheap routes, median %lld ms, worst %lld ms\n",
            frozen ? "frozen" : "locked", n, (long long)took[n / 2], (long long)took[n - 1]);
    ck_assert_int_eq(answered, 0);
    ck_assert_int_eq(handlers_busy, WAITERS); /* EVALD_HTTP_HANDLERS is 16 */
    ck_assert_int_ge(n, 30);
    ck_assert_msg(took[n / 2] <= 50, "median %lld ms", (long long)took[n / 2]);
    ck_assert_msg(took[n - 1] <= 1000, "worst %lld ms", (long long)took[n - 1]);
    stack_stop(&s);
}
END_TEST

/* A 503 of a failed database: the client's words, the request's id, nothing internal. */
static void assert_unavailable(const struct evd_t_resp *r, const char *what)
{
    ck_assert_msg(r->status == 503, "%s answered %ld: %s", what, r->status, r->body);
    ck_assert_ptr_nonnull(r->json);
    ck_assert_str_eq(json_string_value(json_object_get(r->json, "detail")),
                     "the database is unavailable; retry later");
    ck_assert_str_eq(json_string_value(json_object_get(r->json, "code")), "unavailable");
    ck_assert_msg(r->request_id[0] != '\0', "%s: no X-Request-Id", what);
    ck_assert_str_eq(json_string_value(json_object_get(r->json, "request_id")), r->request_id);
    static const char *const internals[] = {"read-only", "port", "connection", "database error",
                                            "127.0.0.1"};
    for (size_t i = 0; i < sizeof(internals) / sizeof(*internals); i++)
        ck_assert_msg(strstr(r->body, internals[i]) == NULL, "%s: the answer names %s: %s", what,
                      internals[i], r->body);
}

/*
 * Whether evald's log has the request line of request_id with `error` holding `text` ("":
 * any error but the client's text: the database's own message, or the pool's).
 */
static bool logged(const struct evd_t_proc *p, const char *request_id, const char *text)
{
    FILE *f = fopen(p->log_path, "r");
    ck_assert_ptr_nonnull(f);
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        json_t *j = json_loads(line, 0, NULL);
        const char *rid = json_string_value(json_object_get(j, "req_id"));
        const char *error = json_string_value(json_object_get(j, "error"));
        found = rid != NULL && strcmp(rid, request_id) == 0 && error != NULL &&
                error[0] != '\0' && strstr(error, text) != NULL &&
                strcmp(error, "the database is unavailable; retry later") != 0;
        json_decref(j);
    }
    fclose(f);
    return found;
}

START_TEST(a_failed_database_is_told_in_the_clients_terms)
{
    struct stack s;
    stack_start(&s, NULL, NULL);
    const struct evd_t_proc *p = &s.evald;
    char ready[300], url[300];
    snprintf(ready, sizeof(ready), "%s/readyz", p->base);
    ck_assert(evd_t_wait_status(ready, 200, 10000));
    snprintf(url, sizeof(url), "%s/v1/evaluations", p->base);

    /* A read-only database: every new session of evald's is one (its old ones are ended). */
    char *out = evd_t_sql(s.url, "ALTER DATABASE evald SET default_transaction_read_only = on");
    free(out);
    out = evd_t_sql(s.url, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                           " WHERE datname = 'evald' AND pid <> pg_backend_pid()");
    free(out);
    struct evd_t_resp r;
    evd_t_http("POST", url, NULL, REQUEST, strlen(REQUEST), &r);
    assert_unavailable(&r, "a start on a read-only database");
    ck_assert_msg(logged(p, r.request_id, ""),
                  "no log line of request %s holds the database's message", r.request_id);
    evd_t_resp_free(&r);

    /* A 4xx keeps its detail, and gains the request's id too. */
    evd_t_http("POST", url, NULL, "{", 1, &r);
    ck_assert_int_eq(r.status, 400);
    ck_assert_str_eq(json_string_value(json_object_get(r.json, "request_id")), r.request_id);
    ck_assert_msg(strstr(json_string_value(json_object_get(r.json, "detail")), "JSON") != NULL,
                  "%s", r.body);
    evd_t_resp_free(&r);

    /* PostgreSQL stopped: the same answer, not libpq's "connection to server … port". */
    pg("stop", s.dir, s.port);
    snprintf(url, sizeof(url), "%s/v1/evaluations?limit=5", p->base);
    evd_t_http("GET", url, NULL, NULL, 0, &r);
    assert_unavailable(&r, "a list with PostgreSQL stopped");
    ck_assert_msg(logged(p, r.request_id, ""), "no log line of request %s holds the failure",
                  r.request_id);
    evd_t_resp_free(&r);
    stack_stop(&s);
}
END_TEST

/* The client of an export that, at its first bytes, has the database refuse evald. */
struct cut {
    char admin_url[256]; /* the cluster's postgres database: evald's own is closed to all */
    bool sabotage, done;
    size_t bytes;
};

static size_t cut_write(char *ptr, size_t size, size_t n, void *ud)
{
    (void)ptr;
    struct cut *c = ud;
    if (c->sabotage && !c->done) {
        c->done = true;
        /* evald fills the socket while this client waits; then its connections end and no
         * new one is let in, so its next read of the export fails mid-body. */
        sleep(1);
        char *out = evd_t_sql(c->admin_url, "ALTER DATABASE evald ALLOW_CONNECTIONS false");
        ck_assert_ptr_nonnull(out);
        free(out);
        out = evd_t_sql(c->admin_url, "SELECT count(pg_terminate_backend(pid))"
                                      " FROM pg_stat_activity WHERE datname = 'evald'");
        ck_assert_ptr_nonnull(out);
        free(out);
    }
    c->bytes += size * n;
    return size * n;
}

static CURLcode export_with(const char *url, struct cut *c)
{
    CURL *h = curl_easy_init();
    ck_assert_ptr_nonnull(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cut_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    ck_assert_int_eq(status, 200);
    curl_easy_cleanup(h);
    return rc;
}

/* An export whose database fails after its status line was sent ends without the chunked
 * body's last chunk: the client sees a truncated transfer (curl: 18), not a whole body. */
START_TEST(an_export_cut_by_the_database_ends_truncated)
{
    /* 2,000 runs with 2,500-byte answers: an export of about 6 MB, more than a socket
     * holds, read from the database 200 runs at a time. */
    char script[4096];
    int n = snprintf(script, sizeof(script), "{\"default\":{\"reply\":{\"text\":\"");
    for (int i = 0; i < 2500; i++)
        script[n++] = 'x';
    snprintf(script + n, sizeof(script) - (size_t)n, "\"}}}");
    struct stack s;
    stack_start(&s, script, NULL);
    const struct evd_t_proc *p = &s.evald;
    char url[300];

    json_t *cases = json_array();
    for (int i = 0; i < 1000; i++)
        json_array_append_new(cases, json_pack("{s:{s:i}}", "vars", "i", i));
    json_t *body = json_pack(
        "{s:s, s:{s:s, s:s}, s:{s:s}, s:[{s:s}], s:o, s:{s:s, s:{s:s}}, s:i}", "dimension",
        "prompt", "model", "model", "stub-model", "provider", "openai", "control", "prompt",
        "A {{i}}", "treatments", "prompt", "B {{i}}", "cases", cases, "evaluator", "function_id",
        "eval::assert::exact", "arguments", "expected", "x", "concurrency", 64);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    snprintf(url, sizeof(url), "%s/v1/experiments", p->base);
    long status = 0;
    json_t *started = evd_t_http_json("POST", url, text, &status);
    free(text);
    ck_assert_msg(status == 202, "the start answered %ld", status);
    char id[64];
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(started, "experiment_id")));
    json_decref(started);
    snprintf(url, sizeof(url), "%s/v1/experiments/%s", p->base, id);
    const char *st = NULL;
    for (int waited = 0; waited < 120000; waited += 200) {
        json_t *doc = evd_t_http_json("GET", url, NULL, &status);
        st = json_string_value(json_object_get(doc, "status"));
        bool done = st != NULL && strcmp(st, "completed") == 0;
        json_decref(doc);
        if (done)
            break;
        usleep(200 * 1000);
    }
    ck_assert_msg(st != NULL, "experiment %s did not complete", id);

    snprintf(url, sizeof(url), "%s/v1/experiments/%s/export?format=jsonl", p->base, id);
    struct cut whole = {0}, cut = {.sabotage = true};
    snprintf(whole.admin_url, sizeof(whole.admin_url), "postgresql://evald@127.0.0.1:%u/postgres",
             s.port);
    snprintf(cut.admin_url, sizeof(cut.admin_url), "%s", whole.admin_url);
    ck_assert_int_eq(export_with(url, &whole), CURLE_OK);
    ck_assert_msg(whole.bytes > 5000000, "the export is only %zu bytes", whole.bytes);
    CURLcode rc = export_with(url, &cut);
    ck_assert_msg(rc == CURLE_PARTIAL_FILE, "curl said %d (%s) after %zu of %zu bytes", (int)rc,
                  curl_easy_strerror(rc), cut.bytes, whole.bytes);
    ck_assert_uint_lt(cut.bytes, whole.bytes);
    ck_assert_int_gt(evd_t_log_count(p, "its body is cut"), 0);
    stack_stop(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("db_restart");
    TCase *tc = tcase_create("db_restart");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, pool_survives_an_immediate_restart);
    tcase_add_test(tc, a_failed_database_is_told_in_the_clients_terms);
    tcase_add_test(tc, an_export_cut_by_the_database_ends_truncated);
    tcase_add_loop_test(tc, cheap_routes_answer_while_the_database_waits, 0, 2);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
