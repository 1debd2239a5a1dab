/*
 * Unit tests of evald-cli's pure parts (cli/report.c, cli/plan.c, cli/doc.c, cli/util.c):
 * the verdict table, the Markdown and GitHub outputs line by line, the JUnit XML against the
 * schema the tests ship (tests/cli/junit.xsd, with xmllint when it is installed), the exit
 * codes, how a sequential verdict and an early stop are said, the plan and its numbers,
 * and the YAML loader with the line of every value and its refusals.
 */
#define _GNU_SOURCE /* asprintf, open_memstream */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "tests/support/testutil.h"

/* An experiment document in the contract's shape: v2 worse, v3 inconclusive. */
static const char EXPERIMENT[] =
    "{\"experiment_id\":\"exp_0123456789abcdef0123456789abcdef\",\"name\":\"qa & <brevity>\","
    "\"status\":\"completed\",\"dataset\":{\"dataset_id\":\"ds_1\",\"sha256\":\"ab\",\"case_"
    "count\":3},"
    "\"arms\":[{\"index\":0,\"label\":\"v1\",\"role\":\"control\"},{\"index\":1,\"label\":\"v2\","
    "\"role\":\"treatment\"},{\"index\":2,\"label\":\"v3\",\"role\":\"treatment\"}],"
    "\"comparisons\":["
    "{\"treatment\":1,\"label\":\"v2\",\"pass_rate\":{\"control\":0.9,\"treatment\":0.6,"
    "\"delta\":-0.3,\"se\":0.05,\"df\":2,\"ci_low\":-0.45,\"ci_high\":-0.15,\"t_p_value\":0.01,"
    "\"p_value_adjusted\":0.02,\"mde\":0.2,\"cases_needed\":null},\"metrics\":{\"total_tokens\":"
    "{\"delta\":-10,\"relative\":-0.125},\"cost_usd\":{\"delta\":-0.0001,\"relative\":null},"
    "\"wall_time_ms\":{\"delta\":null},\"function_calls\":{\"delta\":0,\"relative\":0}},"
    "\"verdict\":\"worse\",\"eligible\":false},"
    "{\"treatment\":2,\"label\":\"v3\",\"pass_rate\":{\"control\":0.9,\"treatment\":0.9,"
    "\"delta\":0.0,\"se\":0.1,\"df\":2,\"ci_low\":-0.5,\"ci_high\":0.5,\"t_p_value\":1,"
    "\"p_value_adjusted\":1,\"mde\":0.6,\"cases_needed\":120},\"metrics\":{},"
    "\"verdict\":\"inconclusive\",\"eligible\":false}],"
    "\"analysis\":{\"alpha\":0.05,\"alpha_adjusted\":0.025,\"min_effect\":0.1,\"partial\":false}}";

static const char CASES[] =
    "[{\"case_id\":\"q1\",\"arms\":[{\"index\":0,\"passed\":3,\"evaluated\":3},{\"index\":1,"
    "\"passed\":1,\"evaluated\":3},{\"index\":2,\"passed\":3,\"evaluated\":3}]},"
    "{\"case_id\":\"q<2>\",\"arms\":[{\"index\":0,\"passed\":2,\"evaluated\":2},{\"index\":1,"
    "\"passed\":0,\"evaluated\":2},{\"index\":2,\"passed\":1,\"evaluated\":2}]},"
    "{\"case_id\":\"q3\",\"arms\":[{\"index\":0,\"passed\":1,\"evaluated\":3},{\"index\":1,"
    "\"passed\":0,\"evaluated\":3},{\"index\":2,\"passed\":0,\"evaluated\":3}]}]";

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    ck_assert_msg(v != NULL, "%s", e.text);
    return v;
}

/* What writer(out, exp, cases) printed, as a malloc'd string. */
static char *capture(void (*writer)(FILE *, const json_t *, const json_t *), const json_t *exp,
                     const json_t *cases)
{
    /* Static, so that no pointer to a local outlives the call (the stream keeps &buf). */
    static char *buf;
    static size_t len;
    buf = NULL;
    len = 0;
    FILE *f = open_memstream(&buf, &len);
    writer(f, exp, cases);
    fclose(f);
    return buf;
}

static void markdown(FILE *f, const json_t *exp, const json_t *cases)
{
    (void)cases;
    cli_report_markdown(f, exp);
}

static void table(FILE *f, const json_t *exp, const json_t *cases)
{
    (void)cases;
    cli_report_table(f, exp);
}

START_TEST(markdown_is_a_table_per_treatment)
{
    json_t *exp = parse(EXPERIMENT);
    char *md = capture(markdown, exp, NULL);
    const char *want =
        "### evald experiment exp_0123456789abcdef0123456789abcdef: qa & <brevity>\n"
        "\n"
        "Status **completed**, 3 cases, control **v1**; 95% intervals, Bonferroni-adjusted.\n"
        "\n"
        "| treatment | verdict | Δ pass rate | interval | p (adjusted) | MDE | Δ tokens | Δ cost $ "
        "|"
        " Δ wall ms | Δ calls |\n"
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n"
        "| v2 | ❌ worse | -0.300 | [-0.450, -0.150] | 0.020 | 0.200 | -10 (-12.5%) | -0.0001 | "
        "n/a | +0 (+0.0%) |\n"
        "| v3 | inconclusive | +0.000 | [-0.500, +0.500] | 1.000 | 0.600 | n/a | n/a | n/a | n/a "
        "|\n";
    ck_assert_str_eq(md, want);
    free(md);
    json_decref(exp);
}
END_TEST

START_TEST(the_table_says_each_verdict_and_what_inconclusive_needs)
{
    json_t *exp = parse(EXPERIMENT);
    char *t = capture(table, exp, NULL);
    /* Header, v2, v3, the cases needed under v3, the footer. */
    char *lines[8] = {0};
    size_t n = 0;
    for (char *save = NULL, *l = strtok_r(t, "\n", &save); l != NULL && n < 8;
         l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    ck_assert_uint_eq(n, 5);
    ck_assert(strncmp(lines[0], "treatment", 9) == 0);
    ck_assert_msg(strstr(lines[1], "v2 vs v1") == lines[1] && strstr(lines[1], "-0.300") &&
                      strstr(lines[1], "[-0.450, -0.150]") && strstr(lines[1], "worse") &&
                      strstr(lines[1], "-10 (-12.5%)") && strstr(lines[1], "+0 (+0.0%)"),
                  "%s", lines[1]);
    /* A cost column's heading starts where its cells do ("Δ" is two bytes, one column). */
    const char *head = strstr(lines[0], "Δ tokens"), *cell = strstr(lines[1], "-10 (-12.5%)");
    ck_assert_int_eq((int)(head - lines[0]) - 1, (int)(cell - lines[1]));
    ck_assert_msg(strstr(lines[2], "v3 vs v1") == lines[2] && strstr(lines[2], "inconclusive"),
                  "%s", lines[2]);
    ck_assert_msg(strstr(lines[3], "needs about 120 cases"), "%s", lines[3]);
    ck_assert_str_eq(lines[4], "95% intervals, Bonferroni-adjusted over 2 treatments");
    free(t);
    json_decref(exp);
}
END_TEST

START_TEST(github_annotations_name_worse_treatments_and_regressed_cases)
{
    json_t *exp = parse(EXPERIMENT), *cases = parse(CASES);
    char *gh = capture(cli_report_github, exp, cases);
    const char *want =
        "::error title=evald%3A v2 is worse than v1::pass rate -0.300 [-0.450, -0.150], p "
        "(adjusted) 0.020\n"
        "::warning title=evald%3A case q1 regressed in v2::v1 passed 3/3 runs, v2 passed 1/3\n"
        "::warning title=evald%3A case q<2> regressed in v2::v1 passed 2/2 runs, v2 passed 0/2\n"
        "::warning title=evald%3A case q<2> regressed in v3::v1 passed 2/2 runs, v3 passed 1/2\n";
    ck_assert_str_eq(gh, want);
    free(gh);
    json_decref(exp);
    json_decref(cases);
}
END_TEST

START_TEST(junit_has_a_suite_per_treatment_and_validates)
{
    json_t *exp = parse(EXPERIMENT), *cases = parse(CASES);
    char *xml = capture(cli_report_junit, exp, cases);
    ck_assert_ptr_nonnull(strstr(xml, "<testsuite name=\"v2 vs v1\" tests=\"3\" failures=\"2\""));
    ck_assert_ptr_nonnull(strstr(xml, "<testsuite name=\"v3 vs v1\" tests=\"3\" failures=\"1\""));
    ck_assert_ptr_nonnull(strstr(xml, "name=\"q&lt;2&gt;\">"));
    ck_assert_ptr_nonnull(strstr(xml, "<failure message=\"v1 passed 3/3 runs, v2 passed 1/3\""));
    /* q3: the control does not pass it, so no treatment regressed there. */
    ck_assert_ptr_nonnull(strstr(
        xml, "<testcase classname=\"exp_0123456789abcdef0123456789abcdef.v3\" name=\"q3\"/>"));

    char path[] = "/tmp/evald-junit-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, xml, strlen(xml)), (ssize_t)strlen(xml));
    close(fd);
    if (system("command -v xmllint >/dev/null 2>&1") != 0) {
        fprintf(stderr, "SKIPPED: JUnit schema check (xmllint is not installed: apt-get install "
                        "libxml2-utils)\n");
    } else {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "xmllint --noout --schema %s/tests/cli/junit.xsd %s",
                 getenv("EVALD_SOURCE_DIR") ? getenv("EVALD_SOURCE_DIR") : EVALD_SOURCE_DIR, path);
        ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
        /* The schema is not a rubber stamp: a suite without its counts fails it. */
        FILE *f = fopen(path, "w");
        fputs("<?xml version=\"1.0\"?><testsuites><testsuite name=\"x\"><testcase name=\"a\" "
              "classname=\"b\"/></testsuite></testsuites>\n",
              f);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "xmllint --noout --schema %s/tests/cli/junit.xsd %s 2>/dev/null",
                 getenv("EVALD_SOURCE_DIR") ? getenv("EVALD_SOURCE_DIR") : EVALD_SOURCE_DIR, path);
        ck_assert_int_ne(system(cmd), 0);
    }
    unlink(path);
    free(xml);
    json_decref(exp);
    json_decref(cases);
}
END_TEST

START_TEST(exit_codes_follow_the_verdicts)
{
    json_t *exp = parse(EXPERIMENT);
    ck_assert_int_eq(cli_report_exit(exp, false, false), CLI_WORSE);
    json_t *c0 = json_array_get(json_object_get(exp, "comparisons"), 0);
    json_object_set_new(c0, "verdict", json_string("better"));
    ck_assert_int_eq(cli_report_exit(exp, false, false), CLI_OK);
    ck_assert_int_eq(cli_report_exit(exp, false, true), CLI_INCONCLUSIVE);
    ck_assert_int_eq(cli_report_exit(exp, true, false), CLI_WORSE); /* v3 is not better */
    json_t *c1 = json_array_get(json_object_get(exp, "comparisons"), 1);
    json_object_set_new(c1, "verdict", json_string("better"));
    ck_assert_int_eq(cli_report_exit(exp, true, true), CLI_OK);
    json_object_set_new(c1, "verdict", json_string("equivalent"));
    ck_assert_int_eq(cli_report_exit(exp, false, true), CLI_OK);
    json_decref(exp);
}
END_TEST

/*
 * An anytime experiment that stopped once decided: 1,000 cases, control v1, v2 better
 * (decided at case 84), v3 worse (decided at 60); 916 cases × 3 arms never ran.
 */
static const char SEQUENTIAL[] =
    "{\"experiment_id\":\"exp_0123456789abcdef0123456789abcdef\",\"name\":\"seq\","
    "\"status\":\"completed\",\"dataset\":{\"dataset_id\":\"ds_1\",\"case_count\":1000},"
    "\"request\":{\"stopping\":{\"rule\":\"anytime\",\"min_cases\":10,\"seed\":7}},"
    "\"stopped\":{\"reason\":\"decided\",\"at_case\":84,\"runs_saved\":2748},"
    "\"arms\":[{\"index\":0,\"label\":\"v1\"},{\"index\":1,\"label\":\"v2\"},"
    "{\"index\":2,\"label\":\"v3\"}],"
    "\"comparisons\":["
    "{\"treatment\":1,\"label\":\"v2\",\"pass_rate\":{\"delta\":0.25,\"ci_low\":0.1,"
    "\"ci_high\":0.4,\"p_value_adjusted\":0.001,\"mde\":0.1},\"metrics\":{},"
    "\"sequential\":{\"n\":84,\"low\":0.0512,\"high\":0.6,\"verdict\":\"better\","
    "\"decided_at\":84},\"verdict\":\"better\",\"fixed_verdict\":\"better\"},"
    "{\"treatment\":2,\"label\":\"v3\",\"pass_rate\":{\"delta\":-0.2,\"ci_low\":-0.45,"
    "\"ci_high\":0.05,\"p_value_adjusted\":0.2,\"mde\":0.3},\"metrics\":{},"
    "\"sequential\":{\"n\":84,\"low\":-0.7,\"high\":-0.01,\"verdict\":\"worse\","
    "\"decided_at\":60},\"verdict\":\"worse\",\"fixed_verdict\":\"inconclusive\"}],"
    "\"analysis\":{\"alpha\":0.05,\"partial\":false,\"rule\":\"anytime\"}}";

/* Its case rows: q1 and q2 ran, q3 was never dispatched. */
static const char SEQUENTIAL_CASES[] =
    "[{\"case_id\":\"q1\",\"skipped\":false,\"arms\":[{\"index\":0,\"passed\":1,\"evaluated\":1},"
    "{\"index\":1,\"passed\":1,\"evaluated\":1},{\"index\":2,\"passed\":0,\"evaluated\":1}]},"
    "{\"case_id\":\"q2\",\"skipped\":false,\"arms\":[{\"index\":0,\"passed\":0,\"evaluated\":1},"
    "{\"index\":1,\"passed\":1,\"evaluated\":1},{\"index\":2,\"passed\":0,\"evaluated\":1}]},"
    "{\"case_id\":\"q3\",\"skipped\":true,\"arms\":[{\"index\":0,\"passed\":0,\"evaluated\":0},"
    "{\"index\":1,\"passed\":0,\"evaluated\":0},{\"index\":2,\"passed\":0,\"evaluated\":0}]}]";

START_TEST(numbers_have_thousands_separators)
{
    static const struct {
        long long v;
        const char *want;
    } counts[] = {{0, "0"},
                  {7, "7"},
                  {999, "999"},
                  {1000, "1,000"},
                  {2748, "2,748"},
                  {100000, "100,000"},
                  {1310720, "1,310,720"},
                  {-1234567, "-1,234,567"}};
    char buf[32];
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
        ck_assert_str_eq(cli_count_text(buf, sizeof(buf), counts[i].v), counts[i].want);
    /* A buffer too short is cut, never overrun. */
    char tiny[4];
    ck_assert_str_eq(cli_count_text(tiny, sizeof(tiny), 123456), "123");
    static const struct {
        double usd;
        const char *want;
    } money[] = {{1.2, "$1.20"},          {9.8, "$9.80"},         {0.352, "$0.35"},
                 {0.0012, "$0.0012"},     {0.000123, "$0.00012"}, {0, "$0.00"},
                 {2621.792, "$2,621.79"}, {999.999, "$1,000.00"}, {12345.6, "$12,345.60"}};
    for (size_t i = 0; i < sizeof(money) / sizeof(money[0]); i++)
        ck_assert_str_eq(cli_usd_text(buf, sizeof(buf), money[i].usd), money[i].want);
}
END_TEST

/* A plan as POST /v1/experiments/plan answers it: 1,000 cases, 2 arms, 3 repeats. */
static const char PLAN[] =
    "{\"cases\":1000,\"arms\":2,\"repeats\":3,\"runs\":6000,\"calls\":{\"min\":600},"
    "\"tokens\":{\"input_estimate\":240000,\"output_max\":49152000},"
    "\"cost_usd\":{\"estimate\":1.2,\"max\":9.8},"
    "\"power\":{\"effect\":0.2,\"sd\":0.5,\"alpha_adjusted\":0.05,\"cases_needed\":50,"
    "\"runs_needed\":300}}";

START_TEST(the_plan_line_says_runs_calls_and_cost)
{
    json_t *plan = parse(PLAN);
    char line[256];
    ck_assert_str_eq(cli_plan_line(line, sizeof(line), plan),
                     "plan: 6,000 runs, at least 600 calls, cost ≈ $1.20 (max $9.80)");
    json_object_set_new(plan, "cost_usd", json_null());
    ck_assert_str_eq(cli_plan_line(line, sizeof(line), plan),
                     "plan: 6,000 runs, at least 600 calls, cost unknown (no price)");
    json_decref(plan);
}
END_TEST

/* What cli_plan_print printed of plan for request. */
static char *plan_text(const json_t *plan, const char *request)
{
    json_t *req = parse(request);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cli_plan_print(f, plan, req);
    fclose(f);
    json_decref(req);
    return buf;
}

START_TEST(the_plan_is_printed_figure_by_figure)
{
    static const char ANYTIME[] = "{\"stopping\":{\"rule\":\"anytime\",\"min_cases\":200}}";
    json_t *plan = parse(PLAN);
    char *text = plan_text(plan, ANYTIME);
    ck_assert_str_eq(text,
                     "runs            6,000 (1,000 cases × 2 arms × 3 repeats)\n"
                     "calls           at least 600 (the anytime rule may stop after min_cases "
                     "cases)\n"
                     "input tokens    about 240,000\n"
                     "output tokens   at most 49,152,000\n"
                     "cost            about $1.20, at most $9.80\n"
                     "power           50 cases needed, 300 runs (effect 0.2, s.d. 0.5, alpha "
                     "0.05 adjusted; fixed-sample, 80% power)\n"
                     "                the anytime rule needs about twice as many cases at this "
                     "effect, far fewer when the effect is larger\n");
    free(text);

    /* A judge's and a simulated user's calls, apart from the arms'. */
    json_object_set_new(plan, "judge",
                        json_pack("{s:i, s:i, s:{s:f}}", "calls", 4000, "output_tokens_max",
                                  2048000, "cost_usd", "output_max", 1.2288));
    json_object_set_new(plan, "simulator",
                        json_pack("{s:i, s:i, s:i, s:n}", "calls_max", 12000, "agent_answers_max",
                                  18000, "output_tokens_max", 98304000, "cost_usd"));
    text = plan_text(plan, ANYTIME);
    ck_assert_msg(strstr(text, "\njudge           4,000 calls, at most 2,048,000 output tokens, "
                               "at most $1.23\n") != NULL &&
                      strstr(text, "\nsimulated user  at most 12,000 calls, at most 98,304,000 "
                                   "output tokens (no price for its model)\npower ") != NULL,
                  "%s", text);
    free(text);
    json_object_del(plan, "judge");
    json_object_del(plan, "simulator");

    /* The fixed rule, no price, and more cases needed than there are. */
    json_object_set_new(plan, "cost_usd", json_null());
    json_object_set_new(json_object_get(plan, "power"), "cases_needed", json_integer(1500));
    json_object_set_new(json_object_get(plan, "power"), "runs_needed", json_integer(9000));
    text = plan_text(plan, "{}");
    ck_assert_msg(strstr(text, "\ncalls           at least 600\n") &&
                      strstr(text, "\ncost            unknown (no price for the model)\n") &&
                      strstr(text, "\npower           1,500 cases needed, 9,000 runs (") &&
                      strstr(text, "\n                more than the 1,000 cases there are\n") &&
                      !strstr(text, "anytime"),
                  "%s", text);
    free(text);

    /* What is missing when the power is unknown. */
    static const struct {
        const char *effect, *sd, *want;
    } unknown[] = {
        {NULL, NULL,
         "power           unknown: no effect (plan.effect, or analysis.min_effect above 0) and "
         "no s.d. (plan.sd or plan.pilot_experiment_id)\n"},
        {NULL, "0.5",
         "power           unknown: no effect (plan.effect, or analysis.min_effect above 0)\n"},
        {"0.2", NULL,
         "power           unknown: no s.d. of the per-case difference (plan.sd or "
         "plan.pilot_experiment_id)\n"},
        {"0.2", "0.5", "power           unknown for an effect of 0.2 at s.d. 0.5\n"},
    };
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        json_t *power = json_object_get(plan, "power");
        json_object_set_new(power, "effect",
                            unknown[i].effect ? json_real(atof(unknown[i].effect)) : json_null());
        json_object_set_new(power, "sd",
                            unknown[i].sd ? json_real(atof(unknown[i].sd)) : json_null());
        json_object_set_new(power, "cases_needed", json_null());
        json_object_set_new(power, "runs_needed", json_null());
        text = plan_text(plan, ANYTIME);
        const char *line = strstr(text, "\npower ");
        ck_assert_msg(line != NULL, "%s", text);
        ck_assert_str_eq(line + 1, unknown[i].want);
        free(text);
    }
    json_decref(plan);
}
END_TEST

START_TEST(a_stop_is_said_when_decided_or_budget)
{
    json_t *exp = parse(SEQUENTIAL);
    json_t *stopped = json_object_get(exp, "stopped");
    char line[160];
    ck_assert(cli_report_stop(line, sizeof(line), exp));
    ck_assert_str_eq(line, "decided at case 84 of 1,000, 2,748 runs saved");
    json_object_set_new(stopped, "reason", json_string("budget"));
    json_object_set_new(stopped, "at_case", json_integer(40));
    json_object_set_new(stopped, "runs_saved", json_integer(1));
    ck_assert(cli_report_stop(line, sizeof(line), exp));
    ck_assert_str_eq(line, "budget reached at case 40 of 1,000, 1 run saved");
    /* Every case ran, or no stop at all (the fixed rule, a cancel): nothing to say. */
    json_object_set_new(stopped, "reason", json_string("exhausted"));
    ck_assert(!cli_report_stop(line, sizeof(line), exp));
    ck_assert_str_eq(line, "");
    json_object_set_new(exp, "stopped", json_null());
    ck_assert(!cli_report_stop(line, sizeof(line), exp));
    json_object_del(exp, "stopped");
    ck_assert(!cli_report_stop(line, sizeof(line), exp));
    json_decref(exp);
}
END_TEST

START_TEST(a_judge_line_says_the_preference_and_when_to_distrust_it)
{
    json_t *exp = parse(EXPERIMENT);
    json_t *c = json_array_get(json_object_get(exp, "comparisons"), 0);
    char line[320];
    ck_assert_str_eq(cli_judge_note(line, sizeof(line), c), "");
    json_object_set_new(c, "preference",
                        json_pack("{s:f, s:f, s:f, s:f, s:i, s:i, s:i, s:s}", "delta", 0.4,
                                  "ci_low", -0.7106, "ci_high", 1.5106, "rate", 0.7, "wins", 3,
                                  "losses", 1, "ties", 1, "verdict", "inconclusive"));
    json_object_set_new(c, "judge_quality",
                        json_pack("{s:f, s:{s:f, s:f, s:f}}", "consistency", 1.0, "first_slot",
                                  "fraction", 0.5, "wilson_low", 0.2152, "wilson_high", 0.7848));
    ck_assert_str_eq(cli_judge_note(line, sizeof(line), c),
                     "judge: preference +0.400 [-0.711, +1.511], rate 0.70 (3 won, 1 lost, 1 "
                     "tied), inconclusive; consistency 1.00, first slot 0.50");
    /* An always-first-slot judge: both warnings. */
    json_object_set_new(c, "judge_quality",
                        json_pack("{s:f, s:{s:f, s:f, s:f}}", "consistency", 0.0, "first_slot",
                                  "fraction", 1.0, "wilson_low", 0.72, "wilson_high", 1.0));
    cli_judge_note(line, sizeof(line), c);
    ck_assert_ptr_nonnull(strstr(line, "; distrust: consistency below 0.8"));
    ck_assert_ptr_nonnull(strstr(line, "; distrust: the judge favours a slot"));
    char *t = capture(table, exp, NULL);
    ck_assert_ptr_nonnull(strstr(t, "judge: preference +0.400"));
    free(t);
    char *md = capture(markdown, exp, NULL);
    ck_assert_ptr_nonnull(strstr(md, "\n- **v2**: judge: preference +0.400"));
    free(md);
    json_decref(exp);
}
END_TEST

START_TEST(sequential_verdicts_are_marked_in_every_output)
{
    json_t *exp = parse(SEQUENTIAL), *cases = parse(SEQUENTIAL_CASES);

    /* The table: the note under each verdict, the footer, the stop. */
    char *t = capture(table, exp, NULL);
    const char *v2 = strstr(t, "\nv2 vs v1 ");
    ck_assert_msg(v2 != NULL && strstr(v2, " better "), "%s", t);
    ck_assert_msg(strstr(t, "\n                     sequential (anytime-valid): CS [+0.051, "
                            "+0.600] over 84 cases, decided at case 84; fixed-sample verdict "
                            "better\n") != NULL,
                  "%s", t);
    ck_assert_msg(strstr(t, "\n                     sequential (anytime-valid): CS [-0.700, "
                            "-0.010] over 84 cases, decided at case 60; fixed-sample verdict "
                            "inconclusive\n") != NULL,
                  "%s", t);
    const char *tail = strstr(t, "\n95% intervals");
    ck_assert_msg(tail != NULL, "%s", t);
    ck_assert_str_eq(tail + 1, "95% intervals, Bonferroni-adjusted over 2 treatments\n"
                               "verdicts are sequential (anytime-valid); Δ pass, CI and p are "
                               "fixed-sample figures, not valid under optional stopping\n"
                               "decided at case 84 of 1,000, 2,748 runs saved\n");
    free(t);

    /* Markdown: the note beside each verdict, the stop under the heading. */
    char *md = capture(markdown, exp, NULL);
    const char *want_md =
        "### evald experiment exp_0123456789abcdef0123456789abcdef: seq\n"
        "\n"
        "Status **completed**, 1000 cases, control **v1**; 95% intervals, Bonferroni-adjusted.\n"
        "\n"
        "Verdicts are sequential (anytime-valid): each has its confidence sequence (CS) beside "
        "it; Δ pass rate, interval and p are fixed-sample figures, not valid under optional "
        "stopping.\n"
        "\n"
        "Stopped early: decided at case 84 of 1,000, 2,748 runs saved.\n"
        "\n"
        "| treatment | verdict | Δ pass rate | interval | p (adjusted) | MDE | Δ tokens | Δ cost $ "
        "| Δ wall ms | Δ calls |\n"
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n"
        "| v2 | ✅ better · sequential (anytime-valid): CS [+0.051, +0.600] over 84 cases, "
        "decided at case 84 | +0.250 | [+0.100, +0.400] | 0.001 | 0.100 | n/a | n/a | n/a | n/a "
        "|\n"
        "| v3 | ❌ worse · sequential (anytime-valid): CS [-0.700, -0.010] over 84 cases, decided "
        "at case 60 | -0.200 | [-0.450, +0.050] | 0.200 | 0.300 | n/a | n/a | n/a | n/a |\n";
    ck_assert_str_eq(md, want_md);
    free(md);

    /* GitHub: the worse verdict with its CS first, regressions, then the stop. */
    char *gh = capture(cli_report_github, exp, cases);
    ck_assert_str_eq(gh, "::error title=evald%3A v3 is worse than v1::sequential (anytime-valid)"
                         ": CS [-0.700, -0.010] over 84 cases, decided at case 60; pass rate "
                         "-0.200 (fixed-sample [-0.450, +0.050])\n"
                         "::warning title=evald%3A case q1 regressed in v3::v1 passed 1/1 runs, "
                         "v3 passed 0/1\n"
                         "::notice title=evald%3A stopped early::decided at case 84 of 1,000, "
                         "2,748 runs saved\n");
    free(gh);

    /* JUnit: the suite's properties and the case never run, skipped; valid. */
    char *xml = capture(cli_report_junit, exp, cases);
    ck_assert_msg(strstr(xml, "<testsuite name=\"v2 vs v1\" tests=\"3\" failures=\"0\" "
                              "errors=\"0\" skipped=\"1\">\n"
                              "    <properties>\n"
                              "      <property name=\"verdict\" value=\"better\"/>\n"
                              "      <property name=\"verdict_rule\" value=\"sequential "
                              "(anytime-valid)\"/>\n"
                              "      <property name=\"sequential\" value=\"sequential "
                              "(anytime-valid): CS [+0.051, +0.600] over 84 cases, decided at "
                              "case 84\"/>\n"
                              "      <property name=\"fixed_sample_verdict\" value=\"better\"/>\n"
                              "      <property name=\"stopped\" value=\"decided at case 84 of "
                              "1,000, 2,748 runs saved\"/>\n"
                              "    </properties>\n") != NULL,
                  "%s", xml);
    ck_assert_msg(strstr(xml, "<testcase classname=\"exp_0123456789abcdef0123456789abcdef.v3\" "
                              "name=\"q3\">\n      <skipped message=\"not run: the experiment "
                              "stopped early (decided at case 84 of 1,000, 2,748 runs "
                              "saved)\"/>\n    </testcase>\n") != NULL,
                  "%s", xml);
    ck_assert_msg(strstr(xml, "<testsuite name=\"v3 vs v1\" tests=\"3\" failures=\"1\" "
                              "errors=\"0\" skipped=\"1\">") != NULL,
                  "%s", xml);
    if (system("command -v xmllint >/dev/null 2>&1") == 0) {
        char path[] = "/tmp/evald-junit-XXXXXX";
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, xml, strlen(xml)), (ssize_t)strlen(xml));
        close(fd);
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "xmllint --noout --schema %s/tests/cli/junit.xsd %s",
                 getenv("EVALD_SOURCE_DIR") ? getenv("EVALD_SOURCE_DIR") : EVALD_SOURCE_DIR, path);
        ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
        unlink(path);
    }
    free(xml);

    /* The fixed rule: its outputs stay as they were, sequential block or not. */
    json_object_set_new(json_object_get(exp, "analysis"), "rule", json_string("fixed"));
    json_object_set_new(json_object_get(json_object_get(exp, "request"), "stopping"), "rule",
                        json_string("fixed"));
    json_object_set_new(exp, "stopped", json_null());
    t = capture(table, exp, NULL);
    ck_assert_msg(strstr(t, "sequential") == NULL && strstr(t, "decided") == NULL, "%s", t);
    free(t);
    md = capture(markdown, exp, NULL);
    ck_assert_msg(strstr(md, "sequential") == NULL && strstr(md, "Stopped") == NULL, "%s", md);
    free(md);
    xml = capture(cli_report_junit, exp, cases);
    ck_assert_msg(strstr(xml, "<properties>") == NULL, "%s", xml);
    free(xml);
    json_decref(cases);
    json_decref(exp);
}
END_TEST

START_TEST(continue_counts_as_inconclusive)
{
    json_t *exp = parse(SEQUENTIAL);
    json_t *cmps = json_object_get(exp, "comparisons");
    json_object_set_new(json_array_get(cmps, 1), "verdict", json_string("continue"));
    ck_assert_int_eq(cli_report_exit(exp, false, false), CLI_OK);
    ck_assert_int_eq(cli_report_exit(exp, false, true), CLI_INCONCLUSIVE);
    ck_assert_int_eq(cli_report_exit(exp, true, false), CLI_WORSE);
    json_object_set_new(json_array_get(cmps, 0), "verdict", json_string("worse"));
    ck_assert_int_eq(cli_report_exit(exp, false, true), CLI_WORSE);
    json_decref(exp);
}
END_TEST

static char *write_temp(const char *suffix, const char *text)
{
    char *path = NULL;
    ck_assert_int_gt(asprintf(&path, "/tmp/evald-cli-test-%d-%s", (int)getpid(), suffix), 0);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

START_TEST(yaml_files_keep_the_line_of_every_value)
{
    char *path = write_temp("a.yaml", "# an experiment\n"
                                      "name: qa\n"
                                      "repeats: 3\n"
                                      "alpha: 0.05\n"
                                      "flag: true\n"
                                      "word: yes\n"
                                      "none: ~\n"
                                      "quoted: \"3\"\n"
                                      "control: &c\n"
                                      "  prompt: |\n"
                                      "    Question: {{question}}\n"
                                      "treatments:\n"
                                      "  - label: v2\n"
                                      "    prompt: \"\"\n"
                                      "  - *c\n");
    struct cli_doc d;
    char err[256];
    ck_assert_msg(cli_doc_load(&d, path, err, sizeof(err)), "%s", err);
    json_t *want = parse("{\"name\":\"qa\",\"repeats\":3,\"alpha\":0.05,\"flag\":true,\"word\":"
                         "\"yes\",\"none\":null,\"quoted\":\"3\",\"control\":{\"prompt\":"
                         "\"Question: {{question}}\\n\"},\"treatments\":[{\"label\":\"v2\","
                         "\"prompt\":\"\"},{\"prompt\":\"Question: {{question}}\\n\"}]}");
    ck_assert(json_equal(d.root, want));
    ck_assert_int_eq(cli_doc_line_of(&d, "treatments[0].prompt cannot be empty"), 14);
    ck_assert_int_eq(cli_doc_line_of(&d, "treatments[0].colour is not a known field"), 13);
    ck_assert_int_eq(cli_doc_line_of(&d, "repeats must be between 1 and 100"), 3);
    ck_assert_int_eq(cli_doc_line_of(&d, "exactly one of dataset_id and cases must be given"), 0);
    cli_doc_free(&d);
    json_decref(want);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(bad_files_are_refused_with_their_line)
{
    static const struct {
        const char *suffix, *text, *msg;
    } bad[] = {
        {"b.yaml", "a: 1\nb: [1, 2\nc: 3\n", ":3:2: did not find expected ',' or ']'"},
        {"c.yaml", "a: 1\na: 2\n", ":2:1: duplicate key a"},
        {"d.yaml", "- 1\n- 2\n", ":1:1: the file must hold an object (a mapping)"},
        {"e.yaml", "", ":1:1: the file is empty"},
        {"f.json", "{\"a\": 1,\n \"a\": 2}", ":2:"},
        {"g.yaml", "a: *nope\n", ":1:4: unknown alias"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *path = write_temp(bad[i].suffix, bad[i].text);
        struct cli_doc d;
        char err[256];
        ck_assert_msg(!cli_doc_load(&d, path, err, sizeof(err)), "%s loaded", bad[i].suffix);
        ck_assert_msg(strncmp(err, path, strlen(path)) == 0 && strstr(err, bad[i].msg) != NULL,
                      "%s: %s", bad[i].suffix, err);
        unlink(path);
        free(path);
    }
}
END_TEST

START_TEST(a_template_variable_is_found_at_its_first_use)
{
    char *path =
        write_temp("t.yaml", "control:\n"
                             "  prompt: \"Topic {{ topic }}\"\n"
                             "treatments:\n"
                             "  - {prompt: \"About {{topic}} and {{ meta.kind }}\"}\n"
                             "evaluator:\n"
                             "  arguments: {expected: \"{{expected}}\", note: \"{{topics}}\"}\n"
                             "cases:\n"
                             "  - {vars: {q: \"{{kind}}\"}}\n");
    struct cli_doc d;
    char err[256], field[128] = "";
    ck_assert_msg(cli_doc_load(&d, path, err, sizeof(err)), "%s", err);
    ck_assert_int_eq(cli_doc_template_line(&d, "case c1: template variable topic is not defined",
                                           field, sizeof(field)),
                     2);
    ck_assert_str_eq(field, "control.prompt");
    ck_assert_int_eq(cli_doc_template_line(&d,
                                           "case c2: template variable meta.kind is not "
                                           "defined",
                                           field, sizeof(field)),
                     4);
    ck_assert_str_eq(field, "treatments[0].prompt");
    ck_assert_int_eq(cli_doc_template_line(&d, "case c1: template variable topics is not defined",
                                           field, sizeof(field)),
                     6);
    ck_assert_str_eq(field, "evaluator.arguments.note");
    /* Inline cases are data: no template there. */
    ck_assert_int_eq(cli_doc_template_line(&d, "case c1: template variable kind is not defined",
                                           field, sizeof(field)),
                     0);
    ck_assert_int_eq(
        cli_doc_template_line(&d, "repeats must be between 1 and 100", field, sizeof(field)), 0);
    cli_doc_free(&d);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(a_file_annotation_escapes_its_file_and_message)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cli_github_file_error(f, "a,b:c.yaml", 7, 0, "100% wrong\nnext");
    cli_github_file_error(f, "d.yaml", 3, 2, "bad");
    cli_github_file_error(f, "e.yaml", 0, 5, "gone");
    fclose(f);
    ck_assert_str_eq(buf,
                     "::error file=a%2Cb%3Ac.yaml,line=7,title=evald-cli::100%25 wrong%0Anext\n"
                     "::error file=d.yaml,line=3,col=2,title=evald-cli::bad\n"
                     "::error file=e.yaml,title=evald-cli::gone\n");
    free(buf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_add_test(tc, markdown_is_a_table_per_treatment);
    tcase_add_test(tc, the_table_says_each_verdict_and_what_inconclusive_needs);
    tcase_add_test(tc, github_annotations_name_worse_treatments_and_regressed_cases);
    tcase_add_test(tc, junit_has_a_suite_per_treatment_and_validates);
    tcase_add_test(tc, exit_codes_follow_the_verdicts);
    tcase_add_test(tc, numbers_have_thousands_separators);
    tcase_add_test(tc, the_plan_line_says_runs_calls_and_cost);
    tcase_add_test(tc, the_plan_is_printed_figure_by_figure);
    tcase_add_test(tc, a_stop_is_said_when_decided_or_budget);
    tcase_add_test(tc, sequential_verdicts_are_marked_in_every_output);
    tcase_add_test(tc, a_judge_line_says_the_preference_and_when_to_distrust_it);
    tcase_add_test(tc, continue_counts_as_inconclusive);
    tcase_add_test(tc, yaml_files_keep_the_line_of_every_value);
    tcase_add_test(tc, bad_files_are_refused_with_their_line);
    tcase_add_test(tc, a_template_variable_is_found_at_its_first_use);
    tcase_add_test(tc, a_file_annotation_escapes_its_file_and_message);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
