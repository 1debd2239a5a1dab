/*
 * Agent cases end to end (../shared/spec/agent-cases.md; docs/agents.md): conversation
 * cases sent before the arm's prompt on each wire format, the empty prompt, the
 * transcript an HTTP evaluator reads and the conversation a run document keeps. Real
 * evald, evald-stub (three keyless providers of its three wire formats), a throwaway
 * PostgreSQL and the tool server of harness_support.h, all on loopback.
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/experiments_fixtures.h"
#include "tests/support/harness_support.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char db_url[1024];
static char db_name[64];
static char providers_path[64];
static struct evd_t_proc stub, evald;

static char env_file[128], env_openai[300];

/* evald on the test's database and the stub, with short leases (a killed process's runs
 * are taken over within seconds). */
static void start_evald(void)
{
    char *env[] = {env_file,
                   env_openai,
                   "OPENAI_API_KEY=stub-key",
                   "EVALD_SWEEP_INTERVAL_MS=300",
                   "EVALD_LEASE_MS=1500",
                   NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
}

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    ck_assert(hs_tools_start());
    snprintf(providers_path, sizeof(providers_path), "/tmp/evald-providers-XXXXXX");
    int fd = mkstemp(providers_path);
    ck_assert_int_ge(fd, 0);
    char doc[1024];
    int n = snprintf(doc, sizeof(doc),
                     "{\"providers\":["
                     "{\"name\":\"resp\",\"kind\":\"openai-responses\",\"base_url\":\"%s/v1\"},"
                     "{\"name\":\"msgs\",\"kind\":\"anthropic-messages\",\"base_url\":\"%s\"},"
                     "{\"name\":\"chat\",\"kind\":\"openai-chat\",\"base_url\":\"%s/v1\"}]}",
                     stub.base, stub.base, stub.base);
    ck_assert_int_eq(write(fd, doc, (size_t)n), n);
    close(fd);
    snprintf(env_file, sizeof(env_file), "EVALD_PROVIDERS_FILE=%s", providers_path);
    snprintf(env_openai, sizeof(env_openai), "OPENAI_BASE_URL=%s/v1", stub.base);
    start_evald();
}

static void teardown(void)
{
    evd_t_stop(&evald, SIGTERM, 10000);
    hs_tools_stop();
    evd_t_stop(&stub, SIGTERM, 5000);
    unlink(providers_path);
    evd_t_db_drop(db_name);
}

static json_t *call(const char *method, const char *path, const char *body, long *status)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    return evd_t_http_json(method, url, body, status);
}

static const char *str_at(json_t *v, const char *dotted)
{
    const char *s = json_string_value(xt_at(v, dotted));
    return s != NULL ? s : "(none)";
}

static char *start_experiment(const char *body)
{
    long status = 0;
    json_t *r = call("POST", "/v1/experiments", body, &status);
    if (status != 202)
        evd_t_dump_log(&evald);
    ck_assert_msg(status == 202, "start answered %ld: %s", status, str_at(r, "detail"));
    char *id = strdup(str_at(r, "experiment_id"));
    json_decref(r);
    return id;
}

static json_t *wait_done(const char *id, int timeout_ms)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    for (int waited = 0;; waited += 100) {
        long st = 0;
        json_t *doc = call("GET", path, NULL, &st);
        ck_assert_int_eq(st, 200);
        const char *s = str_at(doc, "status");
        if (strcmp(s, "completed") == 0 || strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0)
            return doc;
        json_decref(doc);
        if (waited > timeout_ms) {
            evd_t_dump_log(&evald);
            ck_abort_msg("experiment %s still %s", id, s);
        }
        usleep(100 * 1000);
    }
}

static json_t *runs_of(const char *id)
{
    char path[160];
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=100", id);
    long st = 0;
    json_t *page = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    json_t *runs = json_incref(json_object_get(page, "runs"));
    json_decref(page);
    return runs;
}

/* Uploads JSONL cases as dataset `name`; its id (malloc'd). */
static char *upload_jsonl(const char *name, const char *jsonl)
{
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/datasets?name=%s", evald.base, name);
    const char *headers[] = {"Content-Type: application/x-ndjson", NULL};
    struct evd_t_resp r;
    evd_t_http("POST", url, headers, jsonl, strlen(jsonl), &r);
    ck_assert_msg(r.status == 201, "upload answered %ld: %s", r.status, r.body);
    char *id = strdup(str_at(r.json, "dataset_id"));
    evd_t_resp_free(&r);
    return id;
}

/* The text of a wire message's content: a string, or its text parts joined. */
static void content_text(const json_t *content, char *out, size_t n)
{
    out[0] = '\0';
    if (json_is_string(content)) {
        snprintf(out, n, "%s", json_string_value(content));
        return;
    }
    size_t i, len = 0;
    const json_t *part;
    json_array_foreach(content, i, part)
    {
        const char *t = json_string_value(json_object_get(part, "text"));
        if (t != NULL && len < n)
            len += (size_t)snprintf(out + len, n - len, "%s", t);
    }
}

/*
 * The conversation a provider request carries, as "role: text" lines (system messages
 * and instructions left out): Responses `input`, Chat and Messages `messages`.
 */
static char *wire_conversation(const json_t *body)
{
    const json_t *items = json_object_get(body, "input");
    if (items == NULL)
        items = json_object_get(body, "messages");
    char *out = calloc(1, 8192);
    size_t len = 0, i;
    const json_t *m;
    json_array_foreach(items, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role == NULL || strcmp(role, "system") == 0 || strcmp(role, "developer") == 0)
            continue;
        char text[1024];
        content_text(json_object_get(m, "content"), text, sizeof(text));
        len += (size_t)snprintf(out + len, 8192 - len, "%s: %s\n", role, text);
    }
    return out;
}

/* A stub log entry's body (new reference). */
static json_t *request_body(const json_t *req)
{
    const json_t *b = json_object_get(req, "body");
    if (json_is_string(b))
        return json_loads(json_string_value(b), 0, NULL);
    return json_incref((json_t *)b);
}

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
    char *ds = upload_jsonl("talks", CONVERSATIONS);
    char *body = xt_printf(
        "{\"dimension\":\"model\",\"dataset_id\":\"%s\","
        "\"prompt\":\"Tonight, in {{city}}.\",\"system_prompt\":\"You book rooms.\","
        "\"control\":{\"label\":\"responses\",\"model\":{\"model\":\"m1\",\"provider\":\"resp\"}},"
        "\"treatments\":[{\"label\":\"chat\",\"model\":{\"model\":\"m2\",\"provider\":\"chat\"}},"
        "{\"label\":\"messages\",\"model\":{\"model\":\"m3\",\"provider\":\"msgs\"}}],"
        "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{\"expected\":"
        "\"yes\"}},\"repeats\":1,\"concurrency\":2}",
        ds);
    char *id = start_experiment(body);
    json_t *doc = wait_done(id, 60000);
    ck_assert_str_eq(str_at(doc, "status"), "completed");

    json_t *log = evd_t_stub_requests(&stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    int seen[3] = {0, 0, 0};
    static const char *const apis[] = {"responses", "chat", "messages"};
    size_t i;
    json_t *req;
    json_array_foreach(reqs, i, req)
    {
        json_t *b = request_body(req);
        char *conv = wire_conversation(b);
        const char *api = str_at(req, "api");
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
    json_t *runs = runs_of(id);
    ck_assert_uint_eq(json_array_size(runs), 6);
    json_array_foreach(runs, i, req)
    {
        json_t *conv = xt_at(req, "transcript.conversation");
        ck_assert_uint_eq(json_array_size(conv), 4);
        const bool oslo = strcmp(str_at(req, "case_id"), "oslo") == 0;
        ck_assert_str_eq(str_at(conv, "0.content"),
                         oslo ? "I need a room in Oslo." : "Any room in Rome?");
        ck_assert_str_eq(str_at(conv, "1.role"), "assistant");
        ck_assert_str_eq(str_at(conv, "2.content"), oslo ? "Tonight, in Oslo." : "Tonight, in Rome.");
        ck_assert_str_eq(str_at(conv, "3.role"), "assistant");
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
    char tool[512];
    snprintf(tool, sizeof(tool),
             "{\"description\":\"echo\",\"url\":\"%s/echo\",\"timeout_ms\":5000,"
             "\"request_schema\":{\"type\":\"object\"}}",
             hs_tools_base());
    long status = 0;
    json_decref(call("PUT", "/v1/tools/judge.echo", tool, &status));
    ck_assert_int_eq(status, 201);
    char *id = start_experiment(
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
        "\"control\":{\"label\":\"as-is\",\"prompt\":\"\"},"
        "\"treatments\":[{\"label\":\"nudged\",\"prompt\":\"Answer in one word.\"}],"
        "\"evaluator\":{\"function_id\":\"judge.echo\"},\"repeats\":1,\"concurrency\":1,"
        "\"cases\":[{\"id\":\"r42\",\"vars\":{\"night\":\"Friday\"}," ASKING "}]}");
    json_t *doc = wait_done(id, 60000);
    json_decref(doc);
    json_t *log = evd_t_stub_requests(&stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    ck_assert_uint_eq(json_array_size(reqs), 2);
    int bare = 0, nudged = 0;
    for (size_t i = 0; i < 2; i++) {
        json_t *b = request_body(json_array_get(reqs, i));
        char *conv = wire_conversation(b);
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
    json_t *rows = call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_str_eq(str_at(rows, "cases.0.messages.0.content"), "Book R42 for {{night}}.");
    ck_assert_str_eq(str_at(rows, "cases.0.messages.2.content"), "Yes.");
    json_decref(rows);
    free(path);
    /* The evaluator (the last run is the treatment's or the control's: both read their
     * whole conversation) got the case's id and its transcript. */
    json_t *input = hs_tools_last("/echo");
    ck_assert_ptr_nonnull(input);
    ck_assert_str_eq(str_at(input, "case_id"), "r42");
    json_t *t = xt_at(input, "transcript");
    size_t n = json_array_size(t);
    ck_assert_msg(n == 4 || n == 5, "transcript of %zu entries", n);
    ck_assert_str_eq(str_at(t, "0.content"), "Book R42 for Friday.");
    ck_assert_str_eq(str_at(t, "1.content"), "Shall I?");
    ck_assert_str_eq(str_at(t, "2.content"), "Yes.");
    if (n == 5)
        ck_assert_str_eq(str_at(t, "3.content"), "Answer in one word.");
    char last[16];
    snprintf(last, sizeof(last), "%zu.role", n - 1);
    ck_assert_str_eq(str_at(t, last), "assistant");
    json_decref(input);
    free(id);
}
END_TEST

/* A case that ends with the assistant cannot be sent with an empty prompt: refused, and
 * nothing is written. */
START_TEST(an_empty_prompt_needs_a_conversation_ending_with_the_user)
{
    char *ds = upload_jsonl("talks", CONVERSATIONS);
    char *body = xt_printf(
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
        "\"control\":{\"prompt\":\"\"},\"treatments\":[{\"prompt\":\"Go on.\"}],"
        "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{\"expected\":\"x\"}},"
        "\"dataset_id\":\"%s\"}",
        ds);
    long status = 0;
    json_t *r = call("POST", "/v1/experiments", body, &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(str_at(r, "detail"),
                     "case oslo: messages must end with a user message when the prompt is empty");
    json_decref(r);
    /* inline cases: the same, and no dataset is written either */
    r = call("POST", "/v1/experiments",
             "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
             "\"openai\"},\"control\":{\"prompt\":\"\"},\"treatments\":[{\"prompt\":\"Go on.\"}],"
             "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{\"expected\":"
             "\"x\"}},\"cases\":[{\"id\":\"q3\",\"vars\":{}}]}",
             &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(str_at(r, "detail"),
                     "case q3: messages must end with a user message when the prompt is empty");
    json_decref(r);
    /* nothing written: the one uploaded dataset, no experiment */
    char *n = evd_t_sql(db_url, "SELECT count(*) FROM datasets");
    ck_assert_str_eq(n, "1");
    free(n);
    n = evd_t_sql(db_url, "SELECT count(*) FROM experiments");
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

/* The run of arm `arm` on case `case_id` among runs (borrowed). */
static json_t *run_at(json_t *runs, const char *case_id, int arm)
{
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r)
    {
        if (strcmp(str_at(r, "case_id"), case_id) == 0 &&
            json_integer_value(json_object_get(r, "arm")) == arm)
            return r;
    }
    ck_abort_msg("no run of arm %d on %s", arm, case_id);
    return NULL;
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
    ck_assert_int_eq(evd_t_stub_script(&stub, BOOKING), 200);
    static const struct {
        const char *mode, *control_reason;
    } modes[] = {
        {"strict", "call 2: expected book"},
        {"unordered", NULL},
        {"subset", "call 2: unexpected lookup"},
        {"superset", "expected call 2: book"},
    };
    for (size_t m = 0; m < 4; m++) {
        ck_assert_int_eq(evd_t_stub_reset(&stub), 200);
        char *body = booking_body(modes[m].mode);
        char *id = start_experiment(body);
        json_t *doc = wait_done(id, 60000);
        ck_assert_str_eq(str_at(doc, "status"), "completed");
        json_t *runs = runs_of(id);
        ck_assert_uint_eq(json_array_size(runs), 4);
        for (int c = 0; c < 2; c++) {
            const char *case_id = c == 0 ? "oslo" : "rome";
            json_t *treat = run_at(runs, case_id, 1), *ctl = run_at(runs, case_id, 0);
            ck_assert_msg(json_is_true(json_object_get(treat, "passed")), "%s %s: %s",
                          modes[m].mode, case_id, str_at(treat, "verdict.reason"));
            ck_assert_str_eq(str_at(treat, "output"), "Booked R42.");
            ck_assert(!json_is_true(json_object_get(ctl, "passed")));
            if (modes[m].control_reason != NULL)
                ck_assert_msg(strstr(str_at(ctl, "verdict.reason"), modes[m].control_reason) !=
                                  NULL,
                              "%s: %s", modes[m].mode, str_at(ctl, "verdict.reason"));
            /* the calls as the transcript keeps them, answered by the mocks */
            json_t *conv = xt_at(treat, "transcript.conversation");
            ck_assert_uint_eq(json_array_size(conv), 4);
            ck_assert_str_eq(str_at(conv, "3.function_calls.0.name"), "search");
            ck_assert_str_eq(str_at(conv, "3.function_calls.0.result.rooms.0"), "R42");
            ck_assert_str_eq(str_at(conv, "3.function_calls.1.name"), "book");
            ck_assert_str_eq(str_at(conv, "3.function_calls.1.result.status"), "confirmed");
            ck_assert_int_eq(
                json_integer_value(xt_at(treat, "benchmark.function_calls")), 2);
            ck_assert_int_eq(
                json_integer_value(xt_at(treat, "benchmark.function_call_errors")), 0);
        }
        /* Rome has no answer for lookup: the model is told so, and it counts as an error. */
        json_t *rome = run_at(runs, "rome", 0);
        ck_assert_str_eq(str_at(rome, "output"), "I could not look R42 up.");
        ck_assert_int_eq(json_integer_value(xt_at(rome, "benchmark.function_call_errors")), 1);
        ck_assert_str_eq(str_at(rome, "transcript.conversation.3.function_calls.1.error"),
                         "no mocked result for lookup");
        ck_assert_str_eq(str_at(run_at(runs, "oslo", 0), "output"), "R42 is free.");
        json_decref(runs);
        /* Nothing but the model was called: 3 generations a run, no tool server call. */
        json_t *stats = evd_t_stub_stats(&stub);
        ck_assert_int_eq(json_integer_value(json_object_get(stats, "requests")), 12);
        json_decref(stats);
        ck_assert_int_eq(hs_tools_calls("/echo"), 0);
        json_decref(doc);
        free(id);
        free(body);
    }
}
END_TEST

/* A mocked tool may not be named like a registered one; a case's tool_results only name
 * declared tools. Nothing is written. */
START_TEST(mocked_tool_refusals_name_the_field)
{
    char tool[512];
    snprintf(tool, sizeof(tool),
             "{\"description\":\"echo\",\"url\":\"%s/echo\",\"timeout_ms\":5000,"
             "\"request_schema\":{\"type\":\"object\"}}",
             hs_tools_base());
    long status = 0;
    json_decref(call("PUT", "/v1/tools/lookup", tool, &status));
    ck_assert_int_eq(status, 201);
    char *body = booking_body("strict");
    json_t *r = call("POST", "/v1/experiments", body, &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(str_at(r, "detail"), "tools[2]: lookup is also a registered tool");
    json_decref(r);
    free(body);
    r = call("POST", "/v1/experiments",
             "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
             "\"openai\"},\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"prompt\":\"b\"}],"
             "\"tools\":[{\"name\":\"search\",\"parameters\":{\"type\":\"object\"}}],"
             "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{"
             "\"expected\":\"x\"}},\"cases\":[{\"id\":\"q3\",\"tool_results\":{\"book\":1}}]}",
             &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(str_at(r, "detail"), "case q3: tool_results.book names no declared tool");
    json_decref(r);
    r = call("POST", "/v1/experiments",
             "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
             "\"openai\"},\"control\":{\"prompt\":\"a\"},\"treatments\":[{\"prompt\":\"b\"}],"
             "\"tools\":[{\"name\":\"search\",\"parameters\":{\"type\":7}}],"
             "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{"
             "\"expected\":\"x\"}},\"cases\":[{\"id\":\"q3\"}]}",
             &status);
    ck_assert_int_eq(status, 400);
    ck_assert_msg(strncmp(str_at(r, "detail"), "tools[0].parameters is not a valid JSON Schema",
                          46) == 0,
                  "%s", str_at(r, "detail"));
    json_decref(r);
    char *n = evd_t_sql(db_url, "SELECT count(*) FROM experiments");
    ck_assert_str_eq(n, "0");
    free(n);
    n = evd_t_sql(db_url, "SELECT count(*) FROM datasets");
    ck_assert_str_eq(n, "0");
    free(n);
}
END_TEST

/* ---- the worked example of docs/agents.md ---------------------------------------------- */

/* The text of a file of the source tree (malloc'd). */
static char *source_file(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", evd_t_source_dir(), rel);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

/*
 * docs/agents.md's booking agent, from its files as they are (docs/examples/booking): six
 * conversations, a describing control against a booking treatment, mocked search and book,
 * the strict trajectory. Every figure the document states is checked here.
 */
START_TEST(the_worked_example_of_the_docs_holds)
{
    char *script = source_file("docs/examples/booking/stub.json");
    ck_assert_int_eq(evd_t_stub_script(&stub, script), 200);
    char *cases = source_file("docs/examples/booking/cases.jsonl");
    char *ds = upload_jsonl("booking", cases);
    char *doc_body = source_file("docs/examples/booking/experiment.json");
    json_t *req = json_loads(doc_body, 0, NULL);
    ck_assert_ptr_nonnull(req);
    json_object_set_new(req, "dataset_id", json_string(ds));
    char *body = json_dumps(req, JSON_COMPACT);
    char *id = start_experiment(body);
    json_t *doc = wait_done(id, 60000);
    ck_assert_str_eq(str_at(doc, "status"), "completed");
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
    ck_assert_str_eq(str_at(doc, "comparisons.0.verdict"), "better");
    /* the reasons the document quotes */
    json_t *runs = runs_of(id);
    ck_assert_str_eq(str_at(run_at(runs, "oslo", 0), "verdict.reason"),
                     "call 2: expected book, got no call");
    ck_assert_str_eq(str_at(run_at(runs, "bergen", 1), "verdict.reason"),
                     "call 2: expected book, got no call");
    ck_assert_str_eq(str_at(run_at(runs, "bergen", 1), "output"),
                     "Sorry, nothing is free that night.");
    ck_assert_str_eq(str_at(run_at(runs, "oslo", 1), "output"), "Room R12 is booked for you.");
    ck_assert_str_eq(str_at(run_at(runs, "oslo", 1), "verdict.reason"),
                     "2 calls matched the expected calls in order");
    json_t *conv = xt_at(run_at(runs, "oslo", 1), "transcript.conversation");
    ck_assert_uint_eq(json_array_size(conv), 4);
    ck_assert_str_eq(str_at(conv, "0.content"), "Hello! I'd like a room in Oslo.");
    ck_assert_str_eq(str_at(conv, "2.content"), "Friday, please.");
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
    ck_assert_int_eq(evd_t_stub_script(&stub, CONVERSE), 200);
    char *body = simulated_body(10, "eval::assert::exact");
    char *id = start_experiment(body);
    json_t *doc = wait_done(id, 60000);
    ck_assert_str_eq(str_at(doc, "status"), "completed");
    ck_assert(json_real_value(xt_at(doc, "arms.0.pass_rate")) == 1.0);
    json_t *runs = runs_of(id);
    ck_assert_uint_eq(json_array_size(runs), 2);
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        ck_assert_str_eq(str_at(run, "status"), "completed");
        ck_assert_str_eq(str_at(run, "output"), "Booked R42 in Oslo for Friday.");
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
            ck_assert_str_eq(str_at(json_array_get(conv, k), "role"),
                             k % 2 == 0 ? "user" : "assistant");
            if (said[k] != NULL)
                ck_assert_str_eq(str_at(json_array_get(conv, k), "content"), said[k]);
        }
    }
    json_decref(runs);
    /* 2 runs × (3 agent + 3 simulator calls) */
    ck_assert_int_eq(json_integer_value(xt_at(doc, "spend.calls")), 12);
    json_decref(doc);
    /* The simulator saw its instructions rendered for the case and the roles swapped. */
    json_t *log = evd_t_stub_requests(&stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    int sim = 0;
    json_array_foreach(reqs, i, run)
    {
        json_t *b = request_body(run);
        char *text = json_dumps(b, JSON_COMPACT);
        if (strstr(text, "traveller") != NULL) {
            sim++;
            ck_assert_msg(strstr(text, "You are a traveller named Ana. Book one night.") != NULL,
                          "%s", text);
            ck_assert_str_eq(str_at(b, "model"), "stub-user");
            char *conv = wire_conversation(b);
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
    snprintf(url, sizeof(url), "%s/v1/experiments/%s/export", evald.base, id);
    struct evd_t_resp r;
    evd_t_http("GET", url, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    int records = 0;
    for (char *save = NULL, *line = strtok_r(r.body, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save), records++) {
        json_t *rec = json_loads(line, 0, NULL);
        ck_assert_ptr_nonnull(rec);
        ck_assert_uint_eq(json_array_size(json_object_get(rec, "transcript")), 6);
        ck_assert_str_eq(str_at(rec, "transcript.3.content"), "Which night?");
        ck_assert_int_eq(json_integer_value(json_object_get(rec, "simulator_calls")), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(rec, "simulator_total_tokens")), 30);
        ck_assert_int_eq(json_integer_value(json_object_get(rec, "turns")), 3);
        json_decref(rec);
    }
    ck_assert_int_eq(records, 2);
    evd_t_resp_free(&r);
    snprintf(url, sizeof(url), "%s/v1/experiments/%s/export?format=csv", evald.base, id);
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
    ck_assert_int_eq(evd_t_stub_script(&stub, CONVERSE), 200);
    char tool[512];
    snprintf(tool, sizeof(tool),
             "{\"description\":\"echo\",\"url\":\"%s/echo\",\"timeout_ms\":5000,"
             "\"request_schema\":{\"type\":\"object\"}}",
             hs_tools_base());
    long status = 0;
    json_decref(call("PUT", "/v1/tools/judge.echo", tool, &status));
    ck_assert_int_eq(status, 201);
    char *body = simulated_body(2, "judge.echo");
    char *id = start_experiment(body);
    json_t *doc = wait_done(id, 60000);
    json_decref(doc);
    json_t *input = hs_tools_last("/echo");
    ck_assert_ptr_nonnull(input);
    ck_assert_str_eq(str_at(input, "output"), "Which night?");
    json_t *t = xt_at(input, "transcript");
    ck_assert_uint_eq(json_array_size(t), 4);
    ck_assert_str_eq(str_at(t, "2.content"), "Oslo.");
    ck_assert_str_eq(str_at(t, "3.content"), "Which night?");
    ck_assert_str_eq(str_at(input, "case_id"), "ana");
    json_decref(input);
    json_t *runs = runs_of(id);
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
    ck_assert_int_eq(evd_t_stub_script(&stub, script), 200);
    char *body = simulated_body(10, "eval::assert::exact");
    /* one arm's run at a time */
    char *one = strstr(body, "\"concurrency\":2");
    ck_assert_ptr_nonnull(one);
    one[strlen("\"concurrency\":")] = '1';
    char *id = start_experiment(body);
    /* Wait for the checkpoint after the first simulator reply, then for the second agent
     * turn to be in flight. */
    for (int waited = 0;; waited += 20) {
        char *sql = xt_printf("SELECT count(*) FROM experiment_runs WHERE experiment_id = '%s'"
                              " AND checkpoint IS NOT NULL",
                              id);
        char *got = evd_t_sql(db_url, sql);
        bool kept = got != NULL && strcmp(got, "1") == 0;
        free(got);
        free(sql);
        if (kept)
            break;
        ck_assert_int_lt(waited, 30000);
        usleep(20 * 1000);
    }
    for (int waited = 0;; waited += 10) { /* the second agent turn is in flight */
        json_t *st = evd_t_stub_stats(&stub);
        bool in_turn = json_integer_value(json_object_get(st, "requests")) == 3 &&
                       json_integer_value(json_object_get(st, "in_flight")) == 1;
        json_decref(st);
        if (in_turn)
            break;
        ck_assert_int_lt(waited, 30000);
        usleep(10 * 1000);
    }
    evd_t_stop(&evald, SIGKILL, 5000);
    start_evald();
    json_t *doc = wait_done(id, 90000);
    ck_assert_str_eq(str_at(doc, "status"), "completed");
    json_t *runs = runs_of(id);
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        ck_assert_str_eq(str_at(run, "status"), "completed");
        json_t *b = xt_at(run, "benchmark");
        ck_assert_int_eq(json_integer_value(json_object_get(b, "turns")), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(b, "input_tokens")), 60);
        ck_assert_int_eq(json_integer_value(json_object_get(b, "simulator_calls")), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(b, "simulator_input_tokens")), 21);
        json_t *conv = xt_at(run, "transcript.conversation");
        ck_assert_uint_eq(json_array_size(conv), 6);
        ck_assert_str_eq(str_at(conv, "2.content"), "Oslo.");
        ck_assert_str_eq(str_at(conv, "4.content"), "Friday.");
    }
    /* The interrupted run was taken over by a second attempt. */
    char *sql = xt_printf("SELECT max(attempt) FROM experiment_runs WHERE experiment_id = '%s'",
                          id);
    char *att = evd_t_sql(db_url, sql);
    ck_assert_str_eq(att, "2");
    free(att);
    free(sql);
    /* Per session (one a run): the agent's first turn and the simulator's first reply were
     * sent once; only the turn in flight at the kill was sent twice. */
    json_t *log = evd_t_stub_requests(&stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    int first_turn = 0, first_reply = 0, second_turn = 0;
    json_array_foreach(reqs, i, run)
    {
        json_t *b = request_body(run);
        char *conv = wire_conversation(b);
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
    json_t *plan = call("POST", "/v1/experiments/plan", body, &status);
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
    json_t *r = call("POST", "/v1/experiments", body, &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(str_at(r, "detail"), "budget.max_cost_usd needs a price for model stub-user");
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
            &stub, "{\"rules\":["
                   "{\"when\":{\"system_contains\":\"player\"},\"reply\":{\"text\":\"Again.\"}},"
                   "{\"when\":{\"has_tool_result\":true},\"reply\":{\"text\":\"Rolled.\"}},"
                   "{\"when\":{\"has_tool_result\":false},\"reply\":{\"tool_calls\":[{\"name\":"
                   "\"dice\",\"arguments\":{}}]}}]}"),
        200);
    char *id = start_experiment(
        "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
        "\"control\":{\"prompt\":\"Roll.\"},\"treatments\":[{\"prompt\":\"Roll it.\"}],"
        "\"tools\":[{\"name\":\"dice\",\"parameters\":{\"type\":\"object\"}}],"
        "\"simulator\":{\"model\":{\"model\":\"stub-user\",\"provider\":\"openai\"},"
        "\"instructions\":\"You are a player.\",\"max_turns\":3},"
        "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{\"expected\":"
        "\"Rolled.\"}},\"repeats\":1,\"concurrency\":1,"
        "\"cases\":[{\"id\":\"d\",\"tool_results\":{\"dice\":[1,2,3]}}]}");
    json_t *doc = wait_done(id, 60000);
    json_decref(doc);
    json_t *runs = runs_of(id);
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
        json_t *r = call("POST", "/v1/experiments", body, &status);
        ck_assert_msg(status == 400, "%s answered %ld", cases[i].sim, status);
        ck_assert_str_eq(str_at(r, "detail"), cases[i].msg);
        json_decref(r);
        free(body);
    }
    char *n = evd_t_sql(db_url, "SELECT count(*) FROM experiments");
    ck_assert_str_eq(n, "0");
    free(n);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("experiment_agents");
    TCase *tc = tcase_create("agents");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, the_conversation_goes_before_the_prompt_on_every_wire);
    tcase_add_test(tc, an_empty_prompt_sends_the_conversation_as_it_is);
    tcase_add_test(tc, an_empty_prompt_needs_a_conversation_ending_with_the_user);
    tcase_add_test(tc, mocked_tools_answer_and_the_trajectory_decides);
    tcase_add_test(tc, mocked_tool_refusals_name_the_field);
    tcase_add_test(tc, the_worked_example_of_the_docs_holds);
    tcase_add_test(tc, a_simulated_user_stops_on_its_token);
    tcase_add_test(tc, a_simulated_user_stops_at_max_turns);
    tcase_add_test(tc, simulator_refusals_name_the_field);
    tcase_add_test(tc, the_plan_counts_the_simulated_user);
    tcase_add_test(tc, a_mocked_sequence_spans_the_turns_of_a_conversation);
    tcase_add_test(tc, kill_9_mid_conversation_resumes_without_doubling_a_turn);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
