/*
 * Unit tests for domain/canonical.h, the writer it shares with common/json.h, and
 * domain/artifacts.h: the shortest round-trip real formatter against ryu's outputs,
 * canonical JSON (key order, escapes, numbers), the compact (unsorted) form, and the
 * artifact hashes.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
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
    char buf[EVD_JSON_REAL_MAX];
    size_t n = evd_json_format_real(REALS[_i].value, buf, sizeof(buf));
    ck_assert_str_eq(buf, REALS[_i].text);
    ck_assert_uint_eq(n, strlen(REALS[_i].text));
    ck_assert(strtod(buf, NULL) == REALS[_i].value);
}
END_TEST

START_TEST(real_rejects_non_finite_and_small_buffers)
{
    char buf[EVD_JSON_REAL_MAX];
    ck_assert_uint_eq(evd_json_format_real(NAN, buf, sizeof(buf)), 0);
    ck_assert_uint_eq(evd_json_format_real(INFINITY, buf, sizeof(buf)), 0);
    ck_assert_uint_eq(evd_json_format_real(1.0, buf, 8), 0);
}
END_TEST

/* Every real reads back from its text (fixed-seed xorshift over all bit patterns). */
START_TEST(real_round_trips_on_random_doubles)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    char buf[EVD_JSON_REAL_MAX];
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double d;
        memcpy(&d, &x, sizeof(d));
        if (!isfinite(d))
            continue;
        size_t n = evd_json_format_real(d, buf, sizeof(buf));
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

/* evd_json_compact keeps members in their order and writes everything else as the
 * canonical form does. */
static const struct dump_case COMPACT[] = {
    {"{\"b\":1,\"a\":{\"z\":[],\"y\":{}}}", "{\"b\":1,\"a\":{\"z\":[],\"y\":{}}}"},
    {"[0, -1, 9223372036854775807, -9223372036854775808, 0.1, -0.0, 1e300, 2.5e-8]",
     "[0,-1,9223372036854775807,-9223372036854775808,0.1,-0.0,1e300,2.5e-8]"},
    {"\"quote\\\" back\\\\ tab\\t \\u0001 ol\\u00e1 \\u0000\"",
     "\"quote\\\" back\\\\ tab\\t \\u0001 ol\xc3\xa1 \\u0000\""},
    {"true", "true"},
    {"{}", "{}"},
};

START_TEST(compact_dump_keeps_member_order)
{
    json_t *v = evd_dt_parse(COMPACT[_i].input);
    size_t len = 0;
    char *s = evd_json_compact(v, &len);
    ck_assert_str_eq(s, COMPACT[_i].canonical);
    ck_assert_uint_eq(len, strlen(COMPACT[_i].canonical));
    free(s);
    json_decref(v);
}
END_TEST

/* A random JSON value of bounded depth: every type, odd strings, extreme numbers. */
static json_t *random_value(uint64_t *x, int depth)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    uint64_t r = *x;
    switch (depth <= 0 ? r % 6 : r % 8) {
    case 0:
        return json_null();
    case 1:
        return json_boolean(r & 64);
    case 2:
        return json_integer((json_int_t)(r >> 1) * ((r & 2) ? -1 : 1));
    case 3: {
        double d;
        memcpy(&d, x, sizeof(d));
        return json_real(isfinite(d) ? d : (double)(r % 1000) / 7.0);
    }
    case 4: {
        char buf[16];
        size_t n = (size_t)(r % sizeof(buf));
        for (size_t i = 0; i < n; i++)
            buf[i] = (char)(1 + (r >> (i * 4)) % 127); /* controls, quotes, backslashes */
        return json_stringn(buf, n);
    }
    case 5:
        return json_string("\xc3\xa9\xe2\x80\xa8\xf0\x9f\x98\x80");
    case 6: {
        json_t *a = json_array();
        for (uint64_t i = 0; i < r % 5; i++)
            json_array_append_new(a, random_value(x, depth - 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (uint64_t i = 0; i < r % 5; i++) {
            char key[8];
            snprintf(key, sizeof(key), "k%u", (unsigned)((r >> (8 * i)) % 97));
            json_object_set_new(o, key, random_value(x, depth - 1));
        }
        return o;
    }
    }
}

START_TEST(compact_dump_reads_back_equal)
{
    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < 3000; i++) {
        json_t *v = random_value(&x, 4);
        char *text = evd_json_compact(v, NULL);
        ck_assert_ptr_nonnull(text);
        json_error_t jerr;
        json_t *back = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        ck_assert_msg(back != NULL, "%s does not parse: %s", text, jerr.text);
        ck_assert_msg(json_equal(v, back), "%s does not read back equal", text);
        /* and the member order is the value's own */
        char *again = evd_json_compact(back, NULL);
        ck_assert_str_eq(again, text);
        free(again);
        json_decref(back);
        free(text);
        json_decref(v);
    }
    ck_assert_ptr_null(evd_json_compact(NULL, NULL));
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
    tcase_add_loop_test(json, compact_dump_keeps_member_order, 0,
                        sizeof(COMPACT) / sizeof(COMPACT[0]));
    tcase_add_test(json, compact_dump_reads_back_equal);
    suite_add_tcase(s, json);
    return evd_test_run_suite(s);
}
