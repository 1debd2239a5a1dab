/*
 * Unit tests for domain/judge.h: the normalized judge with its defaults, every refusal
 * with its message, the per-case template check, the prompt of a call (both answers in
 * their slots, the task and instructions rendered) and the answer's schema.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "domain/judge.h"
#include "tests/support/testutil.h"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    ck_assert_msg(v != NULL, "%s: %s", text, e.text);
    return v;
}

static const char CASE[] =
    "{\"id\":\"q7\",\"vars\":{\"question\":\"2+2?\",\"tone\":\"terse\"},\"expected\":\"4\","
    "\"metadata\":{}}";

START_TEST(a_judge_gets_its_defaults)
{
    json_t *in = parse("{\"model\":{\"model\":\"gpt-4.1-mini\",\"provider\":\"openai\"},"
                       "\"task\":\"{{question}}\"}");
    json_t *out = NULL;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_judge_request(in, &out, &err), EVD_OK);
    ck_assert_str_eq(json_string_value(json_object_get(out, "kind")), "pairwise");
    ck_assert_str_eq(json_string_value(json_object_get(out, "orders")), "both");
    ck_assert_int_eq(json_integer_value(json_object_get(out, "max_tokens")), 512);
    ck_assert(json_is_null(json_object_get(out, "instructions")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(out, "model"), "model")),
                     "gpt-4.1-mini");
    json_decref(out);
    json_decref(in);

    /* No judge: JSON null, and null reads as absent. */
    ck_assert_int_eq(evd_judge_request(NULL, &out, &err), EVD_OK);
    ck_assert(json_is_null(out));
    json_decref(out);
    json_t *null = json_null();
    ck_assert_int_eq(evd_judge_request(null, &out, &err), EVD_OK);
    ck_assert(json_is_null(out));
    json_decref(out);
}
END_TEST

static const struct {
    const char *body;
    const char *msg;
} REFUSED[] = {
    {"[]", "judge must be an object"},
    {"{\"model\":{\"model\":\"m\"},\"task\":\"t\",\"temperature\":1}",
     "judge.temperature is not a known field"},
    {"{\"kind\":\"pointwise\",\"model\":{\"model\":\"m\"},\"task\":\"t\"}",
     "judge.kind must be pairwise"},
    {"{\"task\":\"t\"}", "judge.model is required"},
    {"{\"model\":{\"model\":\"\"},\"task\":\"t\"}", "judge.model.model cannot be empty"},
    {"{\"model\":3,\"task\":\"t\"}", "judge.model must be an object"},
    {"{\"model\":{\"model\":\"m\"}}", "judge.task is required"},
    {"{\"model\":{\"model\":\"m\"},\"task\":7}", "judge.task must be a string"},
    {"{\"model\":{\"model\":\"m\"},\"task\":\"\"}", "judge.task cannot be empty"},
    {"{\"model\":{\"model\":\"m\"},\"task\":\"t\",\"instructions\":[]}",
     "judge.instructions must be a string"},
    {"{\"model\":{\"model\":\"m\"},\"task\":\"t\",\"orders\":\"three\"}",
     "judge.orders must be both or one"},
    {"{\"model\":{\"model\":\"m\"},\"task\":\"t\",\"max_tokens\":0}",
     "judge.max_tokens must be between 1 and 100000"},
    {"{\"model\":{\"model\":\"m\"},\"task\":\"t\",\"max_tokens\":1.5}",
     "judge.max_tokens must be between 1 and 100000"},
};

START_TEST(refusals_name_the_field)
{
    json_t *in = parse(REFUSED[_i].body);
    json_t *out = NULL;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_judge_request(in, &out, &err), EVD_EINVAL);
    ck_assert_ptr_null(out);
    ck_assert_str_eq(err.msg, REFUSED[_i].msg);
    json_decref(in);
}
END_TEST

START_TEST(cases_are_checked_and_the_prompt_holds_both_answers)
{
    json_t *in = parse("{\"model\":{\"model\":\"m\"},\"task\":\"Answer: {{ question }}\","
                       "\"instructions\":\"Prefer the {{tone}} answer.\",\"orders\":\"one\"}");
    json_t *judge = NULL, *c = parse(CASE);
    struct evd_err err = {0};
    ck_assert_int_eq(evd_judge_request(in, &judge, &err), EVD_OK);
    ck_assert_int_eq(evd_judge_check_case(judge, c, &err), EVD_OK);

    char *prompt = NULL, *instructions = NULL;
    ck_assert_int_eq(evd_judge_prompt(judge, c, "four", 4, "4", 1, &prompt, &instructions, &err),
                     EVD_OK);
    ck_assert_str_eq(instructions, "Prefer the terse answer.");
    ck_assert_ptr_nonnull(strstr(prompt, "<task>\nAnswer: 2+2?\n</task>\n"));
    const char *a1 = strstr(prompt, "<answer_1>\nfour\n</answer_1>\n");
    const char *a2 = strstr(prompt, "<answer_2>\n4\n</answer_2>\n");
    ck_assert_ptr_nonnull(a1);
    ck_assert_ptr_nonnull(a2);
    ck_assert(a1 < a2);
    free(prompt);
    free(instructions);

    /* A case without the task's variable is refused as a prompt's would be. */
    json_t *bare = parse("{\"id\":\"q8\",\"vars\":{},\"expected\":null,\"metadata\":{}}");
    ck_assert_int_eq(evd_judge_check_case(judge, bare, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "case q8: template variable question is not defined");
    ck_assert_int_eq(evd_judge_prompt(judge, bare, "a", 1, "b", 1, &prompt, &instructions, &err),
                     EVD_EINVAL);
    ck_assert_ptr_null(prompt);
    ck_assert_ptr_null(instructions);
    json_decref(bare);
    json_decref(c);
    json_decref(judge);
    json_decref(in);
}
END_TEST

START_TEST(without_instructions_the_call_has_no_system_prompt)
{
    json_t *in = parse("{\"model\":{\"model\":\"m\"},\"task\":\"t\"}");
    json_t *judge = NULL, *c = parse(CASE);
    struct evd_err err = {0};
    ck_assert_int_eq(evd_judge_request(in, &judge, &err), EVD_OK);
    char *prompt = NULL, *instructions = (char *)"unset";
    ck_assert_int_eq(evd_judge_prompt(judge, c, "", 0, NULL, 0, &prompt, &instructions, &err),
                     EVD_OK);
    ck_assert_ptr_null(instructions);
    ck_assert_ptr_nonnull(strstr(prompt, "<answer_1>\n\n</answer_1>\n<answer_2>\n\n</answer_2>\n"));
    free(prompt);
    json_decref(c);
    json_decref(judge);
    json_decref(in);
}
END_TEST

START_TEST(the_answer_schema_is_closed)
{
    json_t *s = evd_judge_schema();
    ck_assert_ptr_nonnull(s);
    json_t *want = parse("{\"type\":\"object\",\"properties\":{\"winner\":{\"type\":\"string\","
                         "\"enum\":[\"1\",\"2\",\"tie\"]},\"reason\":{\"type\":\"string\"}},"
                         "\"required\":[\"winner\",\"reason\"],\"additionalProperties\":false}");
    ck_assert(json_equal(s, want));
    json_decref(want);
    json_decref(s);
}
END_TEST

START_TEST(a_cases_calls_go_repeat_by_repeat_with_a_pairs_orders_together)
{
    /* Two treatments, two repeats, both orders: 8 calls. */
    static const unsigned want[8][3] = {{1, 1, 1}, {1, 1, 2}, {1, 2, 1}, {1, 2, 2},
                                        {2, 1, 1}, {2, 1, 2}, {2, 2, 1}, {2, 2, 2}};
    for (uint32_t p = 1; p <= 8; p++) {
        struct evd_judge_call c;
        evd_judge_call_at(2, 2, p, &c);
        ck_assert_uint_eq(c.repeat, want[p - 1][0]);
        ck_assert_uint_eq(c.treatment, want[p - 1][1]);
        ck_assert_uint_eq(c.order, want[p - 1][2]);
    }
    /* Orders "one": one call a pair, order 1 on odd repeats and 2 on even ones. */
    struct evd_judge_call c;
    evd_judge_call_at(1, 1, 1, &c);
    ck_assert(c.repeat == 1 && c.treatment == 1 && c.order == 1);
    evd_judge_call_at(1, 1, 2, &c);
    ck_assert(c.repeat == 2 && c.treatment == 1 && c.order == 2);
    evd_judge_call_at(3, 1, 6, &c);
    ck_assert(c.repeat == 2 && c.treatment == 3 && c.order == 2);
    /* The orders of a judge as stored. */
    json_t *j = json_pack("{s:s}", "orders", "one");
    ck_assert_uint_eq(evd_judge_orders(j), 1);
    json_object_set_new(j, "orders", json_string("both"));
    ck_assert_uint_eq(evd_judge_orders(j), 2);
    ck_assert_uint_eq(evd_judge_orders(json_null()), 0);
    ck_assert_uint_eq(evd_judge_orders(NULL), 0);
    json_decref(j);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_judge");
    TCase *tc = tcase_create("judge");
    tcase_add_test(tc, a_judge_gets_its_defaults);
    tcase_add_loop_test(tc, refusals_name_the_field, 0, sizeof(REFUSED) / sizeof(REFUSED[0]));
    tcase_add_test(tc, cases_are_checked_and_the_prompt_holds_both_answers);
    tcase_add_test(tc, without_instructions_the_call_has_no_system_prompt);
    tcase_add_test(tc, the_answer_schema_is_closed);
    tcase_add_test(tc, a_cases_calls_go_repeat_by_repeat_with_a_pairs_orders_together);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
