/*
 * Integration tests of evald-stub's answers: starts the real binary (EVALD_STUB_BIN) on a
 * free loopback port for each test and drives it over HTTP: the wire formats of the three
 * provider APIs and the model lists, scripts (usage, tool calls, rule order, `times` and
 * conditions, reply kinds, validation, a script file at start) and the built-in replies to
 * tools and structured output. Faults, latency, the request log and the process are in
 * test_stub_control.c; the shared client is tests/support/stub_client.h.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/itest.h"
#include "tests/support/stub_client.h"
#include "tests/support/testutil.h"

/* ---------------------------------------------------------------- helpers */

static char *chat_body(const char *prompt)
{
    json_t *b = json_pack("{s:s,s:[{s:s,s:s}]}", "model", "stub-model", "messages", "role", "user",
                          "content", prompt);
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

/* ---------------------------------------------------------------- wire formats */

START_TEST(responses_wire_builtin)
{
    struct evd_t_resp r;
    sc_post(&r, "/v1/responses", "{\"model\":\"stub-model\",\"input\":\"Reply with exactly OK.\"}",
            200);
    json_t *b = r.json;
    ck_assert_str_eq(sc_js(b, "object"), "response");
    ck_assert_str_eq(sc_js(b, "status"), "completed");
    ck_assert_str_eq(sc_js(b, "model"), "stub-model");
    ck_assert(strncmp(sc_js(b, "id"), "resp_", 5) == 0);
    ck_assert(sc_ji(b, "created_at") > 1700000000);
    ck_assert_str_eq(sc_js(b, "output.0.type"), "message");
    ck_assert_str_eq(sc_js(b, "output.0.role"), "assistant");
    ck_assert_str_eq(sc_js(b, "output.0.content.0.type"), "output_text");
    ck_assert_str_eq(sc_js(b, "output.0.content.0.text"), "OK");
    ck_assert_int_eq(sc_ji(b, "usage.total_tokens"),
                     sc_ji(b, "usage.input_tokens") + sc_ji(b, "usage.output_tokens"));
    ck_assert_int_eq(sc_ji(b, "usage.input_tokens_details.cached_tokens"), 0);
    ck_assert_int_eq(sc_ji(b, "usage.output_tokens_details.reasoning_tokens"), 0);
    ck_assert(sc_ji(b, "usage.output_tokens") >= 1);
    ck_assert(r.elapsed_ms >= 20); /* built-in latency is 20..60 ms */
    evd_t_resp_free(&r);

    /* Another phrasing gets a believable near miss that still contains the word. */
    sc_post(&r, "/v1/responses",
            "{\"model\":\"stub-model\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
            "\"input_text\",\"text\":\"Return exactly the text OK.\"}]}]}",
            200);
    const char *t = sc_reply_text(r.json);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_ne(t, "OK");
    ck_assert_ptr_nonnull(strstr(t, "OK"));
    char *first = strdup(t);
    evd_t_resp_free(&r);
    sc_post(&r, "/v1/responses",
            "{\"model\":\"stub-model\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
            "\"input_text\",\"text\":\"Return exactly the text OK.\"}]}]}",
            200);
    ck_assert_str_eq(sc_reply_text(r.json), first); /* deterministic */
    free(first);
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(chat_wire_builtin)
{
    struct evd_t_resp r;
    sc_post(&r, "/v1/chat/completions",
            "{\"model\":\"m1\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
            "{\"role\":\"user\",\"content\":\"Reply with exactly Done.\"}]}",
            200);
    json_t *b = r.json;
    ck_assert_str_eq(sc_js(b, "object"), "chat.completion");
    ck_assert_str_eq(sc_js(b, "model"), "m1");
    ck_assert(strncmp(sc_js(b, "id"), "chatcmpl-", 9) == 0);
    ck_assert_int_eq(sc_ji(b, "choices.0.index"), 0);
    ck_assert_str_eq(sc_js(b, "choices.0.message.role"), "assistant");
    ck_assert_str_eq(sc_js(b, "choices.0.message.content"), "Done");
    ck_assert_ptr_null(sc_jp(b, "choices.0.message.tool_calls"));
    ck_assert_str_eq(sc_js(b, "choices.0.finish_reason"), "stop");
    ck_assert_int_eq(sc_ji(b, "usage.total_tokens"),
                     sc_ji(b, "usage.prompt_tokens") + sc_ji(b, "usage.completion_tokens"));
    ck_assert_int_eq(sc_ji(b, "usage.prompt_tokens_details.cached_tokens"), 0);
    ck_assert_int_eq(sc_ji(b, "usage.completion_tokens_details.reasoning_tokens"), 0);
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(messages_wire_builtin)
{
    struct evd_t_resp r;
    const char *h[] = {"anthropic-version: 2023-06-01", NULL};
    sc_req(&r, "POST", "/v1/messages",
           "{\"model\":\"claude-x\",\"max_tokens\":64,\"system\":[{\"type\":\"text\",\"text\":"
           "\"sys\"}],\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
           "\"Reply with exactly OK.\"}]}]}",
           h);
    ck_assert_int_eq(r.status, 200);
    json_t *b = r.json;
    ck_assert_str_eq(sc_js(b, "type"), "message");
    ck_assert_str_eq(sc_js(b, "role"), "assistant");
    ck_assert_str_eq(sc_js(b, "model"), "claude-x");
    ck_assert(strncmp(sc_js(b, "id"), "msg_", 4) == 0);
    ck_assert_str_eq(sc_js(b, "content.0.type"), "text");
    ck_assert_str_eq(sc_js(b, "content.0.text"), "OK");
    ck_assert_str_eq(sc_js(b, "stop_reason"), "end_turn");
    ck_assert(json_is_null(sc_jp(b, "stop_sequence")));
    ck_assert(sc_ji(b, "usage.input_tokens") > 8);
    ck_assert_int_eq(sc_ji(b, "usage.cache_read_input_tokens"), 0);
    ck_assert_int_eq(sc_ji(b, "usage.cache_creation_input_tokens"), 0);
    ck_assert(sc_ji(b, "usage.output_tokens") >= 1);
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(models_both_shapes)
{
    struct evd_t_resp r;
    sc_req(&r, "GET", "/v1/models", NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(sc_js(r.json, "object"), "list");
    ck_assert_str_eq(sc_js(r.json, "data.0.object"), "model");
    ck_assert_str_eq(sc_js(r.json, "data.0.id"), "stub-model");
    ck_assert(json_is_integer(sc_jp(r.json, "data.0.created")));
    ck_assert_ptr_nonnull(sc_js(r.json, "data.0.owned_by"));
    evd_t_resp_free(&r);

    sc_put_script("{\"models\":[\"alpha\",\"beta\"]}");
    const char *h[] = {"anthropic-version: 2023-06-01", "x-api-key: k", NULL};
    sc_req(&r, "GET", "/v1/models", NULL, h);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(json_array_size(sc_jp(r.json, "data")), 2);
    ck_assert_str_eq(sc_js(r.json, "data.0.type"), "model");
    ck_assert_str_eq(sc_js(r.json, "data.1.id"), "beta");
    ck_assert_str_eq(sc_js(r.json, "data.0.display_name"), "alpha");
    ck_assert_ptr_nonnull(sc_js(r.json, "data.0.created_at"));
    ck_assert(json_is_false(sc_jp(r.json, "has_more")));
    ck_assert_str_eq(sc_js(r.json, "first_id"), "alpha");
    ck_assert_str_eq(sc_js(r.json, "last_id"), "beta");
    evd_t_resp_free(&r);

    sc_req(&r, "GET", "/v1/models/beta", NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(sc_js(r.json, "id"), "beta");
    evd_t_resp_free(&r);
    sc_req(&r, "GET", "/v1/models/gamma", NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    ck_assert_ptr_nonnull(sc_js(r.json, "error.message"));
    evd_t_resp_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- scripts */

START_TEST(usage_mapping_per_wire)
{
    sc_put_script("{\"default\":{\"reply\":{\"text\":\"hi\"},\"usage\":{\"input_tokens\":12,"
                  "\"cached_tokens\":5,\"cache_write_tokens\":2,\"output_tokens\":7,"
                  "\"reasoning_tokens\":3}}}");
    struct evd_t_resp r;
    sc_post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"x\"}", 200);
    ck_assert_int_eq(sc_ji(r.json, "usage.input_tokens"), 19);
    ck_assert_int_eq(sc_ji(r.json, "usage.input_tokens_details.cached_tokens"), 5);
    ck_assert_int_eq(sc_ji(r.json, "usage.input_tokens_details.cache_write_tokens"), 2);
    ck_assert_int_eq(sc_ji(r.json, "usage.output_tokens"), 7);
    ck_assert_int_eq(sc_ji(r.json, "usage.output_tokens_details.reasoning_tokens"), 3);
    ck_assert_int_eq(sc_ji(r.json, "usage.total_tokens"), 26);
    ck_assert_str_eq(sc_js(r.json, "output.0.type"), "reasoning");
    ck_assert_str_eq(sc_reply_text(r.json), "hi");
    evd_t_resp_free(&r);

    sc_post(&r, "/v1/chat/completions", "{\"model\":\"m\",\"messages\":[]}", 200);
    ck_assert_int_eq(sc_ji(r.json, "usage.prompt_tokens"), 19);
    ck_assert_int_eq(sc_ji(r.json, "usage.prompt_tokens_details.cached_tokens"), 5);
    ck_assert_int_eq(sc_ji(r.json, "usage.completion_tokens"), 7);
    ck_assert_int_eq(sc_ji(r.json, "usage.completion_tokens_details.reasoning_tokens"), 3);
    ck_assert_int_eq(sc_ji(r.json, "usage.total_tokens"), 26);
    evd_t_resp_free(&r);

    sc_post(&r, "/v1/messages", "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}", 200);
    ck_assert_int_eq(sc_ji(r.json, "usage.input_tokens"), 12);
    ck_assert_int_eq(sc_ji(r.json, "usage.cache_read_input_tokens"), 5);
    ck_assert_int_eq(sc_ji(r.json, "usage.cache_creation_input_tokens"), 2);
    ck_assert_int_eq(sc_ji(r.json, "usage.output_tokens"), 7);
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(tool_calls_per_wire)
{
    sc_put_script(
        "{\"rules\":[{\"when\":{\"has_tool_result\":false},\"reply\":{\"text\":\"let me "
        "look\",\"tool_calls\":[{\"name\":\"lookup\",\"arguments\":{\"q\":\"x\",\"n\":2}},"
        "{\"name\":\"noargs\"}]}}],\"default\":{\"reply\":{\"text\":\"after\"}}}");
    json_t *want = json_pack("{s:s,s:i}", "q", "x", "n", 2);
    struct evd_t_resp r;

    sc_post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"go\"}", 200);
    json_t *out = sc_jp(r.json, "output");
    ck_assert_int_eq(json_array_size(out), 3);
    ck_assert_str_eq(sc_js(out, "0.type"), "message");
    ck_assert_str_eq(sc_js(out, "0.content.0.text"), "let me look");
    ck_assert_str_eq(sc_js(out, "1.type"), "function_call");
    ck_assert_str_eq(sc_js(out, "1.name"), "lookup");
    ck_assert(strncmp(sc_js(out, "1.call_id"), "call_", 5) == 0);
    ck_assert_str_ne(sc_js(out, "1.call_id"), sc_js(out, "2.call_id"));
    json_t *args = json_loads(sc_js(out, "1.arguments"), 0, NULL);
    ck_assert(json_equal(args, want));
    json_decref(args);
    ck_assert_str_eq(sc_js(out, "2.arguments"), "{}");
    evd_t_resp_free(&r);

    sc_post(&r, "/v1/chat/completions",
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
            "\"content\":\"go\"}]}",
            200);
    ck_assert_str_eq(sc_js(r.json, "choices.0.finish_reason"), "tool_calls");
    ck_assert_str_eq(sc_js(r.json, "choices.0.message.content"), "let me look");
    ck_assert_str_eq(sc_js(r.json, "choices.0.message.tool_calls.0.type"), "function");
    ck_assert_str_eq(sc_js(r.json, "choices.0.message.tool_calls.0.function.name"), "lookup");
    ck_assert_ptr_nonnull(sc_js(r.json, "choices.0.message.tool_calls.0.id"));
    args = json_loads(sc_js(r.json, "choices.0.message.tool_calls.0.function.arguments"), 0, NULL);
    ck_assert(json_equal(args, want));
    json_decref(args);
    evd_t_resp_free(&r);

    sc_post(&r, "/v1/messages",
            "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
            "\"content\":\"go\"}]}",
            200);
    ck_assert_str_eq(sc_js(r.json, "stop_reason"), "tool_use");
    ck_assert_str_eq(sc_js(r.json, "content.0.type"), "text");
    ck_assert_str_eq(sc_js(r.json, "content.1.type"), "tool_use");
    ck_assert(strncmp(sc_js(r.json, "content.1.id"), "toolu_", 6) == 0);
    ck_assert(json_equal(sc_jp(r.json, "content.1.input"), want));
    ck_assert(json_is_object(sc_jp(r.json, "content.2.input")));
    ck_assert_int_eq(json_object_size(sc_jp(r.json, "content.2.input")), 0);
    evd_t_resp_free(&r);

    /* The round trip: with a tool result the first rule no longer matches. */
    sc_post(
        &r, "/v1/messages",
        "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"go\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":"
        "\"lookup\",\"input\":{}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
        "\"tool_use_id\":\"t1\",\"content\":\"7\"}]}]}",
        200);
    ck_assert_str_eq(sc_js(r.json, "content.0.text"), "after");
    ck_assert_str_eq(sc_js(r.json, "stop_reason"), "end_turn");
    evd_t_resp_free(&r);
    json_decref(want);
}
END_TEST

START_TEST(rules_order_times_and_conditions)
{
    sc_put_script("{\"rules\":["
                  "{\"when\":{\"api\":\"chat\",\"prompt_contains\":\"alpha\"},\"times\":2,"
                  "\"reply\":{\"text\":\"first\"}},"
                  "{\"when\":{\"model\":\"m2\"},\"reply\":{\"text\":\"model\"}},"
                  "{\"when\":{\"session\":\"S-1\"},\"reply\":{\"text\":\"session\"}},"
                  "{\"when\":{\"system_contains\":\"SYS\"},\"reply\":{\"text\":\"system\"}},"
                  "{\"when\":{\"has_tool_result\":true,\"tool_result_contains\":\"42\"},"
                  "\"reply\":{\"text\":\"tool\"}},"
                  "{\"when\":{\"api\":\"messages\",\"prompt_contains\":\"alpha\"},"
                  "\"reply\":{\"text\":\"messages\"}}],"
                  "\"default\":{\"reply\":{\"text\":\"dflt\"}}}");
    struct evd_t_resp r;
    char *alpha = chat_body("say alpha");
    const char *expect[] = {"first", "first", "dflt"};
    for (int i = 0; i < 3; i++) {
        sc_post(&r, "/v1/chat/completions", alpha, 200);
        ck_assert_str_eq(sc_reply_text(r.json), expect[i]);
        evd_t_resp_free(&r);
    }
    free(alpha);
    sc_post(&r, "/v1/responses", "{\"model\":\"m2\",\"input\":\"alpha\"}", 200);
    ck_assert_str_eq(sc_reply_text(r.json), "model");
    evd_t_resp_free(&r);

    const char *sh[] = {"X-Evald-Session: S-1", NULL};
    sc_req(&r, "POST", "/v1/responses", "{\"model\":\"m\",\"input\":\"q\"}", sh);
    ck_assert_str_eq(sc_reply_text(r.json), "session");
    evd_t_resp_free(&r);

    sc_post(&r, "/v1/responses", "{\"model\":\"m\",\"instructions\":\"be SYS\",\"input\":\"q\"}",
            200);
    ck_assert_str_eq(sc_reply_text(r.json), "system");
    evd_t_resp_free(&r);

#define TOOL_TPL                                                                                   \
    "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"              \
    "\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","         \
    "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\","                    \
    "\"tool_call_id\":\"c1\",\"content\":\"%s\"}]}"
    char body[512];
    snprintf(body, sizeof(body), TOOL_TPL, "answer 42");
    sc_post(&r, "/v1/chat/completions", body, 200);
    ck_assert_str_eq(sc_reply_text(r.json), "tool");
    evd_t_resp_free(&r);
    snprintf(body, sizeof(body), TOOL_TPL, "answer 43");
    sc_post(&r, "/v1/chat/completions", body, 200);
    ck_assert_str_eq(sc_reply_text(r.json), "dflt");
    evd_t_resp_free(&r);

    sc_post(&r, "/v1/messages",
            "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":"
            "\"alpha\"}]}",
            200);
    ck_assert_str_eq(sc_reply_text(r.json), "messages");
    evd_t_resp_free(&r);

    json_t *st = sc_stats();
    long long hits[] = {2, 1, 1, 1, 1, 1};
    for (int i = 0; i < 6; i++) {
        char p[32];
        snprintf(p, sizeof(p), "rules.%d.hits", i);
        ck_assert_int_eq(sc_ji(st, p), hits[i]);
    }
    json_decref(st);
    json_t *log = sc_request_log("");
    ck_assert_int_eq(json_array_size(log), 9);
    ck_assert_int_eq(sc_ji(log, "0.rule"), 0);
    ck_assert(json_is_null(sc_jp(log, "2.rule"))); /* the default answered */
    ck_assert_int_eq(sc_ji(log, "8.rule"), 5);
    json_decref(log);
}
END_TEST

START_TEST(reply_kinds)
{
    sc_put_script("{\"rules\":["
                  "{\"when\":{\"prompt_contains\":\"json\"},\"reply\":{\"json\":{\"a\":[1,2],"
                  "\"b\":\"x\"}}},"
                  "{\"when\":{\"prompt_contains\":\"refuse\"},\"reply\":{\"refusal\":\"no\"}},"
                  "{\"when\":{\"prompt_contains\":\"cut\"},\"reply\":{\"text\":\"par\","
                  "\"incomplete\":true}}]}");
    struct evd_t_resp r;
    sc_post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"json please\"}", 200);
    ck_assert_str_eq(sc_reply_text(r.json), "{\"a\":[1,2],\"b\":\"x\"}");
    evd_t_resp_free(&r);

    sc_post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"refuse\"}", 200);
    ck_assert_str_eq(sc_js(r.json, "output.0.content.0.type"), "refusal");
    ck_assert_str_eq(sc_js(r.json, "output.0.content.0.refusal"), "no");
    evd_t_resp_free(&r);
    char *b = chat_body("refuse");
    sc_post(&r, "/v1/chat/completions", b, 200);
    free(b);
    ck_assert_str_eq(sc_js(r.json, "choices.0.message.refusal"), "no");
    ck_assert(json_is_null(sc_jp(r.json, "choices.0.message.content")));
    evd_t_resp_free(&r);
    sc_post(&r, "/v1/messages",
            "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
            "\"content\":\"refuse\"}]}",
            200);
    ck_assert_str_eq(sc_js(r.json, "stop_reason"), "refusal");
    evd_t_resp_free(&r);

    sc_post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"cut\"}", 200);
    ck_assert_str_eq(sc_js(r.json, "status"), "incomplete");
    ck_assert_str_eq(sc_js(r.json, "incomplete_details.reason"), "max_output_tokens");
    evd_t_resp_free(&r);
    b = chat_body("cut");
    sc_post(&r, "/v1/chat/completions", b, 200);
    free(b);
    ck_assert_str_eq(sc_js(r.json, "choices.0.finish_reason"), "length");
    evd_t_resp_free(&r);
    sc_post(&r, "/v1/messages",
            "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
            "\"content\":\"cut\"}]}",
            200);
    ck_assert_str_eq(sc_js(r.json, "stop_reason"), "max_tokens");
    evd_t_resp_free(&r);
}
END_TEST

static const struct {
    const char *script;
    const char *needle;
} bad_scripts[] = {
    {"[1]", "must be a JSON object"},
    {"{\"rulez\":[]}", "unknown field \"rulez\""},
    {"{\"rules\":[{\"when\":{\"promt_contains\":\"x\"}}]}",
     "rules[0].when: unknown field \"promt_contains\""},
    {"{\"rules\":[{},{\"when\":{\"api\":\"soap\"}}]}", "rules[1].when.api"},
    {"{\"rules\":[{\"fault\":{\"status\":200}}]}", "rules[0].fault.status"},
    {"{\"rules\":[{\"fault\":{\"stall\":true,\"truncate\":true}}]}",
     "rules[0].fault needs exactly one"},
    {"{\"rules\":[{\"fault\":{\"malformed\":false}}]}", "rules[0].fault.malformed must be true"},
    {"{\"rules\":[{\"fault\":{\"header_bytes\":0}}]}", "rules[0].fault.header_bytes"},
    {"{\"rules\":[{\"fault\":{\"header_bytes\":16777217}}]}", "rules[0].fault.header_bytes"},
    {"{\"rules\":[{\"fault\":{\"header_bytes\":10,\"stall\":true}}]}",
     "rules[0].fault needs exactly one"},
    {"{\"rules\":[{\"fault\":{\"stall\":true,\"retry_after_s\":1}}]}", "need \"status\""},
    {"{\"rules\":[{\"reply\":{}}]}", "rules[0].reply needs one of"},
    {"{\"rules\":[{\"reply\":{\"tool_calls\":[{\"arguments\":{}}]}}]}",
     "rules[0].reply.tool_calls[0].name"},
    {"{\"rules\":[{\"times\":0}]}", "rules[0].times"},
    {"{\"default\":{\"usage\":{\"output_tokens\":1,\"reasoning_tokens\":2}}}",
     "default.usage.reasoning_tokens"},
    {"{\"rules\":[{\"latency_ms\":-1}]}", "rules[0].latency_ms"},
    {"{\"rules\":", "not valid JSON"},
};

START_TEST(script_put_validation)
{
    sc_put_script("{\"default\":{\"reply\":{\"text\":\"kept\"}}}");
    struct evd_t_resp r;
    sc_req(&r, "PUT", "/_stub/script", bad_scripts[_i].script, NULL);
    ck_assert_int_eq(r.status, 400);
    const char *msg = sc_js(r.json, "error.message");
    ck_assert_ptr_nonnull(msg);
    ck_assert_msg(strstr(msg, bad_scripts[_i].needle) != NULL, "message \"%s\" lacks \"%s\"", msg,
                  bad_scripts[_i].needle);
    evd_t_resp_free(&r);
    /* The previous script still answers. */
    sc_post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"q\"}", 200);
    ck_assert_str_eq(sc_reply_text(r.json), "kept");
    evd_t_resp_free(&r);
    sc_req(&r, "GET", "/_stub/script", NULL, NULL);
    ck_assert_str_eq(sc_js(r.json, "default.reply.text"), "kept");
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(script_file_at_start)
{
    ck_assert_int_eq(evd_t_stop(&sc_stub, SIGTERM, 5000), 0);
    ck_assert_int_eq(evd_t_stub_start(&sc_stub,
                                      "{\"rules\":[{\"when\":{\"api\":\"chat\"},"
                                      "\"reply\":{\"text\":\"from file\"}}]}",
                                      NULL),
                     0);
    struct evd_t_resp r;
    char *b = chat_body("x");
    sc_post(&r, "/v1/chat/completions", b, 200);
    free(b);
    ck_assert_str_eq(sc_reply_text(r.json), "from file");
    evd_t_resp_free(&r);

    /* An invalid script file stops the stub before it is ready. */
    struct evd_t_proc bad;
    ck_assert_int_eq(evd_t_stub_start(&bad, "{\"rules\":[{\"nope\":1}]}", NULL), -1);
    ck_assert_int_eq(bad.pid, 0);
}
END_TEST

/* ---------------------------------------------------------------- built-in behaviour */

START_TEST(builtin_tool_round_trip)
{
    struct evd_t_resp r;
    const char *tools = "\"tools\":[{\"type\":\"function\",\"name\":\"get_time\",\"parameters\":"
                        "{\"type\":\"object\",\"properties\":{\"tz\":{\"type\":\"string\","
                        "\"enum\":[\"UTC\",\"CET\"]},\"n\":{\"type\":\"integer\",\"minimum\":3}},"
                        "\"required\":[\"tz\",\"n\"]}}]";
    char body[1024];
    snprintf(body, sizeof(body), "{\"model\":\"m\",\"input\":\"Call get_time please\",%s}", tools);
    sc_post(&r, "/v1/responses", body, 200);
    ck_assert_str_eq(sc_js(r.json, "output.0.type"), "function_call");
    ck_assert_str_eq(sc_js(r.json, "output.0.name"), "get_time");
    ck_assert_str_eq(sc_js(r.json, "output.0.arguments"), "{\"tz\":\"UTC\",\"n\":3}");
    evd_t_resp_free(&r);

    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":\"Call get_time "
             "please\"},{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"get_time\","
             "\"arguments\":\"{}\"},{\"type\":\"function_call_output\",\"call_id\":\"c1\","
             "\"output\":\"12:00 UTC\"}],%s}",
             tools);
    sc_post(&r, "/v1/responses", body, 200);
    ck_assert_str_eq(sc_js(r.json, "output.0.type"), "message");
    ck_assert_ptr_nonnull(strstr(sc_reply_text(r.json), "12:00 UTC"));
    evd_t_resp_free(&r);

    /* Messages: tool offered by name in the prompt. */
    sc_post(&r, "/v1/messages",
            "{\"model\":\"m\",\"max_tokens\":9,\"tools\":[{\"name\":\"lookup\",\"input_schema\":"
            "{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\"}}}}],\"messages\":"
            "[{\"role\":\"user\",\"content\":\"use lookup\"}]}",
            200);
    ck_assert_str_eq(sc_js(r.json, "content.0.type"), "tool_use");
    ck_assert_str_eq(sc_js(r.json, "content.0.input.q"), "stub");
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(builtin_structured_output)
{
    struct evd_t_resp r;
    const char *schema =
        "{\"type\":\"object\",\"properties\":{\"verdict\":{\"type\":\"string\",\"enum\":"
        "[\"GREEN\",\"RED\"]},\"score\":{\"type\":[\"integer\",\"null\"],\"minimum\":2},"
        "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1},"
        "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"verdict\",\"score\",\"tags\",\"ok\"],"
        "\"additionalProperties\":false}";
    json_t *want =
        json_loads("{\"verdict\":\"GREEN\",\"score\":2,\"tags\":[\"stub\"],\"ok\":true}", 0, NULL);
    char body[2048];
    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"input\":\"judge\",\"text\":{\"format\":{\"type\":"
             "\"json_schema\",\"name\":\"v\",\"strict\":true,\"schema\":%s}}}",
             schema);
    sc_post(&r, "/v1/responses", body, 200);
    json_t *got = json_loads(sc_reply_text(r.json), 0, NULL);
    ck_assert_msg(json_equal(got, want), "got %s", sc_reply_text(r.json));
    json_decref(got);
    evd_t_resp_free(&r);

    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"judge\"}],"
             "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"v\","
             "\"schema\":%s}}}",
             schema);
    sc_post(&r, "/v1/chat/completions", body, 200);
    got = json_loads(sc_reply_text(r.json), 0, NULL);
    ck_assert(json_equal(got, want));
    json_decref(got);
    evd_t_resp_free(&r);

    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":"
             "\"judge\"}],\"output_config\":{\"format\":{\"type\":\"json_schema\",\"schema\":"
             "%s}}}",
             schema);
    sc_post(&r, "/v1/messages", body, 200);
    got = json_loads(sc_reply_text(r.json), 0, NULL);
    ck_assert(json_equal(got, want));
    json_decref(got);
    evd_t_resp_free(&r);
    json_decref(want);

    /* Formats, lengths and bounds are honoured. */
    sc_post(&r, "/v1/responses",
            "{\"model\":\"m\",\"input\":\"q\",\"text\":{\"format\":{\"type\":\"json_schema\","
            "\"name\":\"f\",\"schema\":{\"type\":\"object\",\"properties\":{\"when\":{\"type\":"
            "\"string\",\"format\":\"date-time\"},\"code\":{\"type\":\"string\",\"minLength\":6},"
            "\"short\":{\"type\":\"string\",\"maxLength\":2},\"x\":{\"type\":\"number\","
            "\"exclusiveMinimum\":5},\"k\":{\"type\":\"integer\",\"minimum\":2.5}}}}}}",
            200);
    want = json_loads("{\"when\":\"2025-01-01T00:00:00Z\",\"code\":\"stubxx\",\"short\":\"st\","
                      "\"x\":6.0,\"k\":3}",
                      0, NULL);
    got = json_loads(sc_reply_text(r.json), 0, NULL);
    ck_assert_msg(json_equal(got, want), "got %s", sc_reply_text(r.json));
    json_decref(got);
    json_decref(want);
    evd_t_resp_free(&r);
}
END_TEST

int main(void)
{
    if (getenv("EVALD_STUB_BIN") == NULL) {
        fprintf(stderr, "EVALD_STUB_BIN is not set; run this test through ctest\n");
        return 1;
    }
    Suite *s = suite_create("stub_wire");
    TCase *wire = tcase_create("wire");
    TCase *script = tcase_create("script");
    TCase *all[] = {wire, script};
    for (int i = 0; i < 2; i++) {
        tcase_add_checked_fixture(all[i], sc_setup, sc_teardown);
        tcase_set_timeout(all[i], 60);
        suite_add_tcase(s, all[i]);
    }
    tcase_add_test(wire, responses_wire_builtin);
    tcase_add_test(wire, chat_wire_builtin);
    tcase_add_test(wire, messages_wire_builtin);
    tcase_add_test(wire, models_both_shapes);
    tcase_add_test(wire, usage_mapping_per_wire);
    tcase_add_test(wire, tool_calls_per_wire);
    tcase_add_test(wire, builtin_tool_round_trip);
    tcase_add_test(wire, builtin_structured_output);
    tcase_add_test(script, rules_order_times_and_conditions);
    tcase_add_test(script, reply_kinds);
    tcase_add_loop_test(script, script_put_validation, 0,
                        (int)(sizeof(bad_scripts) / sizeof(bad_scripts[0])));
    tcase_add_test(script, script_file_at_start);
    return evd_test_run_suite(s);
}
