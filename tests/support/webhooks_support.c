/*
 * The shared setup and API calls of the webhook suites; see webhooks_support.h. Each
 * fails the running Check test with ck_assert, so they are called only from inside a
 * test or its fixture.
 */
#include "tests/support/webhooks_support.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

char wh_db_url[1024];
char wh_db_name[64];

void wh_setup(void)
{
    evd_t_db_create(wh_db_url, sizeof(wh_db_url), wh_db_name);
}

void wh_teardown(void)
{
    evd_t_db_drop(wh_db_name);
}

void wh_env_add(struct wh_env *e, const char *fmt, ...)
{
    ck_assert(e->n + 1 < sizeof(e->v) / sizeof(e->v[0]));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->store[e->n], sizeof(e->store[0]), fmt, ap);
    va_end(ap);
    e->v[e->n] = e->store[e->n];
    e->v[++e->n] = NULL;
}

/* The environment of an evald that talks to `stub` and may call the receiver. */
void wh_base_env(struct wh_env *e, const struct evd_t_proc *stub)
{
    memset(e, 0, sizeof(*e));
    wh_env_add(e, "OPENAI_BASE_URL=%s/v1", stub->base);
    wh_env_add(e, "OPENAI_API_KEY=stub-key");
    wh_env_add(e, "EVALD_WORKERS=2");
    wh_env_add(e, "EVALD_WEBHOOK_ALLOW_HOSTS=127.0.0.1");
    wh_env_add(e, "EVALD_WEBHOOK_BACKOFF_MS=100");
    wh_env_add(e, "EVALD_SECRET_KEY=" WH_KEY_HEX);
}

void wh_start_evald(struct evd_t_proc *p, struct wh_env *e)
{
    int rc = evd_t_evald_start(p, wh_db_url, e->v);
    if (rc != 0)
        evd_t_dump_log(p);
    ck_assert_int_eq(rc, 0);
}

json_t *wh_call(const struct evd_t_proc *p, const char *method, const char *path, const char *body,
                long *status)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s%s", p->base, path);
    return evd_t_http_json(method, url, body, status);
}

json_t *wh_subscribe(const struct evd_t_proc *p, struct evd_t_receiver *r, const char *path,
                     const char *evaluation_id)
{
    char body[512];
    if (evaluation_id)
        snprintf(body, sizeof(body),
                 "{\"url\":\"http://127.0.0.1:%u%s\",\"secret\":\"" WH_SECRET "\","
                 "\"evaluation_id\":\"%s\"}",
                 evd_t_receiver_port(r), path, evaluation_id);
    else
        snprintf(body, sizeof(body),
                 "{\"url\":\"http://127.0.0.1:%u%s\",\"secret\":\"" WH_SECRET "\"}",
                 evd_t_receiver_port(r), path);
    long status = 0;
    json_t *sub = wh_call(p, "POST", "/v1/subscriptions", body, &status);
    ck_assert_msg(status == 201, "subscribe: %ld", status);
    ck_assert(strncmp(json_string_value(json_object_get(sub, "subscription_id")), "sub_", 4) == 0);
    return sub;
}

static const char EVAL_REQUEST[] =
    "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
    "\"control\":{\"label\":\"reply\",\"prompt\":\"Reply with exactly OK.\","
    "\"system_prompt\":\"Follow the user request exactly.\"},"
    "\"treatment\":{\"label\":\"return\",\"prompt\":\"Return exactly the text OK.\","
    "\"system_prompt\":\"Follow the user request exactly.\"},"
    "\"evaluator\":{\"function_id\":\"eval::assert::normalized_text\","
    "\"arguments\":{\"expected\":\"OK\"}},\"runs\":1}";

/* Starts an evaluation; writes its id into id[64]. */
void wh_start_eval(const struct evd_t_proc *p, char *id)
{
    long status = 0;
    json_t *out = wh_call(p, "POST", "/v1/evaluations", EVAL_REQUEST, &status);
    ck_assert_msg(status == 202, "start: %ld", status);
    snprintf(id, 64, "%s", json_string_value(json_object_get(out, "evaluation_id")));
    json_decref(out);
    ck_assert(strncmp(id, "eval_", 5) == 0);
}

/* Waits until the evaluation is terminal; returns its status (static buffer). */
const char *wh_wait_terminal(const struct evd_t_proc *p, const char *id, int timeout_ms)
{
    static char st[32];
    char path[160];
    snprintf(path, sizeof(path), "/v1/evaluations/%s/status", id);
    int64_t deadline = evd_mono_ms() + timeout_ms;
    while (evd_mono_ms() < deadline) {
        long status = 0;
        json_t *s = wh_call(p, "GET", path, NULL, &status);
        snprintf(st, sizeof(st), "%s", json_string_value(json_object_get(s, "status")) ?: "");
        json_decref(s);
        if (strcmp(st, "completed") == 0 || strcmp(st, "failed") == 0 ||
            strcmp(st, "cancelled") == 0)
            return st;
        usleep(50 * 1000);
    }
    evd_t_dump_log(p);
    ck_abort_msg("evaluation %s did not finish (last status %s)", id, st);
    return NULL;
}

/* GET /v1/subscriptions/{id}/deliveries (new reference to the deliveries array). */
json_t *wh_deliveries(const struct evd_t_proc *p, const char *sub_id)
{
    char path[160];
    snprintf(path, sizeof(path), "/v1/subscriptions/%s/deliveries", sub_id);
    long status = 0;
    json_t *out = wh_call(p, "GET", path, NULL, &status);
    ck_assert_int_eq(status, 200);
    json_t *list = json_incref(json_object_get(out, "deliveries"));
    json_decref(out);
    ck_assert(json_is_array(list));
    return list;
}

long long wh_sql_count(const char *sql)
{
    char *v = evd_t_sql(wh_db_url, sql);
    ck_assert_ptr_nonnull(v);
    long long n = atoll(v);
    free(v);
    return n;
}

const char *wh_jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

long long wh_jint(json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

/* Checks the body is the eval::completed payload of `evaluation_id`. */
void wh_assert_event_body(const struct evd_t_hook *h, const char *evaluation_id)
{
    json_error_t jerr;
    json_t *b = json_loads(h->body, 0, &jerr);
    ck_assert_msg(b != NULL, "body is not JSON: %s", h->body);
    ck_assert_str_eq(wh_jstr(b, "evaluation_id"), evaluation_id);
    ck_assert_str_eq(wh_jstr(b, "status"), "completed");
    ck_assert(json_is_integer(json_object_get(b, "timestamp")));
    ck_assert_int_gt(wh_jint(b, "timestamp"), 1700000000000LL);
    ck_assert(json_is_boolean(json_object_get(b, "eligible")));
    ck_assert_uint_le(json_object_size(b), 4);
    json_decref(b);
    ck_assert_str_eq(h->method, "POST");
    ck_assert_str_eq(h->content_type, "application/json");
    ck_assert(strncmp(h->event_id, "evt_", 4) == 0 && strlen(h->event_id) == 36);
    ck_assert(strncmp(h->delivery_id, "dlv_", 4) == 0 && strlen(h->delivery_id) == 36);
    ck_assert_str_eq(h->event_type, "evaluation.completed");
}
