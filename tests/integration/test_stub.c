/*
 * Integration tests of evald-stub: starts the real binary (EVALD_STUB_BIN) on a free
 * loopback port for each test and drives it over HTTP: wire formats of the three
 * provider APIs, scripts, faults, latency, concurrency statistics, the request log and
 * its redaction, and process behaviour.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>
#include <time.h>

#include "common/util.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static struct evd_t_proc stub;

/* ---------------------------------------------------------------- helpers */

/* Value at a dotted path ("output.0.content.0.text"); borrowed reference or NULL. */
static json_t *jp(json_t *root, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    json_t *cur = root;
    for (char *save = NULL, *seg = strtok_r(buf, ".", &save); seg != NULL && cur != NULL;
         seg = strtok_r(NULL, ".", &save)) {
        if (json_is_array(cur))
            cur = json_array_get(cur, strtoul(seg, NULL, 10));
        else
            cur = json_object_get(cur, seg);
    }
    return cur;
}

static const char *js(json_t *root, const char *path)
{
    return json_string_value(jp(root, path));
}

static long long ji(json_t *root, const char *path)
{
    json_t *v = jp(root, path);
    ck_assert_msg(json_is_integer(v), "%s is not an integer", path);
    return (long long)json_integer_value(v);
}

static void req(struct evd_t_resp *r, const char *method, const char *path, const char *body,
                const char *const *headers)
{
    char url[256];
    snprintf(url, sizeof(url), "%s%s", stub.base, path);
    evd_t_http_timed(method, url, headers, body, body ? strlen(body) : 0, 10000, r);
    ck_assert_msg(r->curl_code == 0, "%s %s: curl error %d", method, path, r->curl_code);
}

/* POST `body` to `path` and expect `status`; the response is left in *r. */
static void post(struct evd_t_resp *r, const char *path, const char *body, long status)
{
    req(r, "POST", path, body, NULL);
    ck_assert_msg(r->status == status, "POST %s: status %ld, want %ld: %s", path, r->status, status,
                  r->body);
    ck_assert_msg(r->json != NULL, "POST %s: body is not JSON: %s", path, r->body);
}

static void put_script(const char *script)
{
    struct evd_t_resp r;
    req(&r, "PUT", "/_stub/script", script, NULL);
    ck_assert_msg(r.status == 200, "PUT /_stub/script: %ld %s", r.status, r.body);
    evd_t_resp_free(&r);
}

static json_t *stats(void)
{
    struct evd_t_resp r;
    req(&r, "GET", "/_stub/stats", NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    json_t *s = json_incref(r.json);
    evd_t_resp_free(&r);
    return s;
}

static json_t *request_log(const char *query)
{
    struct evd_t_resp r;
    char path[64];
    snprintf(path, sizeof(path), "/_stub/requests%s", query);
    req(&r, "GET", path, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    json_t *l = json_incref(jp(r.json, "requests"));
    ck_assert(json_is_array(l));
    evd_t_resp_free(&r);
    return l;
}

/* Text of the reply in any of the three wires. */
static const char *reply_text(json_t *body)
{
    if (js(body, "object") != NULL && strcmp(js(body, "object"), "response") == 0) {
        size_t i;
        json_t *item;
        json_array_foreach(jp(body, "output"), i, item)
        {
            if (strcmp(js(item, "type"), "message") == 0)
                return js(item, "content.0.text");
        }
        return NULL;
    }
    if (jp(body, "choices") != NULL)
        return js(body, "choices.0.message.content");
    return js(body, "content.0.text");
}

static char *chat_body(const char *prompt)
{
    json_t *b = json_pack("{s:s,s:[{s:s,s:s}]}", "model", "stub-model", "messages", "role", "user",
                          "content", prompt);
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

static void setup(void)
{
    ck_assert_msg(evd_t_stub_start(&stub, NULL, NULL) == 0, "evald-stub did not start");
}

static void teardown(void)
{
    ck_assert_int_eq(evd_t_stop(&stub, SIGTERM, 5000), 0);
}

/* ---------------------------------------------------------------- wire formats */

START_TEST(responses_wire_builtin)
{
    struct evd_t_resp r;
    post(&r, "/v1/responses", "{\"model\":\"stub-model\",\"input\":\"Reply with exactly OK.\"}",
         200);
    json_t *b = r.json;
    ck_assert_str_eq(js(b, "object"), "response");
    ck_assert_str_eq(js(b, "status"), "completed");
    ck_assert_str_eq(js(b, "model"), "stub-model");
    ck_assert(strncmp(js(b, "id"), "resp_", 5) == 0);
    ck_assert(ji(b, "created_at") > 1700000000);
    ck_assert_str_eq(js(b, "output.0.type"), "message");
    ck_assert_str_eq(js(b, "output.0.role"), "assistant");
    ck_assert_str_eq(js(b, "output.0.content.0.type"), "output_text");
    ck_assert_str_eq(js(b, "output.0.content.0.text"), "OK");
    ck_assert_int_eq(ji(b, "usage.total_tokens"),
                     ji(b, "usage.input_tokens") + ji(b, "usage.output_tokens"));
    ck_assert_int_eq(ji(b, "usage.input_tokens_details.cached_tokens"), 0);
    ck_assert_int_eq(ji(b, "usage.output_tokens_details.reasoning_tokens"), 0);
    ck_assert(ji(b, "usage.output_tokens") >= 1);
    ck_assert(r.elapsed_ms >= 20); /* built-in latency is 20..60 ms */
    evd_t_resp_free(&r);

    /* Another phrasing gets a believable near miss that still contains the word. */
    post(&r, "/v1/responses",
         "{\"model\":\"stub-model\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"input_text\",\"text\":\"Return exactly the text OK.\"}]}]}",
         200);
    const char *t = reply_text(r.json);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_ne(t, "OK");
    ck_assert_ptr_nonnull(strstr(t, "OK"));
    char *first = strdup(t);
    evd_t_resp_free(&r);
    post(&r, "/v1/responses",
         "{\"model\":\"stub-model\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"input_text\",\"text\":\"Return exactly the text OK.\"}]}]}",
         200);
    ck_assert_str_eq(reply_text(r.json), first); /* deterministic */
    free(first);
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(chat_wire_builtin)
{
    struct evd_t_resp r;
    post(&r, "/v1/chat/completions",
         "{\"model\":\"m1\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
         "{\"role\":\"user\",\"content\":\"Reply with exactly Done.\"}]}",
         200);
    json_t *b = r.json;
    ck_assert_str_eq(js(b, "object"), "chat.completion");
    ck_assert_str_eq(js(b, "model"), "m1");
    ck_assert(strncmp(js(b, "id"), "chatcmpl-", 9) == 0);
    ck_assert_int_eq(ji(b, "choices.0.index"), 0);
    ck_assert_str_eq(js(b, "choices.0.message.role"), "assistant");
    ck_assert_str_eq(js(b, "choices.0.message.content"), "Done");
    ck_assert_ptr_null(jp(b, "choices.0.message.tool_calls"));
    ck_assert_str_eq(js(b, "choices.0.finish_reason"), "stop");
    ck_assert_int_eq(ji(b, "usage.total_tokens"),
                     ji(b, "usage.prompt_tokens") + ji(b, "usage.completion_tokens"));
    ck_assert_int_eq(ji(b, "usage.prompt_tokens_details.cached_tokens"), 0);
    ck_assert_int_eq(ji(b, "usage.completion_tokens_details.reasoning_tokens"), 0);
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(messages_wire_builtin)
{
    struct evd_t_resp r;
    const char *h[] = {"anthropic-version: 2023-06-01", NULL};
    req(&r, "POST", "/v1/messages",
        "{\"model\":\"claude-x\",\"max_tokens\":64,\"system\":[{\"type\":\"text\",\"text\":"
        "\"sys\"}],\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
        "\"Reply with exactly OK.\"}]}]}",
        h);
    ck_assert_int_eq(r.status, 200);
    json_t *b = r.json;
    ck_assert_str_eq(js(b, "type"), "message");
    ck_assert_str_eq(js(b, "role"), "assistant");
    ck_assert_str_eq(js(b, "model"), "claude-x");
    ck_assert(strncmp(js(b, "id"), "msg_", 4) == 0);
    ck_assert_str_eq(js(b, "content.0.type"), "text");
    ck_assert_str_eq(js(b, "content.0.text"), "OK");
    ck_assert_str_eq(js(b, "stop_reason"), "end_turn");
    ck_assert(json_is_null(jp(b, "stop_sequence")));
    ck_assert(ji(b, "usage.input_tokens") > 8);
    ck_assert_int_eq(ji(b, "usage.cache_read_input_tokens"), 0);
    ck_assert_int_eq(ji(b, "usage.cache_creation_input_tokens"), 0);
    ck_assert(ji(b, "usage.output_tokens") >= 1);
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(models_both_shapes)
{
    struct evd_t_resp r;
    req(&r, "GET", "/v1/models", NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(js(r.json, "object"), "list");
    ck_assert_str_eq(js(r.json, "data.0.object"), "model");
    ck_assert_str_eq(js(r.json, "data.0.id"), "stub-model");
    ck_assert(json_is_integer(jp(r.json, "data.0.created")));
    ck_assert_ptr_nonnull(js(r.json, "data.0.owned_by"));
    evd_t_resp_free(&r);

    put_script("{\"models\":[\"alpha\",\"beta\"]}");
    const char *h[] = {"anthropic-version: 2023-06-01", "x-api-key: k", NULL};
    req(&r, "GET", "/v1/models", NULL, h);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(json_array_size(jp(r.json, "data")), 2);
    ck_assert_str_eq(js(r.json, "data.0.type"), "model");
    ck_assert_str_eq(js(r.json, "data.1.id"), "beta");
    ck_assert_str_eq(js(r.json, "data.0.display_name"), "alpha");
    ck_assert_ptr_nonnull(js(r.json, "data.0.created_at"));
    ck_assert(json_is_false(jp(r.json, "has_more")));
    ck_assert_str_eq(js(r.json, "first_id"), "alpha");
    ck_assert_str_eq(js(r.json, "last_id"), "beta");
    evd_t_resp_free(&r);

    req(&r, "GET", "/v1/models/beta", NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(js(r.json, "id"), "beta");
    evd_t_resp_free(&r);
    req(&r, "GET", "/v1/models/gamma", NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    ck_assert_ptr_nonnull(js(r.json, "error.message"));
    evd_t_resp_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- scripts */

START_TEST(usage_mapping_per_wire)
{
    put_script("{\"default\":{\"reply\":{\"text\":\"hi\"},\"usage\":{\"input_tokens\":12,"
               "\"cached_tokens\":5,\"cache_write_tokens\":2,\"output_tokens\":7,"
               "\"reasoning_tokens\":3}}}");
    struct evd_t_resp r;
    post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"x\"}", 200);
    ck_assert_int_eq(ji(r.json, "usage.input_tokens"), 19);
    ck_assert_int_eq(ji(r.json, "usage.input_tokens_details.cached_tokens"), 5);
    ck_assert_int_eq(ji(r.json, "usage.input_tokens_details.cache_write_tokens"), 2);
    ck_assert_int_eq(ji(r.json, "usage.output_tokens"), 7);
    ck_assert_int_eq(ji(r.json, "usage.output_tokens_details.reasoning_tokens"), 3);
    ck_assert_int_eq(ji(r.json, "usage.total_tokens"), 26);
    ck_assert_str_eq(js(r.json, "output.0.type"), "reasoning");
    ck_assert_str_eq(reply_text(r.json), "hi");
    evd_t_resp_free(&r);

    post(&r, "/v1/chat/completions", "{\"model\":\"m\",\"messages\":[]}", 200);
    ck_assert_int_eq(ji(r.json, "usage.prompt_tokens"), 19);
    ck_assert_int_eq(ji(r.json, "usage.prompt_tokens_details.cached_tokens"), 5);
    ck_assert_int_eq(ji(r.json, "usage.completion_tokens"), 7);
    ck_assert_int_eq(ji(r.json, "usage.completion_tokens_details.reasoning_tokens"), 3);
    ck_assert_int_eq(ji(r.json, "usage.total_tokens"), 26);
    evd_t_resp_free(&r);

    post(&r, "/v1/messages", "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}", 200);
    ck_assert_int_eq(ji(r.json, "usage.input_tokens"), 12);
    ck_assert_int_eq(ji(r.json, "usage.cache_read_input_tokens"), 5);
    ck_assert_int_eq(ji(r.json, "usage.cache_creation_input_tokens"), 2);
    ck_assert_int_eq(ji(r.json, "usage.output_tokens"), 7);
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(tool_calls_per_wire)
{
    put_script("{\"rules\":[{\"when\":{\"has_tool_result\":false},\"reply\":{\"text\":\"let me "
               "look\",\"tool_calls\":[{\"name\":\"lookup\",\"arguments\":{\"q\":\"x\",\"n\":2}},"
               "{\"name\":\"noargs\"}]}}],\"default\":{\"reply\":{\"text\":\"after\"}}}");
    json_t *want = json_pack("{s:s,s:i}", "q", "x", "n", 2);
    struct evd_t_resp r;

    post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"go\"}", 200);
    json_t *out = jp(r.json, "output");
    ck_assert_int_eq(json_array_size(out), 3);
    ck_assert_str_eq(js(out, "0.type"), "message");
    ck_assert_str_eq(js(out, "0.content.0.text"), "let me look");
    ck_assert_str_eq(js(out, "1.type"), "function_call");
    ck_assert_str_eq(js(out, "1.name"), "lookup");
    ck_assert(strncmp(js(out, "1.call_id"), "call_", 5) == 0);
    ck_assert_str_ne(js(out, "1.call_id"), js(out, "2.call_id"));
    json_t *args = json_loads(js(out, "1.arguments"), 0, NULL);
    ck_assert(json_equal(args, want));
    json_decref(args);
    ck_assert_str_eq(js(out, "2.arguments"), "{}");
    evd_t_resp_free(&r);

    post(&r, "/v1/chat/completions",
         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
         "\"content\":\"go\"}]}",
         200);
    ck_assert_str_eq(js(r.json, "choices.0.finish_reason"), "tool_calls");
    ck_assert_str_eq(js(r.json, "choices.0.message.content"), "let me look");
    ck_assert_str_eq(js(r.json, "choices.0.message.tool_calls.0.type"), "function");
    ck_assert_str_eq(js(r.json, "choices.0.message.tool_calls.0.function.name"), "lookup");
    ck_assert_ptr_nonnull(js(r.json, "choices.0.message.tool_calls.0.id"));
    args = json_loads(js(r.json, "choices.0.message.tool_calls.0.function.arguments"), 0, NULL);
    ck_assert(json_equal(args, want));
    json_decref(args);
    evd_t_resp_free(&r);

    post(&r, "/v1/messages",
         "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
         "\"content\":\"go\"}]}",
         200);
    ck_assert_str_eq(js(r.json, "stop_reason"), "tool_use");
    ck_assert_str_eq(js(r.json, "content.0.type"), "text");
    ck_assert_str_eq(js(r.json, "content.1.type"), "tool_use");
    ck_assert(strncmp(js(r.json, "content.1.id"), "toolu_", 6) == 0);
    ck_assert(json_equal(jp(r.json, "content.1.input"), want));
    ck_assert(json_is_object(jp(r.json, "content.2.input")));
    ck_assert_int_eq(json_object_size(jp(r.json, "content.2.input")), 0);
    evd_t_resp_free(&r);

    /* The round trip: with a tool result the first rule no longer matches. */
    post(&r, "/v1/messages",
         "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"go\"},"
         "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":"
         "\"lookup\",\"input\":{}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
         "\"tool_use_id\":\"t1\",\"content\":\"7\"}]}]}",
         200);
    ck_assert_str_eq(js(r.json, "content.0.text"), "after");
    ck_assert_str_eq(js(r.json, "stop_reason"), "end_turn");
    evd_t_resp_free(&r);
    json_decref(want);
}
END_TEST

START_TEST(rules_order_times_and_conditions)
{
    put_script("{\"rules\":["
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
        post(&r, "/v1/chat/completions", alpha, 200);
        ck_assert_str_eq(reply_text(r.json), expect[i]);
        evd_t_resp_free(&r);
    }
    free(alpha);
    post(&r, "/v1/responses", "{\"model\":\"m2\",\"input\":\"alpha\"}", 200);
    ck_assert_str_eq(reply_text(r.json), "model");
    evd_t_resp_free(&r);

    const char *sh[] = {"X-Evald-Session: S-1", NULL};
    req(&r, "POST", "/v1/responses", "{\"model\":\"m\",\"input\":\"q\"}", sh);
    ck_assert_str_eq(reply_text(r.json), "session");
    evd_t_resp_free(&r);

    post(&r, "/v1/responses", "{\"model\":\"m\",\"instructions\":\"be SYS\",\"input\":\"q\"}", 200);
    ck_assert_str_eq(reply_text(r.json), "system");
    evd_t_resp_free(&r);

#define TOOL_TPL                                                                                   \
    "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"              \
    "\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","         \
    "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\","                    \
    "\"tool_call_id\":\"c1\",\"content\":\"%s\"}]}"
    char body[512];
    snprintf(body, sizeof(body), TOOL_TPL, "answer 42");
    post(&r, "/v1/chat/completions", body, 200);
    ck_assert_str_eq(reply_text(r.json), "tool");
    evd_t_resp_free(&r);
    snprintf(body, sizeof(body), TOOL_TPL, "answer 43");
    post(&r, "/v1/chat/completions", body, 200);
    ck_assert_str_eq(reply_text(r.json), "dflt");
    evd_t_resp_free(&r);

    post(&r, "/v1/messages",
         "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"alpha\"}]}",
         200);
    ck_assert_str_eq(reply_text(r.json), "messages");
    evd_t_resp_free(&r);

    json_t *st = stats();
    long long hits[] = {2, 1, 1, 1, 1, 1};
    for (int i = 0; i < 6; i++) {
        char p[32];
        snprintf(p, sizeof(p), "rules.%d.hits", i);
        ck_assert_int_eq(ji(st, p), hits[i]);
    }
    json_decref(st);
    json_t *log = request_log("");
    ck_assert_int_eq(json_array_size(log), 9);
    ck_assert_int_eq(ji(log, "0.rule"), 0);
    ck_assert(json_is_null(jp(log, "2.rule"))); /* the default answered */
    ck_assert_int_eq(ji(log, "8.rule"), 5);
    json_decref(log);
}
END_TEST

START_TEST(reply_kinds)
{
    put_script("{\"rules\":["
               "{\"when\":{\"prompt_contains\":\"json\"},\"reply\":{\"json\":{\"a\":[1,2],"
               "\"b\":\"x\"}}},"
               "{\"when\":{\"prompt_contains\":\"refuse\"},\"reply\":{\"refusal\":\"no\"}},"
               "{\"when\":{\"prompt_contains\":\"cut\"},\"reply\":{\"text\":\"par\","
               "\"incomplete\":true}}]}");
    struct evd_t_resp r;
    post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"json please\"}", 200);
    ck_assert_str_eq(reply_text(r.json), "{\"a\":[1,2],\"b\":\"x\"}");
    evd_t_resp_free(&r);

    post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"refuse\"}", 200);
    ck_assert_str_eq(js(r.json, "output.0.content.0.type"), "refusal");
    ck_assert_str_eq(js(r.json, "output.0.content.0.refusal"), "no");
    evd_t_resp_free(&r);
    char *b = chat_body("refuse");
    post(&r, "/v1/chat/completions", b, 200);
    free(b);
    ck_assert_str_eq(js(r.json, "choices.0.message.refusal"), "no");
    ck_assert(json_is_null(jp(r.json, "choices.0.message.content")));
    evd_t_resp_free(&r);
    post(&r, "/v1/messages",
         "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
         "\"content\":\"refuse\"}]}",
         200);
    ck_assert_str_eq(js(r.json, "stop_reason"), "refusal");
    evd_t_resp_free(&r);

    post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"cut\"}", 200);
    ck_assert_str_eq(js(r.json, "status"), "incomplete");
    ck_assert_str_eq(js(r.json, "incomplete_details.reason"), "max_output_tokens");
    evd_t_resp_free(&r);
    b = chat_body("cut");
    post(&r, "/v1/chat/completions", b, 200);
    free(b);
    ck_assert_str_eq(js(r.json, "choices.0.finish_reason"), "length");
    evd_t_resp_free(&r);
    post(&r, "/v1/messages",
         "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
         "\"content\":\"cut\"}]}",
         200);
    ck_assert_str_eq(js(r.json, "stop_reason"), "max_tokens");
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
    put_script("{\"default\":{\"reply\":{\"text\":\"kept\"}}}");
    struct evd_t_resp r;
    req(&r, "PUT", "/_stub/script", bad_scripts[_i].script, NULL);
    ck_assert_int_eq(r.status, 400);
    const char *msg = js(r.json, "error.message");
    ck_assert_ptr_nonnull(msg);
    ck_assert_msg(strstr(msg, bad_scripts[_i].needle) != NULL, "message \"%s\" lacks \"%s\"", msg,
                  bad_scripts[_i].needle);
    evd_t_resp_free(&r);
    /* The previous script still answers. */
    post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"q\"}", 200);
    ck_assert_str_eq(reply_text(r.json), "kept");
    evd_t_resp_free(&r);
    req(&r, "GET", "/_stub/script", NULL, NULL);
    ck_assert_str_eq(js(r.json, "default.reply.text"), "kept");
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(script_file_at_start)
{
    ck_assert_int_eq(evd_t_stop(&stub, SIGTERM, 5000), 0);
    ck_assert_int_eq(evd_t_stub_start(&stub,
                                      "{\"rules\":[{\"when\":{\"api\":\"chat\"},"
                                      "\"reply\":{\"text\":\"from file\"}}]}",
                                      NULL),
                     0);
    struct evd_t_resp r;
    char *b = chat_body("x");
    post(&r, "/v1/chat/completions", b, 200);
    free(b);
    ck_assert_str_eq(reply_text(r.json), "from file");
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
    post(&r, "/v1/responses", body, 200);
    ck_assert_str_eq(js(r.json, "output.0.type"), "function_call");
    ck_assert_str_eq(js(r.json, "output.0.name"), "get_time");
    ck_assert_str_eq(js(r.json, "output.0.arguments"), "{\"tz\":\"UTC\",\"n\":3}");
    evd_t_resp_free(&r);

    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":\"Call get_time "
             "please\"},{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"get_time\","
             "\"arguments\":\"{}\"},{\"type\":\"function_call_output\",\"call_id\":\"c1\","
             "\"output\":\"12:00 UTC\"}],%s}",
             tools);
    post(&r, "/v1/responses", body, 200);
    ck_assert_str_eq(js(r.json, "output.0.type"), "message");
    ck_assert_ptr_nonnull(strstr(reply_text(r.json), "12:00 UTC"));
    evd_t_resp_free(&r);

    /* Messages: tool offered by name in the prompt. */
    post(&r, "/v1/messages",
         "{\"model\":\"m\",\"max_tokens\":9,\"tools\":[{\"name\":\"lookup\",\"input_schema\":"
         "{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\"}}}}],\"messages\":"
         "[{\"role\":\"user\",\"content\":\"use lookup\"}]}",
         200);
    ck_assert_str_eq(js(r.json, "content.0.type"), "tool_use");
    ck_assert_str_eq(js(r.json, "content.0.input.q"), "stub");
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
    post(&r, "/v1/responses", body, 200);
    json_t *got = json_loads(reply_text(r.json), 0, NULL);
    ck_assert_msg(json_equal(got, want), "got %s", reply_text(r.json));
    json_decref(got);
    evd_t_resp_free(&r);

    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"judge\"}],"
             "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"v\","
             "\"schema\":%s}}}",
             schema);
    post(&r, "/v1/chat/completions", body, 200);
    got = json_loads(reply_text(r.json), 0, NULL);
    ck_assert(json_equal(got, want));
    json_decref(got);
    evd_t_resp_free(&r);

    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":"
             "\"judge\"}],\"output_config\":{\"format\":{\"type\":\"json_schema\",\"schema\":"
             "%s}}}",
             schema);
    post(&r, "/v1/messages", body, 200);
    got = json_loads(reply_text(r.json), 0, NULL);
    ck_assert(json_equal(got, want));
    json_decref(got);
    evd_t_resp_free(&r);
    json_decref(want);

    /* Formats, lengths and bounds are honoured. */
    post(&r, "/v1/responses",
         "{\"model\":\"m\",\"input\":\"q\",\"text\":{\"format\":{\"type\":\"json_schema\","
         "\"name\":\"f\",\"schema\":{\"type\":\"object\",\"properties\":{\"when\":{\"type\":"
         "\"string\",\"format\":\"date-time\"},\"code\":{\"type\":\"string\",\"minLength\":6},"
         "\"short\":{\"type\":\"string\",\"maxLength\":2},\"x\":{\"type\":\"number\","
         "\"exclusiveMinimum\":5},\"k\":{\"type\":\"integer\",\"minimum\":2.5}}}}}}",
         200);
    want = json_loads("{\"when\":\"2025-01-01T00:00:00Z\",\"code\":\"stubxx\",\"short\":\"st\","
                      "\"x\":6.0,\"k\":3}",
                      0, NULL);
    got = json_loads(reply_text(r.json), 0, NULL);
    ck_assert_msg(json_equal(got, want), "got %s", reply_text(r.json));
    json_decref(got);
    json_decref(want);
    evd_t_resp_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- faults */

/* Two requests per key in any 2 s: the third is refused until the oldest leaves. */
START_TEST(scripted_rate_limit_per_key)
{
    put_script("{\"rate_limit\":{\"requests\":2,\"window_ms\":2000}}");
    static const char body[] = "{\"model\":\"m\",\"input\":\"Reply with exactly OK.\"}";
    const char *const key_a[] = {"Authorization: Bearer key-a", NULL};
    const char *const key_b[] = {"Authorization: Bearer key-b", NULL};
    struct evd_t_resp r;
    char v[64];
    int64_t t0 = evd_mono_ms();
    for (int i = 0; i < 2; i++) {
        req(&r, "POST", "/v1/responses", body, key_a);
        ck_assert_int_eq(r.status, 200);
        ck_assert(evd_t_resp_header(&r, "x-ratelimit-limit-requests", v, sizeof(v)));
        ck_assert_str_eq(v, "60"); /* 2 in 2 s, as a minute's limit */
        ck_assert(evd_t_resp_header(&r, "x-ratelimit-remaining-requests", v, sizeof(v)));
        ck_assert_int_eq(atoi(v), 1 - i);
        ck_assert(evd_t_resp_header(&r, "x-ratelimit-reset-requests", v, sizeof(v)));
        ck_assert_msg(strlen(v) > 2 && strcmp(v + strlen(v) - 2, "ms") == 0, "reset %s", v);
        ck_assert_int_le(atoi(v), 2000);
        evd_t_resp_free(&r);
    }
    req(&r, "POST", "/v1/responses", body, key_a);
    ck_assert_int_eq(r.status, 429);
    ck_assert_str_eq(js(r.json, "error.code"), "rate_limit_exceeded");
    ck_assert(evd_t_resp_header(&r, "x-ratelimit-remaining-requests", v, sizeof(v)));
    ck_assert_str_eq(v, "0");
    ck_assert(evd_t_resp_header(&r, "retry-after-ms", v, sizeof(v)));
    int64_t wait = atoll(v);
    ck_assert_int_gt(wait, 0);
    ck_assert_int_le(wait, 2000);
    ck_assert(evd_t_resp_header(&r, "retry-after", v, sizeof(v)));
    ck_assert_int_eq(atoll(v), (wait + 999) / 1000);
    evd_t_resp_free(&r);
    /* Another key has a window of its own. */
    req(&r, "POST", "/v1/responses", body, key_b);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);
    /* Once the oldest left the window, key a is served again. */
    int64_t until = t0 + 2100 - evd_mono_ms();
    if (until > 0)
        usleep((useconds_t)until * 1000);
    req(&r, "POST", "/v1/responses", body, key_a);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);
    json_t *st = stats();
    ck_assert_int_eq(ji(st, "by_status.429"), 1);
    ck_assert_int_eq(ji(st, "by_status.200"), 4);
    json_decref(st);
    /* A limit without its window is refused, naming what is missing. */
    req(&r, "PUT", "/_stub/script", "{\"rate_limit\":{\"requests\":2}}", NULL);
    ck_assert_int_eq(r.status, 400);
    ck_assert_msg(strstr(r.body, "rate_limit needs requests and window_ms") != NULL, "%s", r.body);
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(fault_429_with_retry_after)
{
    put_script("{\"rules\":[{\"times\":2,\"fault\":{\"status\":429,\"retry_after_s\":1,"
               "\"retry_after_ms\":1000}}]}");
    struct evd_t_resp r;
    post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"q\"}", 429);
    char ra[32];
    ck_assert(evd_t_resp_header(&r, "retry-after", ra, sizeof(ra)));
    ck_assert_str_eq(ra, "1");
    ck_assert(evd_t_resp_header(&r, "retry-after-ms", ra, sizeof(ra)));
    ck_assert_str_eq(ra, "1000");
    ck_assert_str_eq(js(r.json, "error.type"), "requests");
    ck_assert_str_eq(js(r.json, "error.code"), "rate_limit_exceeded");
    ck_assert_ptr_nonnull(js(r.json, "error.message"));
    evd_t_resp_free(&r);

    post(&r, "/v1/messages", "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}", 429);
    ck_assert_str_eq(js(r.json, "type"), "error");
    ck_assert_str_eq(js(r.json, "error.type"), "rate_limit_error");
    evd_t_resp_free(&r);

    /* `times` is spent: the built-in reply answers. */
    post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"Reply with exactly OK.\"}", 200);
    ck_assert_str_eq(reply_text(r.json), "OK");
    evd_t_resp_free(&r);
    json_t *st = stats();
    ck_assert_int_eq(ji(st, "by_status.429"), 2);
    ck_assert_int_eq(ji(st, "by_status.200"), 1);
    json_decref(st);
}
END_TEST

static const struct {
    int status;
    const char *openai_type;
    const char *anthropic_type;
} status_faults[] = {
    {500, "server_error", "api_error"},
    {401, "invalid_request_error", "authentication_error"},
    {529, "server_error", "overloaded_error"},
    {400, "invalid_request_error", "invalid_request_error"},
};

START_TEST(fault_status_shapes)
{
    char script[256];
    snprintf(script, sizeof(script),
             "{\"rules\":[{\"fault\":{\"status\":%d,\"message\":\"boom\"}}]}",
             status_faults[_i].status);
    put_script(script);
    struct evd_t_resp r;
    post(&r, "/v1/chat/completions", "{\"model\":\"m\",\"messages\":[]}", status_faults[_i].status);
    ck_assert_str_eq(js(r.json, "error.type"), status_faults[_i].openai_type);
    ck_assert_str_eq(js(r.json, "error.message"), "boom");
    ck_assert(json_is_null(jp(r.json, "error.param")));
    evd_t_resp_free(&r);
    post(&r, "/v1/messages", "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}",
         status_faults[_i].status);
    ck_assert_str_eq(js(r.json, "type"), "error");
    ck_assert_str_eq(js(r.json, "error.type"), status_faults[_i].anthropic_type);
    ck_assert_str_eq(js(r.json, "error.message"), "boom");
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(fault_stall)
{
    put_script("{\"rules\":[{\"when\":{\"prompt_contains\":\"hang\"},\"fault\":{\"stall\":"
               "true}}]}");
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/responses", stub.base);
    struct evd_t_resp r;
    const char *hang = "{\"model\":\"m\",\"input\":\"hang\"}";
    evd_t_http_timed("POST", url, NULL, hang, strlen(hang), 700, &r);
    ck_assert_int_eq(r.curl_code, 28); /* CURLE_OPERATION_TIMEDOUT */
    ck_assert_int_eq(r.status, 0);
    ck_assert(r.elapsed_ms >= 650);
    evd_t_resp_free(&r);

    /* The stub noticed the disconnect and is free again. */
    json_t *st = NULL;
    for (int i = 0; i < 100; i++) {
        json_decref(st);
        st = stats();
        if (ji(st, "in_flight") == 0)
            break;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(ji(st, "in_flight"), 0);
    ck_assert_int_eq(ji(st, "stalls"), 1);
    ck_assert_ptr_null(jp(st, "by_status.200"));
    json_decref(st);
    json_t *log = request_log("");
    ck_assert(json_is_null(jp(log, "0.status")));
    json_decref(log);
    post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"Reply with exactly up.\"}", 200);
    ck_assert_str_eq(reply_text(r.json), "up");
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(fault_truncate)
{
    put_script("{\"rules\":[{\"fault\":{\"truncate\":true},\"reply\":{\"text\":\"a reply long "
               "enough to be cut in half\"}}]}");
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/chat/completions", stub.base);
    struct evd_t_resp r;
    const char *body = "{\"model\":\"m\",\"messages\":[]}";
    evd_t_http_timed("POST", url, NULL, body, strlen(body), 5000, &r);
    ck_assert_int_eq(r.curl_code, 18); /* CURLE_PARTIAL_FILE */
    ck_assert_int_eq(r.status, 200);
    char cl[32];
    ck_assert(evd_t_resp_header(&r, "content-length", cl, sizeof(cl)));
    long declared = strtol(cl, NULL, 10);
    ck_assert_int_eq((long)r.len, declared / 2);
    ck_assert_ptr_null(r.json);
    ck_assert(strncmp(r.body, "{\"id\":\"chatcmpl-", 16) == 0);
    evd_t_resp_free(&r);
    json_t *st = stats();
    ck_assert_int_eq(ji(st, "truncations"), 1);
    json_decref(st);
}
END_TEST

START_TEST(fault_malformed)
{
    put_script("{\"rules\":[{\"fault\":{\"malformed\":true},\"reply\":{\"text\":\"a reply "
               "long enough to be cut in half\"}}]}");
    struct evd_t_resp r;
    req(&r, "POST", "/v1/messages", "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}", NULL);
    ck_assert_int_eq(r.status, 200);
    char cl[32];
    ck_assert(evd_t_resp_header(&r, "content-length", cl, sizeof(cl)));
    ck_assert_int_eq(strtol(cl, NULL, 10), (long)r.len); /* complete at the HTTP level */
    ck_assert_ptr_null(r.json);
    ck_assert(strncmp(r.body, "{\"id\":\"msg_", 11) == 0);
    evd_t_resp_free(&r);
    json_t *st = stats();
    ck_assert_int_eq(ji(st, "malformed"), 1);
    json_decref(st);
}
END_TEST

START_TEST(fault_header_bytes)
{
    /* A header the client can read: its value is exactly the scripted length and the
     * body is the normal reply. */
    put_script("{\"rules\":[{\"fault\":{\"header_bytes\":5000},\"reply\":{\"text\":\"padded\"}}]}");
    struct evd_t_resp r;
    req(&r, "POST", "/v1/chat/completions", "{\"model\":\"m\",\"messages\":[]}", NULL);
    ck_assert_int_eq(r.curl_code, 0);
    ck_assert_int_eq(r.status, 200);
    char *pad = strstr(r.headers, "X-Stub-Padding: ");
    ck_assert_ptr_nonnull(pad);
    pad += strlen("X-Stub-Padding: ");
    ck_assert_int_eq((long)strspn(pad, "a"), 5000);
    ck_assert_ptr_nonnull(r.json);
    ck_assert_ptr_nonnull(strstr(r.body, "padded"));
    evd_t_resp_free(&r);
    /* 1 MiB: more than libcurl reads in one header line, so the client gives up. */
    put_script("{\"rules\":[{\"fault\":{\"header_bytes\":1048576}}]}");
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/responses", stub.base);
    const char *body = "{\"model\":\"m\",\"input\":\"q\"}";
    evd_t_http_timed("POST", url, NULL, body, strlen(body), 5000, &r);
    ck_assert_int_ne(r.curl_code, 0);
    ck_assert_int_ne(r.curl_code, 28); /* refused at once, not a timeout */
    evd_t_resp_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- latency, concurrency */

struct worker {
    char url[256];
    const char *session;
    struct evd_t_resp r;
};

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    char h[128];
    snprintf(h, sizeof(h), "X-Evald-Session: %s", w->session);
    const char *headers[] = {h, NULL};
    const char *body = "{\"model\":\"m\",\"input\":\"slow\"}";
    evd_t_http_timed("POST", w->url, headers, body, strlen(body), 10000, &w->r);
    return NULL;
}

static long run_parallel(int n, const char *const *sessions)
{
    pthread_t th[8];
    struct worker w[8];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) {
        snprintf(w[i].url, sizeof(w[i].url), "%s/v1/responses", stub.base);
        w[i].session = sessions[i];
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_run, &w[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(w[i].r.curl_code, 0);
        ck_assert_int_eq(w[i].r.status, 200);
        ck_assert_msg(w[i].r.elapsed_ms >= 300, "answered after %ld ms", w[i].r.elapsed_ms);
        evd_t_resp_free(&w[i].r);
    }
    return (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
}

START_TEST(latency_and_concurrency)
{
    put_script("{\"rules\":[{\"latency_ms\":300,\"reply\":{\"text\":\"late\"}}]}");
    const char *same[] = {"run-a", "run-a", "run-a", "run-a"};
    long wall = run_parallel(4, same);
    ck_assert_msg(wall < 1000, "4 requests of 300 ms took %ld ms: not concurrent", wall);
    /* The stub counts a request done after its last byte is sent, which may be a
     * moment after the client has read it: let the counter settle. */
    json_t *st = stats();
    for (int i = 0; i < 100 && ji(st, "in_flight") != 0; i++) {
        json_decref(st);
        usleep(20000);
        st = stats();
    }
    ck_assert_int_eq(ji(st, "max_in_flight"), 4);
    ck_assert_int_eq(ji(st, "max_in_flight_per_session"), 4);
    ck_assert_int_eq(ji(st, "in_flight"), 0);
    ck_assert_int_eq(ji(st, "by_api.responses"), 4);
    /* Which session was in flight more than once, and how often a request overlapped. */
    ck_assert_int_eq(ji(st, "overlaps"), 3);
    json_t *twice = json_object_get(st, "sessions_in_flight_twice");
    ck_assert_int_eq(json_array_size(twice), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(twice, 0), "session")),
                     "run-a");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(twice, 0), "max")), 4);
    json_decref(st);

    struct evd_t_resp r;
    post(&r, "/_stub/reset", NULL, 200);
    evd_t_resp_free(&r);
    const char *distinct[] = {"run-1", "run-2", "run-3"};
    run_parallel(3, distinct);
    st = stats();
    ck_assert_int_eq(ji(st, "max_in_flight"), 3);
    ck_assert_int_eq(ji(st, "max_in_flight_per_session"), 1);
    ck_assert_int_eq(ji(st, "requests"), 3);
    ck_assert_int_eq(ji(st, "overlaps"), 0);
    ck_assert_int_eq(json_array_size(json_object_get(st, "sessions_in_flight_twice")), 0);
    json_decref(st);
}
END_TEST

/* ---------------------------------------------------------------- auth, log, limits */

START_TEST(require_key_and_redaction)
{
    ck_assert_int_eq(evd_t_stop(&stub, SIGTERM, 5000), 0);
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, "sk-test-secret-123"), 0);
    struct evd_t_resp r;
    const char *body = "{\"model\":\"m\",\"input\":\"q\"}";
    const char *mbody = "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}";

    req(&r, "POST", "/v1/responses", body, NULL);
    ck_assert_int_eq(r.status, 401);
    ck_assert_str_eq(js(r.json, "error.code"), "invalid_api_key");
    ck_assert_ptr_null(strstr(r.body, "sk-test"));
    evd_t_resp_free(&r);
    const char *wrong[] = {"Authorization: Bearer sk-test-secret-124", NULL};
    req(&r, "POST", "/v1/responses", body, wrong);
    ck_assert_int_eq(r.status, 401);
    ck_assert_ptr_null(strstr(r.body, "sk-test"));
    evd_t_resp_free(&r);
    const char *good[] = {"Authorization: Bearer sk-test-secret-123", NULL};
    req(&r, "POST", "/v1/responses", body, good);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);

    /* Anthropic takes x-api-key or a bearer token; a wrong x-api-key is refused. */
    const char *wrong_x[] = {"x-api-key: sk-test-secret-124", NULL};
    req(&r, "POST", "/v1/messages", mbody, wrong_x);
    ck_assert_int_eq(r.status, 401);
    ck_assert_str_eq(js(r.json, "error.type"), "authentication_error");
    ck_assert_ptr_null(strstr(r.body, "sk-test"));
    evd_t_resp_free(&r);
    req(&r, "POST", "/v1/messages", mbody, good);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);
    const char *xkey[] = {"x-api-key: sk-test-secret-123", "anthropic-version: 2023-06-01", NULL};
    req(&r, "POST", "/v1/messages", mbody, xkey);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);
    req(&r, "GET", "/v1/models", NULL, xkey);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(js(r.json, "data.0.type"), "model");
    evd_t_resp_free(&r);

    req(&r, "GET", "/_stub/requests", NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_null(strstr(r.body, "sk-test-secret"));
    json_t *log = jp(r.json, "requests");
    ck_assert_int_eq(json_array_size(log), 7);
    ck_assert_str_eq(js(log, "2.headers.authorization"), "REDACTED");
    ck_assert_str_eq(js(log, "5.headers.x-api-key"), "REDACTED");
    ck_assert_str_eq(js(log, "5.headers.anthropic-version"), "2023-06-01");
    ck_assert_str_eq(js(log, "5.headers.content-type"), "application/json");
    ck_assert_str_eq(js(log, "5.api"), "messages");
    ck_assert_str_eq(js(log, "5.path"), "/v1/messages");
    ck_assert_str_eq(js(log, "5.method"), "POST");
    ck_assert_int_eq(ji(log, "5.status"), 200);
    ck_assert_int_eq(ji(log, "0.status"), 401);
    ck_assert_int_eq(ji(log, "5.body.max_tokens"), 5);
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(bad_requests)
{
    struct evd_t_resp r;
    post(&r, "/v1/responses", "{\"model\":", 400);
    ck_assert_str_eq(js(r.json, "error.type"), "invalid_request_error");
    evd_t_resp_free(&r);
    post(&r, "/v1/responses", "{\"input\":\"x\"}", 400);
    ck_assert_ptr_nonnull(strstr(js(r.json, "error.message"), "model"));
    evd_t_resp_free(&r);
    post(&r, "/v1/chat/completions", "{\"model\":\"m\"}", 400);
    ck_assert_ptr_nonnull(strstr(js(r.json, "error.message"), "messages"));
    evd_t_resp_free(&r);
    post(&r, "/v1/messages", "{\"model\":\"m\",\"messages\":[]}", 400);
    ck_assert_str_eq(js(r.json, "error.type"), "invalid_request_error");
    ck_assert_ptr_nonnull(strstr(js(r.json, "error.message"), "max_tokens"));
    evd_t_resp_free(&r);

    post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"x\",\"stream\":true}", 400);
    ck_assert_ptr_nonnull(strstr(js(r.json, "error.message"), "stream"));
    evd_t_resp_free(&r);
    post(&r, "/v1/messages", "{\"model\":\"m\",\"max_tokens\":3,\"messages\":[],\"stream\":true}",
         400);
    ck_assert_str_eq(js(r.json, "type"), "error");
    ck_assert_ptr_nonnull(strstr(js(r.json, "error.message"), "stream"));
    evd_t_resp_free(&r);

    req(&r, "GET", "/v1/responses", NULL, NULL);
    ck_assert_int_eq(r.status, 405);
    evd_t_resp_free(&r);
    post(&r, "/v1/embeddings", "{}", 404);
    ck_assert_ptr_nonnull(js(r.json, "error.message"));
    evd_t_resp_free(&r);
    req(&r, "GET", "/_stub/nothing", NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    evd_t_resp_free(&r);
    req(&r, "GET", "/_stub/healthz", NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);

    /* 9 MiB body: over the 8 MiB limit. */
    size_t n = 9u * 1024u * 1024u;
    char *big = malloc(n + 64);
    int off = snprintf(big, 64, "{\"model\":\"m\",\"input\":\"");
    memset(big + off, 'a', n);
    strcpy(big + off + n, "\"}");
    post(&r, "/v1/responses", big, 413);
    free(big);
    ck_assert_str_eq(js(r.json, "error.type"), "invalid_request_error");
    evd_t_resp_free(&r);

    json_t *st = stats();
    ck_assert_int_eq(ji(st, "by_status.400"), 6);
    ck_assert_int_eq(ji(st, "by_status.413"), 1);
    ck_assert_int_eq(ji(st, "by_api.other"), 1);
    json_decref(st);
}
END_TEST

START_TEST(reset_and_log_limit)
{
    put_script("{\"rules\":[{\"times\":1,\"reply\":{\"text\":\"once\"}}]}");
    struct evd_t_resp r;
    const char *prompts[] = {"p0", "p1", "p2"};
    for (int i = 0; i < 3; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"input\":\"%s\"}", prompts[i]);
        post(&r, "/v1/responses", body, 200);
        evd_t_resp_free(&r);
    }
    json_t *log = request_log("?limit=2");
    ck_assert_int_eq(json_array_size(log), 2);
    ck_assert_str_eq(js(log, "0.body.input"), "p1");
    ck_assert_str_eq(js(log, "1.body.input"), "p2");
    json_decref(log);
    req(&r, "GET", "/_stub/requests?limit=x", NULL, NULL);
    ck_assert_int_eq(r.status, 400);
    evd_t_resp_free(&r);

    post(&r, "/_stub/reset", NULL, 200);
    evd_t_resp_free(&r);
    json_t *st = stats();
    ck_assert_int_eq(ji(st, "requests"), 0);
    ck_assert_int_eq(ji(st, "rules.0.hits"), 0);
    ck_assert_int_eq(json_object_size(jp(st, "by_status")), 0);
    json_decref(st);
    log = request_log("");
    ck_assert_int_eq(json_array_size(log), 0);
    json_decref(log);
    /* The script is kept and `times` is re-armed. */
    post(&r, "/v1/responses", "{\"model\":\"m\",\"input\":\"q\"}", 200);
    ck_assert_str_eq(reply_text(r.json), "once");
    evd_t_resp_free(&r);
}
END_TEST

START_TEST(request_log_is_bounded)
{
    put_script("{\"default\":{\"reply\":{\"text\":\"x\"}}}");
    struct evd_t_resp r;
    for (int i = 0; i < 505; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"input\":\"n%d\"}", i);
        post(&r, "/v1/responses", body, 200);
        evd_t_resp_free(&r);
    }
    json_t *log = request_log("");
    ck_assert_int_eq(json_array_size(log), 500);
    ck_assert_str_eq(js(log, "0.body.input"), "n5");
    ck_assert_str_eq(js(log, "499.body.input"), "n504");
    json_decref(log);
}
END_TEST

/* ---------------------------------------------------------------- process */

static int run_status(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "\"%s\" %s >/dev/null 2>&1", getenv("EVALD_STUB_BIN"), args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(process_options)
{
    ck_assert_int_eq(run_status("--help"), 0);
    ck_assert_int_eq(run_status("--bogus"), 2);
    ck_assert_int_eq(run_status("--listen"), 2);
    ck_assert_int_eq(run_status("--listen nonsense"), 1);
    ck_assert_int_eq(run_status("--listen 127.0.0.1:0 --script /nonexistent/script.json"), 1);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "\"%s\" --help", getenv("EVALD_STUB_BIN"));
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    pclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "--listen"));
    ck_assert_ptr_nonnull(strstr(buf, "EVALD_STUB_LISTEN"));
    ck_assert_ptr_nonnull(strstr(buf, "--require-key"));
    /* The fixture's stub exits 0 on SIGTERM (checked in the teardown). */
}
END_TEST

int main(void)
{
    if (getenv("EVALD_STUB_BIN") == NULL) {
        fprintf(stderr, "EVALD_STUB_BIN is not set; run this test through ctest\n");
        return 1;
    }
    Suite *s = suite_create("stub");
    TCase *wire = tcase_create("wire");
    TCase *script = tcase_create("script");
    TCase *faults = tcase_create("faults");
    TCase *control = tcase_create("control");
    TCase *all[] = {wire, script, faults, control};
    for (int i = 0; i < 4; i++) {
        tcase_add_checked_fixture(all[i], setup, teardown);
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
    tcase_add_test(faults, fault_429_with_retry_after);
    tcase_add_test(faults, scripted_rate_limit_per_key);
    tcase_add_loop_test(faults, fault_status_shapes, 0,
                        (int)(sizeof(status_faults) / sizeof(status_faults[0])));
    tcase_add_test(faults, fault_stall);
    tcase_add_test(faults, fault_truncate);
    tcase_add_test(faults, fault_malformed);
    tcase_add_test(faults, fault_header_bytes);
    tcase_add_test(control, latency_and_concurrency);
    tcase_add_test(control, require_key_and_redaction);
    tcase_add_test(control, bad_requests);
    tcase_add_test(control, reset_and_log_limit);
    tcase_add_test(control, request_log_is_bounded);
    tcase_add_test(control, process_options);
    return evd_test_run_suite(s);
}
