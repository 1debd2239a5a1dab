/*
 * Integration tests of structured final answers in the agent loop, against a real
 * evald-stub child process and a local tool server, once per wire kind (OpenAI Responses,
 * Anthropic Messages, Chat Completions): the structured-output request fields equal the
 * golden wire schemas of tests/unit/jsonschema_golden, functions stay callable before the
 * final answer, an invalid answer gets exactly one tools-disabled repair turn with the
 * byte-exact repair message (Anthropic keeps tools with tool_choice none), a second failure
 * keeps only the failure code, verdicts are flattened, and max_tool_calls stops a call
 * before it runs. Runs without fork so one stub and one tool server serve every test.
 */
#include <check.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/harness.h"
#include "schema/structured.h"
#include "tests/support/harness_support.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

#define KEY "sk-evald-structured-SECRETVALUE-0123456789"

static struct evd_t_proc stub;
static bool ready;
static struct evd_providers *providers;
static char provs_path[64], openai_base[192];

struct kind_case {
    const char *api;      /* stub api name */
    const char *provider; /* evald provider */
    const char *model;
    const char *golden; /* key of the golden wire schemas */
};

static const struct kind_case kinds[] = {
    {"responses", "openai", "gpt-test", "responses"},
    {"messages", "anthropic", "claude-test", "anthropic"},
    {"chat", "local", "local-test", "chat"},
};
#define NKINDS 3

static const char *env_get(void *ctx, const char *name)
{
    (void)ctx;
    if (strcmp(name, "OPENAI_API_KEY") == 0 || strcmp(name, "ANTHROPIC_API_KEY") == 0 ||
        strcmp(name, "LOCAL_KEY") == 0)
        return KEY;
    if (strcmp(name, "OPENAI_BASE_URL") == 0)
        return openai_base;
    if (strcmp(name, "ANTHROPIC_BASE_URL") == 0)
        return stub.base;
    if (strcmp(name, "EVALD_PROVIDERS_FILE") == 0)
        return provs_path;
    return NULL;
}

static void setup_all(void)
{
    struct evd_err err;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    json_object_seed(0);
    if (evd_t_stub_start(&stub, NULL, KEY) != 0)
        return;
    if (!hs_tools_start()) {
        evd_t_stop(&stub, SIGTERM, 5000);
        return;
    }
    snprintf(openai_base, sizeof(openai_base), "%s/v1", stub.base);
    char provs[1024];
    snprintf(provs, sizeof(provs),
             "{\"providers\":[{\"name\":\"local\",\"kind\":\"openai-chat\",\"base_url\":\"%s/v1\","
             "\"api_key_env\":\"LOCAL_KEY\",\"models\":[{\"id\":\"local-test\"}]},"
             "{\"name\":\"gw-resp\",\"kind\":\"openai-responses\",\"base_url\":\"%s/v1\","
             "\"api_key_env\":\"LOCAL_KEY\"},"
             "{\"name\":\"gw-msgs\",\"kind\":\"anthropic-messages\",\"base_url\":\"%s\","
             "\"api_key_env\":\"LOCAL_KEY\"}]}",
             stub.base, stub.base, stub.base);
    strcpy(provs_path, "/tmp/evd_so_it_XXXXXX");
    int fd = mkstemp(provs_path);
    if (fd < 0)
        return;
    bool ok = write(fd, provs, strlen(provs)) == (ssize_t)strlen(provs);
    close(fd);
    if (!ok)
        return;
    if (evd_providers_load(env_get, NULL, &providers, &err) != EVD_OK) {
        fprintf(stderr, "providers: %s\n", err.msg);
        return;
    }
    ready = true;
}

static void teardown_all(void)
{
    evd_providers_free(providers);
    if (ready) {
        hs_tools_stop();
        evd_t_stop(&stub, SIGTERM, 5000);
        unlink(provs_path);
    }
    curl_global_cleanup();
}

#define NEED_STUB()                                                                                \
    do {                                                                                           \
        if (!ready) {                                                                              \
            fprintf(stderr, "SKIPPED: %s needs evald-stub\n", __func__);                           \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define JS(o, k) json_string_value(json_object_get((o), (k)))
#define JI(o, k) json_integer_value(json_object_get((o), (k)))

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
    ck_assert_msg(v != NULL, "bad test JSON: %s: %s", je.text, text);
    return v;
}

static void script(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void script(const char *fmt, ...)
{
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    json_t *s = parse(buf);
    ck_assert_int_eq(evd_t_stub_script(&stub, buf), 200);
    json_decref(s);
    ck_assert_int_eq(evd_t_stub_reset(&stub), 200);
    hs_tools_reset();
}

struct run_args {
    const struct kind_case *k;
    const char *prompt;
    const char *functions; /* JSON or NULL */
    const char *output;    /* JSON or NULL */
    const struct evd_so_contract *contract;
    bool has_max_tool_calls;
    int64_t max_tool_calls;
};

static void run(const struct run_args *a, struct evd_harness_outcome *out)
{
    json_t *model = json_pack("{s:s,s:s}", "model", a->k->model, "provider", a->k->provider);
    json_t *functions = a->functions ? parse(a->functions) : NULL;
    json_t *output = a->output ? parse(a->output) : NULL;
    char tools_text[512];
    snprintf(tools_text, sizeof(tools_text),
             "[{\"id\":\"math::add\",\"description\":\"Adds two integers\",\"url\":\"%s/add\","
             "\"timeout_ms\":5000,\"request_schema\":{\"type\":\"object\",\"properties\":"
             "{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"required\":"
             "[\"a\",\"b\"]}}]",
             hs_tools_base());
    json_t *tools = parse(tools_text);
    struct evd_harness_input in = {
        .session_id = "sess-so",
        .prompt = a->prompt ? a->prompt : "Cover the requirements.",
        .model = model,
        .functions = functions,
        .output = output,
        .tools = tools,
        .contract = a->contract,
        .has_max_tool_calls = a->has_max_tool_calls,
        .max_tool_calls = a->max_tool_calls,
    };
    struct evd_err err;
    ck_assert_int_eq(evd_harness_run(providers, &in, NULL, out, &err), EVD_OK);
    json_decref(model);
    json_decref(functions);
    json_decref(output);
    json_decref(tools);
}

/* Every request the stub received since the last reset, oldest first (new reference). */
static json_t *requests(void)
{
    json_t *r = evd_t_stub_requests(&stub, 500);
    ck_assert_ptr_nonnull(r);
    json_t *arr = json_incref(json_object_get(r, "requests"));
    json_decref(r);
    return arr;
}

/* The structured-output fragment of a request body, as the kind carries it (borrowed). */
static json_t *format_of(const struct kind_case *k, json_t *body)
{
    if (strcmp(k->api, "responses") == 0)
        return json_object_get(body, "text");
    if (strcmp(k->api, "messages") == 0)
        return json_object_get(json_object_get(body, "output_config"), "format");
    return json_object_get(body, "response_format");
}

/* The text of the last user message of a request body. */
static const char *last_user_text(const struct kind_case *k, json_t *body)
{
    if (strcmp(k->api, "responses") == 0) {
        json_t *input = json_object_get(body, "input");
        json_t *last = json_array_get(input, json_array_size(input) - 1);
        ck_assert_str_eq(JS(last, "role"), "user");
        return JS(json_array_get(json_object_get(last, "content"), 0), "text");
    }
    json_t *msgs = json_object_get(body, "messages");
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    ck_assert_str_eq(JS(last, "role"), "user");
    if (strcmp(k->api, "messages") == 0)
        return JS(json_array_get(json_object_get(last, "content"), 0), "text");
    return JS(last, "content");
}

static const char COVERED_SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"covered\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"string\"}}},\"required\":[\"covered\"]}";

static const char COVERED_REPAIR[] =
    "Your final response did not match the required schema: schema_mismatch: result must match "
    "the output schema\n- instancePath \"/covered\": \"R1\" is not of type \"array\"\nReturn "
    "only one JSON object matching the schema.";

/* ---- golden wire schemas on the wire --------------------------------------------------- */

static const char *const GOLDEN[] = {
    "optional_fields", "open_map",        "recursion",       "nested_arrays",
    "unions",          "no_owner_fields", "oversized_depth", "oversized_optional",
};
#define NGOLDEN (sizeof(GOLDEN) / sizeof(GOLDEN[0]))

static const char DEFAULT_RED[] =
    "{\"properties\":{\"why\":{\"type\":\"string\"}},\"required\":[\"why\"]}";

START_TEST(request_carries_the_golden_wire_schema)
{
    NEED_STUB();
    const struct kind_case *k = &kinds[(size_t)_i / NGOLDEN];
    const char *name = GOLDEN[(size_t)_i % NGOLDEN];
    char path[512];
    snprintf(path, sizeof(path), "%s/tests/unit/jsonschema_golden/%s.json", EVALD_SOURCE_DIR, name);
    json_t *golden = evd_test_load_json(path);
    ck_assert_ptr_nonnull(golden);
    json_t *owner = json_object_get(golden, "owner");
    if (json_is_null(owner))
        owner = NULL;
    bool verdict = strcmp(JS(golden, "contract"), "verdict") == 0;
    struct evd_so_contract *c = NULL;
    char *output = NULL;
    if (verdict) {
        json_t *red = json_object_get(golden, "red");
        json_t *def = red != NULL ? NULL : parse(DEFAULT_RED);
        c = evd_so_verdict_new(owner, red != NULL ? red : def, NULL);
        json_decref(def);
        ck_assert_ptr_nonnull(c);
    } else {
        json_t *o = json_pack("{s:s,s:O}", "type", "json", "schema", owner);
        output = json_dumps(o, JSON_COMPACT);
        json_decref(o);
    }
    script("{\"rules\":[]}"); /* built-in replies: a value built from the requested schema */
    struct evd_harness_outcome o;
    struct run_args a = {.k = k, .output = output, .contract = c};
    run(&a, &o);

    json_t *reqs = requests();
    ck_assert_int_ge(json_array_size(reqs), 1);
    json_t *body = json_object_get(json_array_get(reqs, 0), "body");
    json_t *want = json_object_get(json_object_get(golden, "wire"), k->golden);
    ck_assert_ptr_nonnull(want);
    const char *fname = verdict ? "evald_verdict" : "evald_result";
    json_t *expect;
    if (strcmp(k->api, "responses") == 0)
        expect = json_pack("{s:{s:s,s:s,s:O,s:b}}", "format", "type", "json_schema", "name", fname,
                           "schema", want, "strict", 1);
    else if (strcmp(k->api, "messages") == 0)
        expect = json_pack("{s:s,s:O}", "type", "json_schema", "schema", want);
    else
        expect = json_pack("{s:s,s:{s:s,s:O,s:b}}", "type", "json_schema", "json_schema", "name",
                           fname, "schema", want, "strict", 1);
    json_t *got = format_of(k, body);
    char *gs = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    ck_assert_msg(json_equal(got, expect), "%s/%s: request carried %s", k->api, name,
                  gs ? gs : "nothing");
    free(gs);
    /* The transcript says the request asked for structured output. */
    json_t *gen = json_array_get(json_object_get(o.transcript, "generations"), 0);
    ck_assert_str_eq(JS(json_object_get(gen, "request"), "output_format"), "json_schema");
    json_decref(expect);
    json_decref(reqs);
    evd_harness_outcome_clear(&o);
    evd_so_contract_free(c);
    free(output);
    json_decref(golden);
}
END_TEST

/* ---- the repair turn ------------------------------------------------------------------ */

START_TEST(invalid_answer_after_a_tool_call_is_repaired_once)
{
    NEED_STUB();
    const struct kind_case *k = &kinds[_i];
    script("{\"rules\":["
           "{\"when\":{\"prompt_contains\":\"Your final response did not match\"},"
           "\"reply\":{\"json\":{\"result\":{\"covered\":[\"R1\"]}}}},"
           "{\"when\":{\"has_tool_result\":false},\"times\":1,"
           "\"reply\":{\"tool_calls\":[{\"name\":\"math_add\",\"arguments\":{\"a\":1,\"b\":2}}]}},"
           "{\"when\":{\"has_tool_result\":true},\"times\":1,"
           "\"reply\":{\"json\":{\"result\":{\"covered\":\"R1\"}}}}]}");
    struct evd_harness_outcome o;
    char output[256];
    snprintf(output, sizeof(output), "{\"type\":\"json\",\"schema\":%s}", COVERED_SCHEMA);
    struct run_args a = {
        .k = k, .output = output, .functions = "{\"allow\":[\"math::add\"],\"expose\":\"native\"}"};
    run(&a, &o);
    ck_assert_msg(o.status == EVD_HARNESS_COMPLETED, "%s", o.result_error ? o.result_error : "");
    json_t *want = parse("{\"covered\":[\"R1\"]}");
    ck_assert(json_equal(o.output, want));
    json_decref(want);
    ck_assert_int_eq(hs_tools_calls("/add"), 1); /* tools stay available before the answer */

    json_t *reqs = requests();
    ck_assert_int_eq(json_array_size(reqs), 3);
    json_t *b1 = json_object_get(json_array_get(reqs, 0), "body");
    json_t *b2 = json_object_get(json_array_get(reqs, 1), "body");
    json_t *b3 = json_object_get(json_array_get(reqs, 2), "body");
    /* Every turn asks for the same structured output. */
    ck_assert_ptr_nonnull(format_of(k, b1));
    ck_assert(json_equal(format_of(k, b1), format_of(k, b2)));
    ck_assert(json_equal(format_of(k, b1), format_of(k, b3)));
    /* Tools before the final answer, none usable in the repair. */
    ck_assert_int_eq(json_array_size(json_object_get(b1, "tools")), 1);
    ck_assert_int_eq(json_array_size(json_object_get(b2, "tools")), 1);
    ck_assert_ptr_null(json_object_get(b1, "tool_choice"));
    if (strcmp(k->api, "messages") == 0) {
        ck_assert(json_equal(json_object_get(b3, "tools"), json_object_get(b1, "tools")));
        json_t *none = parse("{\"type\":\"none\"}");
        ck_assert(json_equal(json_object_get(b3, "tool_choice"), none));
        json_decref(none);
    } else {
        ck_assert_ptr_null(json_object_get(b3, "tools"));
        ck_assert_ptr_null(json_object_get(b3, "tool_choice"));
    }
    /* The repair message, byte for byte, after the invalid answer. */
    ck_assert_str_eq(last_user_text(k, b3), COVERED_REPAIR);
    ck_assert_str_eq(JS(b3, "model"), JS(b1, "model"));
    char *dump3 = json_dumps(b3, JSON_COMPACT);
    ck_assert_ptr_nonnull(strstr(dump3, "{\\\"result\\\":{\\\"covered\\\":\\\"R1\\\"}}"));
    free(dump3);

    /* The transcript keeps three turns; the invalid answer's text is withheld. */
    json_t *gens = json_object_get(o.transcript, "generations");
    ck_assert_int_eq(json_array_size(gens), 3);
    json_t *g2 = json_array_get(gens, 1), *g3 = json_array_get(gens, 2);
    ck_assert(json_is_null(json_object_get(g2, "text")));
    ck_assert_str_eq(JS(g2, "output_error"),
                     "schema_mismatch: result must match the output schema");
    ck_assert(json_is_true(json_object_get(g3, "repair")));
    ck_assert_str_eq(JS(json_object_get(g3, "request"), "tool_choice"), "none");
    ck_assert_int_eq(JI(json_object_get(o.metrics, "totals"), "turns"), 3);
    json_decref(reqs);
    evd_harness_outcome_clear(&o);
}
END_TEST

/* Built-in providers enforce the format; providers-file servers may not. */
static const struct {
    struct kind_case k;
    bool enforced;
} bare_cases[] = {
    {{"responses", "openai", "gpt-test", "responses"}, true},
    {{"messages", "anthropic", "claude-test", "anthropic"}, true},
    {{"responses", "gw-resp", "gw-test", "responses"}, false},
    {{"messages", "gw-msgs", "gw-test", "anthropic"}, false},
    {{"chat", "local", "local-test", "chat"}, false},
};

START_TEST(bare_answer_is_named_or_accepted)
{
    /* The model answers the owner value without {"result": …}. From a provider that
     * enforces the format this is a broken answer: the repair names the envelope and the
     * stray field, and the wrapped repair completes the run. From one that may not, the
     * bare value validates against the output schema and is the answer, with no repair. */
    NEED_STUB();
    const struct kind_case *k = &bare_cases[_i].k;
    script("{\"rules\":["
           "{\"when\":{\"prompt_contains\":\"Your final response did not match\"},"
           "\"reply\":{\"json\":{\"result\":{\"covered\":[\"R1\"]}}}}],"
           "\"default\":{\"reply\":{\"json\":{\"covered\":[\"R1\"]}}}}");
    struct evd_harness_outcome o;
    char output[256];
    snprintf(output, sizeof(output), "{\"type\":\"json\",\"schema\":%s}", COVERED_SCHEMA);
    struct run_args a = {.k = k, .output = output};
    run(&a, &o);
    ck_assert_msg(o.status == EVD_HARNESS_COMPLETED, "%s", o.result_error ? o.result_error : "");
    json_t *want = parse("{\"covered\":[\"R1\"]}");
    ck_assert(json_equal(o.output, want));
    json_decref(want);
    json_t *reqs = requests();
    if (bare_cases[_i].enforced) {
        ck_assert_int_eq(json_array_size(reqs), 2);
        json_t *b2 = json_object_get(json_array_get(reqs, 1), "body");
        ck_assert_str_eq(last_user_text(k, b2),
                         "Your final response did not match the required schema: "
                         "schema_mismatch: result must match the output schema\n"
                         "- instancePath \"\": \"result\" is a required property: the answer "
                         "is {\"result\": <value>} with the value matching the output schema\n"
                         "- field \"covered\" is not declared.\n"
                         "Return only one JSON object matching the schema.");
    } else {
        ck_assert_int_eq(json_array_size(reqs), 1);
        /* The format is still asked for. */
        ck_assert_ptr_nonnull(format_of(k, json_object_get(json_array_get(reqs, 0), "body")));
    }
    json_decref(reqs);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(second_invalid_answer_keeps_only_the_code)
{
    NEED_STUB();
    const struct kind_case *k = &kinds[_i];
    script("{\"rules\":[],\"default\":{\"reply\":{\"json\":{\"result\":{\"covered\":"
           "\"R1-PRIVATE-MARKER\"}}}}}");
    struct evd_harness_outcome o;
    char output[256];
    snprintf(output, sizeof(output), "{\"type\":\"json\",\"schema\":%s}", COVERED_SCHEMA);
    struct run_args a = {.k = k, .output = output};
    run(&a, &o);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(o.phase, "await");
    ck_assert_int_eq(o.code, EVD_EINVAL);
    ck_assert(o.output_invalid);
    ck_assert_str_eq(o.result_error, "schema_mismatch: result must match the output schema");
    ck_assert_ptr_null(o.output);
    json_t *reqs = requests();
    ck_assert_int_eq(json_array_size(reqs), 2); /* exactly one repair, never a third turn */
    json_decref(reqs);
    json_t *gens = json_object_get(o.transcript, "generations");
    ck_assert_int_eq(json_array_size(gens), 2);
    ck_assert(json_is_true(json_object_get(json_array_get(gens, 1), "repair")));
    char *t = json_dumps(o.transcript, JSON_COMPACT);
    char *s = json_dumps(o.spans, JSON_COMPACT);
    ck_assert_ptr_null(strstr(t, "PRIVATE-MARKER"));
    ck_assert_ptr_null(strstr(s, "PRIVATE-MARKER"));
    free(t);
    free(s);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(json_without_schema_repairs_prose)
{
    NEED_STUB();
    const struct kind_case *k = &kinds[_i];
    script("{\"rules\":["
           "{\"when\":{\"prompt_contains\":\"Your final response did not match\"},"
           "\"reply\":{\"json\":{\"n\":1}}},"
           "{\"reply\":{\"text\":\"Here it is: {\\\"n\\\":1}\"}}]}");
    struct evd_harness_outcome o;
    struct run_args a = {.k = k, .output = "{\"type\":\"json\"}"};
    run(&a, &o);
    ck_assert_msg(o.status == EVD_HARNESS_COMPLETED, "%s", o.result_error ? o.result_error : "");
    ck_assert_int_eq(json_integer_value(json_object_get(o.output, "n")), 1);
    json_t *reqs = requests();
    ck_assert_int_eq(json_array_size(reqs), 2);
    json_t *b1 = json_object_get(json_array_get(reqs, 0), "body");
    json_t *b2 = json_object_get(json_array_get(reqs, 1), "body");
    ck_assert_ptr_null(format_of(k, b1)); /* any JSON value: no wire schema */
    ck_assert_str_eq(last_user_text(k, b2),
                     "Your final response did not match the required schema: not_json: return "
                     "exactly one JSON object, without prose or code fences\nReturn only one "
                     "JSON object matching the schema.");
    json_decref(reqs);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(verdict_answers_are_flattened)
{
    NEED_STUB();
    const struct kind_case *k = &kinds[_i];
    json_t *green = parse(COVERED_SCHEMA), *red = parse(DEFAULT_RED);
    struct evd_so_contract *c = evd_so_verdict_new(green, red, NULL);
    ck_assert_ptr_nonnull(c);
    script("{\"rules\":[],\"default\":{\"reply\":{\"json\":{\"result\":{\"verdict\":\"RED\","
           "\"verdictFields\":{\"why\":\"R2 is missing\"}}}}}}");
    struct evd_harness_outcome o;
    struct run_args a = {.k = k, .contract = c};
    run(&a, &o);
    ck_assert_msg(o.status == EVD_HARNESS_COMPLETED, "%s", o.result_error ? o.result_error : "");
    json_t *want = parse("{\"verdict\":\"RED\",\"why\":\"R2 is missing\"}");
    ck_assert(json_equal(o.output, want));
    /* The stored flat verdict lists verdict first. */
    ck_assert_str_eq(json_object_iter_key(json_object_iter(o.output)), "verdict");
    json_decref(want);
    evd_harness_outcome_clear(&o);
    evd_so_contract_free(c);
    json_decref(green);
    json_decref(red);
}
END_TEST

START_TEST(repair_turn_function_calls_are_not_run)
{
    NEED_STUB();
    const struct kind_case *k = &kinds[_i];
    script("{\"rules\":["
           "{\"when\":{\"prompt_contains\":\"Your final response did not match\"},"
           "\"reply\":{\"tool_calls\":[{\"name\":\"math_add\",\"arguments\":{\"a\":1,\"b\":2}}]}},"
           "{\"reply\":{\"text\":\"not json\"}}]}");
    struct evd_harness_outcome o;
    struct run_args a = {.k = k,
                         .output = "{\"type\":\"json\"}",
                         .functions = "{\"allow\":[\"math::add\"],\"expose\":\"native\"}"};
    run(&a, &o);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert(o.output_invalid);
    ck_assert_str_eq(o.result_error,
                     "tools_disabled: the repair turn must answer without calling functions");
    ck_assert_int_eq(hs_tools_calls("/add"), 0);
    ck_assert_int_eq(JI(json_object_get(o.metrics, "totals"), "function_calls"), 0);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(max_tool_calls_stops_before_the_next_call)
{
    NEED_STUB();
    const struct kind_case *k = &kinds[_i];
    script("{\"rules\":[{\"when\":{\"has_tool_result\":false},\"reply\":{\"tool_calls\":["
           "{\"name\":\"math_add\",\"arguments\":{\"a\":1,\"b\":2}},"
           "{\"name\":\"math_add\",\"arguments\":{\"a\":3,\"b\":4}}]}}],"
           "\"default\":{\"reply\":{\"text\":\"done\"}}}");
    struct evd_harness_outcome o;
    struct run_args a = {.k = k,
                         .functions = "{\"allow\":[\"math::add\"],\"expose\":\"native\"}",
                         .has_max_tool_calls = true,
                         .max_tool_calls = 1};
    run(&a, &o);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(o.phase, "limit");
    ck_assert_str_eq(o.result_error, "function call 2 would exceed max_tool_calls 1; 1 call(s) "
                                     "not run");
    ck_assert_int_eq(hs_tools_calls("/add"), 1);
    evd_harness_outcome_clear(&o);

    /* Zero: no call runs at all. Two: both run and the answer completes. */
    a.max_tool_calls = 0;
    hs_tools_reset();
    run(&a, &o);
    ck_assert_str_eq(o.phase, "limit");
    ck_assert_int_eq(hs_tools_calls("/add"), 0);
    evd_harness_outcome_clear(&o);
    a.max_tool_calls = 2;
    run(&a, &o);
    ck_assert_msg(o.status == EVD_HARNESS_COMPLETED, "%s", o.result_error ? o.result_error : "");
    ck_assert_int_eq(hs_tools_calls("/add"), 2);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(invalid_output_schema_fails_setup)
{
    NEED_STUB();
    struct evd_harness_outcome o;
    struct run_args a = {.k = &kinds[0],
                         .output = "{\"type\":\"json\",\"schema\":{\"type\":\"objekt\"}}"};
    run(&a, &o);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(o.phase, "setup");
    ck_assert_msg(strncmp(o.result_error, "output.schema: invalid schema at \"/type\"", 40) == 0,
                  "%s", o.result_error);
    evd_harness_outcome_clear(&o);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("harness_structured");
    TCase *tc = tcase_create("wire");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, request_carries_the_golden_wire_schema, 0, (int)(NKINDS * NGOLDEN));
    suite_add_tcase(s, tc);
    tc = tcase_create("repair");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, invalid_answer_after_a_tool_call_is_repaired_once, 0, NKINDS);
    tcase_add_loop_test(tc, second_invalid_answer_keeps_only_the_code, 0, NKINDS);
    tcase_add_loop_test(tc, bare_answer_is_named_or_accepted, 0,
                        (int)(sizeof(bare_cases) / sizeof(bare_cases[0])));
    tcase_add_loop_test(tc, json_without_schema_repairs_prose, 0, NKINDS);
    tcase_add_loop_test(tc, verdict_answers_are_flattened, 0, NKINDS);
    tcase_add_loop_test(tc, repair_turn_function_calls_are_not_run, 0, NKINDS);
    tcase_add_loop_test(tc, max_tool_calls_stops_before_the_next_call, 0, NKINDS);
    tcase_add_test(tc, invalid_output_schema_fails_setup);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    setup_all();
    SRunner *sr = srunner_create(suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    teardown_all();
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
