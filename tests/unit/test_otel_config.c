/*
 * Unit tests for otel/config.c: the OTEL_* variables read through fake environments —
 * defaults, which variable wins, the traces URL, headers and resource attributes decoded,
 * and every refusal naming its variable without quoting a header's value.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otel/otel.h"
#include "tests/support/testutil.h"

/* A fake environment: pairs of name, value, then NULL. */
static const char *const *fake_env;

static const char *fake_getenv(const char *name)
{
    for (size_t i = 0; fake_env && fake_env[i]; i += 2)
        if (strcmp(fake_env[i], name) == 0)
            return fake_env[i + 1];
    return NULL;
}

static enum evd_code read_env(const char *const *env, struct evd_otel_config *cfg,
                              struct evd_err *err)
{
    fake_env = env;
    return evd_otel_config_read(fake_getenv, cfg, err);
}

/* Reads env, which must be accepted. */
static void read_ok(const char *const *env, struct evd_otel_config *cfg)
{
    struct evd_err err = {0};
    enum evd_code rc = read_env(env, cfg, &err);
    ck_assert_msg(rc == EVD_OK, "refused: %s", err.msg);
}

static const char *resource_str(const struct evd_otel_config *cfg, const char *key)
{
    return json_string_value(json_object_get(cfg->resource, key));
}

START_TEST(defaults_match_the_spec)
{
    struct evd_otel_config cfg;
    read_ok(NULL, &cfg);
    ck_assert(!cfg.enabled);
    ck_assert_ptr_null(cfg.endpoint);
    ck_assert_int_eq(cfg.protocol, EVD_OTEL_HTTP_JSON);
    ck_assert_uint_eq(cfg.nheaders, 0);
    ck_assert(!cfg.capture_content);
    ck_assert_int_eq(cfg.schedule_delay_ms, 5000);
    ck_assert_int_eq(cfg.max_queue, 2048);
    ck_assert_int_eq(cfg.max_batch, 512);
    ck_assert_int_eq(cfg.timeout_ms, 10000);
    ck_assert_uint_eq(json_object_size(cfg.resource), 2);
    ck_assert_str_eq(resource_str(&cfg, "service.name"), "evald");
    ck_assert_str_eq(resource_str(&cfg, "service.version"), EVALD_VERSION);
    evd_otel_config_free(&cfg);
    ck_assert_ptr_null(cfg.resource);
    evd_otel_config_free(&cfg); /* twice is fine */
}
END_TEST

struct endpoint_case {
    const char *env[9];
    const char *endpoint; /* NULL: none */
    bool enabled;
};

static const struct endpoint_case endpoint_cases[] = {
    {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4318/custom/path", NULL},
     "http://collector:4318/custom/path",
     true},
    {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", NULL},
     "http://collector:4318/v1/traces",
     true},
    {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/", NULL},
     "http://collector:4318/v1/traces",
     true},
    {{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://cloud.example/api/public/otel//", NULL},
     "https://cloud.example/api/public/otel/v1/traces",
     true},
    /* the traces variable wins, used as is (no /v1/traces added, its slash kept) */
    {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
      "http://traces:4318/", NULL},
     "http://traces:4318/",
     true},
    /* an empty variable counts as unset */
    {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "", "OTEL_EXPORTER_OTLP_ENDPOINT", "HTTPS://Base",
      NULL},
     "HTTPS://Base/v1/traces",
     true},
    {{"OTEL_EXPORTER_OTLP_ENDPOINT", "", NULL}, NULL, false},
    {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_SDK_DISABLED", "TRUE", NULL},
     "http://c:4318/v1/traces",
     false},
    {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_SDK_DISABLED", "true", NULL},
     "http://c:4318/v1/traces",
     false},
    {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_SDK_DISABLED", "false", NULL},
     "http://c:4318/v1/traces",
     true},
    /* OpenTelemetry's booleans: anything but "true" is false */
    {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_SDK_DISABLED", "yes", NULL},
     "http://c:4318/v1/traces",
     true},
    {{"OTEL_SDK_DISABLED", "true", NULL}, NULL, false},
};

START_TEST(endpoint_precedence_and_path)
{
    const struct endpoint_case *c = &endpoint_cases[_i];
    struct evd_otel_config cfg;
    read_ok(c->env, &cfg);
    if (c->endpoint == NULL)
        ck_assert_ptr_null(cfg.endpoint);
    else
        ck_assert_str_eq(cfg.endpoint, c->endpoint);
    ck_assert_int_eq(cfg.enabled, c->enabled);
    evd_otel_config_free(&cfg);
}
END_TEST

struct headers_case {
    const char *env[5];
    const char *lines[4]; /* expected, NULL-terminated */
};

static const struct headers_case headers_cases[] = {
    {{"OTEL_EXPORTER_OTLP_HEADERS", "api-key=k1", NULL}, {"api-key: k1", NULL}},
    /* keys and values trimmed, values percent-decoded, '+' left alone */
    {{"OTEL_EXPORTER_OTLP_HEADERS",
      " Authorization = Basic%20cGs6c2s%3D , x-tenant=a+b,x-empty=", NULL},
     {"Authorization: Basic cGs6c2s=", "x-tenant: a+b", "x-empty: ", NULL}},
    /* empty pairs and a trailing comma are skipped */
    {{"OTEL_EXPORTER_OTLP_HEADERS", "a=1,,b=2,", NULL}, {"a: 1", "b: 2", NULL}},
    /* a value may hold '=' */
    {{"OTEL_EXPORTER_OTLP_HEADERS", "sig=a=b==", NULL}, {"sig: a=b==", NULL}},
    /* the traces variable wins whole: the general one's headers are not merged in */
    {{"OTEL_EXPORTER_OTLP_HEADERS", "a=1,b=2", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "c=3", NULL},
     {"c: 3", NULL}},
    {{"OTEL_EXPORTER_OTLP_HEADERS", "a=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "", NULL},
     {"a: 1", NULL}},
};

START_TEST(headers_are_decoded_and_the_traces_ones_win)
{
    const struct headers_case *c = &headers_cases[_i];
    struct evd_otel_config cfg;
    read_ok(c->env, &cfg);
    size_t n = 0;
    while (c->lines[n] != NULL)
        n++;
    ck_assert_uint_eq(cfg.nheaders, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(cfg.headers[i], c->lines[i]);
    evd_otel_config_free(&cfg);
    ck_assert_uint_eq(cfg.nheaders, 0);
}
END_TEST

START_TEST(thirty_two_headers_are_accepted)
{
    char list[1024] = "";
    for (int i = 0; i < EVD_OTEL_MAX_HEADERS; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%sh%d=v%d", i ? "," : "", i, i);
    const char *env[] = {"OTEL_EXPORTER_OTLP_HEADERS", list, NULL};
    struct evd_otel_config cfg;
    read_ok(env, &cfg);
    ck_assert_uint_eq(cfg.nheaders, EVD_OTEL_MAX_HEADERS);
    ck_assert_str_eq(cfg.headers[31], "h31: v31");
    evd_otel_config_free(&cfg);
}
END_TEST

struct protocol_case {
    const char *env[5];
    enum evd_otel_protocol protocol;
};

static const struct protocol_case protocol_cases[] = {
    {{NULL}, EVD_OTEL_HTTP_JSON},
    {{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", NULL}, EVD_OTEL_HTTP_JSON},
    {{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", NULL}, EVD_OTEL_HTTP_PROTOBUF},
    {{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf", NULL}, EVD_OTEL_HTTP_PROTOBUF},
    {{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
      "http/json", NULL},
     EVD_OTEL_HTTP_JSON},
    {{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
      "http/protobuf", NULL},
     EVD_OTEL_HTTP_PROTOBUF},
    {{"OTEL_EXPORTER_OTLP_PROTOCOL", "", NULL}, EVD_OTEL_HTTP_JSON},
};

START_TEST(protocol_values)
{
    const struct protocol_case *c = &protocol_cases[_i];
    struct evd_otel_config cfg;
    read_ok(c->env, &cfg);
    ck_assert_int_eq(cfg.protocol, c->protocol);
    evd_otel_config_free(&cfg);
}
END_TEST

START_TEST(numbers_are_read_and_the_batch_is_bounded_by_the_queue)
{
    const char *env[] = {"OTEL_BSP_SCHEDULE_DELAY",
                         "0",
                         "OTEL_BSP_MAX_QUEUE_SIZE",
                         "100",
                         "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
                         "0512",
                         "OTEL_EXPORTER_OTLP_TIMEOUT",
                         "3000",
                         "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                         "2147483647",
                         NULL};
    struct evd_otel_config cfg;
    read_ok(env, &cfg);
    ck_assert_int_eq(cfg.schedule_delay_ms, 0);
    ck_assert_int_eq(cfg.max_queue, 100);
    ck_assert_int_eq(cfg.max_batch, 100); /* 512 > 100: clamped */
    ck_assert_int_eq(cfg.timeout_ms, 2147483647);
    evd_otel_config_free(&cfg);

    const char *env2[] = {"OTEL_EXPORTER_OTLP_TIMEOUT",
                          "3000",
                          "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
                          "7",
                          "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                          "",
                          NULL};
    read_ok(env2, &cfg);
    ck_assert_int_eq(cfg.timeout_ms, 3000);
    ck_assert_int_eq(cfg.max_batch, 7);
    ck_assert_int_eq(cfg.max_queue, 2048);
    evd_otel_config_free(&cfg);
}
END_TEST

START_TEST(capture_content_flag)
{
    static const struct {
        const char *value;
        bool on;
    } cases[] = {{"true", true}, {"True", true}, {"false", false}, {"1", false}, {"", false}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *env[] = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", cases[i].value,
                             NULL};
        struct evd_otel_config cfg;
        read_ok(env, &cfg);
        ck_assert_msg(cfg.capture_content == cases[i].on, "%s", cases[i].value);
        evd_otel_config_free(&cfg);
    }
}
END_TEST

struct resource_case {
    const char *env[5];
    const char *pairs[12]; /* expected key, value …, NULL: the whole resource */
};

static const struct resource_case resource_cases[] = {
    {{"OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod, team = a%2Cb%20c ", NULL},
     {"deployment.environment", "prod", "team", "a,b c", "service.name", "evald", "service.version",
      EVALD_VERSION, NULL}},
    /* service.name from the attributes stands without OTEL_SERVICE_NAME … */
    {{"OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs", NULL},
     {"service.name", "from-attrs", "service.version", EVALD_VERSION, NULL}},
    /* … and OTEL_SERVICE_NAME wins over it */
    {{"OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs,k=v", "OTEL_SERVICE_NAME", "svc", NULL},
     {"service.name", "svc", "k", "v", "service.version", EVALD_VERSION, NULL}},
    {{"OTEL_SERVICE_NAME", "evald-staging", NULL},
     {"service.name", "evald-staging", "service.version", EVALD_VERSION, NULL}},
    /* an explicit service.version is the deployment's label and stands; a later key wins */
    {{"OTEL_RESOURCE_ATTRIBUTES", "service.version=2024.1,k=1,k=2,u=%C3%A9", NULL},
     {"service.version", "2024.1", "k", "2", "u", "\xc3\xa9", "service.name", "evald", NULL}},
};

START_TEST(resource_attributes)
{
    const struct resource_case *c = &resource_cases[_i];
    struct evd_otel_config cfg;
    read_ok(c->env, &cfg);
    size_t n = 0;
    for (; c->pairs[2 * n] != NULL; n++) {
        const char *got = resource_str(&cfg, c->pairs[2 * n]);
        ck_assert_msg(got != NULL, "no %s", c->pairs[2 * n]);
        ck_assert_str_eq(got, c->pairs[2 * n + 1]);
    }
    ck_assert_uint_eq(json_object_size(cfg.resource), n);
    evd_otel_config_free(&cfg);
}
END_TEST

struct bad_case {
    const char *env[7];
    const char *message;
};

#define SECRET "s3cr3t-T0KEN"

static const struct bad_case bad_cases[] = {
    {{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", NULL},
     "OTEL_EXPORTER_OTLP_PROTOCOL must be http/json or http/protobuf"},
    {{"OTEL_EXPORTER_OTLP_PROTOCOL", "HTTP/JSON", NULL},
     "OTEL_EXPORTER_OTLP_PROTOCOL must be http/json or http/protobuf"},
    {{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/xml", NULL},
     "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http/json or http/protobuf"},
    /* the general one is checked even when the traces one would win */
    {{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json",
      NULL},
     "OTEL_EXPORTER_OTLP_PROTOCOL must be http/json or http/protobuf"},
    {{"OTEL_BSP_MAX_QUEUE_SIZE", "many", NULL},
     "OTEL_BSP_MAX_QUEUE_SIZE must be a non-negative integer"},
    {{"OTEL_BSP_MAX_QUEUE_SIZE", "-1", NULL},
     "OTEL_BSP_MAX_QUEUE_SIZE must be a non-negative integer"},
    {{"OTEL_BSP_MAX_QUEUE_SIZE", "0", NULL}, "OTEL_BSP_MAX_QUEUE_SIZE must be a positive integer"},
    {{"OTEL_BSP_MAX_QUEUE_SIZE", "10000001", NULL},
     "OTEL_BSP_MAX_QUEUE_SIZE must be at most 10000000"},
    {{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0", NULL},
     "OTEL_BSP_MAX_EXPORT_BATCH_SIZE must be a positive integer"},
    {{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1.5", NULL},
     "OTEL_BSP_MAX_EXPORT_BATCH_SIZE must be a non-negative integer"},
    {{"OTEL_BSP_SCHEDULE_DELAY", " 5", NULL},
     "OTEL_BSP_SCHEDULE_DELAY must be a non-negative integer"},
    {{"OTEL_BSP_SCHEDULE_DELAY", "99999999999999999999999", NULL},
     "OTEL_BSP_SCHEDULE_DELAY must be at most 2147483647"},
    {{"OTEL_EXPORTER_OTLP_TIMEOUT", "10s", NULL},
     "OTEL_EXPORTER_OTLP_TIMEOUT must be a non-negative integer"},
    {{"OTEL_EXPORTER_OTLP_TIMEOUT", "0", NULL},
     "OTEL_EXPORTER_OTLP_TIMEOUT must be a positive integer"},
    {{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "+5", NULL},
     "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT must be a non-negative integer"},
    {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://collector/v1/traces", NULL},
     "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http or https URL"},
    {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "localhost:4318", NULL},
     "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http or https URL"},
    {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://", NULL},
     "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http or https URL"},
    {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http:///v1/traces", NULL},
     "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http or https URL"},
    {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:" SECRET "@c 4318", NULL},
     "OTEL_EXPORTER_OTLP_ENDPOINT must be an http or https URL"},
    {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://ok:4318/v1/traces",
      "OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", NULL},
     "OTEL_EXPORTER_OTLP_ENDPOINT must be an http or https URL"},
    {{"OTEL_EXPORTER_OTLP_HEADERS", "a=b,Authorization " SECRET, NULL},
     "OTEL_EXPORTER_OTLP_HEADERS: pair 2 is not of the form key=value"},
    {{"OTEL_EXPORTER_OTLP_HEADERS", "=" SECRET, NULL},
     "OTEL_EXPORTER_OTLP_HEADERS: pair 1 is not of the form key=value"},
    {{"OTEL_EXPORTER_OTLP_HEADERS", "a=1,,k=" SECRET "%zz", NULL},
     "OTEL_EXPORTER_OTLP_HEADERS: pair 3 has an invalid percent-encoding"},
    {{"OTEL_EXPORTER_OTLP_HEADERS", "k=" SECRET "%4", NULL},
     "OTEL_EXPORTER_OTLP_HEADERS: pair 1 has an invalid percent-encoding"},
    {{"OTEL_EXPORTER_OTLP_HEADERS", "x-api key=" SECRET, NULL},
     "OTEL_EXPORTER_OTLP_HEADERS: pair 1 has a key that is not a header name"},
    {{"OTEL_EXPORTER_OTLP_HEADERS", "k=" SECRET "%0d%0aX-Injected: 1", NULL},
     "OTEL_EXPORTER_OTLP_HEADERS: pair 1 has a control character in its value"},
    {{"OTEL_EXPORTER_OTLP_HEADERS", "k=" SECRET "%00", NULL},
     "OTEL_EXPORTER_OTLP_HEADERS: pair 1 has a control character in its value"},
    /* checked even when the traces headers win */
    {{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "k=v", "OTEL_EXPORTER_OTLP_HEADERS", SECRET, NULL},
     "OTEL_EXPORTER_OTLP_HEADERS: pair 1 is not of the form key=value"},
    {{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "k=" SECRET ",bad", NULL},
     "OTEL_EXPORTER_OTLP_TRACES_HEADERS: pair 2 is not of the form key=value"},
    {{"OTEL_RESOURCE_ATTRIBUTES", "a=1,b", NULL},
     "OTEL_RESOURCE_ATTRIBUTES: pair 2 is not of the form key=value"},
    {{"OTEL_RESOURCE_ATTRIBUTES", "a=%G1", NULL},
     "OTEL_RESOURCE_ATTRIBUTES: pair 1 has an invalid percent-encoding"},
    {{"OTEL_RESOURCE_ATTRIBUTES", "a=%ff", NULL},
     "OTEL_RESOURCE_ATTRIBUTES: pair 1 is not valid UTF-8 text"},
    {{"OTEL_SERVICE_NAME", "\xff", NULL}, "OTEL_SERVICE_NAME must be valid UTF-8 text"},
};

START_TEST(invalid_values_are_refused_naming_the_variable)
{
    const struct bad_case *c = &bad_cases[_i];
    struct evd_otel_config cfg;
    struct evd_err err = {0};
    ck_assert_int_eq(read_env(c->env, &cfg, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, c->message);
    ck_assert_ptr_null(strstr(err.msg, SECRET));
    /* nothing is left allocated, and freeing again is harmless */
    ck_assert_ptr_null(cfg.endpoint);
    ck_assert_ptr_null(cfg.resource);
    ck_assert_uint_eq(cfg.nheaders, 0);
    evd_otel_config_free(&cfg);
}
END_TEST

START_TEST(a_refusal_after_allocations_frees_them)
{
    /* endpoint, headers and resource attributes are allocated before the service name
     * is refused; the sanitizer build shows a leak if they are not released */
    const char *env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT",
                         "http://c:4318",
                         "OTEL_EXPORTER_OTLP_HEADERS",
                         "a=1,b=2",
                         "OTEL_RESOURCE_ATTRIBUTES",
                         "k=v",
                         "OTEL_SERVICE_NAME",
                         "\xc3",
                         NULL};
    struct evd_otel_config cfg;
    struct evd_err err = {0};
    ck_assert_int_eq(read_env(env, &cfg, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "OTEL_SERVICE_NAME must be valid UTF-8 text");
    ck_assert_ptr_null(cfg.endpoint);
    ck_assert_uint_eq(cfg.nheaders, 0);
    ck_assert_ptr_null(cfg.resource);
}
END_TEST

START_TEST(more_than_thirty_two_headers_are_refused)
{
    char list[1024] = "";
    for (int i = 0; i <= EVD_OTEL_MAX_HEADERS; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%sh%d=" SECRET, i ? "," : "",
                 i);
    const char *env[] = {"OTEL_EXPORTER_OTLP_HEADERS", list, NULL};
    struct evd_otel_config cfg;
    struct evd_err err = {0};
    ck_assert_int_eq(read_env(env, &cfg, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "OTEL_EXPORTER_OTLP_HEADERS: more than 32 headers");
    ck_assert_uint_eq(cfg.nheaders, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("otel_config");
    TCase *tc = tcase_create("defaults");
    tcase_add_test(tc, defaults_match_the_spec);
    suite_add_tcase(s, tc);
    tc = tcase_create("endpoint");
    tcase_add_loop_test(tc, endpoint_precedence_and_path, 0,
                        sizeof(endpoint_cases) / sizeof(endpoint_cases[0]));
    suite_add_tcase(s, tc);
    tc = tcase_create("headers");
    tcase_add_loop_test(tc, headers_are_decoded_and_the_traces_ones_win, 0,
                        sizeof(headers_cases) / sizeof(headers_cases[0]));
    tcase_add_test(tc, thirty_two_headers_are_accepted);
    suite_add_tcase(s, tc);
    tc = tcase_create("protocol");
    tcase_add_loop_test(tc, protocol_values, 0, sizeof(protocol_cases) / sizeof(protocol_cases[0]));
    suite_add_tcase(s, tc);
    tc = tcase_create("numbers");
    tcase_add_test(tc, numbers_are_read_and_the_batch_is_bounded_by_the_queue);
    suite_add_tcase(s, tc);
    tc = tcase_create("capture_content");
    tcase_add_test(tc, capture_content_flag);
    suite_add_tcase(s, tc);
    tc = tcase_create("resource");
    tcase_add_loop_test(tc, resource_attributes, 0,
                        sizeof(resource_cases) / sizeof(resource_cases[0]));
    suite_add_tcase(s, tc);
    tc = tcase_create("refusals");
    tcase_add_loop_test(tc, invalid_values_are_refused_naming_the_variable, 0,
                        sizeof(bad_cases) / sizeof(bad_cases[0]));
    tcase_add_test(tc, a_refusal_after_allocations_frees_them);
    tcase_add_test(tc, more_than_thirty_two_headers_are_refused);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
