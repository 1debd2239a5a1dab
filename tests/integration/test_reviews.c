/*
 * Human review, agreement, the analysis by source, re-score and retry end to end: the
 * real evald and evald-stub over loopback against a throwaway PostgreSQL per test. The
 * stub is scripted per case and arm, so every verdict, queue position, κ and analysis
 * number below follows from the script and is worked out by hand in the comments.
 */
#define _GNU_SOURCE
#include <check.h>
#include <math.h>
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
static struct evd_t_proc evald;

/*
 * Every case expects "yes". Answers by case and arm, repeat 1 then 2 (a case's runs reach
 * the stub one after another, in the planned order):
 *   q1  control yes yes   treatment yes yes
 *   q2  control yes no    treatment yes yes
 *   q3  control no  no    treatment yes yes
 *   r2  treatment: the first request fails with a 400 (a failure before any verdict)
 * Positions in a case (two arms): 1 control rep 1, 2 treatment rep 1, 3 treatment rep 2,
 * 4 control rep 2.
 */
static const char SCRIPT[] =
    "{\"rules\":["
    "{\"when\":{\"prompt_contains\":\"control q2:\"},\"times\":1,\"reply\":{\"text\":\"yes\"}},"
    "{\"when\":{\"prompt_contains\":\"control q2:\"},\"reply\":{\"text\":\"no\"}},"
    "{\"when\":{\"prompt_contains\":\"control q3:\"},\"reply\":{\"text\":\"no\"}},"
    "{\"when\":{\"prompt_contains\":\"treatment r2:\"},\"times\":1,"
    "\"fault\":{\"status\":400,\"message\":\"scripted refusal\"}}"
    "],\"default\":{\"reply\":{\"text\":\"yes\"},"
    "\"usage\":{\"input_tokens\":10,\"output_tokens\":2}}}";

#define MODEL "\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"}"
#define ARMS                                                                                       \
    "\"control\":{\"prompt\":\"control {{tag}}: {{tag}}?\"},"                                      \
    "\"treatments\":[{\"prompt\":\"treatment {{tag}}: {{tag}}?\"}]"
#define CASE(t) "{\"id\":\"" t "\",\"vars\":{\"tag\":\"" t "\"},\"expected\":\"yes\"}"

/* The threshold 0.95 makes a score of 1 "near" it (within 0.1) and a score of 0 not. */
static const char THREE[] =
    "{\"name\":\"reviewed\",\"dimension\":\"prompt\"," MODEL "," ARMS
    ",\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":"
    "{\"expected\":\"{{expected}}\",\"threshold\":0.95}},\"repeats\":2,\"concurrency\":3,"
    "\"cases\":[" CASE("q1") "," CASE("q2") "," CASE("q3") "]}";

static const char TWO[] = "{\"name\":\"retried\",\"dimension\":\"prompt\"," MODEL "," ARMS
                          ",\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":"
                          "{\"expected\":\"{{expected}}\"}},\"repeats\":1,\"concurrency\":2,"
                          "\"cases\":[" CASE("r1") "," CASE("r2") "]}";

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, SCRIPT, NULL), 0);
    static char base[300], anthropic[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", stub.base);
    snprintf(anthropic, sizeof(anthropic), "ANTHROPIC_BASE_URL=%s", stub.base);
    char *env[] = {base,
                   anthropic,
                   "OPENAI_API_KEY=stub-key",
                   "ANTHROPIC_API_KEY=stub-key",
                   "EVALD_SWEEP_INTERVAL_MS=300",
                   "EVALD_LEASE_MS=1500",
                   NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
}

static void teardown(void)
{
    evd_t_stop(&evald, SIGTERM, 10000);
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
}

/* ---- helpers ------------------------------------------------------------------------------- */

static json_t *call(const char *method, const char *path, const char *body, long *status)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    return evd_t_http_json(method, url, body, status);
}

static json_t *at(json_t *v, const char *dotted)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", dotted);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(k)) : json_object_get(v, k);
    return v;
}

#define ASSERT_INT(v, dotted, want)                                                                \
    do {                                                                                           \
        json_t *v_ = at((v), (dotted));                                                            \
        ck_assert_msg(json_is_integer(v_), "%s is not an integer", (dotted));                      \
        ck_assert_msg(json_integer_value(v_) == (want), "%s = %lld, want %lld", (dotted),          \
                      (long long)json_integer_value(v_), (long long)(want));                       \
    } while (0)

#define ASSERT_NEAR(v, dotted, want)                                                               \
    do {                                                                                           \
        json_t *v_ = at((v), (dotted));                                                            \
        ck_assert_msg(json_is_number(v_), "%s is not a number", (dotted));                         \
        double got_ = json_number_value(v_), want_ = (want);                                       \
        ck_assert_msg(fabs(got_ - want_) <= 1e-9 + 1e-9 * fabs(want_), "%s = %.12g, want %.12g",   \
                      (dotted), got_, want_);                                                      \
    } while (0)

#define ASSERT_STR(v, dotted, want)                                                                \
    do {                                                                                           \
        const char *s_ = json_string_value(at((v), (dotted)));                                     \
        ck_assert_msg(s_ != NULL && strcmp(s_, (want)) == 0, "%s = %s, want %s", (dotted),         \
                      s_ ? s_ : "(none)", (want));                                                 \
    } while (0)

static long count_rows(const char *table)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
    char *n = evd_t_sql(db_url, sql);
    ck_assert_ptr_nonnull(n);
    long v = atol(n);
    free(n);
    return v;
}

static char *start(const char *body)
{
    long st = 0;
    json_t *r = call("POST", "/v1/experiments", body, &st);
    if (st != 202)
        evd_t_dump_log(&evald);
    ck_assert_int_eq(st, 202);
    char *id = strdup(json_string_value(json_object_get(r, "experiment_id")));
    json_decref(r);
    return id;
}

static json_t *wait_terminal(const char *id)
{
    char path[160];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    int64_t deadline = evd_mono_ms() + 60000;
    for (;;) {
        long st = 0;
        json_t *doc = call("GET", path, NULL, &st);
        ck_assert_int_eq(st, 200);
        const char *s = json_string_value(json_object_get(doc, "status"));
        if (s && (!strcmp(s, "completed") || !strcmp(s, "failed") || !strcmp(s, "cancelled")))
            return doc;
        json_decref(doc);
        if (evd_mono_ms() > deadline) {
            evd_t_dump_log(&evald);
            ck_abort_msg("experiment %s not terminal", id);
        }
        usleep(100 * 1000);
    }
}

/* PUT a review; its status, and the answer in *out when out is not NULL. */
static long review(const char *id, const char *run, const char *body, json_t **out)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs/%s/review", id, run);
    long st = 0;
    json_t *r = call("PUT", path, body, &st);
    if (out != NULL)
        *out = r;
    else
        json_decref(r);
    return st;
}

/* The problem detail of a refused request, checked against `detail`. */
static void refused(const char *method, const char *path, const char *body, long status,
                    const char *detail)
{
    long st = 0;
    json_t *r = call(method, path, body, &st);
    ck_assert_msg(st == status, "%s %s answered %ld, want %ld", method, path, st, status);
    const char *d = json_string_value(json_object_get(r, "detail"));
    ck_assert_msg(d != NULL && strcmp(d, detail) == 0, "%s %s: detail %s, want %s", method, path,
                  d ? d : "(none)", detail);
    json_decref(r);
}

static long stub_requests(void)
{
    json_t *s = evd_t_stub_stats(&stub);
    long n = (long)json_integer_value(json_object_get(s, "requests"));
    json_decref(s);
    return n;
}

/* Requests the stub received on one API ("responses", "chat", "messages"). */
static long stub_api_requests(const char *api)
{
    json_t *s = evd_t_stub_stats(&stub);
    long n = (long)json_integer_value(json_object_get(json_object_get(s, "by_api"), api));
    json_decref(s);
    return n;
}

/* ---- tests --------------------------------------------------------------------------------- */

START_TEST(review_validation_names_the_field_and_writes_nothing)
{
    char *id = start(THREE);
    json_decref(wait_terminal(id));
    char path[256];
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs/case1-arm0-rep1/review", id);
    char *long_note = malloc(4100 + 64);
    int n = snprintf(long_note, 64, "{\"verdict\":\"pass\",\"reviewer\":\"ann\",\"note\":\"");
    memset(long_note + n, 'x', 4001);
    /* a multi-byte note of 4000 characters is allowed below: characters, not bytes */
    snprintf(long_note + n + 4001, 64, "\"}");
    const struct {
        const char *body, *detail;
    } cases[] = {
        {"{}", "verdict is required"},
        {"[]", "request body must be a JSON object"},
        {"{\"verdict\":\"maybe\",\"reviewer\":\"ann\"}", "verdict must be one of pass, fail"},
        {"{\"verdict\":true,\"reviewer\":\"ann\"}", "verdict must be a string"},
        {"{\"verdict\":\"pass\"}", "reviewer is required"},
        {"{\"verdict\":\"pass\",\"reviewer\":\"\"}", "reviewer cannot be empty"},
        {"{\"verdict\":\"pass\",\"reviewer\":7}", "reviewer must be a string"},
        {"{\"verdict\":\"pass\",\"reviewer\":\"ann\",\"note\":5}", "note must be a string"},
        {"{\"verdict\":\"pass\",\"reviewer\":\"ann\",\"score\":1}", "score is not a known field"},
        {long_note, "note must be at most 4000 characters"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        refused("PUT", path, cases[i].body, 400, cases[i].detail);
    free(long_note);
    ck_assert_int_eq(count_rows("experiment_reviews"), 0);
    refused("PUT",
            "/v1/experiments/exp_0123456789abcdef0123456789abcdef/runs/case1-arm0-rep1/review",
            "{\"verdict\":\"pass\",\"reviewer\":\"ann\"}", 404,
            "experiment not found: exp_0123456789abcdef0123456789abcdef");
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs/case9-arm0-rep1/review", id);
    refused("PUT", path, "{\"verdict\":\"pass\",\"reviewer\":\"ann\"}", 404,
            "run not found: case9-arm0-rep1");
    ck_assert_int_eq(count_rows("experiment_reviews"), 0);

    /* 4000 two-byte characters are 8000 bytes and still a valid note */
    char *wide = malloc(8200);
    n = snprintf(wide, 64, "{\"verdict\":\"pass\",\"reviewer\":\"ann\",\"note\":\"");
    for (int i = 0; i < 4000; i++) {
        wide[n++] = (char)0xc3;
        wide[n++] = (char)0xa9;
    }
    snprintf(wide + n, 64, "\"}");
    ck_assert_int_eq(review(id, "case1-arm0-rep1", wide, NULL), 200);
    free(wide);
    ck_assert_int_eq(count_rows("experiment_reviews"), 1);

    snprintf(path, sizeof(path), "/v1/experiments/%s?source=judge", id);
    refused("GET", path, NULL, 400, "source must be one of evaluator, human, human_then_evaluator");
    free(id);
}
END_TEST

START_TEST(queue_reviews_agreement_and_the_human_analysis)
{
    char *id = start(THREE);
    json_t *doc = wait_terminal(id);
    ASSERT_STR(doc, "status", "completed");
    /* Evaluator: q1 d = 1 − 1 = 0, q2 d = 1 − 0.5 = 0.5, q3 d = 1 − 0 = 1: delta 0.5. */
    ASSERT_NEAR(doc, "comparisons.0.pass_rate.delta", 0.5);
    json_decref(doc);
    char path[256];
    long st = 0;

    /* The queue: q2 is flaky (control yes, no) and its arms disagree (0.5 vs 1): 4 + 2, and
     * 1 more for a score of 1 near the threshold 0.95; q3's arms disagree (0 vs 1): 2, +1
     * for its passes; q1: only the nearness of its passes. */
    static const char *const order[] = {"case2-arm0-rep1", "case2-arm1-rep1", "case2-arm1-rep2",
                                        "case2-arm0-rep2", "case3-arm1-rep1", "case3-arm1-rep2",
                                        "case3-arm0-rep1", "case3-arm0-rep2", "case1-arm0-rep1",
                                        "case1-arm1-rep1", "case1-arm1-rep2", "case1-arm0-rep2"};
    static const int useful[] = {7, 7, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1};
    snprintf(path, sizeof(path), "/v1/experiments/%s/review-queue?limit=100", id);
    json_t *q = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_NEAR(q, "threshold", 0.95);
    ck_assert_uint_eq(json_array_size(json_object_get(q, "runs")), 12);
    for (size_t i = 0; i < 12; i++) {
        json_t *r = json_array_get(json_object_get(q, "runs"), i);
        ASSERT_STR(r, "run_id", order[i]);
        ASSERT_INT(r, "usefulness", useful[i]);
    }
    ASSERT_STR(q, "runs.0.reasons.0", "flaky");
    ASSERT_STR(q, "runs.0.reasons.1", "disagree");
    ASSERT_STR(q, "runs.0.reasons.2", "near_threshold");
    ASSERT_STR(q, "runs.0.prompt", "control q2: q2?");
    ASSERT_STR(q, "runs.0.output", "yes");
    json_decref(q);

    /* Ann reviews q3 first: she fails treatment rep 1 (the evaluator passed it). */
    const char *q3[][2] = {{"case3-arm0-rep1", "fail"},
                           {"case3-arm1-rep1", "pass"},
                           {"case3-arm1-rep2", "pass"},
                           {"case3-arm0-rep2", "fail"}};
    char body[256];
    for (int i = 0; i < 4; i++) {
        snprintf(body, sizeof(body), "{\"verdict\":\"%s\",\"reviewer\":\"ann\"}", q3[i][1]);
        ck_assert_int_eq(review(id, q3[i][0], body, NULL), 200);
    }
    /* ... and changes her mind on case3-arm1-rep1: the second review replaces the first */
    json_t *rv = NULL;
    ck_assert_int_eq(review(id, "case3-arm1-rep1",
                            "{\"verdict\":\"fail\",\"reviewer\":\"ann\",\"note\":\"off topic\"}",
                            &rv),
                     200);
    ASSERT_STR(rv, "verdict", "fail");
    ASSERT_STR(rv, "note", "off topic");
    ASSERT_STR(rv, "case_id", "q3");
    ck_assert(json_is_true(json_object_get(rv, "evaluator_passed")));
    json_decref(rv);
    ck_assert_int_eq(count_rows("experiment_reviews"), 4);

    /* The queue for ann no longer holds q3's runs; for bob it still does. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/review-queue?reviewer=ann&limit=5", id);
    q = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(q, "runs")), 5);
    ASSERT_STR(q, "runs.3.run_id", "case2-arm0-rep2");
    ASSERT_STR(q, "runs.4.run_id", "case1-arm0-rep1");
    json_decref(q);
    /* offset passes over the runs ann skipped: the queue goes on behind them. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/review-queue?reviewer=ann&limit=2&offset=3",
             id);
    q = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(q, "runs")), 2);
    ASSERT_STR(q, "runs.0.run_id", "case2-arm0-rep2");
    ASSERT_STR(q, "runs.1.run_id", "case1-arm0-rep1");
    json_decref(q);
    snprintf(path, sizeof(path), "/v1/experiments/%s/review-queue?reviewer=ann&offset=8", id);
    q = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(q, "runs")), 0);
    json_decref(q);
    static const char *const bad_offsets[] = {"-1", "x", "", "1000000001", "2.5"};
    for (size_t i = 0; i < sizeof(bad_offsets) / sizeof(*bad_offsets); i++) {
        snprintf(path, sizeof(path), "/v1/experiments/%s/review-queue?offset=%s", id,
                 bad_offsets[i]);
        q = call("GET", path, NULL, &st);
        ck_assert_int_eq(st, 400);
        ASSERT_STR(q, "detail", "offset must be between 0 and 1000000000");
        json_decref(q);
    }
    snprintf(path, sizeof(path), "/v1/experiments/%s/review-queue?reviewer=bob&limit=100", id);
    q = call("GET", path, NULL, &st);
    ck_assert_uint_eq(json_array_size(json_object_get(q, "runs")), 12);
    json_decref(q);

    /* Human verdicts on q3 only. source=human uses the reviewed runs alone: q3 is the one
     * paired case, control 0/2 = 0, treatment 1/2 = 0.5, delta 0.5. human_then_evaluator:
     * q1 d = 0 and q2 d = 0.5 from the evaluator, q3 d = 0.5 from ann: delta 1/3, the
     * treatment's pass rate (1 + 1 + 0.5)/3 = 5/6. */
    snprintf(path, sizeof(path), "/v1/experiments/%s?source=human", id);
    doc = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_STR(doc, "analysis.source", "human");
    ASSERT_INT(doc, "comparisons.0.paired_cases", 1);
    ASSERT_NEAR(doc, "arms.0.pass_rate", 0.0);
    ASSERT_NEAR(doc, "arms.1.pass_rate", 0.5);
    ASSERT_NEAR(doc, "comparisons.0.pass_rate.delta", 0.5);
    ASSERT_INT(doc, "arms.1.pooled.evaluated", 2);
    json_decref(doc);
    snprintf(path, sizeof(path), "/v1/experiments/%s?source=human_then_evaluator", id);
    doc = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_INT(doc, "comparisons.0.paired_cases", 3);
    ASSERT_NEAR(doc, "comparisons.0.pass_rate.delta", 1.0 / 3.0);
    ASSERT_NEAR(doc, "arms.1.pass_rate", 5.0 / 6.0);
    json_decref(doc);
    /* the default is still the evaluator's stored analysis */
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    doc = call("GET", path, NULL, &st);
    ASSERT_NEAR(doc, "comparisons.0.pass_rate.delta", 0.5);
    ck_assert_ptr_null(at(doc, "analysis.source"));
    json_decref(doc);

    /* Ann reviews the rest: she agrees with the evaluator except on case2-arm0-rep2 (the
     * evaluator failed it, she passes it). */
    const char *rest[] = {"case1-arm0-rep1", "case1-arm1-rep1", "case1-arm1-rep2",
                          "case1-arm0-rep2", "case2-arm0-rep1", "case2-arm1-rep1",
                          "case2-arm1-rep2", "case2-arm0-rep2"};
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(review(id, rest[i], "{\"verdict\":\"pass\",\"reviewer\":\"ann\"}", NULL),
                         200);

    /*
     * Evaluator (rows) against ann (columns) over the 12 runs: both pass 8 (q1 4, q2's three
     * evaluator passes, case3-arm1-rep2), evaluator pass & human fail 1 (case3-arm1-rep1),
     * fail & pass 1 (case2-arm0-rep2), both fail 2 (q3's control). p_o = 10/12 = 5/6;
     * margins 9/12 and 3/12 on both sides, p_e = 9/16 + 1/16 = 5/8; κ = (5/6 − 5/8)/(3/8)
     * = 5/9. The variance (domain/agreement.h) in fractions: (85/486 + 8/243 − 25/324) /
     * (12 · 9/64) = 508/6561; the 95 % interval is 5/9 ∓ 1.959963984540054 · √(508/6561).
     */
    snprintf(path, sizeof(path), "/v1/experiments/%s/agreement", id);
    json_t *ag = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_INT(ag, "reviewed_runs", 12);
    ASSERT_INT(ag, "reviews", 12);
    ASSERT_INT(ag, "table.evaluator_pass_human_pass", 8);
    ASSERT_INT(ag, "table.evaluator_pass_human_fail", 1);
    ASSERT_INT(ag, "table.evaluator_fail_human_pass", 1);
    ASSERT_INT(ag, "table.evaluator_fail_human_fail", 2);
    ASSERT_NEAR(ag, "agreement", 5.0 / 6.0);
    ASSERT_NEAR(ag, "kappa", 5.0 / 9.0);
    double half = 1.959963984540054 * sqrt(508.0 / 6561.0);
    ASSERT_NEAR(ag, "kappa_ci_low", 5.0 / 9.0 - half);
    ASSERT_NEAR(ag, "kappa_ci_high", fmin(1.0, 5.0 / 9.0 + half));
    ck_assert(json_is_null(json_object_get(ag, "source_agreement")));
    json_decref(ag);

    /* Every run reviewed: q1 d = 0, q2 d = 1 − 1 = 0 (ann passed the control's second run),
     * q3 d = 0.5 − 0: delta 1/6; the control's rate (1 + 1 + 0)/3 = 2/3. */
    snprintf(path, sizeof(path), "/v1/experiments/%s?source=human", id);
    doc = call("GET", path, NULL, &st);
    ASSERT_INT(doc, "comparisons.0.paired_cases", 3);
    ASSERT_NEAR(doc, "comparisons.0.pass_rate.delta", 1.0 / 6.0);
    ASSERT_NEAR(doc, "arms.0.pass_rate", 2.0 / 3.0);
    ASSERT_NEAR(doc, "arms.1.pass_rate", 5.0 / 6.0);
    ASSERT_INT(doc, "comparisons.0.pass_rate.sign_test.wins", 1);
    ASSERT_INT(doc, "comparisons.0.pass_rate.sign_test.ties", 2);
    json_decref(doc);

    /* Bob passes case3-arm1-rep1: one pass, one fail, the latest review (his) decides; the
     * table gains a both-pass and loses the evaluator-pass-human-fail. */
    ck_assert_int_eq(
        review(id, "case3-arm1-rep1", "{\"verdict\":\"pass\",\"reviewer\":\"bob\"}", NULL), 200);
    snprintf(path, sizeof(path), "/v1/experiments/%s/agreement", id);
    ag = call("GET", path, NULL, &st);
    ASSERT_INT(ag, "reviews", 13);
    ASSERT_INT(ag, "reviewed_runs", 12);
    ASSERT_INT(ag, "table.evaluator_pass_human_pass", 9);
    ASSERT_INT(ag, "table.evaluator_pass_human_fail", 0);
    ASSERT_NEAR(ag, "agreement", 11.0 / 12.0);
    json_decref(ag);

    /* The reviews page in the order they were first made; reviewer= filters. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/reviews?limit=5", id);
    json_t *p1 = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(p1, "reviews")), 5);
    ASSERT_STR(p1, "reviews.0.run_id", "case3-arm0-rep1");
    ASSERT_STR(p1, "reviews.1.run_id", "case3-arm1-rep1");
    ASSERT_STR(p1, "reviews.1.verdict", "fail"); /* ann's replaced review, in its place */
    const char *cursor = json_string_value(json_object_get(p1, "next_cursor"));
    ck_assert_ptr_nonnull(cursor);
    snprintf(path, sizeof(path), "/v1/experiments/%s/reviews?limit=100&before=%s", id, cursor);
    json_t *p2 = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(p2, "reviews")), 8);
    ck_assert_ptr_null(json_object_get(p2, "next_cursor"));
    json_decref(p1);
    json_decref(p2);
    snprintf(path, sizeof(path), "/v1/experiments/%s/reviews?reviewer=bob", id);
    p1 = call("GET", path, NULL, &st);
    ck_assert_uint_eq(json_array_size(json_object_get(p1, "reviews")), 1);
    ASSERT_STR(p1, "reviews.0.reviewer", "bob");
    json_decref(p1);
    refused("GET", "/v1/experiments/exp_0123456789abcdef0123456789abcdef/reviews", NULL, 404,
            "experiment not found: exp_0123456789abcdef0123456789abcdef");
    free(id);
}
END_TEST

START_TEST(rescore_calls_no_model_and_scores_every_output_again)
{
    char *id = start(THREE);
    json_t *source = wait_terminal(id);
    long before = stub_requests();
    char path[256], body[512];
    long st = 0;

    /* Refusals name the field and write nothing. */
    long experiments = count_rows("experiments");
    snprintf(path, sizeof(path), "/v1/experiments/%s/rescore", id);
    refused("POST", path, "{}", 400, "evaluator is required");
    refused("POST", path, "{\"evaluator\":{\"function_id\":\"eval::assert::exact\"},\"x\":1}", 400,
            "x is not a known field");
    refused("POST", path, "{\"evaluator\":{\"function_id\":\"no::such\"}}", 400,
            "evaluator.function_id no::such is neither a built-in evaluator nor a registered tool");
    refused("POST", path,
            "{\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":"
            "{\"expected\":\"{{nope}}\"}}}",
            400, "case q1: template variable nope is not defined");
    refused("POST", "/v1/experiments/exp_0123456789abcdef0123456789abcdef/rescore",
            "{\"evaluator\":{\"function_id\":\"eval::assert::exact\"}}", 404,
            "experiment not found: exp_0123456789abcdef0123456789abcdef");
    ck_assert_int_eq(count_rows("experiments"), experiments);

    /* A judge that wants "no": every "no" passes now. Control: q1 0/2, q2 1/2, q3 2/2 (mean
     * 0.5); treatment never says no (0): d = 0, −0.5, −1, delta −0.5. */
    snprintf(body, sizeof(body),
             "{\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":"
             "{\"expected\":\"no\"}}}");
    json_t *r = call("POST", path, body, &st);
    ck_assert_int_eq(st, 202);
    ASSERT_STR(r, "source_experiment_id", id);
    char *rid = strdup(json_string_value(json_object_get(r, "experiment_id")));
    json_decref(r);
    json_t *doc = wait_terminal(rid);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_STR(doc, "source_experiment_id", id);
    ASSERT_STR(doc, "derivation", "rescore");
    ASSERT_STR(doc, "request.evaluator.arguments.expected", "no");
    ASSERT_NEAR(doc, "arms.0.pass_rate", 0.5);
    ASSERT_NEAR(doc, "arms.1.pass_rate", 0.0);
    ASSERT_NEAR(doc, "comparisons.0.pass_rate.delta", -0.5);
    ASSERT_INT(doc, "progress.terminal_runs", 12);
    ASSERT_INT(doc, "progress.passed_runs", 3);
    /* the target's metrics are the stored ones: their comparison is the source's */
    ck_assert(json_equal(at(doc, "comparisons.0.metrics"), at(source, "comparisons.0.metrics")));
    ck_assert(json_is_number(at(doc, "comparisons.0.metrics.total_tokens.delta")));
    json_decref(doc);
    json_decref(source);
    /* not one request reached the model */
    ck_assert_int_eq(stub_requests(), before);

    /* The runs keep their outputs; each has the new verdict. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=100", rid);
    json_t *runs = call("GET", path, NULL, &st);
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=100", id);
    json_t *old = call("GET", path, NULL, &st);
    ck_assert_uint_eq(json_array_size(json_object_get(runs, "runs")), 12);
    size_t i;
    json_t *run;
    json_array_foreach(json_object_get(runs, "runs"), i, run)
    {
        json_t *o = json_array_get(json_object_get(old, "runs"), i);
        const char *out = json_string_value(json_object_get(run, "output"));
        ck_assert_ptr_nonnull(out);
        ck_assert(json_equal(json_object_get(run, "output"), json_object_get(o, "output")));
        ck_assert(json_equal(json_object_get(run, "benchmark"), json_object_get(o, "benchmark")));
        ck_assert_int_eq(json_is_true(json_object_get(run, "passed")), strcmp(out, "no") == 0);
        ck_assert_int_eq(json_is_true(json_object_get(o, "passed")), strcmp(out, "yes") == 0);
    }
    json_decref(runs);
    json_decref(old);

    /* The two evaluators disagree on every run: this one passes the 3 "no" runs the source
     * failed and fails its 9 passes. p_o = 0; margins (this) 3/12 pass, (source) 9/12 pass;
     * p_e = 1/4 · 3/4 + 3/4 · 1/4 = 3/8; κ = (0 − 3/8)/(5/8) = −3/5. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/agreement", rid);
    json_t *ag = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_INT(ag, "reviewed_runs", 0);
    ASSERT_STR(ag, "source_agreement.source_experiment_id", id);
    ASSERT_INT(ag, "source_agreement.runs", 12);
    ASSERT_INT(ag, "source_agreement.table.pass_fail", 3);
    ASSERT_INT(ag, "source_agreement.table.fail_pass", 9);
    ASSERT_NEAR(ag, "source_agreement.agreement", 0.0);
    ASSERT_NEAR(ag, "source_agreement.kappa", -0.6);
    json_decref(ag);
    free(rid);
    free(id);
}
END_TEST

START_TEST(retry_runs_exactly_the_failed_runs)
{
    char *id = start(TWO);
    json_t *doc = wait_terminal(id);
    /* r2's treatment failed at the provider, before any verdict: three runs passed */
    ASSERT_INT(doc, "progress.terminal_runs", 4);
    ASSERT_INT(doc, "progress.passed_runs", 3);
    ASSERT_INT(doc, "comparisons.0.paired_cases", 1);
    json_decref(doc);
    char path[256];
    long st = 0;
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=100", id);
    json_t *src = call("GET", path, NULL, &st);
    long before = stub_requests();

    snprintf(path, sizeof(path), "/v1/experiments/%s/retry", id);
    refused("POST", path, "{\"only\":\"failed\"}", 400, "only is not a known field");
    json_t *r = call("POST", path, "{}", &st);
    ck_assert_int_eq(st, 202);
    ASSERT_INT(r, "retried_runs", 1);
    char *rid = strdup(json_string_value(json_object_get(r, "experiment_id")));
    json_decref(r);
    doc = wait_terminal(rid);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_INT(doc, "retried_runs", 1);
    ASSERT_STR(doc, "source_experiment_id", id);
    ASSERT_INT(doc, "progress.failed_runs", 0);
    ASSERT_INT(doc, "progress.passed_runs", 4);
    ASSERT_NEAR(doc, "arms.1.pass_rate", 1.0);
    ASSERT_INT(doc, "comparisons.0.paired_cases", 2);
    json_decref(doc);
    /* exactly one more model request: the failed run, now answered */
    ck_assert_int_eq(stub_requests(), before + 1);

    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=100", rid);
    json_t *runs = call("GET", path, NULL, &st);
    ck_assert_uint_eq(json_array_size(json_object_get(runs, "runs")), 4);
    size_t i;
    json_t *run;
    json_array_foreach(json_object_get(runs, "runs"), i, run)
    {
        json_t *old = json_array_get(json_object_get(src, "runs"), i);
        const char *rid_i = json_string_value(json_object_get(run, "run_id"));
        ASSERT_STR(old, "run_id", rid_i);
        if (strcmp(rid_i, "case2-arm1-rep1") == 0) {
            ASSERT_STR(old, "status", "failed");
            ASSERT_STR(run, "status", "completed");
            ASSERT_STR(run, "retried_from", "case2-arm1-rep1");
        } else {
            /* kept as it was: same result, same completion time */
            ck_assert(json_is_null(json_object_get(run, "retried_from")));
            ck_assert(json_equal(json_object_get(run, "completed_at"),
                                 json_object_get(old, "completed_at")));
            ck_assert(json_equal(json_object_get(run, "passed"), json_object_get(old, "passed")));
        }
    }
    json_decref(runs);
    json_decref(src);

    /* A retry of the retry has nothing left to run again */
    snprintf(path, sizeof(path), "/v1/experiments/%s/retry", rid);
    r = call("POST", path, NULL, &st);
    ck_assert_int_eq(st, 202);
    ASSERT_INT(r, "retried_runs", 0);
    char *rid2 = strdup(json_string_value(json_object_get(r, "experiment_id")));
    json_decref(r);
    doc = wait_terminal(rid2);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_INT(doc, "progress.passed_runs", 4);
    json_decref(doc);
    ck_assert_int_eq(stub_requests(), before + 1);
    free(rid2);
    free(rid);
    free(id);
}
END_TEST

START_TEST(derivations_of_a_live_experiment_conflict)
{
    /* A slow experiment: the stub stalls every answer until it is cancelled. */
    ck_assert_int_eq(evd_t_stub_script(&stub, "{\"default\":{\"latency_ms\":20000,"
                                              "\"reply\":{\"text\":\"late\"}}}"),
                     200);
    char *id = start(TWO);
    char path[256], detail[256];
    snprintf(detail, sizeof(detail),
             "experiment %s has not finished; only a finished experiment can be re-scored or "
             "retried",
             id);
    long experiments = count_rows("experiments");
    snprintf(path, sizeof(path), "/v1/experiments/%s/retry", id);
    refused("POST", path, "{}", 409, detail);
    snprintf(path, sizeof(path), "/v1/experiments/%s/rescore", id);
    refused("POST", path, "{\"evaluator\":{\"function_id\":\"eval::assert::exact\"}}", 409, detail);
    ck_assert_int_eq(count_rows("experiments"), experiments);
    /* a run without output cannot be reviewed */
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs/case1-arm0-rep1/review", id);
    refused("PUT", path, "{\"verdict\":\"pass\",\"reviewer\":\"ann\"}", 409,
            "run case1-arm0-rep1 has no output to review (it is not finished, or failed before "
            "its output)");
    ck_assert_int_eq(count_rows("experiment_reviews"), 0);
    snprintf(path, sizeof(path), "/v1/experiments/%s/cancel", id);
    long st = 0;
    json_decref(call("POST", path, NULL, &st));
    free(id);
}
END_TEST

START_TEST(rescore_by_agent_review_counts_the_judge_apart)
{
    char *id = start(THREE);
    json_decref(wait_terminal(id));
    long target = stub_api_requests("responses") + stub_api_requests("chat");
    long judge = stub_api_requests("messages");
    ck_assert_int_eq(judge, 0);
    /* The reviewer (Anthropic Messages) says GREEN with 100 + 20 tokens every time. */
    char script[2048];
    snprintf(script, sizeof(script),
             "{\"rules\":[{\"when\":{\"api\":\"messages\"},\"reply\":{\"json\":{\"result\":"
             "{\"verdict\":\"GREEN\",\"verdictFields\":{\"covered\":[\"answer\"]}}}},"
             "\"usage\":{\"input_tokens\":100,\"output_tokens\":20}}]}");
    ck_assert_int_eq(evd_t_stub_script(&stub, script), 200);
    char path[256];
    snprintf(path, sizeof(path), "/v1/experiments/%s/rescore", id);
    long st = 0;
    json_t *r = call("POST", path,
                     "{\"evaluator\":{\"function_id\":\"eval::assert::agent_review\","
                     "\"arguments\":{\"model\":\"claude-reviewer\",\"provider\":\"anthropic\","
                     "\"instructions\":\"The answer must be yes or no.\",\"green_schema\":"
                     "{\"properties\":{\"covered\":{\"type\":\"array\",\"items\":{\"type\":"
                     "\"string\"}}},\"required\":[\"covered\"]},\"red_schema\":{\"properties\":"
                     "{\"why\":{\"type\":\"string\"}},\"required\":[\"why\"]}}}}",
                     &st);
    if (st != 202)
        evd_t_dump_log(&evald);
    ck_assert_int_eq(st, 202);
    char *rid = strdup(json_string_value(json_object_get(r, "experiment_id")));
    json_decref(r);
    json_t *doc = wait_terminal(rid);
    ASSERT_STR(doc, "status", "completed");
    /* every run passed (GREEN); the judge used 120 tokens a run in both arms */
    ASSERT_INT(doc, "progress.passed_runs", 12);
    ASSERT_NEAR(doc, "arms.0.medians.judge_total_tokens", 120);
    ASSERT_NEAR(doc, "arms.1.medians.judge_total_tokens", 120);
    ASSERT_INT(doc, "comparisons.0.metrics.judge_total_tokens.cases", 3);
    ASSERT_NEAR(doc, "comparisons.0.metrics.judge_total_tokens.delta", 0.0);
    json_decref(doc);
    /* one review a run reached the reviewer's API; the target's APIs saw nothing */
    ck_assert_int_eq(stub_api_requests("messages"), 12);
    ck_assert_int_eq(stub_api_requests("responses") + stub_api_requests("chat"), target);
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=1", rid);
    json_t *runs = call("GET", path, NULL, &st);
    ASSERT_INT(runs, "runs.0.benchmark.judge_total_tokens", 120);
    ck_assert_ptr_nonnull(at(runs, "runs.0.benchmark.total_tokens"));
    ck_assert(json_is_object(at(runs, "runs.0.transcript.evaluator")));
    json_decref(runs);
    free(rid);
    free(id);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reviews");
    TCase *tc = tcase_create("reviews");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, review_validation_names_the_field_and_writes_nothing);
    tcase_add_test(tc, queue_reviews_agreement_and_the_human_analysis);
    tcase_add_test(tc, rescore_calls_no_model_and_scores_every_output_again);
    tcase_add_test(tc, retry_runs_exactly_the_failed_runs);
    tcase_add_test(tc, rescore_by_agent_review_counts_the_judge_apart);
    tcase_add_test(tc, derivations_of_a_live_experiment_conflict);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
