/*
 * Experiments end to end (/v1/experiments): the real evald and evald-stub over loopback
 * against a throwaway PostgreSQL per test. The stub is scripted per case and arm (and, with
 * `times`, per repeat: a case's runs reach it one after another), so every pass count,
 * analysis number, run order and row below follows from the script and is worked out by
 * hand in the comments. Also: inline cases that make a dataset, cancel, delete, lists,
 * filters, exports, the events stream and the session ids' comparison. What a start is
 * refused with and the 404s of unknown ids are in test_experiments_refusals.c; the fixture
 * and its script are in tests/support/experiments_fixtures.c.
 */
#define _GNU_SOURCE /* asprintf, strndup */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/support/experiments_fixtures.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

/* ---- helpers ------------------------------------------------------------------------------- */

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
        json_t *doc = xt_call("GET", path, NULL, &st);
        ck_assert_msg(st == 200, "GET %s answered %ld", path, st);
        if (terminal(json_string_value(json_object_get(doc, "status"))))
            return doc;
        json_decref(doc);
        if (evd_mono_ms() > deadline) {
            evd_t_dump_log(&xt_evald);
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

/* ---- the whole run of a small experiment ---------------------------------------------------- */

/* Passes of (case 1..5, arm 0..1, repeat 1..2) as the script answers them (its table is in
 * tests/support/experiments_fixtures.h). */
static const int PASS[5][2][2] = {
    {{0, 0}, {1, 0}}, {{1, 0}, {1, 1}}, {{0, 0}, {1, 1}}, {{0, 1}, {1, 1}}, {{1, 1}, {1, 1}}};

START_TEST(a_small_experiment_runs_to_its_hand_worked_analysis)
{
    char *id = xt_start(xt_full);
    /* Follow it live: progress events, then exactly one status event, the last. */
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/experiments/%s/events", xt_evald.base, id);
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
        ck_assert(!terminal(json_string_value(xt_at(e, "data.status"))));
        ck_assert(json_is_true(xt_at(e, "data.analysis.partial")));
    }
    json_t *last = json_array_get(events, nev - 1);
    ASSERT_STR(last, "event", "status");
    ASSERT_STR(last, "data.status", "completed");
    ASSERT_INT(last, "data.progress.total_runs", 20);
    ASSERT_INT(last, "data.progress.terminal_runs", 20);
    ck_assert(json_is_false(xt_at(last, "data.analysis.partial")));
    json_decref(events);
    evd_t_resp_free(&stream);

    json_t *doc = wait_terminal(id, 60000);
    ASSERT_STR(doc, "experiment_id", id);
    ASSERT_STR(doc, "name", "hand-worked");
    ASSERT_STR(doc, "status", "completed");
    ck_assert(json_is_integer(xt_at(doc, "created_at")) &&
              json_is_integer(xt_at(doc, "updated_at")));
    ck_assert(json_integer_value(xt_at(doc, "completed_at")) >=
              json_integer_value(xt_at(doc, "created_at")));
    ASSERT_INT(doc, "request.repeats", 2);
    ASSERT_INT(doc, "request.concurrency", 5);
    ASSERT_STR(doc, "request.control.label", "A"); /* default labels in arm order */
    ASSERT_STR(doc, "request.treatments.0.label", "B");
    ASSERT_INT(doc, "dataset.case_count", 5);
    ck_assert(strncmp(json_string_value(xt_at(doc, "dataset.dataset_id")), "ds_", 3) == 0);
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
    ck_assert_uint_eq(json_array_size(xt_at(doc, "arms")), 2);
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
    ck_assert_uint_eq(json_array_size(xt_at(doc, "comparisons")), 1);
    json_t *c = xt_at(doc, "comparisons.0");
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
    ck_assert(json_is_false(xt_at(c, "eligible")));
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
    ck_assert(json_is_false(xt_at(doc, "analysis.partial")));

    /* Runs, in case then position order. With two arms repeat 1 runs control then
     * treatment, repeat 2 treatment then control: positions 1..4 are (arm, repeat)
     * (0,1), (1,1), (1,2), (0,2). The session id is <experiment_id>_<case>_<arm>_<repeat>. */
    char path[512];
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=100", id);
    long st = 0;
    json_t *page = xt_call("GET", path, NULL, &st);
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
    snprintf(sid_c, sizeof(sid_c), "%s", json_string_value(xt_at(runs, "0.session_id")));
    snprintf(sid_t, sizeof(sid_t), "%s", json_string_value(xt_at(runs, "1.session_id")));
    json_decref(page);

    /* One case, and pages of three. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?case_id=q3", id);
    page = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(page, "runs")), 4);
    ASSERT_STR(page, "runs.0.case_id", "q3");
    ASSERT_STR(page, "runs.3.case_id", "q3");
    json_decref(page);
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?case_id=nope", id);
    ck_assert_uint_eq(xt_list_size(path, "runs"), 0);
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=3", id);
    page = xt_call("GET", path, NULL, &st);
    ck_assert_uint_eq(json_array_size(json_object_get(page, "runs")), 3);
    const char *cursor = json_string_value(json_object_get(page, "next_cursor"));
    ck_assert_ptr_nonnull(cursor);
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=3&before=%s", id, cursor);
    json_decref(page);
    page = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_STR(page, "runs.0.case_id", "q1");
    ASSERT_INT(page, "runs.0.position", 4);
    json_decref(page);

    /* The run session ids are sessions the comparison accepts. */
    snprintf(path, sizeof(path), "/v1/sessions/compare?ids=%s,%s", sid_c, sid_t);
    json_t *cmp = xt_call("GET", path, NULL, &st);
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
    char *id = xt_start(xt_full);
    json_decref(wait_terminal(id, 60000));
    char path[512];
    long st = 0;
    snprintf(path, sizeof(path), "/v1/experiments/%s/cases", id);
    json_t *page = xt_call("GET", path, NULL, &st);
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
        page = xt_call("GET", path, NULL, &st);
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
    page = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 400);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(page, "detail")), "filter"));
    json_decref(page);
    /* Pages of two in dataset order. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/cases?limit=2", id);
    page = xt_call("GET", path, NULL, &st);
    ck_assert_uint_eq(json_array_size(json_object_get(page, "cases")), 2);
    snprintf(path, sizeof(path), "/v1/experiments/%s/cases?limit=2&before=%s", id,
             json_string_value(json_object_get(page, "next_cursor")));
    json_decref(page);
    page = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_STR(page, "cases.0.case_id", "q3");
    json_decref(page);
    snprintf(path, sizeof(path), "/v1/experiments/%s/cases?limit=101", id);
    page = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 400);
    ASSERT_STR(page, "detail", "limit must be between 1 and 100");
    json_decref(page);

    /* JSON lines: one record per run with the fields of the spec. */
    struct evd_t_resp r;
    snprintf(path, sizeof(path), "/v1/experiments/%s/export?format=jsonl", id);
    xt_request("GET", path, NULL, NULL, 0, &r);
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
    xt_request("GET", path, NULL, NULL, 0, &r);
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
    page = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 400);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(page, "detail")), "format"));
    json_decref(page);

    /* The events of a finished experiment: its one status event. */
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/experiments/%s/events", xt_evald.base, id);
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
    xt_request("DELETE", path, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 204);
    ck_assert_uint_eq(r.len, 0);
    evd_t_resp_free(&r);
    json_decref(xt_call("GET", path, NULL, &st));
    ck_assert_int_eq(st, 404);
    xt_request("DELETE", path, NULL, NULL, 0, &r);
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
    char *a = xt_start(BODY);
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
             json_string_value(xt_at(doc, "dataset.dataset_id")));
    long st = 0;
    json_t *ds = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_INT(ds, "case_count", 2);
    ASSERT_STR(ds, "sha256", sha);
    json_decref(ds);
    /* The second case has no expected: {{expected}} is null there, "yes" is not. */
    ASSERT_INT(doc, "progress.passed_runs", 2);
    json_decref(doc);
    ck_assert_int_eq(xt_count_rows("datasets"), 1);

    /* A second experiment over that dataset by id. */
    char body[2048];
    snprintf(body, sizeof(body),
             "{\"dimension\":\"prompt\"," MODEL "," ARMS "," EXACT
             ",\"repeats\":1,\"dataset_id\":\"%s\"}",
             path + strlen("/v1/datasets/"));
    char *b = xt_start(body);
    json_decref(wait_terminal(b, 60000));
    ck_assert_int_eq(xt_count_rows("datasets"), 1);

    json_t *p1 = xt_call("GET", "/v1/experiments?limit=1", NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_uint_eq(json_array_size(json_object_get(p1, "experiments")), 1);
    json_t *s = xt_at(p1, "experiments.0");
    ASSERT_STR(s, "experiment_id", b);
    ASSERT_STR(s, "status", "completed");
    ASSERT_INT(s, "repeats", 1);
    ASSERT_INT(s, "progress.total_runs", 4);
    const char *cursor = json_string_value(json_object_get(p1, "next_cursor"));
    ck_assert_ptr_nonnull(cursor);
    snprintf(path, sizeof(path), "/v1/experiments?limit=1&before=%s", cursor);
    json_t *p2 = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_STR(p2, "experiments.0.experiment_id", a);
    ck_assert_ptr_null(json_object_get(p2, "next_cursor"));
    json_decref(p1);
    json_decref(p2);
    ck_assert_uint_eq(xt_list_size("/v1/experiments", "experiments"), 2);
    json_t *bad = xt_call("GET", "/v1/experiments?limit=0", NULL, &st);
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
    char *id = xt_start(SLOW);
    /* Wait for the first provider calls (two cases at once). */
    int64_t deadline = evd_mono_ms() + 20000;
    for (;;) {
        json_t *stats = evd_t_stub_stats(&xt_stub);
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
    json_t *j = xt_call("DELETE", path, NULL, &st);
    ck_assert_int_eq(st, 409);
    ASSERT_STR(j, "code", "conflict");
    json_decref(j);

    snprintf(path, sizeof(path), "/v1/experiments/%s/cancel", id);
    int64_t t0 = evd_mono_ms();
    j = xt_call("POST", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_STR(j, "experiment_id", id);
    ck_assert_ptr_nonnull(json_string_value(json_object_get(j, "status")));
    json_decref(j);
    json_t *doc = wait_terminal(id, 5000);
    ASSERT_STR(doc, "status", "cancelled");
    ck_assert(json_is_false(xt_at(doc, "analysis.partial")));
    ck_assert_int_lt(json_integer_value(xt_at(doc, "progress.passed_runs")), 1);
    json_decref(doc);
    /* The in-flight calls were abandoned within about a second (the stub holds each 5 s). */
    for (;;) {
        json_t *stats = evd_t_stub_stats(&xt_stub);
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
    j = xt_call("GET", path, NULL, &st);
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
    j = xt_call("POST", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_STR(j, "status", "cancelled");
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    struct evd_t_resp d;
    xt_request("DELETE", path, NULL, NULL, 0, &d);
    ck_assert_int_eq(d.status, 204);
    evd_t_resp_free(&d);
    json_decref(xt_call("GET", path, NULL, &st));
    ck_assert_int_eq(st, 404);
    free(id);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("experiments");
    TCase *tc = tcase_create("experiments");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, xt_setup, xt_teardown);
    tcase_add_test(tc, a_small_experiment_runs_to_its_hand_worked_analysis);
    tcase_add_test(tc, case_rows_filters_and_exports);
    tcase_add_test(tc, inline_cases_make_a_dataset_and_lists_page_newest_first);
    tcase_add_test(tc, cancel_stops_in_flight_runs_and_delete_waits_for_it);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
