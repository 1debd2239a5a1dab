/*
 * Shared setup of the webhook suites (tests/integration/test_webhooks*.c): a throwaway
 * PostgreSQL database per test (the checked fixture wh_setup/wh_teardown), the
 * environment of an evald that talks to evald-stub and may call a local receiver
 * (webhooks_receiver.h), and the API calls those suites make: subscriptions, an
 * evaluation and its wait, a subscription's deliveries, counts in SQL. Every helper fails
 * the running Check test when something is off. Meant for one thread.
 */
#ifndef EVD_TESTS_WEBHOOKS_SUPPORT_H
#define EVD_TESTS_WEBHOOKS_SUPPORT_H

#include <jansson.h>
#include <stddef.h>

#include "tests/support/itest.h"
#include "tests/support/webhooks_receiver.h"

/* EVALD_SECRET_KEY of the processes these suites start, and the subscriptions' secret
 * (the word "Canary" in it is what the suites look for where it must not be). */
#define WH_KEY_HEX "8d1f0c2b3a4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8"
#define WH_SECRET "whsec-Canary-9f8e7d6c5b4a3210"

/* The current test's database, made by wh_setup and dropped by wh_teardown. */
extern char wh_db_url[1024];
extern char wh_db_name[64];
void wh_setup(void);
void wh_teardown(void);

/* Extra environment of an evald: v is NULL-terminated, its strings live in store. */
struct wh_env {
    char *v[24];
    char store[24][1200];
    size_t n;
};

void wh_env_add(struct wh_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The environment of an evald that talks to `stub` and may call the receiver, in this
 * order (tests replace or drop entries by index): OPENAI_BASE_URL, OPENAI_API_KEY,
 * EVALD_WORKERS=2, EVALD_WEBHOOK_ALLOW_HOSTS=127.0.0.1, EVALD_WEBHOOK_BACKOFF_MS=100,
 * EVALD_SECRET_KEY=WH_KEY_HEX. */
void wh_base_env(struct wh_env *e, const struct evd_t_proc *stub);
/* Starts evald on wh_db_url with `e`; dumps its log and fails when it does not start. */
void wh_start_evald(struct evd_t_proc *p, struct wh_env *e);

/* `method` `path` on evald `p`: the JSON answer (new reference or NULL), status in *status. */
json_t *wh_call(const struct evd_t_proc *p, const char *method, const char *path, const char *body,
                long *status);
/* POST /v1/subscriptions for http://127.0.0.1:<receiver port><path> with WH_SECRET, for
 * every evaluation or only `evaluation_id`; expects 201. New reference. */
json_t *wh_subscribe(const struct evd_t_proc *p, struct evd_t_receiver *r, const char *path,
                     const char *evaluation_id);
/* Starts an evaluation of stub-model (one run, a normalized_text evaluator); writes its
 * id into id[64]. */
void wh_start_eval(const struct evd_t_proc *p, char *id);
/* Waits until the evaluation is terminal; returns its status (static buffer). */
const char *wh_wait_terminal(const struct evd_t_proc *p, const char *id, int timeout_ms);
/* GET /v1/subscriptions/{id}/deliveries (new reference to the deliveries array). */
json_t *wh_deliveries(const struct evd_t_proc *p, const char *sub_id);
/* The number the SQL query (a count) returns on wh_db_url. */
long long wh_sql_count(const char *sql);

/* Member `k` of `o` as a string (or NULL) / an integer (or 0). */
const char *wh_jstr(json_t *o, const char *k);
long long wh_jint(json_t *o, const char *k);

/* Checks the request is the evaluation.completed delivery of `evaluation_id`. */
void wh_assert_event_body(const struct evd_t_hook *h, const char *evaluation_id);

#endif
