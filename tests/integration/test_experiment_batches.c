/*
 * Case jobs' steps written together (engine/cell_batch.c, evald_cell_steps of
 * migrations/0028), with the real evald, the stub and PostgreSQL: many cases at once end in
 * fewer batches than steps and still count every run, token and cell once, a case's cells
 * one at a time; and the statement itself writes only what its owner still holds with the
 * attempt it names (a job taken over, a run tried again), folding the spend and the mark of
 * the analysis for the steps it wrote.
 */
#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/engine_fixtures.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

/* The first value of a query, which must not fail: as text (malloc'd), as a number. */
static char *vsql_text(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static char *vsql_text(const char *fmt, va_list ap)
{
    char sql[4096];
    vsnprintf(sql, sizeof(sql), fmt, ap);
    char *v = evd_t_sql(et_db_url, sql);
    ck_assert_msg(v != NULL, "SQL failed: %s", sql);
    return v;
}

static char *sql_text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *sql_text(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *v = vsql_text(fmt, ap);
    va_end(ap);
    return v;
}

static long sql_long(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static long sql_long(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *v = vsql_text(fmt, ap);
    va_end(ap);
    long n = strtol(v, NULL, 10);
    free(v);
    return n;
}

/* Starts an experiment of `cases` cases over two arms; returns its id (static buffer). */
static const char *start_experiment(const char *base, int cases, int repeats, int concurrency)
{
    json_t *cs = json_array();
    for (int i = 1; i <= cases; i++)
        json_array_append_new(cs, json_pack("{s:{s:i}, s:s}", "vars", "q", i, "expected", "OK"));
    json_t *body =
        json_pack("{s:s, s:{s:s, s:s}, s:{s:s}, s:[{s:s}], s:o, s:{s:s, s:{s:s}}, s:i, s:i}",
                  "dimension", "prompt", "model", "model", "stub-model", "provider", "openai",
                  "control", "prompt", "Control: {{q}}", "treatments", "prompt", "Treatment: {{q}}",
                  "cases", cs, "evaluator", "function_id", "eval::assert::exact", "arguments",
                  "expected", "{{expected}}", "repeats", repeats, "concurrency", concurrency);
    return evd_t_start_experiment(base, body);
}

/* 48 cases x 2 arms x 2 repeats, 16 at once, at 0 ms: the steps go in batches of several,
 * and every run, token and cell is counted once. */
START_TEST(steps_of_many_cases_are_written_together)
{
    enum { CASES = 48, REPEATS = 2, RUNS = CASES * 2 * REPEATS };
    ck_assert_int_eq(evd_t_stub_script(&et_stub, "{\"default\":{\"latency_ms\":0,\"reply\":"
                                                 "{\"text\":\"OK\"},\"usage\":{\"input_tokens\":"
                                                 "10,\"output_tokens\":2}}}"),
                     200);
    struct evd_t_proc p;
    et_start_evald(&p, "EVALD_WORKERS=16", NULL);
    char xid[64];
    snprintf(xid, sizeof(xid), "%s", start_experiment(p.base, CASES, REPEATS, 16));
    json_t *doc = evd_t_wait_experiment(p.base, xid, 60000);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "status")), "completed");
    json_t *progress = json_object_get(doc, "progress");
    ck_assert_int_eq(json_integer_value(json_object_get(progress, "terminal_runs")), RUNS);
    ck_assert_int_eq(json_integer_value(json_object_get(progress, "passed_runs")), RUNS);
    json_t *spend = json_object_get(doc, "spend");
    ck_assert_int_eq(json_integer_value(json_object_get(spend, "calls")), RUNS);
    ck_assert_int_eq(json_integer_value(json_object_get(spend, "input_tokens")), RUNS * 10);
    ck_assert_int_eq(json_integer_value(json_object_get(spend, "output_tokens")), RUNS * 2);
    json_t *arms = json_object_get(doc, "arms");
    ck_assert_int_eq(json_array_size(arms), 2);
    for (size_t k = 0; k < 2; k++) {
        json_t *pooled = json_object_get(json_array_get(arms, k), "pooled");
        ck_assert_int_eq(json_integer_value(json_object_get(pooled, "evaluated")), CASES * REPEATS);
    }
    json_decref(doc);
    /* Each case row holds both arms' cells of both repeats; each run went once. */
    ck_assert_int_eq(sql_long("SELECT count(*) FROM experiment_cases WHERE experiment_id = '%s'"
                              " AND cells->0->>'evaluated' = '%d'"
                              " AND cells->1->>'evaluated' = cells->0->>'evaluated'",
                              xid, REPEATS),
                     CASES);
    ck_assert_int_eq(sql_long("SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                              " AND attempt = 1 AND status = 'completed'",
                              xid),
                     RUNS);
    /* Fewer batches than steps (a run's each, and a job's first): several went together. */
    long batches = evd_t_metric(p.base, "evald_experiment_step_batches_total");
    fprintf(stderr, "test_experiment_batches: %d runs in %ld batches of steps\n", RUNS, batches);
    ck_assert_int_gt(batches, 0);
    ck_assert_int_lt(batches, RUNS);
    json_t *stats = evd_t_stub_stats(&et_stub);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "max_in_flight_per_session")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "requests")), RUNS);
    json_decref(stats);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* A step of evald_cell_steps as the engine sends it; the run made one call, unpriced. */
static void step_json(char *out, size_t n, long job, const char *xid, long ci, int attempt)
{
    snprintf(out, n,
             "{\"job\":%ld,\"exp\":\"%s\",\"case\":%ld,\"position\":1,\"attempt\":%d,"
             "\"run\":{\"status\":\"completed\",\"passed\":true,\"output\":\"OK\","
             "\"evaluation\":{\"score\":1},\"benchmark\":{},\"metrics\":{},\"failures\":[],"
             "\"spend\":{\"calls\":1,\"input_tokens\":10,\"output_tokens\":2,"
             "\"cost_usd\":null}},\"cells\":[{\"t\":%ld}],\"flaky\":false,\"disagree\":false}",
             job, xid, ci, attempt, job);
}

/* The statement on the rows of a killed evald: cells in flight, their jobs held by it. */
START_TEST(a_batch_writes_only_what_its_owner_still_holds)
{
    ck_assert_int_eq(evd_t_stub_script(&et_stub, "{\"default\":{\"latency_ms\":20000,"
                                                 "\"reply\":{\"text\":\"OK\"}}}"),
                     200);
    struct evd_t_proc p;
    et_start_evald(&p, "EVALD_WORKERS=4", NULL);
    char xid[64];
    snprintf(xid, sizeof(xid), "%s", start_experiment(p.base, 4, 1, 4));
    long running = 0;
    for (int waited = 0; waited < 20000 && running < 3; waited += 50) {
        usleep(50 * 1000);
        running = sql_long("SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                           " AND status = 'running' AND position = 1",
                           xid);
    }
    ck_assert_int_ge(running, 3);
    ck_assert_int_eq(evd_t_stop(&p, SIGKILL, 5000), 128 + SIGKILL);
    /* Three jobs with a running first cell: a and b taken over by this test, c left to the
     * dead owner. */
    long job[3], ci[3];
    for (int k = 0; k < 3; k++) {
        job[k] = sql_long("SELECT j.id FROM jobs j JOIN experiment_runs r ON r.experiment_id ="
                          " j.ref AND r.case_index = j.run_position AND r.position = 1"
                          " WHERE j.ref = '%s' AND r.status = 'running' ORDER BY j.id"
                          " OFFSET %d LIMIT 1",
                          xid, k);
        ci[k] =
            sql_long("SELECT run_position FROM jobs WHERE ref = '%s' AND id = %ld", xid, job[k]);
    }
    char sql[4096], a[600], b[600], c[600];
    snprintf(sql, sizeof(sql),
             "UPDATE jobs SET lease_owner = 't-owner', lease_until = now() + interval '1 min'"
             " WHERE id IN (%ld, %ld)",
             job[0], job[1]);
    free(evd_t_sql(et_db_url, sql));
    free(sql_text("UPDATE experiments SET dirty = false WHERE id = '%s'", xid));
    step_json(a, sizeof(a), job[0], xid, ci[0], 1); /* the attempt that runs: written */
    step_json(b, sizeof(b), job[1], xid, ci[1], 2); /* an attempt that does not run */
    step_json(c, sizeof(c), job[2], xid, ci[2], 1); /* a job someone else holds */
    snprintf(sql, sizeof(sql),
             "SELECT string_agg(o_job || ':' || o_outcome || ':' || coalesce(o_position::text,"
             " '-') || ':' || coalesce(o_attempt::text, '-'), ',' ORDER BY o_job)"
             " FROM evald_cell_steps('t-owner', 60000,"
             " (extract(epoch FROM now()) * 1000)::bigint, 8, '[%s,%s,%s]')",
             a, b, c);
    char *got = evd_t_sql(et_db_url, sql);
    char want[256];
    snprintf(want, sizeof(want), "%ld:started:2:1,%ld:lost:-:-,%ld:lost:-:-", job[0], job[1],
             job[2]);
    ck_assert_str_eq(got, want);
    free(got);
    /* a's run written and its next cell started; b's and c's untouched. */
    ck_assert_int_eq(sql_long("SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                              " AND status = 'completed' AND passed AND score = 1"
                              " AND case_index = %ld AND position = 1",
                              xid, ci[0]),
                     1);
    ck_assert_int_eq(sql_long("SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                              " AND status = 'running' AND attempt = 1 AND case_index = %ld"
                              " AND position = 2",
                              xid, ci[0]),
                     1);
    ck_assert_int_eq(sql_long("SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                              " AND status = 'completed' AND case_index <> %ld",
                              xid, ci[0]),
                     0);
    /* The spend of the one run written (its cost unpriced), its case's cells, the mark. */
    char *spend = sql_text("SELECT sum(calls) || ':' || sum(input_tokens) || ':' ||"
                           " sum(output_tokens) || ':' || sum(unpriced) || ':' || sum(runs)"
                           " FROM experiment_spend WHERE experiment_id = '%s'",
                           xid);
    ck_assert_str_eq(spend, "1:10:2:1:1");
    free(spend);
    char want_cells[64];
    snprintf(want_cells, sizeof(want_cells), "[{\"t\": %ld}]", job[0]);
    char *cells = sql_text("SELECT string_agg(cells::text, ',') FROM experiment_cases"
                           " WHERE experiment_id = '%s' AND cells::text <> '[]'",
                           xid);
    ck_assert_str_eq(cells, want_cells);
    free(cells);
    ck_assert_int_eq(sql_long("SELECT count(*) FROM experiments WHERE id = '%s' AND dirty", xid),
                     1);
    /* The same step again finds its run written: lost, nothing counted twice. */
    snprintf(sql, sizeof(sql),
             "SELECT string_agg(o_outcome, ',') FROM evald_cell_steps('t-owner', 60000, 0, 8,"
             " '[%s]')",
             a);
    got = evd_t_sql(et_db_url, sql);
    ck_assert_str_eq(got, "lost");
    free(got);
    ck_assert_int_eq(sql_long("SELECT sum(calls) FROM experiment_spend WHERE experiment_id ="
                              " '%s'",
                              xid),
                     1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("experiment_batches");
    TCase *tc = tcase_create("experiment_batches");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, et_setup, et_teardown);
    tcase_add_test(tc, steps_of_many_cases_are_written_together);
    tcase_add_test(tc, a_batch_writes_only_what_its_owner_still_holds);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
