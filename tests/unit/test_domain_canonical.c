/*
 * Unit tests for domain/canonical.h and domain/artifacts.h: the shortest round-trip
 * real formatter against ryu's outputs, canonical JSON (key order, escapes, numbers),
 * and the artifact hashes.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "domain/artifacts.h"
#include "domain/canonical.h"
#include "tests/support/domain_fixtures.h"
#include "tests/support/testutil.h"

struct real_case {
    double value;
    const char *text; /* what Rust's ryu prints for the same f64 */
};

static const struct real_case REALS[] = {
    {0.5, "0.5"},
    {1.0, "1.0"},
    {1e-7, "1e-7"},
    {0.0, "0.0"},
    {-0.0, "-0.0"},
    {-1.5, "-1.5"},
    {0.1, "0.1"},
    {0.3, "0.3"},
    {0.1 + 0.2, "0.30000000000000004"},
    {123.456, "123.456"},
    {100.0, "100.0"},
    {1e15, "1000000000000000.0"},
    {9007199254740992.0, "9007199254740992.0"},
    {1e16, "1e16"},
    {1.5e16, "1.5e16"},
    {1.2345678901234567e17, "1.2345678901234566e17"},
    {1e21, "1e21"},
    {1.5e300, "1.5e300"},
    {1.7976931348623157e308, "1.7976931348623157e308"},
    {0.001, "0.001"},
    {0.0001234, "0.0001234"},
    {1e-5, "0.00001"},
    {1e-6, "1e-6"},
    {1.5e-10, "1.5e-10"},
    {5e-324, "5e-324"},
    {2.2250738585072014e-308, "2.2250738585072014e-308"},
    {0.012345678, "0.012345678"},
    {33.333333333333336, "33.333333333333336"},
    {4.35, "4.35"},
    {2.5, "2.5"},
    {1.0 / 3.0, "0.3333333333333333"},
    {2.0 / 3.0, "0.6666666666666666"},
    {1152921504606846976.0, "1.152921504606847e18"}, /* 2^60, asymmetric interval */
    {8.507059173023462e37, "8.507059173023462e37"},  /* 2^126 */
};

START_TEST(real_shortest_round_trip_like_ryu)
{
    char buf[EVD_CANONICAL_REAL_MAX];
    size_t n = evd_canonical_format_real(REALS[_i].value, buf, sizeof(buf));
    ck_assert_str_eq(buf, REALS[_i].text);
    ck_assert_uint_eq(n, strlen(REALS[_i].text));
    ck_assert(strtod(buf, NULL) == REALS[_i].value);
}
END_TEST

START_TEST(real_rejects_non_finite_and_small_buffers)
{
    char buf[EVD_CANONICAL_REAL_MAX];
    ck_assert_uint_eq(evd_canonical_format_real(NAN, buf, sizeof(buf)), 0);
    ck_assert_uint_eq(evd_canonical_format_real(INFINITY, buf, sizeof(buf)), 0);
    ck_assert_uint_eq(evd_canonical_format_real(1.0, buf, 8), 0);
}
END_TEST

/* Every real reads back from its text (fixed-seed xorshift over all bit patterns). */
START_TEST(real_round_trips_on_random_doubles)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    char buf[EVD_CANONICAL_REAL_MAX];
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double d;
        memcpy(&d, &x, sizeof(d));
        if (!isfinite(d))
            continue;
        size_t n = evd_canonical_format_real(d, buf, sizeof(buf));
        ck_assert_uint_gt(n, 0);
        ck_assert_msg(strtod(buf, NULL) == d, "%s does not read back", buf);
        ck_assert(strchr(buf, '+') == NULL);
        /* at most 17 significant digits: skip sign and leading zeros, drop a final ".0" */
        const char *p = buf + (buf[0] == '-');
        while (*p == '0' || *p == '.')
            p++;
        const char *end = strchr(p, 'e') ? strchr(p, 'e') : p + strlen(p);
        if (end - p >= 2 && end[-1] == '0' && end[-2] == '.')
            end -= 2;
        int digits = 0;
        for (; p < end; p++)
            digits += (*p >= '0' && *p <= '9');
        ck_assert_int_le(digits, 17);
    }
}
END_TEST

struct dump_case {
    const char *input;
    const char *canonical;
};

static const struct dump_case DUMPS[] = {
    {"{\"b\":1,\"a\":2}", "{\"a\":2,\"b\":1}"},
    {"{\"b\":{\"d\":[3,2,1],\"c\":null},\"a\":[true,false]}",
     "{\"a\":[true,false],\"b\":{\"c\":null,\"d\":[3,2,1]}}"},
    {"{\"aa\":1,\"a\":2,\"B\":3,\"\xc3\xa9\":4,\"z\":5}",
     "{\"B\":3,\"a\":2,\"aa\":1,\"z\":5,\"\xc3\xa9\":4}"},
    {"[1, 1.0, 0.5, 1e-7, -3, 1e2, 12345678901234567]",
     "[1,1.0,0.5,1e-7,-3,100.0,12345678901234567]"},
    {"\"quote\\\" back\\\\ slash/ tab\\t nl\\n cr\\r bs\\b ff\\f\"",
     "\"quote\\\" back\\\\ slash/ tab\\t nl\\n cr\\r bs\\b ff\\f\""},
    {"\"\\u0001\\u001f\\u007f\"", "\"\\u0001\\u001f\x7f\""},
    {"\"ol\\u00e1 \\u2028 \\ud83d\\ude00\"", "\"ol\xc3\xa1 \xe2\x80\xa8 \xf0\x9f\x98\x80\""},
    {"{}", "{}"},
    {"[]", "[]"},
    {"null", "null"},
    {"[\"a\\u0000b\"]", "[\"a\\u0000b\"]"},
};

START_TEST(canonical_dump)
{
    json_t *v = evd_dt_parse(DUMPS[_i].input);
    char *s = evd_canonical_dump(v);
    ck_assert_str_eq(s, DUMPS[_i].canonical);
    free(s);
    json_decref(v);
}
END_TEST

START_TEST(canonical_sha256_hashes_the_canonical_text)
{
    json_t *v = evd_dt_parse("{\"expected\": \"OK\"}");
    char got[65], want[65];
    ck_assert_int_eq(evd_canonical_sha256(v, got), 0);
    evd_sha256_hex("{\"expected\":\"OK\"}", 17, want);
    ck_assert_str_eq(got, want);
    json_decref(v);
}
END_TEST

static void sha_of(const char *text, char out[65])
{
    evd_sha256_hex(text, strlen(text), out);
}

START_TEST(artifacts_hash_prompts_and_shared_values)
{
    json_t *req = evd_dt_normalized(3, EVD_ORDER_CONTROL_FIRST, true);
    char want[65];

    json_t *c = evd_artifacts_variant(json_object_get(req, "control"));
    sha_of("Reply with OK.", want);
    ck_assert_str_eq(json_string_value(json_object_get(c, "prompt_sha256")), want);
    sha_of("Be exact.", want);
    ck_assert_str_eq(json_string_value(json_object_get(c, "system_prompt_sha256")), want);
    ck_assert_str_eq(json_string_value(json_object_get(c, "label")), "baseline");
    json_decref(c);

    json_t *v = evd_dt_parse("{\"prompt\":\"p\",\"system_prompt\":null}");
    c = evd_artifacts_variant(v);
    ck_assert_ptr_null(json_object_get(c, "system_prompt_sha256"));
    ck_assert_ptr_null(json_object_get(c, "label"));
    json_decref(c);
    json_object_set_new(v, "system_prompt", json_string(""));
    c = evd_artifacts_variant(v);
    ck_assert_str_eq(json_string_value(json_object_get(c, "system_prompt_sha256")),
                     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    json_decref(c);
    json_decref(v);

    json_t *e = evd_artifacts_evaluator(json_object_get(req, "evaluator"));
    sha_of("{\"expected\":\"OK\"}", want);
    ck_assert_str_eq(json_string_value(json_object_get(e, "arguments_sha256")), want);
    ck_assert_str_eq(json_string_value(json_object_get(e, "function_id")), "eval::assert::exact");
    json_decref(e);
    json_t *noargs = evd_dt_parse("{\"function_id\":\"f\"}");
    e = evd_artifacts_evaluator(noargs);
    sha_of("{}", want);
    ck_assert_str_eq(json_string_value(json_object_get(e, "arguments_sha256")), want);
    json_decref(e);
    json_decref(noargs);

    json_t *s = evd_artifacts_shared(req);
    sha_of("{\"model\":\"gpt-test\",\"provider\":\"openai\",\"system_prompt_strategy\":\"enrich\"}",
           want);
    ck_assert_str_eq(json_string_value(json_object_get(s, "model_sha256")), want);
    sha_of("{\"allow\":[],\"deny\":[],\"expose\":\"agent_trigger\"}", want);
    ck_assert_str_eq(json_string_value(json_object_get(s, "function_policy_sha256")), want);
    sha_of("{\"evaluation\":{},\"execution\":{\"invocation_timeout_seconds\":120,"
           "\"max_output_tokens_per_call\":8192,\"max_turns\":1000,"
           "\"scenario_timeout_seconds\":600}}",
           want);
    ck_assert_str_eq(json_string_value(json_object_get(s, "limits_sha256")), want);
    sha_of("{\"type\":\"text\"}", want);
    ck_assert_str_eq(json_string_value(json_object_get(s, "output_sha256")), want);
    json_decref(s);
    json_decref(req);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_canonical");
    TCase *tc = tcase_create("reals");
    tcase_set_timeout(tc, 60); /* 300k random round trips: slow under sanitizers and load */
    tcase_add_loop_test(tc, real_shortest_round_trip_like_ryu, 0, sizeof(REALS) / sizeof(REALS[0]));
    tcase_add_test(tc, real_rejects_non_finite_and_small_buffers);
    tcase_add_test(tc, real_round_trips_on_random_doubles);
    suite_add_tcase(s, tc);
    TCase *json = tcase_create("json");
    tcase_add_loop_test(json, canonical_dump, 0, sizeof(DUMPS) / sizeof(DUMPS[0]));
    tcase_add_test(json, canonical_sha256_hashes_the_canonical_text);
    tcase_add_test(json, artifacts_hash_prompts_and_shared_values);
    suite_add_tcase(s, json);
    return evd_test_run_suite(s);
}
