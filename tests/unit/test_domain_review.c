/*
 * Unit tests for domain/review.h: the agent review evaluator's argument checks (every
 * message names evaluator.arguments.<field>), the verdict contract built from the owner
 * schemas, the reviewer's prompts and the EvaluatorResponseV1 of a verdict.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "domain/evaluators.h"
#include "domain/review.h"
#include "tests/support/domain_fixtures.h"
#include "tests/support/testutil.h"

struct args_case {
    const char *arguments; /* JSON, or NULL for absent */
    const char *message;   /* NULL = accepted */
};

static const struct args_case ARGS[] = {
    {"{\"model\":\"claude-x\",\"instructions\":\"Check it.\"}", NULL},
    {"{\"model\":\"gpt-x\",\"provider\":\"openai\",\"instructions\":\"Check.\","
     "\"green_schema\":{\"properties\":{\"covered\":{\"type\":\"array\"}}},"
     "\"red_schema\":null,\"functions\":{\"allow\":[\"math::*\"],\"expose\":\"native\"},"
     "\"thinking_level\":\"low\",\"max_tokens\":1000,\"max_tool_calls\":0}",
     NULL},
    {NULL, "evaluator.arguments.model is required"},
    {"[]", "evaluator.arguments must be an object"},
    {"{\"instructions\":\"x\"}", "evaluator.arguments.model is required"},
    {"{\"model\":null,\"instructions\":\"x\"}", "evaluator.arguments.model is required"},
    {"{\"model\":7,\"instructions\":\"x\"}", "evaluator.arguments.model must be a string"},
    {"{\"model\":\" \\t\",\"instructions\":\"x\"}", "evaluator.arguments.model cannot be empty"},
    {"{\"model\":\"m\"}", "evaluator.arguments.instructions is required"},
    {"{\"model\":\"m\",\"instructions\":\"\"}", "evaluator.arguments.instructions cannot be empty"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"provider\":\"\"}",
     "evaluator.arguments.provider cannot be empty"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"colour\":1}",
     "evaluator.arguments.colour is not a known field"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"green_schema\":[]}",
     "evaluator.arguments.green_schema must be an object"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"red_schema\":\"no\"}",
     "evaluator.arguments.red_schema must be an object"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"functions\":{\"allow\":[1]}}",
     "evaluator.arguments.functions.allow[0] must be a string"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"functions\":{\"expose\":\"all\"}}",
     "evaluator.arguments.functions.expose must be one of agent_trigger, native"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"functions\":{\"call\":[]}}",
     "evaluator.arguments.functions.call is not a known field"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"thinking_level\":\"max\"}",
     "evaluator.arguments.thinking_level must be one of minimal, low, medium, high, xhigh"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"max_tokens\":0}",
     "evaluator.arguments.max_tokens must be greater than zero"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"max_tokens\":-5}",
     "evaluator.arguments.max_tokens must be a non-negative integer"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"max_tokens\":1.5}",
     "evaluator.arguments.max_tokens must be an integer"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"max_tool_calls\":100001}",
     "evaluator.arguments.max_tool_calls must be at most 100000"},
    {"{\"model\":\"m\",\"instructions\":\"x\",\"max_tool_calls\":\"3\"}",
     "evaluator.arguments.max_tool_calls must be an integer"},
};

START_TEST(arguments_are_checked)
{
    const struct args_case *c = &ARGS[_i];
    json_t *a = c->arguments ? evd_dt_parse(c->arguments) : NULL;
    struct evd_review_args r;
    struct evd_err err = {EVD_OK, ""};
    enum evd_code rc = evd_review_args_decode(a, &r, &err);
    if (c->message == NULL) {
        ck_assert_msg(rc == EVD_OK, "case %d: %s", _i, err.msg);
        ck_assert_ptr_nonnull(r.model);
        ck_assert_ptr_nonnull(r.functions); /* normalized, deny-all when absent */
        ck_assert_ptr_nonnull(json_object_get(r.functions, "expose"));
        evd_review_args_clear(&r);
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_str_eq(err.msg, c->message);
        ck_assert_ptr_null(r.functions);
    }
    json_decref(a);
}
END_TEST

START_TEST(decoded_values)
{
    json_t *a = evd_dt_parse(ARGS[1].arguments);
    struct evd_review_args r;
    ck_assert_int_eq(evd_review_args_decode(a, &r, NULL), EVD_OK);
    ck_assert_str_eq(r.model, "gpt-x");
    ck_assert_str_eq(r.provider, "openai");
    ck_assert_str_eq(r.thinking_level, "low");
    ck_assert(r.has_max_tokens && r.max_tokens == 1000);
    ck_assert(r.has_max_tool_calls && r.max_tool_calls == 0);
    ck_assert_ptr_nonnull(r.green_schema);
    ck_assert_ptr_null(r.red_schema);
    ck_assert_str_eq(evd_dt_dump(r.functions),
                     "{\"allow\":[\"math::*\"],\"deny\":[],\"expose\":\"native\"}");
    json_t *model = evd_review_model(&r);
    ck_assert_str_eq(evd_dt_dump(model), "{\"model\":\"gpt-x\",\"provider\":\"openai\","
                                         "\"system_prompt_strategy\":\"override\","
                                         "\"thinking_level\":\"low\"}");
    char *sys = evd_review_system_prompt(&r);
    ck_assert_ptr_nonnull(strstr(sys, "You are a reviewer run by evald."));
    ck_assert_ptr_nonnull(strstr(sys, "\n\nReview instructions:\nCheck."));
    free(sys);
    struct evd_so_contract *c = evd_review_contract_new(&r, NULL);
    ck_assert_ptr_nonnull(c);
    evd_so_contract_free(c);
    json_decref(model);
    evd_review_args_clear(&r);
    json_decref(a);
}
END_TEST

struct schema_case {
    const char *field;
    const char *schema;
    const char *message;
};

static const struct schema_case SCHEMAS[] = {
    {"green_schema", "{\"additionalProperties\":true}",
     "evaluator.arguments.green_schema must forbid undeclared top-level fields"},
    {"red_schema", "{\"properties\":{\"verdict\":{}}}",
     "evaluator.arguments.red_schema must not use the reserved field name \"verdict\""},
    {"green_schema", "{\"anyOf\":[{}]}",
     "evaluator.arguments.green_schema cannot use top-level composition; compose inside owner "
     "fields"},
    {"red_schema", "{\"properties\":{\"n\":{\"minimum\":\"x\"}}}",
     "evaluator.arguments.red_schema: invalid schema at \"/properties/n/minimum\": must be a "
     "number"},
};

START_TEST(owner_schema_errors_name_the_argument)
{
    const struct schema_case *c = &SCHEMAS[_i];
    json_t *a = evd_dt_parse("{\"model\":\"m\",\"instructions\":\"x\"}");
    evd_dt_set(a, c->field, c->schema);
    struct evd_review_args r;
    ck_assert_int_eq(evd_review_args_decode(a, &r, NULL), EVD_OK);
    struct evd_err err = {EVD_OK, ""};
    ck_assert_ptr_null(evd_review_contract_new(&r, &err));
    ck_assert_int_eq(err.code, EVD_EINVAL);
    ck_assert_str_eq(err.msg, c->message);
    evd_review_args_clear(&r);
    json_decref(a);
}
END_TEST

static json_t *input_with(const char *output, json_t *metrics, struct evd_evaluator_input *in)
{
    json_t *body = evd_dt_parse("{\"evaluation_id\":\"eval_1\",\"run_id\":\"treatment-2\","
                                "\"role\":\"treatment\",\"session_id\":\"eval_1_t_2\","
                                "\"arguments\":{}}");
    json_object_set_new(body, "output", evd_dt_parse(output));
    json_object_set_new(body, "metrics", metrics);
    struct evd_err err;
    ck_assert_msg(evd_request_evaluator_input(body, in, &err) == EVD_OK, "%s", err.msg);
    return body;
}

START_TEST(prompt_shows_output_and_metrics)
{
    struct evd_evaluator_input in;
    json_t *body =
        input_with("\"The answer is 42.\"",
                   evd_dt_metrics("eval_1_t_2", true, 3, 2, 1, 120, 40, 0.000123, 0), &in);
    char *p = evd_review_prompt(&in);
    ck_assert_ptr_nonnull(p);
    static const char *const want[] = {
        "Run treatment-2 (treatment) of evaluation eval_1, session eval_1_t_2.\n",
        /* one element over two lines (parenthesised so that it reads as one) */
        ("Final output (text, 17 bytes):\n----- BEGIN OUTPUT -----\nThe answer is 42.\n"
         "----- END OUTPUT -----\n"),
        "- model generations (turns): 3\n",
        "- function calls: 2\n",
        "- failed function calls: 1\n",
        "- input tokens: 120\n",
        "- output tokens: 40\n",
        "- reasoning tokens: not reported\n",
        "- cost: $0.000123\n",
        "- failed spans: 0\n",
        "GREEN if the run meets the review instructions, RED if it does not",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        ck_assert_msg(strstr(p, want[i]) != NULL, "missing %s in:\n%s", want[i], p);
    free(p);
    json_decref(body);

    /* JSON output is shown indented; absent counters read "not reported". */
    body = input_with("{\"covered\":[\"R1\"]}",
                      evd_dt_metrics("eval_1_t_2", true, 1, 0, 0, -1, -1, -1, -1), &in);
    p = evd_review_prompt(&in);
    ck_assert_ptr_nonnull(strstr(p, "Final output (JSON, 31 bytes):\n----- BEGIN OUTPUT -----\n{\n"
                                    "  \"covered\": [\n    \"R1\"\n  ]\n}\n----- END OUTPUT"));
    ck_assert_ptr_nonnull(strstr(p, "- input tokens: not reported\n"));
    ck_assert_ptr_nonnull(strstr(p, "- cost: not reported\n"));
    ck_assert_ptr_nonnull(strstr(p, "- trace spans: not reported\n"));
    free(p);
    json_decref(body);
}
END_TEST

START_TEST(long_output_is_cut_at_a_character_boundary)
{
    /* 40000 two-byte characters: 80000 bytes, over the 64 KiB shown. */
    size_t n = 40000;
    char *s = malloc(n * 2 + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(s + 2 * i, "\xC3\xA9", 2); /* é */
    s[n * 2] = '\0';
    struct evd_evaluator_input in;
    json_t *body = input_with("null", evd_dt_metrics("eval_1_t_2", true, 1, 0, 0, 1, 1, 0, 0), &in);
    json_object_set_new(body, "output", json_string(s));
    ck_assert_int_eq(evd_request_evaluator_input(body, &in, NULL), EVD_OK);
    char *p = evd_review_prompt(&in);
    ck_assert_ptr_nonnull(strstr(p, "Final output (text, 80000 bytes)"));
    ck_assert_ptr_nonnull(strstr(p, "\xC3\xA9\xE2\x80\xA6\n[output cut: 65536 of 80000 bytes "
                                    "shown]\n----- END OUTPUT -----"));
    ck_assert_ptr_null(strstr(p, "\xC3\xE2")); /* no split sequence */
    free(p);
    free(s);
    json_decref(body);
}
END_TEST

START_TEST(verdicts_become_evaluator_answers)
{
    json_t *green = evd_dt_parse("{\"verdict\":\"GREEN\",\"covered\":[\"R1\"]}");
    json_t *r = evd_review_response(green, "claude-x");
    ck_assert_str_eq(evd_dt_dump(r),
                     "{\"details\":{\"covered\":[\"R1\"],\"verdict\":\"GREEN\"},\"passed\":true,"
                     "\"reason\":\"agent review by claude-x: GREEN\",\"score\":1.0}");
    json_t *n = NULL;
    ck_assert_int_eq(evd_evaluator_check_response(r, &n, NULL), EVD_OK);
    json_decref(n);
    json_decref(r);
    json_t *red = evd_dt_parse("{\"verdict\":\"RED\",\"why\":\"missing R2\"}");
    r = evd_review_response(red, "gpt-x");
    ck_assert(json_is_false(json_object_get(r, "passed")));
    ck_assert(json_real_value(json_object_get(r, "score")) == 0.0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "details"), "why")),
                     "missing R2");
    json_decref(r);
    json_decref(green);
    json_decref(red);
    ck_assert(evd_evaluator_is_agent_review("eval::assert::agent_review"));
    ck_assert(!evd_evaluator_is_agent_review("eval::assert::exact"));
    ck_assert(!evd_evaluator_is_builtin("eval::assert::agent_review"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_review");
    TCase *tc = tcase_create("arguments");
    tcase_add_loop_test(tc, arguments_are_checked, 0, sizeof(ARGS) / sizeof(ARGS[0]));
    tcase_add_test(tc, decoded_values);
    tcase_add_loop_test(tc, owner_schema_errors_name_the_argument, 0,
                        sizeof(SCHEMAS) / sizeof(SCHEMAS[0]));
    suite_add_tcase(s, tc);
    TCase *pr = tcase_create("prompts");
    tcase_add_test(pr, prompt_shows_output_and_metrics);
    tcase_add_test(pr, long_output_is_cut_at_a_character_boundary);
    tcase_add_test(pr, verdicts_become_evaluator_answers);
    suite_add_tcase(s, pr);
    return evd_test_run_suite(s);
}
