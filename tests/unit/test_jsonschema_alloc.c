/*
 * Allocation-failure tests for schema/jsonschema (in the spirit of jansson's test_chaos):
 * this executable interposes malloc/calloc/realloc/free over glibc's, fails the n-th
 * allocation for every n, and checks that compilation reports EVD_ENOMEM, validation
 * never lets a value pass by accident, and nothing leaks. Sanitizer builds replace the
 * allocator themselves, so there the test prints SKIPPED and passes.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/jsonschema.h"
#include "schema/structured.h"
#include "tests/support/testutil.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CHAOS_AVAILABLE 0
#else
#define CHAOS_AVAILABLE 1

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

static long live;      /* allocations not yet freed */
static long countdown; /* allocations left before the injected failure */
static int armed;      /* inject only while the code under test runs */
static int injected;   /* a failure was injected during this round */

static int should_fail(void)
{
    if (!armed)
        return 0;
    if (countdown-- == 0) {
        injected = 1;
        return 1;
    }
    return 0;
}

void *malloc(size_t n)
{
    if (should_fail())
        return NULL;
    void *p = __libc_malloc(n);
    if (p != NULL)
        live++;
    return p;
}

void *calloc(size_t n, size_t m)
{
    if (should_fail())
        return NULL;
    void *p = __libc_calloc(n, m);
    if (p != NULL)
        live++;
    return p;
}

void *realloc(void *old, size_t n)
{
    if (should_fail())
        return NULL;
    void *p = __libc_realloc(old, n);
    if (p != NULL && old == NULL)
        live++;
    return p;
}

void free(void *p)
{
    if (p != NULL)
        live--;
    __libc_free(p);
}
#endif

static const char SCHEMA[] __attribute__((unused)) =
    "{\"$id\":\"http://example.com/s.json\",\"type\":\"object\","
    "\"definitions\":{\"name\":{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}},"
    "\"required\":[\"name\"],"
    "\"properties\":{\"name\":{\"$ref\":\"#/definitions/name\"},"
    "\"tags\":{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"type\":\"string\"}},"
    "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}},"
    "\"meta\":{\"propertyNames\":{\"pattern\":\"^x-\"},\"additionalProperties\":{\"format\":"
    "\"regex\"}}},"
    "\"patternProperties\":{\"^_\":{}},\"additionalProperties\":false}";

static const char VALID[] __attribute__((unused)) =
    "{\"name\":\"root\",\"tags\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\","
    "\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"],\"kids\":[{\"name\":\"kid\"}],"
    "\"meta\":{\"x-a\":\"^a+$\"},\"_private\":1}";

START_TEST(compile_fails_cleanly_at_every_allocation)
{
#if CHAOS_AVAILABLE
    json_t *schema = json_loads(SCHEMA, 0, NULL);
    ck_assert_ptr_nonnull(schema);
    ck_assert_ptr_nonnull(evd_jsonschema_draft7()); /* loaded once, before failures start */
    int rounds = 0;
    for (long n = 0; n < 100000; n++) {
        struct evd_err err = {0};
        long before = live;
        countdown = n;
        injected = 0;
        armed = 1;
        struct evd_jsonschema *v = evd_jsonschema_new(schema, &err);
        armed = 0;
        if (v == NULL) {
            ck_assert_msg(injected, "compile failed without an injected failure: %s", err.msg);
            ck_assert_msg(err.code == EVD_ENOMEM, "round %ld: %s", n, err.msg);
        }
        evd_jsonschema_free(v);
        ck_assert_int_eq(live, before);
        rounds++;
        if (!injected)
            break;
    }
    ck_assert_int_gt(rounds, 5);
    json_decref(schema);
#else
    fprintf(stderr, "SKIPPED: allocation-failure injection (the sanitizers bring their own "
                    "allocator, which this build cannot wrap)\n");
#endif
}
END_TEST

START_TEST(validate_never_passes_by_accident)
{
#if CHAOS_AVAILABLE
    json_t *schema = json_loads(SCHEMA, 0, NULL);
    json_t *inst = json_loads(VALID, 0, NULL);
    struct evd_jsonschema *v = evd_jsonschema_new(schema, NULL);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(evd_jsonschema_validate(v, inst, NULL, 0), 0);
    int rounds = 0;
    for (long n = 0; n < 100000; n++) {
        struct evd_schema_error errs[3];
        long before = live;
        countdown = n;
        injected = 0;
        armed = 1;
        size_t count = evd_jsonschema_validate(v, inst, errs, 3);
        armed = 0;
        ck_assert_int_eq(live, before);
        rounds++;
        if (!injected) {
            ck_assert_uint_eq(count, 0);
            break;
        }
        ck_assert_uint_ge(count, 1);
    }
    ck_assert_int_gt(rounds, 3);
    evd_jsonschema_free(v);
    json_decref(inst);
    json_decref(schema);
#else
    fprintf(stderr, "SKIPPED: allocation-failure injection (the sanitizers bring their own "
                    "allocator, which this build cannot wrap)\n");
#endif
}
END_TEST

static const char OWNER[] __attribute__((unused)) =
    "{\"definitions\":{\"n\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"array\","
    "\"items\":{\"$ref\":\"#/definitions/n\"}}},\"required\":[\"k\"]}},"
    "\"properties\":{\"tree\":{\"$ref\":\"#/definitions/n\"},\"note\":{\"type\":\"string\","
    "\"maxLength\":9},\"map\":{\"additionalProperties\":{\"type\":\"integer\"}},"
    "\"pick\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}},\"required\":[\"tree\"]}";

static const char ANSWER[] __attribute__((unused)) =
    "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":{\"tree\":{\"k\":[\"{\\\"k\\\":[]}\"]},"
    "\"note\":null,\"map\":\"{\\\"a\\\":1}\",\"pick\":null}}}";

START_TEST(structured_output_fails_cleanly_at_every_allocation)
{
#if CHAOS_AVAILABLE
    json_t *owner = json_loads(OWNER, 0, NULL);
    ck_assert_ptr_nonnull(owner);
    ck_assert_ptr_nonnull(evd_jsonschema_draft7());
    int rounds = 0;
    for (long n = 0; n < 1000000; n++) {
        struct evd_err err = {0};
        long before = live;
        countdown = n;
        injected = 0;
        armed = 1;
        struct evd_so_contract *c = evd_so_verdict_new(owner, NULL, &err);
        struct evd_so_wire *w = c != NULL ? evd_so_wire_new(c, EVD_SO_ANTHROPIC, &err) : NULL;
        json_t *out = NULL;
        struct evd_so_failure f;
        enum evd_so_result rc = EVD_SO_NOMEM;
        char *msg = NULL;
        if (w != NULL) {
            rc = evd_so_decode(c, w, ANSWER, strlen(ANSWER), &out, &f);
            if (rc != EVD_SO_VALID)
                msg = evd_so_repair_message(&f);
        }
        armed = 0;
        if (c == NULL || w == NULL)
            ck_assert_msg(err.code == EVD_ENOMEM, "round %ld: %s", n, err.msg);
        if (!injected) {
            ck_assert_msg(rc == EVD_SO_VALID, "round %ld: %s", n, f.code);
            ck_assert_str_eq(json_string_value(json_object_get(out, "verdict")), "GREEN");
        }
        free(msg);
        json_decref(out);
        evd_so_wire_free(w);
        evd_so_contract_free(c);
        ck_assert_int_eq(live, before);
        rounds++;
        if (!injected)
            break;
    }
    fprintf(stderr, "structured output: %d allocation failures injected\n", rounds - 1);
    ck_assert_int_gt(rounds, 50);
    json_decref(owner);
#else
    fprintf(stderr, "SKIPPED: allocation-failure injection (the sanitizers bring their own "
                    "allocator, which this build cannot wrap)\n");
#endif
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jsonschema_alloc");
    TCase *tc = tcase_create("chaos");
    tcase_add_test(tc, compile_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, validate_never_passes_by_accident);
    tcase_add_test(tc, structured_output_fails_cleanly_at_every_allocation);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
