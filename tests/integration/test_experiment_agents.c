/*
 * Agent cases end to end (../shared/spec/agent-cases.md; docs/agents.md): conversation
 * cases sent before the arm's prompt on each wire format, the empty prompt, the
 * transcript an HTTP evaluator reads and the conversation a run document keeps, mocked
 * tools and the trajectory evaluator, and the worked example of docs/agents.md. Real
 * evald, evald-stub, a throwaway PostgreSQL and the tool server (tests/support/
 * agents_fixture.h), all on loopback. Simulated users: test_experiment_simulator.c.
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

/* ---- conversation cases --------------------------------------------------------------- */

/* clang-format off */
static const char CONVERSATIONS[] =
    "{\"id\":\"oslo\",\"vars\":{\"city\":\"Oslo\"},\"messages\":["
    "{\"role\":\"user\",\"content\":\"I need a room in {{city}}.\"},"
    "{\"role\":\"assistant\",\"content\":\"For which night?\"}]}\n"
    "{\"id\":\"rome\",\"vars\":{\"city\":\"Rome\"},\"messages\":["
    "{\"role\":\"user\",\"content\":\"Any room in {{city}}?\"},"
    "{\"role\":\"assistant\",\"content\":\"Which dates?\"}]}\n";
/* clang-format on */

/*
 * A model experiment whose three arms speak the three wire formats: each request carries
 * the case's conversation, templates rendered, then the shared prompt as the next user
 * message, in that order; the run document keeps the conversation with the answer.
 */
START_TEST(the_conversation_goes_before_the_prompt_on_every_wire)
{
    char *ds = at_upload_jsonl("talks", CONVERSATIONS);
    char *body = xt_printf(
        "{\"dimension\":\"model\",\"dataset_id\":\"%s\","
        "\"prompt\":\"Tonight, in {{city}}.\",\"system_prompt\":\"You book rooms.\","
        "\"control\":{\"label\":\"responses\",\"model\":{\"model\":\"m1\",\"provider\":\"resp\"}},"
        "\"treatments\":[{\"label\":\"chat\",\"model\":{\"model\":\"m2\",\"provider\":\"chat\"}},"
        "{\"label\":\"messages\",\"model\":{\"model\":\"m3\",\"provider\":\"msgs\"}}],"
        "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{\"expected\":"
        "\"yes\"}},\"repeats\":1,\"concurrency\":2}",
        ds);
    char *id = at_start_experiment(body);
    json_t *doc = at_wait_done(id, 60000);
    ck_assert_str_eq(at_str(doc, "status"), "completed");

    json_t *log = evd_t_stub_requests(&at_stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    int seen[3] = {0, 0, 0};
    static const char *const apis[] = {"responses", "chat", "messages"};
    size_t i;
    json_t *req;
    json_array_foreach(reqs, i, req)
    {
        json_t *b = at_request_body(req);
        char *conv = at_wire_conversation(b);
        const char *api = at_str(req, "api");
        const bool oslo = strstr(conv, "Oslo") != NULL;
        const char *want =
            oslo ? "user: I need a room in Oslo.\nassistant: For which night?\n"
                   "user: Tonight, in Oslo.\n"
                 : "user: Any room in Rome?\nassistant: Which dates?\nuser: Tonight, in Rome.\n";
        ck_assert_msg(strcmp(conv, want) == 0, "%s sent:\n%s", api, conv);
        for (int k = 0; k < 3; k++)
            seen[k] += strcmp(api, apis[k]) == 0;
        free(conv);
        json_decref(b);
    }
    for (int k = 0; k < 3; k++)
        ck_assert_msg(seen[k] == 2, "%s got %d requests", apis[k], seen[k]);
    json_decref(log);

    /* Each run keeps the conversation with its answer, turn by turn. */
    json_t *runs = at_runs_of(id);
    ck_assert_uint_eq(json_array_size(runs), 6);
    json_array_foreach(runs, i, req)
    {
        json_t *conv = xt_at(req, "transcript.conversation");
        ck_assert_uint_eq(json_array_size(conv), 4);
        const bool oslo = strcmp(at_str(req, "case_id"), "oslo") == 0;
        ck_assert_str_eq(at_str(conv, "0.content"),
                         oslo ? "I need a room in Oslo." : "Any room in Rome?");
        ck_assert_str_eq(at_str(conv, "1.role"), "assistant");
        ck_assert_str_eq(at_str(conv, "2.content"), oslo ? "Tonight, in Oslo." : "Tonight, in Rome.");
        ck_assert_str_eq(at_str(conv, "3.role"), "assistant");
        ck_assert(json_equal(xt_at(conv, "3.content"), xt_at(req, "output")));
    }
    json_decref(runs);
    json_decref(doc);
    free(id);
    free(body);
    free(ds);
}
END_TEST

/* clang-format off */
#define ASKING "\"messages\":[{\"role\":\"user\",\"content\":\"Book R42 for {{night}}.\"}," \
    "{\"role\":\"assistant\",\"content\":\"Shall I?\"},{\"role\":\"user\",\"content\":\"Yes.\"}]"
/* clang-format on */

/*
 * An empty prompt sends the case's conversation as it is (its last message the user's);
 * a treatment's prompt follows it. An HTTP evaluator reads the whole conversation as the
 * transcript, with the case's id.
 */
START_TEST(an_empty_prompt_sends_the_conversation_as_it_is)
{
    at_put_echo_tool("judge.echo");
    char *id = at_start_experiment(
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
        "\"control\":{\"label\":\"as-is\",\"prompt\":\"\"},"
        "\"treatments\":[{\"label\":\"nudged\",\"prompt\":\"Answer in one word.\"}],"
        "\"evaluator\":{\"function_id\":\"judge.echo\"},\"repeats\":1,\"concurrency\":1,"
        "\"cases\":[{\"id\":\"r42\",\"vars\":{\"night\":\"Friday\"}," ASKING "}]}");
    json_t *doc = at_wait_done(id, 60000);
    json_decref(doc);
    json_t *log = evd_t_stub_requests(&at_stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    ck_assert_uint_eq(json_array_size(reqs), 2);
    int bare = 0, nudged = 0;
    for (size_t i = 0; i < 2; i++) {
        json_t *b = at_request_body(json_array_get(reqs, i));
        char *conv = at_wire_conversation(b);
        if (strstr(conv, "one word") == NULL) {
            bare++;
            ck_assert_str_eq(conv, "user: Book R42 for Friday.\nassistant: Shall I?\nuser: Yes.\n");
        } else {
            nudged++;
            ck_assert_str_eq(conv, "user: Book R42 for Friday.\nassistant: Shall I?\nuser: Yes.\n"
                                   "user: Answer in one word.\n");
        }
        free(conv);
        json_decref(b);
    }
    ck_assert_int_eq(bare, 1);
    ck_assert_int_eq(nudged, 1);
    json_decref(log);
    /* The case row shows the case's conversation as it was given. */
    char *path = xt_printf("/v1/experiments/%s/cases", id);
    long st = 0;
    json_t *rows = at_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_str_eq(at_str(rows, "cases.0.messages.0.content"), "Book R42 for {{night}}.");
    ck_assert_str_eq(at_str(rows, "cases.0.messages.2.content"), "Yes.");
    json_decref(rows);
    free(path);
    /* The evaluator (the last run is the treatment's or the control's: both read their
     * whole conversation) got the case's id and its transcript. */
    json_t *input = hs_tools_last("/echo");
    ck_assert_ptr_nonnull(input);
    ck_assert_str_eq(at_str(input, "case_id"), "r42");
    json_t *t = xt_at(input, "transcript");
    size_t n = json_array_size(t);
    ck_assert_msg(n == 4 || n == 5, "transcript of %zu entries", n);
    ck_assert_str_eq(at_str(t, "0.content"), "Book R42 for Friday.");
    ck_assert_str_eq(at_str(t, "1.content"), "Shall I?");
    ck_assert_str_eq(at_str(t, "2.content"), "Yes.");
    if (n == 5)
        ck_assert_str_eq(at_str(t, "3.content"), "Answer in one word.");
    char last[16];
    snprintf(last, sizeof(last), "%zu.role", n - 1);
    ck_assert_str_eq(at_str(t, last), "assistant");
    json_decref(input);
    free(id);
}
END_TEST

/* A case that ends with the assistant cannot be sent with an empty prompt: refused, and
 * nothing is written. */
START_TEST(an_empty_prompt_needs_a_conversation_ending_with_the_user)
{
    char *ds = at_upload_jsonl("talks", CONVERSATIONS);
    char *body = xt_printf(
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
        "\"control\":{\"prompt\":\"\"},\"treatments\":[{\"prompt\":\"Go on.\"}],"
        "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{\"expected\":\"x\"}},"
        "\"dataset_id\":\"%s\"}",
        ds);
    long status = 0;
    json_t *r = at_call("POST", "/v1/experiments", body, &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(at_str(r, "detail"),
                     "case oslo: messages must end with a user message when the prompt is empty");
    json_decref(r);
    /* inline cases: the same, and no dataset is written either */
    r = at_call("POST", "/v1/experiments",
             "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
             "\"openai\"},\"control\":{\"prompt\":\"\"},\"treatments\":[{\"prompt\":\"Go on.\"}],"
             "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{\"expected\":"
             "\"x\"}},\"cases\":[{\"id\":\"q3\",\"vars\":{}}]}",
             &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(at_str(r, "detail"),
                     "case q3: messages must end with a user message when the prompt is empty");
    json_decref(r);
    /* nothing written: the one uploaded dataset, no experiment */
    char *n = evd_t_sql(at_db_url, "SELECT count(*) FROM datasets");
    ck_assert_str_eq(n, "1");
    free(n);
    n = evd_t_sql(at_db_url, "SELECT count(*) FROM experiments");
    ck_assert_str_eq(n, "0");
    free(n);
    free(body);
    free(ds);
}
END_TEST

/* ---- mocked tools and the trajectory --------------------------------------------------- */

/* clang-format off */
#define CALL(name, args) "{\"tool_calls\":[{\"name\":\"" name "\",\"arguments\":" args "}]}"
/* "You book" (the treatment's system prompt) searches, then books; "You check" (the
 * control's) searches, then looks the room up. Each answer comes once its tool results
 * say so: the rules are tried in order, so the latest result decides. */
static const char BOOKING[] =
    "{\"rules\":["
    "{\"when\":{\"system_contains\":\"You book\",\"tool_result_contains\":\"confirmed\"},"
    "\"reply\":{\"text\":\"Booked R42.\"}},"
    "{\"when\":{\"system_contains\":\"You book\",\"tool_result_contains\":\"R42\"},"
    "\"reply\":" CALL("book", "{\"room\":\"R42\"}") "},"
    "{\"when\":{\"system_contains\":\"You book\"},"
    "\"reply\":" CALL("search", "{\"city\":\"Oslo\"}") "},"
    "{\"when\":{\"system_contains\":\"You check\",\"tool_result_contains\":\"lookup\"},"
    "\"reply\":{\"text\":\"I could not look R42 up.\"}},"
    "{\"when\":{\"system_contains\":\"You check\",\"tool_result_contains\":\"free\"},"
    "\"reply\":{\"text\":\"R42 is free.\"}},"
    "{\"when\":{\"system_contains\":\"You check\",\"tool_result_contains\":\"R42\"},"
    "\"reply\":" CALL("lookup", "{\"room\":\"R42\"}") "},"
    "{\"when\":{\"system_contains\":\"You check\"},"
    "\"reply\":" CALL("search", "{\"city\":\"Oslo\"}") "}"
    "]}";
#define MOCK_TOOLS "\"tools\":[" \
    "{\"name\":\"search\",\"description\":\"Rooms of a city\",\"parameters\":{\"type\":\"object\"," \
    "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}," \
    "{\"name\":\"book\",\"parameters\":{\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"}}}}," \
    "{\"name\":\"lookup\",\"parameters\":{\"type\":\"object\"}}]"
/* Oslo mocks every tool; Rome has no answer for lookup. */
#define BOOKING_CASES "[" \
    "{\"id\":\"oslo\",\"messages\":[{\"role\":\"user\",\"content\":\"A room in Oslo?\"}," \
    "{\"role\":\"assistant\",\"content\":\"Shall I look?\"}],\"tool_results\":{" \
    "\"search\":[{\"when\":{\"city\":\"Rome\"},\"result\":{\"rooms\":[]}}," \
    "{\"when\":{\"city\":\"Oslo\"},\"result\":{\"rooms\":[\"R42\"]}}]," \
    "\"book\":{\"status\":\"confirmed\"},\"lookup\":[{\"free\":true},{\"free\":false}]}}," \
    "{\"id\":\"rome\",\"messages\":[{\"role\":\"user\",\"content\":\"A room in Rome?\"}," \
    "{\"role\":\"assistant\",\"content\":\"Shall I look?\"}],\"tool_results\":{" \
    "\"search\":{\"rooms\":[\"R42\"]},\"book\":{\"status\":\"confirmed\"}}}]"
/* clang-format on */

static char *booking_body(const char *mode)
{
    return xt_printf(
        "{\"dimension\":\"system_prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
        "\"openai\"},\"control\":{\"label\":\"check\",\"prompt\":\"Yes, please.\","
        "\"system_prompt\":\"You check rooms.\"},\"treatments\":[{\"label\":\"book\","
        "\"prompt\":\"Yes, please.\",\"system_prompt\":\"You book rooms.\"}]," MOCK_TOOLS ","
        "\"evaluator\":{\"function_id\":\"eval::assert::trajectory\",\"arguments\":{"
        "\"expected\":[{\"name\":\"search\",\"arguments\":{\"city\":\"Oslo\"}},"
        "{\"name\":\"book\",\"arguments\":{\"room\":\"R42\"}}],\"mode\":\"%s\","
        "\"match_arguments\":\"subset\"}},\"repeats\":1,\"concurrency\":2,"
        "\"cases\":" BOOKING_CASES "}",
        mode);
}

/*
 * The spec's scripted agent case: over a two-turn conversation, the treatment calls search
 * then book, answered by the case's mocks; the control calls search then lookup. The
 * trajectory evaluator passes the treatment in every mode and fails the control with the
 * reason naming the first mismatch; an unmocked call is a function-call error told to the
 * model; no mocked call reaches the network.
 */
START_TEST(mocked_tools_answer_and_the_trajectory_decides)
{
    ck_assert_int_eq(evd_t_stub_script(&at_stub, BOOKING), 200);
    static const struct {
        const char *mode, *control_reason;
    } modes[] = {
        {"strict", "call 2: expected book"},
        {"unordered", "call 2: unexpected lookup"},
        {"subset", "call 2: unexpected lookup"},
        {"superset", "expected call 2: book"},
    };
    for (size_t m = 0; m < 4; m++) {
        ck_assert_int_eq(evd_t_stub_reset(&at_stub), 200);
        char *body = booking_body(modes[m].mode);
        char *id = at_start_experiment(body);
        json_t *doc = at_wait_done(id, 60000);
        ck_assert_str_eq(at_str(doc, "status"), "completed");
        json_t *runs = at_runs_of(id);
        ck_assert_uint_eq(json_array_size(runs), 4);
        for (int c = 0; c < 2; c++) {
            const char *case_id = c == 0 ? "oslo" : "rome";
            json_t *treat = at_run_at(runs, case_id, 1), *ctl = at_run_at(runs, case_id, 0);
            ck_assert_msg(json_is_true(json_object_get(treat, "passed")), "%s %s: %s",
                          modes[m].mode, case_id, at_str(treat, "verdict.reason"));
            ck_assert_str_eq(at_str(treat, "output"), "Booked R42.");
            ck_assert(!json_is_true(json_object_get(ctl, "passed")));
            if (modes[m].control_reason != NULL)
                ck_assert_msg(strstr(at_str(ctl, "verdict.reason"), modes[m].control_reason) !=
                                  NULL,
                              "%s: %s", modes[m].mode, at_str(ctl, "verdict.reason"));
            /* the calls as the transcript keeps them, answered by the mocks */
            json_t *conv = xt_at(treat, "transcript.conversation");
            ck_assert_uint_eq(json_array_size(conv), 4);
            ck_assert_str_eq(at_str(conv, "3.function_calls.0.name"), "search");
            ck_assert_str_eq(at_str(conv, "3.function_calls.0.result.rooms.0"), "R42");
            ck_assert_str_eq(at_str(conv, "3.function_calls.1.name"), "book");
            ck_assert_str_eq(at_str(conv, "3.function_calls.1.result.status"), "confirmed");
            ck_assert_int_eq(
                json_integer_value(xt_at(treat, "benchmark.function_calls")), 2);
            ck_assert_int_eq(
                json_integer_value(xt_at(treat, "benchmark.function_call_errors")), 0);
        }
        /* Rome has no answer for lookup: the model is told so, and it counts as an error. */
        json_t *rome = at_run_at(runs, "rome", 0);
        ck_assert_str_eq(at_str(rome, "output"), "I could not look R42 up.");
        ck_assert_int_eq(json_integer_value(xt_at(rome, "benchmark.function_call_errors")), 1);
        ck_assert_str_eq(at_str(rome, "transcript.conversation.3.function_calls.1.error"),
                         "no mocked result for lookup");
        ck_assert_str_eq(at_str(at_run_at(runs, "oslo", 0), "output"), "R42 is free.");
        json_decref(runs);
        /* Nothing but the model was called: 3 generations a run, no tool server call. */
        json_t *stats = evd_t_stub_stats(&at_stub);
        ck_assert_int_eq(json_integer_value(json_object_get(stats, "requests")), 12);
        json_decref(stats);
        ck_assert_int_eq(hs_tools_calls("/echo"), 0);
        json_decref(doc);
        free(id);
        free(body);
    }
}
END_TEST

/* Arguments that break a mocked tool's parameters are not answered: the model is told the
 * validation message, naming the instance path, and the call is a function-call error. */
START_TEST(invalid_arguments_are_told_to_the_model)
{
    ck_assert_int_eq(
        evd_t_stub_script(
            &at_stub, "{\"rules\":["
                      "{\"when\":{\"has_tool_result\":true},\"reply\":{\"text\":\"I could not "
                      "book.\"}},"
                      "{\"when\":{\"has_tool_result\":false},\"reply\":" CALL(
                          "book", "{\"room\":42}") "}]}"),
        200);
    char *id = at_start_experiment(
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
        "\"openai\"},\"control\":{\"prompt\":\"Book it.\"},\"treatments\":[{\"prompt\":"
        "\"Book it now.\"}],\"tools\":[{\"name\":\"book\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"room\":{\"type\":\"string\"}},\"required\":[\"room\"]}}],"
        "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{\"expected\":"
        "\"x\"}},\"repeats\":1,\"cases\":[{\"id\":\"r\",\"tool_results\":{\"book\":"
        "{\"status\":\"confirmed\"}}}]}");
    json_t *doc = at_wait_done(id, 60000);
    json_decref(doc);
    json_t *runs = at_runs_of(id);
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        ck_assert_str_eq(at_str(run, "output"), "I could not book.");
        ck_assert_int_eq(json_integer_value(xt_at(run, "benchmark.function_calls")), 1);
        ck_assert_int_eq(json_integer_value(xt_at(run, "benchmark.function_call_errors")), 1);
        const char *error = at_str(run, "transcript.function_calls.0.error");
        ck_assert_msg(strstr(error, "payload of book does not match its request_schema") != NULL &&
                          strstr(error, "\"/room\"") != NULL,
                      "%s", error);
        ck_assert_ptr_null(xt_at(run, "transcript.function_calls.0.result"));
    }
    json_decref(runs);
    /* What the model was sent back: the message, not the mock's answer. */
    json_t *log = evd_t_stub_requests(&at_stub, 0);
    int told = 0;
    json_array_foreach(json_object_get(log, "requests"), i, run)
    {
        char *text = json_dumps(json_object_get(run, "body"), JSON_COMPACT);
        told += strstr(text, "does not match its request_schema") != NULL &&
                strstr(text, "confirmed") == NULL;
        free(text);
    }
    ck_assert_int_eq(told, 2);
    json_decref(log);
    ck_assert_int_eq(hs_tools_calls("/echo"), 0);
    free(id);
}
END_TEST

/* A mocked tool may not be named like a registered one; a case's tool_results only name
 * declared tools. Nothing is written. */
START_TEST(mocked_tool_refusals_name_the_field)
{
    at_put_echo_tool("lookup");
    long status = 0;
    char *body = booking_body("strict");
    json_t *r = at_call("POST", "/v1/experiments", body, &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(at_str(r, "detail"), "tools[2]: lookup is also a registered tool");
    json_decref(r);
    free(body);
    r = at_call("POST", "/v1/experiments",
             "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
             "\"openai\"},\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"prompt\":\"b\"}],"
             "\"tools\":[{\"name\":\"search\",\"parameters\":{\"type\":\"object\"}}],"
             "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{"
             "\"expected\":\"x\"}},\"cases\":[{\"id\":\"q3\",\"tool_results\":{\"book\":1}}]}",
             &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(at_str(r, "detail"), "case q3: tool_results.book names no declared tool");
    json_decref(r);
    r = at_call("POST", "/v1/experiments",
             "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
             "\"openai\"},\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"prompt\":\"b\"}],"
             "\"tools\":[{\"name\":\"search\",\"parameters\":{\"type\":7}}],"
             "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{"
             "\"expected\":\"x\"}},\"cases\":[{\"id\":\"q3\"}]}",
             &status);
    ck_assert_int_eq(status, 400);
    ck_assert_msg(strncmp(at_str(r, "detail"), "tools[0].parameters is not a valid JSON Schema",
                          46) == 0,
                  "%s", at_str(r, "detail"));
    json_decref(r);
    char *n = evd_t_sql(at_db_url, "SELECT count(*) FROM experiments");
    ck_assert_str_eq(n, "0");
    free(n);
    n = evd_t_sql(at_db_url, "SELECT count(*) FROM datasets");
    ck_assert_str_eq(n, "0");
    free(n);
}
END_TEST

/* ---- the worked example of docs/agents.md ---------------------------------------------- */

/*
 * docs/agents.md's booking agent, from its files as they are (docs/examples/booking): six
 * conversations, a describing control against a booking treatment, mocked search and book,
 * the strict trajectory. Every figure the document states is checked here.
 */
START_TEST(the_worked_example_of_the_docs_holds)
{
    char *script = at_source_file("docs/examples/booking/stub.json");
    ck_assert_int_eq(evd_t_stub_script(&at_stub, script), 200);
    char *cases = at_source_file("docs/examples/booking/cases.jsonl");
    char *ds = at_upload_jsonl("booking", cases);
    char *doc_body = at_source_file("docs/examples/booking/experiment.json");
    json_t *req = json_loads(doc_body, 0, NULL);
    ck_assert_ptr_nonnull(req);
    json_object_set_new(req, "dataset_id", json_string(ds));
    char *body = json_dumps(req, JSON_COMPACT);
    char *id = at_start_experiment(body);
    json_t *doc = at_wait_done(id, 60000);
    ck_assert_str_eq(at_str(doc, "status"), "completed");
    /* the arms: the control never books, the treatment books but in Bergen */
    ck_assert(json_number_value(xt_at(doc, "arms.0.pass_rate")) == 0.0);
    ck_assert(fabs(json_number_value(xt_at(doc, "arms.1.pass_rate")) - 5.0 / 6.0) < 1e-9);
    ck_assert(json_number_value(xt_at(doc, "arms.0.medians.function_calls")) == 1.0);
    ck_assert(json_number_value(xt_at(doc, "arms.1.medians.function_calls")) == 2.0);
    json_t *c = xt_at(doc, "comparisons.0.pass_rate");
    ck_assert_int_eq(json_integer_value(xt_at(doc, "comparisons.0.paired_cases")), 6);
    ck_assert(fabs(json_number_value(json_object_get(c, "delta")) - 0.8333333333333334) < 1e-9);
    ck_assert(fabs(json_number_value(json_object_get(c, "se")) - 0.16666666666666669) < 1e-9);
    ck_assert(json_number_value(json_object_get(c, "df")) == 5);
    /* t(0.975, 5) = 2.5705818366147395 (SciPy) */
    ck_assert(fabs(json_number_value(json_object_get(c, "ci_low")) - 0.40490302723087673) < 1e-6);
    ck_assert(fabs(json_number_value(json_object_get(c, "ci_high")) - 1.26176363943579) < 1e-6);
    ck_assert(fabs(json_number_value(json_object_get(c, "t_p_value")) - 0.0041047159800533225) <
              1e-6);
    ck_assert_int_eq(json_integer_value(xt_at(c, "sign_test.wins")), 5);
    ck_assert_int_eq(json_integer_value(xt_at(c, "sign_test.losses")), 0);
    ck_assert(fabs(json_number_value(xt_at(c, "sign_test.p_value")) - 0.0625) < 1e-9);
    ck_assert_str_eq(at_str(doc, "comparisons.0.verdict"), "better");
    /* the reasons the document quotes */
    json_t *runs = at_runs_of(id);
    ck_assert_str_eq(at_str(at_run_at(runs, "oslo", 0), "verdict.reason"),
                     "call 2: expected book, got no call");
    ck_assert_str_eq(at_str(at_run_at(runs, "bergen", 1), "verdict.reason"),
                     "call 2: expected book, got no call");
    ck_assert_str_eq(at_str(at_run_at(runs, "bergen", 1), "output"),
                     "Sorry, nothing is free that night.");
    ck_assert_str_eq(at_str(at_run_at(runs, "oslo", 1), "output"), "Room R12 is booked for you.");
    ck_assert_str_eq(at_str(at_run_at(runs, "oslo", 1), "verdict.reason"),
                     "2 calls matched the expected calls in order");
    json_t *conv = xt_at(at_run_at(runs, "oslo", 1), "transcript.conversation");
    ck_assert_uint_eq(json_array_size(conv), 4);
    ck_assert_str_eq(at_str(conv, "0.content"), "Hello! I'd like a room in Oslo.");
    ck_assert_str_eq(at_str(conv, "2.content"), "Friday, please.");
    json_decref(runs);
    json_decref(doc);
    json_decref(req);
    free(id);
    free(body);
    free(doc_body);
    free(ds);
    free(cases);
    free(script);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("experiment_agents");
    TCase *tc = tcase_create("agents");
    tcase_add_checked_fixture(tc, at_setup, at_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, the_conversation_goes_before_the_prompt_on_every_wire);
    tcase_add_test(tc, an_empty_prompt_sends_the_conversation_as_it_is);
    tcase_add_test(tc, an_empty_prompt_needs_a_conversation_ending_with_the_user);
    tcase_add_test(tc, mocked_tools_answer_and_the_trajectory_decides);
    tcase_add_test(tc, mocked_tool_refusals_name_the_field);
    tcase_add_test(tc, invalid_arguments_are_told_to_the_model);
    tcase_add_test(tc, the_worked_example_of_the_docs_holds);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
