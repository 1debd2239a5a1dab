/*
 * Integration tests of the agent loop against a real evald-stub child process and a local
 * tool server, once per wire kind (OpenAI Responses, Anthropic Messages, Chat Completions):
 * plain text and a follow-up message, function calls (native, agent_trigger and dispatched),
 * denied, failing and slow functions, max_turns, token and cost budgets, ask mode, json
 * output and concurrent runs. The requests evald sent are read back from /_stub/requests and
 * checked field by field. Retries, errors, cancellation and timeouts are in
 * test_harness_loop_faults.c; the fixture is tests/support/harness_loop_fixture.h. Runs
 * without fork so that the stub and the tool server started once serve every test.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "harness/harness.h"
#include "schema/jsonschema.h"
#include "tests/support/harness_loop_fixture.h"
#include "tests/support/harness_support.h"
#include "tests/support/testutil.h"

/* Validates metrics against the seed's SessionMetricsResponseV1 when ../shared is present. */
static void assert_seed_metrics_shape(json_t *metrics)
{
    json_t *fn = evd_test_seed_function("eval::assert::exact");
    json_t *defs = json_object_get(json_object_get(fn, "request_schema"), "definitions");
    if (defs == NULL) {
        evd_test_skip_note("seed SessionMetricsResponseV1 check");
        return;
    }
    json_t *schema = json_pack("{s:O,s:s}", "definitions", defs, "$ref",
                               "#/definitions/SessionMetricsResponseV1");
    struct evd_schema_error errs[3];
    struct evd_err err;
    size_t n = evd_jsonschema_check(schema, metrics, errs, 3, &err);
    ck_assert_msg(n == 0, "metrics do not match the seed: %s %s",
                  n > 0 && n != (size_t)-1 ? errs[0].instance_path : err.msg,
                  n > 0 && n != (size_t)-1 ? errs[0].message : "");
    json_decref(schema);
}

/* ---- tests ---------------------------------------------------------------------------- */

START_TEST(plain_text)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[{\"when\":{\"api\":\"%s\",\"session\":\"sess-plain\"},\"reply\":"
              "{\"text\":\"OK\"},\"usage\":{\"input_tokens\":12,\"cached_tokens\":4,"
              "\"cache_write_tokens\":2,\"output_tokens\":3,\"reasoning_tokens\":1}}]}",
              k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k,
                            .session = "sess-plain",
                            .prompt = "Reply with exactly OK.",
                            .system_prompt = "Be terse.",
                            .model_extra = "{\"system_prompt_strategy\":\"override\","
                                           "\"thinking_level\":\"low\"}",
                            .limits = "{\"execution\":{\"max_output_tokens_per_call\":77}}"};
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    ck_assert_str_eq(json_string_value(o.output), "OK");
    json_t *tot = json_object_get(o.metrics, "totals");
    ck_assert_int_eq(JI(tot, "sessions"), 1);
    ck_assert_int_eq(JI(tot, "turns"), 1);
    ck_assert_int_eq(JI(tot, "function_calls"), 0);
    ck_assert_int_eq(JI(tot, "input_tokens"), 18); /* uncached + cache read + cache write */
    ck_assert_int_eq(JI(tot, "output_tokens"), 3);
    ck_assert_int_eq(JI(tot, "cache_read_tokens"), 4);
    ck_assert_int_eq(JI(tot, "cache_write_tokens"), 2);
    if (strcmp(k->api, "messages") == 0)
        ck_assert_ptr_null(json_object_get(tot, "reasoning_tokens")); /* not reported */
    else
        ck_assert_int_eq(JI(tot, "reasoning_tokens"), 1);
    ck_assert_double_eq_tol(json_real_value(json_object_get(tot, "cost_usd")),
                            hl_price(12, 4, 2, 3), 1e-12);
    ck_assert(json_is_true(json_object_get(o.metrics, "complete")));
    assert_seed_metrics_shape(o.metrics);
    ck_assert_str_eq(JS(o.metrics, "root_session_id"), "sess-plain");
    json_t *bs = json_array_get(json_object_get(o.metrics, "by_session"), 0);
    ck_assert_int_eq(JI(bs, "input_tokens"), 18);
    ck_assert_int_eq(JI(bs, "depth"), 0);
    json_t *tr = json_object_get(o.metrics, "traces");
    ck_assert_int_eq(JI(tr, "trace_count"), 1);
    ck_assert_int_eq(JI(tr, "span_count"), 2);
    ck_assert_int_eq(JI(tr, "error_span_count"), 0);
    ck_assert_int_eq(json_array_size(o.spans), 2);
    json_t *gen = json_array_get(json_object_get(o.transcript, "generations"), 0);
    ck_assert_str_eq(JS(gen, "text"), "OK");
    ck_assert_int_eq(JI(gen, "http_status"), 200);
    char *dump = json_dumps(o.transcript, 0);
    ck_assert_ptr_null(strstr(dump, "SECRETVALUE"));
    free(dump);

    /* What evald sent, field by field against the provider's documented request shape. */
    json_t *reqs = hl_last_requests(1);
    json_t *req = json_array_get(reqs, 0);
    json_t *h = json_object_get(req, "headers"), *b = json_object_get(req, "body");
    ck_assert_str_eq(JS(req, "api"), k->api);
    ck_assert_str_eq(JS(h, "x-evald-session"), "sess-plain");
    ck_assert_str_eq(JS(h, "content-type"), "application/json");
    ck_assert_str_eq(JS(b, "model"), k->model);
    if (strcmp(k->api, "responses") == 0) {
        ck_assert_str_eq(JS(req, "path"), "/v1/responses");
        ck_assert_str_eq(JS(h, "authorization"), "REDACTED");
        ck_assert_str_eq(JS(b, "instructions"), "Be terse.");
        ck_assert_int_eq(JI(b, "max_output_tokens"), 77);
        ck_assert_str_eq(JS(json_object_get(b, "reasoning"), "effort"), "low");
        ck_assert(json_is_false(json_object_get(b, "store")));
        json_t *item = json_array_get(json_object_get(b, "input"), 0);
        ck_assert_str_eq(JS(item, "role"), "user");
        ck_assert_str_eq(JS(json_array_get(json_object_get(item, "content"), 0), "text"),
                         "Reply with exactly OK.");
    } else if (strcmp(k->api, "messages") == 0) {
        ck_assert_str_eq(JS(req, "path"), "/v1/messages");
        ck_assert_str_eq(JS(h, "x-api-key"), "REDACTED");
        ck_assert_str_eq(JS(h, "anthropic-version"), "2023-06-01");
        ck_assert_ptr_null(json_object_get(h, "authorization"));
        ck_assert_str_eq(JS(b, "system"), "Be terse.");
        ck_assert_int_eq(JI(b, "max_tokens"), 77);
        ck_assert_str_eq(JS(json_object_get(b, "thinking"), "type"), "adaptive");
        ck_assert_str_eq(JS(json_object_get(b, "output_config"), "effort"), "low");
        json_t *m = json_array_get(json_object_get(b, "messages"), 0);
        ck_assert_str_eq(JS(m, "role"), "user");
        ck_assert_str_eq(JS(json_array_get(json_object_get(m, "content"), 0), "text"),
                         "Reply with exactly OK.");
    } else {
        ck_assert_str_eq(JS(req, "path"), "/v1/chat/completions");
        ck_assert_str_eq(JS(h, "authorization"), "REDACTED");
        ck_assert_int_eq(JI(b, "max_tokens"), 77);
        ck_assert_str_eq(JS(b, "reasoning_effort"), "low");
        json_t *m = json_object_get(b, "messages");
        ck_assert_str_eq(JS(json_array_get(m, 0), "role"), "system");
        ck_assert_str_eq(JS(json_array_get(m, 0), "content"), "Be terse.");
        ck_assert_str_eq(JS(json_array_get(m, 1), "content"), "Reply with exactly OK.");
    }
    ck_assert_ptr_null(json_object_get(b, "tools")); /* omitted policy: nothing exposed */
    json_decref(reqs);

    /* A follow-up message replays the conversation. */
    json_t *conv = json_incref(o.conversation);
    evd_harness_outcome_clear(&o);
    struct hl_run_args a2 = {
        .k = k, .session = "sess-plain", .prompt = "Again.", .conversation = conv};
    hl_run(&a2, &o, NULL);
    hl_assert_completed(&o);
    ck_assert_int_eq(json_array_size(o.conversation), 4);
    reqs = hl_last_requests(1);
    b = json_object_get(json_array_get(reqs, 0), "body");
    if (strcmp(k->api, "responses") == 0) {
        /* user, the reasoning item replayed, the assistant answer, the new user message */
        json_t *input = json_object_get(b, "input");
        ck_assert_int_eq(json_array_size(input), 4);
        ck_assert_str_eq(JS(json_array_get(input, 1), "type"), "reasoning");
        ck_assert_str_eq(JS(json_array_get(input, 2), "role"), "assistant");
        ck_assert_str_eq(JS(json_array_get(input, 2), "content"), "OK");
    } else {
        json_t *msgs = json_object_get(b, "messages");
        ck_assert_int_eq(json_array_size(msgs), 3);
        ck_assert_str_eq(JS(json_array_get(msgs, 1), "role"), "assistant");
    }
    json_decref(reqs);
    json_decref(conv);
    evd_harness_outcome_clear(&o);
}
END_TEST

static void two_calls(const struct hl_kind_case *k, bool native)
{
    char call1[160], call2[160];
    if (native) {
        snprintf(call1, sizeof(call1), "{\"name\":\"math_add\",\"arguments\":{\"a\":2,\"b\":3}}");
        snprintf(call2, sizeof(call2), "{\"name\":\"math_add\",\"arguments\":{\"a\":5,\"b\":7}}");
    } else {
        snprintf(call1, sizeof(call1),
                 "{\"name\":\"agent_trigger\",\"arguments\":{\"function_id\":\"math::add\","
                 "\"payload\":{\"a\":2,\"b\":3}}}");
        snprintf(call2, sizeof(call2),
                 "{\"name\":\"agent_trigger\",\"arguments\":{\"function_id\":\"math::add\","
                 "\"payload\":{\"a\":5,\"b\":7}}}");
    }
    hl_script("{\"rules\":["
              "{\"when\":{\"api\":\"%s\",\"has_tool_result\":false},\"times\":1,\"reply\":"
              "{\"tool_calls\":[%s]},\"usage\":{\"input_tokens\":10,\"output_tokens\":5}},"
              "{\"when\":{\"tool_result_contains\":\"\\\"sum\\\":5\"},\"times\":1,\"reply\":"
              "{\"tool_calls\":[%s]},\"usage\":{\"input_tokens\":20,\"cached_tokens\":6,"
              "\"output_tokens\":5}},"
              "{\"when\":{\"tool_result_contains\":\"\\\"sum\\\":12\"},\"reply\":{\"text\":"
              "\"The answer is 12\"},\"usage\":{\"input_tokens\":30,\"output_tokens\":4}}]}",
              k->api, call1, call2);
    struct evd_harness_outcome o;
    char functions[128];
    snprintf(functions, sizeof(functions), "{\"allow\":[\"math::*\"],\"expose\":\"%s\"}",
             native ? "native" : "agent_trigger");
    struct hl_run_args a = {.k = k,
                            .prompt = "Add 2 and 3, then add 7.",
                            .functions = functions,
                            .model_extra = "{\"mode\":\"agent\"}"};
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    ck_assert_str_eq(json_string_value(o.output), "The answer is 12");
    json_t *tot = json_object_get(o.metrics, "totals");
    ck_assert_int_eq(JI(tot, "turns"), 3);
    ck_assert_int_eq(JI(tot, "function_calls"), 2);
    ck_assert_int_eq(JI(tot, "function_call_errors"), 0);
    ck_assert_int_eq(JI(tot, "input_tokens"), 66);
    ck_assert_int_eq(JI(tot, "output_tokens"), 14);
    ck_assert_int_eq(JI(tot, "cache_read_tokens"), 6);
    ck_assert_double_eq_tol(json_real_value(json_object_get(tot, "cost_usd")),
                            hl_price(60, 6, 0, 14), 1e-12);
    ck_assert_int_eq(hs_tools_calls("/add"), 2);
    json_t *last = hs_tools_last("/add");
    ck_assert_int_eq(JI(last, "a"), 5);
    ck_assert_int_eq(JI(last, "b"), 7);
    json_decref(last);
    json_t *fc = json_object_get(o.transcript, "function_calls");
    ck_assert_int_eq(json_array_size(fc), 2);
    ck_assert_str_eq(JS(json_array_get(fc, 1), "function_id"), "math::add");
    ck_assert_int_eq(JI(json_object_get(json_array_get(fc, 1), "result"), "sum"), 12);
    ck_assert_int_eq(JI(json_object_get(o.metrics, "traces"), "span_count"), 6);
    ck_assert_int_eq(json_array_size(o.spans), 6);

    /* The tools offered and the tool result sent back, in each wire's own shape. */
    json_t *reqs = hl_last_requests(3);
    ck_assert_int_eq(json_array_size(reqs), 3);
    json_t *b0 = json_object_get(json_array_get(reqs, 0), "body");
    json_t *b1 = json_object_get(json_array_get(reqs, 1), "body");
    json_t *tool = json_array_get(json_object_get(b0, "tools"), 0);
    ck_assert_int_eq(json_array_size(json_object_get(b0, "tools")), 1);
    const char *want_name = native ? "math_add" : "agent_trigger";
    if (strcmp(k->api, "responses") == 0) {
        ck_assert_str_eq(JS(tool, "type"), "function");
        ck_assert_str_eq(JS(tool, "name"), want_name);
        ck_assert_str_eq(JS(json_object_get(tool, "parameters"), "type"), "object");
        json_t *input = json_object_get(b1, "input");
        json_t *call = json_array_get(input, json_array_size(input) - 2);
        json_t *res = json_array_get(input, json_array_size(input) - 1);
        ck_assert_str_eq(JS(call, "type"), "function_call");
        ck_assert_str_eq(JS(res, "type"), "function_call_output");
        ck_assert_str_eq(JS(res, "call_id"), JS(call, "call_id"));
        ck_assert_str_eq(JS(res, "output"), "{\"sum\":5}");
    } else if (strcmp(k->api, "messages") == 0) {
        ck_assert_str_eq(JS(tool, "name"), want_name);
        ck_assert_str_eq(JS(json_object_get(tool, "input_schema"), "type"), "object");
        json_t *msgs = json_object_get(b1, "messages");
        ck_assert_int_eq(json_array_size(msgs), 3);
        json_t *use = json_array_get(json_object_get(json_array_get(msgs, 1), "content"), 0);
        json_t *res = json_array_get(json_object_get(json_array_get(msgs, 2), "content"), 0);
        ck_assert_str_eq(JS(use, "type"), "tool_use");
        ck_assert_str_eq(JS(res, "type"), "tool_result");
        ck_assert_str_eq(JS(res, "tool_use_id"), JS(use, "id"));
        ck_assert_str_eq(JS(res, "content"), "{\"sum\":5}");
    } else {
        ck_assert_str_eq(JS(tool, "type"), "function");
        ck_assert_str_eq(JS(json_object_get(tool, "function"), "name"), want_name);
        json_t *msgs = json_object_get(b1, "messages");
        json_t *asst = json_array_get(msgs, json_array_size(msgs) - 2);
        json_t *res = json_array_get(msgs, json_array_size(msgs) - 1);
        json_t *tc = json_array_get(json_object_get(asst, "tool_calls"), 0);
        ck_assert_str_eq(JS(res, "role"), "tool");
        ck_assert_str_eq(JS(res, "tool_call_id"), JS(tc, "id"));
        ck_assert_str_eq(JS(res, "content"), "{\"sum\":5}");
    }
    json_decref(reqs);
    evd_harness_outcome_clear(&o);
}

START_TEST(two_function_calls_native)
{
    NEED_STUB();
    two_calls(&hl_kinds[_i], true);
}
END_TEST

START_TEST(two_function_calls_agent_trigger)
{
    NEED_STUB();
    two_calls(&hl_kinds[_i], false);
}
END_TEST

START_TEST(denied_function_is_an_error_result)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":["
              "{\"when\":{\"api\":\"%s\",\"has_tool_result\":false},\"times\":1,\"reply\":"
              "{\"tool_calls\":[{\"name\":\"net_fetch\",\"arguments\":{\"url\":\"x\"}}]},"
              "\"usage\":{\"input_tokens\":5,\"output_tokens\":5}},"
              "{\"when\":{\"tool_result_contains\":\"not allowed\"},\"reply\":{\"text\":"
              "\"denied\"},\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}]}",
              k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k,
                            .functions = "{\"allow\":[\"*\"],\"deny\":[\"net::*\"],"
                                         "\"expose\":\"native\"}"};
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    ck_assert_str_eq(json_string_value(o.output), "denied");
    json_t *tot = json_object_get(o.metrics, "totals");
    ck_assert_int_eq(JI(tot, "function_calls"), 1);
    ck_assert_int_eq(JI(tot, "function_call_errors"), 1);
    ck_assert_int_eq(JI(json_object_get(o.metrics, "traces"), "error_span_count"), 1);
    ck_assert_int_eq(hs_tools_calls("/echo"), 0);
    json_t *fc = json_array_get(json_object_get(o.transcript, "function_calls"), 0);
    ck_assert_str_eq(JS(fc, "status"), "error");
    ck_assert_str_eq(JS(fc, "error"), "function net::fetch is not allowed by the function policy");
    /* Only allowed functions were offered: math::add and slow, never net::fetch. */
    json_t *reqs = hl_last_requests(2);
    json_t *tools = json_object_get(json_object_get(json_array_get(reqs, 0), "body"), "tools");
    ck_assert_int_eq(json_array_size(tools), 2);
    char *dump = json_dumps(tools, 0);
    ck_assert_ptr_null(strstr(dump, "net_fetch"));
    free(dump);
    json_decref(reqs);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(failing_and_slow_tools_are_error_results)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":["
              "{\"when\":{\"api\":\"%s\",\"has_tool_result\":false},\"times\":1,\"reply\":"
              "{\"tool_calls\":[{\"name\":\"agent_trigger\",\"arguments\":{\"function_id\":"
              "\"slow\",\"payload\":{}}},{\"name\":\"agent_trigger\",\"arguments\":"
              "{\"function_id\":\"nope\",\"payload\":{}}},{\"name\":\"agent_trigger\","
              "\"arguments\":{\"function_id\":\"math::add\",\"payload\":{\"a\":\"two\"}}}]}},"
              "{\"when\":{\"has_tool_result\":true},\"reply\":{\"text\":\"done\"}}]}",
              k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k, .functions = "{\"allow\":[\"*\"]}"};
    int64_t t0 = evd_mono_ms();
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    ck_assert_int_lt(evd_mono_ms() - t0, 2500); /* the slow tool's 500 ms timeout held */
    json_t *tot = json_object_get(o.metrics, "totals");
    ck_assert_int_eq(JI(tot, "function_calls"), 3);
    ck_assert_int_eq(JI(tot, "function_call_errors"), 3);
    ck_assert_int_eq(hs_tools_calls("/add"), 0); /* an invalid payload is never sent */
    json_t *fcs = json_object_get(o.transcript, "function_calls");
    const char *perr = JS(json_array_get(fcs, 2), "error");
    ck_assert_msg(strncmp(perr, "payload of math::add does not match its request_schema: ", 56) ==
                          0 &&
                      strstr(perr, "\"/a\": \"two\" is not of type \"integer\"") != NULL,
                  "%s", perr);
    ck_assert_str_eq(JS(json_array_get(fcs, 0), "error"), "function slow timed out after 500 ms");
    ck_assert_str_eq(JS(json_array_get(fcs, 1), "error"), "function nope does not exist");
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(max_turns_reached)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[{\"when\":{\"api\":\"%s\"},\"reply\":{\"tool_calls\":[{\"name\":"
              "\"math_add\",\"arguments\":{\"a\":1,\"b\":1}}]},\"usage\":{\"input_tokens\":4,"
              "\"output_tokens\":2}}]}",
              k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k,
                            .functions = "{\"allow\":[\"math::add\"],\"expose\":\"native\"}",
                            .limits = "{\"execution\":{\"max_turns\":2}}"};
    hl_run(&a, &o, NULL);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(o.phase, "limit");
    ck_assert_str_eq(o.result_error, "max_turns 2 reached before a final answer");
    json_t *tot = json_object_get(o.metrics, "totals");
    ck_assert_int_eq(JI(tot, "turns"), 2);
    ck_assert_int_eq(JI(tot, "function_calls"), 1);
    ck_assert_int_eq(JI(tot, "input_tokens"), 8);
    ck_assert_int_eq(hs_tools_calls("/add"), 1);
    ck_assert_ptr_null(o.output);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(token_budget_stops_before_a_tool_runs)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[{\"when\":{\"api\":\"%s\"},\"reply\":{\"tool_calls\":[{\"name\":"
              "\"math_add\",\"arguments\":{\"a\":1,\"b\":1}}]},\"usage\":{\"input_tokens\":40,"
              "\"output_tokens\":20}}]}",
              k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k,
                            .functions = "{\"allow\":[\"math::add\"],\"expose\":\"native\"}",
                            .limits = "{\"execution\":{\"max_total_tokens\":50}}"};
    hl_run(&a, &o, NULL);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(o.phase, "limit");
    ck_assert_str_eq(o.result_error, "total tokens 60 exceeded max_total_tokens 50 before "
                                     "running 1 function call(s)");
    ck_assert_int_eq(hs_tools_calls("/add"), 0);
    json_t *tot = json_object_get(o.metrics, "totals");
    ck_assert_int_eq(JI(tot, "function_calls"), 0);
    ck_assert_int_eq(JI(tot, "turns"), 1);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(cost_budget_stops_before_a_tool_runs)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[{\"when\":{\"api\":\"%s\"},\"reply\":{\"tool_calls\":[{\"name\":"
              "\"math_add\",\"arguments\":{\"a\":1,\"b\":1}}]},\"usage\":{\"input_tokens\":1000,"
              "\"output_tokens\":1000}}]}",
              k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k,
                            .functions = "{\"allow\":[\"math::add\"],\"expose\":\"native\"}",
                            .limits = "{\"execution\":{\"max_cost_usd\":0.005}}"};
    hl_run(&a, &o, NULL);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(o.phase, "limit");
    ck_assert_msg(strstr(o.result_error, "cost $0.011000 exceeded max_cost_usd $0.005000") != NULL,
                  "%s", o.result_error);
    ck_assert_int_eq(hs_tools_calls("/add"), 0);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(ask_mode_offers_no_functions)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[],\"default\":{\"reply\":{\"text\":\"fine\"}}}");
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k,
                            .system_prompt = "",
                            .functions = "{\"allow\":[\"*\"],\"expose\":\"native\"}",
                            .model_extra = "{\"mode\":\"ask\"}"};
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    json_t *reqs = hl_last_requests(1);
    json_t *b = json_object_get(json_array_get(reqs, 0), "body");
    ck_assert_ptr_null(json_object_get(b, "tools"));
    char *dump = json_dumps(b, 0);
    ck_assert_ptr_nonnull(strstr(dump, "Mode: ask."));
    ck_assert_ptr_nonnull(strstr(dump, "You are an AI agent run by evald."));
    free(dump);
    json_decref(reqs);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(json_output_is_decoded)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[],\"default\":{\"reply\":{\"json\":{\"verdict\":\"GREEN\",\"n\":2}}}}");
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k, .output = "{\"type\":\"json\"}"};
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    ck_assert(json_is_object(o.output));
    ck_assert_str_eq(JS(o.output, "verdict"), "GREEN");
    evd_harness_outcome_clear(&o);
    /* Not JSON twice: one repair turn, then the run fails with the code alone. */
    hl_script("{\"rules\":[],\"default\":{\"reply\":{\"text\":\"not json\"}}}");
    hl_run(&a, &o, NULL);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(o.phase, "await");
    ck_assert(o.output_invalid);
    ck_assert_str_eq(o.result_error,
                     "not_json: return exactly one JSON object, without prose or code fences");
    ck_assert_int_eq(json_array_size(json_object_get(o.transcript, "generations")), 2);
    evd_harness_outcome_clear(&o);
}
END_TEST

static int dispatch_calls;

static json_t *double_it(void *ctx, const char *function_id, json_t *payload, int64_t timeout_ms,
                         struct evd_err *err)
{
    (void)ctx;
    dispatch_calls++;
    if (strcmp(function_id, "iii::double") != 0 || timeout_ms <= 0) {
        evd_err_set(err, EVD_ENOTFOUND, "unexpected call of %s", function_id);
        return NULL;
    }
    return json_pack("{s:I}", "doubled", 2 * json_integer_value(json_object_get(payload, "n")));
}

START_TEST(dispatch_functions_are_callable)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script(
        "{\"rules\":["
        "{\"when\":{\"api\":\"%s\",\"has_tool_result\":false},\"times\":1,\"reply\":"
        "{\"tool_calls\":[{\"name\":\"agent_trigger\",\"arguments\":{\"function_id\":"
        "\"iii::double\",\"payload\":{\"n\":21}}}]}},"
        "{\"when\":{\"tool_result_contains\":\"\\\"doubled\\\":42\"},\"reply\":{\"text\":\"42\"}"
        "}]}",
        k->api);
    json_t *fns = json_loads("[{\"id\":\"iii::double\",\"description\":\"Doubles n\","
                             "\"request_schema\":{\"type\":\"object\",\"properties\":{\"n\":"
                             "{\"type\":\"integer\"}}}}]",
                             0, NULL);
    struct evd_harness_dispatch d = {fns, double_it, NULL};
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k, .functions = "{\"allow\":[\"iii::*\"]}", .dispatch = &d};
    dispatch_calls = 0;
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    ck_assert_str_eq(json_string_value(o.output), "42");
    ck_assert_int_eq(dispatch_calls, 1);
    ck_assert_int_eq(JI(json_object_get(o.metrics, "totals"), "function_calls"), 1);
    /* The agent_trigger tool lists the function and its payload schema. */
    json_t *reqs = hl_last_requests(2);
    json_t *tool = json_array_get(
        json_object_get(json_object_get(json_array_get(reqs, 0), "body"), "tools"), 0);
    char *dump = json_dumps(tool, 0);
    ck_assert_ptr_nonnull(strstr(dump, "iii::double: Doubles n"));
    free(dump);
    json_decref(reqs);
    json_decref(fns);
    evd_harness_outcome_clear(&o);
}
END_TEST

struct par_ctx {
    const struct hl_kind_case *k;
    char session[32];
    struct evd_harness_outcome out;
};

static void *par_run(void *arg)
{
    struct par_ctx *c = arg;
    struct hl_run_args a = {.k = c->k, .session = c->session};
    hl_run(&a, &c->out, NULL);
    return NULL;
}

START_TEST(concurrent_runs_share_the_registry)
{
    NEED_STUB();
    hl_script("{\"rules\":[],\"default\":{\"latency_ms\":100,\"reply\":{\"text\":\"OK\"},"
              "\"usage\":{\"input_tokens\":2,\"output_tokens\":1}}}");
    struct par_ctx c[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        c[i].k = &hl_kinds[i % NKINDS];
        snprintf(c[i].session, sizeof(c[i].session), "sess-par-%d", i);
        pthread_create(&t[i], NULL, par_run, &c[i]);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        hl_assert_completed(&c[i].out);
        ck_assert_str_eq(JS(c[i].out.metrics, "root_session_id"), c[i].session);
        ck_assert_int_eq(JI(json_object_get(c[i].out.metrics, "totals"), "input_tokens"), 2);
        evd_harness_outcome_clear(&c[i].out);
    }
    json_t *stats = evd_t_stub_stats(&hl_stub);
    ck_assert_int_eq(JI(stats, "requests"), 6);
    ck_assert_int_eq(JI(stats, "max_in_flight_per_session"), 1);
    ck_assert_int_ge(JI(stats, "max_in_flight"), 2);
    json_decref(stats);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("harness_integration");
    TCase *tc = tcase_create("loop");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, plain_text, 0, NKINDS);
    tcase_add_loop_test(tc, two_function_calls_native, 0, NKINDS);
    tcase_add_loop_test(tc, two_function_calls_agent_trigger, 0, NKINDS);
    tcase_add_loop_test(tc, denied_function_is_an_error_result, 0, NKINDS);
    tcase_add_loop_test(tc, failing_and_slow_tools_are_error_results, 0, NKINDS);
    tcase_add_loop_test(tc, max_turns_reached, 0, NKINDS);
    tcase_add_loop_test(tc, token_budget_stops_before_a_tool_runs, 0, NKINDS);
    tcase_add_loop_test(tc, cost_budget_stops_before_a_tool_runs, 0, NKINDS);
    tcase_add_loop_test(tc, ask_mode_offers_no_functions, 0, NKINDS);
    tcase_add_loop_test(tc, json_output_is_decoded, 0, NKINDS);
    tcase_add_test(tc, concurrent_runs_share_the_registry);
    tcase_add_loop_test(tc, dispatch_functions_are_callable, 0, NKINDS);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    hl_setup_all();
    SRunner *sr = srunner_create(suite());
    /* One stub and one tool server serve every test: no fork. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    hl_teardown_all();
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
