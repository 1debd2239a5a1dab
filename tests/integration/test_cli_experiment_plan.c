/*
 * `evald-cli experiment plan` and what `experiment run` says of plans and stops, end to
 * end: the real evald-cli against the real evald and evald-stub over loopback, a throwaway
 * PostgreSQL database per test (tests/support/cli_experiment_fixtures.c). The plan's
 * figures are worked by hand from the fixture's prompts; an anytime experiment over a
 * decisive dataset stops early and every output says so; a budget stops one too.
 *
 * The stub answers by the marker word of an arm's prompt: PASS answers "yes" (the expected
 * answer of every case), FAIL "no". With the control FAIL and the treatment PASS every case
 * has d = +1, so an anytime experiment decides as soon as its confidence sequence allows.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/sequential.h"
#include "tests/support/cli_experiment_fixtures.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

/* decisive.csv in the test's folder: n cases d1 … dn, question "dN?", each expecting "yes". */
static void write_decisive_csv(int n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    fputs("id,question,expected\n", m);
    for (int i = 1; i <= n; i++)
        fprintf(m, "d%d,d%d?,yes\n", i, i);
    fclose(m);
    free(ct_file_in_dir("decisive.csv", buf));
    free(buf);
}

/*
 * An experiment over decisive.csv (control FAIL, treatment PASS, concurrency 1) with
 * `repeats`, then `more` (YAML lines); the path (malloc'd). Line 12 is the first of more.
 */
static char *decisive_yaml(const char *name, const char *repeats, const char *more)
{
    char *text = NULL;
    ck_assert_int_gt(asprintf(&text,
                              "name: decisive\n"
                              "dimension: prompt\n"
                              "model: {model: stub-model, provider: openai}\n"
                              "control: {label: base, prompt: \"FAIL {{question}}\"}\n"
                              "treatments:\n"
                              "  - {label: cand, prompt: \"PASS {{question}}\"}\n"
                              "dataset: decisive.csv\n"
                              "evaluator:\n"
                              "  function_id: eval::assert::exact\n"
                              "  arguments: {expected: \"{{expected}}\"}\n"
                              "concurrency: 1\n"
                              "repeats: %s\n"
                              "%s",
                              repeats, more),
                     0);
    char *path = ct_file_in_dir(name, text);
    free(text);
    return path;
}

/* The anytime rule of the suite's experiments. */
#define ANYTIME "stopping: {rule: anytime, min_cases: 10}\n"

/* The whole file as a malloc'd string ("" when absent). */
static char *slurp(const char *path)
{
    size_t len = 0;
    char *text = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return strdup("");
    FILE *m = open_memstream(&text, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        fwrite(chunk, 1, n, m);
    fclose(f);
    fclose(m);
    return text;
}

static long long count_rows(const char *sql)
{
    char *n = evd_t_sql(ct_db_url, sql);
    ck_assert_ptr_nonnull(n);
    long long v = atoll(n);
    free(n);
    return v;
}

/* The experiment document of id (new reference). */
static json_t *experiment(const char *id)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    return ct_get(path);
}

START_TEST(plan_prints_the_figures_worked_by_hand)
{
    write_decisive_csv(40);
    char *exp = decisive_yaml("plan.yaml", "2", ANYTIME "plan: {effect: 0.5, sd: 0.5}\n");
    struct ran r;
    ct_run(CLI("experiment", "plan", exp), &r);
    CHECK_EXIT(r, 0);
    ct_assert_plain(&r);
    /*
     * Worked by hand: 40 cases × 2 arms × 2 repeats = 160 runs. The anytime rule with
     * min_cases 10 makes at least 10 × 2 × 2 = 40 calls. The rendered prompts are "FAIL dN?"
     * and "PASS dN?": 8 bytes for d1-d9, 9 for d10-d40, so (9 · 8 + 31 · 9) · 2 arms = 702
     * bytes, ⌈702 / 4⌉ = 176 tokens a repeat, 352 in all. At most 160 × 8192 = 1,310,720
     * output tokens. stub-model has no price. Power: one treatment, α'' = 0.05;
     * ⌈((1.95996 + 0.84162) · 0.5 / 0.5)²⌉ = ⌈7.849⌉ = 8 cases, 8 × 2 × 2 = 32 runs.
     */
    const char *want = "runs            160 (40 cases × 2 arms × 2 repeats)\n"
                       "calls           at least 40 (the anytime rule may stop after min_cases "
                       "cases)\n"
                       "input tokens    about 352\n"
                       "output tokens   at most 1,310,720\n"
                       "cost            unknown (no price for the model)\n"
                       "power           8 cases needed, 32 runs (effect 0.5, s.d. 0.5, alpha "
                       "0.05 adjusted; fixed-sample, 80% power)\n"
                       "                the anytime rule needs about twice as many cases at this "
                       "effect, far fewer when the effect is larger\n";
    ck_assert_str_eq(r.out, want);
    ck_assert_str_eq(r.err, "");

    /* --json: the plan as evald answers it. */
    ct_run(CLI("experiment", "plan", exp, "--json"), &r);
    CHECK_EXIT(r, 0);
    json_t *plan = json_loads(r.out, 0, NULL);
    ck_assert_msg(json_is_object(plan), "%s", r.out);
    ck_assert_int_eq(json_integer_value(json_object_get(plan, "runs")), 160);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(plan, "calls"), "min")),
                     40);
    const json_t *tokens = json_object_get(plan, "tokens");
    ck_assert_int_eq(json_integer_value(json_object_get(tokens, "input_estimate")), 352);
    ck_assert_int_eq(json_integer_value(json_object_get(tokens, "output_max")), 1310720);
    ck_assert(json_is_null(json_object_get(plan, "cost_usd")));
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(plan, "power"), "cases_needed")), 8);
    json_decref(plan);

    /* Nothing was started: one dataset uploaded (the run reuses it), no experiment. */
    ck_assert_int_eq(count_rows("SELECT count(*) FROM experiments"), 0);
    ck_assert_int_eq(count_rows("SELECT count(*) FROM datasets"), 1);

    /* Without an effect or an s.d., the power says what is missing. */
    char *bare = decisive_yaml("bare.yaml", "1", ANYTIME);
    ct_run(CLI("experiment", "plan", bare), &r);
    CHECK_EXIT(r, 0);
    ck_assert_msg(strstr(r.out, "runs            80 (40 cases × 2 arms × 1 repeat)\n") &&
                      strstr(r.out, "calls           at least 20 ") &&
                      strstr(r.out, "power           unknown: no effect (plan.effect, or "
                                    "analysis.min_effect above 0) and no s.d. (plan.sd or "
                                    "plan.pilot_experiment_id)\n"),
                  "%s", r.out);
    free(bare);
    free(exp);
}
END_TEST

START_TEST(plan_gives_the_cost_of_a_priced_model)
{
    write_decisive_csv(40);
    /* A price for stub-model: $1,000 a million input tokens, $2,000 a million output. */
    char *prices = ct_file_in_dir(
        "prices.json", "{\"prices\":[{\"providers\":[\"openai\"],\"model\":\"stub-model\","
                       "\"input_usd_per_mtok\":1000,\"output_usd_per_mtok\":2000}]}");
    static char base[300], file[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", ct_stub.base);
    snprintf(file, sizeof(file), "EVALD_PRICES_FILE=%s", prices);
    char *env[] = {base, "OPENAI_API_KEY=stub-key", file, NULL};
    struct evd_t_proc priced;
    ck_assert_int_eq(evd_t_evald_start(&priced, ct_db_url, env), 0);
    char *exp = decisive_yaml("plan.yaml", "2", ANYTIME);
    struct ran r;
    ct_run((char *[]){(char *)ct_cli_bin(), "--url", priced.base, "experiment", "plan", exp, NULL},
           &r);
    CHECK_EXIT(r, 0);
    /* 352 input tokens at $1,000 a million: $0.352; at most 0.352 + 1,310,720 × 2,000 / 1e6
     * = $2,621.792. */
    ck_assert_msg(strstr(r.out, "\ncost            about $0.35, at most $2,621.79\n") != NULL, "%s",
                  r.out);
    /* run prints the same in its plan line, and --detach still prints the id alone. */
    ct_run((char *[]){(char *)ct_cli_bin(), "--url", priced.base, "experiment", "run", exp,
                      "--detach", NULL},
           &r);
    CHECK_EXIT(r, 0);
    ck_assert_msg(strncmp(r.out, "exp_", 4) == 0 && strlen(r.out) == 37, "%s", r.out);
    ck_assert_str_eq(r.err, "evald-cli: plan: 160 runs, at least 40 calls, cost ≈ $0.35 "
                            "(max $2,621.79)\n");
    char id[64];
    snprintf(id, sizeof(id), "%.36s", r.out);
    ct_wait_status(id, "completed");
    ck_assert_int_eq(evd_t_stop(&priced, SIGTERM, 10000), 0);
    free(exp);
    free(prices);
}
END_TEST

START_TEST(a_refusal_of_the_plan_is_the_refusal_of_the_start)
{
    write_decisive_csv(40);
    char *exp = ct_file_in_dir("bad.yaml", "name: bad\n"
                                           "dimension: prompt\n"
                                           "model: {model: stub-model, provider: openai}\n"
                                           "control: {label: base, prompt: \"FAIL {{question}}\"}\n"
                                           "treatments:\n"
                                           "  - {label: cand, prompt: \"PASS {{question}}\"}\n"
                                           "dataset: decisive.csv\n"
                                           "evaluator:\n"
                                           "  function_id: eval::assert::exact\n"
                                           "  arguments: {expected: \"{{expected}}\"}\n"
                                           "stopping:\n"
                                           "  rule: sometimes\n");
    char want[1024];
    snprintf(want, sizeof(want), "evald-cli: %s:12: stopping.rule must be fixed or anytime\n", exp);
    struct ran r;
    ct_run(CLI("experiment", "plan", exp), &r);
    CHECK_EXIT(r, 2);
    ck_assert_str_eq(r.out, "");
    ck_assert_str_eq(r.err, want);
    ct_run(CLI("experiment", "plan", exp, "--json"), &r);
    CHECK_EXIT(r, 2);
    ck_assert_str_eq(r.out, "");
    /* run: the plan's 400 is reported as the start's refusal, and nothing starts. */
    ct_run(CLI("experiment", "run", exp, "--format", "github"), &r);
    CHECK_EXIT(r, 2);
    ck_assert_str_eq(r.err, want);
    snprintf(want, sizeof(want),
             "::error file=%s,line=12,title=evald-cli::stopping.rule must be fixed or anytime\n",
             exp);
    ck_assert_str_eq(r.out, want);
    ck_assert_int_eq(count_rows("SELECT count(*) FROM experiments"), 0);
    /* A file the CLI cannot read, and no file at all: usage errors, no call. */
    char *gone = ct_in_dir("gone.yaml");
    ct_run(CLI("experiment", "plan", gone), &r);
    CHECK_EXIT(r, 2);
    ct_run(CLI("experiment", "plan"), &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, "usage: evald-cli experiment plan FILE") != NULL, "%s", r.err);
    /* No evald: a transport error. */
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", evd_t_free_port());
    char *ok = decisive_yaml("ok.yaml", "1", ANYTIME);
    ct_run((char *[]){(char *)ct_cli_bin(), "--url", url, "experiment", "plan", ok, NULL}, &r);
    CHECK_EXIT(r, 4);
    free(ok);
    free(gone);
    free(exp);
}
END_TEST

/* The cases of the anytime run: enough that the stop comes well before the last one,
 * however late the analysis pass that sees the decision runs. */
#define RUN_CASES 120

/* The n at which the CS of differences of +1 (α'' = 0.05, min_cases 10) is decided. */
static long long decided_at_for_decisive(void)
{
    struct evd_seq_cs cs;
    evd_seq_cs_init(&cs, 0.05, 10, 0);
    for (int i = 0; i < RUN_CASES && cs.decided_at == 0; i++)
        evd_seq_cs_add(&cs, 1.0);
    ck_assert_uint_gt(cs.decided_at, 0);
    return (long long)cs.decided_at;
}

START_TEST(an_anytime_run_prints_its_plan_and_its_stop)
{
    write_decisive_csv(RUN_CASES);
    char *exp = decisive_yaml("decisive.yaml", "1", ANYTIME);
    char *junit = ct_in_dir("junit.xml"), *md = ct_in_dir("summary.md");
    struct ran r;
    ct_run(CLI("experiment", "run", exp, "--junit", junit, "--markdown", md, "--format", "github",
               "--fail-on-inconclusive"),
           &r);
    CHECK_EXIT(r, 0);
    ct_assert_plain(&r);
    /* The plan before the start: 120 × 2 runs, at least 10 × 2 calls. */
    const char *plan = strstr(r.err, "evald-cli: plan: 240 runs, at least 20 calls, cost unknown "
                                     "(no price)\n");
    ck_assert_msg(plan != NULL, "%s", r.err);
    const char *id = ct_started_id(&r);
    ck_assert_msg(plan < strstr(r.err, "evald-cli: experiment exp_"), "%s", r.err);

    /* The stop as the experiment stored it. */
    json_t *doc = experiment(id);
    const json_t *stopped = json_object_get(doc, "stopped");
    ck_assert_str_eq(json_string_value(json_object_get(stopped, "reason")), "decided");
    long long at = json_integer_value(json_object_get(stopped, "at_case"));
    long long saved = json_integer_value(json_object_get(stopped, "runs_saved"));
    long long want_decided = decided_at_for_decisive();
    ck_assert_int_ge(at, want_decided);
    ck_assert_int_lt(at, RUN_CASES);
    /* The cases never dispatched: 2 runs each. */
    long long skipped = count_rows("SELECT count(*) FROM experiment_cases WHERE skipped");
    ck_assert_int_gt(skipped, 0);
    ck_assert_int_eq(saved, 2 * skipped);
    const json_t *cmp = json_array_get(json_object_get(doc, "comparisons"), 0);
    const json_t *seq = json_object_get(cmp, "sequential");
    ck_assert_str_eq(json_string_value(json_object_get(cmp, "verdict")), "better");
    ck_assert_int_eq(json_integer_value(json_object_get(seq, "decided_at")), want_decided);

    /* The last progress line: the skipped runs apart, the pass rate of the runs that ran
     * (the treatment's half of them). */
    char progress[160];
    snprintf(progress, sizeof(progress), "runs 240/240 (%lld skipped), passed %lld (50.0%%), ",
             saved, (240 - saved) / 2);
    ck_assert_msg(strstr(r.out, progress) != NULL, "%s\nnot in\n%s", progress, r.out);

    char stop[128], note[256];
    snprintf(stop, sizeof(stop), "\ndecided at case %lld of 120, %lld runs saved\n", at, saved);
    ck_assert_msg(strstr(r.out, stop) != NULL, "%s", r.out);
    snprintf(note, sizeof(note),
             "sequential (anytime-valid): CS [%+.3f, %+.3f] over %lld cases, decided at case "
             "%lld; fixed-sample verdict better\n",
             json_number_value(json_object_get(seq, "low")),
             json_number_value(json_object_get(seq, "high")),
             (long long)json_integer_value(json_object_get(seq, "n")), want_decided);
    ck_assert_msg(strstr(r.out, note) != NULL, "%s\nnot in\n%s", note, r.out);
    ck_assert_msg(strstr(r.out, "verdicts are sequential (anytime-valid); ") != NULL, "%s", r.out);

    /* GitHub: the stop as a notice. */
    char gh[160];
    snprintf(gh, sizeof(gh),
             "::notice title=evald%%3A stopped early::decided at case %lld of 120, "
             "%lld runs saved\n",
             at, saved);
    ck_assert_msg(strstr(r.out, gh) != NULL, "%s", r.out);
    /* Markdown: the stop and the sequential verdict. */
    char *summary = slurp(md);
    snprintf(stop, sizeof(stop), "Stopped early: decided at case %lld of 120, %lld runs saved.\n",
             at, saved);
    ck_assert_msg(strstr(summary, stop) != NULL, "%s", summary);
    ck_assert_msg(strstr(summary, "| cand | ✅ better · sequential (anytime-valid): CS [") != NULL,
                  "%s", summary);
    /* JUnit: the cases never run are skipped, and the suite says its verdict is sequential. */
    char *xml = slurp(junit);
    char suite[160];
    snprintf(suite, sizeof(suite),
             "<testsuite name=\"cand vs base\" tests=\"120\" failures=\"0\" errors=\"0\" "
             "skipped=\"%lld\">",
             skipped);
    ck_assert_msg(strstr(xml, suite) != NULL, "%s", xml);
    ck_assert_msg(
        strstr(xml, "<property name=\"verdict_rule\" value=\"sequential (anytime-valid)\"/>"), "%s",
        xml);
    int n = 0;
    for (const char *p = xml; (p = strstr(p, "<skipped message=")) != NULL; p++)
        n++;
    ck_assert_int_eq(n, skipped);
    if (system("command -v xmllint >/dev/null 2>&1") == 0) {
        char *cmd = NULL;
        ck_assert_int_gt(asprintf(&cmd, "xmllint --noout --schema %s/tests/cli/junit.xsd %s",
                                  evd_t_source_dir(), junit),
                         0);
        ck_assert_msg(system(cmd) == 0, "%s does not validate", junit);
        free(cmd);
    }

    /* show and watch of the finished experiment print the stop too. */
    snprintf(stop, sizeof(stop), "\ndecided at case %lld of 120, %lld runs saved\n", at, saved);
    char copy[64];
    snprintf(copy, sizeof(copy), "%s", id);
    ct_run(CLI("experiment", "show", copy), &r);
    CHECK_EXIT(r, 0);
    ck_assert_msg(strstr(r.out, stop) != NULL, "%s", r.out);
    ct_run(CLI("experiment", "watch", copy), &r);
    CHECK_EXIT(r, 0);
    ck_assert_msg(strstr(r.out, stop) != NULL, "%s", r.out);

    free(xml);
    free(summary);
    json_decref(doc);
    free(md);
    free(junit);
    free(exp);
}
END_TEST

START_TEST(a_budget_stop_is_printed)
{
    write_decisive_csv(40);
    /* The fixed rule, 9 calls and two calls a case: four cases fit, the fifth would reach 10
     * (tests/integration/test_experiment_sequential.c works the same budget). */
    char *exp = decisive_yaml("budget.yaml", "1", "budget: {max_calls: 9}\n");
    struct ran r;
    ct_run(CLI("experiment", "run", exp), &r);
    CHECK_EXIT(r, 0);
    ck_assert_msg(strstr(r.err, "evald-cli: plan: 80 runs, at least 80 calls, cost unknown (no "
                                "price)\n") != NULL,
                  "%s", r.err);
    json_t *doc = experiment(ct_started_id(&r));
    const json_t *stopped = json_object_get(doc, "stopped");
    ck_assert_str_eq(json_string_value(json_object_get(stopped, "reason")), "budget");
    ck_assert_int_eq(json_integer_value(json_object_get(stopped, "at_case")), 4);
    ck_assert_msg(strstr(r.out, "\nbudget reached at case 4 of 40, 72 runs saved\n") != NULL, "%s",
                  r.out);
    /* The fixed rule: no sequential note. */
    ck_assert_msg(strstr(r.out, "sequential") == NULL, "%s", r.out);
    json_decref(doc);
    free(exp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_experiment_plan");
    TCase *tc = tcase_create("cli_experiment_plan");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, ct_setup, ct_teardown);
    tcase_add_test(tc, plan_prints_the_figures_worked_by_hand);
    tcase_add_test(tc, plan_gives_the_cost_of_a_priced_model);
    tcase_add_test(tc, a_refusal_of_the_plan_is_the_refusal_of_the_start);
    tcase_add_test(tc, an_anytime_run_prints_its_plan_and_its_stop);
    tcase_add_test(tc, a_budget_stop_is_printed);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
