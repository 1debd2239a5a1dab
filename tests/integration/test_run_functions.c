/*
 * The run functions of migrations/0006 and 0007 (evald_create, evald_schedule,
 * evald_claim, evald_finish_run) through the store's C API, on a real PostgreSQL, with a
 * second connection holding the locks that concurrent workers and cancels would hold:
 * scheduling by pairs and concurrency, the claim that waits for no lock, the finish that
 * leaves a locked job behind, stale attempts, obsolete jobs, exhausted attempts, the last
 * run that asks for finalization, a batch of finishes in one statement, the claims that
 * batch makes for its workers (migrations/0015), a batch of starts and its claims (0016),
 * the finalizer's batch (0017), and runs started ahead (0027).
 */
#include <check.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db.h"
#include "store/evals.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char db_url[1024];
static char db_name[64];
static PGconn *c;     /* the worker's connection */
static PGconn *other; /* another transaction's */

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    struct evd_err err = {0};
    ck_assert_msg(evd_db_migrate(db_url, &err) == EVD_OK, "%s", err.msg);
    c = evd_db_connect(db_url, &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    other = PQconnectdb(db_url);
    ck_assert_int_eq(PQstatus(other), CONNECTION_OK);
}

static void teardown(void)
{
    PQfinish(other);
    PQfinish(c);
    evd_t_db_drop(db_name);
}

/* Runs SQL on the other connection (in whatever transaction it has open). */
static void other_sql(const char *sql)
{
    PGresult *r = PQexec(other, sql);
    ExecStatusType st = PQresultStatus(r);
    ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql,
                  PQerrorMessage(other));
    PQclear(r);
}

/* The first column of the first row of a query on a fresh connection, as an integer. */
static long long q_int(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static long long q_int(const char *fmt, ...)
{
    char sql[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof(sql), fmt, ap);
    va_end(ap);
    char *v = evd_t_sql(db_url, sql);
    ck_assert_msg(v != NULL, "%s", sql);
    long long n = atoll(v);
    free(v);
    return n;
}

/* The planned runs of an evaluation of `pairs` pairs, as evd_store_eval_insert takes them. */
static json_t *plan_of(const char *id, int pairs)
{
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
    return runs;
}

/* An evaluation of `pairs` pairs (control first in each) with `concurrency`, through
 * the store (evald_create); its id is "eval_<tag>". */
static void create_eval(const char *tag, int pairs, int concurrency, char id[64])
{
    snprintf(id, 64, "eval_%s", tag);
    json_t *runs = plan_of(id, pairs);
    json_t *request = json_pack("{s:s}", "dimension", "prompt");
    struct evd_err err = {0};
    ck_assert_msg(evd_store_eval_insert(c, id, request, concurrency, runs, NULL, 1000, NULL, NULL, &err) ==
                      EVD_OK,
                  "%s", err.msg);
    json_decref(request);
    json_decref(runs);
}

/* Positions of the evaluation's run jobs, ascending, as "1,3". */
static void job_positions(const char *id, char *out, size_t n)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT coalesce(string_agg(run_position::text, ',' ORDER BY run_position), '')"
             " FROM jobs WHERE evaluation_id = '%s'",
             id);
    char *v = evd_t_sql(db_url, sql);
    ck_assert_ptr_nonnull(v);
    snprintf(out, n, "%s", v);
    free(v);
}

static enum evd_claim_outcome claim(struct evd_store_job *job, int *attempt)
{
    enum evd_claim_outcome outcome;
    struct evd_err err = {0};
    ck_assert_msg(evd_store_job_claim_start(c, "test-owner", 30000, 2000, 3, job, &outcome,
                                            attempt, &err) == EVD_OK,
                  "%s", err.msg);
    /* A claimed run brings its evaluation's request (create_eval's). */
    if (outcome == EVD_CLAIM_RUN)
        ck_assert_msg(job->request != NULL && strstr(job->request, "\"dimension\"") != NULL &&
                          !job->rescore,
                      "%s", job->request ? job->request : "no request");
    evd_store_job_clear(job);
    return outcome;
}

/* Finishes a run as passed; returns the function's result, *left the job left behind. */
static int finish(const char *id, int position, int attempt, int64_t *left)
{
    json_t *run = json_pack("{s:s, s:b, s:s, s:{s:f}, s:{}, s:{}, s:[], s:I, s:I}", "status",
                            "completed", "passed", 1, "output", "OK", "evaluation", "score", 1.0,
                            "benchmark", "metrics", "failures", "started_at", (json_int_t)2000,
                            "completed_at", (json_int_t)3000);
    int result = 0;
    int64_t job_left = 0;
    struct evd_err err = {0};
    ck_assert_msg(evd_store_run_finish(c, id, position, attempt, run, NULL, 3000, &result,
                                       &job_left, &err) == EVD_OK,
                  "%s", err.msg);
    json_decref(run);
    if (left)
        *left = job_left;
    return result;
}

/* A one-pair evaluation whose first run is claimed and started; *attempt its attempt. */
static void start_one_pair(const char *tag, char id[64], struct evd_store_job *job, int *attempt)
{
    create_eval(tag, 1, 1, id);
    ck_assert_int_eq(claim(job, attempt), EVD_CLAIM_RUN);
    ck_assert_str_eq(job->evaluation_id, id);
    ck_assert_int_eq(*attempt, 1);
}

START_TEST(schedule_opens_pairs_in_order_up_to_concurrency)
{
    char id[64], jobs[64];
    create_eval("sched", 3, 2, id);
    job_positions(id, jobs, sizeof(jobs));
    ck_assert_str_eq(jobs, "1,3"); /* first runs of pairs 1 and 2; pair 3 waits */

    struct evd_store_job job;
    int attempt = 0;
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    ck_assert_str_eq(job.evaluation_id, id);
    ck_assert_int_eq(job.run_position, 1);
    ck_assert_int_eq(attempt, 1);
    ck_assert(job.more); /* run 3's job is due beside it */
    ck_assert_int_eq(q_int("SELECT attempt FROM runs WHERE evaluation_id = '%s' AND position = 1",
                           id),
                     1);
    ck_assert_int_eq(q_int("SELECT (status = 'running')::int FROM evaluations WHERE id = '%s'",
                           id),
                     1);

    /* Run 1 done: its pair's second run (2) may start; pair 3 still waits for a slot. */
    ck_assert_int_eq(finish(id, 1, 1, NULL), 1);
    job_positions(id, jobs, sizeof(jobs));
    ck_assert_str_eq(jobs, "2,3");
    ck_assert_int_eq(q_int("SELECT terminal_runs * 10 + passed_runs FROM evaluations"
                           " WHERE id = '%s'",
                           id),
                     11);

    /* Runs 3 and 2 (in claim order: 2 was enqueued later) finish: pair 1 is done, so
     * pair 3 opens. */
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(job.run_position, 3);
    ck_assert_int_eq(finish(id, 3, 1, NULL), 1); /* run 4 */
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(job.run_position, 2);
    ck_assert_int_eq(finish(id, 2, 1, NULL), 1); /* run 5 */
    job_positions(id, jobs, sizeof(jobs));
    ck_assert_str_eq(jobs, "4,5");
    /* The claim says whether another job is due beside the one it took. */
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    ck_assert(job.more);
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    ck_assert(!job.more);
}
END_TEST

START_TEST(stale_attempt_writes_nothing)
{
    char id[64];
    struct evd_store_job job;
    int attempt = 0;
    start_one_pair("stale", id, &job, &attempt);
    ck_assert_int_eq(finish(id, 1, attempt + 1, NULL), EVD_RUN_NOT_WRITTEN);
    ck_assert_int_eq(q_int("SELECT terminal_runs FROM evaluations WHERE id = '%s'", id), 0);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE evaluation_id = '%s'", id), 1);
    ck_assert_int_eq(finish(id, 1, attempt, NULL), 1); /* the pair's second run */
}
END_TEST

START_TEST(last_run_asks_for_finalization)
{
    char id[64];
    struct evd_store_job job;
    int attempt = 0;
    start_one_pair("last", id, &job, &attempt);
    ck_assert_int_eq(finish(id, 1, attempt, NULL), 1);
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(job.run_position, 2);
    ck_assert_int_eq(finish(id, 2, attempt, NULL), EVD_RUN_ALL_TERMINAL);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE evaluation_id = '%s'", id), 0);
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_NONE);
}
END_TEST

START_TEST(claim_waits_for_no_lock)
{
    char a[64], b[64];
    create_eval("held_a", 1, 1, a); /* older job */
    create_eval("held_b", 1, 1, b);
    char sql[200];
    /* Another transaction holds evaluation A (a finish, say): A's run starts anyway, and
     * A stays queued until a start finds it free. */
    other_sql("BEGIN");
    snprintf(sql, sizeof(sql), "SELECT 1 FROM evaluations WHERE id = '%s' FOR UPDATE", a);
    other_sql(sql);
    struct evd_store_job job;
    int attempt = 0;
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    ck_assert_str_eq(job.evaluation_id, a);
    ck_assert_int_eq(attempt, 1);
    other_sql("COMMIT");
    ck_assert_int_eq(q_int("SELECT (status = 'queued')::int FROM evaluations WHERE id = '%s'", a),
                     1);

    /* Another holds B's run (a cancel or a timeout): B's job is claimed, not started. */
    other_sql("BEGIN");
    snprintf(sql, sizeof(sql),
             "SELECT 1 FROM runs WHERE evaluation_id = '%s' AND position = 1 FOR UPDATE", b);
    other_sql(sql);
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_CLAIMED);
    ck_assert_str_eq(job.evaluation_id, b);
    ck_assert_int_eq(attempt, 0);
    other_sql("COMMIT");
    ck_assert_int_eq(q_int("SELECT attempt FROM runs WHERE evaluation_id = '%s' AND position = 1",
                           b),
                     0);
    ck_assert_int_eq(q_int("SELECT (lease_owner = 'test-owner')::int FROM jobs"
                           " WHERE evaluation_id = '%s'",
                           b),
                     1);
}
END_TEST

START_TEST(finish_leaves_a_locked_job_behind)
{
    char id[64];
    struct evd_store_job job;
    int attempt = 0;
    start_one_pair("left", id, &job, &attempt);
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT 1 FROM jobs WHERE id = %lld FOR UPDATE",
             (long long)job.id);
    other_sql("BEGIN");
    other_sql(sql); /* as a claimer whose snapshot predates the lease would hold it */

    int64_t left = 0;
    ck_assert_int_eq(finish(id, 1, attempt, &left), 1); /* written, run 2 enqueued */
    ck_assert_int_eq(left, job.id);
    ck_assert_int_eq(q_int("SELECT (status = 'completed')::int FROM runs WHERE"
                           " evaluation_id = '%s' AND position = 1",
                           id),
                     1);
    /* The job stays, still leased (the writer deletes it once the claimer lets go), and
     * the claims go on around it. */
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE id = %lld AND lease_owner ="
                           " 'test-owner'",
                           (long long)job.id),
                     1);
    struct evd_store_job next;
    ck_assert_int_eq(claim(&next, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(next.run_position, 2);
    other_sql("COMMIT");
}
END_TEST

/* The writer's batch (evd_store_runs_finish_ahead) at time 3000, with no run ahead and a
 * job asked for each of claims->n workers (claims NULL: none). */
static enum evd_code finish_batch(const char *array, size_t n, int *results, int64_t *left,
                                  struct evd_store_claims *claims, struct evd_err *err)
{
    struct evd_store_ahead_item items[8] = {{0}};
    size_t m = claims != NULL ? (size_t)claims->n : 0;
    ck_assert_uint_le(m, 8);
    for (size_t i = 0; i < m; i++)
        items[i].need = true;
    struct evd_store_ahead ahead = {.items = items, .nitems = m};
    return evd_store_runs_finish_ahead(c, array, 3000, "test-owner", n, results, left, claims,
                                       &ahead, err);
}

START_TEST(batch_finishes_several_runs_in_one_statement)
{
    char a[64], b[64];
    create_eval("batch_b", 1, 1, b); /* older: claimed first, though its id sorts second */
    create_eval("batch_a", 1, 1, a);
    struct evd_store_job job;
    int attempt = 0;
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    ck_assert_str_eq(job.evaluation_id, b);
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    ck_assert_str_eq(job.evaluation_id, a);

    json_t *run = json_pack("{s:s, s:b, s:s, s:[], s:I, s:I}", "status", "completed", "passed",
                            0, "output", "KO", "failures", "started_at", (json_int_t)2000,
                            "completed_at", (json_int_t)3000);
    char *rb = evd_store_finish_record(b, 1, 1, run, NULL);
    char *stale = evd_store_finish_record(a, 1, 2, run, NULL);
    char *ra = evd_store_finish_record(a, 1, 1, run, NULL);
    json_decref(run);
    char array[4096];
    snprintf(array, sizeof(array), "[%s,%s,%s]", rb, stale, ra);
    free(rb);
    free(stale);
    free(ra);
    int results[3];
    int64_t left[3];
    struct evd_err err = {0};
    ck_assert_msg(finish_batch(array, 3, results, left, NULL, &err) == EVD_OK,
                  "%s", err.msg);
    ck_assert_int_eq(results[0], 1); /* B's second run enqueued */
    ck_assert_int_eq(results[1], EVD_RUN_NOT_WRITTEN);
    ck_assert_int_eq(results[2], 1);
    ck_assert_int_eq(left[0], 0);
    ck_assert_int_eq(q_int("SELECT sum(terminal_runs * 10 + failed_runs) FROM evaluations"
                           " WHERE id IN ('%s', '%s')",
                           a, b),
                     22);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE run_position = 2 AND evaluation_id"
                           " IN ('%s', '%s')",
                           a, b),
                     2);
}
END_TEST

/* The record of a finished run of evaluation `id` (passed), as the writer sends it. */
static char *passed_record(const char *id, int position, int attempt)
{
    json_t *run = json_pack("{s:s, s:b, s:s, s:[], s:I, s:I}", "status", "completed", "passed",
                            1, "output", "OK", "failures", "started_at", (json_int_t)2000,
                            "completed_at", (json_int_t)3000);
    char *r = evd_store_finish_record(id, position, attempt, run, NULL);
    json_decref(run);
    return r;
}

/* An evaluation's step and run counters as one number: step, terminal, passed, failed. */
static long long counters(const char *id)
{
    return q_int("SELECT step * 1000 + terminal_runs * 100 + passed_runs * 10 + failed_runs"
                 " FROM evaluations WHERE id = '%s'",
                 id);
}

START_TEST(batch_schedules_an_evaluation_once_after_its_runs)
{
    char id[64], pair[64];
    create_eval("once", 2, 2, id); /* runs 1 and 3 start together, 2 and 4 after them */
    create_eval("pair", 1, 1, pair);
    struct evd_store_job j1, j3, p1, j2, j4;
    int attempt = 0;
    ck_assert_int_eq(claim(&j1, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(claim(&j3, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(claim(&p1, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(j3.run_position, 3);
    ck_assert_str_eq(p1.evaluation_id, pair);
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT 1 FROM jobs WHERE id = %lld FOR UPDATE",
             (long long)j3.id);
    other_sql("BEGIN");
    other_sql(sql); /* run 3's job is held: it stays behind */

    char *r3 = passed_record(id, 3, 1), *r1 = passed_record(id, 1, 1);
    char *q1 = passed_record(pair, 1, 1);
    char array[8192];
    snprintf(array, sizeof(array), "[%s,%s,%s]", r3, q1, r1);
    free(r3);
    free(r1);
    free(q1);
    int results[3];
    int64_t left[3];
    struct evd_err err = {0};
    ck_assert_msg(finish_batch(array, 3, results, left, NULL, &err) == EVD_OK,
                  "%s", err.msg);
    other_sql("COMMIT");
    /* The evaluation is scheduled once, after both of its runs, and answered by its last
     * element: runs 2 and 4 enqueued. */
    ck_assert_int_eq(results[0], 0);
    ck_assert_int_eq(results[2], 2);
    ck_assert_int_eq(results[1], 1);
    ck_assert_int_eq(left[0], j3.id);
    ck_assert_int_eq(left[1] + left[2], 0);
    char positions[32];
    job_positions(id, positions, sizeof(positions));
    ck_assert_str_eq(positions, "2,3,4");
    ck_assert_int_eq(counters(id), 2220);

    /* Its last two runs in one batch: the last element asks for finalization. */
    ck_assert_int_eq(claim(&j2, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(claim(&j4, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(j2.run_position + j4.run_position, 6);
    char *r4 = passed_record(id, 4, 1), *r2 = passed_record(id, 2, 1);
    snprintf(array, sizeof(array), "[%s,%s]", r4, r2);
    free(r4);
    free(r2);
    ck_assert_msg(finish_batch(array, 2, results, left, NULL, &err) == EVD_OK,
                  "%s", err.msg);
    ck_assert_int_eq(results[0], 0);
    ck_assert_int_eq(results[1], EVD_RUN_ALL_TERMINAL);
    ck_assert_int_eq(counters(id), 4440);
    ck_assert_int_eq(q_int("SELECT count(*) FROM runs WHERE evaluation_id = '%s' AND"
                           " status = 'completed' AND passed AND output = '\"OK\"'",
                           id),
                     4);
}
END_TEST

START_TEST(batch_claims_for_its_workers_after_its_writes)
{
    char a[64], b[64], free_one[64], gone[64];
    create_eval("claims_b", 1, 1, b);
    create_eval("claims_a", 1, 1, a);
    struct evd_store_job job;
    int attempt = 0;
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    /* Due before the runs the batch enqueues: the oldest job comes first, as for a worker
     * claiming on its own; a job whose evaluation is over is deleted on the way. */
    create_eval("claims_gone", 1, 1, gone);
    create_eval("claims_free", 1, 1, free_one);
    char sql[200];
    snprintf(sql, sizeof(sql), "UPDATE evaluations SET status = 'cancelled' WHERE id = '%s'",
             gone);
    other_sql(sql);

    char *ra = passed_record(a, 1, 1), *rb = passed_record(b, 1, 1);
    char array[4096];
    snprintf(array, sizeof(array), "[%s,%s]", rb, ra);
    free(ra);
    free(rb);
    int results[2];
    int64_t left[2];
    struct evd_store_claimed claimed[4];
    struct evd_store_claims claims = {.n = 4, .lease_ms = 30000, .max_attempts = 3,
                                      .out = claimed};
    struct evd_err err = {0};
    ck_assert_msg(finish_batch(array, 2, results, left, &claims, &err) == EVD_OK,
                  "%s", err.msg);
    ck_assert_int_eq(results[0], 1);
    ck_assert_int_eq(results[1], 1);
    /* Three due (fewer than the four asked for: the queue is empty now), in claim order:
     * the free evaluation's first run, then the second runs the batch enqueued, in the
     * order it wrote them (evaluation id order). */
    ck_assert_uint_eq(claims.got, 3);
    const char *want[] = {free_one, a, b};
    const int want_pos[] = {1, 2, 2};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(claimed[i].outcome, EVD_CLAIM_RUN);
        ck_assert_str_eq(claimed[i].job.kind, "run");
        ck_assert_str_eq(claimed[i].job.evaluation_id, want[i]);
        ck_assert_int_eq(claimed[i].job.run_position, want_pos[i]);
        ck_assert_int_eq(claimed[i].attempt, 1);
        ck_assert_int_eq(claimed[i].job.attempts, 1);
        ck_assert_int_gt(claimed[i].job.claimed_mono, 0);
        ck_assert_ptr_nonnull(claimed[i].job.request);
        ck_assert_ptr_nonnull(strstr(claimed[i].job.request, "\"dimension\""));
        evd_store_job_clear(&claimed[i].job);
        ck_assert_int_eq(q_int("SELECT count(*) FROM runs r JOIN jobs j ON j.evaluation_id ="
                               " r.evaluation_id AND j.run_position = r.position WHERE"
                               " r.evaluation_id = '%s' AND r.position = %d AND r.status ="
                               " 'running' AND r.attempt = 1 AND j.lease_owner = 'test-owner'"
                               " AND j.id = %lld",
                               want[i], want_pos[i], (long long)claimed[i].job.id),
                         1);
    }
    ck_assert_int_eq(q_int("SELECT (status = 'running')::int FROM evaluations WHERE id = '%s'",
                           free_one),
                     1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE evaluation_id = '%s'", gone), 0);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE lease_owner IS NULL"), 0);
}
END_TEST

/*
 * Runs ahead (migrations/0027): a batch that writes run 1 of an evaluation with
 * concurrency 1 starts the runs after it for its worker, only the unbroken sequence of
 * pending runs whose jobs are free or missing (run 5, someone else's, ends it), nothing of
 * an evaluation with concurrency 2, and no job claimed for a worker that got runs ahead.
 * When their leases run out, the first open run is claimed again and the runs ahead behind
 * it go back to pending, their jobs deleted, their attempts kept.
 */
START_TEST(batch_starts_runs_ahead_in_an_unbroken_sequence)
{
    char id[64], conc[64];
    create_eval("ahead", 6, 1, id);
    struct evd_store_job job;
    int attempt = 0;
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(job.run_position, 1);
    create_eval("ahead_conc", 3, 2, conc);
    char sql[300];
    snprintf(sql, sizeof(sql),
             "INSERT INTO jobs (kind, evaluation_id, run_position, lease_owner, lease_until)"
             " VALUES ('run', '%s', 5, 'someone', now() + interval '1 minute')",
             id);
    other_sql(sql);

    char *r1 = passed_record(id, 1, 1);
    char array[2048];
    snprintf(array, sizeof(array), "[%s]", r1);
    free(r1);
    int results[1];
    int64_t left[1];
    struct evd_store_claimed claimed[2];
    struct evd_store_claims claims = {.n = 2, .lease_ms = 30000, .max_attempts = 3,
                                      .out = claimed};
    const struct evd_store_ahead_item items[] = {
        {.evaluation_id = id, .after = 1, .n = 8, .need = true},
        {.evaluation_id = conc, .after = 0, .n = 4, .need = false},
    };
    struct evd_store_ahead_run started[16];
    struct evd_store_ahead ahead = {.items = items, .nitems = 2, .out = started, .cap = 16};
    struct evd_err err = {0};
    ck_assert_msg(evd_store_runs_finish_ahead(c, array, 3000, "test-owner", 1, results, left,
                                              &claims, &ahead, &err) == EVD_OK,
                  "%s", err.msg);
    ck_assert_int_eq(results[0], 1); /* run 2 enqueued by the write ... */
    ck_assert_int_eq(ahead.taken, 1); /* ... and taken over by the runs ahead */
    ck_assert_uint_eq(ahead.got, 3);
    for (int k = 0; k < 3; k++) {
        ck_assert_uint_eq(started[k].item, 0);
        ck_assert_int_eq(started[k].position, k + 2);
        ck_assert_int_eq(started[k].attempt, 1);
        ck_assert_int_eq(q_int("SELECT count(*) FROM runs r JOIN jobs j ON j.evaluation_id ="
                               " r.evaluation_id AND j.run_position = r.position WHERE"
                               " r.evaluation_id = '%s' AND r.position = %d AND r.status ="
                               " 'running' AND r.attempt = 1 AND r.started_at = 0 AND j.ahead"
                               " AND j.lease_owner ="
                               " 'test-owner' AND j.id = %lld",
                               id, k + 2, (long long)started[k].job_id),
                         1);
    }
    ck_assert_uint_eq(claims.got, 0);
    ck_assert_int_eq(q_int("SELECT count(*) FROM runs WHERE evaluation_id = '%s' AND"
                           " status = 'pending' AND position >= 5",
                           id),
                     8);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE evaluation_id = '%s' AND ahead", conc),
                     0);

    /* The process is gone: every lease ran out. Run 2 is the first open one and runs again;
     * 3 and 4 wait for it. */
    snprintf(sql, sizeof(sql),
             "UPDATE jobs SET lease_until = now() - interval '1 second' WHERE evaluation_id = '%s'"
             " AND lease_owner = 'test-owner'",
             id);
    other_sql(sql);
    int runs = 0;
    for (int i = 0; i < 6; i++) {
        enum evd_claim_outcome outcome;
        ck_assert_msg(evd_store_job_claim_start(c, "test-owner", 30000, 4000, 3, &job, &outcome,
                                                &attempt, &err) == EVD_OK,
                      "%s", err.msg);
        if (outcome == EVD_CLAIM_RUN && strcmp(job.evaluation_id, id) == 0) {
            ck_assert_int_eq(job.run_position, 2);
            ck_assert_int_eq(attempt, 2);
            runs++;
        }
        evd_store_job_clear(&job);
    }
    ck_assert_int_eq(runs, 1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM runs WHERE evaluation_id = '%s' AND"
                           " position IN (3, 4) AND status = 'pending' AND attempt = 1",
                           id),
                     2);
    job_positions(id, sql, sizeof(sql));
    ck_assert_str_eq(sql, "2,5");
}
END_TEST

START_TEST(batch_claims_around_what_others_hold)
{
    char a[64], b[64], held[64];
    create_eval("around_a", 1, 1, a);
    create_eval("around_b", 1, 1, b);
    create_eval("around_held", 1, 1, held);
    char sql[256];
    other_sql("BEGIN");
    /* B's run is held (a cancel or a timeout): its job is claimed, not started. The other
     * job is held by a claimer: passed over. */
    snprintf(sql, sizeof(sql),
             "SELECT 1 FROM runs WHERE evaluation_id = '%s' AND position = 1 FOR UPDATE", b);
    other_sql(sql);
    snprintf(sql, sizeof(sql), "SELECT 1 FROM jobs WHERE evaluation_id = '%s' FOR UPDATE",
             held);
    other_sql(sql);
    int results[1];
    int64_t left[1];
    struct evd_store_claimed claimed[3];
    struct evd_store_claims claims = {.n = 3, .lease_ms = 30000, .max_attempts = 3,
                                      .out = claimed};
    struct evd_err err = {0};
    ck_assert_msg(finish_batch("[]", 0, results, left, &claims, &err) == EVD_OK,
                  "%s", err.msg);
    other_sql("COMMIT");
    ck_assert_uint_eq(claims.got, 2);
    ck_assert_int_eq(claimed[0].outcome, EVD_CLAIM_RUN);
    ck_assert_str_eq(claimed[0].job.evaluation_id, a);
    ck_assert_int_eq(claimed[0].attempt, 1);
    ck_assert_ptr_nonnull(claimed[0].job.request);
    ck_assert_int_eq(claimed[1].outcome, EVD_CLAIM_CLAIMED);
    ck_assert_str_eq(claimed[1].job.evaluation_id, b);
    ck_assert_int_eq(claimed[1].attempt, 0);
    ck_assert_ptr_null(claimed[1].job.request);
    ck_assert_int_eq(claimed[1].job.attempts, 1);
    for (int i = 0; i < 2; i++)
        evd_store_job_clear(&claimed[i].job);
    ck_assert_int_eq(q_int("SELECT (status = 'running')::int * 10 + (SELECT attempt FROM runs"
                           " WHERE evaluation_id = '%s' AND position = 1) FROM evaluations"
                           " WHERE id = '%s'",
                           a, a),
                     11);
    ck_assert_int_eq(q_int("SELECT (status = 'queued')::int * 10 + (SELECT attempt FROM runs"
                           " WHERE evaluation_id = '%s' AND position = 1) FROM evaluations"
                           " WHERE id = '%s'",
                           b, b),
                     10);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE evaluation_id = '%s' AND"
                           " lease_owner IS NULL",
                           held),
                     1);
}
END_TEST

START_TEST(batch_that_fails_claims_nothing)
{
    char a[64], b[64];
    create_eval("fails_a", 1, 1, a);
    struct evd_store_job job;
    int attempt = 0;
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    create_eval("fails_b", 1, 1, b);
    char *ra = passed_record(a, 1, 1);
    char array[4096];
    /* The second element cannot be read (its attempt is no number): the whole statement
     * fails, so neither A's write nor any claim stays. */
    snprintf(array, sizeof(array),
             "[%s,{\"evaluation_id\":\"%s\",\"position\":1,\"attempt\":\"one\"}]", ra, b);
    free(ra);
    int results[2];
    int64_t left[2];
    struct evd_store_claimed claimed[2];
    struct evd_store_claims claims = {.n = 2, .lease_ms = 30000, .max_attempts = 3,
                                      .out = claimed};
    struct evd_err err = {0};
    ck_assert_int_ne(finish_batch(array, 2, results, left, &claims, &err),
                     EVD_OK);
    ck_assert_uint_eq(claims.got, 0);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE evaluation_id = '%s' AND"
                           " lease_owner IS NULL",
                           b),
                     1);
    ck_assert_int_eq(q_int("SELECT (status = 'running')::int FROM runs WHERE evaluation_id ="
                           " '%s' AND position = 1",
                           a),
                     1);
}
END_TEST

START_TEST(batch_of_starts_claims_for_idle_workers)
{
    const char *ids[] = {"eval_many_1", "eval_many_2", "eval_many_3"};
    const int pairs[] = {2, 1, 1}, conc[] = {2, 1, 1};
    json_t *request = json_pack("{s:s}", "dimension", "prompt");
    json_t *plans[3];
    struct evd_store_new_eval items[3];
    for (int i = 0; i < 3; i++) {
        plans[i] = plan_of(ids[i], pairs[i]);
        items[i] = (struct evd_store_new_eval){ids[i], request, conc[i], plans[i], NULL};
    }
    int enqueued[3];
    struct evd_store_claimed claimed[2];
    struct evd_store_claims claims = {.n = 2, .lease_ms = 30000, .max_attempts = 3,
                                      .out = claimed};
    struct evd_err err = {0};
    ck_assert_msg(evd_store_evals_create(c, items, 3, 1000, "test-owner", enqueued, &claims,
                                         &err) == EVD_OK,
                  "%s", err.msg);
    ck_assert_int_eq(enqueued[0], 2); /* both pairs open: concurrency 2 */
    ck_assert_int_eq(enqueued[1], 1);
    ck_assert_int_eq(enqueued[2], 1);
    /* Two claimed, the oldest jobs first (one transaction: in the order enqueued). */
    ck_assert_uint_eq(claims.got, 2);
    ck_assert_str_eq(claimed[0].job.evaluation_id, ids[0]);
    ck_assert_int_eq(claimed[0].job.run_position, 1);
    ck_assert_str_eq(claimed[1].job.evaluation_id, ids[0]);
    ck_assert_int_eq(claimed[1].job.run_position, 3);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(claimed[i].outcome, EVD_CLAIM_RUN);
        ck_assert_int_eq(claimed[i].attempt, 1);
        ck_assert_ptr_nonnull(claimed[i].job.request);
        evd_store_job_clear(&claimed[i].job);
    }
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE lease_owner = 'test-owner'"), 2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE lease_owner IS NULL"), 2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM runs WHERE status = 'running'"), 2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM evaluations WHERE status = 'running'"), 1);
    /* The claim was made in the transaction that created them. */
    ck_assert_int_eq(q_int("SELECT count(DISTINCT xmin::text) FROM evaluations"), 1);

    /* A batch with an id that exists writes nothing and claims nothing. */
    const char *again[] = {"eval_many_4", "eval_many_1"};
    json_t *plan4 = plan_of(again[0], 1);
    struct evd_store_new_eval more[2] = {{again[0], request, 1, plan4, NULL},
                                         {again[1], request, 1, plans[1], NULL}};
    ck_assert_int_eq(evd_store_evals_create(c, more, 2, 1000, "test-owner", enqueued, &claims,
                                            &err),
                     EVD_ECONFLICT);
    ck_assert_uint_eq(claims.got, 0);
    ck_assert_int_eq(q_int("SELECT count(*) FROM evaluations"), 3);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE lease_owner IS NULL"), 2);
    json_decref(plan4);
    for (int i = 0; i < 3; i++)
        json_decref(plans[i]);
    json_decref(request);
}
END_TEST

START_TEST(finalizer_batch_reads_and_writes_as_one_by_one)
{
    char done_a[64], done_b[64], open_c[64];
    struct evd_store_job job;
    int attempt = 0;
    create_eval("final_a", 1, 1, done_a);
    create_eval("final_b", 1, 1, done_b);
    create_eval("final_c", 2, 1, open_c);
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN);
    ck_assert_int_eq(finish(done_a, 1, 1, NULL), 1);
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN); /* B's first */
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN); /* C's first */
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_RUN); /* A's second */
    ck_assert_str_eq(job.evaluation_id, done_a);
    ck_assert_int_eq(finish(done_a, 2, 1, NULL), EVD_RUN_ALL_TERMINAL);
    ck_assert_int_eq(finish(done_b, 1, 1, NULL), 1);
    /* B's second run ends cancelled: no output, no verdict, no turn. */
    char sql[800];
    snprintf(sql, sizeof(sql),
             "UPDATE runs SET status = 'cancelled', completed_at = 4000 WHERE evaluation_id ="
             " '%s' AND position = 2; DELETE FROM jobs WHERE evaluation_id = '%s'",
             done_b, done_b);
    other_sql(sql);
    /* C's first run done behind the evaluation's back: the take schedules its second. */
    snprintf(sql, sizeof(sql),
             "UPDATE runs SET status = 'completed', passed = true, completed_at = 4000 WHERE"
             " evaluation_id = '%s' AND position = 1; DELETE FROM jobs WHERE evaluation_id ="
             " '%s'",
             open_c, open_c);
    other_sql(sql);

    const char *ids[] = {open_c, done_b, "eval_unknown", done_a};
    struct evd_store_eval evs[4];
    size_t taken = 0;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_db_begin(c, &err), EVD_OK);
    ck_assert_msg(evd_store_finals_take(c, ids, 4, evs, &taken, &err) == EVD_OK, "%s", err.msg);
    ck_assert_uint_eq(taken, 2); /* A and B, in id order; C scheduled, the unknown one skipped */
    ck_assert_str_eq(evs[0].id, done_a);
    ck_assert_str_eq(evs[1].id, done_b);
    ck_assert_int_eq(evs[0].total_runs, 2);
    ck_assert_int_eq(evs[0].created_at, 1000);
    ck_assert_str_eq(json_string_value(json_object_get(evs[0].request, "dimension")), "prompt");
    /* Their runs, read together, are what each one's own read gives. */
    const char *taken_ids[] = {evs[0].id, evs[1].id};
    json_t *many[2];
    ck_assert_msg(evd_store_runs_many(c, taken_ids, 2, many, &err) == EVD_OK, "%s", err.msg);
    for (int i = 0; i < 2; i++) {
        json_t *one = evd_store_runs(c, taken_ids[i], false, &err);
        ck_assert_ptr_nonnull(one);
        ck_assert_uint_eq(json_array_size(one), 2);
        ck_assert_msg(json_equal(one, many[i]), "runs of %s differ", taken_ids[i]);
        json_decref(one);
        json_decref(many[i]);
    }
    ck_assert_ptr_null(json_object_get(json_array_get(many[1], 1), "passed"));

    /* Both terminal in one statement, each with its event and its notifications. */
    other_sql("LISTEN evald_completed; LISTEN evald_events");
    json_t *report = json_pack("{s:s}", "marker", "r");
    struct evd_store_final f[2] = {{done_a, "completed", report, 1, 1},
                                   {done_b, "cancelled", report, -1, 0}};
    ck_assert_msg(evd_store_evals_finish(c, f, 2, 5000, &err) == EVD_OK, "%s", err.msg);
    ck_assert_int_eq(evd_db_commit(c, &err), EVD_OK);
    json_decref(report);
    for (int i = 0; i < 2; i++)
        evd_store_eval_clear(&evs[i]);
    char jobs[64];
    job_positions(open_c, jobs, sizeof(jobs));
    ck_assert_str_eq(jobs, "2");
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM evaluations WHERE (id = '%s' AND status = 'completed' AND"
             " eligible AND terminal_runs = 2 AND passed_runs = 2) OR (id = '%s' AND status ="
             " 'cancelled' AND eligible IS NULL AND terminal_runs = 2 AND passed_runs = 1 AND"
             " failed_runs = 0) AND report->>'marker' = 'r' AND completed_at = 5000",
             done_a, done_b);
    ck_assert_int_eq(q_int("%s", sql), 2);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM completion_events WHERE (evaluation_id = '%s' AND"
             " payload = '{\"evaluation_id\":\"%s\",\"status\":\"completed\",\"timestamp\":"
             "5000,\"eligible\":true}') OR (evaluation_id = '%s' AND payload ="
             " '{\"evaluation_id\":\"%s\",\"status\":\"cancelled\",\"timestamp\":5000,"
             "\"eligible\":false}')",
             done_a, done_a, done_b, done_b);
    ck_assert_int_eq(q_int("%s", sql), 2);
    other_sql("SELECT 1"); /* reads the notifications that came meanwhile */
    int completed = 0, events = 0;
    for (PGnotify *nf; (nf = PQnotifies(other)) != NULL; PQfreemem(nf)) {
        bool ours = strcmp(nf->extra, done_a) == 0 || strcmp(nf->extra, done_b) == 0;
        completed += ours && strcmp(nf->relname, "evald_completed") == 0;
        events += ours && strcmp(nf->relname, "evald_events") == 0;
    }
    ck_assert_int_eq(completed, 2);
    ck_assert_int_eq(events, 2);
}
END_TEST

START_TEST(obsolete_and_exhausted_jobs)
{
    char done[64], tired[64];
    create_eval("done", 1, 1, done);
    char sql[200];
    snprintf(sql, sizeof(sql), "UPDATE evaluations SET status = 'cancelled' WHERE id = '%s'",
             done);
    other_sql(sql);
    struct evd_store_job job;
    int attempt = 0;
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_OBSOLETE);
    ck_assert_int_eq(q_int("SELECT count(*) FROM jobs WHERE evaluation_id = '%s'", done), 0);

    /* Three attempts already started: claimed for the worker to fail it (phase setup). */
    create_eval("tired", 1, 1, tired);
    snprintf(sql, sizeof(sql),
             "UPDATE runs SET attempt = 3, status = 'running' WHERE evaluation_id = '%s'"
             " AND position = 1",
             tired);
    other_sql(sql);
    ck_assert_int_eq(claim(&job, &attempt), EVD_CLAIM_CLAIMED);
    ck_assert_str_eq(job.evaluation_id, tired);
    ck_assert_int_eq(q_int("SELECT attempt FROM runs WHERE evaluation_id = '%s' AND position = 1",
                           tired),
                     3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run_functions");
    TCase *tc = tcase_create("run_functions");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, schedule_opens_pairs_in_order_up_to_concurrency);
    tcase_add_test(tc, stale_attempt_writes_nothing);
    tcase_add_test(tc, last_run_asks_for_finalization);
    tcase_add_test(tc, claim_waits_for_no_lock);
    tcase_add_test(tc, finish_leaves_a_locked_job_behind);
    tcase_add_test(tc, batch_finishes_several_runs_in_one_statement);
    tcase_add_test(tc, batch_schedules_an_evaluation_once_after_its_runs);
    tcase_add_test(tc, batch_claims_for_its_workers_after_its_writes);
    tcase_add_test(tc, batch_claims_around_what_others_hold);
    tcase_add_test(tc, batch_starts_runs_ahead_in_an_unbroken_sequence);
    tcase_add_test(tc, batch_that_fails_claims_nothing);
    tcase_add_test(tc, batch_of_starts_claims_for_idle_workers);
    tcase_add_test(tc, finalizer_batch_reads_and_writes_as_one_by_one);
    tcase_add_test(tc, obsolete_and_exhausted_jobs);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
