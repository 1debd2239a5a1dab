/*
 * Mocked tools (domain/mock_tools.h): the experiment's `tools` declarations, a case's
 * `tool_results`, the clash with registered tools and the `when`-list rule, each refusal
 * with its exact message and each accepted shape.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/mock_tools.h"
#include "tests/support/domain_fixtures.h"
#include "tests/support/testutil.h"

#define OBJ "{\"type\":\"object\"}"
#define TOOL(name) "{\"name\":\"" name "\",\"description\":\"d\",\"parameters\":" OBJ "}"

struct tools_case {
    const char *tools; /* JSON text */
    const char *msg;   /* NULL: accepted */
};

static const struct tools_case TOOLS[] = {
    {"null", NULL},
    {"[]", NULL},
    {"[" TOOL("search") "," TOOL("weather.current") "," TOOL("a-b_c") "]", NULL},
    {"[{\"name\":\"search\",\"parameters\":" OBJ "}]", NULL}, /* description optional */
    {"[{\"name\":\"x\",\"parameters\":{\"type\":\"object\",\"properties\":{\"q\":{\"type\":"
     "\"string\"}},\"required\":[\"q\"]}}]",
     NULL},
    {"{}", "tools must be an array"},
    {"\"search\"", "tools must be an array"},
    {"[1]", "tools[0] must be an object"},
    {"[" TOOL("a") ",[]]", "tools[1] must be an object"},
    {"[{\"name\":\"a\",\"parameters\":" OBJ ",\"url\":\"http://x\"}]",
     "tools[0].url is not a known field"},
    {"[{\"parameters\":" OBJ "}]", "tools[0].name is required"},
    {"[" TOOL("a") ",{\"name\":7,\"parameters\":" OBJ "}]", "tools[1].name must be a string"},
    {"[" TOOL("a") "," TOOL("") "]",
     "tools[1].name must be 1-64 characters of letters, digits, '_', '.' or '-', starting "
     "with a letter or digit"},
    {"[" TOOL("  ") "]", "tools[0].name must be 1-64 characters of letters, digits, '_', '.' "
                         "or '-', starting with a letter or digit"},
    {"[" TOOL("math::add") "]", "tools[0].name must be 1-64 characters of letters, digits, "
                                "'_', '.' or '-', starting with a letter or digit"},
    {"[" TOOL("_x") "]", "tools[0].name must be 1-64 characters of letters, digits, '_', '.' "
                         "or '-', starting with a letter or digit"},
    {"[" TOOL("a b") "]", "tools[0].name must be 1-64 characters of letters, digits, '_', '.' "
                          "or '-', starting with a letter or digit"},
    /* 64 characters pass, 65 do not */
    {"[" TOOL("a123456789012345678901234567890123456789012345678901234567890123") "]", NULL},
    {"[" TOOL("a1234567890123456789012345678901234567890123456789012345678901234") "]",
     "tools[0].name must be 1-64 characters of letters, digits, '_', '.' or '-', starting "
     "with a letter or digit"},
    {"[" TOOL("a") "," TOOL("b") "," TOOL("a") "]", "tools[2].name \"a\" is declared twice"},
    {"[{\"name\":\"a\",\"description\":3,\"parameters\":" OBJ "}]",
     "tools[0].description must be a string"},
    {"[{\"name\":\"a\"}]", "tools[0].parameters is required"},
    {"[{\"name\":\"a\",\"parameters\":true}]", "tools[0].parameters must be a JSON Schema object"},
    {"[{\"name\":\"a\",\"parameters\":\"object\"}]",
     "tools[0].parameters must be a JSON Schema object"},
};

START_TEST(tools_are_checked)
{
    const struct tools_case *c = &TOOLS[_i];
    json_t *tools = evd_dt_parse(c->tools);
    struct evd_err err = {EVD_OK, ""};
    enum evd_code rc = evd_mock_tools_check(tools, &err);
    if (c->msg == NULL) {
        ck_assert_msg(rc == EVD_OK, "%s refused: %s", c->tools, err.msg);
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_str_eq(err.msg, c->msg);
    }
    json_decref(tools);
}
END_TEST

START_TEST(absent_tools_and_bounds)
{
    struct evd_err err = {EVD_OK, ""};
    ck_assert_int_eq(evd_mock_tools_check(NULL, &err), EVD_OK);
    /* 64 tools pass, 65 do not */
    json_t *tools = json_array();
    for (int i = 0; i < 65; i++) {
        char name[16];
        snprintf(name, sizeof(name), "t%d", i);
        json_array_append_new(
            tools, json_pack("{s:s,s:{s:s}}", "name", name, "parameters", "type", "object"));
        enum evd_code rc = evd_mock_tools_check(tools, &err);
        if (i < 64)
            ck_assert_msg(rc == EVD_OK, "%d tools: %s", i + 1, err.msg);
        else
            ck_assert_str_eq(err.msg, "tools must have at most 64 items");
    }
    json_decref(tools);
    /* a description of 4096 bytes passes, 4097 do not */
    char *desc = malloc(4098);
    memset(desc, 'x', 4097);
    desc[4097] = '\0';
    tools = json_pack("[{s:s,s:s,s:{}}]", "name", "a", "description", desc, "parameters");
    ck_assert_int_eq(evd_mock_tools_check(tools, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "tools[0].description must be at most 4096 bytes");
    json_decref(tools);
    desc[4096] = '\0';
    tools = json_pack("[{s:s,s:s,s:{}}]", "name", "a", "description", desc, "parameters");
    ck_assert_int_eq(evd_mock_tools_check(tools, &err), EVD_OK);
    json_decref(tools);
    free(desc);
    /* a name holding a NUL byte is refused */
    tools = json_pack("[{s:s%,s:{}}]", "name", "a\0b", (size_t)3, "parameters");
    ck_assert_int_eq(evd_mock_tools_check(tools, &err), EVD_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "tools[0].name must be 1-64 characters"));
    json_decref(tools);
}
END_TEST

START_TEST(parameters_must_compile)
{
    json_t *tools = evd_dt_parse("[" TOOL("a") ",{\"name\":\"b\",\"parameters\":{\"type\":7}}]");
    struct evd_err err = {EVD_OK, ""};
    ck_assert_int_eq(evd_mock_tools_check(tools, &err), EVD_EINVAL);
    const char *want = "tools[1].parameters is not a valid JSON Schema: ";
    ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0 && strlen(err.msg) > strlen(want), "%s",
                  err.msg);
    json_decref(tools);
    tools = evd_dt_parse("[{\"name\":\"b\",\"parameters\":{\"$ref\":\"#/definitions/nope\"}}]");
    ck_assert_int_eq(evd_mock_tools_check(tools, &err), EVD_EINVAL);
    ck_assert_msg(strncmp(err.msg, "tools[0].parameters is not a valid JSON Schema: ", 48) == 0,
                  "%s", err.msg);
    json_decref(tools);
}
END_TEST

struct results_case {
    const char *results; /* JSON text, the case's tool_results */
    const char *msg;     /* NULL: accepted */
};

#define DECLARED "[" TOOL("search") "," TOOL("book") "]"

static const struct results_case RESULTS[] = {
    {"null", NULL},
    {"{}", NULL},
    {"{\"search\":{\"hits\":[1]}}", NULL},
    {"{\"search\":\"text\",\"book\":null}", NULL},
    {"{\"search\":[1,2,{\"x\":1}]}", NULL},                             /* a sequence */
    {"{\"search\":[{\"when\":{},\"result\":1},{\"result\":2}]}", NULL}, /* a sequence too */
    {"{\"search\":[{\"when\":{\"q\":\"oslo\"},\"result\":{\"hits\":1}},"
     "{\"when\":{},\"result\":null}]}",
     NULL},
    {"[]", "case q3: tool_results must be an object"},
    {"\"x\"", "case q3: tool_results must be an object"},
    {"{\"search\":1,\"foo\":2}", "case q3: tool_results.foo names no declared tool"},
    {"{\"search\":[{\"when\":{},\"result\":1},{\"when\":\"q\",\"result\":2}]}",
     "case q3: tool_results.search[1].when must be an object"},
    {"{\"book\":[{\"when\":null,\"result\":1}]}",
     "case q3: tool_results.book[0].when must be an object"},
    {"{\"search\":[{\"when\":{\"q\":1},\"result\":1},{\"when\":{}}]}",
     "case q3: tool_results.search[1].result is required"},
    {"{\"search\":[{\"when\":{},\"result\":1,\"note\":\"x\"}]}",
     "case q3: tool_results.search[0].note is not a known field"},
};

START_TEST(tool_results_are_checked)
{
    const struct results_case *c = &RESULTS[_i];
    json_t *tools = evd_dt_parse(DECLARED);
    json_t *results = evd_dt_parse(c->results);
    struct evd_err err = {EVD_OK, ""};
    ck_assert_int_eq(evd_mock_tools_check(tools, &err), EVD_OK);
    enum evd_code rc = evd_tool_results_check(results, tools, "q3", &err);
    if (c->msg == NULL) {
        ck_assert_msg(rc == EVD_OK, "%s refused: %s", c->results, err.msg);
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_str_eq(err.msg, c->msg);
    }
    json_decref(results);
    json_decref(tools);
}
END_TEST

START_TEST(tool_results_without_declared_tools)
{
    struct evd_err err = {EVD_OK, ""};
    ck_assert_int_eq(evd_tool_results_check(NULL, NULL, "q1", &err), EVD_OK);
    json_t *results = evd_dt_parse("{\"search\":1}");
    ck_assert_int_eq(evd_tool_results_check(results, NULL, "q1", &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "case q1: tool_results.search names no declared tool");
    json_decref(results);
}
END_TEST

START_TEST(when_list_rule)
{
    static const struct {
        const char *value;
        bool when;
    } cases[] = {
        {"[{\"when\":{},\"result\":1}]", true},
        {"[{\"when\":{\"a\":1},\"result\":1},{\"when\":5}]", true},
        {"[{\"when\":{},\"result\":1},{\"result\":2}]", false},
        {"[{\"when\":{},\"result\":1},3]", false},
        {"[]", false},
        {"{\"when\":{}}", false},
        {"[1,2]", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *v = evd_dt_parse(cases[i].value);
        ck_assert_msg(evd_tool_results_is_when_list(v) == cases[i].when, "%s", cases[i].value);
        json_decref(v);
    }
}
END_TEST

START_TEST(registered_names_are_refused)
{
    json_t *tools = evd_dt_parse("[" TOOL("search") "," TOOL("weather.current") "]");
    json_t *by_object = evd_dt_parse("[{\"id\":\"math::add\"},{\"id\":\"weather.current\"}]");
    json_t *by_string = evd_dt_parse("[\"search\"]");
    json_t *none = evd_dt_parse("[\"weather\",{\"id\":\"search2\"}]");
    struct evd_err err = {EVD_OK, ""};
    ck_assert_int_eq(evd_mock_tools_check_registered(tools, by_object, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "tools[1]: weather.current is also a registered tool");
    ck_assert_int_eq(evd_mock_tools_check_registered(tools, by_string, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "tools[0]: search is also a registered tool");
    ck_assert_int_eq(evd_mock_tools_check_registered(tools, none, &err), EVD_OK);
    ck_assert_int_eq(evd_mock_tools_check_registered(tools, NULL, &err), EVD_OK);
    ck_assert_int_eq(evd_mock_tools_check_registered(NULL, by_object, &err), EVD_OK);
    json_decref(tools);
    json_decref(by_object);
    json_decref(by_string);
    json_decref(none);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_mock_tools");
    TCase *tc = tcase_create("tools");
    tcase_add_loop_test(tc, tools_are_checked, 0, sizeof(TOOLS) / sizeof(TOOLS[0]));
    tcase_add_test(tc, absent_tools_and_bounds);
    tcase_add_test(tc, parameters_must_compile);
    tcase_add_test(tc, registered_names_are_refused);
    suite_add_tcase(s, tc);
    TCase *res = tcase_create("tool_results");
    tcase_add_loop_test(res, tool_results_are_checked, 0, sizeof(RESULTS) / sizeof(RESULTS[0]));
    tcase_add_test(res, tool_results_without_declared_tools);
    tcase_add_test(res, when_list_rule);
    suite_add_tcase(s, res);
    return evd_test_run_suite(s);
}
