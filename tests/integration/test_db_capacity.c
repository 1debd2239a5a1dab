/*
 * Start-up against a PostgreSQL that cannot hold what the configuration would open: a
 * private cluster of this test's own with max_connections = 20, and the real evald. A
 * process configured for more connections than the server allows exits 2 with a message
 * that names the settings and the server's figures, instead of answering 503 on /readyz
 * forever; one that fits becomes ready; and a stock cluster (max_connections = 100) serves a
 * process configured for 1,000 calls in flight.
 */
#include <check.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char dir[64];
static char pgurl[256];

/* A private cluster; `options` are its server settings (EVALD_PG_OPTIONS of scripts/pg.sh). */
static void pg_start_with(const char *options)
{
    snprintf(dir, sizeof(dir), "/tmp/evald-pg-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    evd_t_pg_cleanup_at_exit(dir);
    unsigned port = evd_t_free_port();
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "EVALD_PG_OPTIONS='%s' %s/scripts/pg.sh start %s %u >/dev/null",
             options, evd_t_source_dir(), dir, port);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
    snprintf(pgurl, sizeof(pgurl), "postgresql://evald@127.0.0.1:%u/evald", port);
}

static void pg_start(void)
{
    pg_start_with("-c max_connections=20 -c superuser_reserved_connections=3");
}

static void pg_stop(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/scripts/pg.sh stop %s; rm -rf %s", evd_t_source_dir(), dir,
             dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* The "error" of the log line whose msg is `msg` (malloc'd), or NULL. */
static char *logged_error(const struct evd_t_proc *p, const char *msg)
{
    FILE *f = fopen(p->log_path, "r");
    if (f == NULL)
        return NULL;
    char line[4096];
    char *found = NULL;
    while (found == NULL && fgets(line, sizeof(line), f)) {
        json_t *j = json_loads(line, 0, NULL);
        const char *m = json_string_value(json_object_get(j, "msg"));
        const char *e = json_string_value(json_object_get(j, "error"));
        if (m != NULL && e != NULL && strcmp(m, msg) == 0)
            found = strdup(e);
        json_decref(j);
    }
    fclose(f);
    return found;
}

START_TEST(too_many_connections_exit_2_naming_the_settings)
{
    pg_start();
    char dburl[300];
    snprintf(dburl, sizeof(dburl), "EVALD_DATABASE_URL=%s", pgurl);
    char *env[] = {dburl, "EVALD_LISTEN=127.0.0.1:0", "EVALD_WORKERS=64",
                   "EVALD_WORKER_CONNECTIONS=40", NULL};
    char *argv[] = {(char *)evd_t_evald_bin(), NULL};
    struct evd_t_proc p;
    ck_assert_int_eq(evd_t_spawn(&p, argv, env, false, 0), 0);
    int status = evd_t_wait(&p, 60000);
    if (status != 2)
        evd_t_dump_log(&p);
    ck_assert_int_eq(status, 2);
    char *e = logged_error(&p, "invalid configuration");
    ck_assert_ptr_nonnull(e);
    /* 40 of the 64 workers' connections + 8 pool + 2 webhook threads + keeper, sweeper,
     * writer, finalizer, the finalizer's helper, analyst. */
    const char *want = "EVALD_WORKER_CONNECTIONS (40) + EVALD_DB_POOL_SIZE (8) + "
                       "EVALD_WEBHOOK_WORKERS (2) + 6 service connections = 56 exceed what "
                       "PostgreSQL allows this process (max_connections 20 - 3 reserved - ";
    ck_assert_msg(strncmp(e, want, strlen(want)) == 0, "message: %s", e);
    long in_use = -1, allowed = -1;
    ck_assert_int_eq(sscanf(e + strlen(want), "%ld in use = %ld)", &in_use, &allowed), 2);
    ck_assert_int_ge(in_use, 0);
    ck_assert_int_eq(allowed, 20 - 3 - in_use);
    free(e);
    pg_stop();
}
END_TEST

START_TEST(a_configuration_that_fits_becomes_ready)
{
    pg_start();
    /* 4 + 4 + 2 + 5 = 15 of the 17 that are not reserved. */
    char *env[] = {"EVALD_WORKERS=4", "EVALD_DB_POOL_SIZE=4", NULL};
    struct evd_t_proc p;
    ck_assert_int_eq(evd_t_evald_start(&p, pgurl, env), 0);
    char ready[300];
    snprintf(ready, sizeof(ready), "%s/readyz", p.base);
    ck_assert(evd_t_wait_status(ready, 200, 20000));
    ck_assert_ptr_null(logged_error(&p, "invalid configuration"));
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
    pg_stop();
}
END_TEST

/* evald's connections to the cluster now (the asking one left out), or -1. */
static long evald_connections(void)
{
    char *n = evd_t_sql(pgurl, "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                               "current_database() AND pid <> pg_backend_pid()");
    long v = n != NULL ? strtol(n, NULL, 10) : -1;
    free(n);
    return v;
}

/* Starts an experiment of `cases` cases × 2 arms, every case at once, on `model` (any name:
 * the stub answers them all); its id into id. */
static void start_experiment(const char *base, const char *model, int cases, char *id, size_t n)
{
    json_t *cs = json_array();
    for (int i = 0; i < cases; i++)
        json_array_append_new(cs, json_pack("{s:{s:i}}", "vars", "q", i));
    json_t *body = json_pack(
        "{s:s, s:{s:s, s:s}, s:{s:s}, s:[{s:s}], s:o, s:{s:s, s:{s:s}}, s:i, s:i}", "dimension",
        "prompt", "model", "model", model, "provider", "openai", "control", "prompt",
        "Reply with OK ({{q}}).", "treatments", "prompt", "Answer OK ({{q}}).", "cases", cs,
        "evaluator", "function_id", "eval::assert::normalized_text", "arguments", "expected", "OK",
        "repeats", 1, "concurrency", cases);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char url[300];
    snprintf(url, sizeof(url), "%s/v1/experiments", base);
    long status = 0;
    json_t *r = evd_t_http_json("POST", url, text, &status);
    free(text);
    ck_assert_msg(status == 202, "start answered %ld", status);
    snprintf(id, n, "%s", json_string_value(json_object_get(r, "experiment_id")));
    json_decref(r);
}

/*
 * A stock PostgreSQL (max_connections 100, 3 reserved) serves a process configured for
 * 1,000 calls in flight: it becomes ready, holds 1,000 calls at the provider at once with
 * no more connections than its fixed set (32 worker connections, the pool of 8, 2 webhook
 * threads and 6 service threads: 48), and every run passes.
 *
 * Two experiments of 512 cases × 2 arms on one model: 1,024 cases at once for the 1,000
 * workers, all through the one provider limiter of that model. The stub answers after
 * 6 s, long enough for every case to be claimed and its call sent before the first round
 * ends, on a loaded machine and under the sanitizers too; the stub keeps its own peak
 * (max_in_flight), so the check does not depend on sampling at the right moment.
 */
START_TEST(a_stock_postgresql_serves_1000_calls_in_flight)
{
    enum { EXPERIMENTS = 2, CASES = 512, LATENCY_MS = 6000, IN_FLIGHT = 1000, CONNECTIONS = 48 };
    pg_start_with("-c max_connections=100");
    struct evd_t_proc stub;
    char script[256];
    snprintf(script, sizeof(script),
             "{\"default\":{\"latency_ms\":%d,\"reply\":{\"text\":\"OK\"},"
             "\"usage\":{\"input_tokens\":10,\"output_tokens\":2}}}",
             LATENCY_MS);
    ck_assert_int_eq(evd_t_stub_start(&stub, script, NULL), 0);
    char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", stub.base);
    char *env[] = {base, "OPENAI_API_KEY=stub-key", "EVALD_MAX_CONCURRENCY=1000",
                   "EVALD_LOG_LEVEL=warn", NULL};
    struct evd_t_proc p;
    int64_t t0 = evd_mono_ms();
    ck_assert_int_eq(evd_t_evald_start(&p, pgurl, env), 0);
    char url[300];
    snprintf(url, sizeof(url), "%s/readyz", p.base);
    ck_assert(evd_t_wait_status(url, 200, 30000));
    int64_t ready = evd_mono_ms() - t0;

    static char ids[EXPERIMENTS][64];
    int64_t t1 = evd_mono_ms();
    for (int i = 0; i < EXPERIMENTS; i++)
        start_experiment(p.base, "capacity", CASES, ids[i], sizeof(ids[i]));
    int64_t posted = evd_mono_ms() - t1;

    /* Until every experiment is over: evald's connections, sampled. */
    long most_connections = 0;
    int done = 0;
    json_int_t passed = 0, total = 0;
    for (int i = 0; done < EXPERIMENTS && evd_mono_ms() - t1 < 120000;) {
        long c = evald_connections();
        most_connections = c > most_connections ? c : most_connections;
        snprintf(url, sizeof(url), "%s/v1/experiments/%s", p.base, ids[i]);
        long status = 0;
        json_t *doc = evd_t_http_json("GET", url, NULL, &status);
        const char *st = json_string_value(json_object_get(doc, "status"));
        if (status == 200 && st != NULL && strcmp(st, "queued") != 0 &&
            strcmp(st, "running") != 0) {
            ck_assert_msg(strcmp(st, "completed") == 0, "experiment %s: %s", ids[i], st);
            json_t *progress = json_object_get(doc, "progress");
            passed += json_integer_value(json_object_get(progress, "passed_runs"));
            total += json_integer_value(json_object_get(progress, "total_runs"));
            done++;
            i++;
        } else {
            usleep(250 * 1000);
        }
        json_decref(doc);
    }
    int64_t took = evd_mono_ms() - t1;
    ck_assert_msg(done == EXPERIMENTS, "%d of %d experiments ended in %lld ms", done, EXPERIMENTS,
                  (long long)took);
    json_t *stats = evd_t_stub_stats(&stub);
    ck_assert_ptr_nonnull(stats);
    json_int_t peak = json_integer_value(json_object_get(stats, "max_in_flight"));
    json_int_t now = json_integer_value(json_object_get(stats, "in_flight"));
    json_decref(stats);
    fprintf(stderr,
            "ready in %lld ms; %d experiments started in %lld ms; %lld of %lld runs passed in "
            "%lld ms; %lld calls in flight at most; %ld PostgreSQL connections at most\n",
            (long long)ready, EXPERIMENTS, (long long)posted, (long long)passed, (long long)total,
            (long long)took, (long long)peak, most_connections);
    ck_assert_int_eq(total, EXPERIMENTS * CASES * 2);
    ck_assert_int_eq(passed, total);
    ck_assert_int_ge(peak, IN_FLIGHT);
    ck_assert_int_eq(now, 0);
    ck_assert_int_gt(most_connections, 0);
    ck_assert_int_le(most_connections, CONNECTIONS);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 30000), 0);
    evd_t_stop(&stub, SIGTERM, 5000);
    pg_stop();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("db_capacity");
    TCase *tc = tcase_create("db_capacity");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, too_many_connections_exit_2_naming_the_settings);
    tcase_add_test(tc, a_configuration_that_fits_becomes_ready);
    tcase_add_test(tc, a_stock_postgresql_serves_1000_calls_in_flight);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
