/*
 * Leases that hold (issue 17), on a real PostgreSQL with the real evald and evald-stub:
 * the keeper's renewal and a finish wait for no job row another transaction holds (so
 * they cannot deadlock), a claim survives a crash of PostgreSQL that follows it at once,
 * a worker whose lease is not renewed ends its provider call before the lease runs out,
 * kills alone do not use up a run's attempts, and a finished run whose write failed is
 * written again, not executed again.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "store/db.h"
#include "store/evals.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char db_url[1024];
static char db_name[64];

/* The first column of the first row of a query on a fresh connection, as an integer. */
static long long q_int(const char *url, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static long long q_int(const char *url, const char *fmt, ...)
{
    char sql[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof(sql), fmt, ap);
    va_end(ap);
    char *v = evd_t_sql(url, sql);
    ck_assert_msg(v != NULL, "%s", sql);
    long long n = atoll(v);
    free(v);
    return n;
}

static void exec_ok(PGconn *conn, const char *sql)
{
    PGresult *r = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(r);
    ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql,
                  PQerrorMessage(conn));
    PQclear(r);
}

/* An evaluation "eval_<tag>" of `pairs` pairs with `concurrency`, through the store. */
static void create_eval(PGconn *c, const char *tag, int pairs, int concurrency, char id[64])
{
    snprintf(id, 64, "eval_%s", tag);
    json_t *runs = json_array();
    for (int p = 0; p < pairs; p++)
        for (int k = 0; k < 2; k++) {
            char run_id[32], session[96];
            snprintf(run_id, sizeof(run_id), "%s-%d", k == 0 ? "control" : "treatment", p + 1);
            snprintf(session, sizeof(session), "%s_%c_%d", id, k == 0 ? 'c' : 't', p + 1);
            json_array_append_new(
                runs, json_pack("{s:i, s:s, s:s, s:i, s:i, s:s}", "execution_position",
                                2 * p + k + 1, "run_id", run_id, "role",
                                k == 0 ? "control" : "treatment", "iteration", p + 1,
                                "pair_position", k + 1, "session_id", session));
        }
    json_t *request = json_pack("{s:s}", "dimension", "prompt");
    struct evd_err err = {0};
    ck_assert_msg(evd_store_eval_insert(c, id, request, concurrency, runs, NULL, 1000, NULL, NULL,
                                        &err) == EVD_OK,
                  "%s", err.msg);
    json_decref(request);
    json_decref(runs);
}

static enum evd_claim_outcome claim(PGconn *c, struct evd_store_job *job, int *attempt)
{
    enum evd_claim_outcome outcome;
    struct evd_err err = {0};
    ck_assert_msg(evd_store_job_claim_start(c, "test-owner", 30000, 2000, 8, job, &outcome,
                                            attempt, &err) == EVD_OK,
                  "%s", err.msg);
    evd_store_job_clear(job);
    return outcome;
}

/* ---- the locks: renewing and finishing wait for no job row ----------------------- */

static PGconn *c, *other;

static void db_setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    struct evd_err err = {0};
    ck_assert_msg(evd_db_migrate(db_url, &err) == EVD_OK, "%s", err.msg);
    c = evd_db_connect(db_url, &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    other = PQconnectdb(db_url);
    ck_assert_int_eq(PQstatus(other), CONNECTION_OK);
    /* A statement that waits for a lock fails after 3 s instead of hanging the test. */
    exec_ok(c, "SET lock_timeout = '3s'");
}

static void db_teardown(void)
{
    PQfinish(other);
    PQfinish(c);
    evd_t_db_drop(db_name);
}

START_TEST(renewal_waits_for_no_lock)
{
    char id[64], sql[256];
    create_eval(c, "renew", 1, 1, id);
    struct evd_store_job job;
    int attempt = 0;
    ck_assert_int_eq(claim(c, &job, &attempt), EVD_CLAIM_RUN);

    /* A finish (or a claim) holds the job's row: the renewal passes it over at once. */
    exec_ok(other, "BEGIN");
    snprintf(sql, sizeof(sql), "UPDATE jobs SET due_at = due_at WHERE id = %lld",
             (long long)job.id);
    exec_ok(other, sql);
    enum evd_lease_state state = EVD_LEASE_GONE;
    struct evd_err err = {0};
    ck_assert_msg(evd_store_jobs_renew(c, "test-owner", &job.id, 1, 30000, &state, &err) ==
                      EVD_OK,
                  "renewal waited for the row: %s", err.msg);
    ck_assert_int_eq(state, EVD_LEASE_HELD);
    exec_ok(other, "COMMIT");

    ck_assert_int_eq(evd_store_jobs_renew(c, "test-owner", &job.id, 1, 30000, &state, &err),
                     EVD_OK);
    ck_assert_int_eq(state, EVD_LEASE_RENEWED);
    ck_assert_int_eq(q_int(db_url,
                           "SELECT (lease_until > now() + interval '20 seconds')::int FROM jobs"
                           " WHERE id = %lld",
                           (long long)job.id),
                     1);

    /* Taken over by another owner: gone. */
    snprintf(sql, sizeof(sql), "UPDATE jobs SET lease_owner = 'someone-else' WHERE id = %lld",
             (long long)job.id);
    exec_ok(other, sql);
    ck_assert_int_eq(evd_store_jobs_renew(c, "test-owner", &job.id, 1, 30000, &state, &err),
                     EVD_OK);
    ck_assert_int_eq(state, EVD_LEASE_GONE);
}
END_TEST

START_TEST(finish_waits_for_no_job_row)
{
    /* Two pairs at concurrency 2: runs 1 and 3 have jobs. Finishing run 1 schedules runs 2
     * and 3; run 3's job exists, and a keeper is renewing it in an open transaction. */
    char id[64], sql[256];
    create_eval(c, "finish", 2, 2, id);
    struct evd_store_job job;
    int attempt = 0;
    ck_assert_int_eq(claim(c, &job, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(job.run_position, 1);
    exec_ok(other, "BEGIN");
    snprintf(sql, sizeof(sql),
             "UPDATE jobs SET lease_until = now() WHERE evaluation_id = '%s' AND run_position = 3",
             id);
    exec_ok(other, sql);

    json_t *run = json_pack("{s:s, s:b, s:s, s:{s:f}, s:{}, s:{}, s:[], s:I, s:I}", "status",
                            "completed", "passed", 1, "output", "OK", "evaluation", "score", 1.0,
                            "benchmark", "metrics", "failures", "started_at", (json_int_t)2000,
                            "completed_at", (json_int_t)3000);
    int result = -9;
    int64_t left = 0;
    struct evd_err err = {0};
    enum evd_code rc = evd_store_run_finish(c, id, 1, attempt, run, NULL, 3000, &result, &left,
                                            &err);
    json_decref(run);
    exec_ok(other, "COMMIT");
    ck_assert_msg(rc == EVD_OK, "the finish waited for the job row: %s", err.msg);
    ck_assert_int_eq(result, 1); /* run 2's job enqueued, run 3's left as it was */
    ck_assert_int_eq(q_int(db_url,
                           "SELECT count(*) FROM jobs WHERE evaluation_id = '%s' AND"
                           " run_position IN (2, 3)",
                           id),
                     2);
}
END_TEST

/* ---- a claim survives a crash of PostgreSQL ---------------------------------------- */

static void pg(const char *what, const char *dir, unsigned port)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/scripts/pg.sh %s %s %u >/dev/null", evd_t_source_dir(), what,
             dir, port);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

START_TEST(claim_survives_a_crash)
{
    char dir[] = "/tmp/evald-pg-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    evd_t_pg_cleanup_at_exit(dir);
    unsigned port = evd_t_free_port();
    pg("start", dir, port);
    char url[256];
    snprintf(url, sizeof(url), "postgresql://evald@127.0.0.1:%u/evald", port);
    struct evd_err err = {0};
    ck_assert_msg(evd_db_migrate(url, &err) == EVD_OK, "%s", err.msg);
    PGconn *w = evd_db_connect(url, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    /* The WAL writer waits long: what is not flushed at commit stays in memory. */
    exec_ok(w, "ALTER SYSTEM SET wal_writer_delay = '10s'");
    exec_ok(w, "SELECT pg_reload_conf()");
    char id[64];
    create_eval(w, "crash", 1, 1, id);
    sleep(1); /* the new setting reached the WAL writer */

    struct evd_store_job job;
    int attempt = 0;
    ck_assert_int_eq(claim(w, &job, &attempt), EVD_CLAIM_RUN);
    PQfinish(w);
    pg("kill", dir, port);
    pg("start", dir, port);
    /* The worker has been calling the provider since the claim: the run must still be
     * its, or a second worker would start it too. */
    ck_assert_int_eq(q_int(url,
                           "SELECT count(*) FROM jobs WHERE id = %lld AND lease_owner ="
                           " 'test-owner'",
                           (long long)job.id),
                     1);
    ck_assert_int_eq(q_int(url,
                           "SELECT count(*) FROM runs WHERE evaluation_id = '%s' AND position = 1"
                           " AND status = 'running' AND attempt = 1",
                           id),
                     1);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/scripts/pg.sh stop %s; rm -rf %s", evd_t_source_dir(), dir,
             dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- evald processes ------------------------------------------------------------- */

static struct evd_t_proc stub;
static char env_base[300];

static void proc_setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    snprintf(env_base, sizeof(env_base), "OPENAI_BASE_URL=%s/v1", stub.base);
}

static void proc_teardown(void)
{
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
}

static void start_evald(struct evd_t_proc *p)
{
    char *env[] = {env_base, "OPENAI_API_KEY=stub-key", "EVALD_LEASE_MS=1500",
                   "EVALD_SWEEP_INTERVAL_MS=500", "EVALD_WORKERS=2", NULL};
    ck_assert_int_eq(evd_t_evald_start(p, db_url, env), 0);
}

static char *start_eval(const char *base, int runs)
{
    char url[300], *body = NULL;
    ck_assert_int_ge(asprintf(&body,
                              "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\","
                              "\"provider\":\"openai\"},\"control\":{\"prompt\":\"Reply with "
                              "exactly OK.\"},\"treatment\":{\"prompt\":\"Now reply with exactly "
                              "OK.\"},\"evaluator\":{\"function_id\":\"eval::assert::exact\","
                              "\"arguments\":{\"expected\":\"OK\"}},\"runs\":%d}",
                              runs),
                     0);
    snprintf(url, sizeof(url), "%s/v1/evaluations", base);
    long status = 0;
    json_t *r = evd_t_http_json("POST", url, body, &status);
    free(body);
    ck_assert_int_eq(status, 202);
    char *id = strdup(json_string_value(json_object_get(r, "evaluation_id")));
    json_decref(r);
    return id;
}

static json_int_t stub_stat(const char *key)
{
    json_t *st = evd_t_stub_stats(&stub);
    ck_assert_ptr_nonnull(st);
    json_int_t v = json_integer_value(json_object_get(st, key));
    json_decref(st);
    return v;
}

/* Waits up to timeout_ms for the stub's in_flight to become `want`; the ms it took, or -1. */
static long wait_in_flight(json_int_t want, long timeout_ms)
{
    int64_t t0 = evd_mono_ms();
    while (evd_mono_ms() - t0 < timeout_ms) {
        if (stub_stat("in_flight") == want)
            return (long)(evd_mono_ms() - t0);
        usleep(20000);
    }
    return -1;
}

START_TEST(call_stops_before_the_lease_runs_out)
{
    /* Every provider answer takes 8 s; the lease is 1.5 s. */
    ck_assert_int_eq(evd_t_stub_script(&stub, "{\"default\":{\"latency_ms\":8000}}"), 200);
    struct evd_t_proc p;
    start_evald(&p);
    char *id = start_eval(p.base, 1);
    ck_assert_msg(wait_in_flight(1, 15000) >= 0, "the run never reached the provider");

    /* Another transaction holds the run's job (as a slow finish or claim would): the
     * keeper cannot renew the lease, and nobody can take the run over meanwhile. */
    PGconn *holder = PQconnectdb(db_url);
    ck_assert_int_eq(PQstatus(holder), CONNECTION_OK);
    exec_ok(holder, "BEGIN");
    char sql[256];
    snprintf(sql, sizeof(sql), "UPDATE jobs SET due_at = due_at WHERE evaluation_id = '%s'", id);
    exec_ok(holder, sql);
    long ended = wait_in_flight(0, 7000);
    /* The call has ended at the provider before the lease could run out (plus the time
     * it takes a loaded machine to notice), long before the provider answered it. */
    ck_assert_msg(ended >= 0 && ended < 4000,
                  "the provider call went on %ld ms with a lease that was not renewed", ended);
    exec_ok(holder, "COMMIT");
    PQfinish(holder);

    /* The run, handed back (or its lease run out), is run again and completes. */
    ck_assert_int_eq(evd_t_stub_script(&stub, "{\"default\":{\"latency_ms\":0}}"), 200);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    ck_assert_int_eq(q_int(db_url, "SELECT count(*) FROM runs WHERE evaluation_id = '%s'"
                                   " AND status = 'completed'",
                           id),
                     2);
    json_t *st = evd_t_stub_stats(&stub);
    ck_assert_int_eq(json_array_size(json_object_get(st, "sessions_in_flight_twice")), 0);
    json_decref(st);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
    free(id);
}
END_TEST

START_TEST(kills_alone_do_not_fail_a_run)
{
    /* One run in flight at a time, each answer 3 s late: the process running it is killed
     * with SIGKILL four times while its call is in flight (more than the three attempts
     * a run had), and another process starts each time. */
    ck_assert_int_eq(evd_t_stub_script(&stub, "{\"default\":{\"latency_ms\":3000}}"), 200);
    struct evd_t_proc p;
    start_evald(&p);
    char *id = start_eval(p.base, 1);
    for (int kill = 0; kill < 4; kill++) {
        ck_assert_msg(wait_in_flight(1, 20000) >= 0, "kill %d: the run never reached the provider",
                      kill);
        ck_assert_int_eq(evd_t_stop(&p, SIGKILL, 5000), 128 + SIGKILL);
        ck_assert_msg(wait_in_flight(0, 5000) >= 0, "the killed call stayed open");
        start_evald(&p);
    }
    ck_assert_int_eq(evd_t_stub_script(&stub, "{\"default\":{\"latency_ms\":0}}"), 200);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    char *failure = evd_t_sql(db_url, "SELECT coalesce(string_agg(failures::text, ';'), '')"
                                      " FROM runs WHERE status <> 'completed'");
    ck_assert_msg(failure != NULL && failure[0] == '\0', "a run failed: %s", failure);
    free(failure);
    ck_assert_int_eq(q_int(db_url, "SELECT count(*) FROM runs WHERE evaluation_id = '%s'"
                                   " AND status = 'completed' AND passed",
                           id),
                     2);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
    free(id);
}
END_TEST

START_TEST(a_failed_write_is_written_again_not_run_again)
{
    /* Each answer takes 1 s; the lease is 1.5 s. While run 1's call is in flight, the
     * function that writes finished runs disappears: the write fails for longer than a
     * lease, and comes back. */
    ck_assert_int_eq(evd_t_stub_script(&stub, "{\"default\":{\"latency_ms\":1000}}"), 200);
    struct evd_t_proc p;
    start_evald(&p);
    char *id = start_eval(p.base, 1);
    ck_assert_msg(wait_in_flight(1, 15000) >= 0, "the run never reached the provider");
    char *r = evd_t_sql(db_url, "ALTER FUNCTION evald_finish_runs(jsonb, bigint, text)"
                                " RENAME TO evald_finish_runs_away");
    ck_assert_ptr_nonnull(r);
    free(r);
    ck_assert_msg(wait_in_flight(0, 5000) >= 0, "the call did not end");
    sleep(4); /* more than two leases: a dropped write would have run the run again */
    r = evd_t_sql(db_url, "ALTER FUNCTION evald_finish_runs_away(jsonb, bigint, text)"
                          " RENAME TO evald_finish_runs");
    ck_assert_ptr_nonnull(r);
    free(r);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    ck_assert_int_eq(q_int(db_url, "SELECT count(*) FROM runs WHERE evaluation_id = '%s'"
                                   " AND status = 'completed'",
                           id),
                     2);
    /* One provider call per run: the finished one was written, not executed again. */
    json_t *log = evd_t_stub_requests(&stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    json_t *seen = json_object();
    size_t i;
    json_t *q;
    json_array_foreach(reqs, i, q)
    {
        const char *session =
            json_string_value(json_object_get(json_object_get(q, "headers"), "x-evald-session"));
        ck_assert_ptr_nonnull(session);
        json_int_t n = json_integer_value(json_object_get(seen, session));
        json_object_set_new(seen, session, json_integer(n + 1));
    }
    ck_assert_int_eq(json_object_size(seen), 2);
    const char *key;
    json_t *v;
    json_object_foreach(seen, key, v)
    {
        ck_assert_msg(json_integer_value(v) == 1, "run %s was called %lld times", key,
                      (long long)json_integer_value(v));
    }
    json_decref(seen);
    json_decref(log);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
    free(id);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("leases");
    TCase *locks = tcase_create("locks");
    tcase_add_checked_fixture(locks, db_setup, db_teardown);
    tcase_set_timeout(locks, 60);
    tcase_add_test(locks, renewal_waits_for_no_lock);
    tcase_add_test(locks, finish_waits_for_no_job_row);
    suite_add_tcase(s, locks);
    TCase *crash = tcase_create("crash");
    tcase_set_timeout(crash, 120);
    tcase_add_test(crash, claim_survives_a_crash);
    suite_add_tcase(s, crash);
    TCase *procs = tcase_create("processes");
    tcase_add_checked_fixture(procs, proc_setup, proc_teardown);
    tcase_set_timeout(procs, 180);
    tcase_add_test(procs, call_stops_before_the_lease_runs_out);
    tcase_add_test(procs, kills_alone_do_not_fail_a_run);
    tcase_add_test(procs, a_failed_write_is_written_again_not_run_again);
    suite_add_tcase(s, procs);
    return evd_test_run_suite(s);
}
