/*
 * Cancel token: a flag that one thread triggers and others poll or sleep on, with an
 * optional deadline on the monotonic clock from which it counts as triggered. Shared by
 * every layer that calls out and must stop when told (the harness, the engine, the iii
 * adapter). Thread-safe: any thread may trigger, poll, move the deadline or sleep on a
 * token; only its owner frees it, after every user is done.
 */
#ifndef EVD_COMMON_CANCEL_H
#define EVD_COMMON_CANCEL_H

#include <stdbool.h>
#include <stdint.h>

struct evd_cancel;

/* A new, untriggered token, or NULL when out of memory. Free with evd_cancel_free. */
struct evd_cancel *evd_cancel_new(void);
/* Triggers the token from any thread; wakes backoff sleeps. Idempotent. */
void evd_cancel_trigger(struct evd_cancel *c);
/* True once triggered or once its deadline has passed; NULL-safe (a NULL token is never
 * triggered). */
bool evd_cancel_is_set(const struct evd_cancel *c);
/* From evd_mono_ms() >= mono on (0: never), the token counts as triggered. Moves the
 * deadline, earlier or later, unless the token is already triggered or past its deadline
 * (then false: a deadline missed is never undone). */
bool evd_cancel_set_deadline(struct evd_cancel *c, int64_t mono);
/*
 * Sleeps up to ms milliseconds, returning early (true) when the token is triggered.
 * Returns false after a full sleep. A NULL token just sleeps.
 */
bool evd_cancel_sleep(struct evd_cancel *c, int64_t ms);
/*
 * A waker: fn(arg) is called (under the token's lock, so it must only signal, as
 * curl_multi_wakeup does) when the token is triggered or its deadline moves, so that a
 * thread blocked in a poll of its own need not wake up just to look at the token. The
 * caller owns the node and removes it before it goes away; after evd_cancel_unwatch
 * returns, fn is not called again.
 */
struct evd_cancel_waker {
    void (*fn)(void *arg);
    void *arg;
    struct evd_cancel_waker *next;
};
/* Adds w (NULL-safe for c). The token may already be triggered: look after adding. */
void evd_cancel_watch(struct evd_cancel *c, struct evd_cancel_waker *w);
void evd_cancel_unwatch(struct evd_cancel *c, struct evd_cancel_waker *w);
/* The token's deadline (monotonic ms), 0 when it has none; NULL-safe. */
int64_t evd_cancel_deadline(const struct evd_cancel *c);

/* Frees the token; no run may still use it. NULL-safe. */
void evd_cancel_free(struct evd_cancel *c);

#endif
