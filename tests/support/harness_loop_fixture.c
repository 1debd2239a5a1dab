/*
 * See harness_loop_fixture.h. The prices and providers files are written to /tmp at setup
 * and removed at teardown; the fake environment hands evd_providers_load the right or the
 * wrong key according to cur_key.
 */
#include "tests/support/harness_loop_fixture.h"

#include <check.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/harness_support.h"

#define KEY "sk-evald-test-SECRETVALUE-0123456789"
#define WRONG_KEY "sk-evald-wrong-OTHERSECRET-9876543210"

struct evd_t_proc hl_stub;
bool hl_ready;
struct evd_providers *hl_providers;       /* right key */
struct evd_providers *hl_wrong_providers; /* wrong key */
static char prices_path[64], provs_path[64];
static char openai_base[192];

const struct hl_kind_case hl_kinds[NKINDS] = {
    {"responses", "openai", "gpt-test"},
    {"messages", "anthropic", "claude-test"},
    {"chat", "local", "local-test"},
};

static const char *cur_key;

static const char *env_get(void *ctx, const char *name)
{
    (void)ctx;
    if (strcmp(name, "OPENAI_API_KEY") == 0 || strcmp(name, "ANTHROPIC_API_KEY") == 0 ||
        strcmp(name, "LOCAL_KEY") == 0)
        return cur_key;
    if (strcmp(name, "OPENAI_BASE_URL") == 0)
        return openai_base;
    if (strcmp(name, "ANTHROPIC_BASE_URL") == 0)
        return hl_stub.base;
    if (strcmp(name, "EVALD_PRICES_FILE") == 0)
        return prices_path;
    if (strcmp(name, "EVALD_PROVIDERS_FILE") == 0)
        return provs_path;
    return NULL;
}

static bool write_file(char *path, const char *text)
{
    strcpy(path, "/tmp/evd_hx_it_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return false;
    bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    close(fd);
    return ok;
}

void hl_setup_all(void)
{
    struct evd_err err;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    json_object_seed(0);
    if (evd_t_stub_start(&hl_stub, NULL, KEY) != 0)
        return;
    if (!hs_tools_start()) {
        evd_t_stop(&hl_stub, SIGTERM, 5000);
        return;
    }
    snprintf(openai_base, sizeof(openai_base), "%s/v1", hl_stub.base);
    bool ok = write_file(
        prices_path,
        "{\"prices\":[{\"providers\":[\"openai\",\"anthropic\",\"local\"],"
        "\"model\":\"gpt-test\",\"input_usd_per_mtok\":1,\"cached_input_usd_per_mtok\":0.5,"
        "\"cache_write_usd_per_mtok\":2,\"output_usd_per_mtok\":10},"
        "{\"providers\":[\"anthropic\"],\"model\":\"claude-test\",\"input_usd_per_mtok\":1,"
        "\"cached_input_usd_per_mtok\":0.5,\"cache_write_usd_per_mtok\":2,"
        "\"output_usd_per_mtok\":10}]}");
    char provs[512];
    snprintf(provs, sizeof(provs),
             "{\"providers\":[{\"name\":\"local\",\"kind\":\"openai-chat\",\"base_url\":\"%s/v1\","
             "\"api_key_env\":\"LOCAL_KEY\",\"models\":[{\"id\":\"local-test\","
             "\"input_usd_per_mtok\":1,\"cached_input_usd_per_mtok\":0.5,"
             "\"cache_write_usd_per_mtok\":2,\"output_usd_per_mtok\":10}]}]}",
             hl_stub.base);
    ok = ok && write_file(provs_path, provs);
    if (!ok)
        return;
    cur_key = KEY;
    if (evd_providers_load(env_get, NULL, &hl_providers, &err) != EVD_OK) {
        fprintf(stderr, "providers: %s\n", err.msg);
        return;
    }
    cur_key = WRONG_KEY;
    if (evd_providers_load(env_get, NULL, &hl_wrong_providers, &err) != EVD_OK) {
        fprintf(stderr, "providers: %s\n", err.msg);
        return;
    }
    hl_ready = true;
}

void hl_teardown_all(void)
{
    evd_providers_free(hl_providers);
    evd_providers_free(hl_wrong_providers);
    if (hl_ready) {
        hs_tools_stop();
        evd_t_stop(&hl_stub, SIGTERM, 5000);
        unlink(prices_path);
        unlink(provs_path);
    }
    curl_global_cleanup();
}

/* ---- per-test helpers ------------------------------------------------------------------ */

void hl_script(const char *fmt, ...)
{
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    json_error_t je;
    json_t *s = json_loads(buf, 0, &je);
    ck_assert_msg(s != NULL, "bad test script: %s: %s", je.text, buf);
    ck_assert_int_eq(evd_t_stub_script(&hl_stub, buf), 200);
    json_decref(s);
    ck_assert_int_eq(evd_t_stub_reset(&hl_stub), 200);
    hs_tools_reset();
}

static json_t *tools_json(void)
{
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "[{\"id\":\"math::add\",\"description\":\"Adds two integers\",\"url\":\"%s/add\","
             "\"timeout_ms\":5000,\"request_schema\":{\"type\":\"object\",\"properties\":"
             "{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"required\":"
             "[\"a\",\"b\"]}},"
             "{\"id\":\"net::fetch\",\"description\":\"Echoes\",\"url\":\"%s/echo\","
             "\"timeout_ms\":5000,\"request_schema\":{\"type\":\"object\"}},"
             "{\"id\":\"slow\",\"description\":\"Sleeps\",\"url\":\"%s/slow\","
             "\"timeout_ms\":500,\"request_schema\":{\"type\":\"object\"}}]",
             hs_tools_base(), hs_tools_base(), hs_tools_base());
    return json_loads(buf, 0, NULL);
}

static json_t *maybe(const char *text)
{
    if (text == NULL)
        return NULL;
    json_t *v = json_loads(text, 0, NULL);
    ck_assert_msg(v != NULL, "bad test JSON: %s", text);
    return v;
}

void hl_run(const struct hl_run_args *a, struct evd_harness_outcome *out, struct evd_cancel *cancel)
{
    json_t *model = json_pack("{s:s,s:s}", "model", a->k->model, "provider", a->k->provider);
    json_t *extra = maybe(a->model_extra);
    if (extra != NULL)
        json_object_update(model, extra);
    json_t *limits = maybe(a->limits), *functions = maybe(a->functions), *output = maybe(a->output),
           *tools = tools_json(), *mocks = maybe(a->mock_tools), *results = maybe(a->tool_results);
    struct evd_harness_input in = {
        .session_id = a->session ? a->session : "sess-it",
        .prompt = a->prompt ? a->prompt : "Hi",
        .system_prompt = a->system_prompt,
        .model = model,
        .limits = limits,
        .functions = functions,
        .output = output,
        .tools = tools,
        .conversation = a->conversation,
        .dispatch = a->dispatch,
        .mock_tools = mocks,
        .tool_results = results,
    };
    struct evd_err err;
    ck_assert_int_eq(
        evd_harness_run(a->providers ? a->providers : hl_providers, &in, cancel, out, &err),
        EVD_OK);
    json_decref(model);
    json_decref(extra);
    json_decref(limits);
    json_decref(functions);
    json_decref(output);
    json_decref(tools);
    json_decref(mocks);
    json_decref(results);
}

json_t *hl_last_requests(int n)
{
    json_t *r = evd_t_stub_requests(&hl_stub, n);
    ck_assert_ptr_nonnull(r);
    json_t *arr = json_incref(json_object_get(r, "requests"));
    json_decref(r);
    return arr;
}

double hl_price(int64_t in, int64_t cached, int64_t write, int64_t o)
{
    return ((double)in * 1 + (double)cached * 0.5 + (double)write * 2 + (double)o * 10) / 1e6;
}

void hl_assert_completed(const struct evd_harness_outcome *o)
{
    ck_assert_msg(o->status == EVD_HARNESS_COMPLETED, "status %s: %s",
                  evd_harness_status_name(o->status), o->result_error ? o->result_error : "");
}
