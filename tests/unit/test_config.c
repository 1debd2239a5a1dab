/* Unit tests for server/config.c: defaults, precedence, validation messages. */
#include <check.h>
#include <string.h>

#include "server/config.h"
#include "tests/support/testutil.h"

/* A fake environment: pairs of name, value. */
static const char *const *fake_env;

static const char *fake_getenv(const char *name)
{
    for (size_t i = 0; fake_env && fake_env[i]; i += 2)
        if (strcmp(fake_env[i], name) == 0)
            return fake_env[i + 1];
    return NULL;
}

static enum evd_code load(const char *const *env, int argc, char **argv, struct evd_config *cfg,
                          struct evd_err *err)
{
    fake_env = env;
    return evd_config_load(cfg, argc, argv, fake_getenv, err);
}

START_TEST(defaults_match_the_spec)
{
    struct evd_config cfg;
    struct evd_err err = {0};
    char *argv[] = {"evald", NULL};
    ck_assert_int_eq(load(NULL, 1, argv, &cfg, &err), EVD_OK);
    ck_assert_str_eq(cfg.listen, "127.0.0.1:8080");
    ck_assert_str_eq(cfg.listen_host, "127.0.0.1");
    ck_assert_uint_eq(cfg.listen_port, 8080);
    ck_assert(cfg.listen_loopback);
    /* Workers: EVALD_WORKERS unset, so EVALD_MAX_CONCURRENCY's 256, on 16 connections;
     * the process opens at most 32 with its pool, webhook and service threads. */
    ck_assert_int_eq(cfg.workers, 0);
    ck_assert_int_eq(cfg.max_concurrency, 256);
    ck_assert_int_eq(evd_config_workers(&cfg), 256);
    ck_assert_int_eq(cfg.worker_connections, 16);
    ck_assert_int_eq(evd_config_connections(&cfg, false), 32);
    ck_assert_int_eq(cfg.sweep_interval_ms, 15000);
    ck_assert_int_eq(cfg.max_runs, 100);
    ck_assert_ptr_null(cfg.api_token);
    ck_assert_ptr_null(cfg.database_url);
    ck_assert_ptr_null(cfg.iii_url);
    ck_assert_str_eq(cfg.openai_base_url, "https://api.openai.com/v1");
    ck_assert_str_eq(cfg.anthropic_base_url, "https://api.anthropic.com");
    ck_assert_ptr_null(cfg.secret_key);
    ck_assert_ptr_null(cfg.webhook_allow_hosts);
    ck_assert_int_eq(cfg.webhook_workers, 2);
    ck_assert_int_eq(cfg.webhook_backoff_ms, 5000);
    ck_assert_int_eq(cfg.http_threads, 8);
    ck_assert_int_eq(cfg.http_handlers, 16);
    ck_assert_int_eq(cfg.http_timeout_seconds, 10);
    ck_assert_int_eq(cfg.http_max_connections, 16000);
    ck_assert_int_eq(cfg.http_max_connections_per_ip, 256);
    evd_config_free(&cfg);
}
END_TEST

/* The connections a process opens stay within 32 at the defaults whatever
 * EVALD_MAX_CONCURRENCY is, and follow the workers when there are fewer of them. */
START_TEST(default_connections_bounded_for_any_concurrency)
{
    static const char *const counts[] = {"1", "4", "16", "256", "1024", "4096"};
    static const long expect[] = {1 + 16, 4 + 16, 32, 32, 32, 32};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        const char *env[] = {"EVALD_MAX_CONCURRENCY", counts[i], NULL};
        char *argv[] = {"evald", NULL};
        struct evd_config cfg;
        struct evd_err err = {0};
        ck_assert_int_eq(load(env, 1, argv, &cfg, &err), EVD_OK);
        ck_assert_int_eq(evd_config_connections(&cfg, false), expect[i]);
        ck_assert_int_eq(evd_config_connections(&cfg, true), expect[i] + 1);
        evd_config_free(&cfg);
    }
}
END_TEST

START_TEST(secret_key_accepted_in_either_case)
{
    struct evd_config cfg;
    struct evd_err err = {0};
    const char *env[] = {"EVALD_SECRET_KEY",
                         "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
                         "EVALD_WEBHOOK_WORKERS", "0", NULL};
    char *argv[] = {"evald", NULL};
    ck_assert_int_eq(load(env, 1, argv, &cfg, &err), EVD_OK);
    ck_assert_uint_eq(strlen(cfg.secret_key), 64);
    ck_assert_int_eq(cfg.webhook_workers, 0);
    evd_config_free(&cfg);
    ck_assert_ptr_null(cfg.secret_key);
}
END_TEST

START_TEST(flags_override_environment)
{
    struct evd_config cfg;
    struct evd_err err = {0};
    const char *env[] = {"EVALD_WORKERS", "4", "EVALD_LISTEN", "127.0.0.2:9000", NULL};
    char *argv[] = {"evald", "--workers", "2", "--max-runs=7", NULL};
    ck_assert_int_eq(load(env, 4, argv, &cfg, &err), EVD_OK);
    ck_assert_int_eq(cfg.workers, 2);
    ck_assert_int_eq(evd_config_workers(&cfg), 2); /* the older name wins when given */
    ck_assert_int_eq(cfg.max_runs, 7);
    ck_assert_uint_eq(cfg.listen_port, 9000);
    evd_config_free(&cfg);
}
END_TEST

struct bad_case {
    const char *env[5];
    const char *message;
};

static const struct bad_case bad_cases[] = {
    {{"EVALD_WORKERS", "0", NULL}, "EVALD_WORKERS must be an integer between 1 and 4096"},
    {{"EVALD_WORKERS", "8x", NULL}, "EVALD_WORKERS must be an integer between 1 and 4096"},
    {{"EVALD_MAX_RUNS", "-1", NULL}, "EVALD_MAX_RUNS must be an integer between 1 and 10000"},
    {{"EVALD_SWEEP_INTERVAL_MS", "10", NULL},
     "EVALD_SWEEP_INTERVAL_MS must be an integer between 50 and 3600000"},
    {{"EVALD_LISTEN", "nowhere", NULL},
     "EVALD_LISTEN must be host:port (e.g. 127.0.0.1:8080 or [::1]:8080)"},
    {{"EVALD_LISTEN", "127.0.0.1:70000", NULL},
     "EVALD_LISTEN must be host:port (e.g. 127.0.0.1:8080 or [::1]:8080)"},
    {{"EVALD_LISTEN", "0.0.0.0:8080", NULL},
     "EVALD_LISTEN: refusing to listen on non-loopback address 0.0.0.0 without EVALD_API_TOKEN"},
    {{"EVALD_LOG_LEVEL", "loud", NULL}, "EVALD_LOG_LEVEL must be debug, info, warn or error"},
    {{"EVALD_API_TOKEN", "short", NULL}, "EVALD_API_TOKEN must be at least 16 characters"},
    {{"EVALD_SECRET_KEY", "0123456789abcdef", NULL},
     "EVALD_SECRET_KEY must be 64 hexadecimal characters (32 bytes; e.g. openssl rand -hex 32)"},
    {{"EVALD_SECRET_KEY", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg", NULL},
     "EVALD_SECRET_KEY must be 64 hexadecimal characters (32 bytes; e.g. openssl rand -hex 32)"},
    {{"EVALD_WEBHOOK_WORKERS", "-1", NULL},
     "EVALD_WEBHOOK_WORKERS must be an integer between 0 and 64"},
    {{"EVALD_WEBHOOK_BACKOFF_MS", "5", NULL},
     "EVALD_WEBHOOK_BACKOFF_MS must be an integer between 10 and 3600000"},
    {{"EVALD_HTTP_THREADS", "0", NULL}, "EVALD_HTTP_THREADS must be an integer between 1 and 256"},
    {{"EVALD_HTTP_HANDLERS", "1025", NULL},
     "EVALD_HTTP_HANDLERS must be an integer between 1 and 1024"},
    {{"EVALD_HTTP_TIMEOUT_SECONDS", "0", NULL},
     "EVALD_HTTP_TIMEOUT_SECONDS must be an integer between 1 and 3600"},
    {{"EVALD_HTTP_MAX_CONNECTIONS", "10", NULL},
     "EVALD_HTTP_MAX_CONNECTIONS must be an integer between 16 and 1000000"},
    {{"EVALD_HTTP_MAX_CONNECTIONS_PER_IP", "0", NULL},
     "EVALD_HTTP_MAX_CONNECTIONS_PER_IP must be an integer between 1 and 1000000"},
};

START_TEST(invalid_settings_are_named)
{
    const struct bad_case *c = &bad_cases[_i];
    struct evd_config cfg;
    struct evd_err err = {0};
    char *argv[] = {"evald", NULL};
    ck_assert_int_eq(load(c->env, 1, argv, &cfg, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, c->message);
}
END_TEST

START_TEST(non_loopback_allowed_with_token)
{
    struct evd_config cfg;
    struct evd_err err = {0};
    const char *env[] = {"EVALD_LISTEN", "[::]:8080", "EVALD_API_TOKEN", "0123456789abcdef0", NULL};
    char *argv[] = {"evald", NULL};
    ck_assert_int_eq(load(env, 1, argv, &cfg, &err), EVD_OK);
    ck_assert_str_eq(cfg.listen_host, "::");
    ck_assert(!cfg.listen_loopback);
    evd_config_free(&cfg);
}
END_TEST

START_TEST(unknown_flags_and_missing_values)
{
    struct evd_config cfg;
    struct evd_err err = {0};
    char *argv1[] = {"evald", "--no-such", NULL};
    ck_assert_int_eq(load(NULL, 2, argv1, &cfg, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "unknown option '--no-such' (see --help)");
    char *argv2[] = {"evald", "--workers", NULL};
    ck_assert_int_eq(load(NULL, 2, argv2, &cfg, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "option --workers needs a value");
    char *argv3[] = {"evald", "--workers", "5000", NULL};
    ck_assert_int_eq(load(NULL, 3, argv3, &cfg, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "--workers must be an integer between 1 and 4096");
}
END_TEST

START_TEST(loopback_detection)
{
    ck_assert(evd_config_host_is_loopback("127.0.0.1"));
    ck_assert(evd_config_host_is_loopback("127.8.9.10"));
    ck_assert(evd_config_host_is_loopback("::1"));
    ck_assert(evd_config_host_is_loopback("localhost"));
    ck_assert(!evd_config_host_is_loopback("0.0.0.0"));
    ck_assert(!evd_config_host_is_loopback("10.0.0.1"));
    ck_assert(!evd_config_host_is_loopback("::"));
}
END_TEST

START_TEST(help_and_version_skip_validation)
{
    /* The container image sets EVALD_LISTEN=0.0.0.0:8080 without a token; --help and
     * --version must still answer, as they must with any other invalid setting. */
    const char *env[] = {"EVALD_LISTEN", "0.0.0.0:8080", "EVALD_WORKERS", "many",
                         "EVALD_API_TOKEN", "short", NULL};
    static const struct {
        const char *arg;
        bool help, version;
    } cases[] = {{"--help", true, false}, {"-h", true, false}, {"--version", false, true}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct evd_config cfg;
        struct evd_err err = {0};
        char *argv[] = {"evald", "--workers=none", (char *)cases[i].arg, NULL};
        ck_assert_msg(load(env, 3, argv, &cfg, &err) == EVD_OK, "%s: %s", cases[i].arg, err.msg);
        ck_assert_int_eq(cfg.help, cases[i].help);
        ck_assert_int_eq(cfg.version, cases[i].version);
        evd_config_free(&cfg);
    }
    struct evd_config cfg;
    struct evd_err err = {0};
    char *argv[] = {"evald", NULL};
    ck_assert_int_eq(load(env, 1, argv, &cfg, &err), EVD_EINVAL);
}
END_TEST

START_TEST(usage_lists_every_variable)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    evd_config_usage(f);
    fclose(f);
    const char *names[] = {"EVALD_DATABASE_URL", "EVALD_LISTEN", "EVALD_WORKERS",
                           "EVALD_WORKER_CONNECTIONS",
                           "EVALD_SWEEP_INTERVAL_MS", "EVALD_API_TOKEN", "EVALD_MAX_RUNS",
                           "EVALD_PROVIDERS_FILE", "EVALD_PRICES_FILE", "OPENAI_API_KEY",
                           "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "III_URL",
                           "EVALD_SECRET_KEY", "EVALD_WEBHOOK_ALLOW_HOSTS",
                           "EVALD_WEBHOOK_WORKERS", "EVALD_WEBHOOK_BACKOFF_MS",
                           "EVALD_HTTP_THREADS", "EVALD_HTTP_HANDLERS",
                           "EVALD_HTTP_TIMEOUT_SECONDS",
                           "EVALD_HTTP_MAX_CONNECTIONS", "EVALD_HTTP_MAX_CONNECTIONS_PER_IP"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        ck_assert_msg(strstr(text, names[i]) != NULL, "--help lacks %s", names[i]);
    ck_assert(strstr(text, "default: 127.0.0.1:8080") != NULL);
    free(text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, defaults_match_the_spec);
    tcase_add_test(tc, default_connections_bounded_for_any_concurrency);
    tcase_add_test(tc, flags_override_environment);
    tcase_add_test(tc, secret_key_accepted_in_either_case);
    tcase_add_loop_test(tc, invalid_settings_are_named, 0,
                        sizeof(bad_cases) / sizeof(bad_cases[0]));
    tcase_add_test(tc, non_loopback_allowed_with_token);
    tcase_add_test(tc, unknown_flags_and_missing_values);
    tcase_add_test(tc, loopback_detection);
    tcase_add_test(tc, help_and_version_skip_validation);
    tcase_add_test(tc, usage_lists_every_variable);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
