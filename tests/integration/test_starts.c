/*
 * Starts in batches (engine/starter.c, migrations/0016) through the real evald, its HTTP
 * server, evald-stub and PostgreSQL: starts that arrive while a batch is written share
 * the next one, which claims their first runs for idle workers in the same transaction;
 * the HTTP threads are free meanwhile (a start's answer is deferred, not waited for); a
 * start PostgreSQL refuses fails alone; a start pending at a graceful stop is answered,
 * with 503 when its batch outlives the server.
 *
 * A trigger of the test's own on `evaluations` holds a transaction (pg_sleep, once) that
 * creates an evaluation whose control prompt starts with "hold", and refuses one whose
 * prompt starts with "refuse".
 */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
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
static char env_base[300], env_key[] = "OPENAI_API_KEY=stub-key";

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    /* Slow answers: the first runs are still in flight while the test looks at them. */
    ck_assert_int_eq(evd_t_stub_start(&stub, "{\"default\":{\"latency_ms\":20000,\"reply\":"
                                             "{\"text\":\"OK\"}}}",
                                      NULL),
                     0);
    snprintf(env_base, sizeof(env_base), "OPENAI_BASE_URL=%s/v1", stub.base);
}

static void teardown(void)
{
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
}

/* evald with the stub, two HTTP threads (a handler that waited would hold one of them).
 * Its workers look for work once when they start: given a second for it, they are all
 * idle when the test's starts come (a slow machine, a sanitizer build). */
static void start_evald(struct evd_t_proc *p)
{
    char *env[] = {env_base, env_key, "EVALD_HTTP_THREADS=2", "EVALD_MAX_CONCURRENCY=128",
                   "EVALD_LEASE_MS=60000", NULL};
    ck_assert_int_eq(evd_t_evald_start(p, db_url, env), 0);
    usleep(1000 * 1000);
}

static void install_triggers(double hold_s)
{
    char *sql = NULL;
    ck_assert_int_ge(
        asprintf(&sql,
                 "CREATE FUNCTION t_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                 " IF NEW.request->'control'->>'prompt' LIKE 'hold%%' AND"
                 " current_setting('t.held', true) IS DISTINCT FROM 'yes' THEN"
                 " PERFORM set_config('t.held', 'yes', true); PERFORM pg_sleep(%g); END IF;"
                 " IF NEW.request->'control'->>'prompt' LIKE 'refuse%%' THEN"
                 " RAISE EXCEPTION 'refused by the test'; END IF;"
                 " RETURN NEW; END $$;"
                 "CREATE TRIGGER t_gate BEFORE INSERT ON evaluations FOR EACH ROW"
                 " EXECUTE FUNCTION t_gate(); SELECT 'ready'",
                 hold_s),
        0);
    char *ok = evd_t_sql(db_url, sql);
    free(sql);
    ck_assert_str_eq(ok, "ready");
    free(ok);
}

static char *request_for(const char *prompt)
{
    char *s = NULL;
    ck_assert_int_ge(asprintf(&s,
                              "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\","
                              "\"provider\":\"openai\"},\"control\":{\"prompt\":\"%s\"},"
                              "\"treatment\":{\"prompt\":\"%s too\"},\"evaluator\":{"
                              "\"function_id\":\"eval::assert::exact\",\"arguments\":{"
                              "\"expected\":\"OK\"}},\"runs\":1}",
                              prompt, prompt),
                     0);
    return s;
}

struct start {
    pthread_t thread;
    const char *base;
    char prompt[64];
    long status;
    char id[64];
};

static void *post_start(void *arg)
{
    struct start *s = arg;
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/evaluations", s->base);
    char *body = request_for(s->prompt);
    struct evd_t_resp r;
    evd_t_http("POST", url, NULL, body, strlen(body), &r);
    s->status = r.status;
    const char *id = json_string_value(json_object_get(r.json, "evaluation_id"));
    snprintf(s->id, sizeof(s->id), "%s", id ? id : "");
    evd_t_resp_free(&r);
    free(body);
    return NULL;
}

static void launch(struct start *s, const char *base, const char *prompt)
{
    s->base = base;
    snprintf(s->prompt, sizeof(s->prompt), "%s", prompt);
    ck_assert_int_eq(pthread_create(&s->thread, NULL, post_start, s), 0);
}

/* Two starts that hold both starter threads (their batches' transactions sleep), then,
 * once they do, n more into starts[], whose prompts are `word` and their index, but for
 * start `refused` (-1: none), whose prompt starts with "refuse". */
static void launch_behind_holds(const char *base, struct start holds[2], struct start *starts,
                                int n, const char *word, int refused)
{
    launch(&holds[0], base, "hold 1");
    launch(&holds[1], base, "hold 2");
    usleep(300 * 1000);
    for (int i = 0; i < n; i++) {
        char prompt[32];
        snprintf(prompt, sizeof(prompt), "%s %d", i == refused ? "refuse" : word, i);
        launch(&starts[i], base, prompt);
    }
}

static long long q_int(const char *sql)
{
    char *v = evd_t_sql(db_url, sql);
    ck_assert_msg(v != NULL, "%s", sql);
    long long n = atoll(v);
    free(v);
    return n;
}

START_TEST(starts_share_batches_that_claim_their_first_runs)
{
    enum { N = 60 };
    struct evd_t_proc p;
    start_evald(&p);
    install_triggers(2.5);
    /* Both starter threads held by a batch each, the other starts queue behind them. */
    static struct start holds[2], starts[N];
    launch_behind_holds(p.base, holds, starts, N, "hold", -1);
    /* Meanwhile the two HTTP threads answer other requests at once: the starts wait for
     * their batch (every one of which is held) without holding them. */
    usleep(300 * 1000);
    char url[256];
    snprintf(url, sizeof(url), "%s/healthz", p.base);
    struct evd_t_resp r;
    ck_assert_int_eq(evd_t_http_timed("GET", url, NULL, NULL, 0, 5000, &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(r.elapsed_ms < 1000, "/healthz took %ld ms behind pending starts",
                  r.elapsed_ms);
    evd_t_resp_free(&r);
    for (int i = 0; i < 2; i++) {
        pthread_join(holds[i].thread, NULL);
        ck_assert_int_eq(holds[i].status, 202);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(starts[i].thread, NULL);
        ck_assert_msg(starts[i].status == 202, "start %d answered %ld", i, starts[i].status);
    }
    /* N + 2 evaluations, created in a handful of transactions, each with its first run
     * claimed by that transaction (the run's row version is the creating one's: its
     * calls take 20 s, so none has finished). */
    ck_assert_int_eq(q_int("SELECT count(*) FROM evaluations"), N + 2);
    long long xacts = q_int("SELECT count(DISTINCT xmin::text) FROM evaluations");
    fprintf(stderr, "%d starts in %lld transactions\n", N + 2, xacts);
    ck_assert_msg(xacts <= 8, "%d starts took %lld transactions", N + 2, xacts);
    ck_assert_int_eq(q_int("SELECT count(*) FROM evaluations e JOIN runs r ON r.evaluation_id ="
                           " e.id AND r.position = 1 WHERE r.status = 'running' AND r.attempt = 1"
                           " AND r.xmin = e.xmin AND e.status = 'running'"),
                     N + 2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE lease_owner IS NULL"), 0);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 30000), 0);
}
END_TEST

START_TEST(a_refused_start_fails_alone)
{
    enum { N = 12 };
    struct evd_t_proc p;
    start_evald(&p);
    install_triggers(1.0);
    static struct start holds[2], starts[N];
    /* One of them refused: its batch fails, and it alone when the batch is taken again. */
    launch_behind_holds(p.base, holds, starts, N, "start", N / 2);
    for (int i = 0; i < 2; i++)
        pthread_join(holds[i].thread, NULL);
    for (int i = 0; i < N; i++) {
        pthread_join(starts[i].thread, NULL);
        if (i == N / 2)
            ck_assert_msg(starts[i].status >= 500 && starts[i].id[0] == '\0',
                          "the refused start answered %ld", starts[i].status);
        else
            ck_assert_msg(starts[i].status == 202, "start %d answered %ld", i, starts[i].status);
    }
    ck_assert_int_eq(q_int("SELECT count(*) FROM evaluations"), N + 1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM evaluations WHERE request->'control'->>'prompt'"
                           " LIKE 'refuse%'"),
                     0);
    /* Every evaluation written has its runs and its first job. */
    ck_assert_int_eq(q_int("SELECT count(*) FROM runs"), 2 * (N + 1));
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs"), N + 1);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 30000), 0);
}
END_TEST

START_TEST(a_start_pending_at_a_stop_is_answered)
{
    struct evd_t_proc p;
    start_evald(&p);
    install_triggers(2.0);
    struct start s;
    launch(&s, p.base, "hold on");
    usleep(500 * 1000);
    ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
    pthread_join(s.thread, NULL);
    /* The stop waits for the requests in flight (up to 10 s): the start's batch commits
     * and the start is answered before the process leaves. */
    ck_assert_int_eq(s.status, 202);
    ck_assert_int_eq(evd_t_wait(&p, 30000), 0);
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE id = '%s'", s.id);
    ck_assert_int_eq(q_int(sql), 1);
}
END_TEST

/* The server stops waiting after 10 s: it answers 503 itself, and the start's batch, which
 * commits later, is dropped by the server; the runs the batch claimed for workers that
 * have left go back to the queue at the engine's stop. */
START_TEST(a_start_outliving_the_server_is_answered_503)
{
    struct evd_t_proc p;
    start_evald(&p);
    install_triggers(13.0);
    struct start s;
    launch(&s, p.base, "hold on");
    usleep(500 * 1000);
    ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
    pthread_join(s.thread, NULL);
    /* 503, or, when the daemon closed the connection before its thread sent that (the
     * server gives it a second), no answer: never a 202 for a start the client cannot be
     * sure of. */
    ck_assert_msg(s.status == 503 || s.status == 0, "the start answered %ld", s.status);
    ck_assert_int_eq(evd_t_wait(&p, 30000), 0);
    /* Written after all (a 503 at a stop does not say it was not), and its first run
     * pending again, free for the next process. */
    ck_assert_int_eq(q_int("SELECT count(*) FROM evaluations"), 1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM runs WHERE status = 'pending' AND attempt = 0"),
                     2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE lease_owner IS NULL"), 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("starts");
    TCase *tc = tcase_create("starts");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, starts_share_batches_that_claim_their_first_runs);
    tcase_add_test(tc, a_refused_start_fails_alone);
    tcase_add_test(tc, a_start_pending_at_a_stop_is_answered);
    tcase_add_test(tc, a_start_outliving_the_server_is_answered_503);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
