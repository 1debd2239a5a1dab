/*
 * Simulated users end to end (../shared/spec/agent-cases.md, "Simulated users";
 * docs/agents.md): a conversation that stops on the stop token and on max_turns, the
 * simulator's figures apart from the agent's, the transcript at the evaluator and in the
 * export, a mocked sequence across turns, the plan and the budget, the refusals, and kill
 * -9 in the middle of a conversation. Real evald, evald-stub, a throwaway PostgreSQL and
 * the tool server (tests/support/agents_fixture.h), all on loopback.
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/agents_fixture.h"
#include "tests/support/experiments_fixtures.h"
#include "tests/support/harness_support.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

/* ---- simulated users ------------------------------------------------------------------ */

/* clang-format off */
#define AGENT_USAGE "\"usage\":{\"input_tokens\":20,\"output_tokens\":5}"
#define USER_USAGE "\"usage\":{\"input_tokens\":7,\"output_tokens\":3}"
/* The traveller (the simulator's system prompt names it) answers the agent's questions and
 * says it is done once booked; the agent asks for a city, then a night, then books. */
static const char CONVERSE[] =
    "{\"rules\":["
    "{\"when\":{\"system_contains\":\"traveller\",\"prompt_contains\":\"Which city?\"},"
    "\"reply\":{\"text\":\"Oslo.\"}," USER_USAGE "},"
    "{\"when\":{\"system_contains\":\"traveller\",\"prompt_contains\":\"Which night?\"},"
    "\"reply\":{\"text\":\"Friday.\"}," USER_USAGE "},"
    "{\"when\":{\"system_contains\":\"traveller\",\"prompt_contains\":\"Booked\"},"
    "\"reply\":{\"text\":\"Thanks! [[DONE]]\"}," USER_USAGE "},"
    "{\"when\":{\"prompt_contains\":\"Friday\"},"
    "\"reply\":{\"text\":\"Booked R42 in Oslo for Friday.\"}," AGENT_USAGE "},"
    "{\"when\":{\"prompt_contains\":\"Oslo\"},\"reply\":{\"text\":\"Which night?\"}," AGENT_USAGE "},"
    "{\"when\":{\"prompt_contains\":\"room\"},\"reply\":{\"text\":\"Which city?\"}," AGENT_USAGE "}"
    "]}";
/* clang-format on */

static char *simulated_body(int max_turns, const char *evaluator_id)
{
    return xt_printf(
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
        "\"control\":{\"label\":\"terse\",\"prompt\":\"I need a room.\"},"
        "\"treatments\":[{\"label\":\"polite\",\"prompt\":\"Hello! I need a room.\"}],"
        "\"simulator\":{\"model\":{\"model\":\"stub-user\",\"provider\":\"openai\"},"
        "\"instructions\":\"You are a traveller named {{name}}. Book one night.\","
        "\"max_turns\":%d},"
        "\"evaluator\":{\"function_id\":\"%s\",\"arguments\":{\"expected\":"
        "\"Booked R42 in Oslo for Friday.\"}},\"repeats\":1,\"concurrency\":2,"
        "\"cases\":[{\"id\":\"ana\",\"vars\":{\"name\":\"Ana\"}}]}",
        max_turns, evaluator_id);
}

/*
 * The simulated user answers until its reply holds the stop token: three agent answers,
 * three simulator calls (the last, "Thanks! [[DONE]]", neither sent nor kept), the
 * transcript in conversation order at the evaluator and in the run, the simulator's
 * tokens apart from the agent's, and its calls in the experiment's spend.
 */
START_TEST(a_simulated_user_stops_on_its_token)
{
    ck_assert_int_eq(evd_t_stub_script(&at_stub, CONVERSE), 200);
    char *body = simulated_body(10, "eval::assert::exact");
    char *id = at_start_experiment(body);
    json_t *doc = at_wait_done(id, 60000);
    ck_assert_str_eq(at_str(doc, "status"), "completed");
    ck_assert(json_real_value(xt_at(doc, "arms.0.pass_rate")) == 1.0);
    json_t *runs = at_runs_of(id);
    ck_assert_uint_eq(json_array_size(runs), 2);
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        ck_assert_str_eq(at_str(run, "status"), "completed");
        ck_assert_str_eq(at_str(run, "output"), "Booked R42 in Oslo for Friday.");
        json_t *b = xt_at(run, "benchmark");
        /* the agent: three answers of 20 + 5 tokens; the user: three calls of 7 + 3 */
        ck_assert_int_eq(json_integer_value(json_object_get(b, "turns")), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(b, "input_tokens")), 60);
        ck_assert_int_eq(json_integer_value(json_object_get(b, "output_tokens")), 15);
        ck_assert_int_eq(json_integer_value(json_object_get(b, "simulator_calls")), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(b, "simulator_input_tokens")), 21);
        ck_assert_int_eq(json_integer_value(json_object_get(b, "simulator_output_tokens")), 9);
        ck_assert_int_eq(json_integer_value(json_object_get(b, "simulator_total_tokens")), 30);
        json_t *conv = xt_at(run, "transcript.conversation");
        ck_assert_uint_eq(json_array_size(conv), 6);
        static const char *const said[] = {NULL, "Which city?", "Oslo.", "Which night?",
                                           "Friday.", "Booked R42 in Oslo for Friday."};
        for (size_t k = 0; k < 6; k++) {
            ck_assert_str_eq(at_str(json_array_get(conv, k), "role"),
                             k % 2 == 0 ? "user" : "assistant");
            if (said[k] != NULL)
                ck_assert_str_eq(at_str(json_array_get(conv, k), "content"), said[k]);
        }
    }
    json_decref(runs);
    /* 2 runs × (3 agent + 3 simulator calls) */
    ck_assert_int_eq(json_integer_value(xt_at(doc, "spend.calls")), 12);
    json_decref(doc);
    /* The simulator saw its instructions rendered for the case and the roles swapped. */
    json_t *log = evd_t_stub_requests(&at_stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    int sim = 0;
    json_array_foreach(reqs, i, run)
    {
        json_t *b = at_request_body(run);
        char *text = json_dumps(b, JSON_COMPACT);
        if (strstr(text, "traveller") != NULL) {
            sim++;
            ck_assert_msg(strstr(text, "You are a traveller named Ana. Book one night.") != NULL,
                          "%s", text);
            ck_assert_str_eq(at_str(b, "model"), "stub-user");
            char *conv = at_wire_conversation(b);
            ck_assert_msg(strncmp(conv, "assistant: ", 11) == 0, "%s", conv);
            ck_assert_msg(strstr(conv, "user: Which city?\n") != NULL, "%s", conv);
            free(conv);
        }
        free(text);
        json_decref(b);
    }
    ck_assert_int_eq(sim, 6);
    json_decref(log);
    /* The export carries each run's conversation and the simulator's figures. */
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/experiments/%s/export", at_evald.base, id);
    struct evd_t_resp r;
    evd_t_http("GET", url, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    int records = 0;
    for (char *save = NULL, *line = strtok_r(r.body, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save), records++) {
        json_t *rec = json_loads(line, 0, NULL);
        ck_assert_ptr_nonnull(rec);
        ck_assert_uint_eq(json_array_size(json_object_get(rec, "transcript")), 6);
        ck_assert_str_eq(at_str(rec, "transcript.3.content"), "Which night?");
        ck_assert_int_eq(json_integer_value(json_object_get(rec, "simulator_calls")), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(rec, "simulator_total_tokens")), 30);
        ck_assert_int_eq(json_integer_value(json_object_get(rec, "turns")), 3);
        json_decref(rec);
    }
    ck_assert_int_eq(records, 2);
    evd_t_resp_free(&r);
    snprintf(url, sizeof(url), "%s/v1/experiments/%s/export?format=csv", at_evald.base, id);
    evd_t_http("GET", url, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(strstr(r.body, ",simulator_calls,simulator_total_tokens,simulator_cost_usd,"
                                 "transcript\r\n") != NULL,
                  "%.300s", r.body);
    ck_assert_ptr_nonnull(strstr(r.body, "\"[{\"\"role\"\":\"\"user\"\",\"\"content\"\":\"\"I need a room.\"\"}"));
    evd_t_resp_free(&r);
    free(id);
    free(body);
}
END_TEST

/* max_turns ends the conversation: two user turns, one simulator call; the evaluator (an
 * HTTP one) reads the conversation so far. */
START_TEST(a_simulated_user_stops_at_max_turns)
{
    ck_assert_int_eq(evd_t_stub_script(&at_stub, CONVERSE), 200);
    at_put_echo_tool("judge.echo");
    char *body = simulated_body(2, "judge.echo");
    char *id = at_start_experiment(body);
    json_t *doc = at_wait_done(id, 60000);
    json_decref(doc);
    json_t *input = hs_tools_last("/echo");
    ck_assert_ptr_nonnull(input);
    ck_assert_str_eq(at_str(input, "output"), "Which night?");
    json_t *t = xt_at(input, "transcript");
    ck_assert_uint_eq(json_array_size(t), 4);
    ck_assert_str_eq(at_str(t, "2.content"), "Oslo.");
    ck_assert_str_eq(at_str(t, "3.content"), "Which night?");
    ck_assert_str_eq(at_str(input, "case_id"), "ana");
    json_decref(input);
    json_t *runs = at_runs_of(id);
    json_t *b = xt_at(json_array_get(runs, 0), "benchmark");
    ck_assert_int_eq(json_integer_value(json_object_get(b, "turns")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(b, "simulator_calls")), 1);
    json_decref(runs);
    free(id);
    free(body);
}
END_TEST

/*
 * kill -9 in the middle of a simulated conversation: the next process goes on from the
 * conversation's checkpoint. The turn that was in flight is sent again, but no turn the
 * checkpoint holds is: the first agent turn and the first simulator reply reach the stub
 * once, and the run's conversation, turns and simulator figures are those of one
 * uninterrupted conversation.
 */
START_TEST(kill_9_mid_conversation_resumes_without_doubling_a_turn)
{
    /* Every call takes 400 ms: the kill lands during the second agent turn. */
    char script[4096];
    const char *from = CONVERSE;
    size_t n = 0;
    while (*from != '\0' && n + 32 < sizeof(script)) {
        if (strncmp(from, "\"usage\"", 7) == 0)
            n += (size_t)snprintf(script + n, sizeof(script) - n, "\"latency_ms\":400,");
        script[n++] = *from++;
    }
    script[n] = '\0';
    ck_assert_int_eq(evd_t_stub_script(&at_stub, script), 200);
    char *body = simulated_body(10, "eval::assert::exact");
    /* one arm's run at a time */
    char *one = strstr(body, "\"concurrency\":2");
    ck_assert_ptr_nonnull(one);
    one[strlen("\"concurrency\":")] = '1';
    char *id = at_start_experiment(body);
    /* Wait for the checkpoint after the first simulator reply, then for the second agent
     * turn to be in flight. */
    for (int waited = 0;; waited += 20) {
        char *sql = xt_printf("SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                              " AND checkpoint IS NOT NULL",
                              id);
        char *got = evd_t_sql(at_db_url, sql);
        bool kept = got != NULL && strcmp(got, "1") == 0;
        free(got);
        free(sql);
        if (kept)
            break;
        ck_assert_int_lt(waited, 30000);
        usleep(20 * 1000);
    }
    for (int waited = 0;; waited += 10) { /* the second agent turn is in flight */
        json_t *st = evd_t_stub_stats(&at_stub);
        bool in_turn = json_integer_value(json_object_get(st, "requests")) == 3 &&
                       json_integer_value(json_object_get(st, "in_flight")) == 1;
        json_decref(st);
        if (in_turn)
            break;
        ck_assert_int_lt(waited, 30000);
        usleep(10 * 1000);
    }
    evd_t_stop(&at_evald, SIGKILL, 5000);
    at_start_evald();
    json_t *doc = at_wait_done(id, 90000);
    ck_assert_str_eq(at_str(doc, "status"), "completed");
    json_t *runs = at_runs_of(id);
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        ck_assert_str_eq(at_str(run, "status"), "completed");
        json_t *b = xt_at(run, "benchmark");
        ck_assert_int_eq(json_integer_value(json_object_get(b, "turns")), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(b, "input_tokens")), 60);
        ck_assert_int_eq(json_integer_value(json_object_get(b, "simulator_calls")), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(b, "simulator_input_tokens")), 21);
        json_t *conv = xt_at(run, "transcript.conversation");
        ck_assert_uint_eq(json_array_size(conv), 6);
        ck_assert_str_eq(at_str(conv, "2.content"), "Oslo.");
        ck_assert_str_eq(at_str(conv, "4.content"), "Friday.");
    }
    /* The interrupted run was taken over by a second attempt. */
    char *sql = xt_printf("SELECT max(attempt) FROM experiment_runs WHERE experiment_id = '%s'",
                          id);
    char *att = evd_t_sql(at_db_url, sql);
    ck_assert_str_eq(att, "2");
    free(att);
    free(sql);
    /* Per session (one a run): the agent's first turn and the simulator's first reply were
     * sent once; only the turn in flight at the kill was sent twice. */
    json_t *log = evd_t_stub_requests(&at_stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    int first_turn = 0, first_reply = 0, second_turn = 0;
    json_array_foreach(reqs, i, run)
    {
        json_t *b = at_request_body(run);
        char *conv = at_wire_conversation(b);
        char *text = json_dumps(b, JSON_COMPACT);
        bool simulator = strstr(text, "traveller") != NULL;
        size_t lines = 0;
        for (const char *p = conv; *p; p++)
            lines += *p == '\n';
        if (!simulator && lines == 1)
            first_turn++;
        else if (simulator && lines == 2)
            first_reply++;
        else if (!simulator && lines == 3)
            second_turn++;
        free(text);
        free(conv);
        json_decref(b);
    }
    ck_assert_int_eq(first_turn, 2);  /* two runs, each once */
    ck_assert_int_eq(first_reply, 2); /* the same */
    ck_assert_int_eq(second_turn, 3); /* the interrupted run's twice */
    json_decref(log);
    json_decref(runs);
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST

/* The plan counts a simulated user's calls apart, and its answers in the arms'; a cost cap
 * needs the simulator's price too. */
START_TEST(the_plan_counts_the_simulated_user)
{
    char *body = simulated_body(4, "eval::assert::exact");
    long status = 0;
    json_t *plan = at_call("POST", "/v1/experiments/plan", body, &status);
    ck_assert_int_eq(status, 200);
    /* one case, two arms, one repeat: 2 runs, each up to 4 answers and 3 simulator calls */
    ck_assert_int_eq(json_integer_value(xt_at(plan, "runs")), 2);
    ck_assert_int_eq(json_integer_value(xt_at(plan, "simulator.calls_max")), 6);
    ck_assert_int_eq(json_integer_value(xt_at(plan, "simulator.agent_answers_max")), 8);
    long cap = json_integer_value(xt_at(plan, "simulator.output_tokens_max")) / 6;
    ck_assert_int_gt(cap, 0);
    /* the arms' output maximum lets each of the 8 answers write the same cap */
    ck_assert_int_eq(json_integer_value(xt_at(plan, "tokens.output_max")), 8 * cap);
    ck_assert(json_is_null(xt_at(plan, "simulator.cost_usd"))); /* stub-user has no price */
    json_decref(plan);
    free(body);
    /* priced arms, an unpriced simulator, a cost cap: refused, naming the simulator's model */
    body = xt_printf(
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"gpt-4.1-mini\",\"provider\":"
        "\"openai\"},\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"prompt\":\"b\"}],"
        "\"simulator\":{\"model\":{\"model\":\"stub-user\",\"provider\":\"openai\"},"
        "\"instructions\":\"x\"},\"budget\":{\"max_cost_usd\":1},"
        "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{"
        "\"expected\":\"x\"}},\"cases\":[{\"id\":\"ana\"}]}");
    json_t *r = at_call("POST", "/v1/experiments", body, &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(at_str(r, "detail"), "budget.max_cost_usd needs a price for model stub-user");
    json_decref(r);
    free(body);
}
END_TEST

/* A mocked sequence goes on across a simulated conversation's turns: the k-th call of the
 * run gets the k-th item, whichever agent turn makes it. */
START_TEST(a_mocked_sequence_spans_the_turns_of_a_conversation)
{
    ck_assert_int_eq(
        evd_t_stub_script(
            &at_stub, "{\"rules\":["
                   "{\"when\":{\"system_contains\":\"player\"},\"reply\":{\"text\":\"Again.\"}},"
                   "{\"when\":{\"has_tool_result\":true},\"reply\":{\"text\":\"Rolled.\"}},"
                   "{\"when\":{\"has_tool_result\":false},\"reply\":{\"tool_calls\":[{\"name\":"
                   "\"dice\",\"arguments\":{}}]}}]}"),
        200);
    char *id = at_start_experiment(
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
        "\"control\":{\"prompt\":\"Roll.\"},\"treatments\":[{\"prompt\":\"Roll it.\"}],"
        "\"tools\":[{\"name\":\"dice\",\"parameters\":{\"type\":\"object\"}}],"
        "\"simulator\":{\"model\":{\"model\":\"stub-user\",\"provider\":\"openai\"},"
        "\"instructions\":\"You are a player.\",\"max_turns\":3},"
        "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{\"expected\":"
        "\"Rolled.\"}},\"repeats\":1,\"concurrency\":1,"
        "\"cases\":[{\"id\":\"d\",\"tool_results\":{\"dice\":[1,2,3]}}]}");
    json_t *doc = at_wait_done(id, 60000);
    json_decref(doc);
    json_t *runs = at_runs_of(id);
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        json_t *conv = xt_at(run, "transcript.conversation");
        ck_assert_uint_eq(json_array_size(conv), 6);
        for (int turn = 0; turn < 3; turn++) {
            json_t *calls = json_object_get(json_array_get(conv, 2 * turn + 1), "function_calls");
            ck_assert_uint_eq(json_array_size(calls), 1);
            ck_assert_int_eq(json_integer_value(xt_at(calls, "0.result")), turn + 1);
        }
    }
    json_decref(runs);
    free(id);
}
END_TEST

/* The run's token budget is the whole conversation's: two turns of 25 tokens spend the 40
 * allowed, and the run fails at the limit before the third user turn. */
START_TEST(the_token_budget_spans_the_conversation)
{
    ck_assert_int_eq(evd_t_stub_script(&at_stub, CONVERSE), 200);
    char *body = simulated_body(10, "eval::assert::exact");
    char *limits = xt_printf("%.*s\"limits\":{\"execution\":{\"max_total_tokens\":40}},%s",
                             (int)(strstr(body, "\"simulator\"") - body), body,
                             strstr(body, "\"simulator\""));
    char *id = at_start_experiment(limits);
    json_t *doc = at_wait_done(id, 60000);
    json_decref(doc);
    json_t *runs = at_runs_of(id);
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        ck_assert_str_eq(at_str(run, "status"), "failed");
        ck_assert_str_eq(at_str(run, "failures.0.phase"), "limit");
        ck_assert_str_eq(at_str(run, "failures.0.message"),
                         "total tokens 50 reached max_total_tokens 40 before the next user turn");
        ck_assert_int_eq(json_integer_value(xt_at(run, "benchmark.turns")), 2);
        ck_assert_int_eq(json_integer_value(xt_at(run, "benchmark.simulator_calls")), 1);
    }
    json_decref(runs);
    free(id);
    free(limits);
    free(body);
}
END_TEST

/* Refusals of the simulator member name the field; nothing is written. */
START_TEST(simulator_refusals_name_the_field)
{
    static const struct {
        const char *sim, *msg;
    } cases[] = {
        {"[]", "simulator must be an object"},
        {"{\"instructions\":\"x\"}", "simulator.model is required"},
        {"{\"model\":{\"model\":\"m\"},\"instructions\":\"x\",\"colour\":1}",
         "simulator.colour is not a known field"},
        {"{\"model\":{\"model\":\"m\"}}", "simulator.instructions is required"},
        {"{\"model\":{\"model\":\"m\"},\"instructions\":\" \"}",
         "simulator.instructions cannot be empty"},
        {"{\"model\":{\"model\":\"m\"},\"instructions\":\"x\",\"max_turns\":21}",
         "simulator.max_turns must be an integer between 1 and 20"},
        {"{\"model\":{\"model\":\"m\"},\"instructions\":\"x\",\"stop\":\"\"}",
         "simulator.stop must be a non-empty string"},
        {"{\"model\":{\"model\":\"m\"},\"instructions\":\"Hi {{nobody}}\"}",
         "case ana: template variable nobody is not defined"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *body = xt_printf(
            "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
            "\"openai\"},\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"prompt\":\"b\"}],"
            "\"simulator\":%s,\"evaluator\":{\"function_id\":\"eval::assert::exact\","
            "\"arguments\":{\"expected\":\"x\"}},\"cases\":[{\"id\":\"ana\"}]}",
            cases[i].sim);
        long status = 0;
        json_t *r = at_call("POST", "/v1/experiments", body, &status);
        ck_assert_msg(status == 400, "%s answered %ld", cases[i].sim, status);
        ck_assert_str_eq(at_str(r, "detail"), cases[i].msg);
        json_decref(r);
        free(body);
    }
    char *n = evd_t_sql(at_db_url, "SELECT count(*) FROM experiments");
    ck_assert_str_eq(n, "0");
    free(n);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("experiment_simulator");
    TCase *tc = tcase_create("simulator");
    tcase_add_checked_fixture(tc, at_setup, at_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_simulated_user_stops_on_its_token);
    tcase_add_test(tc, a_simulated_user_stops_at_max_turns);
    tcase_add_test(tc, the_token_budget_spans_the_conversation);
    tcase_add_test(tc, simulator_refusals_name_the_field);
    tcase_add_test(tc, the_plan_counts_the_simulated_user);
    tcase_add_test(tc, a_mocked_sequence_spans_the_turns_of_a_conversation);
    tcase_add_test(tc, kill_9_mid_conversation_resumes_without_doubling_a_turn);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
