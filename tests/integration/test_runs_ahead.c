/*
 * Runs started ahead (migrations/0027, engine/writer.c): a worker whose runs are quick
 * executes an evaluation's next runs while the writer writes the earlier ones. Real
 * PostgreSQL, real evald processes and evald-stub over loopback. What must hold whatever
 * happens: the runs of an evaluation with concurrency 1 reach the provider one at a time
 * and in plan order, each once unless a crash lost it; a kill -9, a stop or a cancel in
 * the middle of a window loses nothing, doubles nothing and breaks no order. The fixture
 * is tests/support/engine_fixtures.c.
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

static long sql_long(const char *sql)
{
    char *v = evd_t_sql(et_db_url, sql);
    long n = strtol(v, NULL, 10);
    free(v);
    return n;
}

/* The positions (1-based, plan order) of the evaluation's runs, by session id. */
struct plan {
    char sessions[1024][80];
    int n;
};

static void plan_of(const char *base, const char *id, struct plan *pl)
{
    json_t *res = et_result_of(base, id);
    json_t *runs = json_object_get(json_object_get(res, "report"), "runs");
    pl->n = (int)json_array_size(runs);
    ck_assert_int_le(pl->n, 1024);
    for (int k = 0; k < pl->n; k++) {
        json_t *r = json_array_get(runs, (size_t)k);
        ck_assert_str_eq(json_string_value(json_object_get(r, "status")), "completed");
        snprintf(pl->sessions[k], sizeof(pl->sessions[k]), "%s",
                 json_string_value(json_object_get(r, "session_id")));
    }
    json_decref(res);
}

static int position_of(const struct plan *pl, const char *session)
{
    for (int k = 0; k < pl->n; k++)
        if (strcmp(pl->sessions[k], session) == 0)
            return k + 1;
    ck_abort_msg("the stub saw session %s, which is no run of the evaluation", session);
    return 0;
}

/* The positions of the stub's logged requests, oldest first, into pos (room for 500);
 * their number. */
static int logged_positions(const struct plan *pl, int *pos)
{
    json_t *log = evd_t_stub_requests(&et_stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    int n = 0;
    for (size_t i = 0; i < json_array_size(reqs) && n < 500; i++) {
        json_t *h = json_object_get(json_array_get(reqs, i), "headers");
        const char *s = json_string_value(json_object_get(h, "x-evald-session"));
        ck_assert_ptr_nonnull(s);
        pos[n++] = position_of(pl, s);
    }
    json_decref(log);
    return n;
}

static void stub_latency(int ms)
{
    char script[128];
    snprintf(script, sizeof(script),
             "{\"rules\":[],\"default\":{\"latency_ms\":%d,\"reply\":{\"text\":\"OK\"}}}", ms);
    ck_assert_int_eq(evd_t_stub_script(&et_stub, script), 200);
}

/* An evaluation of `runs` run pairs with concurrency 1 at 0 ms: the window is used, and
 * still the provider sees one call at a time, in plan order, each run once. */
START_TEST(quick_runs_go_ahead_one_call_at_a_time_in_plan_order)
{
    stub_latency(0);
    struct evd_t_proc p;
    et_start_evald(&p, "EVALD_WORKERS=4", "EVALD_MAX_RUNS=500");
    char *body = et_small_request("ahead", 200, 1);
    char *id = et_start_eval(p.base, body);
    free(body);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    long ahead = evd_t_metric(p.base, "evald_runs_started_ahead_total");
    ck_assert_msg(ahead >= 200, "only %ld of 400 runs were started ahead", ahead);
    /* The writer's batches held several runs each (how many depends on the machine). */
    long batches = evd_t_metric(p.base, "evald_run_batches_total");
    fprintf(stderr, "test_runs_ahead: 400 runs in %ld batches\n", batches);
    ck_assert_int_gt(batches, 0);
    ck_assert_int_lt(batches, 400);

    struct plan pl;
    plan_of(p.base, id, &pl);
    ck_assert_int_eq(pl.n, 400);
    json_t *stats = evd_t_stub_stats(&et_stub);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "requests")), 400);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "max_in_flight")), 1);
    json_decref(stats);
    int pos[500];
    int n = logged_positions(&pl, pos);
    ck_assert_int_eq(n, 400);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(pos[i], i + 1);
    ck_assert_int_eq(sql_long("SELECT count(*) FROM runs WHERE attempt <> 1"), 0);
    ck_assert_int_eq(sql_long("SELECT count(*) FROM jobs"), 0);
    free(id);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* Runs of an evaluation with concurrency above 1, and slow runs, are never started
 * ahead: the window is for quick chains of one evaluation. */
START_TEST(slow_runs_and_concurrent_pairs_run_nothing_ahead)
{
    stub_latency(0);
    struct evd_t_proc p;
    et_start_evald(&p, "EVALD_WORKERS=4", NULL);
    char *body = et_small_request("pairs", 20, 4);
    char *id = et_start_eval(p.base, body);
    free(body);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    free(id);
    stub_latency(40);
    body = et_small_request("slow", 5, 1);
    id = et_start_eval(p.base, body);
    free(body);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    free(id);
    ck_assert_int_eq(evd_t_metric(p.base, "evald_runs_started_ahead_total"), 0);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* Waits until `n` runs are completed. */
static void wait_completed(long n)
{
    int64_t end = evd_mono_ms() + 30000;
    while (sql_long("SELECT count(*) FROM runs WHERE status = 'completed'") < n) {
        ck_assert_msg(evd_mono_ms() < end, "fewer than %ld runs completed in 30 s", n);
        usleep(20000);
    }
}

/* evald with 4 workers, and an evaluation of 250 run pairs at 2 ms (its prompts tagged
 * `tag`) with 60 of its runs completed: its chain is running, runs ahead. Its id
 * (malloc'd). */
static char *start_chain(struct evd_t_proc *p, const char *tag)
{
    stub_latency(2);
    et_start_evald(p, "EVALD_WORKERS=4", "EVALD_MAX_RUNS=500");
    char *body = et_small_request(tag, 250, 1);
    char *id = et_start_eval(p->base, body);
    free(body);
    wait_completed(60);
    return id;
}

/*
 * kill -9 in the middle of a window (several runs of the evaluation started, their jobs
 * ahead): the next process starts again from the first open run, in plan order. Every run
 * completes once in the report; the provider never had two calls at once; from the
 * restart on, the calls go on in plan order; the runs ahead that were never called are
 * put back, their attempt counted (it might have been called).
 */
START_TEST(kill_9_mid_window_resumes_in_plan_order)
{
    struct evd_t_proc p;
    char *id = start_chain(&p, "crash");
    ck_assert_int_eq(evd_t_stop(&p, SIGKILL, 5000), 128 + SIGKILL);
    long running = sql_long("SELECT count(*) FROM runs WHERE status = 'running'");
    long ahead = sql_long("SELECT count(*) FROM jobs WHERE ahead");
    ck_assert_msg(running >= 2 && ahead >= 1, "at the kill: %ld runs running, %ld jobs ahead",
                  running, ahead);
    long before = sql_long("SELECT count(*) FROM runs WHERE status = 'completed'");

    et_start_evald(&p, "EVALD_WORKERS=4", "EVALD_MAX_RUNS=500");
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    struct plan pl;
    plan_of(p.base, id, &pl);
    ck_assert_int_eq(pl.n, 500);
    json_t *stats = evd_t_stub_stats(&et_stub);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "max_in_flight")), 1);
    long requests = json_integer_value(json_object_get(stats, "requests"));
    json_decref(stats);
    /* Lost with the process, and called again: the runs whose outcomes were with the
     * writer (17 at most: a window of 16, engine/internal.h, and the run that asked for
     * it), and the one at the provider. */
    ck_assert_msg(requests >= 500 && requests <= 518, "%ld calls for 500 runs", requests);
    /* The last 500 calls: in plan order but for the one step back at the restart. */
    int pos[500];
    int n = logged_positions(&pl, pos);
    ck_assert_int_eq(n, 500);
    int back = 0;
    for (int i = 1; i < n; i++) {
        if (pos[i] <= pos[i - 1])
            back++;
        else
            ck_assert_int_eq(pos[i], pos[i - 1] + 1);
    }
    ck_assert_int_le(back, 1);
    ck_assert_int_eq(pos[n - 1], 500);
    ck_assert_int_ge(before, 60);
    ck_assert_int_eq(sql_long("SELECT count(*) FROM runs WHERE attempt > 2"), 0);
    ck_assert_int_eq(sql_long("SELECT count(*) FROM jobs"), 0);
    char *events = evd_t_sql(et_db_url, "SELECT count(*) FROM completion_events");
    ck_assert_str_eq(events, "1");
    free(events);
    free(id);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* SIGTERM in the middle of a window: the run at the provider and every run ahead are
 * given back, their attempts not counted; the next process finishes in plan order. */
START_TEST(a_stop_gives_the_window_back)
{
    struct evd_t_proc p;
    char *id = start_chain(&p, "stop");
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
    ck_assert_int_eq(sql_long("SELECT count(*) FROM runs WHERE status = 'running'"), 0);
    ck_assert_int_eq(sql_long("SELECT count(*) FROM jobs WHERE lease_owner IS NOT NULL"), 0);
    long done = sql_long("SELECT count(*) FROM runs WHERE status = 'completed'");
    ck_assert_int_lt(done, 500);

    et_start_evald(&p, "EVALD_WORKERS=4", "EVALD_MAX_RUNS=500");
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    ck_assert_int_eq(sql_long("SELECT max(attempt) FROM runs"), 1);
    /* The call at the provider when the stop came was cut short and made again (the
     * stub counts it twice); nothing else was called twice, and the order held. */
    json_t *stats = evd_t_stub_stats(&et_stub);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "max_in_flight")), 1);
    long requests = json_integer_value(json_object_get(stats, "requests"));
    ck_assert_msg(requests == 500 || requests == 501, "%ld calls for 500 runs", requests);
    json_decref(stats);
    struct plan pl;
    plan_of(p.base, id, &pl);
    int pos[500];
    int n = logged_positions(&pl, pos);
    ck_assert_int_eq(pos[0], (int)requests - 499);
    int again = 0;
    for (int i = 1; i < n; i++) {
        if (pos[i] == pos[i - 1])
            again++;
        else
            ck_assert_int_eq(pos[i], pos[i - 1] + 1);
    }
    ck_assert_int_eq(again, (int)requests - 500);
    free(id);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* A cancel in the middle of a window: no run ahead reaches the provider afterwards. */
START_TEST(a_cancel_ends_the_window)
{
    struct evd_t_proc p;
    char *id = start_chain(&p, "cancel");
    char *req = NULL;
    ck_assert_int_ge(asprintf(&req, "{\"evaluation_id\":\"%s\"}", id), 0);
    long status = 0;
    json_t *r = evd_t_call(p.base, "eval::cancel", req, &status);
    ck_assert_int_eq(status, 200);
    json_decref(r);
    free(req);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 10000), "cancelled");
    usleep(100000);
    json_t *stats = evd_t_stub_stats(&et_stub);
    long at_cancel = json_integer_value(json_object_get(stats, "requests"));
    json_decref(stats);
    usleep(500000);
    stats = evd_t_stub_stats(&et_stub);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "requests")), at_cancel);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "max_in_flight")), 1);
    json_decref(stats);
    ck_assert_int_lt(at_cancel, 500);
    ck_assert_int_eq(sql_long("SELECT count(*) FROM runs WHERE status IN ('pending', 'running')"),
                     0);
    /* Nothing is left leased: the window's slots ended with the cancel. */
    ck_assert_int_eq(sql_long("SELECT count(*) FROM jobs"), 0);
    free(id);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runs_ahead");
    TCase *tc = tcase_create("runs_ahead");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, et_setup, et_teardown);
    tcase_add_test(tc, quick_runs_go_ahead_one_call_at_a_time_in_plan_order);
    tcase_add_test(tc, slow_runs_and_concurrent_pairs_run_nothing_ahead);
    tcase_add_test(tc, kill_9_mid_window_resumes_in_plan_order);
    tcase_add_test(tc, a_stop_gives_the_window_back);
    tcase_add_test(tc, a_cancel_ends_the_window);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
