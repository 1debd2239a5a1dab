/*
 * How an experiment's runs are executed, seen from the stub model server with the real
 * evald processes and a real PostgreSQL: the cells of a case reach the provider one after
 * another in the planned order (a Williams design for three arms), never two of a case at
 * once, cases run `concurrency` at a time; an evald killed with SIGKILL in the middle
 * of an experiment loses nothing: the survivor finishes it, and every run is counted once;
 * and per-case outcomes scripted at the stub give each of the four verdicts and exact
 * token deltas.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/util.h"
#include "domain/plan.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"
#include "tests/support/webhooks_receiver.h"

static char db_url[1024];
static char db_name[64];
static struct evd_t_proc stub;
static char env_base[300], env_key[] = "OPENAI_API_KEY=stub-key";

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
}

static void teardown(void)
{
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
}

/* The stub answering "OK" after `latency_ms`, and evald's environment pointing at it. */
static void start_stub(int latency_ms)
{
    char script[256];
    snprintf(script, sizeof(script),
             "{\"default\":{\"latency_ms\":%d,\"reply\":{\"text\":\"OK\"},"
             "\"usage\":{\"input_tokens\":10,\"output_tokens\":2}}}",
             latency_ms);
    ck_assert_int_eq(evd_t_stub_start(&stub, script, NULL), 0);
    snprintf(env_base, sizeof(env_base), "OPENAI_BASE_URL=%s/v1", stub.base);
}

static void start_evald(struct evd_t_proc *p, const char *workers)
{
    char *env[] = {env_base, env_key, "EVALD_SWEEP_INTERVAL_MS=300", "EVALD_LEASE_MS=1500",
                   (char *)workers, NULL};
    ck_assert_int_eq(evd_t_evald_start(p, db_url, env), 0);
}

/* Starts an experiment of `cases` cases ("q1".."qN") over `arms` arms; returns its id
 * (static buffer). */
static const char *start_experiment(const struct evd_t_proc *p, int cases, int arms, int repeats,
                                    int concurrency)
{
    json_t *cs = json_array(), *treatments = json_array();
    for (int i = 1; i <= cases; i++)
        json_array_append_new(cs, json_pack("{s:{s:s+}, s:s}", "vars", "q", "question ",
                                            i % 2 ? "odd" : "even", "expected", "OK"));
    for (int a = 1; a < arms; a++) {
        char prompt[64];
        snprintf(prompt, sizeof(prompt), "Variant %d: {{q}}", a);
        json_array_append_new(treatments, json_pack("{s:s}", "prompt", prompt));
    }
    json_t *body = json_pack(
        "{s:s, s:{s:s, s:s}, s:{s:s}, s:o, s:o, s:{s:s, s:{s:s}}, s:i, s:i}", "dimension",
        "prompt", "model", "model", "stub-model", "provider", "openai", "control", "prompt",
        "Control: {{q}}", "treatments", treatments, "cases", cs, "evaluator", "function_id",
        "eval::assert::exact", "arguments", "expected", "{{expected}}", "repeats", repeats,
        "concurrency", concurrency);
    return evd_t_start_experiment(p->base, body);
}

/* Parses "<id>_<case>_<arm>_<repeat>"; false for another session. */
static bool parse_session(const char *session, const char *id, int *ci, int *arm, int *rep)
{
    size_t n = strlen(id);
    return session && strncmp(session, id, n) == 0 && session[n] == '_' &&
           sscanf(session + n + 1, "%d_%d_%d", ci, arm, rep) == 3;
}

static const char *session_of(const json_t *req)
{
    const json_t *h = json_object_get(req, "headers");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)h, key, v)
    {
        if (strcasecmp(key, "X-Evald-Session") == 0)
            return json_string_value(v);
    }
    return NULL;
}

/* Three arms, two repeats: each case's cells reach the provider in the Williams order of
 * domain/plan.h, one at a time (each arrives after the previous one was answered), and
 * at most `concurrency` cases are in flight at once. */
START_TEST(three_arms_reach_the_provider_in_the_planned_order)
{
    start_stub(60);
    struct evd_t_proc p;
    start_evald(&p, "EVALD_WORKERS=8");
    enum { CASES = 6, ARMS = 3, REPEATS = 2, CONC = 2 };
    const char *id = start_experiment(&p, CASES, ARMS, REPEATS, CONC);
    char xid[64];
    snprintf(xid, sizeof(xid), "%s", id);
    json_t *doc = evd_t_wait_experiment(p.base, xid, 60000);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "status")), "completed");
    json_t *progress = json_object_get(doc, "progress");
    ck_assert_int_eq(json_integer_value(json_object_get(progress, "total_runs")),
                     CASES * ARMS * REPEATS);
    ck_assert_int_eq(json_integer_value(json_object_get(progress, "passed_runs")),
                     CASES * ARMS * REPEATS);
    json_decref(doc);

    json_t *log = evd_t_stub_requests(&stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    int seen[CASES + 1] = {0};
    int64_t last_at[CASES + 1] = {0};
    size_t i;
    json_t *req;
    json_array_foreach(reqs, i, req)
    {
        int ci, arm, rep;
        if (!parse_session(session_of(req), xid, &ci, &arm, &rep))
            continue;
        ck_assert(ci >= 1 && ci <= CASES);
        /* The k-th request of a case is the cell at position k of the plan. */
        uint32_t want_rep;
        unsigned want_arm;
        evd_plan_cell_at(ARMS, (uint32_t)seen[ci] + 1, &want_rep, &want_arm);
        ck_assert_msg(arm == (int)want_arm && rep == (int)want_rep,
                      "case %d request %d: arm %d repeat %d, planned arm %u repeat %u", ci,
                      seen[ci] + 1, arm, rep, want_arm, (unsigned)want_rep);
        int64_t at = json_integer_value(json_object_get(req, "received_at_ms"));
        /* The previous cell of the case was answered (60 ms) before this one was sent. */
        if (seen[ci] > 0)
            ck_assert_msg(at - last_at[ci] >= 55, "case %d: cells %d and %d %lld ms apart", ci,
                          seen[ci], seen[ci] + 1, (long long)(at - last_at[ci]));
        last_at[ci] = at;
        seen[ci]++;
    }
    for (int ci = 1; ci <= CASES; ci++)
        ck_assert_int_eq(seen[ci], ARMS * REPEATS);
    json_decref(log);
    json_t *stats = evd_t_stub_stats(&stub);
    ck_assert_int_le(json_integer_value(json_object_get(stats, "max_in_flight")), CONC);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "max_in_flight_per_session")), 1);
    json_decref(stats);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* With concurrency 1 the cases reach the provider strictly in dataset order, each case's
 * cells before any of the next case's: the case job that ends a case moves on to the next
 * case (migrations/0023) without any other case slipping in between. */
START_TEST(concurrency_one_dispatches_cases_in_dataset_order)
{
    start_stub(5);
    struct evd_t_proc p;
    start_evald(&p, "EVALD_WORKERS=4");
    enum { CASES = 8, ARMS = 2, REPEATS = 1 };
    const char *id = start_experiment(&p, CASES, ARMS, REPEATS, 1);
    char xid[64];
    snprintf(xid, sizeof(xid), "%s", id);
    json_t *doc = evd_t_wait_experiment(p.base, xid, 60000);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "status")), "completed");
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(doc, "progress"), "passed_runs")),
        CASES * ARMS * REPEATS);
    json_decref(doc);
    json_t *log = evd_t_stub_requests(&stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    int last_case = 0, cells = 0, seen = 0;
    size_t i;
    json_t *req;
    json_array_foreach(reqs, i, req)
    {
        int ci, arm, rep;
        if (!parse_session(session_of(req), xid, &ci, &arm, &rep))
            continue;
        seen++;
        if (ci != last_case) {
            ck_assert_msg(ci == last_case + 1, "case %d reached the provider after case %d",
                          ci, last_case);
            ck_assert_msg(last_case == 0 || cells == ARMS * REPEATS,
                          "case %d began after %d of case %d's cells", ci, cells, last_case);
            last_case = ci;
            cells = 0;
        }
        cells++;
    }
    ck_assert_int_eq(seen, CASES * ARMS * REPEATS);
    ck_assert_int_eq(last_case, CASES);
    json_decref(log);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* Two evald processes share an experiment; one is killed with SIGKILL while its cells are
 * in flight. The other takes the killed one's cases over once their leases run out: the
 * experiment completes, every run passed exactly once in the record, and no run was ever
 * at the provider twice at once. */
START_TEST(kill_9_mid_experiment_counts_every_run_once)
{
    start_stub(250);
    struct evd_t_proc a, b;
    start_evald(&a, "EVALD_WORKERS=4");
    start_evald(&b, "EVALD_WORKERS=4");
    enum { CASES = 16, ARMS = 2, REPEATS = 2, CONC = 8 };
    char xid[64];
    snprintf(xid, sizeof(xid), "%s", start_experiment(&a, CASES, ARMS, REPEATS, CONC));
    /* Wait until both processes have cells in flight and a few runs finished. */
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
             " AND status = 'completed'",
             xid);
    for (int waited = 0; waited < 20000; waited += 50) {
        char *v = evd_t_sql(db_url, sql);
        long done = v ? atol(v) : 0;
        free(v);
        if (done >= 8)
            break;
        usleep(50 * 1000);
    }
    ck_assert_int_eq(evd_t_stop(&a, SIGKILL, 5000), 128 + SIGKILL);

    json_t *doc = evd_t_wait_experiment(b.base, xid, 60000);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "status")), "completed");
    json_t *progress = json_object_get(doc, "progress");
    ck_assert_int_eq(json_integer_value(json_object_get(progress, "total_runs")),
                     CASES * ARMS * REPEATS);
    ck_assert_int_eq(json_integer_value(json_object_get(progress, "terminal_runs")),
                     CASES * ARMS * REPEATS);
    ck_assert_int_eq(json_integer_value(json_object_get(progress, "passed_runs")),
                     CASES * ARMS * REPEATS);
    /* The analysis counts each run once: every case evaluated `REPEATS` times an arm. */
    json_t *arms = json_object_get(doc, "arms");
    for (size_t k = 0; k < json_array_size(arms); k++) {
        json_t *pooled = json_object_get(json_array_get(arms, k), "pooled");
        ck_assert_int_eq(json_integer_value(json_object_get(pooled, "evaluated")),
                         CASES * REPEATS);
        ck_assert_int_eq(json_integer_value(json_object_get(pooled, "passed")), CASES * REPEATS);
    }
    json_decref(doc);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
             " AND status = 'completed' AND passed",
             xid);
    char *v = evd_t_sql(db_url, sql);
    ck_assert_str_eq(v, "64");
    free(v);
    /* Some runs were interrupted by the kill and run again: at least one attempt 2. */
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s' AND attempt > 1",
             xid);
    v = evd_t_sql(db_url, sql);
    ck_assert_msg(v && atol(v) >= 1, "no run was taken over after the kill (%s)", v);
    free(v);
    json_t *stats = evd_t_stub_stats(&stub);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "max_in_flight_per_session")), 1);
    json_decref(stats);
    ck_assert_int_eq(evd_t_stop(&b, SIGTERM, 10000), 0);
}
END_TEST

/* A two-arm experiment whose case i has the control pass when ctrl[i] and the treatment
 * when treat[i] (the stub answers by the markers in the prompts), one repeat. */
static json_t *scripted_body(const bool *ctrl, const bool *treat, int n, double min_effect)
{
    json_t *cs = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(cs, json_pack("{s:{s:s, s:s, s:i}, s:s}", "vars", "c",
                                            ctrl[i] ? "ctrl-pass" : "ctrl-fail", "t",
                                            treat[i] ? "treat-pass" : "treat-fail", "n", i,
                                            "expected", "OK"));
    return json_pack("{s:s, s:{s:s, s:s}, s:{s:s}, s:[{s:s}], s:o, s:{s:s, s:{s:s}}, s:i,"
                     " s:i, s:{s:f}}",
                     "dimension", "prompt", "model", "model", "stub-model", "provider", "openai",
                     "control", "prompt", "Control {{c}} {{n}}", "treatments", "prompt",
                     "Treatment {{t}} {{n}}", "cases", cs, "evaluator", "function_id",
                     "eval::assert::exact", "arguments", "expected", "{{expected}}", "repeats", 1,
                     "concurrency", 4, "analysis", "min_effect", min_effect);
}

static const char VERDICT_SCRIPT[] =
    "{\"rules\":["
    "{\"when\":{\"prompt_contains\":\"ctrl-pass\"},\"reply\":{\"text\":\"OK\"},"
    "\"usage\":{\"input_tokens\":10,\"output_tokens\":2}},"
    "{\"when\":{\"prompt_contains\":\"ctrl-fail\"},\"reply\":{\"text\":\"NO\"},"
    "\"usage\":{\"input_tokens\":10,\"output_tokens\":2}},"
    "{\"when\":{\"prompt_contains\":\"treat-pass\"},\"reply\":{\"text\":\"OK\"},"
    "\"usage\":{\"input_tokens\":13,\"output_tokens\":5}},"
    "{\"when\":{\"prompt_contains\":\"treat-fail\"},\"reply\":{\"text\":\"NO\"},"
    "\"usage\":{\"input_tokens\":13,\"output_tokens\":5}}]}";

static json_t *comparison(json_t *doc)
{
    return json_array_get(json_object_get(doc, "comparisons"), 0);
}

/*
 * Hand-worked (n = 4 cases, one repeat, alpha 0.05, one treatment: alpha' = 0.05):
 *   better       control fails every case, the treatment passes: d = 1,1,1,1, se = 0,
 *                p = 0, CI [1, 1] > 0.
 *   worse        the other way round: CI [−1, −1] < 0.
 *   equivalent   both pass everything, min_effect 0.1: CI [0, 0] inside (−0.1, 0.1).
 *   inconclusive d = 0, 1, −1, 0: d̄ = 0, s = √(2/3), se = s/2 = 0.408, t(0.975, 3) =
 *                3.1824: CI ±1.2992 spans 0; sign test 1 win 1 loss, p = 1.
 * Tokens: control 10 + 2 = 12, treatment 13 + 5 = 18 on every case: delta +6 exactly,
 * se 0, relative 6 / 12 = 0.5.
 */
START_TEST(scripted_outcomes_give_each_verdict)
{
    ck_assert_int_eq(evd_t_stub_start(&stub, VERDICT_SCRIPT, NULL), 0);
    snprintf(env_base, sizeof(env_base), "OPENAI_BASE_URL=%s/v1", stub.base);
    struct evd_t_proc p;
    start_evald(&p, "EVALD_WORKERS=8");
    const bool F = false, T = true;
    const bool all_f[] = {F, F, F, F}, all_t[] = {T, T, T, T};
    const bool mix_c[] = {T, F, T, T}, mix_t[] = {T, T, F, T};
    struct {
        const bool *ctrl, *treat;
        double min_effect;
        const char *verdict;
        double delta, ci_low, ci_high;
    } want[] = {
        {all_f, all_t, 0, "better", 1, 1, 1},
        {all_t, all_f, 0, "worse", -1, -1, -1},
        {all_t, all_t, 0.1, "equivalent", 0, 0, 0},
        {mix_c, mix_t, 0, "inconclusive", 0, -1.2992283, 1.2992283},
    };
    char ids[4][64];
    for (int k = 0; k < 4; k++)
        snprintf(ids[k], sizeof(ids[k]), "%s",
                 evd_t_start_experiment(p.base, scripted_body(want[k].ctrl, want[k].treat, 4,
                                                              want[k].min_effect)));
    for (int k = 0; k < 4; k++) {
        json_t *doc = evd_t_wait_experiment(p.base, ids[k], 30000);
        json_t *cmp = comparison(doc);
        json_t *pr = json_object_get(cmp, "pass_rate");
        ck_assert_msg(strcmp(json_string_value(json_object_get(cmp, "verdict")), want[k].verdict) ==
                          0,
                      "experiment %d: verdict %s, want %s", k,
                      json_string_value(json_object_get(cmp, "verdict")), want[k].verdict);
        ck_assert_int_eq(json_integer_value(json_object_get(cmp, "paired_cases")), 4);
        ck_assert_double_eq_tol(json_number_value(json_object_get(pr, "delta")), want[k].delta,
                                1e-12);
        ck_assert_double_eq_tol(json_number_value(json_object_get(pr, "ci_low")), want[k].ci_low,
                                1e-6);
        ck_assert_double_eq_tol(json_number_value(json_object_get(pr, "ci_high")),
                                want[k].ci_high, 1e-6);
        ck_assert(json_is_false(json_object_get(json_object_get(doc, "analysis"), "partial")));
        if (k == 3) {
            json_t *sign = json_object_get(pr, "sign_test");
            ck_assert_int_eq(json_integer_value(json_object_get(sign, "wins")), 1);
            ck_assert_int_eq(json_integer_value(json_object_get(sign, "losses")), 1);
            ck_assert_int_eq(json_integer_value(json_object_get(sign, "ties")), 2);
            ck_assert_double_eq_tol(json_number_value(json_object_get(sign, "p_value")), 1.0,
                                    1e-12);
            ck_assert_double_eq_tol(json_number_value(json_object_get(pr, "se")),
                                    0.40824829046386296, 1e-12);
        }
        json_t *tok = json_object_get(json_object_get(cmp, "metrics"), "total_tokens");
        ck_assert_int_eq(json_integer_value(json_object_get(tok, "cases")), 4);
        ck_assert_double_eq_tol(json_number_value(json_object_get(tok, "delta")), 6.0, 1e-12);
        ck_assert_double_eq_tol(json_number_value(json_object_get(tok, "se")), 0.0, 1e-12);
        ck_assert_double_eq_tol(json_number_value(json_object_get(tok, "relative")), 0.5, 1e-12);
        json_decref(doc);
    }
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

#define HOOK_SECRET "whsec_experiment_test_0123456789"
#define HOOK_KEY "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

/* An experiment's end fires experiment.completed once, signed, to a subscription that asked
 * for it, and not to one left at the default (evaluation.completed). */
START_TEST(experiment_completed_fires_once)
{
    ck_assert_int_eq(evd_t_stub_start(&stub, VERDICT_SCRIPT, NULL), 0);
    snprintf(env_base, sizeof(env_base), "OPENAI_BASE_URL=%s/v1", stub.base);
    struct evd_t_receiver *rx = evd_t_receiver_start(0);
    ck_assert_ptr_nonnull(rx);
    char *env[] = {env_base, env_key, "EVALD_WORKERS=4", "EVALD_WEBHOOK_ALLOW_HOSTS=127.0.0.1",
                   "EVALD_SECRET_KEY=" HOOK_KEY, NULL};
    struct evd_t_proc p;
    ck_assert_int_eq(evd_t_evald_start(&p, db_url, env), 0);
    char url[256], body[512];
    snprintf(url, sizeof(url), "%s/v1/subscriptions", p.base);
    long status = 0;
    snprintf(body, sizeof(body),
             "{\"url\":\"http://127.0.0.1:%u/exp\",\"secret\":\"" HOOK_SECRET "\","
             "\"events\":[\"experiment.completed\"]}",
             evd_t_receiver_port(rx));
    json_decref(evd_t_http_json("POST", url, body, &status));
    ck_assert_int_eq(status, 201);
    snprintf(body, sizeof(body),
             "{\"url\":\"http://127.0.0.1:%u/eval\",\"secret\":\"" HOOK_SECRET "\"}",
             evd_t_receiver_port(rx));
    json_decref(evd_t_http_json("POST", url, body, &status));
    ck_assert_int_eq(status, 201);

    const bool all_f[] = {false, false, false}, all_t[] = {true, true, true};
    char id[64];
    snprintf(id, sizeof(id), "%s",
             evd_t_start_experiment(p.base, scripted_body(all_f, all_t, 3, 0)));
    json_decref(evd_t_wait_experiment(p.base, id, 30000));
    ck_assert(evd_t_receiver_wait_acked(rx, 1, 15000));
    usleep(1500 * 1000); /* a second delivery, if there were one, would have come by now */
    ck_assert_int_eq(evd_t_receiver_count(rx), 1);
    struct evd_t_hook h;
    ck_assert(evd_t_receiver_get(rx, 0, &h));
    ck_assert_str_eq(h.path, "/exp");
    ck_assert_str_eq(h.event_type, "experiment.completed");
    ck_assert(evd_t_hook_signature_ok(&h, HOOK_SECRET));
    json_t *ev = json_loads(h.body, 0, NULL);
    ck_assert_ptr_nonnull(ev);
    ck_assert_str_eq(json_string_value(json_object_get(ev, "experiment_id")), id);
    ck_assert_str_eq(json_string_value(json_object_get(ev, "status")), "completed");
    ck_assert(json_is_integer(json_object_get(ev, "timestamp")));
    json_t *verdicts = json_object_get(ev, "verdicts");
    ck_assert_int_eq(json_array_size(verdicts), 1);
    json_t *v = json_array_get(verdicts, 0);
    ck_assert_int_eq(json_integer_value(json_object_get(v, "treatment")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(v, "label")), "B");
    ck_assert_str_eq(json_string_value(json_object_get(v, "verdict")), "better");
    json_decref(ev);
    evd_t_hook_free(&h);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
    evd_t_receiver_stop(rx);
}
END_TEST

/* A call in flight holds no database connection: 48 workers share 2 connections, and
 * 40 cases at once reach the provider together while evald never has more than its fixed
 * connections open. */
START_TEST(calls_in_flight_hold_no_connection)
{
    start_stub(700);
    struct evd_t_proc p;
    char *env[] = {env_base, env_key, "EVALD_WORKERS=48", "EVALD_WORKER_CONNECTIONS=2",
                   "EVALD_DB_POOL_SIZE=2", "EVALD_WEBHOOK_WORKERS=0", NULL};
    ck_assert_int_eq(evd_t_evald_start(&p, db_url, env), 0);
    char xid[64];
    snprintf(xid, sizeof(xid), "%s", start_experiment(&p, 40, 2, 4, 40));
    long most = 0;
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
             " AND pid <> pg_backend_pid()");
    for (int waited = 0; waited < 30000; waited += 100) {
        char *v = evd_t_sql(db_url, sql);
        if (v != NULL && atol(v) > most)
            most = atol(v);
        free(v);
        json_t *stats = evd_t_stub_stats(&stub);
        long in_flight = (long)json_integer_value(json_object_get(stats, "max_in_flight"));
        json_decref(stats);
        if (in_flight >= 40)
            break;
        usleep(100 * 1000);
    }
    json_t *doc = evd_t_wait_experiment(p.base, xid, 60000);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "status")), "completed");
    json_decref(doc);
    json_t *stats = evd_t_stub_stats(&stub);
    ck_assert_int_ge(json_integer_value(json_object_get(stats, "max_in_flight")), 40);
    json_decref(stats);
    /* 2 worker connections + at most 2 pooled + keeper, sweeper, writer, finalizer,
     * analyst: 9, far below the 40 calls in flight. */
    ck_assert_msg(most <= 9, "evald had %ld connections open", most);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* A dataset cannot be deleted while a live experiment uses it (409 naming the experiment);
 * once the experiment is cancelled it can, and the experiment keeps its copy of the cases. */
START_TEST(dataset_delete_waits_for_its_experiments)
{
    start_stub(2000);
    struct evd_t_proc p;
    start_evald(&p, "EVALD_WORKERS=4");
    char xid[64], url[256];
    snprintf(xid, sizeof(xid), "%s", start_experiment(&p, 3, 2, 1, 1));
    snprintf(url, sizeof(url), "%s/v1/experiments/%s", p.base, xid);
    long status = 0;
    json_t *doc = evd_t_http_json("GET", url, NULL, &status);
    char ds[64];
    snprintf(ds, sizeof(ds), "%s",
             json_string_value(json_object_get(json_object_get(doc, "dataset"), "dataset_id")));
    json_decref(doc);
    snprintf(url, sizeof(url), "%s/v1/datasets/%s", p.base, ds);
    json_t *r = evd_t_http_json("DELETE", url, NULL, &status);
    ck_assert_int_eq(status, 409);
    const char *detail = json_string_value(json_object_get(r, "detail"));
    ck_assert_ptr_nonnull(detail);
    ck_assert_msg(strstr(detail, xid) != NULL, "detail: %s", detail);
    json_decref(r);
    snprintf(url, sizeof(url), "%s/v1/experiments/%s/cancel", p.base, xid);
    json_decref(evd_t_http_json("POST", url, "{}", &status));
    ck_assert_int_eq(status, 200);
    snprintf(url, sizeof(url), "%s/v1/datasets/%s", p.base, ds);
    json_decref(evd_t_http_json("DELETE", url, NULL, &status));
    ck_assert_int_eq(status, 200);
    snprintf(url, sizeof(url), "%s/v1/experiments/%s/cases", p.base, xid);
    json_t *cases = evd_t_http_json("GET", url, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(json_array_size(json_object_get(cases, "cases")), 3);
    json_decref(cases);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

/* A cancel that comes while the case jobs take their first cells, or write them, neither
 * deadlocks with them nor fails: every one answers 200 and leaves the experiment
 * cancelled, with nothing running. */
START_TEST(cancel_right_after_start_never_deadlocks)
{
    start_stub(150);
    struct evd_t_proc p;
    start_evald(&p, "EVALD_WORKERS=16");
    for (int i = 0; i < 16; i++) {
        char xid[64], url[256];
        snprintf(xid, sizeof(xid), "%s", start_experiment(&p, 4, 2, 3, 4));
        usleep((useconds_t)(i % 4) * 60 * 1000); /* at the start, and while cells finish */
        snprintf(url, sizeof(url), "%s/v1/experiments/%s/cancel", p.base, xid);
        long status = 0;
        json_t *r = evd_t_http_json("POST", url, "{}", &status);
        ck_assert_msg(status == 200, "cancel %d answered %ld: %s", i, status,
                      json_string_value(json_object_get(r, "detail")));
        ck_assert_str_eq(json_string_value(json_object_get(r, "status")), "cancelled");
        json_decref(r);
        char sql[256];
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                 " AND status IN ('pending', 'running')",
                 xid);
        char *v = evd_t_sql(db_url, sql);
        ck_assert_str_eq(v, "0");
        free(v);
    }
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("experiment_runs");
    TCase *tc = tcase_create("experiment_runs");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, three_arms_reach_the_provider_in_the_planned_order);
    tcase_add_test(tc, concurrency_one_dispatches_cases_in_dataset_order);
    tcase_add_test(tc, kill_9_mid_experiment_counts_every_run_once);
    tcase_add_test(tc, scripted_outcomes_give_each_verdict);
    tcase_add_test(tc, experiment_completed_fires_once);
    tcase_add_test(tc, calls_in_flight_hold_no_connection);
    tcase_add_test(tc, dataset_delete_waits_for_its_experiments);
    tcase_add_test(tc, cancel_right_after_start_never_deadlocks);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
