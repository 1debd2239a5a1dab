/* The fixture of the agent suites; see agents_fixture.h. */
#include "tests/support/agents_fixture.h"

#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/experiments_fixtures.h"
#include "tests/support/harness_support.h"
#include "tests/support/itest.h"

char at_db_url[1024];
static char db_name[64];
static char providers_path[64];
struct evd_t_proc at_stub, at_evald;

static char env_file[128], env_openai[300];

/* evald on the test's database and the stub, with short leases (a killed process's runs
 * are taken over within seconds). */
void at_start_evald(void)
{
    char *env[] = {env_file,
                   env_openai,
                   "OPENAI_API_KEY=stub-key",
                   "EVALD_SWEEP_INTERVAL_MS=300",
                   "EVALD_LEASE_MS=1500",
                   NULL};
    ck_assert_int_eq(evd_t_evald_start(&at_evald, at_db_url, env), 0);
}

void at_setup(void)
{
    evd_t_db_create(at_db_url, sizeof(at_db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&at_stub, NULL, NULL), 0);
    ck_assert(hs_tools_start());
    snprintf(providers_path, sizeof(providers_path), "/tmp/evald-providers-XXXXXX");
    int fd = mkstemp(providers_path);
    ck_assert_int_ge(fd, 0);
    char doc[1024];
    int n = snprintf(doc, sizeof(doc),
                     "{\"providers\":["
                     "{\"name\":\"resp\",\"kind\":\"openai-responses\",\"base_url\":\"%s/v1\"},"
                     "{\"name\":\"msgs\",\"kind\":\"anthropic-messages\",\"base_url\":\"%s\"},"
                     "{\"name\":\"chat\",\"kind\":\"openai-chat\",\"base_url\":\"%s/v1\"}]}",
                     at_stub.base, at_stub.base, at_stub.base);
    ck_assert_int_eq(write(fd, doc, (size_t)n), n);
    close(fd);
    snprintf(env_file, sizeof(env_file), "EVALD_PROVIDERS_FILE=%s", providers_path);
    snprintf(env_openai, sizeof(env_openai), "OPENAI_BASE_URL=%s/v1", at_stub.base);
    at_start_evald();
}

void at_teardown(void)
{
    evd_t_stop(&at_evald, SIGTERM, 10000);
    hs_tools_stop();
    evd_t_stop(&at_stub, SIGTERM, 5000);
    unlink(providers_path);
    evd_t_db_drop(db_name);
}

json_t *at_call(const char *method, const char *path, const char *body, long *status)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", at_evald.base, path);
    return evd_t_http_json(method, url, body, status);
}

const char *at_str(json_t *v, const char *dotted)
{
    const char *s = json_string_value(xt_at(v, dotted));
    return s != NULL ? s : "(none)";
}

char *at_start_experiment(const char *body)
{
    long status = 0;
    json_t *r = at_call("POST", "/v1/experiments", body, &status);
    if (status != 202)
        evd_t_dump_log(&at_evald);
    ck_assert_msg(status == 202, "start answered %ld: %s", status, at_str(r, "detail"));
    char *id = strdup(at_str(r, "experiment_id"));
    json_decref(r);
    return id;
}

json_t *at_wait_done(const char *id, int timeout_ms)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    for (int waited = 0;; waited += 100) {
        long st = 0;
        json_t *doc = at_call("GET", path, NULL, &st);
        ck_assert_int_eq(st, 200);
        const char *s = at_str(doc, "status");
        if (strcmp(s, "completed") == 0 || strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0)
            return doc;
        json_decref(doc);
        if (waited > timeout_ms) {
            evd_t_dump_log(&at_evald);
            ck_abort_msg("experiment %s still %s", id, s);
        }
        usleep(100 * 1000);
    }
}

json_t *at_runs_of(const char *id)
{
    char path[160];
    snprintf(path, sizeof(path), "/v1/experiments/%s/runs?limit=100", id);
    long st = 0;
    json_t *page = at_call("GET", path, NULL, &st);
    ck_assert_int_eq(st, 200);
    json_t *runs = json_incref(json_object_get(page, "runs"));
    json_decref(page);
    return runs;
}

/* Uploads JSONL cases as dataset `name`; its id (malloc'd). */
char *at_upload_jsonl(const char *name, const char *jsonl)
{
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/datasets?name=%s", at_evald.base, name);
    const char *headers[] = {"Content-Type: application/x-ndjson", NULL};
    struct evd_t_resp r;
    evd_t_http("POST", url, headers, jsonl, strlen(jsonl), &r);
    ck_assert_msg(r.status == 201, "upload answered %ld: %s", r.status, r.body);
    char *id = strdup(at_str(r.json, "dataset_id"));
    evd_t_resp_free(&r);
    return id;
}

/* The text of a wire message's content: a string, or its text parts joined. */
static void content_text(const json_t *content, char *out, size_t n)
{
    out[0] = '\0';
    if (json_is_string(content)) {
        snprintf(out, n, "%s", json_string_value(content));
        return;
    }
    size_t i, len = 0;
    const json_t *part;
    json_array_foreach(content, i, part)
    {
        const char *t = json_string_value(json_object_get(part, "text"));
        if (t != NULL && len < n)
            len += (size_t)snprintf(out + len, n - len, "%s", t);
    }
}

/*
 * The conversation a provider request carries, as "role: text" lines (system messages
 * and instructions left out): Responses `input`, Chat and Messages `messages`.
 */
char *at_wire_conversation(const json_t *body)
{
    const json_t *items = json_object_get(body, "input");
    if (items == NULL)
        items = json_object_get(body, "messages");
    char *out = calloc(1, 8192);
    size_t len = 0, i;
    const json_t *m;
    json_array_foreach(items, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role == NULL || strcmp(role, "system") == 0 || strcmp(role, "developer") == 0)
            continue;
        char text[1024];
        content_text(json_object_get(m, "content"), text, sizeof(text));
        len += (size_t)snprintf(out + len, 8192 - len, "%s: %s\n", role, text);
    }
    return out;
}

/* A stub log entry's body (new reference). */
json_t *at_request_body(const json_t *req)
{
    const json_t *b = json_object_get(req, "body");
    if (json_is_string(b))
        return json_loads(json_string_value(b), 0, NULL);
    return json_incref((json_t *)b);
}

/* The run of arm `arm` on case `case_id` among runs (borrowed). */
json_t *at_run_at(json_t *runs, const char *case_id, int arm)
{
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r)
    {
        if (strcmp(at_str(r, "case_id"), case_id) == 0 &&
            json_integer_value(json_object_get(r, "arm")) == arm)
            return r;
    }
    ck_abort_msg("no run of arm %d on %s", arm, case_id);
    return NULL;
}

void at_put_echo_tool(const char *id)
{
    char tool[512], path[160];
    snprintf(tool, sizeof(tool),
             "{\"description\":\"echo\",\"url\":\"%s/echo\",\"timeout_ms\":5000,"
             "\"request_schema\":{\"type\":\"object\"}}",
             hs_tools_base());
    snprintf(path, sizeof(path), "/v1/tools/%s", id);
    long status = 0;
    json_decref(at_call("PUT", path, tool, &status));
    ck_assert_msg(status == 201, "PUT %s answered %ld", path, status);
}

/* The text of a file of the source tree (malloc'd). */
char *at_source_file(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", evd_t_source_dir(), rel);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

