/*
 * Pairwise judges (../shared/spec/judges.md, docs/judges.md): the real evald and evald-stub
 * over loopback against a throwaway PostgreSQL per test. The script below replaces the
 * fixture's: the arms answer by the case's tag, and scripted judges read the answers in
 * their two slots.
 *
 * Arms by tag: tw (the treatment is better) control "BAD", treatment "GOOD answer"; cw
 * (the control is better) control "GOOD", treatment "BAD answer"; eq both "SAME"; fl the
 * treatment's call fails (HTTP 400: the run fails before an output). The fair judge
 * answers the slot that holds "GOOD", and a tie when none does; the first-slot judge
 * always answers "1".
 */
#define _GNU_SOURCE /* asprintf */
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

#define ARM_RULES                                                                                  \
    "{\"when\":{\"prompt_contains\":\"control tw:\"},\"reply\":{\"text\":\"BAD\"}},"              \
    "{\"when\":{\"prompt_contains\":\"treatment tw:\"},\"reply\":{\"text\":\"GOOD answer\"}},"    \
    "{\"when\":{\"prompt_contains\":\"control cw:\"},\"reply\":{\"text\":\"GOOD\"}},"             \
    "{\"when\":{\"prompt_contains\":\"treatment cw:\"},\"reply\":{\"text\":\"BAD answer\"}},"     \
    "{\"when\":{\"prompt_contains\":\"treatment fl:\"},\"fault\":{\"status\":400}},"              \
    "{\"when\":{\"prompt_contains\":\"control \"},\"reply\":{\"text\":\"SAME\"}},"                \
    "{\"when\":{\"prompt_contains\":\"treatment \"},\"reply\":{\"text\":\"SAME\"}}"

#define USAGE "\"usage\":{\"input_tokens\":40,\"output_tokens\":7}"

/* A judge that reads its slots; `slow` delays it (ms). */
static char *fair_script(int slow)
{
    char *s = NULL;
    ck_assert_int_gt(
        asprintf(&s,
                 "{\"rules\":["
                 "{\"when\":{\"model\":\"judge-model\",\"prompt_contains\":\"<answer_1>\\nGOOD\"},"
                 "\"latency_ms\":%d,\"reply\":{\"json\":{\"result\":{\"winner\":\"1\",\"reason\":\"first "
                 "is good\"}}}," USAGE "},"
                 "{\"when\":{\"model\":\"judge-model\",\"prompt_contains\":\"<answer_2>\\nGOOD\"},"
                 "\"latency_ms\":%d,\"reply\":{\"json\":{\"result\":{\"winner\":\"2\",\"reason\":\"second "
                 "is good\"}}}," USAGE "},"
                 "{\"when\":{\"model\":\"judge-model\"},\"latency_ms\":%d,"
                 "\"reply\":{\"json\":{\"result\":{\"winner\":\"tie\",\"reason\":\"same\"}}}," USAGE "},"
                 ARM_RULES "]}",
                 slow, slow, slow),
        0);
    return s;
}

static const char FIRST_SLOT_SCRIPT[] =
    "{\"rules\":["
    "{\"when\":{\"model\":\"judge-model\"},"
    "\"reply\":{\"json\":{\"result\":{\"winner\":\"1\",\"reason\":\"the first\"}}}," USAGE "}," ARM_RULES
    "]}";

#define JUDGE(orders)                                                                              \
    "\"judge\":{\"kind\":\"pairwise\",\"model\":{\"model\":\"judge-model\",\"provider\":"       \
    "\"openai\"},\"task\":\"{{question}}\",\"instructions\":\"Prefer the good answer.\","        \
    "\"orders\":\"" orders "\",\"max_tokens\":64}"

#define JARMS                                                                                      \
    "\"control\":{\"prompt\":\"control {{tag}}: {{question}}\"},"                                  \
    "\"treatments\":[{\"prompt\":\"treatment {{tag}}: {{question}}\"}]"

#define JCASE(id, t)                                                                               \
    "{\"id\":\"" id "\",\"vars\":{\"tag\":\"" t "\",\"question\":\"what about " id "?\"},"      \
    "\"expected\":\"GOOD\"}"

/* Three cases the treatment wins, one the control wins, one tie. */
#define FAIR_CASES                                                                                 \
    "[" JCASE("a", "tw") "," JCASE("b", "tw") "," JCASE("c", "tw") "," JCASE("d", "cw") ","      \
    JCASE("e", "eq") "]"

static char *body_of(const char *judge, const char *cases, unsigned repeats, const char *more)
{
    return xt_printf("{\"dimension\":\"prompt\"," MODEL "," JARMS ",%s,\"repeats\":%u,"
                     "\"concurrency\":2%s%s,\"cases\":%s}",
                     judge, repeats, more[0] ? "," : "", more, cases);
}

static void use_script(const char *script)
{
    ck_assert_int_eq(evd_t_stub_script(&xt_stub, script), 200);
}

/* The judgements of an experiment (one page). */
static json_t *judgements_of(const char *id, const char *query)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/experiments/%s/judgements?limit=100%s", id, query);
    long st = 0;
    json_t *doc = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    json_t *items = json_incref(json_object_get(doc, "judgements"));
    json_decref(doc);
    return items;
}

START_TEST(a_fair_judge_gives_the_hand_worked_preference)
{
    char *script = fair_script(0);
    use_script(script);
    char *body = body_of(JUDGE("both"), FAIR_CASES, 1, "");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_STR(doc, "status", "completed");
    /* No evaluator: the judge's verdict is the comparison's. */
    ASSERT_STR(doc, "analysis.verdict_by", "judge");
    ck_assert(json_is_null(xt_at(doc, "comparisons.0.evaluator_verdict")));
    /* p = 1, 1, 1, −1, 0: mean 0.4, sd √0.8, se 0.4, df 4, t(0.975, 4) = 2.7764451051977987,
     * |t| = 1: p = 0.37390096630005903 (scipy.stats.t.sf(1, 4) · 2). */
    ASSERT_INT(doc, "comparisons.0.preference.pairs", 5);
    ASSERT_INT(doc, "comparisons.0.preference.wins", 3);
    ASSERT_INT(doc, "comparisons.0.preference.losses", 1);
    ASSERT_INT(doc, "comparisons.0.preference.ties", 1);
    ASSERT_INT(doc, "comparisons.0.preference.inconsistent", 0);
    ASSERT_INT(doc, "comparisons.0.preference.paired_cases", 5);
    ASSERT_NEAR(doc, "comparisons.0.preference.rate", 0.7);
    ASSERT_NEAR(doc, "comparisons.0.preference.delta", 0.4);
    ASSERT_NEAR(doc, "comparisons.0.preference.se", 0.4);
    ASSERT_NEAR(doc, "comparisons.0.preference.df", 4);
    ASSERT_NEAR(doc, "comparisons.0.preference.ci_low", 0.4 - 2.7764451051977987 * 0.4);
    ASSERT_NEAR(doc, "comparisons.0.preference.ci_high", 0.4 + 2.7764451051977987 * 0.4);
    ASSERT_NEAR(doc, "comparisons.0.preference.t_p_value", 0.37390096630005903);
    ASSERT_STR(doc, "comparisons.0.preference.verdict", "inconclusive");
    ASSERT_STR(doc, "comparisons.0.verdict", "inconclusive");
    /* Quality: every pair consistent; 8 named answers, 4 naming slot 1; 4 decisive pairs
     * of unequal lengths, 3 won by the longer answer ("GOOD answer" over "BAD"). */
    ASSERT_INT(doc, "comparisons.0.judge_quality.pairs", 5);
    ASSERT_NEAR(doc, "comparisons.0.judge_quality.consistency", 1.0);
    ASSERT_INT(doc, "comparisons.0.judge_quality.first_slot.n", 8);
    ASSERT_NEAR(doc, "comparisons.0.judge_quality.first_slot.fraction", 0.5);
    ASSERT_INT(doc, "comparisons.0.judge_quality.length.n", 4);
    ASSERT_NEAR(doc, "comparisons.0.judge_quality.length.fraction", 0.75);
    /* Wilson at 95 % of 3/4 (z = 1.959963984540054): (0.30064, 0.95441). */
    ASSERT_NEAR(doc, "comparisons.0.judge_quality.length.wilson_low", 0.30064184258240184);
    ASSERT_NEAR(doc, "comparisons.0.judge_quality.length.wilson_high", 0.9544127391902995);
    /* Ten judge calls of 40 + 7 tokens, apart from the arms'. */
    ASSERT_INT(doc, "comparisons.0.judge_quality.metrics.calls", 10);
    ASSERT_INT(doc, "comparisons.0.judge_quality.metrics.input_tokens", 400);
    ASSERT_INT(doc, "comparisons.0.judge_quality.metrics.output_tokens", 70);
    ASSERT_INT(doc, "spend.calls", 20); /* ten runs and ten judge calls */
    ASSERT_INT(doc, "progress.judgements.planned", 10);
    ASSERT_INT(doc, "progress.judgements.judged", 10);
    ASSERT_INT(doc, "progress.judgements.unjudged", 0);
    /* One row per judge call, each pair's orders together. */
    json_t *js = judgements_of(id, "");
    ck_assert_uint_eq(json_array_size(js), 10);
    json_t *j0 = json_array_get(js, 0), *j1 = json_array_get(js, 1);
    ASSERT_STR(j0, "case_id", "a");
    ASSERT_INT(j0, "order", 1);
    ASSERT_STR(j0, "winner_slot", "2");
    ASSERT_INT(j0, "winner_arm", 1);
    ASSERT_STR(j0, "outcome", "treatment");
    ASSERT_INT(j1, "order", 2);
    ASSERT_STR(j1, "winner_slot", "1");
    ASSERT_STR(j1, "reason", "first is good");
    ck_assert(json_is_false(json_object_get(j1, "inconsistent")));
    json_decref(js);
    /* Filters; a treatment that is not an arm index answers 404. */
    js = judgements_of(id, "&case_id=d&treatment=1");
    ck_assert_uint_eq(json_array_size(js), 2);
    ASSERT_STR(json_array_get(js, 0), "outcome", "control");
    json_decref(js);
    char path[256];
    long st = 0;
    snprintf(path, sizeof(path), "/v1/experiments/%s/judgements?treatment=2", id);
    json_decref(xt_call("GET", path, NULL, &st));
    ck_assert_int_eq(st, 404);
    snprintf(path, sizeof(path), "/v1/experiments/%s/judgements?treatment=x", id);
    json_decref(xt_call("GET", path, NULL, &st));
    ck_assert_int_eq(st, 404);
    /* The export of the judge calls: one record a call, as JSON lines or CSV. */
    struct evd_t_resp er = {0};
    snprintf(path, sizeof(path), "/v1/experiments/%s/export?records=judgements", id);
    xt_request("GET", path, NULL, NULL, 0, &er);
    ck_assert_int_eq(er.status, 200);
    size_t lines = 0;
    for (const char *q = er.body; q != NULL && *q; q++)
        lines += *q == '\n';
    ck_assert_uint_eq(lines, 10);
    ck_assert_ptr_nonnull(strstr(er.body, "\"winner_slot\":\"2\""));
    ck_assert_ptr_nonnull(strstr(er.body, "\"calls\":1"));
    evd_t_resp_free(&er);
    snprintf(path, sizeof(path), "/v1/experiments/%s/export?records=judgements&format=csv", id);
    xt_request("GET", path, NULL, NULL, 0, &er);
    ck_assert_int_eq(er.status, 200);
    ck_assert_msg(strncmp(er.body, "experiment_id,case_id,case_index,repeat,treatment,label,order,", 62) == 0,
                  "%.100s", er.body);
    evd_t_resp_free(&er);
    snprintf(path, sizeof(path), "/v1/experiments/%s/export?records=pairs", id);
    json_decref(xt_call("GET", path, NULL, &st));
    ck_assert_int_eq(st, 400);
    /* The pair view. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/pairs/a/1/1", id);
    json_t *pair = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_STR(pair, "task", "what about a?");
    ASSERT_STR(pair, "control.output", "BAD");
    ASSERT_STR(pair, "treatment_run.output", "GOOD answer");
    ck_assert_uint_eq(json_array_size(json_object_get(pair, "judgements")), 2);
    json_decref(pair);
    snprintf(path, sizeof(path), "/v1/experiments/%s/pairs/a/2/1", id);
    json_decref(xt_call("GET", path, NULL, &st));
    ck_assert_int_eq(st, 404);
    snprintf(path, sizeof(path), "/v1/experiments/%s/pairs/zz/1/1", id);
    json_decref(xt_call("GET", path, NULL, &st));
    ck_assert_int_eq(st, 404);
    json_decref(doc);
    free(id);
    free(body);
    free(script);
}
END_TEST

START_TEST(an_always_first_slot_judge_is_caught)
{
    use_script(FIRST_SLOT_SCRIPT);
    char *body = body_of(JUDGE("both"), FAIR_CASES, 1, "");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_INT(doc, "comparisons.0.judge_quality.pairs", 5);
    ASSERT_NEAR(doc, "comparisons.0.judge_quality.consistency", 0.0);
    ASSERT_INT(doc, "comparisons.0.preference.ties", 5);
    ASSERT_INT(doc, "comparisons.0.preference.wins", 0);
    ASSERT_INT(doc, "comparisons.0.preference.losses", 0);
    ASSERT_INT(doc, "comparisons.0.preference.inconsistent", 5);
    ASSERT_NEAR(doc, "comparisons.0.judge_quality.first_slot.fraction", 1.0);
    ASSERT_INT(doc, "comparisons.0.judge_quality.first_slot.n", 10);
    ASSERT_STR(doc, "comparisons.0.preference.verdict", "inconclusive");
    ASSERT_STR(doc, "comparisons.0.verdict", "inconclusive");
    /* No decisive outcome: no length figure. */
    ck_assert(json_is_null(xt_at(doc, "comparisons.0.judge_quality.length")));
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST

START_TEST(orders_one_alternates_by_repeat)
{
    use_script(FIRST_SLOT_SCRIPT);
    char *body = body_of(JUDGE("one"), FAIR_CASES, 2, "");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    json_t *js = judgements_of(id, "&case_id=a");
    ck_assert_uint_eq(json_array_size(js), 2);
    /* Repeat 1 in order 1 (the control first), repeat 2 in order 2. */
    ASSERT_INT(json_array_get(js, 0), "repeat", 1);
    ASSERT_INT(json_array_get(js, 0), "order", 1);
    ASSERT_STR(json_array_get(js, 0), "outcome", "control");
    ASSERT_INT(json_array_get(js, 1), "repeat", 2);
    ASSERT_INT(json_array_get(js, 1), "order", 2);
    ASSERT_STR(json_array_get(js, 1), "outcome", "treatment");
    json_decref(js);
    /* One win and one loss a case: p = 0 everywhere; no pair judged in both orders. */
    ASSERT_INT(doc, "comparisons.0.preference.wins", 5);
    ASSERT_INT(doc, "comparisons.0.preference.losses", 5);
    ASSERT_NEAR(doc, "comparisons.0.preference.delta", 0.0);
    ASSERT_INT(doc, "comparisons.0.judge_quality.pairs", 0);
    ck_assert(json_is_null(xt_at(doc, "comparisons.0.judge_quality.consistency")));
    ck_assert(json_is_null(xt_at(doc, "comparisons.0.judge_quality.first_slot")));
    ASSERT_INT(doc, "comparisons.0.judge_quality.metrics.calls", 10);
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST

START_TEST(a_failed_run_leaves_its_pair_unjudged)
{
    char *script = fair_script(0);
    use_script(script);
    char *body = body_of(JUDGE("both"),
                         "[" JCASE("a", "tw") "," JCASE("f", "fl") "," JCASE("d", "cw") "]", 1, "");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_INT(doc, "comparisons.0.preference.pairs", 2);
    ASSERT_INT(doc, "comparisons.0.preference.paired_cases", 2);
    ASSERT_INT(doc, "comparisons.0.judge_quality.metrics.calls", 4);
    ASSERT_INT(doc, "progress.judgements.judged", 4);
    ASSERT_INT(doc, "progress.judgements.unjudged", 2);
    json_t *js = judgements_of(id, "&case_id=f");
    ck_assert_uint_eq(json_array_size(js), 2);
    ASSERT_STR(json_array_get(js, 0), "status", "skipped");
    ck_assert(json_is_null(json_object_get(json_array_get(js, 0), "outcome")));
    json_decref(js);
    json_decref(doc);
    free(id);
    free(body);
    free(script);
}
END_TEST

START_TEST(judge_metrics_leave_the_arms_metrics_unchanged)
{
    char *script = fair_script(0);
    use_script(script);
    /* The same arms scored by an evaluator, with and without a judge. */
    const char *ev = "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":"
                     "{\"expected\":\"{{expected}}\"}}";
    char *judged_ev = NULL;
    ck_assert_int_gt(asprintf(&judged_ev, "%s,%s", ev, JUDGE("both")), 0);
    char *b1 = body_of(ev, FAIR_CASES, 1, "");
    char *b2 = body_of(judged_ev, FAIR_CASES, 1, "\"analysis\":{\"verdict_by\":\"evaluator\"}");
    char *id1 = xt_start(b1);
    json_t *d1 = xt_wait_done(id1, 60000);
    char *id2 = xt_start(b2);
    json_t *d2 = xt_wait_done(id2, 60000);
    ck_assert(json_is_null(xt_at(d1, "comparisons.0.preference")));
    ck_assert(json_is_null(xt_at(d1, "comparisons.0.judge_quality")));
    ck_assert(json_is_null(xt_at(d1, "progress.judgements")));
    /* Everything the arms' runs decide alike (their times vary run to run). */
    static const char *const same[] = {
        "arms.0.pooled",
        "arms.1.pooled",
        "arms.0.pass_rate",
        "arms.1.pass_rate",
        "arms.0.medians.total_tokens",
        "arms.1.medians.total_tokens",
        "arms.0.medians.input_tokens",
        "arms.1.medians.output_tokens",
        "arms.1.medians.turns",
        "comparisons.0.metrics.total_tokens",
        "comparisons.0.metrics.output_tokens",
        "comparisons.0.metrics.turns",
        NULL,
    };
    for (const char *const *k = same; *k != NULL; k++) {
        ck_assert_msg(xt_at(d1, *k) != NULL, "%s is missing", *k);
        ck_assert_msg(json_equal(xt_at(d1, *k), xt_at(d2, *k)), "%s differs", *k);
    }
    ck_assert(json_equal(xt_at(d1, "comparisons.0.pass_rate"),
                         xt_at(d2, "comparisons.0.pass_rate")));
    ASSERT_STR(d2, "analysis.verdict_by", "evaluator");
    ck_assert(json_equal(xt_at(d2, "comparisons.0.verdict"),
                         xt_at(d2, "comparisons.0.evaluator_verdict")));
    ASSERT_INT(d2, "comparisons.0.judge_quality.metrics.calls", 10);
    ASSERT_INT(d1, "spend.calls", 10);
    ASSERT_INT(d2, "spend.calls", 20);
    json_decref(d1);
    json_decref(d2);
    free(id1);
    free(id2);
    free(b1);
    free(b2);
    free(judged_ev);
    free(script);
}
END_TEST

START_TEST(kill_9_mid_judgement_judges_each_pair_once)
{
    char *script = fair_script(3000);
    use_script(script);
    char *body = body_of(JUDGE("both"), "[" JCASE("a", "tw") "," JCASE("d", "cw") "]", 1, "");
    char *id = xt_start(body);
    /* Wait until a judge call is in flight, then kill evald. */
    for (int waited = 0;; waited += 50) {
        if (xt_sql_long("SELECT count(*) FROM experiment_judgements WHERE experiment_id = '%s'"
                     " AND status = 'running'",
                     id) > 0)
            break;
        ck_assert_int_lt(waited, 30000);
        usleep(50 * 1000);
    }
    evd_t_stop(&xt_evald, SIGKILL, 5000);
    xt_start_evald(NULL);
    json_t *doc = xt_wait_done(id, 90000);
    ASSERT_STR(doc, "status", "completed");
    /* Each judgement written once: four rows, all answered, one at least a second
     * attempt; the tallies count each pair once. */
    ck_assert_int_eq(xt_sql_long("SELECT count(*) FROM experiment_judgements WHERE"
                              " experiment_id = '%s' AND status = 'completed'",
                              id),
                     4);
    ck_assert_int_ge(xt_sql_long("SELECT max(attempt) FROM experiment_judgements WHERE"
                              " experiment_id = '%s'",
                              id),
                     2);
    ASSERT_INT(doc, "comparisons.0.preference.pairs", 2);
    ASSERT_INT(doc, "comparisons.0.preference.wins", 1);
    ASSERT_INT(doc, "comparisons.0.preference.losses", 1);
    json_decref(doc);
    free(id);
    free(body);
    free(script);
}
END_TEST

START_TEST(verdict_by_judge_is_the_verdict_of_the_comparison_and_of_the_event)
{
    char *script = fair_script(0);
    use_script(script);
    /* The treatment wins every pair (p = 1 on every case: better), while the exact-match
     * evaluator fails both arms everywhere (d = 0: inconclusive). */
    const char *both = "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":"
                       "{\"expected\":\"{{expected}}\"}}," JUDGE("both");
    char *body = body_of(both,
                         "[" JCASE("a", "tw") "," JCASE("b", "tw") "," JCASE("c", "tw") "]", 1,
                         "\"analysis\":{\"verdict_by\":\"judge\"}");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_STR(doc, "analysis.verdict_by", "judge");
    ASSERT_STR(doc, "comparisons.0.verdict", "better");
    ASSERT_STR(doc, "comparisons.0.preference.verdict", "better");
    ASSERT_STR(doc, "comparisons.0.evaluator_verdict", "inconclusive");
    /* experiment.completed (webhooks, the iii trigger) carries the chosen verdict. */
    char q[256];
    snprintf(q, sizeof(q),
             "SELECT payload->'verdicts'->0->>'verdict' FROM completion_events"
             " WHERE experiment_id = '%s'",
             id);
    char *v = evd_t_sql(xt_db_url, q);
    ck_assert_ptr_nonnull(v);
    ck_assert_str_eq(v, "better");
    free(v);
    json_decref(doc);
    free(id);
    free(body);
    free(script);
}
END_TEST

/* PUT a pair review; the status. */
static long review(const char *id, const char *pair, const char *body)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/experiments/%s/pairs/%s/review", id, pair);
    long st = 0;
    json_decref(xt_call("PUT", path, body, &st));
    return st;
}

/* The worked example of docs/judges.md: four cases, brief control against detailed
 * treatment, a judge scripted answer by answer. */
#define WORKED_ARMS                                                                                \
    "{\"when\":{\"prompt_contains\":\"control w1:\"},\"reply\":{\"text\":\"100 °C\"}},"          \
    "{\"when\":{\"prompt_contains\":\"treatment w1:\"},\"reply\":{\"text\":"                       \
    "\"100 °C (212 °F) at 1 atm.\"}},"                                                             \
    "{\"when\":{\"prompt_contains\":\"control w2:\"},\"reply\":{\"text\":\"Shakespeare\"}},"     \
    "{\"when\":{\"prompt_contains\":\"treatment w2:\"},\"reply\":{\"text\":"                       \
    "\"William Shakespeare, around 1600.\"}},"                                                      \
    "{\"when\":{\"prompt_contains\":\"control w3:\"},\"reply\":{\"text\":\"No: 91 = 7 × 13.\"}}," \
    "{\"when\":{\"prompt_contains\":\"treatment w3:\"},\"reply\":{\"text\":"                       \
    "\"No. 91 is 7 times 13, so it is not prime.\"}},"                                             \
    "{\"when\":{\"prompt_contains\":\"control w4:\"},\"reply\":{\"text\":\"51\"}},"              \
    "{\"when\":{\"prompt_contains\":\"treatment w4:\"},\"reply\":{\"text\":\"17 × 3 = 41.\"}}"

#define ANSWER(slot1, winner)                                                                      \
    "{\"when\":{\"model\":\"judge-model\",\"prompt_contains\":\"<answer_1>\\n" slot1 "\"},"       \
    "\"reply\":{\"json\":{\"result\":{\"winner\":\"" winner "\",\"reason\":\"scripted\"}}}},"

static const char WORKED_SCRIPT[] =
    "{\"rules\":[" ANSWER("100 °C\\n", "2") ANSWER("100 °C (212", "1")
        ANSWER("Shakespeare\\n", "2") ANSWER("William", "tie") ANSWER("No: 91", "1")
            ANSWER("No. 91", "1") ANSWER("51\\n", "1") ANSWER("17 ×", "2") WORKED_ARMS "]}";

START_TEST(the_worked_example_of_the_docs_holds)
{
    use_script(WORKED_SCRIPT);
    char *body = body_of(JUDGE("both"),
                         "[" JCASE("q1", "w1") "," JCASE("q2", "w2") "," JCASE("q3", "w3") ","
                         JCASE("q4", "w4") "]",
                         1, "");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    json_t *c = xt_at(doc, "comparisons.0");
    ASSERT_INT(c, "preference.wins", 2);
    ASSERT_INT(c, "preference.losses", 1);
    ASSERT_INT(c, "preference.ties", 1);
    ASSERT_INT(c, "preference.inconsistent", 1);
    ASSERT_NEAR(c, "preference.rate", 0.625);
    ASSERT_NEAR(c, "preference.delta", 0.25);
    ASSERT_NEAR(c, "preference.se", 0.47871355387816905);
    ASSERT_NEAR(c, "preference.df", 3);
    /* t(0.975, 3) = 3.182446305284263; for df 3, P(|T| >= t) = 1 − (2/π)(x/(1+x²) +
     * atan x) with x = t/√3. */
    ASSERT_NEAR(c, "preference.ci_low", 0.25 - 3.182446305284263 * 0.47871355387816905);
    ASSERT_NEAR(c, "preference.ci_high", 0.25 + 3.182446305284263 * 0.47871355387816905);
    ASSERT_NEAR(c, "preference.t_p_value", 0.6376180914006018);
    ASSERT_STR(c, "preference.verdict", "inconclusive");
    ASSERT_NEAR(c, "judge_quality.consistency", 0.5);
    ASSERT_INT(c, "judge_quality.first_slot.n", 7);
    ASSERT_NEAR(c, "judge_quality.first_slot.fraction", 4.0 / 7.0);
    ASSERT_NEAR(c, "judge_quality.first_slot.wilson_low", 0.2504583645276572);
    ASSERT_NEAR(c, "judge_quality.first_slot.wilson_high", 0.8417801447485302);
    ASSERT_INT(c, "judge_quality.length.n", 3);
    ASSERT_NEAR(c, "judge_quality.length.fraction", 2.0 / 3.0);
    ASSERT_NEAR(c, "judge_quality.length.wilson_low", 0.2076596008020477);
    ASSERT_NEAR(c, "judge_quality.length.wilson_high", 0.9385080552796037);
    ck_assert_int_eq(review(id, "q1/1/1", "{\"winner\":\"treatment\",\"reviewer\":\"ana\"}"), 200);
    ck_assert_int_eq(review(id, "q2/1/1", "{\"winner\":\"treatment\",\"reviewer\":\"ana\"}"), 200);
    ck_assert_int_eq(review(id, "q3/1/1", "{\"winner\":\"control\",\"reviewer\":\"ana\"}"), 200);
    ck_assert_int_eq(review(id, "q4/1/1", "{\"winner\":\"control\",\"reviewer\":\"ana\"}"), 200);
    char path[160];
    long st = 0;
    snprintf(path, sizeof(path), "/v1/experiments/%s/judge/agreement", id);
    json_t *ag = xt_call("GET", path, NULL, &st);
    json_t *t = json_array_get(json_object_get(ag, "treatments"), 0);
    ASSERT_NEAR(t, "raw", 0.75);
    ASSERT_NEAR(t, "kappa", 0.6);
    ASSERT_NEAR(t, "kappa_ci_high", 1.0);
    json_t *want = json_pack("[[i,i,i],[i,i,i],[i,i,i]]", 1, 0, 0, 1, 0, 0, 0, 0, 2);
    ck_assert(json_equal(json_object_get(t, "confusion"), want));
    json_decref(want);
    json_decref(ag);
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST

START_TEST(agreement_over_three_outcomes_matches_the_hand_worked_table)
{
    char *script = fair_script(0);
    use_script(script);
    char *body = body_of(JUDGE("both"), FAIR_CASES, 1, "");
    char *id = xt_start(body);
    json_decref(xt_wait_done(id, 60000));
    /* Judge: a, b, c treatment; d control; e tie. Humans: a, b treatment; c tie (after a
     * first review that said treatment); d control; e treatment, and on e a second
     * reviewer's tie against a third's treatment: the majority is treatment. */
    ck_assert_int_eq(review(id, "a/1/1", "{\"winner\":\"treatment\",\"reviewer\":\"ana\"}"), 200);
    ck_assert_int_eq(review(id, "b/1/1", "{\"winner\":\"treatment\",\"reviewer\":\"ana\"}"), 200);
    ck_assert_int_eq(review(id, "c/1/1", "{\"winner\":\"treatment\",\"reviewer\":\"ana\"}"), 200);
    ck_assert_int_eq(review(id, "c/1/1",
                            "{\"winner\":\"tie\",\"reviewer\":\"ana\",\"note\":\"on reflection\"}"),
                     200);
    ck_assert_int_eq(review(id, "d/1/1", "{\"winner\":\"control\",\"reviewer\":\"ana\"}"), 200);
    ck_assert_int_eq(review(id, "e/1/1", "{\"winner\":\"treatment\",\"reviewer\":\"ana\"}"), 200);
    ck_assert_int_eq(review(id, "e/1/1", "{\"winner\":\"tie\",\"reviewer\":\"bo\"}"), 200);
    ck_assert_int_eq(review(id, "e/1/1", "{\"winner\":\"treatment\",\"reviewer\":\"cy\"}"), 200);
    /* Refusals name the field; a pair that does not exist is 404; nothing is written. */
    long before = xt_count_rows("experiment_pair_reviews");
    ck_assert_int_eq(review(id, "a/1/1", "{\"winner\":\"both\",\"reviewer\":\"ana\"}"), 400);
    ck_assert_int_eq(review(id, "a/1/1", "{\"winner\":\"tie\"}"), 400);
    ck_assert_int_eq(review(id, "a/1/1", "{\"winner\":\"tie\",\"reviewer\":\"ana\",\"x\":1}"),
                     400);
    ck_assert_int_eq(review(id, "a/1/1", "[1]"), 400);
    ck_assert_int_eq(review(id, "a/2/1", "{\"winner\":\"tie\",\"reviewer\":\"ana\"}"), 404);
    ck_assert_int_eq(review(id, "a/1/2", "{\"winner\":\"tie\",\"reviewer\":\"ana\"}"), 404);
    ck_assert_int_eq(review(id, "zz/1/1", "{\"winner\":\"tie\",\"reviewer\":\"ana\"}"), 404);
    ck_assert_int_eq(review("exp_none", "a/1/1", "{\"winner\":\"tie\",\"reviewer\":\"ana\"}"),
                     404);
    ck_assert_int_eq(xt_count_rows("experiment_pair_reviews"), before);
    ck_assert_int_eq(before, 7);

    char path[160];
    snprintf(path, sizeof(path), "/v1/experiments/%s/judge/agreement", id);
    long st = 0;
    json_t *ag = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    /* Rows judge, columns human (control, tie, treatment):
     *   control   [1 0 0]
     *   tie       [0 0 1]
     *   treatment [0 1 2]
     * p_o = 3/5; margins 0.2, 0.2, 0.6 both ways: p_e = 0.44; κ = 0.16/0.56. */
    json_t *t = json_array_get(json_object_get(ag, "treatments"), 0);
    ASSERT_INT(t, "treatment", 1);
    ASSERT_INT(t, "count", 5);
    ASSERT_NEAR(t, "raw", 0.6);
    ASSERT_NEAR(t, "kappa", 0.16 / 0.56);
    json_t *want = json_pack("[[i,i,i],[i,i,i],[i,i,i]]", 1, 0, 0, 0, 0, 1, 0, 1, 2);
    ck_assert(json_equal(json_object_get(t, "confusion"), want));
    json_decref(want);
    ck_assert(json_is_number(json_object_get(t, "kappa_ci_low")));
    json_decref(ag);
    /* The pair view has the human's outcome: the majority of the latest reviews. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/pairs/e/1/1", id);
    json_t *pair = xt_call("GET", path, NULL, &st);
    ASSERT_STR(pair, "human.winner", "treatment");
    ASSERT_STR(pair, "outcome", "tie");
    ck_assert_uint_eq(json_array_size(json_object_get(pair, "reviews")), 3);
    json_decref(pair);
    snprintf(path, sizeof(path), "/v1/experiments/%s/pairs/c/1/1", id);
    pair = xt_call("GET", path, NULL, &st);
    ASSERT_STR(pair, "human.winner", "tie");
    ASSERT_STR(json_array_get(json_object_get(pair, "reviews"), 0), "note", "on reflection");
    json_decref(pair);
    /* The reviews list, and one reviewer's. */
    snprintf(path, sizeof(path), "/v1/experiments/%s/pairs/reviews", id);
    ck_assert_uint_eq(xt_list_size(path, "reviews"), 7);
    snprintf(path, sizeof(path), "/v1/experiments/%s/pairs/reviews?reviewer=bo", id);
    ck_assert_uint_eq(xt_list_size(path, "reviews"), 1);
    free(id);
    free(body);
    free(script);
}
END_TEST

/* A start that must be refused with `msg`, writing nothing. */
static void refused(const char *body, const char *msg)
{
    long st = 0;
    json_t *r = xt_call("POST", "/v1/experiments", body, &st);
    ck_assert_msg(st == 400, "status %ld for %s", st, body);
    const char *detail = json_string_value(json_object_get(r, "detail"));
    ck_assert_msg(detail != NULL && strstr(detail, msg) != NULL, "detail %s, want %s",
                  detail ? detail : "(none)", msg);
    json_decref(r);
    ck_assert_int_eq(xt_count_rows("experiments"), 0);
    ck_assert_int_eq(xt_count_rows("experiment_judgements"), 0);
}

START_TEST(every_refusal_writes_nothing)
{
    const char *cases = "[" JCASE("a", "tw") "]";
    char *b;
#define REFUSE(judge, more, msg)                                                                   \
    do {                                                                                           \
        b = body_of(judge, cases, 1, more);                                                        \
        refused(b, msg);                                                                           \
        free(b);                                                                                   \
    } while (0)
    REFUSE("\"name\":\"no judge\"", "", "an experiment needs an evaluator or a judge");
    REFUSE("\"judge\":{\"kind\":\"pointwise\",\"model\":{\"model\":\"m\"},\"task\":\"t\"}", "",
           "judge.kind must be pairwise");
    REFUSE("\"judge\":{\"model\":{\"model\":\"m\"},\"task\":\"t\",\"orders\":\"two\"}", "",
           "judge.orders must be both or one");
    REFUSE("\"judge\":{\"model\":{\"model\":\"\"},\"task\":\"t\"}", "", "judge.model.model");
    REFUSE("\"judge\":{\"model\":{\"model\":\"m\"}}", "", "judge.task is required");
    REFUSE("\"judge\":{\"model\":{\"model\":\"m\"},\"task\":\"{{nope}}\"}", "",
           "case a: template variable nope is not defined");
    REFUSE(JUDGE("both"), "\"analysis\":{\"verdict_by\":\"human\"}",
           "analysis.verdict_by must be evaluator or judge");
    REFUSE("\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":"
           "{\"expected\":\"x\"}}",
           "\"analysis\":{\"verdict_by\":\"judge\"}", "analysis.verdict_by judge needs a judge");
#undef REFUSE
}
END_TEST

START_TEST(a_plan_counts_the_judge_calls_and_a_budget_needs_the_judges_price)
{
    /* Five cases, two arms, two repeats, both orders: 20 judge calls of at most 64 tokens;
     * gpt-4.1-mini writes at $1.60 a million tokens. */
    char *body = body_of("\"judge\":{\"model\":{\"model\":\"gpt-4.1-mini\",\"provider\":"
                         "\"openai\"},\"task\":\"{{question}}\",\"max_tokens\":64}",
                         FAIR_CASES, 2, "");
    long st = 0;
    json_t *plan = xt_call("POST", "/v1/experiments/plan", body, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_INT(plan, "runs", 20);
    ASSERT_INT(plan, "judge.calls", 20);
    ASSERT_INT(plan, "judge.output_tokens_max", 1280);
    ASSERT_NEAR(plan, "judge.cost_usd.output_max", 1280 * 1.6 / 1e6);
    json_decref(plan);
    ck_assert_int_eq(xt_count_rows("experiments"), 0);
    free(body);
    /* A cost cap with a judge the price table does not know. */
    body = body_of(JUDGE("both"), FAIR_CASES, 1, "\"budget\":{\"max_cost_usd\":1}");
    char *priced = NULL;
    char *at = strstr(body, "stub-model");
    ck_assert_int_gt(asprintf(&priced, "%.*sgpt-4.1-mini%s", (int)(at - body), body,
                              at + strlen("stub-model")),
                     0);
    json_t *r = xt_call("POST", "/v1/experiments", priced, &st);
    ck_assert_int_eq(st, 400);
    ASSERT_STR(r, "detail", "budget.max_cost_usd needs a price for model judge-model");
    json_decref(r);
    ck_assert_int_eq(xt_count_rows("experiments"), 0);
    free(priced);
    free(body);
}
END_TEST

START_TEST(anytime_by_the_judge_runs_its_sequence_on_the_preference)
{
    static char *const roomy[] = {"EVALD_MAX_EXPERIMENT_RUNS=2000",
                                  "EVALD_MAX_DATASET_CASES=500", NULL};
    evd_t_stop(&xt_evald, SIGTERM, 10000);
    xt_start_evald(roomy);
    char *script = fair_script(0);
    use_script(script);
    /* Sixty cases the treatment wins: p_i = 1 each; no evaluator, so the judge decides. */
    struct evd_buf cases = {0};
    evd_buf_append(&cases, "[", 1);
    for (int i = 0; i < 60; i++) {
        char c[160];
        int k = snprintf(c, sizeof(c),
                         "%s{\"id\":\"w%d\",\"vars\":{\"tag\":\"tw\",\"question\":\"q%d?\"}}",
                         i ? "," : "", i, i);
        evd_buf_append(&cases, c, (size_t)k);
    }
    ck_assert_int_eq(evd_buf_append(&cases, "]", 2), 0);
    char *body = body_of(JUDGE("both"), cases.data, 1,
                         "\"stopping\":{\"rule\":\"anytime\",\"min_cases\":10,\"seed\":3}");
    /* One case at a time, so the decision comes before the dataset runs out. */
    char *one = strstr(body, "\"concurrency\":2");
    ck_assert_ptr_nonnull(one);
    one[strlen("\"concurrency\":")] = '1';
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 120000);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_STR(doc, "analysis.verdict_by", "judge");
    ASSERT_STR(doc, "stopped.reason", "decided");
    ASSERT_STR(doc, "comparisons.0.verdict", "better");
    ASSERT_STR(doc, "comparisons.0.sequential.verdict", "better");
    ASSERT_STR(doc, "comparisons.0.fixed_verdict", "better");
    json_int_t n = json_integer_value(xt_at(doc, "comparisons.0.sequential.n"));
    ck_assert_int_ge(n, 10);
    ck_assert_int_lt(n, 60);
    /* Every sequenced case was judged before it entered the sequence; the skipped cases'
     * judgements are unjudged, none was called. */
    ck_assert_int_eq(json_integer_value(xt_at(doc, "comparisons.0.preference.pairs")),
                     json_integer_value(xt_at(doc, "analysis.sequence_length")));
    ck_assert_int_gt(json_integer_value(xt_at(doc, "progress.judgements.unjudged")), 0);
    ck_assert_int_eq(json_integer_value(xt_at(doc, "progress.judgements.judged")),
                     2 * json_integer_value(xt_at(doc, "comparisons.0.preference.pairs")));
    json_decref(doc);
    free(id);
    free(body);
    evd_buf_free(&cases);
    free(script);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("experiment_judges");
    TCase *tc = tcase_create("experiment_judges");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, xt_setup, xt_teardown);
    tcase_add_test(tc, a_fair_judge_gives_the_hand_worked_preference);
    tcase_add_test(tc, an_always_first_slot_judge_is_caught);
    tcase_add_test(tc, orders_one_alternates_by_repeat);
    tcase_add_test(tc, a_failed_run_leaves_its_pair_unjudged);
    tcase_add_test(tc, judge_metrics_leave_the_arms_metrics_unchanged);
    tcase_add_test(tc, verdict_by_judge_is_the_verdict_of_the_comparison_and_of_the_event);
    tcase_add_test(tc, kill_9_mid_judgement_judges_each_pair_once);
    tcase_add_test(tc, agreement_over_three_outcomes_matches_the_hand_worked_table);
    tcase_add_test(tc, the_worked_example_of_the_docs_holds);
    tcase_add_test(tc, every_refusal_writes_nothing);
    tcase_add_test(tc, anytime_by_the_judge_runs_its_sequence_on_the_preference);
    tcase_add_test(tc, a_plan_counts_the_judge_calls_and_a_budget_needs_the_judges_price);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
