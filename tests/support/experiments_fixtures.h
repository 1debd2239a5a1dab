/*
 * The fixture of the experiments suites (tests/integration/test_experiments.c and
 * test_experiments_refusals.c): a throwaway PostgreSQL database per test, evald-stub with
 * the script below and evald with it as provider; the pieces of start bodies; and the
 * calls of /v1/experiments and the checks of JSON documents by dotted path the suites
 * share. Names start with xt_ (experiment tests); the body macros and the ASSERT_ checks
 * keep their short names, as only these suites include this header. One test thread.
 *
 * The script answers "yes" (a pass: every case expects "yes") or "no" per case and arm; a
 * rule with "times": 1 answers only the arm's first run on that case (repeat 1), the next
 * rule the later ones. Passes by repeat (1, 2):
 *   q1  control no  no    treatment yes no
 *   q2  control yes no    treatment yes yes
 *   q3  control no  no    treatment yes yes
 *   q4  control no  yes   treatment yes yes
 *   q5  control yes yes   treatment yes yes
 * Prompts starting "slow " take 5 s (the cancel test); every other call takes 100 ms and
 * uses 12 tokens for the control, 14 for the treatment.
 */
#ifndef EVD_TESTS_EXPERIMENTS_FIXTURES_H
#define EVD_TESTS_EXPERIMENTS_FIXTURES_H

#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "tests/support/itest.h"

/* The test's database (conninfo), the stub and evald. */
extern char xt_db_url[1024];
extern struct evd_t_proc xt_stub;
extern struct evd_t_proc xt_evald;

/* The checked fixture: a new database, the stub with the script above and evald (as
 * xt_start_evald(NULL)); then all three gone. */
void xt_setup(void);
void xt_teardown(void);

/* Starts xt_evald with the stub as provider, quick sweeps and leases and small limits (5
 * runs at once, 60 runs an experiment, 50 cases and 64 KiB a dataset), and the extra
 * "K=V" settings of the NULL-terminated `extra` (NULL for none), which win over those. */
void xt_start_evald(char *const extra[]);

/* METHOD path on evald with a body of len bytes (Content-Type ct, application/json when
 * NULL) or none; fills *r (free it with evd_t_resp_free). */
void xt_request(const char *method, const char *path, const char *ct, const char *body, size_t len,
                struct evd_t_resp *r);
/* The JSON answer (new reference) of METHOD path; *status gets the status. */
json_t *xt_call(const char *method, const char *path, const char *body, long *status);
/* GET of experiment `id` until it is terminal (new reference); the test fails, with
 * evald's log, when it is not within timeout_ms. */
json_t *xt_wait_done(const char *id, int timeout_ms);
/* Starts an experiment, which must answer 202 queued with its Location; its id (malloc'd). */
char *xt_start(const char *body);
/* The value at a dotted path ("arms.0.pooled.passed": array members by index), borrowed,
 * or NULL. */
json_t *xt_at(json_t *v, const char *dotted);
/* printf(fmt, …) into a new string (malloc'd); the test fails when it cannot be made. */
__attribute__((format(printf, 1, 2))) char *xt_printf(const char *fmt, ...);
/* The number the test's database answers to the query printf(fmt, …); the test fails
 * when it answers nothing. */
__attribute__((format(printf, 1, 2))) long xt_sql_long(const char *fmt, ...);
/* The number of rows of a table of the test's database. */
long xt_count_rows(const char *table);
/* The length of the array `member` of GET path, which must answer 200. */
size_t xt_list_size(const char *path, const char *member);

#define MODEL "\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"}"
#define EXACT                                                                                      \
    "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":"                        \
    "{\"expected\":\"{{expected}}\"}}"
#define ARMS                                                                                       \
    "\"control\":{\"prompt\":\"control {{tag}}: {{question}}\"},"                                  \
    "\"treatments\":[{\"prompt\":\"treatment {{tag}}: {{question}}\"}]"
#define CASE(t)                                                                                    \
    "{\"id\":\"" t "\",\"vars\":{\"tag\":\"" t "\",\"question\":\"" t "?\"},\"expected\":\"yes\"}"
#define FIVE_CASES "[" CASE("q1") "," CASE("q2") "," CASE("q3") "," CASE("q4") "," CASE("q5") "]"

/* The experiment of the hand-worked analysis: five cases, two arms, two repeats. */
extern const char xt_full[];

#define ASSERT_INT(v, dotted, want)                                                                \
    do {                                                                                           \
        json_t *v_ = xt_at((v), (dotted));                                                         \
        ck_assert_msg(json_is_integer(v_), "%s is not an integer", (dotted));                      \
        ck_assert_msg(json_integer_value(v_) == (want), "%s = %lld, want %lld", (dotted),          \
                      (long long)json_integer_value(v_), (long long)(want));                       \
    } while (0)

#define ASSERT_NEAR(v, dotted, want)                                                               \
    do {                                                                                           \
        json_t *v_ = xt_at((v), (dotted));                                                         \
        ck_assert_msg(json_is_number(v_), "%s is not a number", (dotted));                         \
        double got_ = json_number_value(v_), want_ = (want);                                       \
        ck_assert_msg(fabs(got_ - want_) <= 1e-6 + 1e-6 * fabs(want_), "%s = %.12g, want %.12g",   \
                      (dotted), got_, want_);                                                      \
    } while (0)

#define ASSERT_NULL(v, dotted)                                                                     \
    ck_assert_msg(json_is_null(xt_at((v), (dotted))), "%s is not null", (dotted))

#define ASSERT_STR(v, dotted, want)                                                                \
    do {                                                                                           \
        const char *s_ = json_string_value(xt_at((v), (dotted)));                                  \
        ck_assert_msg(s_ != NULL && strcmp(s_, (want)) == 0, "%s = %s, want %s", (dotted),         \
                      s_ ? s_ : "(none)", (want));                                                 \
    } while (0)

#endif
