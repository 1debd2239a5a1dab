/*
 * `evald-cli experiment run` over the agent members of an experiment file
 * (../shared/spec/agent-cases.md): the real evald-cli against the real evald and evald-stub
 * over loopback, a throwaway PostgreSQL database per test (the fixture of
 * tests/support/cli_experiment_fixtures.c, whose stub script each test replaces).
 *
 * A YAML file written as people write YAML (conversation messages as lists of mappings, a
 * tool's JSON Schema as nested mappings, tool results with a `when` list, the trajectory's
 * expected calls as a list, a simulated user) runs to its verdict, and the CLI's exit code
 * and table say what GET /v1/experiments/{id} says; a model-dimension file does the same;
 * and a refusal about a member inside these blocks is printed at the line of that member.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cli_experiment_fixtures.h"
#include "tests/support/experiments_fixtures.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

/* clang-format off */
#define AGENT_USAGE "\"usage\":{\"input_tokens\":20,\"output_tokens\":5}"
#define CALL(name, args) "{\"tool_calls\":[{\"name\":\"" name "\",\"arguments\":" args "}]}"
/*
 * The simulated user (its instructions name a traveller) says it is done at once: one
 * simulator call a run, of 7 + 3 tokens. "You book" searches, then books; "You check"
 * searches, then looks the room up (as BOOKING of test_experiment_agents.c); each next step
 * comes once the latest tool result says so. Every agent call is 20 + 5 tokens.
 */
static const char AGENT_SCRIPT[] =
    "{\"rules\":["
    "{\"when\":{\"system_contains\":\"traveller\"},\"reply\":{\"text\":\"Thanks! [[DONE]]\"},"
    "\"usage\":{\"input_tokens\":7,\"output_tokens\":3}},"
    "{\"when\":{\"system_contains\":\"You book\",\"tool_result_contains\":\"confirmed\"},"
    "\"reply\":{\"text\":\"Booked R42.\"}," AGENT_USAGE "},"
    "{\"when\":{\"system_contains\":\"You book\",\"tool_result_contains\":\"R42\"},"
    "\"reply\":" CALL("book", "{\"room\":\"R42\"}") "," AGENT_USAGE "},"
    "{\"when\":{\"system_contains\":\"You book\"},"
    "\"reply\":" CALL("search", "{\"city\":\"Oslo\"}") "," AGENT_USAGE "},"
    "{\"when\":{\"system_contains\":\"You check\",\"tool_result_contains\":\"lookup\"},"
    "\"reply\":{\"text\":\"I could not look R42 up.\"}," AGENT_USAGE "},"
    "{\"when\":{\"system_contains\":\"You check\",\"tool_result_contains\":\"free\"},"
    "\"reply\":{\"text\":\"R42 is free.\"}," AGENT_USAGE "},"
    "{\"when\":{\"system_contains\":\"You check\",\"tool_result_contains\":\"R42\"},"
    "\"reply\":" CALL("lookup", "{\"room\":\"R42\"}") "," AGENT_USAGE "},"
    "{\"when\":{\"system_contains\":\"You check\"},"
    "\"reply\":" CALL("search", "{\"city\":\"Oslo\"}") "," AGENT_USAGE "}"
    "]}";

/* gpt-4.1-mini ($0.40 / $1.60 a million tokens in harness/prices.json) answers "no" with
 * 10 + 2 tokens; gpt-4.1-nano ($0.10 / $0.40) answers "yes" with 10 + 4. */
static const char MODEL_SCRIPT[] =
    "{\"rules\":["
    "{\"when\":{\"model\":\"gpt-4.1-mini\"},\"reply\":{\"text\":\"no\"},"
    "\"usage\":{\"input_tokens\":10,\"output_tokens\":2}},"
    "{\"when\":{\"model\":\"gpt-4.1-nano\"},\"reply\":{\"text\":\"yes\"},"
    "\"usage\":{\"input_tokens\":10,\"output_tokens\":4}}"
    "]}";
#define MINI_RUN_USD (10 * 0.4e-6 + 2 * 1.6e-6)
#define NANO_RUN_USD (10 * 0.1e-6 + 4 * 0.4e-6)

/*
 * The agent experiment: the control's and the treatment's label and system prompt are the
 * %s. Oslo mocks every tool (search by a `when` list whose first item does not match);
 * Rome has no answer for lookup.
 */
static const char AGENT_YAML[] =
    "name: booking agent\n"
    "dimension: system_prompt\n"
    "model: {model: stub-model, provider: openai}\n"
    "control:\n"
    "  label: %s\n"
    "  prompt: &ask Yes, please.\n"
    "  system_prompt: %s\n"
    "treatments:\n"
    "  - label: %s\n"
    "    prompt: *ask\n"
    "    system_prompt: %s\n"
    "tools:\n"
    "  - name: search\n"
    "    description: Rooms of a city\n"
    "    parameters:\n"
    "      type: object\n"
    "      properties:\n"
    "        city: {type: string}\n"
    "      required: [city]\n"
    "  - name: book\n"
    "    description: Books a room\n"
    "    parameters:\n"
    "      type: object\n"
    "      properties:\n"
    "        room:\n"
    "          type: string\n"
    "  - name: lookup\n"
    "    parameters: {type: object}\n"
    "simulator:\n"
    "  model: {model: stub-user, provider: openai}\n"
    "  instructions: \"You are a traveller named {{name}}.\"\n"
    "  max_turns: 3\n"
    "  stop: \"[[DONE]]\"\n"
    "evaluator:\n"
    "  function_id: eval::assert::trajectory\n"
    "  arguments:\n"
    "    expected:\n"
    "      - name: search\n"
    "        arguments: {city: Oslo}\n"
    "      - name: book\n"
    "        arguments:\n"
    "          room: R42\n"
    "    mode: strict\n"
    "    match_arguments: subset\n"
    "repeats: 2\n"
    "concurrency: 4\n"
    "cases:\n"
    "  - id: oslo\n"
    "    vars: {name: Ana}\n"
    "    messages:\n"
    "      - role: user\n"
    "        content: A room in Oslo?\n"
    "      - role: assistant\n"
    "        content: Shall I look?\n"
    "    tool_results:\n"
    "      search:\n"
    "        - when: {city: Rome}\n"
    "          result: {rooms: []}\n"
    "        - when:\n"
    "            city: Oslo\n"
    "          result:\n"
    "            rooms: [R42]\n"
    "      book: {status: confirmed}\n"
    "      lookup:\n"
    "        - {free: true}\n"
    "        - {free: false}\n"
    "  - id: rome\n"
    "    vars: {name: Bo}\n"
    "    messages:\n"
    "      - {role: user, content: A room in Rome?}\n"
    "      - role: assistant\n"
    "        content: Which night?\n"
    "    tool_results:\n"
    "      search: {rooms: [R42]}\n"
    "      book: {status: confirmed}\n";

static const char MODEL_YAML[] =
    "name: models\n"
    "dimension: model\n"
    "prompt: \"{{question}}\"\n"
    "system_prompt: Answer yes or no.\n"
    "control:\n"
    "  label: mini\n"
    "  model: {model: gpt-4.1-mini, provider: openai}\n"
    "treatments:\n"
    "  - label: nano\n"
    "    model:\n"
    "      model: gpt-4.1-nano\n"
    "      provider: openai\n"
    "      options: {temperature: 0.2, max_output_tokens: 32}\n"
    "evaluator:\n"
    "  function_id: eval::assert::exact\n"
    "  arguments: {expected: \"yes\"}\n"
    "repeats: 1\n"
    "concurrency: 3\n"
    "cases:\n"
    "  - {id: q1, vars: {question: Is it one?}}\n"
    "  - {id: q2, vars: {question: Is it two?}}\n"
    "  - id: q3\n"
    "    vars:\n"
    "      question: Is it three?\n";
/* clang-format on */

static const char *str_at(json_t *v, const char *dotted)
{
    const char *s = json_string_value(xt_at(v, dotted));
    return s != NULL ? s : "(none)";
}

/* text with its one occurrence of `from` replaced by `to` (malloc'd). */
static char *replace_once(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "no %s in the file", from);
    ck_assert_msg(strstr(at + 1, from) == NULL, "%s twice in the file", from);
    size_t head = (size_t)(at - text), nto = strlen(to), tail = strlen(at + strlen(from));
    char *out = malloc(head + nto + tail + 1);
    ck_assert_ptr_nonnull(out);
    memcpy(out, text, head);
    memcpy(out + head, to, nto);
    memcpy(out + head + nto, at + strlen(from), tail + 1);
    return out;
}

/* The 1-based line of text that holds needle (which must be on one line, once). */
static int line_of(const char *text, const char *needle)
{
    const char *at = strstr(text, needle);
    ck_assert_msg(at != NULL, "no %s in the file", needle);
    size_t offset = (size_t)(at - text);
    ck_assert_msg(strstr(text + offset + 1, needle) == NULL, "%s twice in the file", needle);
    int line = 1;
    for (size_t i = 0; i < offset; i++)
        line += text[i] == '\n';
    return line;
}

static char *agent_yaml(const char *control, const char *control_system, const char *treatment,
                        const char *treatment_system)
{
    char *text = NULL;
    ck_assert_int_gt(
        asprintf(&text, AGENT_YAML, control, control_system, treatment, treatment_system), 0);
    return text;
}

/* The runs of an experiment (new reference). */
static json_t *runs_of(const char *id)
{
    char path[160];
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=100", id);
    json_t *page = ct_get(path);
    json_t *runs = json_incref(json_object_get(page, "runs"));
    json_decref(page);
    return runs;
}

/*
 * Runs `evald-cli experiment run FILE --json …` to its end and checks that what it said is
 * what evald says: the --json file is GET /v1/experiments/{id}, the exit code is the one
 * that document's verdicts earn (1 when a treatment is worse, else 0), the progress line
 * counts its passed runs and the table row of its one treatment shows its delta and
 * verdict. Returns the document (new reference); *id gets the experiment's id.
 */
static json_t *run_and_compare(const char *file, const char *doc_name, char id[64], struct ran *r)
{
    char *doc = ct_in_dir(doc_name);
    ct_run(CLI("experiment", "run", (char *)file, "--json", doc), r);
    ct_assert_plain(r);
    snprintf(id, 64, "%s", ct_started_id(r));
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    json_t *served = ct_get(path);
    ck_assert_str_eq(str_at(served, "status"), "completed");
    json_t *written = evd_test_load_json(doc);
    ck_assert_ptr_nonnull(written);
    ck_assert_msg(json_equal(written, served), "the --json file is not the experiment document");
    json_decref(written);
    free(doc);

    ck_assert_uint_eq(json_array_size(json_object_get(served, "comparisons")), 1);
    const char *verdict = str_at(served, "comparisons.0.verdict");
    CHECK_EXIT(*r, strcmp(verdict, "worse") == 0 ? 1 : 0);

    /* The last progress line: every run done, the passed ones as the runs say. */
    json_t *runs = runs_of(id);
    size_t i, passed = 0;
    json_t *run;
    json_array_foreach(runs, i, run) passed += json_is_true(json_object_get(run, "passed"));
    char want[160];
    snprintf(want, sizeof(want), "runs %zu/%zu, passed %zu (%.1f%%), ", json_array_size(runs),
             json_array_size(runs), passed, 100.0 * (double)passed / (double)json_array_size(runs));
    ck_assert_msg(strstr(r->out, want) != NULL, "no %s in:\n%s", want, r->out);
    json_decref(runs);

    /* The table row: "<treatment> vs <control>", the delta, ..., the verdict. */
    char name[64], delta[32];
    snprintf(name, sizeof(name), "%s vs %s", str_at(served, "comparisons.0.label"),
             str_at(served, "arms.0.label"));
    snprintf(delta, sizeof(delta), "%+.3f",
             json_number_value(xt_at(served, "comparisons.0.pass_rate.delta")));
    snprintf(want, sizeof(want), "\n%-20s %-9s ", name, delta);
    const char *row = strstr(r->out, want);
    ck_assert_msg(row != NULL, "no row %s in:\n%s", want, r->out);
    const char *eol = strchr(row + 1, '\n');
    char verdict_cell[48];
    snprintf(verdict_cell, sizeof(verdict_cell), " %s ", verdict);
    char *line = strndup(row + 1, eol != NULL ? (size_t)(eol - row - 1) : strlen(row + 1));
    ck_assert_msg(strstr(line, verdict_cell) != NULL, "%s is not %s", line, verdict);
    free(line);
    return served;
}

/* The run of arm `arm` on case `case_id`, repeat `repeat` (borrowed). */
static json_t *run_at(json_t *runs, const char *case_id, int arm, int repeat)
{
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r)
    {
        if (strcmp(str_at(r, "case_id"), case_id) == 0 &&
            json_integer_value(json_object_get(r, "arm")) == arm &&
            json_integer_value(json_object_get(r, "repeat")) == repeat)
            return r;
    }
    ck_abort_msg("no run of arm %d on %s, repeat %d", arm, case_id, repeat);
    return NULL;
}

/*
 * The agent file runs to its verdict: the treatment ("You book") calls search then book,
 * answered by the case's mocks, and passes the strict trajectory; the control ("You check")
 * calls search then lookup and fails it; the simulated user ends every conversation after
 * the first answer. Better: exit 0. The same file with the arms swapped: worse, exit 1.
 */
START_TEST(an_agent_file_in_yaml_runs_to_the_verdict_evald_gives)
{
    ck_assert_int_eq(evd_t_stub_script(&ct_stub, AGENT_SCRIPT), 200);
    char *text = agent_yaml("check", "You check rooms.", "book", "You book rooms.");
    char *file = ct_file_in_dir("agent.yaml", text);
    char id[64];
    struct ran r;
    json_t *doc = run_and_compare(file, "agent.json", id, &r);
    ck_assert_str_eq(str_at(doc, "comparisons.0.verdict"), "better");
    ck_assert_int_eq(r.code, 0);
    ck_assert(json_number_value(xt_at(doc, "arms.1.pass_rate")) == 1.0);
    ck_assert(json_number_value(xt_at(doc, "arms.0.pass_rate")) == 0.0);
    /* The YAML reached evald as the JSON the spec describes. */
    json_t *req = xt_at(doc, "request");
    ck_assert_ptr_nonnull(req);
    ck_assert_str_eq(str_at(req, "tools.0.parameters.properties.city.type"), "string");
    ck_assert_str_eq(str_at(req, "tools.0.parameters.required.0"), "city");
    ck_assert_str_eq(str_at(req, "tools.1.parameters.properties.room.type"), "string");
    ck_assert(json_is_integer(xt_at(req, "simulator.max_turns")));
    ck_assert_int_eq(json_integer_value(xt_at(req, "simulator.max_turns")), 3);
    ck_assert_str_eq(str_at(req, "simulator.stop"), "[[DONE]]");
    ck_assert_uint_eq(json_array_size(xt_at(req, "evaluator.arguments.expected")), 2);
    ck_assert_str_eq(str_at(req, "evaluator.arguments.expected.1.arguments.room"), "R42");

    json_t *runs = runs_of(id);
    ck_assert_uint_eq(json_array_size(runs), 8); /* 2 cases x 2 arms x 2 repeats */
    for (int c = 0; c < 2; c++) {
        const char *case_id = c == 0 ? "oslo" : "rome";
        for (int rep = 1; rep <= 2; rep++) {
            json_t *treat = run_at(runs, case_id, 1, rep), *ctl = run_at(runs, case_id, 0, rep);
            ck_assert_msg(json_is_true(json_object_get(treat, "passed")), "%s: %s", case_id,
                          str_at(treat, "verdict.reason"));
            ck_assert(json_is_false(json_object_get(ctl, "passed")));
            ck_assert_msg(strstr(str_at(ctl, "verdict.reason"), "call 2: expected book") != NULL,
                          "%s", str_at(ctl, "verdict.reason"));
            ck_assert_str_eq(str_at(treat, "output"), "Booked R42.");
            /* The case's conversation, the prompt, then the answer with its calls, each
             * answered by its mock (Oslo's search by the `when` item of its city). */
            json_t *conv = xt_at(treat, "transcript.conversation");
            ck_assert_uint_eq(json_array_size(conv), 4);
            ck_assert_str_eq(str_at(conv, "0.content"),
                             c == 0 ? "A room in Oslo?" : "A room in Rome?");
            ck_assert_str_eq(str_at(conv, "1.role"), "assistant");
            ck_assert_str_eq(str_at(conv, "2.content"), "Yes, please.");
            ck_assert_str_eq(str_at(conv, "3.function_calls.0.name"), "search");
            ck_assert_str_eq(str_at(conv, "3.function_calls.0.result.rooms.0"), "R42");
            ck_assert_str_eq(str_at(conv, "3.function_calls.1.name"), "book");
            ck_assert_str_eq(str_at(conv, "3.function_calls.1.result.status"), "confirmed");
            /* The simulated user: one call, which stopped the conversation; its tokens
             * apart. */
            for (int k = 0; k < 2; k++) {
                json_t *b = xt_at(k == 0 ? treat : ctl, "benchmark");
                ck_assert_int_eq(json_integer_value(json_object_get(b, "turns")), 1);
                ck_assert_int_eq(json_integer_value(json_object_get(b, "simulator_calls")), 1);
                ck_assert_int_eq(json_integer_value(json_object_get(b, "simulator_total_tokens")),
                                 10);
                /* three agent calls of 20 + 5 tokens, the simulator's not among them */
                ck_assert_int_eq(json_integer_value(json_object_get(b, "input_tokens")), 60);
                ck_assert_int_eq(json_integer_value(json_object_get(b, "output_tokens")), 15);
            }
        }
    }
    ck_assert_str_eq(str_at(run_at(runs, "oslo", 0, 1), "output"), "R42 is free.");
    json_t *rome = run_at(runs, "rome", 0, 1);
    ck_assert_str_eq(str_at(rome, "output"), "I could not look R42 up.");
    ck_assert_str_eq(str_at(rome, "transcript.conversation.3.function_calls.1.error"),
                     "no mocked result for lookup");
    json_decref(runs);
    /* The simulator was asked once a run, as stub-user, with its instructions rendered. */
    json_t *log = evd_t_stub_requests(&ct_stub, 0);
    size_t i, ana = 0, bo = 0;
    json_t *q;
    json_array_foreach(json_object_get(log, "requests"), i, q)
    {
        const json_t *b = json_object_get(q, "body");
        json_t *body = json_is_string(b) ? json_loads(json_string_value(b), 0, NULL)
                                         : json_incref((json_t *)b);
        char *dump = json_dumps(body, JSON_COMPACT);
        if (strstr(dump, "traveller") != NULL) {
            ck_assert_str_eq(str_at(body, "model"), "stub-user");
            ana += strstr(dump, "You are a traveller named Ana.") != NULL;
            bo += strstr(dump, "You are a traveller named Bo.") != NULL;
        }
        free(dump);
        json_decref(body);
    }
    ck_assert_int_eq(ana, 4);
    ck_assert_int_eq(bo, 4);
    json_decref(log);
    json_decref(doc);

    /* Swapped: the booking agent is the control, so the treatment is worse: exit 1. */
    char *swapped_text = agent_yaml("book", "You book rooms.", "check", "You check rooms.");
    char *swapped = ct_file_in_dir("swapped.yaml", swapped_text);
    doc = run_and_compare(swapped, "swapped.json", id, &r);
    ck_assert_str_eq(str_at(doc, "comparisons.0.verdict"), "worse");
    ck_assert_int_eq(r.code, 1);
    json_decref(doc);
    free(swapped);
    free(swapped_text);
    free(file);
    free(text);
}
END_TEST

/*
 * The model dimension from YAML: the shared prompt and system prompt, a model an arm with
 * the treatment's options; each arm reaches its own model and costs its own price. nano
 * answers every case right, mini none: better, exit 0 (also with --require better).
 */
START_TEST(a_model_file_in_yaml_runs_to_the_verdict_evald_gives)
{
    ck_assert_int_eq(evd_t_stub_script(&ct_stub, MODEL_SCRIPT), 200);
    char *file = ct_file_in_dir("models.yaml", MODEL_YAML);
    char id[64];
    struct ran r;
    json_t *doc = run_and_compare(file, "models.json", id, &r);
    ck_assert_str_eq(str_at(doc, "comparisons.0.verdict"), "better");
    ck_assert_str_eq(str_at(doc, "request.dimension"), "model");
    ck_assert_str_eq(str_at(doc, "request.system_prompt"), "Answer yes or no.");
    ck_assert(json_is_real(xt_at(doc, "request.treatments.0.model.options.temperature")));
    ck_assert(json_is_integer(xt_at(doc, "request.treatments.0.model.options.max_output_tokens")));
    double mini = json_number_value(xt_at(doc, "arms.0.medians.cost_usd"));
    double nano = json_number_value(xt_at(doc, "arms.1.medians.cost_usd"));
    ck_assert_msg(mini > MINI_RUN_USD * 0.999 && mini < MINI_RUN_USD * 1.001, "%g", mini);
    ck_assert_msg(nano > NANO_RUN_USD * 0.999 && nano < NANO_RUN_USD * 1.001, "%g", nano);
    json_decref(doc);
    /* Three calls of each model, with the shared texts; the treatment's with its options. */
    json_t *log = evd_t_stub_requests(&ct_stub, 0);
    size_t i;
    int n_mini = 0, n_nano = 0;
    json_t *q;
    json_array_foreach(json_object_get(log, "requests"), i, q)
    {
        const json_t *b = json_object_get(q, "body");
        json_t *body = json_is_string(b) ? json_loads(json_string_value(b), 0, NULL)
                                         : json_incref((json_t *)b);
        char *dump = json_dumps(body, JSON_COMPACT);
        ck_assert_msg(strstr(dump, "Answer yes or no.") && strstr(dump, "Is it "), "%s", dump);
        if (strcmp(str_at(body, "model"), "gpt-4.1-mini") == 0) {
            n_mini++;
            ck_assert_ptr_null(json_object_get(body, "temperature"));
        } else {
            ck_assert_str_eq(str_at(body, "model"), "gpt-4.1-nano");
            n_nano++;
            ck_assert(json_number_value(json_object_get(body, "temperature")) == 0.2);
        }
        free(dump);
        json_decref(body);
    }
    ck_assert_int_eq(n_mini, 3);
    ck_assert_int_eq(n_nano, 3);
    json_decref(log);
    ct_run(CLI("experiment", "run", file, "--require", "better"), &r);
    CHECK_EXIT(r, 0);
    free(file);
}
END_TEST

/*
 * A mistake inside the agent members: evald refuses the start, and the CLI prints its
 * detail at the line of the member it names (exit 2), also as a GitHub annotation; nothing
 * is started.
 */
START_TEST(a_refusal_inside_the_agent_members_names_its_line)
{
    char *agent = agent_yaml("check", "You check rooms.", "book", "You book rooms.");
    static const struct {
        const char *from, *to; /* the mistake, made in the agent file (or the model file) */
        bool model;
        const char *at;     /* the text of the line the refusal is about */
        const char *detail; /* evald's detail (a prefix when it ends in "…") */
    } cases[] = {
        {"  max_turns: 3\n", "  max_turns: 50\n", false, "max_turns: 50",
         "simulator.max_turns must be an integer between 1 and 20"},
        /* the role of Rome's second message, on the line after the entry's first */
        {"      - role: assistant\n        content: Which night?\n",
         "      - content: Which night?\n        role: system\n", false, "role: system",
         "cases[1]: messages[1].role must be user or assistant"},
        {"      search: {rooms: [R42]}\n", "      serch: {rooms: [R42]}\n", false,
         "serch:", "case rome: tool_results.serch names no declared tool"},
        /* no `result` key: the line of the `when` item that lacks it */
        {"          result: {rooms: []}\n", "          answer: {rooms: []}\n", false,
         "- when: {city: Rome}", "case oslo: tool_results.search[0].result is required"},
        /* both prompts empty (the treatment's is an alias of the control's) */
        {"&ask Yes, please.", "&ask \"\"", false,
         "  - id: oslo\n    vars: {name: Ana}\n    messages:",
         "case oslo: messages must end with a user message when the prompt is empty"},
        {"    parameters: {type: object}\n", "    parameters: {type: 7}\n", false,
         "parameters: {type: 7}", "tools[2].parameters is not a valid JSON Schema…"},
        {"      model: gpt-4.1-nano\n      provider: openai\n"
         "      options: {temperature: 0.2, max_output_tokens: 32}\n",
         "      model: gpt-4.1-mini\n      provider: openai\n", true, "  - label: nano",
         "treatments[0]: differs from the control in nothing"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char *text = replace_once(cases[k].model ? MODEL_YAML : agent, cases[k].from, cases[k].to);
        int line = line_of(text, cases[k].at);
        /* a needle of several lines names the last of them */
        for (const char *p = cases[k].at; (p = strchr(p, '\n')) != NULL; p++)
            line++;
        char name[32];
        snprintf(name, sizeof(name), "wrong%zu.yaml", k);
        char *file = ct_file_in_dir(name, text);
        struct ran r;
        ct_run(CLI("experiment", "run", file), &r);
        CHECK_EXIT(r, 2);
        char want[1024];
        size_t dn = strlen(cases[k].detail);
        bool prefix = dn > 3 && strcmp(cases[k].detail + dn - 3, "…") == 0;
        snprintf(want, sizeof(want), "evald-cli: %s:%d: %.*s%s", file, line,
                 (int)(prefix ? dn - 3 : dn), cases[k].detail, prefix ? "" : "\n");
        if (prefix)
            ck_assert_msg(strncmp(r.err, want, strlen(want)) == 0, "%s\nis not\n%s", r.err, want);
        else
            ck_assert_str_eq(r.err, want);
        ct_run(CLI("experiment", "run", file, "--format", "github"), &r);
        CHECK_EXIT(r, 2);
        snprintf(want, sizeof(want), "::error file=%s,line=%d,title=evald-cli::", file, line);
        ck_assert_msg(strncmp(r.out, want, strlen(want)) == 0, "%s\nis not\n%s", r.out, want);
        free(file);
        free(text);
    }
    char *n = evd_t_sql(ct_db_url, "SELECT count(*) FROM experiments");
    ck_assert_str_eq(n, "0");
    free(n);
    free(agent);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_agents");
    TCase *tc = tcase_create("cli_agents");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, ct_setup, ct_teardown);
    tcase_add_test(tc, an_agent_file_in_yaml_runs_to_the_verdict_evald_gives);
    tcase_add_test(tc, a_model_file_in_yaml_runs_to_the_verdict_evald_gives);
    tcase_add_test(tc, a_refusal_inside_the_agent_members_names_its_line);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
