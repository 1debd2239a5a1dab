/* See engine_fixtures.h. */
#define _GNU_SOURCE /* asprintf */
#include "tests/support/engine_fixtures.h"

#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char et_db_url[1024];
static char db_name[64];
struct evd_t_proc et_stub;
char et_env_base[300], et_env_key[] = "OPENAI_API_KEY=stub-key";

void et_setup(void)
{
    evd_t_db_create(et_db_url, sizeof(et_db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&et_stub, NULL, NULL), 0);
    snprintf(et_env_base, sizeof(et_env_base), "OPENAI_BASE_URL=%s/v1", et_stub.base);
}

void et_teardown(void)
{
    evd_t_stop(&et_stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
}

void et_start_evald(struct evd_t_proc *p, const char *extra1, const char *extra2)
{
    char *env[8] = {et_env_base, et_env_key, "EVALD_SWEEP_INTERVAL_MS=300", "EVALD_LEASE_MS=1500"};
    size_t n = 4;
    if (extra1)
        env[n++] = (char *)extra1;
    if (extra2)
        env[n++] = (char *)extra2;
    env[n] = NULL;
    ck_assert_int_eq(evd_t_evald_start(p, et_db_url, env), 0);
}

char *et_small_request(const char *tag, int runs, int concurrency)
{
    char *s = NULL;
    if (asprintf(&s,
                 "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
                 "\"openai\"},\"control\":{\"prompt\":\"%s control: Reply with exactly OK.\"},"
                 "\"treatment\":{\"prompt\":\"%s treatment: Reply with exactly OK.\"},"
                 "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":"
                 "{\"expected\":\"OK\"}},\"runs\":%d,\"concurrency\":%d}",
                 tag, tag, runs, concurrency) < 0)
        return NULL;
    return s;
}

char *et_start_eval(const char *base, const char *body)
{
    long status = 0;
    json_t *r = evd_t_call(base, "eval::start", body, &status);
    ck_assert_msg(status == 200, "eval::start answered %ld", status);
    ck_assert(evd_t_valid_response("eval::start", r));
    char *id = strdup(json_string_value(json_object_get(r, "evaluation_id")));
    json_decref(r);
    return id;
}

json_t *et_result_of(const char *base, const char *id)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"evaluation_id\":\"%s\"}", id);
    long status = 0;
    json_t *r = evd_t_call(base, "eval::result", body, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(evd_t_valid_response("eval::result", r));
    return r;
}

void et_wait_active(const char *base, const char *id)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/evaluations/%s/status", base, id);
    for (int i = 0; i < 200; i++) {
        long code;
        json_t *s = evd_t_http_json("GET", url, NULL, &code);
        bool active = json_is_object(json_object_get(s, "active"));
        json_decref(s);
        if (active)
            return;
        usleep(50000);
    }
    ck_abort_msg("evaluation %s never had an active run", id);
}
