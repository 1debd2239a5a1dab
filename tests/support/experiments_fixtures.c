/* See experiments_fixtures.h. */
#include "tests/support/experiments_fixtures.h"

#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char xt_db_url[1024];
static char db_name[64];
struct evd_t_proc xt_stub;
struct evd_t_proc xt_evald;
static char env_base[300];

#define U_C "\"usage\":{\"input_tokens\":10,\"output_tokens\":2}" /* control: 12 tokens */
#define U_T "\"usage\":{\"input_tokens\":10,\"output_tokens\":4}" /* treatment: 14 tokens */
#define LAT "\"latency_ms\":100,"

/* The script of experiments_fixtures.h. */
static const char SCRIPT[] =
    "{\"rules\":["
    "{\"when\":{\"prompt_contains\":\"slow \"},\"latency_ms\":5000,\"reply\":{\"text\":\"late\"}},"
    "{\"when\":{\"prompt_contains\":\"treatment q1:\"},\"times\":1," LAT
    "\"reply\":{\"text\":\"yes\"}," U_T "},"
    "{\"when\":{\"prompt_contains\":\"control q2:\"},\"times\":1," LAT
    "\"reply\":{\"text\":\"yes\"}," U_C "},"
    "{\"when\":{\"prompt_contains\":\"treatment q2:\"}," LAT "\"reply\":{\"text\":\"yes\"}," U_T
    "},"
    "{\"when\":{\"prompt_contains\":\"treatment q3:\"}," LAT "\"reply\":{\"text\":\"yes\"}," U_T
    "},"
    "{\"when\":{\"prompt_contains\":\"control q4:\"},\"times\":1," LAT
    "\"reply\":{\"text\":\"no\"}," U_C "},"
    "{\"when\":{\"prompt_contains\":\"control q4:\"}," LAT "\"reply\":{\"text\":\"yes\"}," U_C "},"
    "{\"when\":{\"prompt_contains\":\"treatment q4:\"}," LAT "\"reply\":{\"text\":\"yes\"}," U_T
    "},"
    "{\"when\":{\"prompt_contains\":\"control q5:\"}," LAT "\"reply\":{\"text\":\"yes\"}," U_C "},"
    "{\"when\":{\"prompt_contains\":\"treatment q5:\"}," LAT "\"reply\":{\"text\":\"yes\"}," U_T
    "},"
    "{\"when\":{\"prompt_contains\":\"treatment \"}," LAT "\"reply\":{\"text\":\"no\"}," U_T "},"
    "{\"when\":{\"prompt_contains\":\"control \"}," LAT "\"reply\":{\"text\":\"no\"}," U_C "}"
    "]}";

const char xt_full[] = "{\"name\":\"hand-worked\",\"dimension\":\"prompt\"," MODEL "," ARMS
                       "," EXACT ",\"repeats\":2,\"concurrency\":5,"
                       "\"analysis\":{\"alpha\":0.05,\"min_effect\":0.1},"
                       "\"cases\":" FIVE_CASES "}";

void xt_start_evald(char *const extra[])
{
    char *env[16] = {env_base,
                     "OPENAI_API_KEY=stub-key",
                     "EVALD_SWEEP_INTERVAL_MS=300",
                     "EVALD_LEASE_MS=1500",
                     "EVALD_MAX_RUNS=5",
                     "EVALD_MAX_EXPERIMENT_RUNS=60",
                     "EVALD_MAX_DATASET_CASES=50",
                     "EVALD_MAX_DATASET_BYTES=65536"};
    size_t n = 8;
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 15; i++)
        env[n++] = extra[i];
    env[n] = NULL;
    ck_assert_int_eq(evd_t_evald_start(&xt_evald, xt_db_url, env), 0);
}

void xt_setup(void)
{
    evd_t_db_create(xt_db_url, sizeof(xt_db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&xt_stub, SCRIPT, NULL), 0);
    snprintf(env_base, sizeof(env_base), "OPENAI_BASE_URL=%s/v1", xt_stub.base);
    xt_start_evald(NULL);
}

void xt_teardown(void)
{
    evd_t_stop(&xt_evald, SIGTERM, 10000);
    evd_t_stop(&xt_stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
}

void xt_request(const char *method, const char *path, const char *ct, const char *body, size_t len,
                struct evd_t_resp *r)
{
    char url[1024], hdr[160];
    snprintf(url, sizeof(url), "%s%s", xt_evald.base, path);
    snprintf(hdr, sizeof(hdr), "Content-Type: %s", ct ? ct : "application/json");
    const char *headers[] = {hdr, NULL};
    evd_t_http(method, url, body ? headers : NULL, body, len, r);
}

json_t *xt_call(const char *method, const char *path, const char *body, long *status)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s%s", xt_evald.base, path);
    return evd_t_http_json(method, url, body, status);
}

char *xt_start(const char *body)
{
    struct evd_t_resp r;
    xt_request("POST", "/v1/experiments", NULL, body, strlen(body), &r);
    if (r.status != 202)
        evd_t_dump_log(&xt_evald);
    ck_assert_msg(r.status == 202, "start answered %ld: %s", r.status, r.body);
    const char *id = json_string_value(json_object_get(r.json, "experiment_id"));
    ck_assert_ptr_nonnull(id);
    ck_assert_uint_eq(strlen(id), 36);
    ck_assert(strncmp(id, "exp_", 4) == 0);
    ck_assert_str_eq(json_string_value(json_object_get(r.json, "status")), "queued");
    char loc[128];
    snprintf(loc, sizeof(loc), "/v1/experiments/%s", id);
    ck_assert_str_eq(r.location, loc);
    char *out = strdup(id);
    evd_t_resp_free(&r);
    return out;
}

json_t *xt_at(json_t *v, const char *dotted)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", dotted);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(k)) : json_object_get(v, k);
    return v;
}

long xt_count_rows(const char *table)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
    char *n = evd_t_sql(xt_db_url, sql);
    ck_assert_ptr_nonnull(n);
    long v = atol(n);
    free(n);
    return v;
}

size_t xt_list_size(const char *path, const char *member)
{
    long st = 0;
    json_t *j = xt_call("GET", path, NULL, &st);
    ck_assert_msg(st == 200, "GET %s answered %ld", path, st);
    size_t n = json_array_size(json_object_get(j, member));
    json_decref(j);
    return n;
}

json_t *xt_wait_done(const char *id, int timeout_ms)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    for (int waited = 0;; waited += 100) {
        long st = 0;
        json_t *doc = xt_call("GET", path, NULL, &st);
        ck_assert_int_eq(st, 200);
        const char *s = json_string_value(json_object_get(doc, "status"));
        if (strcmp(s, "completed") == 0 || strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0)
            return doc;
        json_decref(doc);
        if (waited > timeout_ms) {
            evd_t_dump_log(&xt_evald);
            ck_abort_msg("experiment %s still %s", id, s);
        }
        usleep(100 * 1000);
    }
}

long xt_sql_long(const char *fmt, ...)
{
    char sql[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof(sql), fmt, ap);
    va_end(ap);
    char *v = evd_t_sql(xt_db_url, sql);
    ck_assert_ptr_nonnull(v);
    long n = atol(v);
    free(v);
    return n;
}

char *xt_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    ck_assert_int_ge(n, 0);
    char *out = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(out);
    va_start(ap, fmt);
    vsnprintf(out, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return out;
}
