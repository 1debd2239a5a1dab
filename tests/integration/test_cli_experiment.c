/*
 * `evald-cli experiment ...` end to end: the real evald-cli against the real evald and
 * evald-stub over loopback, a throwaway PostgreSQL database per test. The verdicts of the
 * CI gate (exit codes 0, 1 and 3), the JUnit, Markdown, JSON and GitHub outputs line by
 * line, --detach and the progress view in a pipe and in a pseudo-terminal, a YAML
 * experiment whose dataset is a CSV file next to it (uploaded once, reused by a rerun) and
 * a JSON one with inline cases, and the watch, show, compare, cancel and export commands.
 * The errors (exit codes 2, 4 and 130), retries, cancels and the token are in
 * test_cli_experiment_errors.c.
 *
 * The stub answers by the marker word of an arm's prompt (the script and the fixture are in
 * tests/support/cli_experiment_fixtures.c), so every verdict below follows from the
 * script: PASS answers "yes" (the expected answer of every case), FAIL answers "no", MIXED
 * answers "no" on case q1 only, and "slow " prompts take SLOW_MS.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cli_experiment_fixtures.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

/* The whole file as a malloc'd string ("" when absent). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return strdup("");
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        fwrite(chunk, 1, n, m);
    fclose(f);
    fclose(m);
    return buf;
}

/* s matches pattern, where '*' stands for any run of characters but '|' (a table cell). */
static bool match_cell(const char *pattern, const char *s)
{
    if (*pattern == '\0')
        return *s == '\0';
    if (*pattern == '*') {
        for (const char *t = s;; t++) {
            if (match_cell(pattern + 1, t))
                return true;
            if (*t == '\0' || *t == '|')
                return false;
        }
    }
    return *pattern == *s && match_cell(pattern + 1, s + 1);
}

/* Checks text line by line against patterns (NULL-terminated). */
static void assert_lines(const char *text, const char *const *patterns)
{
    char *copy = strdup(text), *save = NULL;
    size_t i = 0;
    for (char *line = strtok_r(copy, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save), i++) {
        ck_assert_msg(patterns[i] != NULL, "extra line %zu: %s\nin:\n%s", i + 1, line, text);
        ck_assert_msg(match_cell(patterns[i], line), "line %zu:\n%s\nis not\n%s\nin:\n%s", i + 1,
                      line, patterns[i], text);
    }
    ck_assert_msg(patterns[i] == NULL, "missing line %zu: %s\nin:\n%s", i + 1, patterns[i], text);
    free(copy);
}

/* The lines of text that start with prefix, joined with '\n' (malloc'd). */
static char *lines_starting(const char *text, const char *prefix)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    for (const char *p = text; *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (strncmp(p, prefix, strlen(prefix)) == 0)
            fprintf(m, "%.*s\n", (int)n, p);
        p += n + (end != NULL);
    }
    fclose(m);
    return buf;
}

START_TEST(better_exits_0_and_a_rerun_reuses_the_uploaded_dataset)
{
    free(ct_file_in_dir("cases.csv", ct_cases_csv));
    char *exp = ct_yaml_file("experiment.yaml", "FAIL", "PASS", "cases.csv", "2");
    char *json1 = ct_in_dir("first.json"), *json2 = ct_in_dir("second.json");
    struct ran r;
    /* Run from another directory: the dataset is found next to the experiment file. */
    ct_run(CLI("experiment", "run", exp, "--json", json1), &r);
    CHECK_EXIT(r, 0);
    ct_assert_plain(&r);
    /* 3 cases x 2 arms x 2 repeats; the treatment passes its 6. */
    ck_assert_msg(strstr(r.out, "runs 12/12, passed 6 (50.0%), ") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "\ncand vs base         +1.000    [+1.000, +1.000]   0.000    "
                                "0.000   better ") != NULL,
                  "%s", r.out);
    /* Every treatment better: --require better is met. */
    ct_run(CLI("experiment", "run", exp, "--require", "better", "--json", json2), &r);
    CHECK_EXIT(r, 0);
    json_t *a = evd_test_load_json(json1), *b = evd_test_load_json(json2);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    const char *ds =
        json_string_value(json_object_get(json_object_get(a, "dataset"), "dataset_id"));
    ck_assert_msg(ds != NULL && strncmp(ds, "ds_", 3) == 0, "%s", ds);
    ck_assert_str_eq(
        ds, json_string_value(json_object_get(json_object_get(b, "dataset"), "dataset_id")));
    ck_assert_str_ne(json_string_value(json_object_get(a, "experiment_id")),
                     json_string_value(json_object_get(b, "experiment_id")));
    char *n = evd_t_sql(ct_db_url, "SELECT count(*) FROM datasets");
    ck_assert_str_eq(n, "1");
    free(n);
    /* The request sent names the dataset, not the file. */
    const json_t *req = json_object_get(a, "request");
    ck_assert_ptr_null(json_object_get(req, "dataset"));
    ck_assert_str_eq(json_string_value(json_object_get(req, "dataset_id")), ds);
    json_decref(a);
    json_decref(b);
    free(json1);
    free(json2);
    free(exp);
}
END_TEST

START_TEST(a_worse_treatment_exits_1_with_every_output)
{
    char *exp = ct_file_in_dir("two.json", ct_two_treatments_json);
    char *junit = ct_in_dir("junit.xml"), *md = ct_in_dir("summary.md"),
         *doc = ct_in_dir("doc.json");
    struct ran r;
    ct_run(CLI("experiment", "run", exp, "--junit", junit, "--markdown", md, "--json", doc,
               "--format", "github", "--fail-on-inconclusive"),
           &r);
    /* fail is worse: 1, ahead of mixed's inconclusive (3). */
    CHECK_EXIT(r, 1);
    ct_assert_plain(&r);
    const char *id = ct_started_id(&r);
    /* control 3 passes, mixed 2 (all but q1), fail 0: 5 of 9. */
    ck_assert_msg(strstr(r.out, "runs 9/9, passed 5 (55.6%), ") != NULL, "%s", r.out);

    /*
     * Worked by hand, m = 2 treatments so alpha' = 0.025, df = n - 1 = 2:
     * mixed: d = (-1, 0, 0), mean -1/3, s.d. sqrt(1/3), se 1/3; t(0.9875, 2) = 6.2054 gives
     *   the interval -1/3 -+ 2.0685 = [-2.402, +1.735]; t = -1, two-sided p = 1 - 1/sqrt(3)
     *   = 0.4226, adjusted 0.845; MDE (6.2054 + t(0.8, 2) = 1.0607) / 3 = 2.422.
     * fail: d = (-1, -1, -1), se 0: interval [-1, -1], p 0, MDE 0, worse.
     * Tokens: mixed 14 vs 12 (+2, +16.7%), fail 11 vs 12 (-1, -8.3%); stub-model has no price;
     * no function calls (+0); wall time varies (*).
     */
    char *summary = slurp(md);
    char head[128];
    snprintf(head, sizeof(head), "### evald experiment %s: two treatments", id);
    const char *want_md[] = {
        head,
        "Status **completed**, 3 cases, control **pass**; 95% intervals, Bonferroni-adjusted.",
        "| treatment | verdict | Δ pass rate | interval | p (adjusted) | MDE | Δ tokens | Δ cost $ "
        "| Δ wall ms | Δ calls |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
        "| mixed | inconclusive | -0.333 | [-2.402, +1.735] | 0.845 | 2.422 | +2 (+16.7%) | n/a | "
        "* | +0 |",
        "| fail | ❌ worse | -1.000 | [-1.000, -1.000] | 0.000 | 0.000 | -1 (-8.3%) | n/a | * | "
        "+0 |",
        NULL};
    assert_lines(summary, want_md);

    /* GitHub workflow commands: the worse treatment, and each case a treatment regressed. */
    char *gh = lines_starting(r.out, "::");
    const char *want_gh[] = {
        "::warning title=evald%3A case q1 regressed in mixed::pass passed 1/1 runs, mixed passed "
        "0/1",
        "::error title=evald%3A fail is worse than pass::pass rate -1.000 [-1.000, -1.000], p "
        "(adjusted) 0.000",
        "::warning title=evald%3A case q1 regressed in fail::pass passed 1/1 runs, fail passed 0/1",
        "::warning title=evald%3A case q2 regressed in fail::pass passed 1/1 runs, fail passed 0/1",
        "::warning title=evald%3A case q3 regressed in fail::pass passed 1/1 runs, fail passed 0/1",
        NULL};
    assert_lines(gh, want_gh);

    /* JUnit: valid against the shipped schema, a suite per treatment, a case per case. */
    char *cmd = NULL;
    ck_assert_int_gt(asprintf(&cmd, "xmllint --noout --schema %s/tests/cli/junit.xsd %s",
                              evd_t_source_dir(), junit),
                     0);
    if (system("command -v xmllint >/dev/null 2>&1") == 0)
        ck_assert_msg(system(cmd) == 0, "%s does not validate", junit);
    else
        fprintf(stderr, "SKIPPED: JUnit schema check (xmllint is absent)\n");
    free(cmd);
    char *xml = slurp(junit);
    ck_assert_msg(strstr(xml, "<testsuite name=\"mixed vs pass\" tests=\"3\" failures=\"1\" ") &&
                      strstr(xml, "<testsuite name=\"fail vs pass\" tests=\"3\" failures=\"3\" "),
                  "%s", xml);
    char mixed_q1[256], mixed_q2[256];
    snprintf(mixed_q1, sizeof(mixed_q1),
             "<testcase classname=\"%s.mixed\" name=\"q1\">\n      <failure message=\"pass "
             "passed 1/1 runs, mixed passed 0/1\" type=\"regression\">",
             id);
    snprintf(mixed_q2, sizeof(mixed_q2), "<testcase classname=\"%s.mixed\" name=\"q2\"/>", id);
    ck_assert_msg(strstr(xml, mixed_q1) && strstr(xml, mixed_q2), "%s", xml);
    int suites = 0, cases = 0, failures = 0;
    for (const char *p = xml; (p = strstr(p, "<testsuite ")) != NULL; p++)
        suites++;
    for (const char *p = xml; (p = strstr(p, "<testcase ")) != NULL; p++)
        cases++;
    for (const char *p = xml; (p = strstr(p, "<failure ")) != NULL; p++)
        failures++;
    ck_assert_int_eq(suites, 2);
    ck_assert_int_eq(cases, 6);
    ck_assert_int_eq(failures, 4);

    /* --json: the full experiment document, as GET /v1/experiments/{id} answers it. */
    json_t *written = evd_test_load_json(doc);
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    json_t *served = ct_get(path);
    ck_assert_msg(json_equal(written, served), "the --json file is not the experiment document");
    ck_assert(json_is_false(json_object_get(json_object_get(written, "analysis"), "partial")));

    /* show, export and watch of the finished experiment. */
    char *shown = ct_in_dir("shown.json");
    ct_run(CLI("experiment", "show", (char *)id, "--json"), &r);
    CHECK_EXIT(r, 0);
    json_t *s = json_loads(r.out, 0, NULL);
    ck_assert_msg(json_equal(s, served), "%s", r.out);
    json_decref(s);
    free(shown);
    ct_run(CLI("experiment", "show", (char *)id), &r);
    CHECK_EXIT(r, 0);
    ck_assert_msg(strstr(r.out, "\nfail vs pass         -1.000    [-1.000, -1.000]   0.000    "
                                "0.000   worse ") != NULL,
                  "%s", r.out);
    char *csv = ct_in_dir("runs.csv");
    ct_run(CLI("experiment", "export", (char *)id, "--format", "csv", "--output", csv), &r);
    CHECK_EXIT(r, 0);
    char *rows = slurp(csv);
    static const char HEADER[] = "experiment_id,run_id,session_id,case_id,case_index,arm,"
                                 "label,repeat,position,status,passed,score,output,";
    ck_assert_msg(strncmp(rows, HEADER, strlen(HEADER)) == 0, "%s", rows);
    int lines = 0;
    for (const char *p = rows; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    ck_assert_int_eq(lines, 1 + 9);
    ct_run(CLI("experiment", "export", (char *)id), &r);
    CHECK_EXIT(r, 0);
    lines = 0;
    for (char *save = NULL, *l = strtok_r(r.out, "\n", &save); l != NULL;
         l = strtok_r(NULL, "\n", &save), lines++) {
        json_t *rec = json_loads(l, 0, NULL);
        ck_assert_msg(json_is_object(rec), "%s", l);
        ck_assert_str_eq(json_string_value(json_object_get(rec, "experiment_id")), id);
        json_decref(rec);
    }
    ck_assert_int_eq(lines, 9);
    ct_run(CLI("experiment", "export", (char *)id, "--format", "xml"), &r);
    CHECK_EXIT(r, 2);
    /* watch of a finished experiment gives its verdict again: 1. */
    ct_run(CLI("experiment", "watch", (char *)id), &r);
    CHECK_EXIT(r, 1);
    /* compare: the runs of case q1, repeat 1, by their session ids: control 12 tokens,
     * mixed 14 (the script's usage), no function calls. */
    char s0[64], s1[64];
    snprintf(s0, sizeof(s0), "%s_1_0_1", id);
    snprintf(s1, sizeof(s1), "%s_1_1_1", id);
    ct_run(CLI("compare", s0, s1), &r);
    CHECK_EXIT(r, 0);
    const struct {
        const char *session, *title;
        long tokens;
    } want_cmp[] = {{s0, "pass · case q1 · run 1", 12}, {s1, "mixed · case q1 · run 1", 14}};
    for (size_t k = 0; k < 2; k++) {
        const char *line = strstr(r.out, want_cmp[k].session);
        ck_assert_msg(line != NULL, "%s", r.out);
        char lead[160];
        snprintf(lead, sizeof(lead), "%-44s %s ", want_cmp[k].session, want_cmp[k].title);
        ck_assert_msg(strncmp(line, lead, strlen(lead)) == 0, "%s", r.out);
        long tokens = -1, wall = -1, calls = -1;
        char status[32] = "";
        ck_assert_int_eq(
            sscanf(line + strlen(lead), "%31s %ld %ld %ld", status, &tokens, &wall, &calls), 4);
        ck_assert_str_eq(status, "completed");
        ck_assert_int_eq(tokens, want_cmp[k].tokens);
        ck_assert_int_ge(wall, 0);
        ck_assert_int_eq(calls, 0);
    }
    ct_run(CLI("compare", s0, s1, "--baseline", s1, "--json"), &r);
    CHECK_EXIT(r, 0);
    json_t *cmp = json_loads(r.out, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(cmp, "baseline_session_id")), s1);
    ck_assert_uint_eq(json_array_size(json_object_get(cmp, "sessions")), 2);
    json_decref(cmp);
    /* cancel leaves a finished experiment as it is, and says so. */
    ct_run(CLI("experiment", "cancel", (char *)id), &r);
    CHECK_EXIT(r, 0);
    char said[128];
    snprintf(said, sizeof(said), "%s completed\n", id);
    ck_assert_str_eq(r.out, said);
    ct_run(CLI("experiment", "cancel", (char *)id, "--json"), &r);
    CHECK_EXIT(r, 0);
    json_t *answer = json_loads(r.out, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(answer, "status")), "completed");
    ck_assert_str_eq(json_string_value(json_object_get(answer, "experiment_id")), id);
    json_decref(answer);

    free(rows);
    free(csv);
    json_decref(served);
    json_decref(written);
    free(xml);
    free(gh);
    free(summary);
    free(doc);
    free(md);
    free(junit);
    free(exp);
}
END_TEST

START_TEST(junit_has_every_case_of_a_dataset_longer_than_a_page)
{
    /* 130 cases, read back 100 a page; a JSONL dataset this time. */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    for (int i = 1; i <= 130; i++)
        fprintf(m,
                "{\"id\": \"k%d\", \"vars\": {\"question\": \"k%d?\"}, \"expected\": "
                "\"yes\"}\n",
                i, i);
    fclose(m);
    free(ct_file_in_dir("many.jsonl", buf));
    free(buf);
    char *exp = ct_yaml_file("many.yaml", "PASS", "FAIL", "many.jsonl", "1");
    char *junit = ct_in_dir("many.xml");
    struct ran r;
    ct_run(CLI("experiment", "run", exp, "--junit", junit), &r);
    CHECK_EXIT(r, 1);
    char *xml = slurp(junit);
    int cases = 0, failures = 0;
    for (const char *p = xml; (p = strstr(p, "<testcase ")) != NULL; p++)
        cases++;
    for (const char *p = xml; (p = strstr(p, "<failure ")) != NULL; p++)
        failures++;
    ck_assert_int_eq(cases, 130);
    ck_assert_int_eq(failures, 130);
    ck_assert_msg(strstr(xml, "name=\"k1\"") && strstr(xml, "name=\"k100\"") &&
                      strstr(xml, "name=\"k101\"") && strstr(xml, "name=\"k130\""),
                  "%s", xml);
    free(xml);
    free(junit);
    free(exp);
}
END_TEST

START_TEST(inconclusive_exits_3_only_when_asked)
{
    free(ct_file_in_dir("cases.csv", ct_cases_csv));
    char *exp = ct_yaml_file("experiment.yaml", "PASS", "MIXED", "cases.csv", "1");
    struct ran r;
    ct_run(CLI("experiment", "run", exp), &r);
    CHECK_EXIT(r, 0); /* inconclusive is not worse */
    ck_assert_msg(strstr(r.out, " inconclusive ") != NULL, "%s", r.out);
    char id[64];
    snprintf(id, sizeof(id), "%s", ct_started_id(&r));
    ct_run(CLI("experiment", "watch", id, "--fail-on-inconclusive"), &r);
    CHECK_EXIT(r, 3);
    ct_run(CLI("experiment", "watch", id, "--require", "better"), &r);
    CHECK_EXIT(r, 1);
    ct_run(CLI("experiment", "watch", id, "--require", "better", "--fail-on-inconclusive"), &r);
    CHECK_EXIT(r, 1);
    /* --json -: stdout holds the document alone; the progress and the table go to stderr. */
    ct_run(CLI("experiment", "watch", id, "--json", "-"), &r);
    CHECK_EXIT(r, 0);
    json_error_t jerr;
    json_t *doc = json_loads(r.out, 0, &jerr); /* fails on anything after the document */
    ck_assert_msg(doc != NULL, "stdout is not one JSON document (%s): %s", jerr.text, r.out);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "experiment_id")), id);
    json_decref(doc);
    ck_assert_msg(strstr(r.err, "runs 6/6, passed ") != NULL, "%s", r.err);
    ck_assert_msg(strstr(r.err, " inconclusive ") != NULL, "%s", r.err);
    ct_run(CLI("experiment", "watch", id, "--json", "-", "--junit", "-"), &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, "only one of --json, --junit and --markdown can write to stdout") !=
                      NULL,
                  "%s", r.err);
    free(exp);
}
END_TEST

START_TEST(detach_prints_the_id_and_the_experiment_goes_on)
{
    free(ct_file_in_dir("cases.csv", ct_cases_csv));
    /* Each case runs 4 cells of SLOW_MS one after another: 6 s at least. */
    char *exp = ct_yaml_file("slow.yaml", "slow PASS", "slow FAIL", "cases.csv", "2");
    struct ran r;
    ct_run(CLI("experiment", "run", exp, "--detach"), &r);
    CHECK_EXIT(r, 0);
    ck_assert_msg(strncmp(r.out, "exp_", 4) == 0 && strlen(r.out) == 37, "%s", r.out);
    char id[64];
    snprintf(id, sizeof(id), "%.36s", r.out);
    /* It did not wait for the experiment (6 s at least): not timed, which a loaded machine
     * makes flaky, but read from the experiment, which has not ended. */
    char *s = ct_status_of(id);
    ck_assert_msg(strcmp(s, "queued") == 0 || strcmp(s, "running") == 0, "%s", s);
    free(s);
    /* It goes on without a client; watch follows it in a pipe: a plain line every 5 s and
     * one at the end. The "slow " rule answers yes to both arms. */
    ct_run(CLI("experiment", "watch", id), &r);
    CHECK_EXIT(r, 0);
    ct_assert_plain(&r);
    char *lines = lines_starting(r.out, "runs ");
    size_t n = 0;
    for (const char *p = lines; (p = strchr(p, '\n')) != NULL; p++)
        n++;
    ck_assert_msg(n >= 2, "%s", r.out);
    /* The last line is the end's. */
    const char *last = lines + strlen(lines) - 1;
    while (last > lines && last[-1] != '\n')
        last--;
    ck_assert_msg(strncmp(last, "runs 12/12, passed 12 (100.0%), ", 32) == 0, "%s", lines);
    free(lines);
    ct_wait_status(id, "completed");
    free(exp);
}
END_TEST

START_TEST(the_progress_line_is_redrawn_on_a_terminal)
{
    if (system("command -v script >/dev/null 2>&1") != 0) {
        fprintf(stderr, "SKIPPED: pseudo-terminal check (script from bsdutils is absent)\n");
        return;
    }
    free(ct_file_in_dir("cases.csv", ct_cases_csv));
    char *exp = ct_yaml_file("experiment.yaml", "PASS", "FAIL", "cases.csv", "1");
    char *cmd = NULL;
    ck_assert_int_gt(
        asprintf(&cmd, "%s --url %s experiment run %s", ct_cli_bin(), ct_evald.base, exp), 0);
    struct ran r;
    ct_run((char *[]){"/usr/bin/script", "-qefc", cmd, "/dev/null", NULL}, &r);
    CHECK_EXIT(r, 1);
    ck_assert_msg(strstr(r.out, "\r\033[K\033[1mruns ") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "runs 6/6\033[0m  passed 3 (50.0%)") != NULL, "%s", r.out);
    free(cmd);
    free(exp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_experiment");
    TCase *tc = tcase_create("cli_experiment");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, ct_setup, ct_teardown);
    tcase_add_test(tc, better_exits_0_and_a_rerun_reuses_the_uploaded_dataset);
    tcase_add_test(tc, a_worse_treatment_exits_1_with_every_output);
    tcase_add_test(tc, junit_has_every_case_of_a_dataset_longer_than_a_page);
    tcase_add_test(tc, inconclusive_exits_3_only_when_asked);
    tcase_add_test(tc, detach_prints_the_id_and_the_experiment_goes_on);
    tcase_add_test(tc, the_progress_line_is_redrawn_on_a_terminal);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
