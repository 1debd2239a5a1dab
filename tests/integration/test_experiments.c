/*
 * Experiments end to end (/v1/experiments): the real evald and evald-stub over loopback
 * against a throwaway PostgreSQL per test. The stub is scripted per case and arm (and, with
 * `times`, per repeat: a case's runs reach it one after another), so every pass count,
 * analysis number, run order and row below follows from the script and is worked out by
 * hand in the comments. Also: every validation message of the spec with nothing written,
 * inline cases that make a dataset, the body limit of the upload route, cancel, delete,
 * lists, filters, exports, the events stream, 404s and the session ids' comparison.
 */
#define _GNU_SOURCE /* asprintf, strndup */
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
static char env_base[300];

#define U_C "\"usage\":{\"input_tokens\":10,\"output_tokens\":2}" /* control: 12 tokens */
#define U_T "\"usage\":{\"input_tokens\":10,\"output_tokens\":4}" /* treatment: 14 tokens */
#define LAT "\"latency_ms\":100,"

/*
 * Answers "yes" (a pass: every case expects "yes") or "no" per case and arm; a rule with
 * "times": 1 answers only the arm's first run on that case (repeat 1), the next rule the
 * later ones. Passes by repeat (1, 2):
 *   q1  control no  no    treatment yes no
 *   q2  control yes no    treatment yes yes
 *   q3  control no  no    treatment yes yes
 *   q4  control no  yes   treatment yes yes
 *   q5  control yes yes   treatment yes yes
 * Prompts starting "slow " take 5 s (the cancel test).
 */
static const char SCRIPT[] =
    "{\"rules\":["
    "{\"when\":{\"prompt_contains\":\"slow \"},\"latency_ms\":5000,\"reply\":{\"text\":\"late\"}},"
    "{\"when\":{\"prompt_contains\":\"treatment q1:\"},\"times\":1," LAT
    "\"reply\":{\"text\":\"yes\"}," U_T "},"
    "{\"when\":{\"prompt_contains\":\"control q2:\"},\"times\":1," LAT
    "\"reply\":{\"text\":\"yes\"}," U_C "},"
    "{\"when\":{\"prompt_contains\":\"treatment q2:\"}," LAT "\"reply\":{\"text\":\"yes\"}," U_T
    "},"
    "{\"when\":{\"prompt_contains\":\"treatment q3:\"}," LAT "\"reply\":{\"text\":\"yes\"}," U_T
    "},"
    "{\"when\":{\"prompt_contains\":\"control q4:\"},\"times\":1," LAT
    "\"reply\":{\"text\":\"no\"}," U_C "},"
    "{\"when\":{\"prompt_contains\":\"control q4:\"}," LAT "\"reply\":{\"text\":\"yes\"}," U_C "},"
    "{\"when\":{\"prompt_contains\":\"treatment q4:\"}," LAT "\"reply\":{\"text\":\"yes\"}," U_T
    "},"
    "{\"when\":{\"prompt_contains\":\"control q5:\"}," LAT "\"reply\":{\"text\":\"yes\"}," U_C "},"
    "{\"when\":{\"prompt_contains\":\"treatment q5:\"}," LAT "\"reply\":{\"text\":\"yes\"}," U_T
    "},"
    "{\"when\":{\"prompt_contains\":\"treatment \"}," LAT "\"reply\":{\"text\":\"no\"}," U_T "},"
    "{\"when\":{\"prompt_contains\":\"control \"}," LAT "\"reply\":{\"text\":\"no\"}," U_C "}"
    "]}";

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
static const char FULL[] = "{\"name\":\"hand-worked\",\"dimension\":\"prompt\"," MODEL "," ARMS
                           "," EXACT ",\"repeats\":2,\"concurrency\":5,"
                           "\"analysis\":{\"alpha\":0.05,\"min_effect\":0.1},"
                           "\"cases\":" FIVE_CASES "}";

static void start_evald(char *const extra[])
{
    char *env[16] = {env_base,
                     "OPENAI_API_KEY=stub-key",
                     "EVALD_SWEEP_INTERVAL_MS=300",
                     "EVALD_LEASE_MS=1500",
                     "EVALD_MAX_RUNS=5",
                     "EVALD_MAX_EXPERIMENT_RUNS=60",
                     "EVALD_MAX_DATASET_CASES=50",
                     "EVALD_MAX_DATASET_BYTES=65536"};
    size_t n = 8;
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 15; i++)
        env[n++] = extra[i];
    env[n] = NULL;
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
}

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, SCRIPT, NULL), 0);
    snprintf(env_base, sizeof(env_base), "OPENAI_BASE_URL=%s/v1", stub.base);
    start_evald(NULL);
}

static void teardown(void)
{
    evd_t_stop(&evald, SIGTERM, 10000);
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
}

/* ---- helpers ------------------------------------------------------------------------------- */

static void request(const char *method, const char *path, const char *ct, const char *body,
                    size_t len, struct evd_t_resp *r)
{
    char url[1024], hdr[160];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    snprintf(hdr, sizeof(hdr), "Content-Type: %s", ct ? ct : "application/json");
    const char *headers[] = {hdr, NULL};
    evd_t_http(method, url, body ? headers : NULL, body, len, r);
}

/* The JSON answer (new reference) of METHOD path; *status gets the status. */
static json_t *call(const char *method, const char *path, const char *body, long *status)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    return evd_t_http_json(method, url, body, status);
}

/* Starts an experiment; its id (malloc'd). */
static char *start(const char *body)
{
    struct evd_t_resp r;
    request("POST", "/v1/experiments", NULL, body, strlen(body), &r);
    if (r.status != 202)
        evd_t_dump_log(&evald);
    ck_assert_msg(r.status == 202, "start answered %ld: %s", r.status, r.body);
    const char *id = json_string_value(json_object_get(r.json, "experiment_id"));
    ck_assert_ptr_nonnull(id);
    ck_assert_uint_eq(strlen(id), 36);
    ck_assert(strncmp(id, "exp_", 4) == 0);
    ck_assert_str_eq(json_string_value(json_object_get(r.json, "status")), "queued");
    char loc[128];
    snprintf(loc, sizeof(loc), "/v1/experiments/%s", id);
    ck_assert_str_eq(r.location, loc);
    char *out = strdup(id);
    evd_t_resp_free(&r);
    return out;
}

static bool terminal(const char *st)
{
    return st && (!strcmp(st, "completed") || !strcmp(st, "cancelled") || !strcmp(st, "failed"));
}

/* Polls the experiment until it is terminal; its document (new reference). */
static json_t *wait_terminal(const char *id, int timeout_ms)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    int64_t deadline = evd_mono_ms() + timeout_ms;
    for (;;) {
        long st = 0;
        json_t *doc = call("GET", path, NULL, &st);
        ck_assert_msg(st == 200, "GET %s answered %ld", path, st);
        if (terminal(json_string_value(json_object_get(doc, "status"))))
            return doc;
        json_decref(doc);
        if (evd_mono_ms() > deadline) {
            evd_t_dump_log(&evald);
            ck_abort_msg("experiment %s not terminal after %d ms", id, timeout_ms);
        }
        usleep(100 * 1000);
    }
}

/* The events of a finished text/event-stream body: [{event, data}] (new reference). */
static json_t *parse_events(const char *body)
{
    json_t *out = json_array();
    const char *p = body;
    while (p && *p) {
        const char *end = strstr(p, "\n\n");
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *block = strndup(p, len);
        char *ev = strstr(block, "event: "), *data = strstr(block, "data: ");
        if (ev && data) {
            char *nl = strchr(ev, '\n');
            if (nl)
                *nl = '\0';
            json_array_append_new(out, json_pack("{s:s, s:o}", "event", ev + 7, "data",
                                                 json_loads(data + 6, 0, NULL)));
        }
        free(block);
        p = end ? end + 2 : NULL;
    }
    return out;
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
        ck_assert_msg(fabs(got_ - want_) <= 1e-6 + 1e-6 * fabs(want_), "%s = %.12g, want %.12g",   \
                      (dotted), got_, want_);                                                      \
    } while (0)

#define ASSERT_NULL(v, dotted)                                                                     \
    ck_assert_msg(json_is_null(at((v), (dotted))), "%s is not null", (dotted))

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

static size_t list_size(const char *path, const char *member)
{
    long st = 0;
    json_t *j = call("GET", path, NULL, &st);
    ck_assert_msg(st == 200, "GET %s answered %ld", path, st);
    size_t n = json_array_size(json_object_get(j, member));
    json_decref(j);
    return n;
}

/* ---- the whole run of a small experiment ---------------------------------------------------- */

/* Passes of (case 1..5, arm 0..1, repeat 1..2) as the script answers them. */
static const int PASS[5][2][2] = {
    {{0, 0}, {1, 0}}, {{1, 0}, {1, 1}}, {{0, 0}, {1, 1}}, {{0, 1}, {1, 1}}, {{1, 1}, {1, 1}}};

START_TEST(a_small_experiment_runs_to_its_hand_worked_analysis)
{
    char *id = start(FULL);
    /* Follow it live: progress events, then exactly one status event, the last. */
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/experiments/%s/events", evald.base, id);
    struct evd_t_resp stream;
    evd_t_http_timed("GET", url, NULL, NULL, 0, 60000, &stream);
    ck_assert_int_eq(stream.status, 200);
    ck_assert_int_eq(stream.curl_code, 0);
    ck_assert_str_eq(stream.content_type, "text/event-stream");
    json_t *events = parse_events(stream.body);
    size_t nev = json_array_size(events);
    ck_assert_msg(nev >= 2, "only %zu events: %s", nev, stream.body);
    for (size_t i = 0; i + 1 < nev; i++) {
        json_t *e = json_array_get(events, i);
        ASSERT_STR(e, "event", "progress");
        ASSERT_STR(e, "data.experiment_id", id);
        ck_assert(!terminal(json_string_value(at(e, "data.status"))));
        ck_assert(json_is_true(at(e, "data.analysis.partial")));
    }
    json_t *last = json_array_get(events, nev - 1);
    ASSERT_STR(last, "event", "status");
    ASSERT_STR(last, "data.status", "completed");
    ASSERT_INT(last, "data.progress.total_runs", 20);
    ASSERT_INT(last, "data.progress.terminal_runs", 20);
    ck_assert(json_is_false(at(last, "data.analysis.partial")));
    json_decref(events);
    evd_t_resp_free(&stream);

    json_t *doc = wait_terminal(id, 60000);
    ASSERT_STR(doc, "experiment_id", id);
    ASSERT_STR(doc, "name", "hand-worked");
    ASSERT_STR(doc, "status", "completed");
    ck_assert(json_is_integer(at(doc, "created_at")) && json_is_integer(at(doc, "updated_at")));
    ck_assert(json_integer_value(at(doc, "completed_at")) >=
              json_integer_value(at(doc, "created_at")));
    ASSERT_INT(doc, "request.repeats", 2);
    ASSERT_INT(doc, "request.concurrency", 5);
    ASSERT_STR(doc, "request.control.label", "A"); /* default labels in arm order */
    ASSERT_STR(doc, "request.treatments.0.label", "B");
    ASSERT_INT(doc, "dataset.case_count", 5);
    ck_assert(strncmp(json_string_value(at(doc, "dataset.dataset_id")), "ds_", 3) == 0);
    /* 5 cases × 2 arms × 2 repeats; 13 passes (the table above), 7 evaluated failures. */
    ASSERT_INT(doc, "progress.total_runs", 20);
    ASSERT_INT(doc, "progress.terminal_runs", 20);
    ASSERT_INT(doc, "progress.passed_runs", 13);
    ASSERT_INT(doc, "progress.failed_runs", 7);

    /* Arms. Control case pass rates s = 0, .5, 0, .5, 1 → mean 0.4, pooled 4/10; flaky on
     * q2 and q4. Treatment s = .5, 1, 1, 1, 1 → 0.9, pooled 9/10; flaky on q1. Wilson at
     * 95 % (z = 1.959964): 4/10 → [0.168180, 0.687326], 9/10 → [0.595850, 0.982124].
     * Order: the control runs first in repeat 1 (passes at repeat 1: q2, q5 → 2 of 5) and
     * later in repeat 2 (q4, q5 → 2 of 5); the treatment first in repeat 2 (4 of 5), later
     * in repeat 1 (5 of 5). */
    ck_assert_uint_eq(json_array_size(at(doc, "arms")), 2);
    ASSERT_INT(doc, "arms.0.index", 0);
    ASSERT_STR(doc, "arms.0.role", "control");
    ASSERT_STR(doc, "arms.0.label", "A");
    ASSERT_NEAR(doc, "arms.0.pass_rate", 0.4);
    ASSERT_INT(doc, "arms.0.pooled.passed", 4);
    ASSERT_INT(doc, "arms.0.pooled.evaluated", 10);
    ASSERT_NEAR(doc, "arms.0.pooled.wilson_low", 0.16818032970623614);
    ASSERT_NEAR(doc, "arms.0.pooled.wilson_high", 0.6873262302663417);
    ASSERT_INT(doc, "arms.0.evaluated_cases", 5);
    ASSERT_INT(doc, "arms.0.flaky_cases", 2);
    ASSERT_INT(doc, "arms.0.order.first_passed", 2);
    ASSERT_INT(doc, "arms.0.order.first_runs", 5);
    ASSERT_INT(doc, "arms.0.order.later_passed", 2);
    ASSERT_INT(doc, "arms.0.order.later_runs", 5);
    ASSERT_NEAR(doc, "arms.0.medians.total_tokens", 12);
    ASSERT_INT(doc, "arms.1.index", 1);
    ASSERT_STR(doc, "arms.1.role", "treatment");
    ASSERT_STR(doc, "arms.1.label", "B");
    ASSERT_NEAR(doc, "arms.1.pass_rate", 0.9);
    ASSERT_INT(doc, "arms.1.pooled.passed", 9);
    ASSERT_INT(doc, "arms.1.pooled.evaluated", 10);
    ASSERT_NEAR(doc, "arms.1.pooled.wilson_low", 0.5958499732047615);
    ASSERT_NEAR(doc, "arms.1.pooled.wilson_high", 0.9821237869049271);
    ASSERT_INT(doc, "arms.1.flaky_cases", 1);
    ASSERT_INT(doc, "arms.1.order.first_passed", 4);
    ASSERT_INT(doc, "arms.1.order.first_runs", 5);
    ASSERT_INT(doc, "arms.1.order.later_passed", 5);
    ASSERT_INT(doc, "arms.1.order.later_runs", 5);
    ASSERT_NEAR(doc, "arms.1.medians.total_tokens", 14);

    /* The comparison. d = s_t − s_c = .5, .5, 1, .5, 0: n = 5, d̄ = 0.5; deviations 0, 0,
     * .5, 0, −.5 → Σ = 0.5, sd = √(0.5/4) = 0.353553, se = sd/√5 = 0.158114, df = 4.
     * One treatment: α' = 0.05, t(0.975, 4) = 2.776445 → CI = 0.5 ∓ 0.438995 =
     * [0.061005, 0.938995]: above 0, so `better`. t = d̄/se = 3.162278 on 4 df: two-sided
     * p = 0.034109 (for 4 df F(t) = ½ + ½ sinθ (1 + ½ cos²θ), tanθ = t/2); one treatment,
     * so adjusted p = p. Sign test: 4 wins, 0 losses, 1 tie → p = 2 · C(4,0)/2⁴ = 0.125.
     * mde = (t(0.975, 4) + t(0.8, 4)) · se = (2.776445 + 0.940965) · 0.158114 = 0.587774;
     * cases_needed = ⌈5 · (0.587774/0.1)²⌉ = ⌈172.74⌉ = 173. Not eligible: a treatment run
     * failed. Tokens: every case's medians are 12 and 14 → delta 2, se 0, CI [2, 2],
     * relative 2/12. */
    ck_assert_uint_eq(json_array_size(at(doc, "comparisons")), 1);
    json_t *c = at(doc, "comparisons.0");
    ASSERT_INT(c, "treatment", 1);
    ASSERT_STR(c, "label", "B");
    ASSERT_INT(c, "paired_cases", 5);
    ASSERT_INT(c, "unpaired_cases", 0);
    ASSERT_NEAR(c, "pass_rate.control", 0.4);
    ASSERT_NEAR(c, "pass_rate.treatment", 0.9);
    ASSERT_NEAR(c, "pass_rate.delta", 0.5);
    ASSERT_NEAR(c, "pass_rate.se", 0.15811388300841897);
    ASSERT_INT(c, "pass_rate.df", 4);
    ASSERT_NEAR(c, "pass_rate.ci_low", 0.06100548345745893);
    ASSERT_NEAR(c, "pass_rate.ci_high", 0.9389945165425411);
    ASSERT_NEAR(c, "pass_rate.t_p_value", 0.034109423167409725);
    ASSERT_NEAR(c, "pass_rate.p_value_adjusted", 0.034109423167409725);
    ASSERT_INT(c, "pass_rate.sign_test.wins", 4);
    ASSERT_INT(c, "pass_rate.sign_test.losses", 0);
    ASSERT_INT(c, "pass_rate.sign_test.ties", 1);
    ASSERT_NEAR(c, "pass_rate.sign_test.p_value", 0.125);
    ASSERT_NEAR(c, "pass_rate.mde", 0.5877740796225709);
    ASSERT_INT(c, "pass_rate.cases_needed", 173);
    ASSERT_STR(c, "verdict", "better");
    ck_assert(json_is_false(at(c, "eligible")));
    ASSERT_INT(c, "metrics.total_tokens.cases", 5);
    ASSERT_NEAR(c, "metrics.total_tokens.delta", 2);
    ASSERT_NEAR(c, "metrics.total_tokens.se", 0);
    ASSERT_NEAR(c, "metrics.total_tokens.ci_low", 2);
    ASSERT_NEAR(c, "metrics.total_tokens.ci_high", 2);
    ASSERT_NEAR(c, "metrics.total_tokens.relative", 2.0 / 12.0);
    ASSERT_NEAR(doc, "analysis.alpha", 0.05);
    ASSERT_NEAR(doc, "analysis.alpha_adjusted", 0.05);
    ASSERT_NEAR(doc, "analysis.min_effect", 0.1);
    ASSERT_NULL(doc, "analysis.cluster_by");
    ASSERT_NULL(doc, "analysis.clusters");
    ck_assert(json_is_false(at(doc, "analysis.partial")));

    /* Runs, in case then position order. With two arms repeat 1 runs control then
     * treatment, repeat 2 treatment then control: positions 1..4 are (arm, repeat)
     * (0,1), (1,1), (1,2), (0,2). The session id is <experiment_id>_<case>_<arm>_<repeat>. */
    char path[512];
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=100", id);
    long st = 0;
    json_t *page = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    json_t *runs = json_object_get(page, "runs");
    ck_assert_uint_eq(json_array_size(runs), 20);
    ck_assert_ptr_null(json_object_get(page, "next_cursor"));
    static const int ARM_AT[4] = {0, 1, 1, 0}, REPEAT_AT[4] = {1, 1, 2, 2};
    for (size_t i = 0; i < 20; i++) {
        json_t *r = json_array_get(runs, i);
        int ci = (int)(i / 4) + 1, pos = (int)(i % 4) + 1;
        int arm = ARM_AT[pos - 1], rep = REPEAT_AT[pos - 1];
        char case_id[8], sid[96];
        snprintf(case_id, sizeof(case_id), "q%d", ci);
        snprintf(sid, sizeof(sid), "%s_%d_%d_%d", id, ci, arm, rep);
        ck_assert_ptr_nonnull(json_string_value(json_object_get(r, "run_id")));
        ASSERT_STR(r, "session_id", sid);
        ASSERT_STR(r, "case_id", case_id);
        ASSERT_INT(r, "case_index", ci);
        ASSERT_INT(r, "arm", arm);
        ASSERT_INT(r, "repeat", rep);
        ASSERT_INT(r, "position", pos);
        ASSERT_STR(r, "status", "completed");
        ck_assert_msg(json_boolean_value(json_object_get(r, "passed")) ==
                          (PASS[ci - 1][arm][rep - 1] == 1),
                      "run %s passed is wrong", sid);
        ASSERT_STR(r, "output", PASS[ci - 1][arm][rep - 1] ? "yes" : "no");
    }
    /* Distinct run ids. */
    for (size_t i = 0; i < 20; i++)
        for (size_t j = i + 1; j < 20; j++)
            ck_assert_str_ne(json_string_value(json_object_get(json_array_get(runs, i), "run_id")),
                             json_string_value(json_object_get(json_array_get(runs, j), "run_id")));
    char sid_c[96], sid_t[96];
    snprintf(sid_c, sizeof(sid_c), "%s", json_string_value(at(runs, "0.session_id")));
    snprintf(sid_t, sizeof(sid_t), "%s", json_string_value(at(runs, "1.session_id")));
    json_decref(page);

    /* One case, and pages of three. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?case_id=q3", id);
    page = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(page, "runs")), 4);
    ASSERT_STR(page, "runs.0.case_id", "q3");
    ASSERT_STR(page, "runs.3.case_id", "q3");
    json_decref(page);
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?case_id=nope", id);
    ck_assert_uint_eq(list_size(path, "runs"), 0);
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=3", id);
    page = call("GET", path, NULL, &st);
    ck_assert_uint_eq(json_array_size(json_object_get(page, "runs")), 3);
    const char *cursor = json_string_value(json_object_get(page, "next_cursor"));
    ck_assert_ptr_nonnull(cursor);
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=3&before=%s", id, cursor);
    json_decref(page);
    page = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_STR(page, "runs.0.case_id", "q1");
    ASSERT_INT(page, "runs.0.position", 4);
    json_decref(page);

    /* The run session ids are sessions the comparison accepts. */
    snprintf(path, sizeof(path), "/v1/sessions/compare?ids=%s,%s", sid_c, sid_t);
    json_t *cmp = call("GET", path, NULL, &st);
    ck_assert_msg(st == 200, "compare answered %ld", st);
    ck_assert_uint_eq(json_array_size(json_object_get(cmp, "sessions")), 2);
    ASSERT_STR(cmp, "baseline_session_id", sid_c);
    ASSERT_STR(cmp, "sessions.0.session_id", sid_c);
    ASSERT_STR(cmp, "sessions.1.session_id", sid_t);
    json_decref(cmp);

    json_decref(doc);
    free(id);
}
END_TEST

/* The case rows of the hand-worked experiment, their filters, and the exports. */
START_TEST(case_rows_filters_and_exports)
{
    char *id = start(FULL);
    json_decref(wait_terminal(id, 60000));
    char path[512];
    long st = 0;
    snprintf(path, sizeof(path), "/v1/experiments/%s/cases", id);
    json_t *page = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    json_t *cases = json_object_get(page, "cases");
    ck_assert_uint_eq(json_array_size(cases), 5);
    for (size_t i = 0; i < 5; i++) {
        json_t *row = json_array_get(cases, i);
        char cid[8];
        snprintf(cid, sizeof(cid), "q%zu", i + 1);
        ASSERT_STR(row, "case_id", cid);
        ASSERT_INT(row, "case_index", (long long)i + 1);
        ASSERT_STR(row, "vars.tag", cid);
        ASSERT_STR(row, "expected", "yes");
        ck_assert_uint_eq(json_array_size(json_object_get(row, "arms")), 2);
        bool flaky = false;
        for (int a = 0; a < 2; a++) {
            char k[32];
            int passed = PASS[i][a][0] + PASS[i][a][1];
            snprintf(k, sizeof(k), "arms.%d.index", a);
            ASSERT_INT(row, k, a);
            snprintf(k, sizeof(k), "arms.%d.passed", a);
            ASSERT_INT(row, k, passed);
            snprintf(k, sizeof(k), "arms.%d.evaluated", a);
            ASSERT_INT(row, k, 2);
            snprintf(k, sizeof(k), "arms.%d.runs", a);
            ASSERT_INT(row, k, 2);
            flaky |= passed == 1;
        }
        ck_assert_msg(json_boolean_value(json_object_get(row, "flaky")) == flaky, "%s flaky", cid);
    }
    json_decref(page);

    /* flaky: q1 (treatment 1/2), q2 and q4 (control 1/2). disagree: the arms' case pass
     * rates differ everywhere but on q5 (both 2/2). */
    static const char *const FLAKY[] = {"q1", "q2", "q4"};
    static const char *const DISAGREE[] = {"q1", "q2", "q3", "q4"};
    for (int f = 0; f < 2; f++) {
        snprintf(path, sizeof(path), "/v1/experiments/%s/cases?filter=%s", id,
                 f ? "disagree" : "flaky");
        page = call("GET", path, NULL, &st);
        ck_assert_int_eq(st, 200);
        cases = json_object_get(page, "cases");
        size_t want = f ? 4 : 3;
        ck_assert_uint_eq(json_array_size(cases), want);
        for (size_t i = 0; i < want; i++)
            ck_assert_str_eq(
                json_string_value(json_object_get(json_array_get(cases, i), "case_id")),
                f ? DISAGREE[i] : FLAKY[i]);
        json_decref(page);
    }
    snprintf(path, sizeof(path), "/v1/experiments/%s/cases?filter=odd", id);
    page = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 400);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(page, "detail")), "filter"));
    json_decref(page);
    /* Pages of two in dataset order. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/cases?limit=2", id);
    page = call("GET", path, NULL, &st);
    ck_assert_uint_eq(json_array_size(json_object_get(page, "cases")), 2);
    snprintf(path, sizeof(path), "/v1/experiments/%s/cases?limit=2&before=%s", id,
             json_string_value(json_object_get(page, "next_cursor")));
    json_decref(page);
    page = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_STR(page, "cases.0.case_id", "q3");
    json_decref(page);
    snprintf(path, sizeof(path), "/v1/experiments/%s/cases?limit=101", id);
    page = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 400);
    ASSERT_STR(page, "detail", "limit must be between 1 and 100");
    json_decref(page);

    /* JSON lines: one record per run with the fields of the spec. */
    struct evd_t_resp r;
    snprintf(path, sizeof(path), "/v1/experiments/%s/export?format=jsonl", id);
    request("GET", path, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "application/x-ndjson");
    char disp[256], want[256];
    ck_assert(evd_t_resp_header(&r, "Content-Disposition", disp, sizeof(disp)));
    snprintf(want, sizeof(want), "attachment; filename=\"%s.jsonl\"", id);
    ck_assert_str_eq(disp, want);
    static const char *const FIELDS[] = {"experiment_id", "run_id",      "session_id", "case_id",
                                         "case_index",    "arm",         "label",      "repeat",
                                         "position",      "status",      "passed",     "score",
                                         "output",        "total_tokens"};
    size_t lines = 0, passed = 0;
    for (char *save = NULL, *line = strtok_r(r.body, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        json_t *rec = json_loads(line, 0, NULL);
        ck_assert_msg(json_is_object(rec), "not a JSON object: %s", line);
        for (size_t f = 0; f < sizeof(FIELDS) / sizeof(FIELDS[0]); f++)
            ck_assert_msg(json_object_get(rec, FIELDS[f]) != NULL, "%s lacks %s", line, FIELDS[f]);
        ASSERT_STR(rec, "experiment_id", id);
        passed += json_is_true(json_object_get(rec, "passed"));
        lines++;
        json_decref(rec);
    }
    ck_assert_uint_eq(lines, 20);
    ck_assert_uint_eq(passed, 13);
    evd_t_resp_free(&r);

    /* CSV: a header with the same columns, then 20 rows. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/export?format=csv", id);
    request("GET", path, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(strncmp(r.content_type, "text/csv", 8) == 0);
    ck_assert(evd_t_resp_header(&r, "Content-Disposition", disp, sizeof(disp)));
    snprintf(want, sizeof(want), "attachment; filename=\"%s.csv\"", id);
    ck_assert_str_eq(disp, want);
    char *nl = strchr(r.body, '\n');
    ck_assert_ptr_nonnull(nl);
    char *header = strndup(r.body, (size_t)(nl - r.body));
    for (size_t f = 0; f < sizeof(FIELDS) / sizeof(FIELDS[0]); f++) {
        bool found = false;
        char *copy = strdup(header);
        for (char *save = NULL, *col = strtok_r(copy, ",\r", &save); col;
             col = strtok_r(NULL, ",\r", &save))
            found |= strcmp(col, FIELDS[f]) == 0;
        free(copy);
        ck_assert_msg(found, "CSV header %s lacks %s", header, FIELDS[f]);
    }
    free(header);
    size_t rows = 0;
    for (char *p = nl + 1; *p; p++)
        rows += *p == '\n';
    ck_assert_uint_eq(rows, 20); /* the outputs (yes/no) hold no line breaks */
    ck_assert_ptr_nonnull(strstr(r.body, id));
    evd_t_resp_free(&r);

    snprintf(path, sizeof(path), "/v1/experiments/%s/export?format=xml", id);
    page = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 400);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(page, "detail")), "format"));
    json_decref(page);

    /* The events of a finished experiment: its one status event. */
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/experiments/%s/events", evald.base, id);
    evd_t_http_timed("GET", url, NULL, NULL, 0, 20000, &r);
    ck_assert_int_eq(r.status, 200);
    json_t *events = parse_events(r.body);
    ck_assert_uint_eq(json_array_size(events), 1);
    ASSERT_STR(events, "0.event", "status");
    ASSERT_STR(events, "0.data.status", "completed");
    json_decref(events);
    evd_t_resp_free(&r);

    /* Delete: 204, then it is gone everywhere. */
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    request("DELETE", path, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 204);
    ck_assert_uint_eq(r.len, 0);
    evd_t_resp_free(&r);
    json_decref(call("GET", path, NULL, &st));
    ck_assert_int_eq(st, 404);
    request("DELETE", path, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 404);
    evd_t_resp_free(&r);
    free(id);
}
END_TEST

/* ---- inline cases, lists --------------------------------------------------------------------- */

START_TEST(inline_cases_make_a_dataset_and_lists_page_newest_first)
{
    static const char BODY[] = "{\"dimension\":\"prompt\"," MODEL "," ARMS "," EXACT
                               ",\"repeats\":1,\"cases\":[{\"id\":\"q5\",\"vars\":{\"tag\":"
                               "\"q5\",\"question\":\"a\"},\"expected\":\"yes\"},{\"vars\":"
                               "{\"tag\":\"q5\",\"question\":\"b\"}}]}";
    char *a = start(BODY);
    json_t *doc = wait_terminal(a, 60000);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_INT(doc, "dataset.case_count", 2);
    /* The normalized cases, canonical JSON (sorted keys), hashed by hand. */
    const char *canon =
        "[{\"expected\":\"yes\",\"id\":\"q5\",\"metadata\":{},\"vars\":{\"question\":"
        "\"a\",\"tag\":\"q5\"}},{\"expected\":null,\"id\":\"c2\",\"metadata\":{},"
        "\"vars\":{\"question\":\"b\",\"tag\":\"q5\"}}]";
    char sha[65];
    evd_sha256_hex(canon, strlen(canon), sha);
    ASSERT_STR(doc, "dataset.sha256", sha);
    char path[256];
    snprintf(path, sizeof(path), "/v1/datasets/%s",
             json_string_value(at(doc, "dataset.dataset_id")));
    long st = 0;
    json_t *ds = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_INT(ds, "case_count", 2);
    ASSERT_STR(ds, "sha256", sha);
    json_decref(ds);
    /* The second case has no expected: {{expected}} is null there, "yes" is not. */
    ASSERT_INT(doc, "progress.passed_runs", 2);
    json_decref(doc);
    ck_assert_int_eq(count_rows("datasets"), 1);

    /* A second experiment over that dataset by id. */
    char body[2048];
    snprintf(body, sizeof(body),
             "{\"dimension\":\"prompt\"," MODEL "," ARMS "," EXACT
             ",\"repeats\":1,\"dataset_id\":\"%s\"}",
             path + strlen("/v1/datasets/"));
    char *b = start(body);
    json_decref(wait_terminal(b, 60000));
    ck_assert_int_eq(count_rows("datasets"), 1);

    json_t *p1 = call("GET", "/v1/experiments?limit=1", NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(p1, "experiments")), 1);
    json_t *s = at(p1, "experiments.0");
    ASSERT_STR(s, "experiment_id", b);
    ASSERT_STR(s, "status", "completed");
    ASSERT_INT(s, "repeats", 1);
    ASSERT_INT(s, "progress.total_runs", 4);
    const char *cursor = json_string_value(json_object_get(p1, "next_cursor"));
    ck_assert_ptr_nonnull(cursor);
    snprintf(path, sizeof(path), "/v1/experiments?limit=1&before=%s", cursor);
    json_t *p2 = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_STR(p2, "experiments.0.experiment_id", a);
    ck_assert_ptr_null(json_object_get(p2, "next_cursor"));
    json_decref(p1);
    json_decref(p2);
    ck_assert_uint_eq(list_size("/v1/experiments", "experiments"), 2);
    json_t *bad = call("GET", "/v1/experiments?limit=0", NULL, &st);
    ck_assert_int_eq(st, 400);
    ASSERT_STR(bad, "detail", "limit must be between 1 and 100");
    json_decref(bad);
    free(a);
    free(b);
}
END_TEST

/* ---- cancel and delete --------------------------------------------------------------------------
 */

START_TEST(cancel_stops_in_flight_runs_and_delete_waits_for_it)
{
    static const char SLOW[] =
        "{\"dimension\":\"prompt\"," MODEL ",\"control\":{\"prompt\":\"slow control {{tag}}\"},"
        "\"treatments\":[{\"prompt\":\"slow treatment {{tag}}\"}]," EXACT
        ",\"repeats\":2,\"concurrency\":2,\"cases\":" FIVE_CASES "}";
    char *id = start(SLOW);
    /* Wait for the first provider calls (two cases at once). */
    int64_t deadline = evd_mono_ms() + 20000;
    for (;;) {
        json_t *stats = evd_t_stub_stats(&stub);
        json_int_t inflight = json_integer_value(json_object_get(stats, "in_flight"));
        json_decref(stats);
        if (inflight >= 1)
            break;
        ck_assert_msg(evd_mono_ms() < deadline, "no provider call started");
        usleep(50 * 1000);
    }
    char path[256];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    long st = 0;
    json_t *j = call("DELETE", path, NULL, &st);
    ck_assert_int_eq(st, 409);
    ASSERT_STR(j, "code", "conflict");
    json_decref(j);

    snprintf(path, sizeof(path), "/v1/experiments/%s/cancel", id);
    int64_t t0 = evd_mono_ms();
    j = call("POST", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_STR(j, "experiment_id", id);
    ck_assert_ptr_nonnull(json_string_value(json_object_get(j, "status")));
    json_decref(j);
    json_t *doc = wait_terminal(id, 5000);
    ASSERT_STR(doc, "status", "cancelled");
    ck_assert(json_is_false(at(doc, "analysis.partial")));
    ck_assert_int_lt(json_integer_value(at(doc, "progress.passed_runs")), 1);
    json_decref(doc);
    /* The in-flight calls were abandoned within about a second (the stub holds each 5 s). */
    for (;;) {
        json_t *stats = evd_t_stub_stats(&stub);
        json_int_t inflight = json_integer_value(json_object_get(stats, "in_flight"));
        json_decref(stats);
        if (inflight == 0)
            break;
        ck_assert_msg(evd_mono_ms() - t0 < 2500, "provider calls still in flight");
        usleep(50 * 1000);
    }
    ck_assert_int_lt(evd_mono_ms() - t0, 2500);
    /* No run is left running. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=100", id);
    j = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(j, "runs"), i, r)
    {
        const char *s = json_string_value(json_object_get(r, "status"));
        ck_assert_msg(s && strcmp(s, "running") && strcmp(s, "pending"), "run %zu is %s", i, s);
    }
    json_decref(j);
    /* Cancel again: the terminal status is answered as it is. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/cancel", id);
    j = call("POST", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_STR(j, "status", "cancelled");
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    struct evd_t_resp d;
    request("DELETE", path, NULL, NULL, 0, &d);
    ck_assert_int_eq(d.status, 204);
    evd_t_resp_free(&d);
    json_decref(call("GET", path, NULL, &st));
    ck_assert_int_eq(st, 404);
    free(id);
}
END_TEST

/* ---- unknown ids --------------------------------------------------------------------------------
 */

static const char *const UNKNOWN[][2] = {
    {"GET", ""},        {"DELETE", ""},     {"GET", "/cases"},   {"GET", "/runs"},
    {"GET", "/events"}, {"GET", "/export"}, {"POST", "/cancel"},
};

START_TEST(unknown_experiments_are_404)
{
    const char *id = "exp_00000000000000000000000000000000";
    char path[256];
    snprintf(path, sizeof(path), "/v1/experiments/%s%s", id, UNKNOWN[_i][1]);
    struct evd_t_resp r;
    request(UNKNOWN[_i][0], path, NULL, NULL, 0, &r);
    ck_assert_msg(r.status == 404, "%s %s answered %ld: %s", UNKNOWN[_i][0], path, r.status,
                  r.body);
    ck_assert_str_eq(r.content_type, "application/problem+json");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(r.json, "detail")), id));
    evd_t_resp_free(&r);
}
END_TEST

/* ---- refusals -----------------------------------------------------------------------------------
 */

#define BASE_START "{\"dimension\":\"prompt\"," MODEL "," EXACT ","
#define ONE_CASE "\"cases\":[" CASE("q1") "]"

struct refusal {
    const char *ct;
    const char *body;
    long status;
    const char *detail; /* exact; with a leading '~' a substring */
};

static const struct refusal REFUSALS[] = {
    {NULL, BASE_START ARMS "}", 400, "exactly one of dataset_id and cases must be given"},
    {NULL, BASE_START ARMS ",\"dataset_id\":\"DS\"," ONE_CASE "}", 400,
     "exactly one of dataset_id and cases must be given"},
    {NULL, BASE_START "\"control\":{\"prompt\":\"a {{tag}}\"},\"treatments\":[]," ONE_CASE "}", 400,
     "treatments must contain between 1 and 4 variants"},
    {NULL,
     BASE_START "\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"prompt\":\"b\"},{\"prompt\":"
                "\"c\"},{\"prompt\":\"d\"},{\"prompt\":\"e\"},{\"prompt\":\"f\"}]," ONE_CASE "}",
     400, "treatments must contain between 1 and 4 variants"},
    {NULL,
     BASE_START "\"control\":{\"label\":\"x\",\"prompt\":\"a\"},\"treatments\":[{\"label\":"
                "\"x\",\"prompt\":\"b\"}]," ONE_CASE "}",
     400, "variant labels must be unique"},
    /* The control's default label is A. */
    {NULL,
     BASE_START "\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"label\":\"A\",\"prompt\":"
                "\"b\"}]," ONE_CASE "}",
     400, "variant labels must be unique"},
    {NULL,
     BASE_START "\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"prompt\":\"a\"}]," ONE_CASE "}",
     400, "prompt comparison requires different prompts"},
    {NULL,
     BASE_START "\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"prompt\":\"b\"},{\"prompt\":"
                "\"b\"}]," ONE_CASE "}",
     400, "prompt comparison requires different prompts"},
    {NULL,
     BASE_START "\"control\":{\"prompt\":\"a\",\"system_prompt\":\"s\"},\"treatments\":[{"
                "\"prompt\":\"b\",\"system_prompt\":\"t\"}]," ONE_CASE "}",
     400, "prompt comparison requires identical system prompts"},
    {NULL, BASE_START ARMS ",\"repeats\":0," ONE_CASE "}", 400, "repeats must be between 1 and 5"},
    {NULL, BASE_START ARMS ",\"repeats\":6," ONE_CASE "}", 400, "repeats must be between 1 and 5"},
    {NULL, BASE_START ARMS ",\"concurrency\":0," ONE_CASE "}", 400,
     "concurrency must be between 1 and 256"},
    {NULL, BASE_START ARMS ",\"concurrency\":257," ONE_CASE "}", 400,
     "concurrency must be between 1 and 256"},
    {NULL, BASE_START ARMS ",\"analysis\":{\"alpha\":0}," ONE_CASE "}", 400,
     "analysis.alpha must be greater than 0 and less than 0.5"},
    {NULL, BASE_START ARMS ",\"analysis\":{\"alpha\":0.5}," ONE_CASE "}", 400,
     "analysis.alpha must be greater than 0 and less than 0.5"},
    {NULL,
     BASE_START ARMS ",\"analysis\":{\"cluster_by\":\"topic\"},\"cases\":[{\"id\":\"q1\","
                     "\"vars\":{\"tag\":\"q1\",\"question\":\"a\",\"topic\":\"t\"}},{\"vars\":{"
                     "\"tag\":\"q2\",\"question\":\"b\"}}]}",
     400, "case c2: cluster_by variable topic is not defined"},
    {NULL, BASE_START ARMS ",\"cases\":[" CASE("q1") ",{\"id\":\"q2\",\"vars\":{\"tag\":\"q2\"}}]}",
     400, "case q2: template variable question is not defined"},
    /* A variable of an evaluator argument is checked too. */
    {NULL,
     "{\"dimension\":\"prompt\"," MODEL "," ARMS ",\"evaluator\":{\"function_id\":"
     "\"eval::assert::exact\",\"arguments\":{\"expected\":\"{{answer}}\"}}," ONE_CASE "}",
     400, "case q1: template variable answer is not defined"},
    {NULL, BASE_START ARMS ",\"dataset_id\":\"ds_00000000000000000000000000000000\"}", 400,
     "dataset_id names no dataset: ds_00000000000000000000000000000000"},
    /* 16 cases × 2 arms × 2 repeats = 64 > EVALD_MAX_EXPERIMENT_RUNS = 60. */
    {NULL,
     BASE_START ARMS
     ",\"repeats\":2,\"cases\":[" CASE("a") "," CASE("b") "," CASE("c") "," CASE("d") "," CASE("e") "," CASE("f") "," CASE("g") "," CASE(
         "h") "," CASE("i") "," CASE("j") "," CASE("k") "," CASE("l") "," CASE("m") "," CASE("n") "," CASE("o") "," CASE("p") "]}",
     400, "an experiment may plan at most 60 runs (cases × arms × repeats = 64)"},
    {NULL, BASE_START ARMS ",\"cases\":[{\"vars\":3}]}", 400, "~vars must be an object"},
    {NULL, "{\"name\":", 400,
     "malformed JSON: unexpected token near end of file at line 1 column 8"},
    {NULL, "[1]", 400, "request body must be a JSON object"},
    {NULL, " \n ", 400, "request body must be a JSON object"},
    /* The request's fields are refused before its cases, as a whole parse would. */
    {NULL, BASE_START ARMS ",\"cases\":[{\"vars\":3}],\"repeats\":9}", 400,
     "repeats must be between 1 and 5"},
    /* The first case refused is told, by its index. */
    {NULL, BASE_START ARMS ",\"cases\":[" CASE("q1") ",{\"vars\":[]},{\"vars\":3}]}", 400,
     "~cases[1]: vars must be an object"},
    {NULL, BASE_START ARMS ",\"cases\":[]}", 400, "cases must contain between 1 and 50 cases"},
    {NULL, BASE_START ARMS ",\"cases\":[" CASE("q1") ",]}", 400, "~malformed JSON: "},
    {NULL, BASE_START ARMS ",\"cases\":[" CASE("q1") "],\"cases\":[" CASE("q2") "]}", 400,
     "~malformed JSON: duplicate object key"},
    {"text/plain", BASE_START ARMS "," ONE_CASE "}", 415, "request body must be application/json"},
};

START_TEST(refusals_name_the_field_and_write_nothing)
{
    const struct refusal *t = &REFUSALS[_i];
    /* One dataset exists, so that dataset_id refusals are about the request. */
    struct evd_t_resp r;
    static const char CSV[] = "id,tag,question,expected\nq1,q1,a,yes\n";
    request("POST", "/v1/datasets?name=base", "text/csv", CSV, strlen(CSV), &r);
    ck_assert_int_eq(r.status, 201);
    char body[8192];
    snprintf(body, sizeof(body), "%s", t->body);
    char *ds = strstr(body, "\"DS\"");
    if (ds != NULL) {
        /* The placeholder DS becomes that real dataset's id. */
        char rest[8192];
        snprintf(rest, sizeof(rest), "%s", ds + 4);
        snprintf(ds, sizeof(body) - (size_t)(ds - body), "\"%s\"%s",
                 json_string_value(json_object_get(r.json, "dataset_id")), rest);
    }
    evd_t_resp_free(&r);
    request("POST", "/v1/experiments", t->ct, body, strlen(body), &r);
    ck_assert_msg(r.status == t->status, "case %d: %ld %s", _i, r.status, r.body);
    ck_assert_str_eq(r.content_type, "application/problem+json");
    const char *detail = json_string_value(json_object_get(r.json, "detail"));
    ck_assert_ptr_nonnull(detail);
    if (t->detail[0] == '~')
        ck_assert_msg(strstr(detail, t->detail + 1) != NULL, "case %d: %s", _i, detail);
    else
        ck_assert_str_eq(detail, t->detail);
    evd_t_resp_free(&r);
    ck_assert_uint_eq(list_size("/v1/experiments", "experiments"), 0);
    ck_assert_int_eq(count_rows("datasets"), 1);
}
END_TEST

/* The start's body streams: a case that is not JSON is told where a parse of the whole body
 * finds it, and cases under an escaped member name ("cas\u0065s", which the splitter
 * leaves in the request) start as well. */
START_TEST(a_streamed_start_tells_a_malformed_case_where_it_is)
{
    static const char BAD[] = BASE_START ARMS ",\n\"cases\": [\n  " CASE("q1") ",\n  "
                                                "{\"id\": \"q2\", \"vars\": {\"tag\": }}\n]}";
    json_error_t whole;
    ck_assert_ptr_null(json_loads(BAD, 0, &whole));
    char want[512];
    snprintf(want, sizeof(want), "malformed JSON: %s at line %d column %d", whole.text, whole.line,
             whole.column);
    struct evd_t_resp r;
    request("POST", "/v1/experiments", NULL, BAD, strlen(BAD), &r);
    ck_assert_int_eq(r.status, 400);
    ck_assert_str_eq(json_string_value(json_object_get(r.json, "detail")), want);
    evd_t_resp_free(&r);
    ck_assert_int_eq(count_rows("datasets"), 0);

    static const char ESCAPED[] =
        BASE_START ARMS ",\"cas\\u0065s\":[" CASE("q1") "," CASE("q2") "]}";
    request("POST", "/v1/experiments", NULL, ESCAPED, strlen(ESCAPED), &r);
    ck_assert_msg(r.status == 202, "%ld %s", r.status, r.body);
    evd_t_resp_free(&r);
    char *n = evd_t_sql(db_url, "SELECT case_count FROM datasets");
    ck_assert_str_eq(n, "2");
    free(n);
}
END_TEST

/* Inline cases are bounded by EVALD_MAX_DATASET_BYTES (64 KiB here), not by the 1 MiB limit
 * of other routes: over it is 413; a body over 1 MiB is taken under a larger limit. */
START_TEST(the_start_route_has_the_dataset_body_limit)
{
    struct evd_buf body = {0};
    char pad[4001];
    memset(pad, 'x', 4000);
    pad[4000] = '\0';
    evd_buf_printf(&body, BASE_START ARMS ",\"repeats\":1,\"cases\":[");
    for (int i = 0; body.len <= 65536; i++)
        evd_buf_printf(&body, "%s{\"vars\":{\"tag\":\"t\",\"question\":\"q\",\"pad\":\"%s\"}}",
                       i ? "," : "", pad);
    evd_buf_printf(&body, "]}");
    struct evd_t_resp r;
    request("POST", "/v1/experiments", NULL, body.data, body.len, &r);
    ck_assert_int_eq(r.status, 413);
    ck_assert_str_eq(json_string_value(json_object_get(r.json, "detail")),
                     "request body exceeds the 65536 byte limit");
    evd_t_resp_free(&r);
    ck_assert_int_eq(count_rows("datasets"), 0);
    evd_buf_free(&body);

    evd_t_stop(&evald, SIGTERM, 10000);
    char *env[] = {"EVALD_MAX_DATASET_BYTES=4194304", NULL};
    start_evald(env); /* later settings win over the defaults above */
    struct evd_buf big = {0};
    char wide[80001];
    memset(wide, 'y', 80000);
    wide[80000] = '\0';
    evd_buf_printf(&big, BASE_START ARMS ",\"repeats\":1,\"cases\":[");
    for (int i = 0; i < 20; i++) /* 20 cases of 80 kB: 1.6 MB, 40 runs */
        evd_buf_printf(&big, "%s{\"vars\":{\"tag\":\"w%d\",\"question\":\"q\",\"pad\":\"%s\"}}",
                       i ? "," : "", i, wide);
    evd_buf_printf(&big, "]}");
    ck_assert_uint_gt(big.len, 1u << 20);
    char *id = start(big.data);
    long st = 0;
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    json_t *doc = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_INT(doc, "dataset.case_count", 20);
    json_decref(doc);
    ck_assert_int_eq(count_rows("datasets"), 1);
    snprintf(path, sizeof(path), "/v1/experiments/%s/cancel", id);
    json_decref(call("POST", path, NULL, &st));
    free(id);
    evd_buf_free(&big);
}
END_TEST

/* With a token, a start without it is refused before its body is read; events take
 * ?access_token= as the other streams do. */
START_TEST(experiments_need_the_token)
{
    evd_t_stop(&evald, SIGTERM, 10000);
    char *env[] = {"EVALD_API_TOKEN=experiments-test-token-0123456789", NULL};
    start_evald(env);
    struct evd_t_resp r;
    request("POST", "/v1/experiments", NULL, FULL, strlen(FULL), &r);
    ck_assert_int_eq(r.status, 401);
    evd_t_resp_free(&r);
    request("GET", "/v1/experiments", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 401);
    evd_t_resp_free(&r);
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/experiments", evald.base);
    const char *headers[] = {"Content-Type: application/json",
                             "Authorization: Bearer experiments-test-token-0123456789", NULL};
    evd_t_http("POST", url, headers, FULL, strlen(FULL), &r);
    ck_assert_msg(r.status == 202, "%ld %s", r.status, r.body);
    char id[64];
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(r.json, "experiment_id")));
    evd_t_resp_free(&r);
    snprintf(url, sizeof(url),
             "%s/v1/experiments/%s/events?access_token=experiments-test-token-0123456789",
             evald.base, id);
    evd_t_http_timed("GET", url, NULL, NULL, 0, 60000, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "event: status"));
    evd_t_resp_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("experiments");
    TCase *tc = tcase_create("experiments");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_small_experiment_runs_to_its_hand_worked_analysis);
    tcase_add_test(tc, case_rows_filters_and_exports);
    tcase_add_test(tc, inline_cases_make_a_dataset_and_lists_page_newest_first);
    tcase_add_test(tc, cancel_stops_in_flight_runs_and_delete_waits_for_it);
    tcase_add_loop_test(tc, unknown_experiments_are_404, 0, sizeof(UNKNOWN) / sizeof(UNKNOWN[0]));
    tcase_add_test(tc, a_streamed_start_tells_a_malformed_case_where_it_is);
    tcase_add_loop_test(tc, refusals_name_the_field_and_write_nothing, 0,
                        sizeof(REFUSALS) / sizeof(REFUSALS[0]));
    tcase_add_test(tc, the_start_route_has_the_dataset_body_limit);
    tcase_add_test(tc, experiments_need_the_token);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
