/*
 * Sequential experiments, budgets and plans (../shared/spec/sequential.md): the real evald
 * and evald-stub over loopback against a throwaway PostgreSQL per test, with the script of
 * tests/support/experiments_fixtures.c. Cases tagged q3 are decisive (the treatment passes,
 * the control fails: d = +1 on every case); every call is counted at the stub.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "domain/sequential.h"
#include "tests/support/experiments_fixtures.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char *const ROOMY[] = {"EVALD_MAX_EXPERIMENT_RUNS=2000", "EVALD_MAX_DATASET_CASES=500",
                              NULL};

/* Room for experiments larger than the fixture's default limits. */
static void restart_roomy(void)
{
    evd_t_stop(&xt_evald, SIGTERM, 10000);
    xt_start_evald(ROOMY);
}

/* The same after a kill: the process is gone already. */
static void restart_roomy_after_kill(void)
{
    xt_start_evald(ROOMY);
}

/* A second evald on the test's database, with the stub as provider. */
static void start_second(struct evd_t_proc *p)
{
    char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", xt_stub.base);
    char *env[] = {base,
                   "OPENAI_API_KEY=stub-key",
                   "EVALD_SWEEP_INTERVAL_MS=300",
                   "EVALD_LEASE_MS=1500",
                   "EVALD_MAX_EXPERIMENT_RUNS=2000",
                   "EVALD_MAX_DATASET_CASES=500",
                   NULL};
    ck_assert_int_eq(evd_t_evald_start(p, xt_db_url, env), 0);
}

/* A start body over n cases tagged `tag` (q3: decisive, d = +1; q5: both arms pass, d = 0;
 * a question starting "slow " takes 5 s a call), `more` appended inside the object. */
static char *cases_body(const char *tag, const char *question, size_t n, unsigned repeats,
                        unsigned concurrency, const char *more)
{
    struct evd_buf b = {0};
    char head[512];
    int k = snprintf(head, sizeof(head),
                     "{\"dimension\":\"prompt\"," MODEL "," ARMS "," EXACT
                     ",\"repeats\":%u,\"concurrency\":%u,%s%s\"cases\":[",
                     repeats, concurrency, more, more[0] ? "," : "");
    evd_buf_append(&b, head, (size_t)k);
    for (size_t i = 0; i < n; i++) {
        char c[160];
        k = snprintf(c, sizeof(c),
                     "%s{\"id\":\"d%zu\",\"vars\":{\"tag\":\"%s\",\"question\":\"%s%zu\"},"
                     "\"expected\":\"yes\"}",
                     i ? "," : "", i + 1, tag, question, i + 1);
        evd_buf_append(&b, c, (size_t)k);
    }
    ck_assert_int_eq(evd_buf_append(&b, "]}", 3), 0);
    return b.data;
}

static char *decisive(size_t n, unsigned repeats, unsigned concurrency, const char *more)
{
    return cases_body("q3", "", n, repeats, concurrency, more);
}

/* The calls the stub answered. */
static long stub_calls(void)
{
    json_t *stats = evd_t_stub_stats(&xt_stub);
    ck_assert_ptr_nonnull(stats);
    long n = (long)json_integer_value(json_object_get(stats, "requests"));
    json_decref(stats);
    return n;
}

/* Every case row of the experiment (one page of up to 100). */
static json_t *cases_of(const char *id)
{
    char path[160];
    snprintf(path, sizeof(path), "/v1/experiments/%s/cases?limit=100", id);
    long st = 0;
    json_t *doc = xt_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    json_t *cases = json_incref(json_object_get(doc, "cases"));
    json_decref(doc);
    return cases;
}


/*
 * What every stopped anytime experiment must show once it is terminal: the cases that ran
 * are exactly the first D of the dispatch order, the others skipped with their runs; the
 * sequence numbers its cases 1..D once each; every run that ran completed exactly once;
 * and runs_saved counts the skipped ones. Returns D.
 */
static long check_dispatched_prefix(const char *id, json_t *doc, long arms)
{
    long cases = xt_sql_long("SELECT count(*) FROM experiment_cases WHERE experiment_id = '%s'", id);
    long ran = xt_sql_long("SELECT count(*) FROM experiment_cases WHERE experiment_id = '%s'"
                        " AND NOT skipped",
                        id);
    ck_assert_int_eq(xt_sql_long("SELECT coalesce(max(dispatch_index), 0) FROM experiment_cases"
                              " WHERE experiment_id = '%s' AND NOT skipped",
                              id),
                     ran);
    ck_assert_int_eq(xt_sql_long("SELECT count(DISTINCT seq) FROM experiment_cases"
                              " WHERE experiment_id = '%s' AND seq BETWEEN 1 AND"
                              " (SELECT count(*) FROM experiment_cases WHERE experiment_id = '%s'"
                              " AND NOT skipped)",
                              id, id),
                     ran);
    ck_assert_int_eq(xt_sql_long("SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                              " AND status = 'completed'",
                              id),
                     ran * arms);
    ck_assert_int_eq(xt_sql_long("SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                              " AND status = 'skipped'",
                              id),
                     (cases - ran) * arms);
    ASSERT_INT(doc, "stopped.runs_saved", (cases - ran) * arms);
    ASSERT_INT(doc, "progress.skipped_runs", (cases - ran) * arms);
    return ran;
}

/* Polls GET until `stopped` is set; returns the document (new reference). */
static json_t *wait_stopped(const char *id, int timeout_ms)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        long st = 0;
        json_t *doc = xt_call("GET", path, NULL, &st);
        if (st == 200 && json_is_object(json_object_get(doc, "stopped")))
            return doc;
        json_decref(doc);
        usleep(10 * 1000);
    }
    evd_t_dump_log(&xt_evald);
    ck_abort_msg("experiment %s did not stop", id);
    return NULL;
}

START_TEST(anytime_stops_once_decided_and_skips_the_rest)
{
    restart_roomy();
    char *body = decisive(60, 1, 1,
                          "\"stopping\":{\"rule\":\"anytime\",\"min_cases\":10,\"seed\":7}");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_STR(doc, "stopped.reason", "decided");
    ASSERT_STR(doc, "comparisons.0.verdict", "better");
    ASSERT_STR(doc, "comparisons.0.sequential.verdict", "better");
    ASSERT_STR(doc, "analysis.rule", "anytime");
    json_int_t at = json_integer_value(xt_at(doc, "stopped.at_case"));
    json_int_t decided_at = json_integer_value(xt_at(doc, "comparisons.0.sequential.decided_at"));
    ck_assert_int_ge(decided_at, 10);
    /* The stop comes at the analysis pass that saw the decision: the sequence may have
     * grown past the case that decided it. */
    ck_assert_int_ge(at, decided_at);
    ck_assert(json_number_value(xt_at(doc, "comparisons.0.sequential.low")) > 0);

    /* The cases ran in the seed's permutation; those after the decision never started. */
    uint32_t want[60];
    evd_seq_permutation(7, 60, want);
    json_t *cases = cases_of(id);
    ck_assert_uint_eq(json_array_size(cases), 60);
    long dispatched = 0, skipped = 0, last_seq_dispatch = 0, first_skipped_dispatch = 1000;
    for (size_t k = 0; k < 60; k++) {
        json_t *c = json_array_get(cases, k);
        long di = (long)json_integer_value(json_object_get(c, "dispatch_index"));
        ck_assert_int_eq(di, want[k]);
        if (json_is_true(json_object_get(c, "skipped"))) {
            skipped++;
            ck_assert(json_is_null(json_object_get(c, "seq")));
            if (di < first_skipped_dispatch)
                first_skipped_dispatch = di;
        } else {
            dispatched++;
            ck_assert(json_is_integer(json_object_get(c, "seq")));
            if (di > last_seq_dispatch)
                last_seq_dispatch = di;
        }
    }
    json_decref(cases);
    /* Concurrency 1: at most the case in flight at the decision ran after it. */
    ck_assert_int_ge(dispatched, at);
    ck_assert_int_le(dispatched, at + 1);
    ck_assert_int_eq(last_seq_dispatch, dispatched);
    ck_assert_int_eq(first_skipped_dispatch, dispatched + 1);
    ck_assert_int_eq(stub_calls(), dispatched * 2);
    ASSERT_INT(doc, "stopped.runs_saved", skipped * 2);
    ASSERT_INT(doc, "progress.skipped_runs", skipped * 2);
    ASSERT_INT(doc, "progress.terminal_runs", 120);
    ASSERT_INT(doc, "progress.total_runs", 120);
    ASSERT_INT(doc, "progress.failed_runs", dispatched);
    ASSERT_INT(doc, "spend.calls", dispatched * 2);
    ASSERT_INT(doc, "spend.input_tokens", dispatched * 20);
    ASSERT_INT(doc, "spend.output_tokens", dispatched * 6);
    ck_assert(json_is_null(xt_at(doc, "spend.budget")));
    ASSERT_INT(doc, "request.stopping.seed", 7);
    ck_assert_int_eq(xt_sql_long("SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                              " AND status = 'skipped'",
                              id),
                     skipped * 2);
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST

START_TEST(fixed_reports_the_sequence_as_information)
{
    char *id = xt_start(xt_full);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_STR(doc, "status", "completed");
    /* Every case ran: the fixed verdict stands, with the sequence beside it. */
    ASSERT_STR(doc, "stopped.reason", "exhausted");
    ASSERT_INT(doc, "stopped.at_case", 5);
    ASSERT_INT(doc, "stopped.runs_saved", 0);
    ASSERT_INT(doc, "comparisons.0.sequential.n", 5);
    ASSERT_STR(doc, "comparisons.0.sequential.verdict", "inconclusive");
    ASSERT_NULL(doc, "comparisons.0.sequential.decided_at");
    ASSERT_STR(doc, "request.stopping.rule", "fixed");
    ASSERT_INT(doc, "request.stopping.min_cases", 10);
    /* The default seed comes from the id. */
    ASSERT_INT(doc, "request.stopping.seed", (json_int_t)evd_seq_default_seed(id));
    ASSERT_INT(doc, "progress.skipped_runs", 0);
    ASSERT_INT(doc, "spend.calls", 20);
    ASSERT_INT(doc, "spend.input_tokens", 200);
    ASSERT_INT(doc, "spend.output_tokens", 60);
    ASSERT_NULL(doc, "spend.cost_usd"); /* stub-model has no price */
    json_t *cases = cases_of(id);
    for (size_t k = 0; k < json_array_size(cases); k++) {
        json_t *c = json_array_get(cases, k);
        ck_assert_int_eq(json_integer_value(json_object_get(c, "dispatch_index")),
                         json_integer_value(json_object_get(c, "case_index")));
        ck_assert(json_is_integer(json_object_get(c, "seq")));
    }
    json_decref(cases);
    json_decref(doc);
    free(id);
}
END_TEST

START_TEST(max_calls_with_concurrency_one_overshoots_by_at_most_a_case)
{
    restart_roomy();
    char *body = decisive(20, 1, 1, "\"budget\":{\"max_calls\":9}");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_STR(doc, "stopped.reason", "budget");
    /* Two calls a case: four cases fit within 9, the fifth would reach 10. */
    ck_assert_int_eq(stub_calls(), 8);
    ASSERT_INT(doc, "spend.calls", 8);
    ASSERT_INT(doc, "spend.budget.max_calls", 9);
    ASSERT_INT(doc, "stopped.at_case", 4);
    ASSERT_INT(doc, "stopped.runs_saved", 32);
    ASSERT_INT(doc, "progress.skipped_runs", 32);
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST

START_TEST(max_tokens_stops_before_the_cap)
{
    restart_roomy();
    /* 26 tokens a case (12 + 14); before any run finished a run reserves
     * max_output_tokens_per_call (100 here). */
    char *body = decisive(20, 1, 1,
                          "\"budget\":{\"max_tokens\":300},\"limits\":{\"execution\":"
                          "{\"max_output_tokens_per_call\":100}}");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_STR(doc, "stopped.reason", "budget");
    json_int_t used = json_integer_value(xt_at(doc, "spend.input_tokens")) +
                      json_integer_value(xt_at(doc, "spend.output_tokens"));
    ck_assert_int_le(used, 300);
    ck_assert_int_gt(used, 300 - 2 * 26);
    ck_assert_int_eq(stub_calls(), json_integer_value(xt_at(doc, "spend.calls")));
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST

START_TEST(a_plan_answers_and_writes_nothing)
{
    static const char body[] =
        "{\"dimension\":\"prompt\"," MODEL "," ARMS "," EXACT ",\"repeats\":2,"
        "\"analysis\":{\"alpha\":0.05},"
        "\"stopping\":{\"rule\":\"anytime\",\"min_cases\":3},"
        "\"plan\":{\"effect\":0.2,\"sd\":0.5},\"cases\":" FIVE_CASES "}";
    long st = 0;
    json_t *plan = xt_call("POST", "/v1/experiments/plan", body, &st);
    ck_assert_msg(st == 200, "plan answered %ld", st);
    ASSERT_INT(plan, "cases", 5);
    ASSERT_INT(plan, "arms", 2);
    ASSERT_INT(plan, "repeats", 2);
    ASSERT_INT(plan, "runs", 20);
    ASSERT_INT(plan, "calls.min", 12); /* min(5, 3) cases × 2 arms × 2 repeats */
    /* "control q1: q1?" and "treatment q1: q1?" are 15 and 17 bytes: per case 32 bytes, 8
     * tokens, sent once a repeat. */
    ASSERT_INT(plan, "tokens.input_estimate", 5 * 8 * 2);
    ASSERT_INT(plan, "tokens.output_max", 20 * 8192);
    ASSERT_NULL(plan, "cost_usd");
    ASSERT_NEAR(plan, "power.effect", 0.2);
    ASSERT_NEAR(plan, "power.sd", 0.5);
    ASSERT_NEAR(plan, "power.alpha_adjusted", 0.05);
    /* ⌈((1.959964 + 0.841621) · 0.5 / 0.2)²⌉ = ⌈49.06⌉ */
    ASSERT_INT(plan, "power.cases_needed", 50);
    ASSERT_INT(plan, "power.runs_needed", 200);
    json_decref(plan);
    ck_assert_int_eq(xt_count_rows("experiments"), 0);
    ck_assert_int_eq(xt_count_rows("datasets"), 0);

    /* Refused as a start is, with nothing written. */
    static const char bad[] = "{\"dimension\":\"prompt\"," MODEL "," ARMS "," EXACT
                              ",\"stopping\":{\"rule\":\"soon\"},\"cases\":" FIVE_CASES "}";
    plan = xt_call("POST", "/v1/experiments/plan", bad, &st);
    ck_assert_int_eq(st, 400);
    ck_assert_str_eq(json_string_value(json_object_get(plan, "detail")),
                     "stopping.rule must be fixed or anytime");
    json_decref(plan);
    static const char pilot[] = "{\"dimension\":\"prompt\"," MODEL "," ARMS "," EXACT
                                ",\"plan\":{\"pilot_experiment_id\":\"exp_nope\"},"
                                "\"cases\":" FIVE_CASES "}";
    plan = xt_call("POST", "/v1/experiments/plan", pilot, &st);
    ck_assert_int_eq(st, 400);
    ck_assert_str_eq(json_string_value(json_object_get(plan, "detail")),
                     "plan.pilot_experiment_id names no finished experiment: exp_nope");
    json_decref(plan);
    ck_assert_int_eq(xt_count_rows("experiments"), 0);
    ck_assert_int_eq(xt_count_rows("datasets"), 0);
}
END_TEST

START_TEST(a_finished_pilot_gives_the_plan_its_sd)
{
    char *id = xt_start(xt_full);
    json_decref(xt_wait_done(id, 60000));
    /* d per case in the hand-worked experiment: 0.5, 0.5, 1, 0.5, 0 → s.d. √0.125. */
    char body[2048];
    snprintf(body, sizeof(body),
             "{\"dimension\":\"prompt\"," MODEL "," ARMS "," EXACT ",\"repeats\":2,"
             "\"analysis\":{\"min_effect\":0.25},\"plan\":{\"pilot_experiment_id\":\"%s\"},"
             "\"cases\":" FIVE_CASES "}",
             id);
    long st = 0;
    json_t *plan = xt_call("POST", "/v1/experiments/plan", body, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_NEAR(plan, "power.effect", 0.25);
    ASSERT_NEAR(plan, "power.sd", sqrt(0.125));
    /* ⌈((1.959964 + 0.841621) · 0.353553 / 0.25)²⌉ = ⌈15.70⌉ */
    ASSERT_INT(plan, "power.cases_needed", 16);
    ASSERT_INT(plan, "calls.min", 20);
    json_decref(plan);
    free(id);
}
END_TEST


START_TEST(kill_9_right_after_the_decision_dispatches_no_more)
{
    restart_roomy();
    char *body = decisive(60, 1, 1,
                          "\"stopping\":{\"rule\":\"anytime\",\"min_cases\":10,\"seed\":3}");
    char *id = xt_start(body);
    json_t *doc = wait_stopped(id, 60000);
    ck_assert_int_eq(evd_t_stop(&xt_evald, SIGKILL, 5000), 128 + SIGKILL);
    json_decref(doc);
    long skipped = xt_sql_long("SELECT count(*) FROM experiment_cases WHERE experiment_id = '%s'"
                            " AND skipped",
                            id);
    ck_assert_int_gt(skipped, 0);
    long calls_at_kill = stub_calls();
    restart_roomy_after_kill();
    doc = xt_wait_done(id, 60000);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_STR(doc, "stopped.reason", "decided");
    long ran = check_dispatched_prefix(id, doc, 2);
    /* Nothing was taken after the decision: the same cases are skipped, and the calls after
     * the restart are at most the case that was in flight, once more. */
    ck_assert_int_eq(ran, 60 - skipped);
    ck_assert_int_le(stub_calls(), ran * 2 + 1);
    ck_assert_int_le(stub_calls() - calls_at_kill, 2);
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST

START_TEST(kill_9_mid_dispatch_keeps_the_order_and_each_run_once)
{
    restart_roomy();
    char *body = decisive(60, 1, 2,
                          "\"stopping\":{\"rule\":\"anytime\",\"min_cases\":25,\"seed\":11}");
    char *id = xt_start(body);
    /* Kill it while cases are being dispatched, well before min_cases allows a decision. */
    for (int waited = 0; waited < 30000; waited += 20) {
        if (xt_sql_long("SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                     " AND status = 'completed'",
                     id) >= 9)
            break;
        usleep(20 * 1000);
    }
    ck_assert_int_eq(evd_t_stop(&xt_evald, SIGKILL, 5000), 128 + SIGKILL);
    restart_roomy_after_kill();
    json_t *doc = xt_wait_done(id, 90000);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_STR(doc, "stopped.reason", "decided");
    ck_assert_int_ge(json_integer_value(xt_at(doc, "stopped.at_case")), 25);
    long ran = check_dispatched_prefix(id, doc, 2);
    ck_assert_int_le(ran, json_integer_value(xt_at(doc, "stopped.at_case")) + 2 * 2);
    /* Each run's call once, but the two in flight at the kill, which ran again. */
    ck_assert_int_ge(stub_calls(), ran * 2);
    ck_assert_int_le(stub_calls(), ran * 2 + 2);
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST

START_TEST(two_processes_agree_on_the_sequence_and_the_stop)
{
    restart_roomy();
    struct evd_t_proc second;
    start_second(&second);
    char *body = decisive(80, 1, 4,
                          "\"stopping\":{\"rule\":\"anytime\",\"min_cases\":10,\"seed\":5}");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_STR(doc, "stopped.reason", "decided");
    ASSERT_STR(doc, "comparisons.0.verdict", "better");
    long ran = check_dispatched_prefix(id, doc, 2);
    ck_assert_int_lt(ran, 80);
    /* The lookahead: at most twice the concurrency beyond the sequence when it decided. */
    ck_assert_int_le(ran, json_integer_value(xt_at(doc, "stopped.at_case")) + 2 * 4);
    ck_assert_int_eq(stub_calls(), ran * 2);
    json_decref(doc);
    ck_assert_int_eq(evd_t_stop(&second, SIGTERM, 10000), 0);
    free(id);
    free(body);
}
END_TEST

START_TEST(a_cancelled_anytime_experiment_has_no_stop)
{
    char *body = cases_body("q3", "slow ", 10, 1, 2,
                            "\"stopping\":{\"rule\":\"anytime\",\"min_cases\":2}");
    char *id = xt_start(body);
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s/cancel", id);
    for (int waited = 0; waited < 10000 && stub_calls() == 0; waited += 20)
        usleep(20 * 1000);
    long st = 0;
    json_decref(xt_call("POST", path, "", &st));
    ck_assert_int_lt(st, 300);
    json_t *doc = xt_wait_done(id, 30000);
    ASSERT_STR(doc, "status", "cancelled");
    ASSERT_NULL(doc, "stopped");
    ASSERT_INT(doc, "progress.skipped_runs", 0);
    ck_assert_int_eq(xt_sql_long("SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                              " AND status = 'cancelled'",
                              id),
                     20);
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST

START_TEST(equal_arms_are_decided_equivalent_within_min_effect)
{
    restart_roomy();
    char *body = cases_body("q5", "", 60, 1, 2,
                            "\"analysis\":{\"min_effect\":0.3},"
                            "\"stopping\":{\"rule\":\"anytime\",\"min_cases\":10}");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_STR(doc, "stopped.reason", "decided");
    ASSERT_STR(doc, "comparisons.0.verdict", "equivalent");
    /* Every d is 0: the fixed-sample interval is [0, 0], equivalent too, beside it. */
    ASSERT_STR(doc, "comparisons.0.fixed_verdict", "equivalent");
    double low = json_number_value(xt_at(doc, "comparisons.0.sequential.low"));
    double high = json_number_value(xt_at(doc, "comparisons.0.sequential.high"));
    ck_assert(low > -0.3 && high < 0.3);
    check_dispatched_prefix(id, doc, 2);
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST


START_TEST(max_cost_usd_counts_through_the_price_table)
{
    restart_roomy();
    /* gpt-4.1-mini at the stub: $0.40 and $1.60 a million input and output tokens, so a
     * case costs 10·0.4 + 2·1.6 + 10·0.4 + 4·1.6 = 17.6 millionths of a dollar. Before any
     * run a run reserves 10 output tokens (16 millionths). */
    char *body = decisive(20, 1, 1,
                          "\"budget\":{\"max_cost_usd\":0.0001},\"limits\":{\"execution\":"
                          "{\"max_output_tokens_per_call\":10}}");
    char *at = strstr(body, "stub-model");
    ck_assert_ptr_nonnull(at);
    char *priced = NULL;
    ck_assert_int_gt(asprintf(&priced, "%.*sgpt-4.1-mini%s", (int)(at - body), body,
                              at + strlen("stub-model")),
                     0);
    char *id = xt_start(priced);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_STR(doc, "stopped.reason", "budget");
    /* Five cases fit (88 millionths); a sixth would reach 105.6. */
    ck_assert_int_eq(stub_calls(), 10);
    ASSERT_NEAR(doc, "spend.cost_usd", 5 * 17.6e-6);
    ASSERT_NEAR(doc, "spend.budget.max_cost_usd", 0.0001);
    json_decref(doc);
    free(id);
    free(priced);
    free(body);
}
END_TEST


START_TEST(a_rescore_of_a_stopped_experiment_keeps_its_skips_and_runs_every_output)
{
    restart_roomy();
    char *body = decisive(40, 1, 1,
                          "\"stopping\":{\"rule\":\"anytime\",\"min_cases\":10,\"seed\":9}");
    char *id = xt_start(body);
    json_t *src = xt_wait_done(id, 60000);
    long saved = (long)json_integer_value(xt_at(src, "stopped.runs_saved"));
    ck_assert_int_gt(saved, 0);
    long calls = stub_calls();
    /* A judge that wants "no": the control passes now, the treatment fails. */
    char path[160];
    snprintf(path, sizeof(path), "/v1/experiments/%s/rescore", id);
    long st = 0;
    json_t *r = xt_call("POST", path,
                        "{\"evaluator\":{\"function_id\":\"eval::assert::exact\","
                        "\"arguments\":{\"expected\":\"no\"}}}",
                        &st);
    ck_assert_int_eq(st, 202);
    char *rid = strdup(json_string_value(json_object_get(r, "experiment_id")));
    json_decref(r);
    json_t *doc = xt_wait_done(rid, 60000);
    ASSERT_STR(doc, "status", "completed");
    /* Every stored output is scored again, none is called again, none runs anew. */
    ck_assert_int_eq(stub_calls(), calls);
    ASSERT_STR(doc, "analysis.rule", "fixed");
    ASSERT_STR(doc, "comparisons.0.verdict", "worse");
    ASSERT_INT(doc, "progress.skipped_runs", saved);
    ASSERT_INT(doc, "progress.terminal_runs", 80);
    ASSERT_STR(doc, "stopped.reason", "decided");
    ASSERT_INT(doc, "stopped.runs_saved", saved);
    ASSERT_INT(doc, "comparisons.0.sequential.n", 40 - saved / 2);
    json_decref(doc);
    json_decref(src);
    free(rid);
    free(id);
    free(body);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("experiment_sequential");
    TCase *tc = tcase_create("experiment_sequential");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, xt_setup, xt_teardown);
    tcase_add_test(tc, anytime_stops_once_decided_and_skips_the_rest);
    tcase_add_test(tc, fixed_reports_the_sequence_as_information);
    tcase_add_test(tc, max_calls_with_concurrency_one_overshoots_by_at_most_a_case);
    tcase_add_test(tc, max_tokens_stops_before_the_cap);
    tcase_add_test(tc, max_cost_usd_counts_through_the_price_table);
    tcase_add_test(tc, a_plan_answers_and_writes_nothing);
    tcase_add_test(tc, a_finished_pilot_gives_the_plan_its_sd);
    tcase_add_test(tc, kill_9_right_after_the_decision_dispatches_no_more);
    tcase_add_test(tc, kill_9_mid_dispatch_keeps_the_order_and_each_run_once);
    tcase_add_test(tc, two_processes_agree_on_the_sequence_and_the_stop);
    tcase_add_test(tc, a_cancelled_anytime_experiment_has_no_stop);
    tcase_add_test(tc, equal_arms_are_decided_equivalent_within_min_effect);
    tcase_add_test(tc, a_rescore_of_a_stopped_experiment_keeps_its_skips_and_runs_every_output);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
