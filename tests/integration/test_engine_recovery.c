/*
 * The durable engine when its processes die, share the work or leave: real PostgreSQL, real
 * evald processes and evald-stub over loopback. Crash recovery after kill -9, scale-out over
 * three processes, graceful hand-back at SIGTERM, and a burst of finishes finalized in
 * batches, where an evaluation whose finalization fails holds back no other. The rest of
 * the engine's end-to-end tests are in test_engine.c; the fixture is
 * tests/support/engine_fixtures.c.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/support/engine_fixtures.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

/* Every run of every evaluation appears once, and completed. */
static void assert_all_complete(const char *base, char **ids, int n, int runs_each)
{
    for (int i = 0; i < n; i++) {
        ck_assert_str_eq(evd_t_wait_terminal(base, ids[i], 60000), "completed");
        json_t *res = et_result_of(base, ids[i]);
        json_t *runs = json_object_get(json_object_get(res, "report"), "runs");
        ck_assert_int_eq(json_array_size(runs), 2 * runs_each);
        for (size_t k = 0; k < json_array_size(runs); k++) {
            json_t *r = json_array_get(runs, k);
            ck_assert_str_eq(json_string_value(json_object_get(r, "status")), "completed");
            for (size_t j = 0; j < k; j++)
                ck_assert_str_ne(json_string_value(json_object_get(r, "run_id")),
                                 json_string_value(
                                     json_object_get(json_array_get(runs, j), "run_id")));
        }
        json_decref(res);
    }
}

START_TEST(crash_recovery_completes_every_evaluation)
{
    /* Every call takes 400 ms, so a kill -9 lands mid-call. */
    ck_assert_int_eq(evd_t_stub_script(&et_stub, "{\"rules\":[],\"default\":{\"latency_ms\":400,"
                                                 "\"reply\":{\"text\":\"OK\"}}}"),
                     200);
    struct evd_t_proc p;
    et_start_evald(&p, "EVALD_WORKERS=8", NULL);
    char *ids[10];
    for (int i = 0; i < 10; i++) {
        char tag[16];
        snprintf(tag, sizeof(tag), "crash%d", i);
        char *body = et_small_request(tag, 2, 1);
        ids[i] = et_start_eval(p.base, body);
        free(body);
    }
    usleep(700000);
    ck_assert_int_eq(evd_t_stop(&p, SIGKILL, 5000), 128 + SIGKILL);
    char *running = evd_t_sql(et_db_url, "SELECT count(*) FROM runs WHERE status = 'running'");
    ck_assert_int_gt(atoi(running), 0);
    free(running);
    et_start_evald(&p, "EVALD_WORKERS=8", NULL);
    assert_all_complete(p.base, ids, 10, 2);
    /* Interrupted runs were attempted again, and the attempts are recorded. */
    char *retried = evd_t_sql(et_db_url, "SELECT count(*) FROM runs WHERE attempt > 1");
    ck_assert_int_gt(atoi(retried), 0);
    free(retried);
    char *events = evd_t_sql(et_db_url, "SELECT count(*) FROM completion_events");
    ck_assert_str_eq(events, "10");
    free(events);
    /* The provider never saw one run executed twice at the same time. */
    json_t *stats = evd_t_stub_stats(&et_stub);
    ck_assert_int_le(json_integer_value(json_object_get(stats, "max_in_flight_per_session")), 1);
    json_decref(stats);
    for (int i = 0; i < 10; i++)
        free(ids[i]);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(three_processes_share_the_work)
{
    ck_assert_int_eq(evd_t_stub_script(&et_stub, "{\"rules\":[],\"default\":{\"latency_ms\":60,"
                                                 "\"reply\":{\"text\":\"OK\"}}}"),
                     200);
    struct evd_t_proc p[3];
    for (int i = 0; i < 3; i++)
        et_start_evald(&p[i], "EVALD_WORKERS=4", "EVALD_LOG_LEVEL=debug");
    char *ids[30];
    for (int i = 0; i < 30; i++) {
        char tag[16];
        snprintf(tag, sizeof(tag), "scale%d", i);
        char *body = et_small_request(tag, 1, 1);
        ids[i] = et_start_eval(p[i % 3].base, body);
        free(body);
    }
    assert_all_complete(p[0].base, ids, 30, 1);
    /* No run executed twice: one attempt each, never two calls at once. */
    char *multi = evd_t_sql(et_db_url, "SELECT count(*) FROM runs WHERE attempt <> 1");
    ck_assert_str_eq(multi, "0");
    free(multi);
    json_t *stats = evd_t_stub_stats(&et_stub);
    ck_assert_int_le(json_integer_value(json_object_get(stats, "max_in_flight_per_session")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "requests")), 60);
    json_decref(stats);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(evd_t_stop(&p[i], SIGTERM, 10000), 0);
    /* Work was spread: every process started runs (its debug log says so). */
    for (int i = 0; i < 3; i++)
        ck_assert_msg(evd_t_log_count(&p[i], "\"run started\"") > 0, "process %d ran nothing",
                      i);
    for (int i = 0; i < 30; i++)
        free(ids[i]);
}
END_TEST

/* A stub that answers in 1.5 s, an evald, and an evaluation of one run pair (prompts
 * tagged `tag`) whose first run is at the provider; its id (malloc'd). */
static char *start_slow_run(struct evd_t_proc *p, const char *tag)
{
    ck_assert_int_eq(evd_t_stub_script(&et_stub, "{\"rules\":[],\"default\":{\"latency_ms\":1500,"
                                                 "\"reply\":{\"text\":\"OK\"}}}"),
                     200);
    et_start_evald(p, NULL, NULL);
    char *body = et_small_request(tag, 1, 1);
    char *id = et_start_eval(p->base, body);
    free(body);
    et_wait_active(p->base, id);
    return id;
}

START_TEST(graceful_stop_hands_runs_back)
{
    struct evd_t_proc p;
    char *id = start_slow_run(&p, "handback");
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
    et_start_evald(&p, NULL, NULL);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 30000), "completed");
    /* The handed-back attempt did not count. */
    char *attempts = evd_t_sql(et_db_url, "SELECT max(attempt) FROM runs");
    ck_assert_str_eq(attempts, "1");
    free(attempts);
    free(id);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* A run whose attempts were all interrupted is failed with phase setup by the process
 * that claims it next (the lifecycle's start, engine/lifecycle.c), and is not run again:
 * its process is killed mid-call, its attempt count set to the limit, its lease expired. */
START_TEST(a_run_out_of_attempts_fails_without_a_call)
{
    struct evd_t_proc p;
    char *id = start_slow_run(&p, "exhausted");
    ck_assert_int_eq(evd_t_stop(&p, SIGKILL, 5000), 128 + SIGKILL);
    free(evd_t_sql(et_db_url, "UPDATE runs SET attempt = 8 WHERE status = 'running'"));
    free(evd_t_sql(et_db_url, "UPDATE jobs SET lease_until = now() - interval '1 second'"));
    json_t *before = evd_t_stub_requests(&et_stub, 0);
    size_t calls_before = json_array_size(json_object_get(before, "requests"));
    json_decref(before);
    et_start_evald(&p, NULL, NULL);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 30000), "completed");
    char *first = evd_t_sql(et_db_url,
                            "SELECT status || ' ' || attempt || ' ' || (failures->0->>'phase')"
                            " || ' ' || (failures->0->>'message') FROM runs WHERE position = 1");
    ck_assert_msg(strncmp(first, "failed 8 setup run was interrupted 8 times", 42) == 0,
                  "run 1: %s", first);
    free(first);
    char *second = evd_t_sql(et_db_url, "SELECT status FROM runs WHERE position = 2");
    ck_assert_str_eq(second, "completed");
    free(second);
    /* The run out of attempts reached the provider no more: only the second run did. */
    json_t *after = evd_t_stub_requests(&et_stub, 0);
    ck_assert_int_eq(json_array_size(json_object_get(after, "requests")), calls_before + 1);
    json_decref(after);
    free(id);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/*
 * A burst of evaluations finishing together is finalized in batches, by the finalizer and
 * its helper, and an evaluation whose finalization fails holds back no other.
 *
 * Triggers of the test's own on `evaluations` record which backend and transaction
 * completed each evaluation, hold the first one (`slow`) for 3 s, so that the others,
 * finishing meanwhile, queue up behind it, and refuse one (`refused`). The sweeper runs
 * only every 5 s, so that the finalizer and its helper do the work.
 */
START_TEST(a_burst_of_finishes_is_finalized_in_batches)
{
    enum { N = 100 };
    ck_assert_int_eq(evd_t_stub_script(&et_stub, "{\"default\":{\"latency_ms\":500,\"reply\":"
                                                 "{\"text\":\"OK\"}}}"),
                     200);
    char *env[] = {et_env_base, et_env_key, "EVALD_SWEEP_INTERVAL_MS=5000",
                   "EVALD_LEASE_MS=3000", "EVALD_MAX_CONCURRENCY=128", NULL};
    struct evd_t_proc p;
    ck_assert_int_eq(evd_t_evald_start(&p, et_db_url, env), 0);
    /* The triggers exist before any evaluation does, so that every finish is recorded
     * however slowly the starts go (a sanitizer build, a loaded machine); the two they single
     * out are named in t_targets as soon as they exist, a second before they can finish.
     * The slow one's 3 s hold begins once every start is done (t_release), so that the
     * others finish during it however long the starts took. */
    char *ok = evd_t_sql(
        et_db_url,
        "CREATE TABLE t_finals (id text, pid integer, xid xid8, stmt timestamptz);"
        "CREATE TABLE t_targets (id text PRIMARY KEY, what text NOT NULL);"
        "CREATE TABLE t_release (at timestamptz);"
        "CREATE FUNCTION t_hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF EXISTS (SELECT 1 FROM t_targets WHERE id = NEW.id AND what = 'slow') THEN"
        " WHILE NOT EXISTS (SELECT 1 FROM t_release)"
        " AND clock_timestamp() < statement_timestamp() + interval '60 s' LOOP"
        " PERFORM pg_sleep(0.05); END LOOP;"
        " PERFORM pg_sleep(3); END IF;"
        " IF EXISTS (SELECT 1 FROM t_targets WHERE id = NEW.id AND what = 'refused') THEN"
        " RAISE EXCEPTION 'refused by the test'; END IF;"
        " RETURN NEW; END $$;"
        "CREATE FUNCTION t_record() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " INSERT INTO t_finals VALUES (NEW.id, pg_backend_pid(), pg_current_xact_id(),"
        " statement_timestamp());"
        " RETURN NEW; END $$;"
        "CREATE TRIGGER t_hold BEFORE UPDATE ON evaluations FOR EACH ROW"
        " WHEN (NEW.status = 'completed') EXECUTE FUNCTION t_hold();"
        "CREATE TRIGGER t_record AFTER UPDATE ON evaluations FOR EACH ROW"
        " WHEN (NEW.status = 'completed') EXECUTE FUNCTION t_record();"
        "SELECT 'created'");
    ck_assert_str_eq(ok, "created");
    free(ok);
    char *body = et_small_request("burst", 1, 1);
    char *slow = et_start_eval(p.base, body);
    static char *ids[N];
    ids[0] = et_start_eval(p.base, body);
    const char *refused = ids[0];
    char *sql = NULL;
    ck_assert_int_ge(asprintf(&sql,
                              "INSERT INTO t_targets VALUES ('%s', 'slow'), ('%s', 'refused');"
                              "SELECT count(*) FROM evaluations WHERE status = 'completed'",
                              slow, refused),
                     0);
    char *done = evd_t_sql(et_db_url, sql);
    free(sql);
    ck_assert_str_eq(done, "0"); /* named before either could finish (1 s at the least) */
    free(done);
    for (int i = 1; i < N; i++)
        ids[i] = et_start_eval(p.base, body);
    free(body);
    ok = evd_t_sql(et_db_url, "INSERT INTO t_release VALUES (now()); SELECT 'released'");
    ck_assert_str_eq(ok, "released");
    free(ok);

    /* Every evaluation but the refused one completes; the refused one waits, its runs
     * written. */
    char q[300];
    snprintf(q, sizeof(q),
             "SELECT count(*) FROM evaluations WHERE status = 'completed' AND id <> '%s'",
             refused);
    char *n = NULL;
    for (int64_t t0 = evd_mono_ms(); evd_mono_ms() - t0 < 60000; usleep(100 * 1000)) {
        free(n);
        n = evd_t_sql(et_db_url, q);
        if (n != NULL && atoi(n) == N)
            break;
    }
    ck_assert_msg(n != NULL && atoi(n) == N, "%s of %d completed", n ? n : "?", N);
    free(n);
    snprintf(q, sizeof(q),
             "SELECT status || ' ' || terminal_runs || '/' || total_runs FROM evaluations"
             " WHERE id = '%s'",
             refused);
    char *st = evd_t_sql(et_db_url, q);
    ck_assert_str_eq(st, "running 2/2");
    free(st);

    /* In batches (fewer transactions than evaluations), by more than one backend: the
     * finalizer and its helper (the sweeper's next pass is seconds away); and, but for the
     * batch the refused one fell in, each batch's reports written by one statement
     * (evald_finish_evals), not one each. */
    snprintf(q, sizeof(q),
             "SELECT count(*) || ' ' || count(DISTINCT xid) || ' ' || count(DISTINCT pid) || ' '"
             " || count(DISTINCT (xid, stmt)) FROM t_finals WHERE id NOT IN ('%s', '%s')",
             slow, refused);
    char *shape = evd_t_sql(et_db_url, q);
    int finals = 0, xacts = 0, backends = 0, statements = 0;
    ck_assert_int_eq(sscanf(shape, "%d %d %d %d", &finals, &xacts, &backends, &statements), 4);
    fprintf(stderr,
            "%d evaluations finalized in %d transactions and %d statements by %d backends\n",
            finals, xacts, statements, backends);
    ck_assert_msg(finals == N - 1 && xacts <= N / 2 && backends >= 2 &&
                      statements <= xacts + 32,
                  "%d evaluations: %d transactions, %d statements, %d backends", finals, xacts,
                  statements, backends);
    free(shape);

    /* Once it may, the sweeper completes the refused one; every completion event once. */
    ok = evd_t_sql(et_db_url, "DROP TRIGGER t_hold ON evaluations; SELECT 'dropped'");
    ck_assert_str_eq(ok, "dropped");
    free(ok);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, refused, 30000), "completed");
    json_t *res = et_result_of(p.base, refused);
    json_t *report = json_object_get(res, "report");
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(report, "control_aggregate"), "passed")),
                     1);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(report, "treatment_aggregate"), "passed")),
                     1);
    json_decref(res);
    char *events = evd_t_sql(et_db_url, "SELECT count(*) || ' ' || count(DISTINCT evaluation_id)"
                                        " FROM completion_events");
    char want[32];
    snprintf(want, sizeof(want), "%d %d", N + 1, N + 1);
    ck_assert_str_eq(events, want);
    free(events);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
    free(slow);
    for (int i = 0; i < N; i++)
        free(ids[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine_recovery");
    TCase *tc = tcase_create("engine_recovery");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, et_setup, et_teardown);
    tcase_add_test(tc, crash_recovery_completes_every_evaluation);
    tcase_add_test(tc, three_processes_share_the_work);
    tcase_add_test(tc, graceful_stop_hands_runs_back);
    tcase_add_test(tc, a_run_out_of_attempts_fails_without_a_call);
    tcase_add_test(tc, a_burst_of_finishes_is_finalized_in_batches);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
