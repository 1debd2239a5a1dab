/*
 * A database that restarted under evald: PostgreSQL of this test's own (a private cluster
 * it crashes with an immediate shutdown and starts again), the real evald and evald-stub.
 * Once /readyz answers 200 again, every request must be served: the pool replaces the
 * connections the restart killed instead of failing the first statement on each.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static void *perform(void *arg)
{
    struct call *c = arg;
    struct evd_t_resp r;
    evd_t_http(c->body ? "POST" : "GET", c->url, NULL, c->body, c->body ? strlen(c->body) : 0,
               &r);
    c->status = r.status;
    snprintf(c->answer, sizeof(c->answer), "%s", r.body);
    evd_t_resp_free(&r);
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

START_TEST(pool_survives_an_immediate_restart)
{
    char dir[] = "/tmp/evald-pg-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    evd_t_pg_cleanup_at_exit(dir);
    unsigned port = evd_t_free_port();
    pg("start", dir, port);
    char pgurl[256], env_base[300], ready[300];
    snprintf(pgurl, sizeof(pgurl), "postgresql://evald@127.0.0.1:%u/evald", port);
    struct evd_t_proc stub, p;
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    snprintf(env_base, sizeof(env_base), "OPENAI_BASE_URL=%s/v1", stub.base);
    char *env[] = {env_base, "OPENAI_API_KEY=stub-key", "EVALD_DB_POOL_SIZE=16", NULL};
    ck_assert_int_eq(evd_t_evald_start(&p, pgurl, env), 0);
    snprintf(ready, sizeof(ready), "%s/readyz", p.base);
    ck_assert(evd_t_wait_status(ready, 200, 10000));

    char url[300];
    snprintf(url, sizeof(url), "%s/v1/evaluations", p.base);
    long status = 0;
    json_t *started = evd_t_http_json("POST", url, REQUEST, &status);
    ck_assert_int_eq(status, 202);
    char id[64];
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(started, "evaluation_id")));
    json_decref(started);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 30000), "completed");
    /* Every pool connection opened and idle, as on a service that has been serving. */
    ck_assert_int_eq(burst(p.base, id), 0);

    for (int round = 0; round < 2; round++) {
        pg("kill", dir, port);
        pg("start", dir, port);
        ck_assert_msg(evd_t_wait_status(ready, 200, 30000), "readyz did not recover");
        int failed = burst(p.base, id);
        ck_assert_msg(failed == 0, "round %d: %d of %d requests failed after the restart", round,
                      failed, READERS + 1);
    }

    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
    evd_t_stop(&stub, SIGTERM, 5000);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/scripts/pg.sh stop %s; rm -rf %s", evd_t_source_dir(), dir,
             dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("db_restart");
    TCase *tc = tcase_create("db_restart");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, pool_survives_an_immediate_restart);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
