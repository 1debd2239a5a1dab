/*
 * Unit tests of the harness's loop parts and wire formats: system prompts, the function
 * policy, tool names, retry helpers (Retry-After, backoff, key scrubbing, error bodies),
 * the three wire formats (requests built field by field against the documented provider
 * shapes, replies parsed into the neutral form, provider state replayed), allocation-
 * failure runs of the JSON-heavy builders, the cancel token, and runs that fail in setup.
 * No network. The provider registry and prices are in test_harness_providers.c.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "harness/harness.h"
#include "harness/internal.h"
#include "tests/support/harness_env.h"
#include "tests/support/testutil.h"

/* ---- system prompt, policy, names ----------------------------------------------------- */

struct sp_case {
    const char *sp, *strategy, *mode;
    const char *want; /* NULL: none; "@ID" identity; "@ID+x" identity+"\n\n"+x */
};

static const struct sp_case sp_cases[] = {
    {NULL, "enrich", NULL, NULL},
    {NULL, "override", "agent", NULL},
    {"", "enrich", NULL, "@ID"},
    {"", "override", NULL, "@ID"},
    {"", "disabled", NULL, NULL},
    {"Be terse.", "override", NULL, "Be terse."},
    {"Be terse.", "enrich", NULL, "@ID+Be terse."},
    {"Be terse.", NULL, NULL, "@ID+Be terse."},
    {"Be terse.", "disabled", NULL, NULL},
    {"Be terse.", "override", "ask", "@ASK+Be terse."},
    {"", "enrich", "agent", "@AGENT+@ID"},
};

START_TEST(system_prompt_table)
{
    const struct sp_case *c = &sp_cases[_i];
    char *got = NULL;
    char want[2048];
    struct evd_err err;
    ck_assert_int_eq(evd_harness_system_prompt(c->sp, c->strategy, c->mode, &got, &err), EVD_OK);
    if (c->want == NULL) {
        ck_assert_ptr_null(got);
        return;
    }
    if (strcmp(c->want, "@ID") == 0)
        snprintf(want, sizeof(want), "%s", EVD_HARNESS_IDENTITY_PROMPT);
    else if (strncmp(c->want, "@ID+", 4) == 0)
        snprintf(want, sizeof(want), "%s\n\n%s", EVD_HARNESS_IDENTITY_PROMPT, c->want + 4);
    else if (strncmp(c->want, "@ASK+", 5) == 0)
        snprintf(want, sizeof(want), "%s\n\n%s", EVD_HARNESS_MODE_ASK, c->want + 5);
    else if (strcmp(c->want, "@AGENT+@ID") == 0)
        snprintf(want, sizeof(want), "%s\n\n%s", EVD_HARNESS_MODE_AGENT,
                 EVD_HARNESS_IDENTITY_PROMPT);
    else
        snprintf(want, sizeof(want), "%s", c->want);
    ck_assert_str_eq(got, want);
    free(got);
}
END_TEST

START_TEST(system_prompt_rejects_unknown)
{
    char *got = NULL;
    struct evd_err err;
    ck_assert_int_eq(evd_harness_system_prompt("x", "replace", NULL, &got, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "model.system_prompt_strategy must be override, enrich or disabled");
    ck_assert_int_eq(evd_harness_system_prompt("x", NULL, "plan", &got, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "model.mode must be ask or agent");
}
END_TEST

struct policy_case {
    const char *policy; /* JSON or NULL */
    const char *id;
    bool want;
};

static const struct policy_case policy_cases[] = {
    {NULL, "add", false},
    {"{}", "add", false},
    {"{\"allow\":[\"add\"]}", "add", true},
    {"{\"allow\":[\"*\"]}", "math::add", true},
    {"{\"allow\":[\"math::*\"]}", "math::add", true},
    {"{\"allow\":[\"math::*\"]}", "net::fetch", false},
    {"{\"allow\":[\"*\"],\"deny\":[\"net::*\"]}", "net::fetch", false},
    {"{\"allow\":[\"net::fetch\"],\"deny\":[\"*\"]}", "net::fetch", false},
    {"{\"allow\":[\"ad?\"]}", "add", true},
    {"{\"allow\":[\"[a-c]dd\"]}", "add", true},
};

START_TEST(policy_table)
{
    const struct policy_case *c = &policy_cases[_i];
    json_t *p = c->policy ? json_loads(c->policy, 0, NULL) : NULL;
    ck_assert_int_eq(evd_hx_policy_allows(p, c->id), c->want);
    json_decref(p);
}
END_TEST

START_TEST(policy_check_names_field)
{
    struct evd_err err;
    json_t *p = json_loads("{\"allow\":\"*\"}", 0, NULL);
    ck_assert_int_eq(evd_hx_policy_check(p, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "functions.allow must be an array of strings");
    json_decref(p);
    p = json_loads("{\"expose\":\"all\"}", 0, NULL);
    ck_assert_int_eq(evd_hx_policy_check(p, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "functions.expose must be \"native\" or \"agent_trigger\"");
    json_decref(p);
}
END_TEST

START_TEST(tool_names_are_safe_and_unique)
{
    struct evd_hx_function fns[4];
    memset(fns, 0, sizeof(fns));
    evd_hx_tool_name("eval::assert::exact", fns[0].tool_name, sizeof(fns[0].tool_name), fns, 0);
    ck_assert_str_eq(fns[0].tool_name, "eval_assert_exact");
    evd_hx_tool_name("eval.assert.exact", fns[1].tool_name, sizeof(fns[1].tool_name), fns, 1);
    ck_assert_str_eq(fns[1].tool_name, "eval_assert_exact_2");
    evd_hx_tool_name("agent_trigger", fns[2].tool_name, sizeof(fns[2].tool_name), fns, 2);
    ck_assert_str_eq(fns[2].tool_name, "fn_agent_trigger");
    evd_hx_tool_name("::", fns[3].tool_name, sizeof(fns[3].tool_name), fns, 3);
    ck_assert_str_eq(fns[3].tool_name, "fn");
}
END_TEST

/* ---- retry helpers -------------------------------------------------------------------- */

START_TEST(retry_after_parsing)
{
    ck_assert_int_eq(evd_hx_parse_retry_after(" 3\r\n", 0), 3000);
    ck_assert_int_eq(evd_hx_parse_retry_after("0.5", 0), 500);
    ck_assert_int_eq(evd_hx_parse_retry_after("soon", 0), -1);
    ck_assert_int_eq(evd_hx_parse_retry_after("-1", 0), -1);
    /* 2015-10-21T07:28:00Z, ten seconds from "now". */
    ck_assert_int_eq(evd_hx_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470000LL),
                     10000);
    ck_assert_int_eq(evd_hx_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412490000LL), 0);
}
END_TEST

START_TEST(backoff_grows_with_jitter)
{
    for (int i = 0; i < 50; i++) {
        int64_t a = evd_hx_backoff_ms(2), c = evd_hx_backoff_ms(4), z = evd_hx_backoff_ms(20);
        ck_assert(a >= 250 && a <= 500);
        ck_assert(c >= 1000 && c <= 2000);
        ck_assert(z >= 4000 && z <= 8000);
    }
}
END_TEST

START_TEST(scrub_removes_keys)
{
    char s[200];
    snprintf(s, sizeof(s), "Incorrect API key provided: sk-proj-****abcd. key=MYSECRETKEY!");
    evd_hx_scrub(s, "MYSECRETKEY");
    ck_assert_str_eq(s, "Incorrect API key provided: sk-***. key=[redacted]!");
    snprintf(s, sizeof(s), "task-sk-1 stays");
    evd_hx_scrub(s, NULL);
    ck_assert_str_eq(s, "task-sk-1 stays");
}
END_TEST

/* A key shorter than "[redacted]" (a local server's) was left in the message. */
START_TEST(scrub_removes_short_keys)
{
    char s[200];
    snprintf(s, sizeof(s), "invalid key abc123 (abc123)");
    evd_hx_scrub(s, "abc123");
    ck_assert_str_eq(s, "invalid key ****** (******)");
    snprintf(s, sizeof(s), "key k3y9 k3y9k3y9");
    evd_hx_scrub(s, "k3y9");
    ck_assert_str_eq(s, "key **** ********");
}
END_TEST

START_TEST(error_detail_shapes)
{
    char out[256];
    const char *oa = "{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\"}}";
    evd_hx_error_detail(oa, strlen(oa), out, sizeof(out));
    ck_assert_str_eq(out, "Rate limit reached");
    const char *an = "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\","
                     "\"message\":\"invalid x-api-key\"}}";
    evd_hx_error_detail(an, strlen(an), out, sizeof(out));
    ck_assert_str_eq(out, "invalid x-api-key");
    evd_hx_error_detail("<html>Bad\ngateway</html>", 24, out, sizeof(out));
    ck_assert_str_eq(out, "<html>Bad gateway</html>");
    evd_hx_error_detail(NULL, 0, out, sizeof(out));
    ck_assert_str_eq(out, "empty body");
}
END_TEST

/* ---- wire formats: requests ----------------------------------------------------------- */

/* A conversation after one tool round trip: user, assistant(text+call), tool result. */
static json_t *sample_conversation(void)
{
    return json_loads(
        "[{\"role\":\"user\",\"content\":\"What is 2+3?\"},"
        "{\"role\":\"assistant\",\"content\":\"Let me add.\",\"tool_calls\":[{\"id\":\"call_1\","
        "\"name\":\"add\",\"arguments\":{\"a\":2,\"b\":3},\"arguments_text\":\"{\\\"a\\\":2,"
        "\\\"b\\\":3}\"}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"name\":\"add\",\"content\":"
        "\"{\\\"sum\\\":5}\",\"is_error\":false}]",
        0, NULL);
}

static json_t *sample_tools(void)
{
    return json_loads("[{\"name\":\"add\",\"description\":\"Adds\",\"parameters\":{\"type\":"
                      "\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}]",
                      0, NULL);
}

#define JS(o, k) json_string_value(json_object_get((o), (k)))
#define JI(o, k) json_integer_value(json_object_get((o), (k)))

START_TEST(responses_request_shape)
{
    json_t *msgs = sample_conversation(), *tools = sample_tools();
    json_t *opts = json_loads("{\"reasoning\":{\"summary\":\"auto\"},\"model\":\"evil\","
                              "\"service_tier\":\"flex\"}",
                              0, NULL);
    struct evd_hx_request q = {"gpt-5", "Be terse.", msgs, tools, 512, "high", opts, NULL, false};
    struct evd_err err;
    json_t *b = evd_hx_build_request(EVD_KIND_OPENAI_RESPONSES, &q, &err);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(JS(b, "model"), "gpt-5");
    ck_assert_str_eq(JS(b, "instructions"), "Be terse.");
    ck_assert_int_eq(JI(b, "max_output_tokens"), 512);
    ck_assert(json_is_false(json_object_get(b, "store")));
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(b, "include"), 0)),
                     "reasoning.encrypted_content");
    json_t *reasoning = json_object_get(b, "reasoning");
    ck_assert_str_eq(JS(reasoning, "effort"), "high");
    ck_assert_str_eq(JS(reasoning, "summary"), "auto"); /* provider_options merged deeply */
    ck_assert_str_eq(JS(b, "service_tier"), "flex");
    ck_assert_ptr_null(json_object_get(b, "stream"));
    json_t *input = json_object_get(b, "input");
    ck_assert_int_eq(json_array_size(input), 4);
    json_t *u = json_array_get(input, 0);
    ck_assert_str_eq(JS(u, "type"), "message");
    ck_assert_str_eq(JS(u, "role"), "user");
    json_t *part = json_array_get(json_object_get(u, "content"), 0);
    ck_assert_str_eq(JS(part, "type"), "input_text");
    ck_assert_str_eq(JS(part, "text"), "What is 2+3?");
    json_t *a = json_array_get(input, 1);
    ck_assert_str_eq(JS(a, "role"), "assistant");
    ck_assert_str_eq(JS(a, "content"), "Let me add.");
    json_t *fc = json_array_get(input, 2);
    ck_assert_str_eq(JS(fc, "type"), "function_call");
    ck_assert_str_eq(JS(fc, "call_id"), "call_1");
    ck_assert_str_eq(JS(fc, "name"), "add");
    ck_assert_str_eq(JS(fc, "arguments"), "{\"a\":2,\"b\":3}");
    json_t *fo = json_array_get(input, 3);
    ck_assert_str_eq(JS(fo, "type"), "function_call_output");
    ck_assert_str_eq(JS(fo, "call_id"), "call_1");
    ck_assert_str_eq(JS(fo, "output"), "{\"sum\":5}");
    json_t *t = json_array_get(json_object_get(b, "tools"), 0);
    ck_assert_str_eq(JS(t, "type"), "function");
    ck_assert_str_eq(JS(t, "name"), "add");
    ck_assert_str_eq(JS(t, "description"), "Adds");
    ck_assert_str_eq(JS(json_object_get(t, "parameters"), "type"), "object");
    ck_assert(json_is_false(json_object_get(t, "strict")));
    json_decref(b);
    /* No system prompt, no tools, no thinking: the fields are absent. */
    struct evd_hx_request q2 = {"gpt-5", NULL, msgs, NULL, 100, NULL, NULL, NULL, false};
    b = evd_hx_build_request(EVD_KIND_OPENAI_RESPONSES, &q2, &err);
    ck_assert_ptr_null(json_object_get(b, "instructions"));
    ck_assert_ptr_null(json_object_get(b, "tools"));
    ck_assert_ptr_null(json_object_get(b, "reasoning"));
    json_decref(b);
    json_decref(msgs);
    json_decref(tools);
    json_decref(opts);
}
END_TEST

START_TEST(responses_replays_its_own_items)
{
    json_t *msgs = json_loads(
        "[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"\","
        "\"tool_calls\":[],\"provider_state\":{\"kind\":\"openai-responses\",\"items\":["
        "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],\"encrypted_content\":\"xyz\"},"
        "{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"c1\",\"name\":\"add\","
        "\"arguments\":\"{}\",\"status\":\"completed\"}]}},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"3\",\"is_error\":false}]",
        0, NULL);
    struct evd_hx_request q = {"o3", NULL, msgs, NULL, 100, NULL, NULL, NULL, false};
    struct evd_err err;
    json_t *b = evd_hx_build_request(EVD_KIND_OPENAI_RESPONSES, &q, &err);
    json_t *input = json_object_get(b, "input");
    ck_assert_int_eq(json_array_size(input), 4);
    json_t *rs = json_array_get(input, 1);
    ck_assert_str_eq(JS(rs, "type"), "reasoning");
    ck_assert_str_eq(JS(rs, "encrypted_content"), "xyz");
    json_t *fc = json_array_get(input, 2);
    ck_assert_str_eq(JS(fc, "call_id"), "c1");
    ck_assert_ptr_null(json_object_get(fc, "id")); /* ids are not persisted with store:false */
    json_decref(b);
    json_decref(msgs);
}
END_TEST

START_TEST(anthropic_request_shape)
{
    json_t *msgs = sample_conversation(), *tools = sample_tools();
    json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "user", "content", "Thanks"));
    struct evd_hx_request q = {"claude-sonnet-4-5", "Be terse.", msgs, tools, 1024,
                               "minimal",           NULL,        NULL, false};
    struct evd_err err;
    json_t *b = evd_hx_build_request(EVD_KIND_ANTHROPIC_MESSAGES, &q, &err);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(JS(b, "model"), "claude-sonnet-4-5");
    ck_assert_int_eq(JI(b, "max_tokens"), 1024);
    ck_assert_str_eq(JS(b, "system"), "Be terse.");
    ck_assert_str_eq(JS(json_object_get(b, "thinking"), "type"), "adaptive");
    ck_assert_str_eq(JS(json_object_get(b, "output_config"), "effort"), "low");
    json_t *m = json_object_get(b, "messages");
    ck_assert_int_eq(json_array_size(m), 3); /* user, assistant, user(tool_result + text) */
    json_t *u = json_array_get(m, 0);
    ck_assert_str_eq(JS(u, "role"), "user");
    ck_assert_str_eq(JS(json_array_get(json_object_get(u, "content"), 0), "text"), "What is 2+3?");
    json_t *a = json_array_get(m, 1);
    ck_assert_str_eq(JS(a, "role"), "assistant");
    json_t *ac = json_object_get(a, "content");
    ck_assert_int_eq(json_array_size(ac), 2);
    ck_assert_str_eq(JS(json_array_get(ac, 0), "type"), "text");
    json_t *tu = json_array_get(ac, 1);
    ck_assert_str_eq(JS(tu, "type"), "tool_use");
    ck_assert_str_eq(JS(tu, "id"), "call_1");
    ck_assert_str_eq(JS(tu, "name"), "add");
    ck_assert_int_eq(JI(json_object_get(tu, "input"), "b"), 3);
    json_t *r = json_array_get(m, 2);
    ck_assert_str_eq(JS(r, "role"), "user");
    json_t *rc = json_object_get(r, "content");
    ck_assert_int_eq(json_array_size(rc), 2);
    json_t *tr = json_array_get(rc, 0);
    ck_assert_str_eq(JS(tr, "type"), "tool_result"); /* tool results come first */
    ck_assert_str_eq(JS(tr, "tool_use_id"), "call_1");
    ck_assert_str_eq(JS(tr, "content"), "{\"sum\":5}");
    ck_assert_ptr_null(json_object_get(tr, "is_error"));
    ck_assert_str_eq(JS(json_array_get(rc, 1), "text"), "Thanks");
    json_t *t = json_array_get(json_object_get(b, "tools"), 0);
    ck_assert_str_eq(JS(t, "name"), "add");
    ck_assert_str_eq(JS(t, "description"), "Adds");
    ck_assert_str_eq(JS(json_object_get(t, "input_schema"), "type"), "object");
    ck_assert_ptr_null(json_object_get(t, "type"));
    json_decref(b);
    /* Without thinking there is no thinking or output_config; an error result is flagged. */
    json_object_set_new(json_array_get(msgs, 2), "is_error", json_true());
    struct evd_hx_request q2 = {"claude-x", NULL, msgs, NULL, 64, NULL, NULL, NULL, false};
    b = evd_hx_build_request(EVD_KIND_ANTHROPIC_MESSAGES, &q2, &err);
    ck_assert_ptr_null(json_object_get(b, "thinking"));
    ck_assert_ptr_null(json_object_get(b, "output_config"));
    ck_assert_ptr_null(json_object_get(b, "system"));
    json_t *tr2 = json_array_get(
        json_object_get(json_array_get(json_object_get(b, "messages"), 2), "content"), 0);
    ck_assert(json_is_true(json_object_get(tr2, "is_error")));
    json_decref(b);
    json_decref(msgs);
    json_decref(tools);
    /* A conversation that opens with the assistant gets the user's opening line first. */
    msgs = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "assistant", "content", "Hello! Which city?",
                     "role", "user", "content", "Oslo.");
    struct evd_hx_request q3 = {"claude-x", NULL, msgs, NULL, 64, NULL, NULL, NULL, false};
    b = evd_hx_build_request(EVD_KIND_ANTHROPIC_MESSAGES, &q3, &err);
    m = json_object_get(b, "messages");
    ck_assert_int_eq(json_array_size(m), 3);
    ck_assert_str_eq(JS(json_array_get(m, 0), "role"), "user");
    ck_assert_str_eq(JS(json_array_get(json_object_get(json_array_get(m, 0), "content"), 0), "text"),
                     EVD_HX_ANTHROPIC_OPENING);
    ck_assert_str_eq(JS(json_array_get(m, 1), "role"), "assistant");
    ck_assert_str_eq(JS(json_array_get(m, 2), "role"), "user");
    json_decref(b);
    json_decref(msgs);
}
END_TEST

START_TEST(chat_request_shape)
{
    json_t *msgs = sample_conversation(), *tools = sample_tools();
    struct evd_hx_request q = {"qwen3", "Be terse.", msgs, tools, 300, "medium", NULL, NULL, false};
    struct evd_err err;
    json_t *b = evd_hx_build_request(EVD_KIND_OPENAI_CHAT, &q, &err);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(JS(b, "model"), "qwen3");
    ck_assert_int_eq(JI(b, "max_tokens"), 300);
    ck_assert_str_eq(JS(b, "reasoning_effort"), "medium");
    ck_assert(json_is_false(json_object_get(b, "stream")));
    json_t *m = json_object_get(b, "messages");
    ck_assert_int_eq(json_array_size(m), 4);
    ck_assert_str_eq(JS(json_array_get(m, 0), "role"), "system");
    ck_assert_str_eq(JS(json_array_get(m, 0), "content"), "Be terse.");
    ck_assert_str_eq(JS(json_array_get(m, 1), "role"), "user");
    json_t *a = json_array_get(m, 2);
    ck_assert_str_eq(JS(a, "role"), "assistant");
    ck_assert_str_eq(JS(a, "content"), "Let me add.");
    json_t *tc = json_array_get(json_object_get(a, "tool_calls"), 0);
    ck_assert_str_eq(JS(tc, "id"), "call_1");
    ck_assert_str_eq(JS(tc, "type"), "function");
    ck_assert_str_eq(JS(json_object_get(tc, "function"), "name"), "add");
    ck_assert_str_eq(JS(json_object_get(tc, "function"), "arguments"), "{\"a\":2,\"b\":3}");
    json_t *tm = json_array_get(m, 3);
    ck_assert_str_eq(JS(tm, "role"), "tool");
    ck_assert_str_eq(JS(tm, "tool_call_id"), "call_1");
    ck_assert_str_eq(JS(tm, "content"), "{\"sum\":5}");
    json_t *t = json_array_get(json_object_get(b, "tools"), 0);
    ck_assert_str_eq(JS(t, "type"), "function");
    ck_assert_str_eq(JS(json_object_get(t, "function"), "name"), "add");
    ck_assert_str_eq(JS(json_object_get(json_object_get(t, "function"), "parameters"), "type"),
                     "object");
    json_decref(b);
    json_decref(msgs);
    json_decref(tools);
}
END_TEST

/* ---- wire formats: replies ------------------------------------------------------------ */

START_TEST(responses_reply_parsing)
{
    json_t *body = json_loads(
        "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"model\":"
        "\"gpt-5\",\"output\":[{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]},"
        "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
        "\"text\":\"Hello \"},{\"type\":\"output_text\",\"text\":\"there\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"c9\",\"name\":\"add\",\"arguments\":"
        "\"{\\\"a\\\":1}\"}],\"usage\":{\"input_tokens\":30,\"input_tokens_details\":"
        "{\"cached_tokens\":10},\"output_tokens\":7,\"output_tokens_details\":"
        "{\"reasoning_tokens\":2},\"total_tokens\":37}}",
        0, NULL);
    struct evd_hx_reply r;
    struct evd_err err;
    ck_assert_int_eq(evd_hx_parse_reply(EVD_KIND_OPENAI_RESPONSES, body, &r, &err), EVD_OK);
    ck_assert_str_eq(r.text, "Hello there");
    ck_assert_int_eq(json_array_size(r.tool_calls), 1);
    json_t *c = json_array_get(r.tool_calls, 0);
    ck_assert_str_eq(JS(c, "id"), "c9");
    ck_assert_str_eq(JS(c, "name"), "add");
    ck_assert_int_eq(JI(json_object_get(c, "arguments"), "a"), 1);
    ck_assert(r.usage.has_input && r.usage.input == 30);
    ck_assert(r.usage.has_cache_read && r.usage.cache_read == 10);
    ck_assert(!r.usage.has_cache_write);
    ck_assert(r.usage.has_output && r.usage.output == 7);
    ck_assert(r.usage.has_reasoning && r.usage.reasoning == 2);
    ck_assert_str_eq(r.stop_reason, "completed");
    ck_assert_str_eq(JS(json_object_get(r.message, "provider_state"), "kind"), "openai-responses");
    evd_hx_reply_clear(&r);
    json_decref(body);

    body = json_loads("{\"status\":\"failed\",\"error\":{\"message\":\"boom\"},\"output\":[]}", 0,
                      NULL);
    ck_assert_int_eq(evd_hx_parse_reply(EVD_KIND_OPENAI_RESPONSES, body, &r, &err), EVD_EUPSTREAM);
    ck_assert_str_eq(err.msg, "response failed: boom");
    json_decref(body);
    body = json_loads("{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":"
                      "\"max_output_tokens\"},\"output\":[]}",
                      0, NULL);
    ck_assert_int_eq(evd_hx_parse_reply(EVD_KIND_OPENAI_RESPONSES, body, &r, &err), EVD_OK);
    ck_assert_str_eq(r.stop_reason, "max_output_tokens");
    ck_assert_str_eq(r.text, "");
    evd_hx_reply_clear(&r);
    json_decref(body);
}
END_TEST

START_TEST(anthropic_reply_parsing)
{
    json_t *body = json_loads(
        "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\","
        "\"content\":[{\"type\":\"thinking\",\"thinking\":\"hmm\",\"signature\":\"sig\"},"
        "{\"type\":\"text\",\"text\":\"Adding.\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\","
        "\"name\":\"add\",\"input\":{\"a\":2}}],\"stop_reason\":\"tool_use\",\"usage\":"
        "{\"input_tokens\":12,\"cache_read_input_tokens\":5,\"cache_creation_input_tokens\":3,"
        "\"output_tokens\":4}}",
        0, NULL);
    struct evd_hx_reply r;
    struct evd_err err;
    ck_assert_int_eq(evd_hx_parse_reply(EVD_KIND_ANTHROPIC_MESSAGES, body, &r, &err), EVD_OK);
    ck_assert_str_eq(r.text, "Adding.");
    ck_assert_str_eq(r.stop_reason, "tool_use");
    json_t *c = json_array_get(r.tool_calls, 0);
    ck_assert_str_eq(JS(c, "id"), "toolu_1");
    ck_assert_str_eq(JS(c, "arguments_text"), "{\"a\":2}");
    ck_assert_int_eq(r.usage.input, 20); /* 12 uncached + 5 read + 3 written */
    ck_assert_int_eq(r.usage.cache_read, 5);
    ck_assert_int_eq(r.usage.cache_write, 3);
    ck_assert_int_eq(r.usage.output, 4);
    ck_assert(!r.usage.has_reasoning);
    /* Replaying the turn keeps the signed thinking block. */
    json_t *msgs = json_pack("[{s:s,s:s},O]", "role", "user", "content", "x", r.message);
    struct evd_hx_request q = {"claude-x", NULL, msgs, NULL, 64, NULL, NULL, NULL, false};
    json_t *b = evd_hx_build_request(EVD_KIND_ANTHROPIC_MESSAGES, &q, &err);
    json_t *blocks = json_object_get(json_array_get(json_object_get(b, "messages"), 1), "content");
    ck_assert_int_eq(json_array_size(blocks), 3);
    ck_assert_str_eq(JS(json_array_get(blocks, 0), "signature"), "sig");
    json_decref(b);
    json_decref(msgs);
    evd_hx_reply_clear(&r);
    json_decref(body);
}
END_TEST

START_TEST(chat_reply_parsing)
{
    json_t *body = json_loads(
        "{\"id\":\"x\",\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"finish_reason\":"
        "\"tool_calls\",\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
        "[{\"id\":\"\",\"type\":\"function\",\"function\":{\"name\":\"add\",\"arguments\":"
        "\"not json\"}}]}}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,"
        "\"prompt_tokens_details\":{\"cached_tokens\":0}}}",
        0, NULL);
    struct evd_hx_reply r;
    struct evd_err err;
    ck_assert_int_eq(evd_hx_parse_reply(EVD_KIND_OPENAI_CHAT, body, &r, &err), EVD_OK);
    ck_assert_str_eq(r.text, "");
    ck_assert_str_eq(r.stop_reason, "tool_calls");
    json_t *c = json_array_get(r.tool_calls, 0);
    ck_assert_ptr_null(json_object_get(c, "arguments")); /* unparsable arguments */
    ck_assert_str_eq(JS(c, "arguments_text"), "not json");
    ck_assert(r.usage.has_input && r.usage.input == 9);
    ck_assert(r.usage.has_cache_read && r.usage.cache_read == 0);
    ck_assert(!r.usage.has_reasoning);
    evd_hx_reply_clear(&r);
    json_decref(body);
    body = json_loads("{\"choices\":[]}", 0, NULL);
    ck_assert_int_eq(evd_hx_parse_reply(EVD_KIND_OPENAI_CHAT, body, &r, &err), EVD_EUPSTREAM);
    json_decref(body);
}
END_TEST

/* ---- allocation failures -------------------------------------------------------------- */

static int alloc_budget = -1; /* -1 = unlimited */

static void *limited_malloc(size_t n)
{
    if (alloc_budget == 0)
        return NULL;
    if (alloc_budget > 0)
        alloc_budget--;
    return malloc(n);
}

START_TEST(builders_survive_allocation_failures)
{
    enum evd_provider_kind kinds[] = {EVD_KIND_OPENAI_RESPONSES, EVD_KIND_ANTHROPIC_MESSAGES,
                                      EVD_KIND_OPENAI_CHAT};
    json_t *msgs = sample_conversation(), *tools = sample_tools();
    json_t *opts = json_loads("{\"temperature\":0.2}", 0, NULL);
    struct evd_hx_request q = {"m", "sys", msgs, tools, 10, "low", opts, NULL, false};
    json_set_alloc_funcs(limited_malloc, free);
    for (int k = 0; k < 3; k++) {
        bool done = false;
        for (int budget = 0; budget < 2000 && !done; budget++) {
            struct evd_err err;
            alloc_budget = budget;
            json_t *b = evd_hx_build_request(kinds[k], &q, &err);
            alloc_budget = -1;
            done = b != NULL;
            json_decref(b);
        }
        ck_assert_msg(done, "kind %d never succeeded", k);
    }
    json_set_alloc_funcs(malloc, free);
    json_decref(msgs);
    json_decref(tools);
    json_decref(opts);
}
END_TEST

/* ---- cancel token and a run that never reaches the network ---------------------------- */

static void *trigger_later(void *arg)
{
    usleep(100 * 1000);
    evd_cancel_trigger(arg);
    return NULL;
}

static void count_wake(void *arg)
{
    (*(int *)arg)++;
}

/* A waker hears of a trigger and of a deadline moved, and of nothing once removed. */
START_TEST(cancel_calls_its_wakers)
{
    struct evd_cancel *c = evd_cancel_new();
    int a = 0, b = 0;
    struct evd_cancel_waker wa = {count_wake, &a, NULL}, wb = {count_wake, &b, NULL};
    evd_cancel_watch(c, &wa);
    evd_cancel_watch(c, &wb);
    ck_assert_int_eq(evd_cancel_deadline(c), 0);
    ck_assert(evd_cancel_set_deadline(c, evd_mono_ms() + 60000));
    ck_assert_int_gt(evd_cancel_deadline(c), evd_mono_ms());
    ck_assert_int_eq(a, 1);
    ck_assert_int_eq(b, 1);
    evd_cancel_unwatch(c, &wa);
    evd_cancel_trigger(c);
    ck_assert_int_eq(a, 1); /* removed: not called */
    ck_assert_int_eq(b, 2);
    evd_cancel_unwatch(c, &wb);
    evd_cancel_unwatch(c, &wb); /* twice: harmless */
    evd_cancel_trigger(c);
    ck_assert_int_eq(b, 2);
    evd_cancel_watch(NULL, &wa); /* NULL tokens: nothing */
    evd_cancel_unwatch(NULL, &wa);
    ck_assert_int_eq(evd_cancel_deadline(NULL), 0);
    evd_cancel_free(c);
}
END_TEST

START_TEST(cancel_wakes_sleep)
{
    struct evd_cancel *c = evd_cancel_new();
    pthread_t t;
    ck_assert(!evd_cancel_is_set(c));
    ck_assert(!evd_cancel_sleep(c, 20));
    int64_t t0 = evd_mono_ms();
    pthread_create(&t, NULL, trigger_later, c);
    ck_assert(evd_cancel_sleep(c, 10000));
    ck_assert_int_lt(evd_mono_ms() - t0, 2000);
    pthread_join(t, NULL);
    ck_assert(evd_cancel_is_set(c));
    ck_assert(!evd_cancel_is_set(NULL));
    evd_cancel_free(c);
}
END_TEST

START_TEST(bad_input_fails_in_setup)
{
    struct evd_providers *p = hs_env_default_providers();
    json_t *model = json_pack("{s:s,s:s}", "model", "gpt-5", "provider", "mystery");
    struct evd_harness_input in = {.session_id = "sess-1", .prompt = "hi", .model = model};
    struct evd_harness_outcome out;
    struct evd_err err;
    ck_assert_int_eq(evd_harness_run(p, &in, NULL, &out, &err), EVD_OK);
    ck_assert_int_eq(out.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(out.phase, "setup");
    ck_assert_msg(strstr(out.result_error, "model.provider \"mystery\"") != NULL, "%s",
                  out.result_error);
    json_t *tot = json_object_get(out.metrics, "totals");
    ck_assert_int_eq(JI(tot, "turns"), 0);
    ck_assert_ptr_null(json_object_get(tot, "input_tokens"));
    ck_assert_int_eq(JI(json_object_get(out.metrics, "traces"), "span_count"), 1);
    ck_assert_int_eq(JI(json_object_get(out.metrics, "traces"), "error_span_count"), 1);
    evd_harness_outcome_clear(&out);
    json_decref(model);

    model = json_pack("{s:s}", "model", "gpt-5");
    json_t *limits = json_loads("{\"execution\":{\"max_turns\":0}}", 0, NULL);
    in.model = model;
    in.limits = limits;
    ck_assert_int_eq(evd_harness_run(p, &in, NULL, &out, &err), EVD_OK);
    ck_assert_str_eq(out.result_error,
                     "limits.execution.max_turns must be an integer greater than zero");
    evd_harness_outcome_clear(&out);
    json_decref(limits);
    in.limits = NULL;
    in.prompt = "";
    ck_assert_int_eq(evd_harness_run(p, &in, NULL, &out, &err), EVD_OK);
    ck_assert_str_eq(out.result_error, "prompt cannot be empty");
    evd_harness_outcome_clear(&out);
    json_decref(model);
    evd_providers_free(p);
}
END_TEST

START_TEST(traces_from_spans)
{
    json_t *spans =
        json_loads("[{\"name\":\"run\",\"start_ms\":100,\"end_ms\":400,\"status\":\"ok\"},"
                   "{\"name\":\"generation\",\"start_ms\":110,\"end_ms\":200,\"status\":\"error\"},"
                   "{\"name\":\"evaluator\",\"start_ms\":410,\"end_ms\":450,\"status\":\"ok\"}]",
                   0, NULL);
    json_t *t = evd_harness_traces_from_spans("s1", spans);
    ck_assert_int_eq(JI(t, "trace_count"), 1);
    ck_assert_int_eq(JI(t, "span_count"), 3);
    ck_assert_int_eq(JI(t, "error_span_count"), 1);
    ck_assert_int_eq(JI(t, "duration_ms"), 350);
    json_t *bs = json_array_get(json_object_get(t, "by_session"), 0);
    ck_assert_str_eq(JS(bs, "session_id"), "s1");
    ck_assert_int_eq(JI(bs, "depth"), 0);
    ck_assert(json_is_null(json_object_get(bs, "parent_session_id")));
    json_decref(t);
    json_decref(spans);
}
END_TEST

static Suite *harness_suite(void)
{
    Suite *s = suite_create("harness");
    TCase *tc = tcase_create("loop_parts");
    tcase_add_loop_test(tc, system_prompt_table, 0, sizeof(sp_cases) / sizeof(sp_cases[0]));
    tcase_add_test(tc, system_prompt_rejects_unknown);
    tcase_add_loop_test(tc, policy_table, 0, sizeof(policy_cases) / sizeof(policy_cases[0]));
    tcase_add_test(tc, policy_check_names_field);
    tcase_add_test(tc, tool_names_are_safe_and_unique);
    tcase_add_test(tc, retry_after_parsing);
    tcase_add_test(tc, backoff_grows_with_jitter);
    tcase_add_test(tc, scrub_removes_keys);
    tcase_add_test(tc, scrub_removes_short_keys);
    tcase_add_test(tc, error_detail_shapes);
    tcase_add_test(tc, cancel_wakes_sleep);
    tcase_add_test(tc, cancel_calls_its_wakers);
    tcase_add_test(tc, bad_input_fails_in_setup);
    tcase_add_test(tc, traces_from_spans);
    suite_add_tcase(s, tc);

    tc = tcase_create("wire");
    tcase_add_test(tc, responses_request_shape);
    tcase_add_test(tc, responses_replays_its_own_items);
    tcase_add_test(tc, anthropic_request_shape);
    tcase_add_test(tc, chat_request_shape);
    tcase_add_test(tc, responses_reply_parsing);
    tcase_add_test(tc, anthropic_reply_parsing);
    tcase_add_test(tc, chat_reply_parsing);
    tcase_add_test(tc, builders_survive_allocation_failures);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return evd_test_run_suite(harness_suite());
}
