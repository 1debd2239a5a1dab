/*
 * Unit tests of the harness's provider registry: the built-in providers read from the
 * environment, model resolution, keys and keyless providers, the provider and model
 * lists (never a secret), the embedded and overriding price tables, the providers file's
 * rate limits and its errors, each naming the field. No network.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "harness/harness.h"
#include "harness/internal.h"
#include "tests/support/harness_env.h"
#include "tests/support/testutil.h"

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/evd_harness_test_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* ---- registry and prices -------------------------------------------------------------- */

START_TEST(prices_data_matches_json)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/harness/prices.json", EVALD_SOURCE_DIR);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    ck_assert_msg(strcmp(buf, EVD_PRICES_JSON) == 0,
                  "harness/prices_data.c differs from harness/prices.json: regenerate it");
}
END_TEST

START_TEST(builtin_providers_from_env)
{
    struct evd_providers *p = hs_env_default_providers();
    struct evd_resolved_model rm;
    struct evd_err err;
    json_t *m = json_pack("{s:s}", "model", "gpt-5");
    ck_assert_int_eq(evd_providers_resolve(p, m, &rm, &err), EVD_OK);
    ck_assert_str_eq(evd_provider_name(rm.provider), "openai");
    ck_assert_int_eq(evd_provider_kind(rm.provider), EVD_KIND_OPENAI_RESPONSES);
    ck_assert_str_eq(evd_provider_base_url(rm.provider), "http://127.0.0.1:9/v1");
    ck_assert_str_eq(evd_provider_api_key(rm.provider), "sk-test-openai-0123456789");
    json_decref(m);
    m = json_pack("{s:s}", "model", "claude-sonnet-4-5");
    ck_assert_int_eq(evd_providers_resolve(p, m, &rm, &err), EVD_OK);
    ck_assert_str_eq(evd_provider_name(rm.provider), "anthropic");
    ck_assert_str_eq(evd_provider_base_url(rm.provider), "https://api.anthropic.com");
    ck_assert_int_eq(evd_provider_kind(rm.provider), EVD_KIND_ANTHROPIC_MESSAGES);
    json_decref(m);
    evd_providers_free(p);
}
END_TEST

struct resolve_case {
    const char *provider;
    const char *model;
    const char *want_provider; /* NULL: an error containing want_error */
    const char *want_model;
    const char *want_error;
};

static const struct resolve_case resolve_cases[] = {
    {NULL, "gpt-4.1", "openai", "gpt-4.1", NULL},
    {NULL, "o3", "openai", "o3", NULL},
    {NULL, "o4-mini", "openai", "o4-mini", NULL},
    {NULL, "codex-mini-latest", "openai", "codex-mini-latest", NULL},
    {NULL, "claude-haiku-4-5", "anthropic", "claude-haiku-4-5", NULL},
    {NULL, "anthropic/claude-opus-4-5", "anthropic", "claude-opus-4-5", NULL},
    {NULL, "openai/gpt-5", "openai", "gpt-5", NULL},
    {"openai-codex", "codex/gpt-5.6-luna", "openai-codex", "gpt-5.6-luna", NULL},
    {"openai", "gpt-5", "openai", "gpt-5", NULL},
    {"local", "qwen/qwen3-8b", "local", "qwen/qwen3-8b", NULL},
    {"local", "anthropic/claude-x", "local", "anthropic/claude-x", NULL},
    {NULL, "llama3.1:8b", NULL, NULL, "model.provider is required for model \"llama3.1:8b\""},
    {"nope", "gpt-5", NULL, NULL, "model.provider \"nope\" is not a configured provider"},
    {NULL, "", NULL, NULL, "model.model cannot be empty"},
};

START_TEST(resolve_table)
{
    const struct resolve_case *c = &resolve_cases[_i];
    struct evd_providers *p = NULL;
    struct evd_err err;
    hs_env_clear();
    hs_env_set("OPENAI_API_KEY", "k1");
    hs_env_set("ANTHROPIC_API_KEY", "k2");
    char *file = write_temp("{\"providers\":[{\"name\":\"local\",\"kind\":\"openai-chat\","
                            "\"base_url\":\"http://127.0.0.1:1/v1\"}]}");
    hs_env_set("EVALD_PROVIDERS_FILE", file);
    ck_assert_int_eq(evd_providers_load(hs_env_get, NULL, &p, &err), EVD_OK);
    json_t *m = json_pack("{s:s,s:s?}", "model", c->model, "provider", c->provider);
    struct evd_resolved_model rm;
    enum evd_code rc = evd_providers_resolve(p, m, &rm, &err);
    if (c->want_provider != NULL) {
        ck_assert_msg(rc == EVD_OK, "%s: %s", c->model, err.msg);
        ck_assert_str_eq(evd_provider_name(rm.provider), c->want_provider);
        ck_assert_str_eq(rm.model, c->want_model);
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_msg(strstr(err.msg, c->want_error) != NULL, "%s", err.msg);
    }
    json_decref(m);
    evd_providers_free(p);
    unlink(file);
    free(file);
}
END_TEST

START_TEST(missing_key_is_rejected_by_name)
{
    struct evd_providers *p = NULL;
    struct evd_err err;
    hs_env_clear();
    ck_assert_int_eq(evd_providers_load(hs_env_get, NULL, &p, &err), EVD_OK);
    json_t *m = json_pack("{s:s}", "model", "claude-opus-4-5");
    struct evd_resolved_model rm;
    ck_assert_int_eq(evd_providers_resolve(p, m, &rm, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "model.provider \"anthropic\" has no API key: set "
                              "ANTHROPIC_API_KEY in the environment");
    json_t *list = evd_providers_list_models(p);
    ck_assert(json_array_size(list) > 5);
    ck_assert(json_is_false(json_object_get(json_array_get(list, 0), "available")));
    json_decref(list);
    json_decref(m);
    evd_providers_free(p);
}
END_TEST

/* GET /v1/providers lists each provider's configuration without a secret: a key, the name
 * of its variable, and user info in the base URL never show; the host and the configured
 * limits do. */
START_TEST(provider_list_shows_no_secret)
{
    struct evd_providers *p = NULL;
    struct evd_err err;
    hs_env_clear();
    hs_env_set("OPENAI_API_KEY", "sk-list-secret-1234");
    char *file = write_temp(
        "{\"providers\":[{\"name\":\"gw\",\"kind\":\"openai-chat\",\"base_url\":"
        "\"https://user:pw-secret@llm.example.com:8443/v1?key=q-secret\",\"api_key_env\":"
        "\"GW_KEY\",\"rpm\":600,\"models\":[{\"id\":\"big\",\"tpm\":2000}]},"
        "{\"name\":\"bare\",\"kind\":\"openai-chat\",\"base_url\":\"http://10.0.0.1\"}]}");
    hs_env_set("EVALD_PROVIDERS_FILE", file);
    hs_env_set("GW_KEY", "gw-key-secret");
    ck_assert_int_eq(evd_providers_load(hs_env_get, NULL, &p, &err), EVD_OK);
    json_t *list = evd_providers_list(p);
    ck_assert_ptr_nonnull(list);
    char *text = json_dumps(list, JSON_COMPACT);
    ck_assert_ptr_null(strstr(text, "secret"));
    ck_assert_ptr_null(strstr(text, "GW_KEY"));
    ck_assert_ptr_null(strstr(text, "OPENAI_API_KEY"));
    free(text);
    json_t *gw = NULL, *bare = NULL, *openai = NULL;
    size_t i;
    json_t *e;
    const char *prev = "";
    json_array_foreach(list, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        ck_assert_msg(strcmp(prev, name) < 0, "%s after %s", name, prev); /* by name */
        prev = name;
        if (strcmp(name, "gw") == 0)
            gw = e;
        else if (strcmp(name, "bare") == 0)
            bare = e;
        else if (strcmp(name, "openai") == 0)
            openai = e;
    }
    ck_assert(gw != NULL && bare != NULL && openai != NULL);
    ck_assert_str_eq(json_string_value(json_object_get(gw, "host")), "llm.example.com:8443");
    ck_assert_str_eq(json_string_value(json_object_get(bare, "host")), "10.0.0.1");
    ck_assert_str_eq(json_string_value(json_object_get(gw, "kind")), "openai-chat");
    ck_assert(json_is_true(json_object_get(gw, "available")));
    ck_assert(json_number_value(json_object_get(gw, "rpm")) == 600);
    ck_assert(json_is_null(json_object_get(gw, "tpm")));
    json_t *ml = json_array_get(json_object_get(gw, "model_limits"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(ml, "model")), "big");
    ck_assert(json_is_null(json_object_get(ml, "rpm")));
    ck_assert(json_number_value(json_object_get(ml, "tpm")) == 2000);
    ck_assert(json_is_null(json_object_get(bare, "rpm")));
    ck_assert_int_eq(json_array_size(json_object_get(bare, "model_limits")), 0);
    json_decref(list);
    evd_providers_free(p);
    unlink(file);
    free(file);
}
END_TEST

/* A providers-file entry without api_key_env takes no key, whatever its wire kind; one
 * that names an unset variable, and the built-in providers without their key, do not. */
START_TEST(keyless_provider_of_every_kind)
{
    struct evd_providers *p = NULL;
    struct evd_err err;
    hs_env_clear();
    char *file = write_temp(
        "{\"providers\":["
        "{\"name\":\"resp\",\"kind\":\"openai-responses\",\"base_url\":\"http://127.0.0.1:1/v1\"},"
        "{\"name\":\"msgs\",\"kind\":\"anthropic-messages\",\"base_url\":\"http://127.0.0.1:1\"},"
        "{\"name\":\"chat\",\"kind\":\"openai-chat\",\"base_url\":\"http://127.0.0.1:1/v1\"},"
        "{\"name\":\"keyed\",\"kind\":\"openai-responses\",\"base_url\":\"http://127.0.0.1:1/v1\","
        "\"api_key_env\":\"KEYED_KEY\"}]}");
    hs_env_set("EVALD_PROVIDERS_FILE", file);
    ck_assert_int_eq(evd_providers_load(hs_env_get, NULL, &p, &err), EVD_OK);
    static const char *const keyless[] = {"resp", "msgs", "chat"};
    for (size_t i = 0; i < 3; i++) {
        json_t *m = json_pack("{s:s,s:s}", "model", "m", "provider", keyless[i]);
        struct evd_resolved_model rm;
        ck_assert_msg(evd_providers_resolve(p, m, &rm, &err) == EVD_OK, "%s: %s", keyless[i],
                      err.msg);
        ck_assert(evd_provider_available(rm.provider));
        ck_assert_ptr_null(evd_provider_api_key(rm.provider));
        json_decref(m);
    }
    static const struct {
        const char *provider, *msg;
    } refused[] = {
        {"keyed", "model.provider \"keyed\" has no API key: set KEYED_KEY in the environment"},
        {"openai", "model.provider \"openai\" has no API key: set OPENAI_API_KEY in the "
                   "environment"},
        {"anthropic", "model.provider \"anthropic\" has no API key: set ANTHROPIC_API_KEY in "
                      "the environment"},
    };
    for (size_t i = 0; i < 3; i++) {
        json_t *m = json_pack("{s:s,s:s}", "model", "m", "provider", refused[i].provider);
        struct evd_resolved_model rm;
        ck_assert_int_eq(evd_providers_resolve(p, m, &rm, &err), EVD_EINVAL);
        ck_assert_str_eq(err.msg, refused[i].msg);
        json_decref(m);
    }
    evd_providers_free(p);
    unlink(file);
    free(file);
}
END_TEST

START_TEST(prices_lookup_and_overrides)
{
    struct evd_providers *p = NULL;
    struct evd_err err;
    struct evd_price pr;
    hs_env_clear();
    hs_env_set("OPENAI_API_KEY", "k");
    char *prices = write_temp("{\"prices\":[{\"providers\":[\"openai\"],\"model\":\"gpt-5\","
                              "\"input_usd_per_mtok\":2,\"output_usd_per_mtok\":20}]}");
    char *provs =
        write_temp("{\"providers\":[{\"name\":\"vllm\",\"kind\":\"openai-chat\",\"base_url\":"
                   "\"http://127.0.0.1:8000/v1\",\"api_key_env\":\"VLLM_KEY\",\"models\":[{\"id\":"
                   "\"qwen3\",\"input_usd_per_mtok\":0.1,\"cached_input_usd_per_mtok\":0.01,"
                   "\"output_usd_per_mtok\":0.2},{\"id\":\"free\"}]}]}");
    hs_env_set("EVALD_PRICES_FILE", prices);
    hs_env_set("EVALD_PROVIDERS_FILE", provs);
    hs_env_set("VLLM_KEY", "vk");
    ck_assert_int_eq(evd_providers_load(hs_env_get, NULL, &p, &err), EVD_OK);
    json_t *m = json_pack("{s:s}", "model", "gpt-5");
    struct evd_resolved_model rm;
    ck_assert_int_eq(evd_providers_resolve(p, m, &rm, &err), EVD_OK);
    /* EVALD_PRICES_FILE overrides the embedded price; cached defaults to the input price. */
    ck_assert(evd_providers_price(p, rm.provider, "gpt-5", &pr));
    ck_assert_double_eq(pr.input_usd_per_mtok, 2);
    ck_assert_double_eq(pr.cached_input_usd_per_mtok, 2);
    ck_assert_double_eq(pr.output_usd_per_mtok, 20);
    /* Embedded price, with a date suffix; not a prefix of another model. */
    ck_assert(evd_providers_price(p, rm.provider, "gpt-4.1-2025-04-14", &pr));
    ck_assert_double_eq(pr.output_usd_per_mtok, 8);
    ck_assert(!evd_providers_price(p, rm.provider, "gpt-4.1-turbo", &pr));
    json_decref(m);
    m = json_pack("{s:s,s:s}", "model", "qwen3", "provider", "vllm");
    ck_assert_int_eq(evd_providers_resolve(p, m, &rm, &err), EVD_OK);
    ck_assert_str_eq(evd_provider_api_key(rm.provider), "vk");
    ck_assert(evd_providers_price(p, rm.provider, "qwen3", &pr));
    ck_assert_double_eq(pr.cached_input_usd_per_mtok, 0.01);
    ck_assert_double_eq(pr.cache_write_usd_per_mtok, 0.1);
    ck_assert(!evd_providers_price(p, rm.provider, "free", &pr));
    json_t *list = evd_providers_list_models(p);
    size_t i;
    json_t *e;
    int seen = 0;
    json_array_foreach(list, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "provider")), "vllm") != 0)
            continue;
        seen++;
        ck_assert_str_eq(json_string_value(json_object_get(e, "kind")), "openai-chat");
        ck_assert(json_is_true(json_object_get(e, "available")));
        if (strcmp(json_string_value(json_object_get(e, "model")), "free") == 0)
            ck_assert(json_is_null(json_object_get(e, "pricing")));
    }
    ck_assert_int_eq(seen, 2);
    char *dump = json_dumps(list, 0);
    ck_assert_ptr_null(strstr(dump, "vk"));
    free(dump);
    json_decref(list);
    json_decref(m);
    evd_providers_free(p);
    unlink(prices);
    unlink(provs);
    free(prices);
    free(provs);
}
END_TEST

struct bad_file {
    const char *text;
    const char *want;
};

static const struct bad_file bad_files[] = {
    {"[1]", "must be a JSON object"},
    {"{\"providers\":{}}", "providers must be an array"},
    {"{\"providers\":[{\"name\":\"x y\",\"kind\":\"openai-chat\",\"base_url\":\"http://a\"}]}",
     "providers[0].name"},
    {"{\"providers\":[{\"name\":\"x\",\"kind\":\"grpc\",\"base_url\":\"http://a\"}]}",
     "providers[0].kind must be openai-responses, anthropic-messages or openai-chat"},
    {"{\"providers\":[{\"name\":\"x\",\"kind\":\"openai-chat\",\"base_url\":\"ftp://a\"}]}",
     "providers[0].base_url must be an http(s) URL"},
    {"{\"providers\":[{\"name\":\"x\",\"kind\":\"openai-chat\",\"base_url\":\"http://a\","
     "\"models\":[{\"id\":\"m\",\"input_usd_per_mtok\":-1,\"output_usd_per_mtok\":1}]}]}",
     "providers[0].models[0].input_usd_per_mtok must be a non-negative number"},
    {"{\"providers\":[{\"name\":\"x\",\"kind\":\"openai-chat\",\"base_url\":\"http://a\","
     "\"models\":[{\"id\":\"m\",\"input_usd_per_mtok\":1}]}]}",
     "providers[0].models[0].output_usd_per_mtok is required"},
    {"{\"providers\":[{\"name\":\"x\",\"kind\":\"openai-chat\",\"base_url\":\"http://a\","
     "\"rpm\":0}]}",
     "providers[0].rpm must be a positive number (per minute, at most 1e9)"},
    {"{\"providers\":[{\"name\":\"x\",\"kind\":\"openai-chat\",\"base_url\":\"http://a\","
     "\"models\":[{\"id\":\"m\",\"tpm\":\"many\"}]}]}",
     "providers[0].models[0].tpm must be a positive number (per minute, at most 1e9)"},
};

/* rpm and tpm of the providers file: a model's own win over its provider's. */
START_TEST(providers_file_rate_limits)
{
    struct evd_providers *p = NULL;
    struct evd_err err;
    hs_env_clear();
    char *file = write_temp(
        "{\"providers\":[{\"name\":\"gw\",\"kind\":\"openai-chat\",\"base_url\":\"http://a\","
        "\"rpm\":600,\"tpm\":90000,\"models\":[{\"id\":\"big\",\"rpm\":60},{\"id\":\"plain\"}]},"
        "{\"name\":\"free\",\"kind\":\"openai-chat\",\"base_url\":\"http://b\"}]}");
    hs_env_set("EVALD_PROVIDERS_FILE", file);
    ck_assert_int_eq(evd_providers_load(hs_env_get, NULL, &p, &err), EVD_OK);
    json_t *m = json_pack("{s:s,s:s}", "model", "big", "provider", "gw");
    struct evd_resolved_model rm;
    ck_assert_int_eq(evd_providers_resolve(p, m, &rm, &err), EVD_OK);
    double rpm = -1, tpm = -1;
    evd_provider_rate(rm.provider, "big", &rpm, &tpm);
    ck_assert(rpm == 60 && tpm == 90000);
    evd_provider_rate(rm.provider, "plain", &rpm, &tpm);
    ck_assert(rpm == 600 && tpm == 90000);
    evd_provider_rate(rm.provider, "unlisted", &rpm, &tpm);
    ck_assert(rpm == 600 && tpm == 90000);
    json_decref(m);
    m = json_pack("{s:s,s:s}", "model", "any", "provider", "free");
    ck_assert_int_eq(evd_providers_resolve(p, m, &rm, &err), EVD_OK);
    evd_provider_rate(rm.provider, "any", &rpm, &tpm);
    ck_assert(rpm == 0 && tpm == 0);
    json_decref(m);
    evd_providers_free(p);
    unlink(file);
    free(file);
}
END_TEST

START_TEST(bad_providers_file_names_field)
{
    struct evd_providers *p = NULL;
    struct evd_err err;
    hs_env_clear();
    char *file = write_temp(bad_files[_i].text);
    hs_env_set("EVALD_PROVIDERS_FILE", file);
    ck_assert_int_eq(evd_providers_load(hs_env_get, NULL, &p, &err), EVD_EINVAL);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(err.msg, bad_files[_i].want) != NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "EVALD_PROVIDERS_FILE") != NULL, "%s", err.msg);
    unlink(file);
    free(file);
}
END_TEST

static Suite *harness_providers_suite(void)
{
    Suite *s = suite_create("harness_providers");
    TCase *tc = tcase_create("providers");
    tcase_add_test(tc, prices_data_matches_json);
    tcase_add_test(tc, builtin_providers_from_env);
    tcase_add_loop_test(tc, resolve_table, 0, sizeof(resolve_cases) / sizeof(resolve_cases[0]));
    tcase_add_test(tc, missing_key_is_rejected_by_name);
    tcase_add_test(tc, keyless_provider_of_every_kind);
    tcase_add_test(tc, provider_list_shows_no_secret);
    tcase_add_test(tc, prices_lookup_and_overrides);
    tcase_add_loop_test(tc, bad_providers_file_names_field, 0,
                        sizeof(bad_files) / sizeof(bad_files[0]));
    tcase_add_test(tc, providers_file_rate_limits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return evd_test_run_suite(harness_providers_suite());
}
