/*
 * Agent cases end to end (../shared/spec/agent-cases.md; docs/agents.md): conversation
 * cases sent before the arm's prompt on each wire format, the empty prompt, the
 * transcript an HTTP evaluator reads and the conversation a run document keeps. Real
 * evald, evald-stub (three keyless providers of its three wire formats), a throwaway
 * PostgreSQL and the tool server of harness_support.h, all on loopback.
 */
#include <check.h>
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
    static char env_file[128], env_openai[300];
    snprintf(env_file, sizeof(env_file), "EVALD_PROVIDERS_FILE=%s", providers_path);
    snprintf(env_openai, sizeof(env_openai), "OPENAI_BASE_URL=%s/v1", stub.base);
    char *env[] = {env_file, env_openai, "OPENAI_API_KEY=stub-key", "EVALD_SWEEP_INTERVAL_MS=300",
                   NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
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

int main(void)
{
    Suite *s = suite_create("experiment_agents");
    TCase *tc = tcase_create("agents");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, the_conversation_goes_before_the_prompt_on_every_wire);
    tcase_add_test(tc, an_empty_prompt_sends_the_conversation_as_it_is);
    tcase_add_test(tc, an_empty_prompt_needs_a_conversation_ending_with_the_user);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
