/* Unit tests for common/: error records, ids, hashing, buffers, hex, JSON escapes and members. */
#include <check.h>
#include <string.h>

#include "common/err.h"
#include "common/json.h"
#include "common/util.h"
#include "tests/support/testutil.h"

START_TEST(err_set_formats_and_returns_code)
{
    struct evd_err err;
    enum evd_code c = evd_err_set(&err, EVD_EINVAL, "runs must be between 1 and %u", 100u);
    ck_assert_int_eq(c, EVD_EINVAL);
    ck_assert_int_eq(err.code, EVD_EINVAL);
    ck_assert_str_eq(err.msg, "runs must be between 1 and 100");
    ck_assert_int_eq(evd_err_set(NULL, EVD_ENOTFOUND, "x"), EVD_ENOTFOUND);
    ck_assert_str_eq(evd_code_name(EVD_ETOOLARGE), "payload_too_large");
}
END_TEST

/* A message about "model…" told of "judge.model…"; others are left alone; a long one loses
 * its end, never its prefix. */
START_TEST(err_prefix_names_the_parent)
{
    struct evd_err e = {0};
    evd_err_set(&e, EVD_EINVAL, "model.model is required");
    evd_err_prefix(&e, "model", "simulator.");
    ck_assert_str_eq(e.msg, "simulator.model.model is required");
    evd_err_set(&e, EVD_EINVAL, "limits must be an object");
    evd_err_prefix(&e, "model", "judge.");
    ck_assert_str_eq(e.msg, "limits must be an object");
    char longer[EVD_ERR_MSG_MAX];
    memset(longer, 'x', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    memcpy(longer, "model", 5);
    evd_err_set(&e, EVD_EINVAL, "%s", longer);
    evd_err_prefix(&e, "model", "judge.");
    ck_assert_uint_eq(strlen(e.msg), sizeof(e.msg) - 1);
    ck_assert(strncmp(e.msg, "judge.model", 11) == 0);
    evd_err_prefix(NULL, "model", "judge."); /* NULL-safe */
}
END_TEST

START_TEST(ids_are_uuid4_hex)
{
    char a[64], b[64];
    evd_new_id("eval_", a, sizeof(a));
    evd_new_id("eval_", b, sizeof(b));
    ck_assert_uint_eq(strlen(a), 37);
    ck_assert_str_ne(a, b);
    ck_assert(strncmp(a, "eval_", 5) == 0);
    ck_assert_uint_eq(strspn(a + 5, "0123456789abcdef"), 32);
    ck_assert_int_eq(a[5 + 12], '4');
    ck_assert(strchr("89ab", a[5 + 16]) != NULL);
}
END_TEST

START_TEST(sha256_known_vectors)
{
    char hex[65];
    evd_sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    evd_sha256_hex("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
END_TEST

START_TEST(consttime_eq)
{
    ck_assert(evd_consttime_eq("secret", 6, "secret", 6));
    ck_assert(!evd_consttime_eq("secret", 6, "secreT", 6));
    ck_assert(!evd_consttime_eq("secret", 6, "secret1", 7));
}
END_TEST

START_TEST(buf_grows_and_respects_limit)
{
    struct evd_buf b = {0};
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(evd_buf_printf(&b, "%d,", i % 10), 0);
    ck_assert_uint_eq(b.len, 2000);
    ck_assert_uint_eq(strlen(b.data), 2000);
    evd_buf_free(&b);
    struct evd_buf l = {.limit = 4};
    ck_assert_int_eq(evd_buf_append(&l, "abcd", 4), 0);
    ck_assert_int_eq(evd_buf_append(&l, "e", 1), -1);
    ck_assert_str_eq(l.data, "abcd");
    evd_buf_free(&l);
}
END_TEST

START_TEST(hex_encode_and_value)
{
    const unsigned char in[] = {0x00, 0x0f, 0xa5, 0xff};
    char out[9];
    evd_hex_encode(in, sizeof(in), out);
    ck_assert_str_eq(out, "000fa5ff");
    evd_hex_encode(in, 0, out);
    ck_assert_str_eq(out, "");
    const char *digits = "0123456789abcdefABCDEF";
    for (int i = 0; digits[i] != '\0'; i++)
        ck_assert_int_eq(evd_hex_value(digits[i]), i < 16 ? i : i - 6);
    const char *other = "gG/:@`~ -";
    for (int i = 0; other[i] != '\0'; i++)
        ck_assert_int_eq(evd_hex_value(other[i]), -1);
    ck_assert_int_eq(evd_hex_value('\0'), -1);
}
END_TEST

START_TEST(json_unknown_member)
{
    static const char *const known[] = {"url", "secret", NULL};
    json_t *ok = json_loads("{\"url\":1,\"secret\":2}", 0, NULL);
    json_t *extra = json_loads("{\"url\":1,\"colour\":2}", 0, NULL);
    json_t *nul = json_object();
    ck_assert_int_eq(json_object_setn_new(nul, "url\0x", 5, json_true()), 0);
    json_t *empty = json_object();
    ck_assert_ptr_null(evd_json_unknown_member(ok, known));
    ck_assert_str_eq(evd_json_unknown_member(extra, known), "colour");
    ck_assert_ptr_nonnull(evd_json_unknown_member(nul, known)); /* not "url" */
    ck_assert_ptr_null(evd_json_unknown_member(empty, known));
    ck_assert_ptr_null(evd_json_unknown_member(NULL, known));
    json_decref(ok);
    json_decref(extra);
    json_decref(nul);
    json_decref(empty);
}
END_TEST

static const struct {
    unsigned char c;
    const char *want; /* NULL: the byte stands for itself */
} escapes[] = {
    {'"', "\\\""}, {'\\', "\\\\"}, {'\b', "\\b"},     {'\f', "\\f"},     {'\n', "\\n"},
    {'\r', "\\r"}, {'\t', "\\t"},  {0x00, "\\u0000"}, {0x1f, "\\u001f"}, {0x0b, "\\u000b"},
    {'/', NULL},   {0x7f, NULL},   {0xc3, NULL},      {'a', NULL},
};

START_TEST(json_escape_table)
{
    char esc[7];
    const char *got = evd_json_escape(escapes[_i].c, esc);
    if (escapes[_i].want == NULL)
        ck_assert_ptr_null(got);
    else
        ck_assert_str_eq(got, escapes[_i].want);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("common");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, err_set_formats_and_returns_code);
    tcase_add_test(tc, err_prefix_names_the_parent);
    tcase_add_test(tc, ids_are_uuid4_hex);
    tcase_add_test(tc, sha256_known_vectors);
    tcase_add_test(tc, consttime_eq);
    tcase_add_test(tc, buf_grows_and_respects_limit);
    tcase_add_test(tc, hex_encode_and_value);
    tcase_add_test(tc, json_unknown_member);
    tcase_add_loop_test(tc, json_escape_table, 0, (int)(sizeof(escapes) / sizeof(escapes[0])));
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
