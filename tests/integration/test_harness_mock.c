/*
 * Integration tests of mocked tools in the agent loop (harness/mock.c, docs/harness.md
 * "Mocked tools") against a real evald-stub child, once per wire kind: one value answers
 * every call, a sequence answers the k-th call with its k-th item (the last repeats), a
 * `when` list answers with its first matching item, a call without a mock and a call with
 * invalid arguments are error results that count, mocked tools are offered natively beside
 * agent_trigger, under a deny-all policy and in ask mode, a registered HTTP tool still
 * works beside them, and nothing but the stub is ever reached. What the model was sent is
 * read back from /_stub/requests. Fixture: tests/support/harness_loop_fixture.h; no fork.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/harness.h"
#include "tests/support/harness_loop_fixture.h"
#include "tests/support/harness_support.h"

/* search {q: string (required), filters: object} and book {room: string (required)}. */
#define MOCKS                                                                                      \
    "[{\"name\":\"search\",\"description\":\"Searches hotels\",\"parameters\":{\"type\":"          \
    "\"object\",\"properties\":{\"q\":{\"type\":\"string\"},\"filters\":{\"type\":\"object\"}},"   \
    "\"required\":[\"q\"]}},"                                                                      \
    "{\"name\":\"book\",\"description\":\"Books a room\",\"parameters\":{\"type\":\"object\","     \
    "\"properties\":{\"room\":{\"type\":\"string\"}},\"required\":[\"room\"]}}]"

/* The texts of the tool results in a request body (each wire's own place), in order: a new
 * array of strings. */
static json_t *tool_outputs(json_t *body, const char *api)
{
    json_t *out = json_array();
    size_t i, j;
    json_t *m, *b;
    if (strcmp(api, "responses") == 0) {
        json_array_foreach(json_object_get(body, "input"), i, m)
        {
            if (JS(m, "type") != NULL && strcmp(JS(m, "type"), "function_call_output") == 0)
                json_array_append(out, json_object_get(m, "output"));
        }
    } else if (strcmp(api, "chat") == 0) {
        json_array_foreach(json_object_get(body, "messages"), i, m)
        {
            if (JS(m, "role") != NULL && strcmp(JS(m, "role"), "tool") == 0)
                json_array_append(out, json_object_get(m, "content"));
        }
    } else {
        json_array_foreach(json_object_get(body, "messages"), i, m)
        {
            json_array_foreach(json_object_get(m, "content"), j, b)
            {
                if (JS(b, "type") != NULL && strcmp(JS(b, "type"), "tool_result") == 0)
                    json_array_append(out, json_object_get(b, "content"));
            }
        }
    }
    return out;
}

/* The names of the tools offered in a request body: a new array of strings. */
static json_t *offered(json_t *body, const char *api)
{
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(body, "tools"), i, t)
    {
        json_t *fn = strcmp(api, "chat") == 0 ? json_object_get(t, "function") : t;
        json_array_append(out, json_object_get(fn, "name"));
    }
    return out;
}

/* Fails unless `have` (an array of strings) equals the JSON text `want`. */
static void assert_strings(json_t *have, const char *want)
{
    json_t *w = json_loads(want, 0, NULL);
    ck_assert_ptr_nonnull(w);
    char *h = json_dumps(have, JSON_COMPACT);
    ck_assert_msg(json_equal(have, w), "got %s, want %s", h, want);
    free(h);
    json_decref(w);
}

/* The tool-result texts of the last of `ngen` requests, and checks that exactly ngen
 * provider requests and no tool-server call were made: the mocks reached no network. */
static json_t *last_outputs(const struct hl_kind_case *k, int ngen)
{
    json_t *stats = evd_t_stub_stats(&hl_stub);
    ck_assert_int_eq(JI(stats, "requests"), ngen);
    json_decref(stats);
    ck_assert_int_eq(hs_tools_calls("/add") + hs_tools_calls("/echo") + hs_tools_calls("/slow") +
                         hs_tools_calls("/fail"),
                     0);
    json_t *reqs = hl_last_requests(1);
    json_t *outs = tool_outputs(json_object_get(json_array_get(reqs, 0), "body"), k->api);
    json_decref(reqs);
    return outs;
}

/* The i-th function_calls entry of the transcript (borrowed). */
static json_t *fcall(const struct evd_harness_outcome *o, size_t i)
{
    return json_array_get(json_object_get(o->transcript, "function_calls"), i);
}

static void assert_counts(const struct evd_harness_outcome *o, int calls, int errors)
{
    json_t *tot = json_object_get(o->metrics, "totals");
    ck_assert_int_eq(JI(tot, "function_calls"), calls);
    ck_assert_int_eq(JI(tot, "function_call_errors"), errors);
    ck_assert_int_eq(json_array_size(json_object_get(o->transcript, "function_calls")), calls);
}

/* ---- tests ---------------------------------------------------------------------------- */

START_TEST(one_value_answers_every_call)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":["
              "{\"when\":{\"api\":\"%s\",\"has_tool_result\":false},\"times\":1,\"reply\":"
              "{\"tool_calls\":[{\"name\":\"search\",\"arguments\":{\"q\":\"oslo\"}},"
              "{\"name\":\"search\",\"arguments\":{\"q\":\"bergen\"}}]}},"
              "{\"when\":{\"tool_result_contains\":\"R42\"},\"reply\":{\"text\":\"found\"}}]}",
              k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k,
                            .session = "sess-mock-one",
                            .mock_tools = MOCKS,
                            .tool_results = "{\"search\":{\"hits\":[\"R42\"]}}"};
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    ck_assert_str_eq(json_string_value(o.output), "found");
    assert_counts(&o, 2, 0);
    for (size_t i = 0; i < 2; i++) {
        json_t *fc = fcall(&o, i);
        ck_assert_str_eq(JS(fc, "status"), "ok");
        ck_assert_str_eq(JS(fc, "function_id"), "search");
        ck_assert(json_is_true(json_object_get(fc, "mocked")));
        json_t *hits = json_object_get(json_object_get(fc, "result"), "hits");
        ck_assert_str_eq(json_string_value(json_array_get(hits, 0)), "R42");
    }
    json_t *outs = last_outputs(k, 2);
    assert_strings(outs, "[\"{\\\"hits\\\":[\\\"R42\\\"]}\",\"{\\\"hits\\\":[\\\"R42\\\"]}\"]");
    json_decref(outs);
    /* spans: the run, two generations and two function spans marked mocked */
    size_t i, nmocked = 0;
    json_t *s;
    json_array_foreach(o.spans, i, s)
    {
        if (strcmp(JS(s, "kind"), "function") == 0) {
            ck_assert(json_is_true(json_object_get(json_object_get(s, "attributes"), "mocked")));
            nmocked++;
        }
    }
    ck_assert_int_eq(nmocked, 2);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(a_sequence_answers_the_kth_call_and_repeats_its_last)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":["
              "{\"when\":{\"api\":\"%s\",\"has_tool_result\":false},\"times\":1,\"reply\":"
              "{\"tool_calls\":[{\"name\":\"search\",\"arguments\":{\"q\":\"a\"}}]}},"
              "{\"when\":{\"tool_result_contains\":\"first\"},\"times\":1,\"reply\":"
              "{\"tool_calls\":[{\"name\":\"search\",\"arguments\":{\"q\":\"b\"}},"
              "{\"name\":\"search\",\"arguments\":{\"q\":\"c\"}},"
              "{\"name\":\"book\",\"arguments\":{\"room\":\"R1\"}}]}},"
              "{\"when\":{\"tool_result_contains\":\"second\"},\"reply\":{\"text\":\"done\"}}]}",
              k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k,
                            .mock_tools = MOCKS,
                            .tool_results = "{\"search\":[\"first\",\"second\"],"
                                            "\"book\":[{\"ok\":1},{\"ok\":2}]}"};
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    ck_assert_str_eq(json_string_value(o.output), "done");
    assert_counts(&o, 4, 0);
    ck_assert_str_eq(json_string_value(json_object_get(fcall(&o, 0), "result")), "first");
    ck_assert_str_eq(json_string_value(json_object_get(fcall(&o, 1), "result")), "second");
    ck_assert_str_eq(json_string_value(json_object_get(fcall(&o, 2), "result")), "second");
    /* each tool counts its own calls: book's first call gets book's first item */
    ck_assert_int_eq(JI(json_object_get(fcall(&o, 3), "result"), "ok"), 1);
    json_t *outs = last_outputs(k, 3);
    assert_strings(outs, "[\"first\",\"second\",\"second\",\"{\\\"ok\\\":1}\"]");
    json_decref(outs);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(a_when_list_answers_with_the_first_matching_item)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":["
              "{\"when\":{\"api\":\"%s\",\"has_tool_result\":false},\"times\":1,\"reply\":"
              "{\"tool_calls\":[{\"name\":\"search\",\"arguments\":{\"q\":\"oslo\"}},"
              "{\"name\":\"search\",\"arguments\":{\"q\":\"oslo\",\"filters\":{\"stars\":5,"
              "\"pool\":true}}},"
              "{\"name\":\"search\",\"arguments\":{\"q\":\"bergen\",\"filters\":{\"stars\":4}}},"
              "{\"name\":\"book\",\"arguments\":{\"room\":\"R1\"}},"
              "{\"name\":\"book\",\"arguments\":{\"room\":\"R2\"}}]}},"
              "{\"when\":{\"has_tool_result\":true},\"reply\":{\"text\":\"done\"}}]}",
              k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {
        .k = k,
        .mock_tools = MOCKS,
        .tool_results = "{\"search\":["
                        "{\"when\":{\"filters\":{\"stars\":5}},\"result\":\"five-star\"},"
                        "{\"when\":{\"q\":\"oslo\"},\"result\":\"oslo-hotels\"},"
                        "{\"when\":{\"q\":\"oslo\"},\"result\":\"never\"},"
                        "{\"when\":{},\"result\":\"anything\"}],"
                        "\"book\":[{\"when\":{\"room\":\"R1\"},\"result\":{\"booked\":\"R1\"}}]}"};
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    assert_counts(&o, 5, 1);
    ck_assert_str_eq(json_string_value(json_object_get(fcall(&o, 0), "result")), "oslo-hotels");
    ck_assert_str_eq(json_string_value(json_object_get(fcall(&o, 1), "result")), "five-star");
    ck_assert_str_eq(json_string_value(json_object_get(fcall(&o, 2), "result")), "anything");
    ck_assert_str_eq(JS(json_object_get(fcall(&o, 3), "result"), "booked"), "R1");
    ck_assert_str_eq(JS(fcall(&o, 4), "status"), "error");
    ck_assert_str_eq(JS(fcall(&o, 4), "error"), "no mocked result for book");
    json_t *outs = last_outputs(k, 2);
    assert_strings(outs, "[\"oslo-hotels\",\"five-star\",\"anything\","
                         "\"{\\\"booked\\\":\\\"R1\\\"}\","
                         "\"{\\\"error\\\":\\\"no mocked result for book\\\"}\"]");
    json_decref(outs);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(a_call_without_a_mock_is_an_error_result)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    const char *results[] = {"{\"search\":\"hits\"}", NULL}; /* book unmocked; no tool_results */
    for (int v = 0; v < 2; v++) {
        hl_script("{\"rules\":["
                  "{\"when\":{\"api\":\"%s\",\"has_tool_result\":false},\"times\":1,\"reply\":"
                  "{\"tool_calls\":[{\"name\":\"book\",\"arguments\":{\"room\":\"R9\"}}]}},"
                  "{\"when\":{\"tool_result_contains\":\"no mocked result for book\"},"
                  "\"reply\":{\"text\":\"told\"}},"
                  "{\"when\":{\"has_tool_result\":true},\"reply\":{\"text\":\"other\"}}]}",
                  k->api);
        struct evd_harness_outcome o;
        struct hl_run_args a = {.k = k, .mock_tools = MOCKS, .tool_results = results[v]};
        hl_run(&a, &o, NULL);
        hl_assert_completed(&o);
        ck_assert_str_eq(json_string_value(o.output), "told");
        assert_counts(&o, 1, 1);
        json_t *fc = fcall(&o, 0);
        ck_assert_str_eq(JS(fc, "status"), "error");
        ck_assert_str_eq(JS(fc, "error"), "no mocked result for book");
        ck_assert(json_is_true(json_object_get(fc, "mocked")));
        ck_assert_int_eq(JI(json_object_get(o.metrics, "traces"), "error_span_count"), 1);
        json_t *outs = last_outputs(k, 2);
        assert_strings(outs, "[\"{\\\"error\\\":\\\"no mocked result for book\\\"}\"]");
        json_decref(outs);
        evd_harness_outcome_clear(&o);
    }
}
END_TEST

START_TEST(invalid_arguments_are_an_error_result)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":["
              "{\"when\":{\"api\":\"%s\",\"has_tool_result\":false},\"times\":1,\"reply\":"
              "{\"tool_calls\":[{\"name\":\"search\",\"arguments\":{\"q\":5}},"
              "{\"name\":\"search\",\"arguments\":{\"q\":\"ok\"}}]}},"
              "{\"when\":{\"has_tool_result\":true},\"reply\":{\"text\":\"done\"}}]}",
              k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {
        .k = k, .mock_tools = MOCKS, .tool_results = "{\"search\":[\"first\",\"second\"]}"};
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    assert_counts(&o, 2, 1);
    const char *perr = JS(fcall(&o, 0), "error");
    const char *want = "payload of search does not match its request_schema: ";
    ck_assert_msg(perr != NULL && strncmp(perr, want, strlen(want)) == 0 &&
                      strstr(perr, "\"/q\": 5 is not of type \"string\"") != NULL,
                  "%s", perr ? perr : "(none)");
    ck_assert(json_is_true(json_object_get(fcall(&o, 0), "mocked")));
    /* the invalid call was not counted: the next valid call gets the first item */
    ck_assert_str_eq(json_string_value(json_object_get(fcall(&o, 1), "result")), "first");
    json_t *outs = last_outputs(k, 2);
    ck_assert_int_eq(json_array_size(outs), 2);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_array_get(outs, 0)), "\\\"/q\\\""));
    ck_assert_str_eq(json_string_value(json_array_get(outs, 1)), "first");
    json_decref(outs);
    evd_harness_outcome_clear(&o);
}
END_TEST

/* One run that offers the mocked tools under `functions` and `model_extra`; the model calls
 * `call` (a tool call JSON); checks the tools offered equal `want` and the call answered. */
static void offered_case(const struct hl_kind_case *k, const char *functions, const char *model,
                         const char *want, const char *call, const char *function_id)
{
    hl_script("{\"rules\":["
              "{\"when\":{\"api\":\"%s\",\"has_tool_result\":false},\"times\":1,\"reply\":"
              "{\"tool_calls\":[%s]}},"
              "{\"when\":{\"tool_result_contains\":\"mocked-answer\"},\"reply\":{\"text\":"
              "\"done\"}}]}",
              k->api, call);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k,
                            .functions = functions,
                            .model_extra = model,
                            .mock_tools = "[{\"name\":\"search\",\"parameters\":{\"type\":"
                                          "\"object\"}},{\"name\":\"weather.current\","
                                          "\"description\":\"Weather now\"}]",
                            .tool_results = "{\"search\":\"mocked-answer\","
                                            "\"weather.current\":\"mocked-answer\"}"};
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    ck_assert_str_eq(json_string_value(o.output), "done");
    assert_counts(&o, 1, 0);
    ck_assert_str_eq(JS(fcall(&o, 0), "function_id"), function_id);
    ck_assert_str_eq(json_string_value(json_object_get(fcall(&o, 0), "result")), "mocked-answer");
    json_t *reqs = hl_last_requests(2);
    json_t *names = offered(json_object_get(json_array_get(reqs, 0), "body"), k->api);
    assert_strings(names, want);
    json_decref(names);
    json_decref(reqs);
    json_t *outs = last_outputs(k, 2);
    assert_strings(outs, "[\"mocked-answer\"]");
    json_decref(outs);
    evd_harness_outcome_clear(&o);
}

START_TEST(mocked_tools_are_offered_natively_whatever_the_policy)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    const char *search = "{\"name\":\"search\",\"arguments\":{\"q\":\"x\"}}";
    const char *weather = "{\"name\":\"weather_current\",\"arguments\":{}}";
    /* no policy (deny all): the mocked tools only */
    offered_case(k, NULL, NULL, "[\"search\",\"weather_current\"]", search, "search");
    /* a deny-all policy, native */
    offered_case(k, "{\"allow\":[\"*\"],\"deny\":[\"*\"],\"expose\":\"native\"}", NULL,
                 "[\"search\",\"weather_current\"]", weather, "weather.current");
    /* agent_trigger: the mocked tools beside agent_trigger */
    offered_case(k, "{\"allow\":[\"math::*\"],\"expose\":\"agent_trigger\"}", NULL,
                 "[\"search\",\"weather_current\",\"agent_trigger\"]", search, "search");
    /* agent_trigger by default, nothing registered allowed */
    offered_case(k, "{\"allow\":[\"nothing\"]}", NULL, "[\"search\",\"weather_current\"]", weather,
                 "weather.current");
    /* ask mode caps the policy at deny-all, not the mocked tools */
    offered_case(k, "{\"allow\":[\"*\"],\"expose\":\"native\"}", "{\"mode\":\"ask\"}",
                 "[\"search\",\"weather_current\"]", search, "search");
}
END_TEST

START_TEST(a_registered_http_tool_works_beside_mocked_tools)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    for (int trigger = 0; trigger < 2; trigger++) {
        const char *add = trigger ? "{\"name\":\"agent_trigger\",\"arguments\":{\"function_id\":"
                                    "\"math::add\",\"payload\":{\"a\":2,\"b\":3}}}"
                                  : "{\"name\":\"math_add\",\"arguments\":{\"a\":2,\"b\":3}}";
        hl_script("{\"rules\":["
                  "{\"when\":{\"api\":\"%s\",\"has_tool_result\":false},\"times\":1,\"reply\":"
                  "{\"tool_calls\":[{\"name\":\"search\",\"arguments\":{\"q\":\"x\"}},%s]}},"
                  "{\"when\":{\"tool_result_contains\":\"\\\"sum\\\":5\"},\"reply\":{\"text\":"
                  "\"done\"}}]}",
                  k->api, add);
        struct evd_harness_outcome o;
        struct hl_run_args a = {.k = k,
                                .functions =
                                    trigger ? "{\"allow\":[\"math::*\"]}"
                                            : "{\"allow\":[\"math::*\"],\"expose\":\"native\"}",
                                .mock_tools = MOCKS,
                                .tool_results = "{\"search\":{\"hits\":3}}"};
        hl_run(&a, &o, NULL);
        hl_assert_completed(&o);
        ck_assert_str_eq(json_string_value(o.output), "done");
        assert_counts(&o, 2, 0);
        ck_assert_int_eq(hs_tools_calls("/add"), 1);
        ck_assert_int_eq(JI(json_object_get(fcall(&o, 0), "result"), "hits"), 3);
        ck_assert(json_is_true(json_object_get(fcall(&o, 0), "mocked")));
        ck_assert_str_eq(JS(fcall(&o, 1), "function_id"), "math::add");
        ck_assert_int_eq(JI(json_object_get(fcall(&o, 1), "result"), "sum"), 5);
        ck_assert_ptr_null(json_object_get(fcall(&o, 1), "mocked"));
        /* only the mocked call's span carries the attribute */
        size_t i, nfn = 0;
        json_t *s;
        json_array_foreach(o.spans, i, s)
        {
            if (strcmp(JS(s, "kind"), "function") != 0)
                continue;
            json_t *m = json_object_get(json_object_get(s, "attributes"), "mocked");
            ck_assert(nfn == 0 ? json_is_true(m) : m == NULL);
            nfn++;
        }
        ck_assert_int_eq(nfn, 2);
        json_t *reqs = hl_last_requests(2);
        json_t *names = offered(json_object_get(json_array_get(reqs, 0), "body"), k->api);
        assert_strings(names, trigger ? "[\"search\",\"book\",\"agent_trigger\"]"
                                      : "[\"search\",\"book\",\"math_add\"]");
        json_decref(names);
        json_decref(reqs);
        evd_harness_outcome_clear(&o);
    }
}
END_TEST

START_TEST(a_mocked_name_that_is_registered_is_refused)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[]}");
    struct evd_harness_outcome o;
    struct hl_run_args a = {
        .k = k, .mock_tools = "[{\"name\":\"search\"},{\"name\":\"slow\"}]", .tool_results = "{}"};
    hl_run(&a, &o, NULL);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(o.phase, "setup");
    ck_assert_str_eq(o.result_error, "tools[1]: slow is also a registered tool");
    json_t *stats = evd_t_stub_stats(&hl_stub);
    ck_assert_int_eq(JI(stats, "requests"), 0);
    json_decref(stats);
    evd_harness_outcome_clear(&o);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("harness_mock");
    TCase *tc = tcase_create("mock");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, one_value_answers_every_call, 0, NKINDS);
    tcase_add_loop_test(tc, a_sequence_answers_the_kth_call_and_repeats_its_last, 0, NKINDS);
    tcase_add_loop_test(tc, a_when_list_answers_with_the_first_matching_item, 0, NKINDS);
    tcase_add_loop_test(tc, a_call_without_a_mock_is_an_error_result, 0, NKINDS);
    tcase_add_loop_test(tc, invalid_arguments_are_an_error_result, 0, NKINDS);
    tcase_add_loop_test(tc, mocked_tools_are_offered_natively_whatever_the_policy, 0, NKINDS);
    tcase_add_loop_test(tc, a_registered_http_tool_works_beside_mocked_tools, 0, NKINDS);
    tcase_add_loop_test(tc, a_mocked_name_that_is_registered_is_refused, 0, NKINDS);
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
