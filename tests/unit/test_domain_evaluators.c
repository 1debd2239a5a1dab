/*
 * Unit tests for domain/evaluators.h and domain/text.h: the exact and normalized_text
 * evaluators, text normalization, reason excerpts, and the evaluator answer check.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "domain/evaluators.h"
#include "domain/text.h"
#include "tests/support/domain_fixtures.h"
#include "tests/support/testutil.h"

/* Decodes an EvaluatorInputV1 with the given output and arguments (JSON texts). */
static json_t *make_input(const char *output, const char *arguments, struct evd_evaluator_input *in)
{
    json_t *body = evd_dt_parse("{\"evaluation_id\":\"eval_1\",\"run_id\":\"treatment-1\","
                                "\"role\":\"treatment\",\"session_id\":\"eval_1_t_1\"}");
    json_object_set_new(body, "output", evd_dt_parse(output));
    if (arguments != NULL)
        json_object_set_new(body, "arguments", evd_dt_parse(arguments));
    json_object_set_new(body, "metrics", evd_dt_metrics("eval_1_t_1", true, 1, 0, 0, 3, 4, 0.1, 0));
    struct evd_err err;
    ck_assert_msg(evd_request_evaluator_input(body, in, &err) == EVD_OK, "%s", err.msg);
    return body;
}

struct verdict_case {
    const char *function_id;
    const char *output;
    const char *arguments;
    int passed; /* 1, 0, or -1 = rejected with `reason` as the error */
    const char *reason;
};

static const struct verdict_case VERDICTS[] = {
    {EVD_EVALUATOR_EXACT, "\"OK\"", "{\"expected\":\"OK\"}", 1,
     "output exactly matched arguments.expected"},
    {EVD_EVALUATOR_EXACT, "\"OK \"", "{\"expected\":\"OK\"}", 0,
     "output did not exactly match arguments.expected (actual=\"OK \", expected=\"OK\")"},
    {EVD_EVALUATOR_EXACT, "\"ok\"", "{\"expected\":\"OK\"}", 0,
     "output did not exactly match arguments.expected (actual=\"ok\", expected=\"OK\")"},
    {EVD_EVALUATOR_EXACT, "1", "{\"expected\":1.0}", 0,
     "output did not exactly match arguments.expected (actual=1, expected=1.0)"},
    {EVD_EVALUATOR_EXACT, "100", "{\"expected\":1e2}", 0,
     "output did not exactly match arguments.expected (actual=100, expected=100.0)"},
    {EVD_EVALUATOR_EXACT, "1.0", "{\"expected\":1.0}", 1,
     "output exactly matched arguments.expected"},
    {EVD_EVALUATOR_EXACT, "{\"b\":[1,2],\"a\":{\"x\":null}}",
     "{\"expected\":{\"a\":{\"x\":null},\"b\":[1,2]}}", 1,
     "output exactly matched arguments.expected"},
    {EVD_EVALUATOR_EXACT, "{\"b\":[2,1]}", "{\"expected\":{\"b\":[1,2]}}", 0,
     "output did not exactly match arguments.expected (actual={\"b\":[2,1]}, "
     "expected={\"b\":[1,2]})"},
    {EVD_EVALUATOR_EXACT, "{\"b\":1,\"a\":2}", "{\"expected\":{\"a\":2}}", 0,
     "output did not exactly match arguments.expected (actual={\"a\":2,\"b\":1}, "
     "expected={\"a\":2})"},
    {EVD_EVALUATOR_EXACT, "null", "{\"expected\":null}", 1,
     "output exactly matched arguments.expected"},
    {EVD_EVALUATOR_EXACT, "\"OK\"", "{}", -1,
     "eval::assert::exact requires evaluator arguments.expected"},
    {EVD_EVALUATOR_EXACT, "\"OK\"", NULL, -1,
     "eval::assert::exact requires evaluator arguments.expected"},
    {EVD_EVALUATOR_EXACT, "\"OK\"", "[\"OK\"]", -1,
     "eval::assert::exact requires evaluator arguments.expected"},
    {EVD_EVALUATOR_NORMALIZED_TEXT, "\"  Ol\xc3\xa1,   mundo!  \"",
     "{\"expected\":\"ol\xc3\xa1, mundo\"}", 1, "normalized output matched arguments.expected"},
    {EVD_EVALUATOR_NORMALIZED_TEXT, "\"OK !\"", "{\"expected\":\"OK\"}", 0,
     "normalized output did not match arguments.expected (actual=ok , expected=ok)"},
    {EVD_EVALUATOR_NORMALIZED_TEXT, "\"\\\"OK.\\\"\"", "{\"expected\":\"ok\"}", 1,
     "normalized output matched arguments.expected"},
    {EVD_EVALUATOR_NORMALIZED_TEXT, "\"It's\\tDONE\\n\"", "{\"expected\":\"it's done\"}", 1,
     "normalized output matched arguments.expected"},
    {EVD_EVALUATOR_NORMALIZED_TEXT, "42", "{\"expected\":\"42\"}", 0,
     "output was not text (actual=42, expected=\"42\")"},
    {EVD_EVALUATOR_NORMALIZED_TEXT, "null", "{\"expected\":\"x\"}", 0,
     "output was not text (actual=null, expected=\"x\")"},
    {EVD_EVALUATOR_NORMALIZED_TEXT, "\"OK\"", "{\"expected\":1}", -1,
     "eval::assert::normalized_text requires string evaluator arguments.expected"},
    {EVD_EVALUATOR_NORMALIZED_TEXT, "\"OK\"", "{}", -1,
     "eval::assert::normalized_text requires string evaluator arguments.expected"},
};

START_TEST(builtin_verdicts)
{
    const struct verdict_case *c = &VERDICTS[_i];
    struct evd_evaluator_input in;
    json_t *body = make_input(c->output, c->arguments, &in);
    json_t *resp = NULL;
    struct evd_err err;
    enum evd_code rc = evd_evaluator_run(c->function_id, &in, &resp, &err);
    if (c->passed < 0) {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_str_eq(err.msg, c->reason);
        ck_assert_ptr_null(resp);
    } else {
        ck_assert_msg(rc == EVD_OK, "case %d: %s", _i, err.msg);
        ck_assert_int_eq(json_is_true(json_object_get(resp, "passed")), c->passed);
        ck_assert(json_is_real(json_object_get(resp, "score")));
        ck_assert(json_real_value(json_object_get(resp, "score")) == (c->passed ? 1.0 : 0.0));
        ck_assert_str_eq(json_string_value(json_object_get(resp, "reason")), c->reason);
        ck_assert_ptr_null(json_object_get(resp, "details"));
        json_t *checked = NULL;
        ck_assert_int_eq(evd_evaluator_check_response(resp, &checked, &err), EVD_OK);
        ck_assert(json_equal(checked, resp));
        json_decref(checked);
    }
    json_decref(resp);
    json_decref(body);
}
END_TEST

START_TEST(unknown_evaluator_is_not_builtin)
{
    struct evd_evaluator_input in;
    json_t *body = make_input("\"OK\"", "{\"expected\":\"OK\"}", &in);
    json_t *resp = NULL;
    struct evd_err err;
    ck_assert_int_eq(evd_evaluator_run("my::judge", &in, &resp, &err), EVD_ENOTFOUND);
    ck_assert(!evd_evaluator_is_builtin("my::judge"));
    ck_assert(evd_evaluator_is_builtin("eval::assert::exact"));
    ck_assert(evd_evaluator_is_builtin("eval::assert::normalized_text"));
    json_decref(body);
}
END_TEST

START_TEST(reason_values_are_cut_at_512_characters)
{
    /* 600 x "é" (2 bytes each): the excerpt keeps 512 characters and appends "…" */
    char text[1300];
    size_t n = 0;
    for (int i = 0; i < 600; i++) {
        text[n++] = (char)0xc3;
        text[n++] = (char)0xa9;
    }
    text[n] = '\0';
    char *ex = evd_evaluator_excerpt(text, n);
    ck_assert_uint_eq(strlen(ex), 512 * 2 + 3);
    ck_assert_str_eq(ex + 1024, "\xe2\x80\xa6");
    free(ex);
    ex = evd_evaluator_excerpt(text, 512 * 2);
    ck_assert_uint_eq(strlen(ex), 1024);
    free(ex);

    /* through the exact evaluator: actual is a 600-character JSON string */
    json_t *out = json_string(text);
    char *out_text = json_dumps(out, JSON_ENCODE_ANY);
    struct evd_evaluator_input in;
    json_t *body = make_input(out_text, "{\"expected\":\"OK\"}", &in);
    json_t *resp = NULL;
    struct evd_err err;
    ck_assert_int_eq(evd_evaluator_exact(&in, &resp, &err), EVD_OK);
    const char *reason = json_string_value(json_object_get(resp, "reason"));
    const char *actual = strstr(reason, "actual=") + 7;
    const char *cut = strstr(actual, "\xe2\x80\xa6, expected=\"OK\")");
    ck_assert_ptr_nonnull(cut);
    ck_assert_int_eq(cut - actual, 1 + 511 * 2); /* opening quote + 511 "é" */
    free(out_text);
    json_decref(out);
    json_decref(resp);
    json_decref(body);
}
END_TEST

struct norm_case {
    const char *in;
    const char *out;
};

static const struct norm_case NORMS[] = {
    {"  Ol\xc3\xa1,   mundo!  ", "ol\xc3\xa1, mundo"},
    {"ol\xc3\xa1, mundo", "ol\xc3\xa1, mundo"},
    {"OK !", "ok "},
    {"!!OK!!", "ok"},
    {"(a, b).", "a, b"},
    {"\xc2\xa1Hola!", "\xc2\xa1hola"}, /* ¡ is not ASCII punctuation */
    {"\xe2\x80\xa6"
     "done\xe3\x80\x82",
     "\xe2\x80\xa6"
     "done\xe3\x80\x82"}, /* … 。 kept */
    {"a\xe3\x80\x80\xc2\xa0"
     "b\xe2\x80\xa8"
     "c",
     "a b c"}, /* U+3000, NBSP, U+2028 split */
    {"\xce\x9f\xce\x94\xce\x9f\xce\xa3", "\xce\xbf\xce\xb4\xce\xbf\xcf\x82"}, /* final sigma */
    {"\xc4\xb0stanbul", "i\xcc\x87stanbul"}, /* İ lowercases to i + U+0307 */
    {"STRASSE \xe1\xba\x9e", "strasse \xc3\x9f"},
    {"   ", ""},
    {"!?", ""},
    {"", ""},
    {"a - b", "a - b"},
};

START_TEST(text_normalization)
{
    size_t len = 99;
    char *got = evd_text_normalize(NORMS[_i].in, strlen(NORMS[_i].in), &len);
    ck_assert_str_eq(got, NORMS[_i].out);
    ck_assert_uint_eq(len, strlen(NORMS[_i].out));
    free(got);
}
END_TEST

START_TEST(text_blank_uses_unicode_whitespace)
{
    ck_assert(evd_text_is_blank("", 0));
    ck_assert(evd_text_is_blank(" \t\n\r\v\f", 6));
    ck_assert(evd_text_is_blank("\xe3\x80\x80\xc2\xa0\xe2\x80\x83\xc2\x85", 10));
    ck_assert(!evd_text_is_blank("\xe2\x80\x8b", 3)); /* zero-width space is not White_Space */
    ck_assert(!evd_text_is_blank(" x ", 3));
    ck_assert(!evd_text_is_blank("\0", 1));
}
END_TEST

struct answer_case {
    const char *answer;
    const char *message;    /* NULL = accepted */
    const char *normalized; /* when accepted */
};

static const struct answer_case ANSWERS[] = {
    {"{\"passed\":true}", NULL, "{\"passed\":true}"},
    {"{\"passed\":false,\"score\":0.25,\"reason\":\"r\",\"details\":{\"k\":[1]}}", NULL,
     "{\"details\":{\"k\":[1]},\"passed\":false,\"reason\":\"r\",\"score\":0.25}"},
    {"{\"passed\":true,\"score\":1.0}", NULL, "{\"passed\":true,\"score\":1.0}"},
    {"{\"passed\":true,\"score\":1}", NULL, "{\"passed\":true,\"score\":1.0}"},
    {"{\"passed\":true,\"score\":0}", NULL, "{\"passed\":true,\"score\":0.0}"},
    {"{\"passed\":true,\"score\":null,\"reason\":null,\"details\":null}", NULL,
     "{\"passed\":true}"},
    {"{\"passed\":true,\"score\":1.1}", "evaluator score must be a finite number between 0 and 1",
     NULL},
    {"{\"passed\":true,\"score\":-0.1}", "evaluator score must be a finite number between 0 and 1",
     NULL},
    {"{\"passed\":true,\"score\":\"0.5\"}",
     "evaluator score must be a finite number between 0 and 1", NULL},
    {"{\"passed\":true,\"reason\":5}", "evaluator response member reason must be a string", NULL},
    {"{\"passed\":\"yes\"}", "evaluator response member passed must be a boolean", NULL},
    {"{\"score\":1.0}", "evaluator response member passed is required", NULL},
    {"{\"passed\":true,\"verdict\":\"GREEN\"}",
     "evaluator response member verdict is not a known field", NULL},
    {"[true]", "evaluator response must be an object", NULL},
};

START_TEST(evaluator_answer_check)
{
    const struct answer_case *c = &ANSWERS[_i];
    json_t *a = evd_dt_parse(c->answer);
    json_t *n = (json_t *)1;
    struct evd_err err;
    enum evd_code rc = evd_evaluator_check_response(a, &n, &err);
    if (c->message == NULL) {
        ck_assert_msg(rc == EVD_OK, "case %d: %s", _i, err.msg);
        json_t *want = evd_dt_parse(c->normalized);
        ck_assert_msg(json_equal(n, want), "case %d: got %s", _i, evd_dt_dump(n));
        json_decref(want);
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_str_eq(err.msg, c->message);
        ck_assert_ptr_null(n);
    }
    json_decref(n);
    json_decref(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_evaluators");
    TCase *tc = tcase_create("builtin");
    tcase_add_loop_test(tc, builtin_verdicts, 0, sizeof(VERDICTS) / sizeof(VERDICTS[0]));
    tcase_add_test(tc, unknown_evaluator_is_not_builtin);
    tcase_add_test(tc, reason_values_are_cut_at_512_characters);
    suite_add_tcase(s, tc);
    TCase *text = tcase_create("text");
    tcase_add_loop_test(text, text_normalization, 0, sizeof(NORMS) / sizeof(NORMS[0]));
    tcase_add_test(text, text_blank_uses_unicode_whitespace);
    suite_add_tcase(s, text);
    TCase *ans = tcase_create("answers");
    tcase_add_loop_test(ans, evaluator_answer_check, 0, sizeof(ANSWERS) / sizeof(ANSWERS[0]));
    suite_add_tcase(s, ans);
    return evd_test_run_suite(s);
}
