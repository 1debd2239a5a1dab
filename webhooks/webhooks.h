/*
 * Signed webhooks of evaluation.completed (eval::completed) and experiment.completed:
 * subscriptions (what the handlers call) and the delivery threads that drain the
 * PostgreSQL outbox. The engine records each completion event in the transaction that
 * makes an evaluation or experiment terminal and notifies EVD_CHANNEL_COMPLETED;
 * delivery threads fan the event out to the subscriptions that asked for its type, then
 * POST it, signed, with retries and backoff for at least 24 hours.
 * See docs/webhooks.md for the protocol and the secret handling.
 *
 * Thread-safety: every function may be called from any thread once started (they
 * borrow pool connections); start/stop from main only.
 */
#ifndef EVD_WEBHOOKS_WEBHOOKS_H
#define EVD_WEBHOOKS_WEBHOOKS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

struct evd_db;
struct evd_webhooks;

/* Retries stop once a delivery is older than this and its latest attempt failed. */
#define EVD_WEBHOOK_RETRY_WINDOW_MS (24LL * 3600 * 1000)
#define EVD_WEBHOOK_BACKOFF_CAP_MS (3600LL * 1000)
#define EVD_WEBHOOK_TIMEOUT_MS 10000L

struct evd_webhooks_options {
    const char *conninfo;    /* for the delivery threads' own connections */
    struct evd_db *db;       /* pool for the subscription calls */
    const char *allow_hosts; /* EVALD_WEBHOOK_ALLOW_HOSTS, NULL = unset */
    const char *secret_key;  /* EVALD_SECRET_KEY (64 hex), NULL = unset (borrowed) */
    long workers;            /* delivery threads; 0 = this process delivers nothing */
    long backoff_ms;         /* first retry delay; doubles up to EVD_WEBHOOK_BACKOFF_CAP_MS */
    long poll_ms;            /* fallback poll when no notification arrives */
};

/*
 * Parses the policy and the key, and starts the delivery threads (none without a
 * key: the secrets cannot be opened). NULL + err (EVD_EINVAL for a bad allowlist).
 * The key is copied; opts->secret_key may be wiped afterwards.
 */
struct evd_webhooks *evd_webhooks_start(const struct evd_webhooks_options *opts,
                                        struct evd_err *err);
/* Begins stopping: in-flight attempts are aborted and handed back. NULL-safe. */
void evd_webhooks_signal_stop(struct evd_webhooks *w);
/* Joins the threads and frees everything. NULL-safe. */
void evd_webhooks_stop(struct evd_webhooks *w);

/*
 * Subscriptions. `request` is borrowed; on EVD_OK *response is a new reference:
 * SubscriptionV1 for create/get, {subscriptions:[…]} for list, {deliveries:[…],
 * next_cursor?} for deliveries. Create answers EVD_EINVAL naming the field for bad
 * input (nothing is written), EVD_EUNAVAIL without EVALD_SECRET_KEY. Unknown ids
 * are EVD_ENOTFOUND. The secret is never part of any response or message.
 */
enum evd_code evd_webhooks_subscribe(struct evd_webhooks *w, json_t *request, json_t **response,
                                     struct evd_err *err);
enum evd_code evd_webhooks_list(struct evd_webhooks *w, json_t **response, struct evd_err *err);
enum evd_code evd_webhooks_get(struct evd_webhooks *w, const char *id, json_t **response,
                               struct evd_err *err);
enum evd_code evd_webhooks_delete(struct evd_webhooks *w, const char *id, struct evd_err *err);
/* `limit` 0 = the default (50); 1..100 otherwise. `before` may be NULL. */
enum evd_code evd_webhooks_deliveries(struct evd_webhooks *w, const char *id, long limit,
                                      const char *before, json_t **response, struct evd_err *err);

/*
 * Checks the `events` member of a subscription request (borrowed; NULL when absent):
 * a non-empty array of distinct known event types (evaluation.completed,
 * experiment.completed), without experiment.completed when `has_evaluation_id` (an
 * evaluation filter matches evaluation events only). EVD_EINVAL naming `events` (and the
 * offending index) otherwise. Pure.
 */
enum evd_code evd_webhook_events_check(const json_t *events, bool has_evaluation_id,
                                       struct evd_err *err);

/*
 * Backoff before retry number `attempt` + 1 after `attempt` failures (attempt >= 1):
 * base·2^(attempt-1) capped at EVD_WEBHOOK_BACKOFF_CAP_MS, then scaled by a jitter
 * factor in [0.75, 1.25) taken from `r` in [0, 1).
 */
long evd_webhook_backoff_ms(long base_ms, int attempt, double r);

#endif
