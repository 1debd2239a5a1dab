/*
 * Start-up against a PostgreSQL that cannot hold what the configuration would open: a
 * private cluster of this test's own with max_connections = 20, and the real evald. A
 * process configured for more connections than the server allows exits 2 with a message
 * that names the settings and the server's figures, instead of answering 503 on /readyz
 * forever; one that fits becomes ready.
 */
#include <check.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char dir[64];
static char pgurl[256];

static void pg_start(void)
{
    snprintf(dir, sizeof(dir), "/tmp/evald-pg-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    unsigned port = evd_t_free_port();
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "EVALD_PG_OPTIONS='-c max_connections=20 -c superuser_reserved_connections=3' "
             "%s/scripts/pg.sh start %s %u >/dev/null",
             evd_t_source_dir(), dir, port);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
    snprintf(pgurl, sizeof(pgurl), "postgresql://evald@127.0.0.1:%u/evald", port);
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
     * writer, finalizer, analyst. */
    const char *want = "EVALD_WORKER_CONNECTIONS (40) + EVALD_DB_POOL_SIZE (8) + "
                       "EVALD_WEBHOOK_WORKERS (2) + 5 service connections = 55 exceed what "
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

int main(void)
{
    Suite *s = suite_create("db_capacity");
    TCase *tc = tcase_create("db_capacity");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, too_many_connections_exit_2_naming_the_settings);
    tcase_add_test(tc, a_configuration_that_fits_becomes_ready);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
