/*
 * `evald-cli experiment ...` when it does not end with a verdict: the real evald-cli against
 * the real evald and evald-stub over loopback, a throwaway PostgreSQL database per test.
 * Usage, file and request errors (exit code 2, at the file's line, also as GitHub
 * annotations), transport errors and 5xx (4), a start tried again with its Idempotency-Key,
 * SIGINT (130, the experiment cancelled on the server), an experiment cancelled elsewhere,
 * a cancel tried again after a 503, and the token, which is never printed. The verdicts and
 * outputs are in test_cli_experiment.c.
 *
 * The stub answers by the marker word of an arm's prompt (the script and the fixture are in
 * tests/support/cli_experiment_fixtures.c): PASS answers "yes" (the expected answer of
 * every case), FAIL answers "no", MIXED answers "no" on case q1 only, and "slow " prompts
 * take SLOW_MS.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cli_experiment_fixtures.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

START_TEST(usage_file_and_request_errors_exit_2)
{
    free(ct_file_in_dir("cases.csv", ct_cases_csv));
    struct ran r;
    /* Usage. */
    ct_run(CLI("experiment", "run"), &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, "usage: evald-cli experiment run FILE") != NULL, "%s", r.err);
    char *ok = ct_yaml_file("ok.yaml", "FAIL", "PASS", "cases.csv", "1");
    ct_run(CLI("experiment", "run", ok, "--require", "worse"), &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, "--require takes one value, better (not worse)"), "%s", r.err);
    /* A YAML mistake: the file, line and column of the parser. */
    char *broken = ct_file_in_dir("broken.yaml", "name: x\ncontrol: {label: a, prompt: \"b\"\n"
                                                 "treatments: []\n");
    ct_run(CLI("experiment", "run", broken), &r);
    CHECK_EXIT(r, 2);
    char want[1024];
    snprintf(want, sizeof(want), "evald-cli: %s:3:", broken);
    ck_assert_msg(strncmp(r.err, want, strlen(want)) == 0, "%s", r.err);
    /* A refusal of the server: its detail, at the line of the field it names. */
    char *zero = ct_yaml_file("zero.yaml", "FAIL", "PASS", "cases.csv", "0");
    ct_run(CLI("experiment", "run", zero), &r);
    CHECK_EXIT(r, 2);
    snprintf(want, sizeof(want), "evald-cli: %s:11: repeats must be between 1 and 100\n", zero);
    ck_assert_str_eq(r.err, want);
    /* A template variable no case defines: the line and field of the template; with
     * --format github also an annotation of that line. */
    char *tmpl = ct_yaml_file("tmpl.yaml", "FAIL {{topic}}", "PASS", "cases.csv", "1");
    ct_run(CLI("experiment", "run", tmpl, "--format", "github"), &r);
    CHECK_EXIT(r, 2);
    snprintf(want, sizeof(want),
             "evald-cli: %s:4: control.prompt: case q1: template variable topic is not "
             "defined\n",
             tmpl);
    ck_assert_str_eq(r.err, want);
    snprintf(want, sizeof(want),
             "::error file=%s,line=4,title=evald-cli::control.prompt: case q1: template "
             "variable topic is not defined\n",
             tmpl);
    ck_assert_str_eq(r.out, want);
    ct_run(CLI("experiment", "run", broken, "--format", "github"), &r);
    CHECK_EXIT(r, 2);
    snprintf(want, sizeof(want), "::error file=%s,line=3,col=", broken);
    ck_assert_msg(strncmp(r.out, want, strlen(want)) == 0, "%s", r.out);
    /* A dataset file that is not there: the experiment file's line of it. */
    char *missing = ct_yaml_file("missing.yaml", "FAIL", "PASS", "nope.csv", "1");
    ct_run(CLI("experiment", "run", missing), &r);
    CHECK_EXIT(r, 2);
    snprintf(want, sizeof(want),
             "evald-cli: %s:7: dataset %s/nope.csv: No such file or directory\n", missing, ct_dir);
    ck_assert_str_eq(r.err, want);
    /* A dataset the server refuses: the row it names, after the file's line. */
    free(ct_file_in_dir("dup.csv", "id,question,expected\nq1,a,yes\nq1,b,yes\n"));
    char *dup = ct_yaml_file("dup.yaml", "FAIL", "PASS", "dup.csv", "1");
    ct_run(CLI("experiment", "run", dup, "--format", "github"), &r);
    CHECK_EXIT(r, 2);
    snprintf(want, sizeof(want), "evald-cli: %s:7: dataset %s/dup.csv: row 2: duplicate id q1\n",
             dup, ct_dir);
    ck_assert_str_eq(r.err, want);
    snprintf(want, sizeof(want),
             "::error file=%s,line=7,title=evald-cli::dataset %s/dup.csv: row 2: duplicate id "
             "q1\n",
             dup, ct_dir);
    ck_assert_str_eq(r.out, want);
    /* Nothing was written for any of them but the one dataset of the template check. */
    char *n = evd_t_sql(ct_db_url, "SELECT count(*) FROM experiments");
    ck_assert_str_eq(n, "0");
    free(n);
    /* A 4xx of a read: its detail. */
    ct_run(CLI("experiment", "show", "exp_0123456789abcdef0123456789abcdef"), &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, "evald-cli: could not read the experiment: 404 ") != NULL, "%s",
                  r.err);
    ck_assert_msg(strstr(r.err, "exp_0123456789abcdef0123456789abcdef") != NULL, "%s", r.err);
    ct_assert_plain(&r);
    free(dup);
    free(missing);
    free(tmpl);
    free(zero);
    free(broken);
    free(ok);
}
END_TEST

START_TEST(transport_errors_and_5xx_exit_4)
{
    char *exp = ct_file_in_dir("two.json", ct_two_treatments_json);
    struct ran r;
    /* Nothing listening: within the timeout, naming the call. */
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", evd_t_free_port());
    ct_run((char *[]){(char *)ct_cli_bin(), "experiment", "run", exp, "--url", url, "--timeout",
                      "2", NULL},
           &r);
    CHECK_EXIT(r, 4);
    ck_assert_msg(strstr(r.err, "POST ") && strstr(r.err, "/v1/experiments: "), "%s", r.err);
    /* A start is tried again 1 and 2 s later with one Idempotency-Key, and no more: a
     * third retry, 4 s later, could not end within three timeouts (6 s). */
    ck_assert_msg(strstr(r.err, "trying again in 2 s with the same Idempotency-Key"), "%s", r.err);
    ck_assert_msg(!strstr(r.err, "trying again in 4 s"), "%s", r.err);
    ck_assert_msg(r.seconds >= 2.5 && r.seconds < 5, "took %.1f s", r.seconds);
    /* A 5xx: the database lost the table evald writes experiments to. */
    char *done = evd_t_sql(ct_db_url, "ALTER TABLE experiments RENAME TO experiments_gone");
    ck_assert_ptr_nonnull(done);
    free(done);
    ct_run(CLI("experiment", "run", exp), &r);
    CHECK_EXIT(r, 4);
    char want[512];
    snprintf(want, sizeof(want),
             "evald-cli: could not start the experiment: POST %s/v1/experiments answered 5",
             ct_evald.base);
    ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
    ct_run(CLI("experiment", "show", "exp_0123456789abcdef0123456789abcdef"), &r);
    CHECK_EXIT(r, 4);
    ck_assert_msg(strstr(r.err, "could not read the experiment: GET ") &&
                      strstr(r.err, "answered 5"),
                  "%s", r.err);
    free(exp);
}
END_TEST

/* A start sent while evald is not listening yet is sent again, with the key of its first
 * attempt, once evald is up: one experiment, one key, and the CLI says what it did. */
START_TEST(a_start_is_tried_again_with_its_idempotency_key)
{
    free(ct_file_in_dir("cases.csv", ct_cases_csv));
    char *exp = ct_yaml_file("quick.yaml", "PASS", "FAIL", "cases.csv", "1");
    unsigned port = evd_t_free_port();
    char url[64], listen[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
    snprintf(listen, sizeof(listen), "EVALD_LISTEN=127.0.0.1:%u", port);
    char *n = evd_t_sql(ct_db_url, "SELECT count(*) FROM experiments");
    long before = atol(n);
    free(n);
    struct child c;
    ct_spawn(
        (char *[]){(char *)ct_cli_bin(), "experiment", "run", exp, "--url", url, "--detach", NULL},
        &c);
    usleep(300000);
    struct evd_t_proc late;
    char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", ct_stub.base);
    char *env[] = {base, "OPENAI_API_KEY=stub-key", listen, NULL};
    ck_assert_int_eq(evd_t_evald_start(&late, ct_db_url, env), 0);
    struct ran r;
    memset(&r, 0, sizeof(r));
    ck_assert(ct_collect(&c, &r, NULL));
    CHECK_EXIT(r, 0);
    ck_assert_msg(strstr(r.err, "with the same Idempotency-Key") != NULL, "%s", r.err);
    n = evd_t_sql(ct_db_url, "SELECT count(*) FROM experiments");
    ck_assert_int_eq(atol(n), before + 1);
    free(n);
    n = evd_t_sql(ct_db_url, "SELECT count(*) FROM idempotency_keys WHERE key LIKE 'evald-cli-%'"
                             " AND status = 202");
    ck_assert_str_eq(n, "1");
    free(n);
    ck_assert_int_eq(evd_t_stop(&late, SIGTERM, 10000), 0);
    free(exp);
}
END_TEST

START_TEST(sigint_cancels_the_experiment_on_the_server)
{
    free(ct_file_in_dir("cases.csv", ct_cases_csv));
    char *exp = ct_yaml_file("slow.yaml", "slow PASS", "slow MIXED", "cases.csv", "2");
    struct ran r;
    memset(&r, 0, sizeof(r));
    struct child c;
    ct_spawn(CLI("experiment", "run", exp), &c);
    ck_assert(!ct_collect(&c, &r, " started\n"));
    char id[64];
    snprintf(id, sizeof(id), "%s", ct_started_id(&r));
    usleep(300000);
    ck_assert_int_eq(kill(c.pid, SIGINT), 0);
    ck_assert(ct_collect(&c, &r, NULL));
    CHECK_EXIT(r, 130);
    char want[128];
    snprintf(want, sizeof(want), "evald-cli: interrupted: cancelling experiment %s\n", id);
    ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
    ck_assert_msg(r.seconds < SLOW_MS * 4 / 1000.0, "took %.1f s", r.seconds);
    ct_wait_status(id, "cancelled");
    free(exp);
}
END_TEST

START_TEST(an_experiment_cancelled_elsewhere_is_no_pass)
{
    free(ct_file_in_dir("cases.csv", ct_cases_csv));
    char *exp = ct_yaml_file("slow.yaml", "slow PASS", "slow FAIL", "cases.csv", "3");
    struct ran r;
    ct_run(CLI("experiment", "run", exp, "--detach"), &r);
    CHECK_EXIT(r, 0);
    char id[64];
    snprintf(id, sizeof(id), "%.36s", r.out);
    ct_run(CLI("experiment", "cancel", id), &r);
    CHECK_EXIT(r, 0);
    char want[128];
    snprintf(want, sizeof(want), "%s cancelled\n", id);
    ck_assert_str_eq(r.out, want);
    ct_wait_status(id, "cancelled");
    ct_run(CLI("experiment", "watch", id), &r);
    CHECK_EXIT(r, 4);
    snprintf(want, sizeof(want), "evald-cli: experiment %s was cancelled before it completed\n",
             id);
    ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
    free(exp);
}
END_TEST

START_TEST(a_cancel_that_gets_a_503_is_tried_again)
{
    free(ct_file_in_dir("cases.csv", ct_cases_csv));
    char *exp = ct_yaml_file("slow.yaml", "slow PASS", "slow FAIL", "cases.csv", "3");
    struct ran r;
    ct_run(CLI("experiment", "run", exp, "--detach"), &r);
    CHECK_EXIT(r, 0);
    char id[64];
    snprintf(id, sizeof(id), "%.36s", r.out);
    /* While the table is gone every answer is a 503: three calls a second apart, then 4. */
    free(evd_t_sql(ct_db_url, "ALTER TABLE experiments RENAME TO experiments_gone"));
    ct_run(CLI("experiment", "cancel", id), &r);
    CHECK_EXIT(r, 4);
    ck_assert_msg(strstr(r.err, "/cancel answered 503: ") != NULL, "%s", r.err);
    ck_assert_msg(r.seconds >= 1.9, "gave up after %.1f s", r.seconds);
    /* The table is back before the second call: that one cancels. */
    memset(&r, 0, sizeof(r));
    struct child c;
    ct_spawn(CLI("experiment", "cancel", id), &c);
    usleep(300000);
    free(evd_t_sql(ct_db_url, "ALTER TABLE experiments_gone RENAME TO experiments"));
    ck_assert(ct_collect(&c, &r, NULL));
    CHECK_EXIT(r, 0);
    char want[128];
    snprintf(want, sizeof(want), "%s cancelled\n", id);
    ck_assert_str_eq(r.out, want);
    ct_wait_status(id, "cancelled");
    free(exp);
}
END_TEST

START_TEST(the_token_comes_from_the_option_or_the_environment_and_is_never_printed)
{
    static char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", ct_stub.base);
    char *env[] = {base, "OPENAI_API_KEY=stub-key", "EVALD_API_TOKEN=tok-s3cret-value", NULL};
    struct evd_t_proc guarded;
    ck_assert_int_eq(evd_t_evald_start(&guarded, ct_db_url, env), 0);
    char *exp = ct_file_in_dir("two.json", ct_two_treatments_json);
    struct ran r;
    /* No token: a 401, exit 2 with its detail. */
    unsetenv("EVALD_API_TOKEN");
    ct_run((char *[]){(char *)ct_cli_bin(), "--url", guarded.base, "experiment", "run", exp, NULL},
           &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, exp) != NULL, "%s", r.err);
    /* A wrong one: the same, and the token is not echoed. */
    ct_run((char *[]){(char *)ct_cli_bin(), "--url", guarded.base, "--token", "wrong-t0ken",
                      "experiment", "show", "exp_0123456789abcdef0123456789abcdef", NULL},
           &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, "401") != NULL && strstr(r.err, "wrong-t0ken") == NULL, "%s",
                  r.err);
    /* From the environment, after the command. */
    setenv("EVALD_API_TOKEN", "tok-s3cret-value", 1);
    ct_run((char *[]){(char *)ct_cli_bin(), "experiment", "run", exp, "--url", guarded.base, NULL},
           &r);
    unsetenv("EVALD_API_TOKEN");
    CHECK_EXIT(r, 1);
    ck_assert_msg(strstr(r.out, "tok-s3cret") == NULL && strstr(r.err, "tok-s3cret") == NULL,
                  "%s %s", r.out, r.err);
    evd_t_stop(&guarded, SIGTERM, 10000);
    free(exp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_experiment_errors");
    TCase *tc = tcase_create("cli_experiment_errors");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, ct_setup, ct_teardown);
    tcase_add_test(tc, usage_file_and_request_errors_exit_2);
    tcase_add_test(tc, transport_errors_and_5xx_exit_4);
    tcase_add_test(tc, a_start_is_tried_again_with_its_idempotency_key);
    tcase_add_test(tc, sigint_cancels_the_experiment_on_the_server);
    tcase_add_test(tc, an_experiment_cancelled_elsewhere_is_no_pass);
    tcase_add_test(tc, a_cancel_that_gets_a_503_is_tried_again);
    tcase_add_test(tc, the_token_comes_from_the_option_or_the_environment_and_is_never_printed);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
