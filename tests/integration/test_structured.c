/*
 * End-to-end tests of structured final answers and the agent review evaluator: a real
 * PostgreSQL, the real evald and evald-stub over loopback. A JSON-output evaluation whose
 * first answers are invalid and whose repairs are valid passes; one whose repairs are
 * invalid fails with only the failure code saved, and the model's invalid text appears
 * nowhere in the stored rows, the report, the resource or the log; the repair requests
 * are read back from /_stub/requests (tools disabled, Anthropic keeps them with tool_choice
 * none, the repair text byte for byte); an agent review yields GREEN and RED runs with
 * their owner fields in the report, and an invalid verdict fails the run in phase evaluate
 * with the code alone; review arguments are checked at start.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char db_url[1024];
static char db_name[64];
static struct evd_t_proc stub;
static char env_openai[300], env_anthropic[300];

#define JS(o, k) json_string_value(json_object_get((o), (k)))

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    snprintf(env_openai, sizeof(env_openai), "OPENAI_BASE_URL=%s/v1", stub.base);
    snprintf(env_anthropic, sizeof(env_anthropic), "ANTHROPIC_BASE_URL=%s", stub.base);
}

static void teardown(void)
{
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
}

static void start_evald(struct evd_t_proc *p)
{
    char *env[] = {env_openai,
                   env_anthropic,
                   "OPENAI_API_KEY=stub-key",
                   "ANTHROPIC_API_KEY=stub-key",
                   "EVALD_SWEEP_INTERVAL_MS=300",
                   "EVALD_LEASE_MS=3000",
                   NULL};
    ck_assert_int_eq(evd_t_evald_start(p, db_url, env), 0);
}

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
    ck_assert_msg(v != NULL, "bad test JSON: %s: %s", je.text, text);
    return v;
}

static char *start_eval(const char *base, const char *body)
{
    long status = 0;
    json_t *r = evd_t_call(base, "eval::start", body, &status);
    ck_assert_msg(status == 200, "eval::start answered %ld: %s", status,
                  r ? JS(r, "detail") : "(no body)");
    char *id = strdup(JS(r, "evaluation_id"));
    json_decref(r);
    return id;
}

static json_t *result_of(const char *base, const char *id)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"evaluation_id\":\"%s\"}", id);
    long status = 0;
    json_t *r = evd_t_call(base, "eval::result", body, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(evd_t_valid_response("eval::result", r));
    return r;
}

/* Every request the stub logged (new reference to the array). */
static json_t *stub_requests(void)
{
    json_t *r = evd_t_stub_requests(&stub, 0);
    ck_assert_ptr_nonnull(r);
    json_t *a = json_incref(json_object_get(r, "requests"));
    json_decref(r);
    return a;
}

/* The text of the last user message of a Responses or Messages request body. */
static const char *last_user_text(json_t *body)
{
    json_t *list = json_object_get(body, "input");
    if (list == NULL)
        list = json_object_get(body, "messages");
    json_t *last = json_array_get(list, json_array_size(list) - 1);
    if (strcmp(JS(last, "role") ? JS(last, "role") : "", "user") != 0)
        return "";
    json_t *content = json_object_get(last, "content");
    if (json_is_string(content))
        return json_string_value(content);
    return JS(json_array_get(content, 0), "text") ? JS(json_array_get(content, 0), "text") : "";
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

/* Asserts that `marker` is in none of the stored rows, the report, the resource or the log. */
static void assert_nowhere(const struct evd_t_proc *p, const char *id, const char *marker)
{
    json_t *res = result_of(p->base, id);
    char *text = json_dumps(res, JSON_COMPACT);
    ck_assert_msg(strstr(text, marker) == NULL, "the report holds %s", marker);
    free(text);
    json_decref(res);
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/evaluations/%s", p->base, id);
    long status = 0;
    json_t *resource = evd_t_http_json("GET", url, NULL, &status);
    ck_assert_int_eq(status, 200);
    text = json_dumps(resource, JSON_COMPACT);
    ck_assert_msg(strstr(text, marker) == NULL, "the resource holds %s", marker);
    free(text);
    json_decref(resource);
    char *sql = NULL;
    ck_assert_int_ge(asprintf(&sql,
                              "SELECT coalesce(string_agg(row_to_json(r)::text, ''), '') FROM runs"
                              " r WHERE evaluation_id = '%s'",
                              id),
                     0);
    char *rows = evd_t_sql(db_url, sql);
    ck_assert_ptr_nonnull(rows);
    ck_assert_msg(strlen(rows) > 100, "no stored runs");
    ck_assert_msg(strstr(rows, marker) == NULL, "a stored run holds %s", marker);
    free(rows);
    free(sql);
    char *all = evd_t_sql(db_url, "SELECT coalesce(string_agg(row_to_json(e)::text, ''), '')"
                                  " FROM evaluations e");
    ck_assert_msg(strstr(all, marker) == NULL, "a stored evaluation holds %s", marker);
    free(all);
    char *log = read_file(p->log_path);
    ck_assert_msg(strstr(log, marker) == NULL, "the log holds %s", marker);
    free(log);
}

static const char COVERED_SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"covered\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"string\"}}},\"required\":[\"covered\"]}";

START_TEST(json_output_repaired_once_passes)
{
    struct evd_t_proc p;
    start_evald(&p);
    /* A tool the agent may call: Anthropic's repair must keep it, unusable. */
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/tools/notes::read", p.base);
    struct evd_t_resp tr;
    const char *tool = "{\"description\":\"Reads the notes\",\"url\":\"http://127.0.0.1:9/notes\","
                       "\"request_schema\":{\"type\":\"object\"}}";
    ck_assert_int_eq(evd_t_http("PUT", url, NULL, tool, strlen(tool), &tr), 0);
    ck_assert_int_lt(tr.status, 300);
    evd_t_resp_free(&tr);
    ck_assert_int_eq(
        evd_t_stub_script(&stub,
                          "{\"rules\":["
                          "{\"when\":{\"prompt_contains\":\"Your final response did not "
                          "match\"},\"reply\":{\"json\":{\"result\":{\"covered\":[\"R1\"]}}}},"
                          "{\"when\":{\"prompt_contains\":\"SO-PASS\"},\"reply\":{\"json\":"
                          "{\"result\":{\"covered\":\"R1\"}}}}]}"),
        200);
    char *body = NULL;
    ck_assert_int_ge(
        asprintf(&body,
                 "{\"dimension\":\"prompt\",\"model\":{\"model\":\"claude-stub\",\"provider\":"
                 "\"anthropic\"},\"control\":{\"prompt\":\"SO-PASS control: list what you "
                 "covered.\"},\"treatment\":{\"prompt\":\"SO-PASS treatment: list the covered "
                 "requirements.\"},\"output\":{\"type\":\"json\",\"schema\":%s},\"functions\":"
                 "{\"allow\":[\"notes::read\"],\"expose\":\"native\"},\"evaluator\":"
                 "{\"function_id\":\"eval::assert::exact\",\"arguments\":{\"expected\":"
                 "{\"covered\":[\"R1\"]}}},\"runs\":1}",
                 COVERED_SCHEMA),
        0);
    char *id = start_eval(p.base, body);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    json_t *res = result_of(p.base, id);
    json_t *runs = json_object_get(json_object_get(res, "report"), "runs");
    ck_assert_int_eq(json_array_size(runs), 2);
    json_t *want = parse("{\"covered\":[\"R1\"]}");
    for (size_t i = 0; i < 2; i++) {
        json_t *r = json_array_get(runs, i);
        ck_assert_str_eq(JS(r, "status"), "completed");
        ck_assert(json_is_true(json_object_get(r, "passed")));
        ck_assert(json_equal(json_object_get(r, "output"), want));
        ck_assert_int_eq(json_integer_value(json_object_get(
                             json_object_get(json_object_get(r, "metrics"), "totals"), "turns")),
                         2);
    }
    json_decref(want);
    json_decref(res);

    /* Two requests per run; the second is the repair. */
    json_t *reqs = stub_requests();
    ck_assert_int_eq(json_array_size(reqs), 4);
    static const char REPAIR[] =
        "Your final response did not match the required schema: schema_mismatch: result must "
        "match the output schema\n- instancePath \"/covered\": \"R1\" is not of type "
        "\"array\"\nReturn only one JSON object matching the schema.";
    int repairs = 0;
    size_t i;
    json_t *q;
    json_array_foreach(reqs, i, q)
    {
        json_t *b = json_object_get(q, "body");
        ck_assert_str_eq(JS(q, "api"), "messages");
        ck_assert_ptr_nonnull(json_object_get(json_object_get(b, "output_config"), "format"));
        ck_assert_str_eq(JS(json_array_get(json_object_get(b, "tools"), 0), "name"), "notes_read");
        if (strncmp(last_user_text(b), "Your final response", 19) == 0) {
            repairs++;
            ck_assert_str_eq(last_user_text(b), REPAIR);
            ck_assert_str_eq(JS(json_object_get(b, "tool_choice"), "type"), "none");
        } else {
            ck_assert_ptr_null(json_object_get(b, "tool_choice"));
        }
    }
    ck_assert_int_eq(repairs, 2);
    json_decref(reqs);
    free(id);
    free(body);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(json_output_invalid_after_repair_saves_only_the_code)
{
    struct evd_t_proc p;
    start_evald(&p);
    ck_assert_int_eq(evd_t_stub_script(&stub, "{\"rules\":[],\"default\":{\"reply\":{\"json\":"
                                              "{\"result\":{\"covered\":\"R1-LEAK-7f3a\"}}}}}"),
                     200);
    char *body = NULL;
    ck_assert_int_ge(
        asprintf(&body,
                 "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
                 "\"openai\"},\"control\":{\"prompt\":\"SO-FAIL control\"},\"treatment\":"
                 "{\"prompt\":\"SO-FAIL treatment\"},\"output\":{\"type\":\"json\",\"schema\":%s},"
                 "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":"
                 "{\"expected\":{\"covered\":[\"R1\"]}}},\"runs\":1}",
                 COVERED_SCHEMA),
        0);
    char *id = start_eval(p.base, body);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    json_t *res = result_of(p.base, id);
    json_t *runs = json_object_get(json_object_get(res, "report"), "runs");
    for (size_t i = 0; i < json_array_size(runs); i++) {
        json_t *r = json_array_get(runs, i);
        ck_assert_str_eq(JS(r, "status"), "failed");
        ck_assert(!json_is_boolean(json_object_get(r, "passed"))); /* null or left out */
        json_t *out = json_object_get(r, "output");
        ck_assert(out == NULL || json_is_null(out));
        json_t *f = json_array_get(json_object_get(r, "failures"), 0);
        ck_assert_int_eq(json_array_size(json_object_get(r, "failures")), 1);
        ck_assert_str_eq(JS(f, "phase"), "await");
        ck_assert_str_eq(JS(f, "message"), "schema_mismatch: result must match the output schema");
    }
    json_decref(res);

    /* The repair on Responses: no tools, the same text.format, the message byte for byte. */
    json_t *reqs = stub_requests();
    ck_assert_int_eq(json_array_size(reqs), 4); /* never a third turn */
    json_t *b1 = json_object_get(json_array_get(reqs, 0), "body");
    json_t *b2 = json_object_get(json_array_get(reqs, 1), "body");
    ck_assert_str_eq(JS(json_array_get(reqs, 1), "api"), "responses");
    ck_assert_ptr_null(json_object_get(b2, "tools"));
    ck_assert_ptr_null(json_object_get(b2, "tool_choice"));
    ck_assert(json_equal(json_object_get(b1, "text"), json_object_get(b2, "text")));
    ck_assert_str_eq(JS(json_object_get(json_object_get(b2, "text"), "format"), "name"),
                     "evald_result");
    ck_assert_str_eq(last_user_text(b2),
                     "Your final response did not match the required schema: schema_mismatch: "
                     "result must match the output schema\n- instancePath \"/covered\": "
                     "\"R1-LEAK-7f3a\" is not of type \"array\"\nReturn only one JSON object "
                     "matching the schema.");
    json_decref(reqs);

    /* The transcript records both turns, without the text. */
    char *sql = NULL;
    ck_assert_int_ge(asprintf(&sql,
                              "SELECT jsonb_array_length(transcript->'generations') || ':' ||"
                              " (transcript->'generations'->0->>'output_error') || ':' ||"
                              " (transcript->'generations'->1->>'repair') FROM runs"
                              " WHERE evaluation_id = '%s' AND position = 1",
                              id),
                     0);
    char *t = evd_t_sql(db_url, sql);
    ck_assert_str_eq(t, "2:schema_mismatch: result must match the output schema:true");
    free(t);
    free(sql);
    assert_nowhere(&p, id, "LEAK-7f3a");
    free(id);
    free(body);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

static const char REVIEW_ARGS[] =
    "{\"model\":\"claude-reviewer\",\"provider\":\"anthropic\",\"instructions\":\"The output "
    "must be exactly OK, nothing else.\",\"green_schema\":{\"properties\":{\"covered\":"
    "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\"required\":[\"covered\"]},"
    "\"red_schema\":{\"properties\":{\"why\":{\"type\":\"string\"}},\"required\":[\"why\"]},"
    "\"max_tokens\":5000,\"max_tool_calls\":3}";

static char *review_request(void)
{
    char *body = NULL;
    ck_assert_int_ge(
        asprintf(&body,
                 "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
                 "\"openai\"},\"control\":{\"prompt\":\"Reply with exactly OK.\"},\"treatment\":"
                 "{\"prompt\":\"Return exactly the text OK.\"},\"evaluator\":{\"function_id\":"
                 "\"eval::assert::agent_review\",\"arguments\":%s},\"runs\":1}",
                 REVIEW_ARGS),
        0);
    return body;
}

START_TEST(agent_review_green_and_red)
{
    struct evd_t_proc p;
    start_evald(&p);
    /* The agent (Responses) gets built-in replies; the reviewer (Messages) is scripted. */
    ck_assert_int_eq(evd_t_stub_script(
                         &stub,
                         "{\"rules\":["
                         "{\"when\":{\"api\":\"messages\",\"prompt_contains\":\"Sure! Here\"},"
                         "\"reply\":{\"json\":{\"result\":{\"verdict\":\"RED\",\"verdictFields\":"
                         "{\"why\":\"extra words around OK\"}}}}},"
                         "{\"when\":{\"api\":\"messages\",\"system_contains\":\"exactly OK\"},"
                         "\"reply\":{\"json\":{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":"
                         "{\"covered\":[\"exact OK\"]}}}}}]}"),
                     200);
    char *body = review_request();
    char *id = start_eval(p.base, body);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    json_t *res = result_of(p.base, id);
    json_t *report = json_object_get(res, "report");
    json_t *runs = json_object_get(report, "runs");
    ck_assert_int_eq(json_array_size(runs), 2);
    json_t *green = parse("{\"verdict\":\"GREEN\",\"covered\":[\"exact OK\"]}");
    json_t *red = parse("{\"verdict\":\"RED\",\"why\":\"extra words around OK\"}");
    for (size_t i = 0; i < 2; i++) {
        json_t *r = json_array_get(runs, i);
        bool control = strcmp(JS(r, "role"), "control") == 0;
        json_t *ev = json_object_get(r, "evaluation");
        ck_assert_str_eq(JS(r, "status"), "completed");
        ck_assert(json_is_boolean(json_object_get(r, "passed")));
        ck_assert_int_eq(json_is_true(json_object_get(r, "passed")), control);
        ck_assert_int_eq(json_is_true(json_object_get(ev, "passed")), control);
        ck_assert(json_equal(json_object_get(ev, "details"), control ? green : red));
        ck_assert_str_eq(JS(ev, "reason"), control ? "agent review by claude-reviewer: GREEN"
                                                   : "agent review by claude-reviewer: RED");
    }
    ck_assert(json_is_false(json_object_get(report, "eligible")));
    json_decref(green);
    json_decref(red);
    json_decref(res);

    /* What the reviewer was sent: instructions, the run's output, structured output. */
    json_t *reqs = stub_requests();
    int reviews = 0;
    size_t i;
    json_t *q;
    json_array_foreach(reqs, i, q)
    {
        if (strcmp(JS(q, "api"), "messages") != 0)
            continue;
        reviews++;
        json_t *b = json_object_get(q, "body");
        ck_assert_ptr_nonnull(strstr(JS(b, "system"), "Review instructions:\nThe output must be "
                                                      "exactly OK, nothing else."));
        const char *prompt = last_user_text(b);
        ck_assert_ptr_nonnull(strstr(prompt, "----- BEGIN OUTPUT -----\n"));
        ck_assert_ptr_nonnull(strstr(prompt, "- model generations (turns): 1\n"));
        json_t *fmt = json_object_get(json_object_get(b, "output_config"), "format");
        ck_assert_str_eq(JS(fmt, "type"), "json_schema");
        ck_assert_ptr_nonnull(json_object_get(json_object_get(fmt, "schema"), "properties"));
        /* Budgets stay client-side: max_tokens is the per-call cap, not the budget. */
        ck_assert_int_eq(json_integer_value(json_object_get(b, "max_tokens")), 8192);
        ck_assert_ptr_null(json_object_get(b, "max_tool_calls"));
        ck_assert_ptr_null(json_object_get(b, "tools")); /* no policy: nothing offered */
        const char *session = JS(json_object_get(q, "headers"), "x-evald-session");
        ck_assert_msg(session != NULL && strstr(session, "-review") != NULL, "session %s",
                      session ? session : "(none)");
    }
    ck_assert_int_eq(reviews, 2);
    json_decref(reqs);

    /* The reviewer's turns are kept with the run's transcript. */
    char *sql = NULL;
    ck_assert_int_ge(asprintf(&sql,
                              "SELECT string_agg(transcript->'evaluator'->>'status', ',' ORDER BY"
                              " position) FROM runs WHERE evaluation_id = '%s'",
                              id),
                     0);
    char *st = evd_t_sql(db_url, sql);
    ck_assert_str_eq(st, "completed,completed");
    free(st);
    free(sql);
    free(id);
    free(body);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(agent_review_invalid_verdict_fails_the_run)
{
    struct evd_t_proc p;
    start_evald(&p);
    ck_assert_int_eq(evd_t_stub_script(&stub, "{\"rules\":[{\"when\":{\"api\":\"messages\"},"
                                              "\"reply\":{\"json\":{\"result\":{\"verdict\":"
                                              "\"GREEN\",\"verdictFields\":{\"covered\":"
                                              "\"REVIEW-LEAK-91c2\"}}}}}]}"),
                     200);
    char *body = review_request();
    char *id = start_eval(p.base, body);
    ck_assert_str_eq(evd_t_wait_terminal(p.base, id, 60000), "completed");
    json_t *res = result_of(p.base, id);
    json_t *runs = json_object_get(json_object_get(res, "report"), "runs");
    for (size_t i = 0; i < json_array_size(runs); i++) {
        json_t *r = json_array_get(runs, i);
        ck_assert_str_eq(JS(r, "status"), "failed");
        ck_assert(!json_is_boolean(json_object_get(r, "passed"))); /* null or left out */
        json_t *f = json_array_get(json_object_get(r, "failures"), 0);
        ck_assert_str_eq(JS(f, "phase"), "evaluate");
        ck_assert_str_eq(JS(f, "function_id"), "eval::assert::agent_review");
        ck_assert_str_eq(JS(f, "message"),
                         "schema_mismatch: result must match the selected verdict's owner schema");
    }
    json_decref(res);
    json_t *reqs = stub_requests();
    int reviews = 0, repairs = 0;
    size_t i;
    json_t *q;
    json_array_foreach(reqs, i, q)
    {
        if (strcmp(JS(q, "api"), "messages") != 0)
            continue;
        reviews++;
        repairs +=
            strncmp(last_user_text(json_object_get(q, "body")), "Your final response", 19) == 0;
    }
    ck_assert_int_eq(reviews, 4); /* one review and one repair per run */
    ck_assert_int_eq(repairs, 2);
    json_decref(reqs);
    assert_nowhere(&p, id, "REVIEW-LEAK-91c2");
    free(id);
    free(body);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(agent_review_arguments_are_checked_at_start)
{
    struct evd_t_proc p;
    start_evald(&p);
    static const struct {
        const char *arguments;
        const char *detail;
    } cases[] = {
        {"{\"model\":\"claude-x\"}", "evaluator.arguments.instructions is required"},
        {"{\"instructions\":\"x\"}", "evaluator.arguments.model is required"},
        {"{\"model\":\"claude-x\",\"instructions\":\"x\",\"max_tool_calls\":-1}",
         "evaluator.arguments.max_tool_calls must be a non-negative integer"},
        {"{\"model\":\"claude-x\",\"instructions\":\"x\",\"green_schema\":{\"properties\":"
         "{\"model\":{}}}}",
         "evaluator.arguments.green_schema must not use the reserved field name \"model\""},
        {"{\"model\":\"claude-x\",\"provider\":\"nope\",\"instructions\":\"x\"}", NULL},
        {"{\"model\":\"mystery-model\",\"instructions\":\"x\"}", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *body = NULL;
        ck_assert_int_ge(
            asprintf(&body,
                     "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
                     "\"openai\"},\"control\":{\"prompt\":\"a\"},\"treatment\":{\"prompt\":\"b\"},"
                     "\"evaluator\":{\"function_id\":\"eval::assert::agent_review\","
                     "\"arguments\":%s}}",
                     cases[i].arguments),
            0);
        long status = 0;
        json_t *r = evd_t_call(p.base, "eval::start", body, &status);
        ck_assert_msg(status == 400, "case %zu: status %ld", i, status);
        const char *detail = JS(r, "detail");
        if (cases[i].detail != NULL)
            ck_assert_str_eq(detail, cases[i].detail);
        else
            ck_assert_msg(strncmp(detail, "evaluator.arguments.provider", 28) == 0, "case %zu: %s",
                          i, detail);
        json_decref(r);
        free(body);
    }
    /* An output schema that cannot compile is refused at start as well. */
    long status = 0;
    json_t *r = evd_t_call(p.base, "eval::start",
                           "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\","
                           "\"provider\":\"openai\"},\"control\":{\"prompt\":\"a\"},\"treatment\":"
                           "{\"prompt\":\"b\"},\"output\":{\"type\":\"json\",\"schema\":"
                           "{\"required\":\"x\"}}}",
                           &status);
    ck_assert_int_eq(status, 400);
    ck_assert_msg(strncmp(JS(r, "detail"), "output.schema: invalid schema at", 32) == 0, "%s",
                  JS(r, "detail"));
    json_decref(r);
    char *n = evd_t_sql(db_url, "SELECT count(*) FROM evaluations");
    ck_assert_str_eq(n, "0");
    free(n);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("structured");
    TCase *tc = tcase_create("structured");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, json_output_repaired_once_passes);
    tcase_add_test(tc, json_output_invalid_after_repair_saves_only_the_code);
    tcase_add_test(tc, agent_review_green_and_red);
    tcase_add_test(tc, agent_review_invalid_verdict_fails_the_run);
    tcase_add_test(tc, agent_review_arguments_are_checked_at_start);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
